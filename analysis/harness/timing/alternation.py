"""Brought programs made to take turns from outside: two processes of one program (under allocators A and B) on
one CPU, continued and stopped in turn every ~1 ms by the driver `heapcost-alternate` (alternate.c beside it),
each started again when it ends, for a fixed window.

A brought program cannot call wl_turn() as the built-in C workloads do (lockstep.py), and by the trials protocol
its intervals are too wide to compare: one program's times under glibc alone spread 2.6x between the VM's
speed regimes. Alternated every slice, the two processes run in the same regimes, and each side's CPU time per
completed run compares them free of it. One window is one pair of pairs.csv: `active_x_s` is side x's CPU
seconds per completed run, `turns_x` its completed runs, `chunk_us` the slice; the paired estimator
(stats/paired.py) reads it as it reads a lockstep pair.

It applies to a program that runs one thread and does not wait: checked once per campaign by up to three runs
under the baseline (the one of median CPU time judges and sizes the window), read from the kernel's own
accounts so that a busy machine cannot change the verdict (`applies`): the whole process's CPU time (wait4)
against its main thread's (/proc/PID/schedstat, read while the process is a zombie), and its wall time against
the main thread's time on the CPU and waiting for it in the run queue.
CPU time outside the main thread means other threads (which would share the pair's one CPU: not the program as
it runs); wall time neither on the CPU nor queued for it means waits for I/O or sleep (a stopped process's
waits go on in the background, so its turns would not be comparable). Both keep the trials protocol, and
run.json says why (`alternation`).
"""
import json
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from analysis.errors import HeapcostError
from analysis.harness.process.build import build_c
from analysis.harness.process.launcher import _DEFAULTS, CHILD_IO, LaunchResult
from analysis.harness.process.trial import SpeedTrial, first_line, side_arguments
from analysis.harness.timing.driven_pair import run_driven_pair

SLICE_US = 1000          # each process's turn: about 1 ms of the CPU
# A window's length: at least MIN_WINDOW_S, and long enough for about RUNS_PER_WINDOW completed runs of each
# side. Short windows, many of them: an A/A window's ratio departs from one by a part shared by every run of that
# window (each side's runs keep their distance across restarts; perl's word count: 1.6-1.9% spread between
# windows at 3, 8 and 18 runs a side alike), so the interval narrows with the number of windows, not their length.
MIN_WINDOW_S = 0.5
RUNS_PER_WINDOW = 2
MAX_WINDOW_S = 20.0
# in turns longer than SLICE_US, a window lasts at least this many turns of each side, so that a window's ratio
# still compares the two in many of the machine's states
MIN_TURNS_PER_SIDE = 10
REFERENCE_RUNS, REFERENCE_CPU_S = 3, 2.0  # the reference runs that judge a program and size its window
# a program runs other threads when more than this share of its CPU time is outside its main thread, and waits
# when more than this share of its wall time (and at least WAITING_MIN_S) is neither on the CPU nor queued for it
OTHER_THREADS, WAITING, WAITING_MIN_S = 0.10, 0.15, 0.02


@lru_cache(maxsize=None)
def driver_path() -> Path:
    return build_c("heapcost-alternate", [Path(__file__).with_name("alternate.c"), CHILD_IO])


@dataclass(frozen=True)
class Fit:
    """Whether a brought program can take turns from outside, and the window its pairs get."""
    applies: bool
    why: str
    cpu_s: float        # one run's CPU time under the baseline, every thread
    wall_s: float
    window_s: float


def fit_from(cpu_s: float, main_run_s: float, main_queued_s: float, wall_s: float, status: str = "exited",
             exit_code: int | None = 0) -> Fit:
    """The verdict on one reference run (pure: the rules above)."""
    if status != "exited" or exit_code != 0:
        return Fit(False, f"its reference run did not end well ({status}, exit {exit_code})", cpu_s, wall_s, 0.0)
    others = max(0.0, cpu_s - main_run_s)
    if cpu_s > 0 and others > OTHER_THREADS * cpu_s:
        return Fit(False, f"it runs other threads ({100 * others / cpu_s:.0f}% of its CPU time outside its main "
                   "thread)", cpu_s, wall_s, 0.0)
    waiting = max(0.0, wall_s - main_run_s - main_queued_s)
    if wall_s > 0 and waiting > max(WAITING * wall_s, WAITING_MIN_S):
        return Fit(False, f"it waits for {100 * waiting / wall_s:.0f}% of its wall time (I/O or sleep: neither on "
                   "the CPU nor queued for it)", cpu_s, wall_s, 0.0)
    window = min(MAX_WINDOW_S, max(MIN_WINDOW_S, 2 * RUNS_PER_WINDOW * cpu_s))
    return Fit(True, f"one thread, on the CPU or queued for it for {100 * (1 - waiting / wall_s):.0f}% of its wall "
               "time" if wall_s > 0 else "one thread", cpu_s, wall_s, round(window, 3))


def widened(window_s: float, row: dict) -> float | None:
    """The window a cell's next pairs get after `row` (a row of pairs.csv from run_window), or None to keep it:
    twice as long, up to MAX_WINDOW_S, when a side ended no run in it. The window is sized from the baseline's
    run, so a configuration more than about twice as slow as the baseline on a program never ends a run in it,
    and its cell, the slowest of all, would go unmeasured."""
    def ended(side):
        try:
            return int(float(row.get(f"turns_{side}") or 0))
        except ValueError:
            return 0

    if row.get("status") == "ok" or (ended("a") > 0 and ended("b") > 0):
        return None
    return min(MAX_WINDOW_S, 2 * window_s) if window_s < MAX_WINDOW_S else None


def reference_run(argv, env: dict, cwd: Path, timeout: float | None) -> dict:
    """One run of the program (`heapcost-alternate --fit`), read from the kernel's accounts at its exit: wall
    time from the exec (by the child's own clock), the whole process's CPU time (wait4), its main thread's time
    on the CPU and in the run queue since the exec (/proc/PID/schedstat, read while it is a zombie)."""
    cmd = [str(driver_path()), "--fit", "1", "--a-stdout", str(cwd / "stdout"), "--a-stderr", str(cwd / "stderr"),
           "--a-cwd", str(cwd)]
    if timeout:
        cmd += ["--timeout", f"{timeout:g}"]
    for key, value in env.items():
        cmd += ["--a-env", f"{key}={value}"]
    proc = subprocess.run([*cmd, "--", *map(str, argv)], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"},
                          timeout=(timeout or 3600) + 60)
    try:
        return json.loads(proc.stdout)
    except ValueError:
        raise HeapcostError(f"the alternation driver printed no result: {proc.stderr.strip()[:200]}") from None


def median_run(runs: list[dict]) -> dict:
    """The reference run to judge by: the first that failed, or else the one of median CPU time (one run in a
    slow spell of the VM would make every window of the campaign longer than it needs)."""
    for r in runs:
        if r["status"] != "exited" or r.get("exit_code") != 0 or r.get("main_run_s") is None:
            return r
    return sorted(runs, key=lambda r: r["cpu_s"])[(len(runs) - 1) // 2]


def applies(trial: SpeedTrial) -> Fit:
    """Run the program as the trial runs it (the baseline's trial), unpinned, and judge it: up to REFERENCE_RUNS
    times while they take less than REFERENCE_CPU_S together, by the run of median CPU time."""
    runs = []
    with tempfile.TemporaryDirectory(prefix="heapcost-fit-") as tmp:
        workdir = Path(tmp)
        while len(runs) < REFERENCE_RUNS and sum(r["cpu_s"] for r in runs) < REFERENCE_CPU_S:
            runs.append(reference_run(trial.argv, trial.env(workdir, 0), workdir, trial.timeout_s))
            if runs[-1]["status"] != "exited" or runs[-1].get("exit_code") != 0:
                break
    r = median_run(runs)
    if r["status"] == "spawn-failed":
        return Fit(False, f"it could not be started: {r.get('error')}", 0.0, 0.0, 0.0)
    if r.get("main_run_s") is None:
        return Fit(False, "the kernel's scheduler statistics (/proc/PID/schedstat) are not readable here",
                   r["cpu_s"], r["wall_s"], 0.0)
    return fit_from(r["cpu_s"], r["main_run_s"], r["main_queued_s"], r["wall_s"], r["status"], r["exit_code"])


def driver_command(trial_a: SpeedTrial, trial_b: SpeedTrial, dirs, pads, *, cpu, driver_cpu, first, slice_us,
                   window_s) -> list[str]:
    cmd = [str(driver_path()), "--first", first, "--slice-us", str(int(slice_us)), "--window-s", f"{window_s:g}"]
    if cpu is not None:
        cmd += ["--cpu", str(int(cpu))]
    if driver_cpu is not None:
        cmd += ["--driver-cpu", str(int(driver_cpu))]
    for side, trial, workdir, pad in (("a", trial_a, dirs[0], pads[0]), ("b", trial_b, dirs[1], pads[1])):
        cmd += side_arguments(side, trial, workdir, pad)
    return [*cmd, "--", *map(str, trial_a.argv), "--", *map(str, trial_b.argv)]


def side_result(d: dict, wall_s: float) -> LaunchResult:
    """One side of a window as the trial's judge reads a run: spawn-failed, the failed run's status, or exited 0."""
    fields = {k: v for k, v in _DEFAULTS.items()}
    fields.update(wall_s=wall_s, user_s=float(d.get("user_s") or 0), sys_s=float(d.get("sys_s") or 0),
                  maxrss_kb=max([int(e[2]) for e in d.get("each") or []] or [0]),
                  minflt=sum(int(e[3]) for e in d.get("each") or []))
    if d.get("error"):
        return LaunchResult(status="spawn-failed", **{**fields, "error": d["error"]})
    failed = d.get("failed")
    if failed:
        if failed.get("signal"):
            return LaunchResult(status="signaled", **{**fields, "signal": int(failed["signal"])})
        return LaunchResult(status="exited", **{**fields, "exit_code": int(failed.get("exit_code") or 0)})
    return LaunchResult(status="exited", **{**fields, "exit_code": 0})


def window_for_slice(window_s: float, slice_us: int) -> float:
    """The window of a program sized at `window_s` (from the baseline's run, `applies`) when its turns last
    `slice_us`: as it is at SLICE_US or shorter, else at least MIN_TURNS_PER_SIDE turns of each side."""
    if slice_us <= SLICE_US:
        return window_s
    return max(window_s, 2 * MIN_TURNS_PER_SIDE * slice_us / 1e6)


def run_window(trial_a: SpeedTrial, trial_b: SpeedTrial, *, expected_a: str | None, expected_b: str | None,
               cpu: int | None, driver_cpu: int | None, window_s: float, first: str = "a",
               slice_us: int = SLICE_US, pads=(0, 0)) -> dict:
    """One window of alternation; returns its row of pairs.csv (without run_id, seq, block, warmup)."""

    def read_side(d, data, workdir):
        wall = float(data.get("wall_s", 0.0))
        runs = int(d.get("runs") or 0)
        failure = None if runs else (f"no run ended within the {window_s:g} s window: "
                                     + (first_line(workdir / "stderr") or "a longer window is needed"))
        return side_result(d, wall), {"active": f"{float(d['cpu_s']) / runs:.9f}" if runs else "", "turns": runs,
                                      "wall": f"{wall:.6f}"}, failure

    # the window's own CPU time: every run of both sides (the two the window cut short included) and the driver's
    # signals on its own CPU; whatever else ran is interference
    def own_cpu(data, results):
        return sum(float(data.get(s, {}).get("cpu_all_s") or 0) for s in "ab") + float(data.get("driver_cpu_s") or 0)

    return run_driven_pair(
        trial_a, trial_b, expected_a=expected_a, expected_b=expected_b, first=first, cpu=cpu, chunk_us=slice_us,
        pads=pads, driver="alternation", one_cell="an alternating pair runs one program at one scale", prefix="alt",
        command=lambda dirs: driver_command(trial_a, trial_b, dirs, pads, cpu=cpu, driver_cpu=driver_cpu,
                                            first=first, slice_us=slice_us, window_s=window_s),
        timeout=window_s + 120, read_side=read_side, own_cpu=own_cpu)
