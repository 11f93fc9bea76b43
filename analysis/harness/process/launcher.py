"""Python side of the trial launcher (launcher.c beside it) and the resolution check (mallocwho.c)."""
import json
import os
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from analysis.errors import HeapcostError
from analysis.harness.process.build import build_c


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


# the C sources beside this module: the launcher, the resolution check, and the child I/O the campaigns' drivers
# (lockstep.c, alternate.c) share with the launcher
HERE = Path(__file__).resolve().parent
CHILD_IO = HERE / "child_io.h"


@lru_cache(maxsize=None)
def launcher_path() -> Path:
    return build_c("heapcost-run", [HERE / "launcher.c", CHILD_IO])


@lru_cache(maxsize=None)
def mallocwho_path(variant: str = "glibc") -> Path:
    return build_c("mallocwho", [HERE / "mallocwho.c"], shared=True, ldflags=["-ldl"], variant=variant)


def calibrate(seconds: float) -> int:
    """Iterations of the launcher's spin loop that take about `seconds` on this machine now."""
    out = subprocess.run([str(launcher_path()), "--calibrate", str(seconds)], capture_output=True, text=True,
                         check=True).stdout
    return int(out.strip())


class _Server:
    """One long-lived launcher (--serve) per Python process: a trial then costs a pipe round trip
    instead of starting a launcher process (about 2 ms less per trial)."""

    def __init__(self):
        self.proc = None

    def request(self, args: list[str]) -> str:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen([str(launcher_path()), "--serve"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, env={"PATH": "/usr/local/bin:/usr/bin:/bin"})
        payload = b"".join(a.encode() + b"\0" for a in args) + b"\0"
        try:
            self.proc.stdin.write(payload)
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError) as exc:
            self.proc = None
            raise HeapcostError(f"the launcher died: {exc}") from None
        if not line:
            self.proc = None
            raise HeapcostError("the launcher died without a result")
        return line.decode()


_server = _Server()
_DEFAULTS = {f: None for f in ("exit_code", "signal", "probe_before_s", "probe_after_s", "error")}
_DEFAULTS.update({f: 0 for f in ("wall_s", "user_s", "sys_s", "maxrss_kb", "minflt", "majflt", "nvcsw", "nivcsw")})


def run(argv, *, env, stdout=None, stderr=None, stdin=None, timeout=None, probe_iters=0, cwd=None,
        cpu_limit=None, as_limit=None, fsize_limit=None, wrapper=(), cpu=None) -> LaunchResult:
    """Run argv (no shell) as a child of the launcher, with exactly `env` as its environment (the
    launcher itself runs with PATH only, so nothing is preloaded into it).

    `wrapper` is prepended inside the child (e.g. valgrind), so its cost is part of the trial.
    `cpu` pins the child to that CPU, or to those CPUs when a list (sched_setaffinity before exec; see pinned for
    the rest).
    """
    if isinstance(cpu, (list, tuple)):
        cpu = ",".join(str(int(c)) for c in cpu)
    cmd = [str(launcher_path())]
    for flag, value in (("--stdout", stdout), ("--stderr", stderr), ("--stdin", stdin), ("--cwd", cwd),
                        ("--timeout", timeout), ("--cpu-limit", cpu_limit), ("--as-limit", as_limit),
                        ("--fsize-limit", fsize_limit), ("--cpu", cpu)):
        if value is not None:
            cmd += [flag, str(value)]
    if probe_iters:
        cmd += ["--probe-iters", str(int(probe_iters))]
    cmd.append("--clear-env")
    for key, value in env.items():
        if "\0" in f"{key}{value}":
            raise HeapcostError(f"environment variable {key!r} contains a NUL byte")
        cmd += ["--env", f"{key}={value}"]
    cmd += ["--", *map(str, wrapper), *map(str, argv)]
    line = _server.request(cmd[1:])
    try:
        return LaunchResult(**{**_DEFAULTS, **json.loads(line)})
    except (ValueError, TypeError) as exc:
        raise HeapcostError(f"launcher printed no result: {exc}") from None


@contextmanager
def pinned(trial_cpu: int | None):
    """While inside: this process (and the launcher server) runs on every allowed CPU but `trial_cpu`,
    where trials are pinned (`cpu=`). Yields what was done, for run.json's `pinning`; restores the
    affinity on leaving. None, or a one-CPU machine: nothing is pinned."""
    allowed = sorted(os.sched_getaffinity(0))
    if trial_cpu is None:
        yield {"trial_cpu": None, "harness_cpus": allowed, "note": "not pinned"}
        return
    if trial_cpu not in allowed:
        raise HeapcostError(f"CPU {trial_cpu} is not available to this process (allowed: {allowed})")
    others = [c for c in allowed if c != trial_cpu]
    if not others:
        yield {"trial_cpu": trial_cpu, "harness_cpus": allowed, "note": "one CPU only: the harness shares it"}
        return
    _set_affinity(others)
    try:
        yield {"trial_cpu": trial_cpu, "harness_cpus": others, "note": "trials pinned; the harness on the others"}
    finally:
        _set_affinity(allowed)


def _set_affinity(cpus) -> None:
    os.sched_setaffinity(0, cpus)
    if _server.proc is not None and _server.proc.poll() is None:
        try:
            os.sched_setaffinity(_server.proc.pid, cpus)
        except OSError:
            pass


def default_trial_cpu() -> int | None:
    """The CPU trials are pinned to by default: the last one this process may use (None: just one)."""
    allowed = sorted(os.sched_getaffinity(0))
    return allowed[-1] if len(allowed) > 1 else None


def parse_pin(value) -> int | None:
    """PIN: the CPU trials run on: auto (the last CPU when there are several), none, or a CPU number."""
    text = str(value if value not in (None, "") else "auto").strip().lower()
    if text == "auto":
        return default_trial_cpu()
    if text in ("none", "no", "0-"):
        return None
    try:
        cpu = int(text)
    except ValueError:
        cpu = -1
    if cpu < 0:
        raise HeapcostError(f"PIN must be auto, none or a CPU number, not {value!r}")
    return cpu
