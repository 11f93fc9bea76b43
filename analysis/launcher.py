"""Python side of the trial launcher (analysis/native/launcher.c) and the resolution check (mallocwho.c)."""
import json
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from analysis.errors import HeapcostError
from analysis.native import build_c
from analysis.paths import NATIVE_DIR


@dataclass(frozen=True)
class LaunchResult:
    status: str  # exited | signaled | timeout | spawn-failed
    exit_code: int | None
    signal: int | None
    wall_s: float
    user_s: float
    sys_s: float
    maxrss_kb: int
    minflt: int
    majflt: int
    nvcsw: int
    nivcsw: int
    probe_before_s: float | None
    probe_after_s: float | None
    error: str | None

    @property
    def clock_probe_s(self) -> float | None:
        if self.probe_before_s is None or self.probe_after_s is None:
            return None
        return (self.probe_before_s + self.probe_after_s) / 2


@lru_cache(maxsize=None)
def launcher_path() -> Path:
    return build_c("heapcost-run", [NATIVE_DIR / "launcher.c"])


@lru_cache(maxsize=None)
def mallocwho_path(variant: str = "glibc") -> Path:
    return build_c("mallocwho", [NATIVE_DIR / "mallocwho.c"], shared=True, ldflags=["-ldl"], variant=variant)


def calibrate(seconds: float) -> int:
    """Iterations of the launcher's spin loop that take about `seconds` on this machine now."""
    out = subprocess.run([str(launcher_path()), "--calibrate", str(seconds)], capture_output=True, text=True,
                         check=True).stdout
    return int(out.strip())


def run(argv, *, env, stdout=None, stderr=None, stdin=None, timeout=None, probe_iters=0, cwd=None,
        cpu_limit=None, as_limit=None, fsize_limit=None, wrapper=()) -> LaunchResult:
    """Run argv (no shell) as a child of the launcher, with exactly `env` as its environment (the
    launcher itself runs with PATH only, so nothing is preloaded into it).

    `wrapper` is prepended inside the child (e.g. valgrind), so its cost is part of the trial.
    """
    cmd = [str(launcher_path())]
    for flag, value in (("--stdout", stdout), ("--stderr", stderr), ("--stdin", stdin), ("--cwd", cwd),
                        ("--timeout", timeout), ("--cpu-limit", cpu_limit), ("--as-limit", as_limit),
                        ("--fsize-limit", fsize_limit)):
        if value is not None:
            cmd += [flag, str(value)]
    if probe_iters:
        cmd += ["--probe-iters", str(int(probe_iters))]
    cmd.append("--clear-env")
    for key, value in env.items():
        cmd += ["--env", f"{key}={value}"]
    cmd += ["--", *map(str, wrapper), *map(str, argv)]
    own_env = {"PATH": env.get("PATH", "/usr/local/bin:/usr/bin:/bin")}
    # The launcher's own timeout kills the trial; this one only guards against a hung launcher.
    guard = None if timeout is None else float(timeout) + 60
    proc = subprocess.run(cmd, env=own_env, capture_output=True, text=True, timeout=guard)
    if proc.returncode != 0:
        raise HeapcostError(f"launcher failed (exit {proc.returncode}): {proc.stderr.strip()[:200]}")
    try:
        return LaunchResult(**json.loads(proc.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError, TypeError) as exc:
        raise HeapcostError(f"launcher printed no result: {exc}") from None
