"""`make bench --only alternation-runs`: where an alternation window's spread comes from.

A brought program's A/A interval (bench/alternation.py) is as wide as its windows' log ratios spread. This part
takes one program's windows apart, from the driver's own record of every completed run (`each`), both sides the
same program under the same environment:
- the spread between two runs that took turns (the k-th run of each side: the same slices of the CPU);
- the spread of the windows' log ratios, as the paired estimator reads them (mean CPU time per completed run);
- the part the windows share beyond their runs: the windows' variance less what their runs' pairs explain;
- the spread between successive runs of the program alone on the same CPU, not taking turns.
Under conditions that would explain a shared or a per-run part if they mattered: as a campaign runs it (address
randomization on, stdout to a file), address randomization off (setarch -R), stdout to /dev/null; the
conditions take turns window by window, so that the machine's drift falls on each alike.
"""
import json
import math
import os
import platform
import random
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from analysis.errors import HeapcostError

PROGRAM = "sort-text"
WINDOWS, WINDOW_S, ALONE_RUNS = 24, 0.5, 60
CONDITIONS = {  # name: (address randomization, stdout)
    "as campaigns run it": (True, "file"),
    "address randomization off": (False, "file"),
    "stdout to /dev/null": (True, "devnull"),
}


def components(windows: list[dict]) -> dict:
    """Per-run and per-window spreads (standard deviations of log ratios) of A/A windows, each window
    {"a": [CPU seconds of each completed run], "b": [...]}; windows with fewer than one run a side are left out
    (`windows` counts those used, `windows_taken` every window given)."""
    pairs, ratios, counts = [], [], []
    for w in windows:
        a, b = [float(x) for x in w.get("a") or []], [float(x) for x in w.get("b") or []]
        m = min(len(a), len(b))
        if m < 1 or min(a + b) <= 0:
            continue
        pairs += [math.log(a[k] / b[k]) for k in range(m)]
        ratios.append(math.log(statistics.fmean(a) / statistics.fmean(b)))
        counts.append(m)
    if len(ratios) < 3 or len(pairs) < 3:
        return {"windows": len(ratios), "windows_taken": len(windows), "runs_a_side": None, "pair_sd": None,
                "window_sd": None, "explained_sd": None, "shared_sd": None}
    pair_sd, window_sd = statistics.stdev(pairs), statistics.stdev(ratios)
    explained = pair_sd / math.sqrt(statistics.fmean(counts))
    return {"windows": len(ratios), "windows_taken": len(windows), "runs_a_side": statistics.fmean(counts),
            "pair_sd": pair_sd,
            "window_sd": window_sd, "explained_sd": explained,
            "shared_sd": math.sqrt(max(0.0, window_sd ** 2 - explained ** 2))}


def successive_sd(times: list[float]) -> float | None:
    """The standard deviation of the log ratio of successive runs (a pair of runs one after the other)."""
    logs = [math.log(t) for t in times if t > 0]
    diffs = [y - x for x, y in zip(logs, logs[1:])]
    return statistics.stdev(diffs) if len(diffs) >= 2 else None


def _argv(program: str, input_path: Path) -> list[str]:
    import shlex

    from analysis.harness.bench.alternation import PROGRAMS

    if program not in PROGRAMS:
        raise HeapcostError(f"the alternation-runs bench knows no program {program!r}: one of {', '.join(PROGRAMS)}")
    argv = shlex.split(PROGRAMS[program].replace("{input}", str(input_path)))
    if shutil.which(argv[0]) is None:
        raise HeapcostError(f"the alternation-runs bench runs {argv[0]}: install it")
    return argv


def _window(argv, tmp: Path, window_s: float, aslr: bool, stdout: str, first: str, pad: tuple) -> dict:
    """One A/A window of the driver: {"a": [CPU seconds of each completed run], "b": [...]}."""
    from analysis.harness.timing.alternation import SLICE_US, driver_path

    if not aslr:
        argv = ["setarch", platform.machine(), "-R", *argv]
    dirs = [Path(tempfile.mkdtemp(dir=tmp)) for _ in "ab"]
    cmd = [str(driver_path()), "--first", first, "--slice-us", str(SLICE_US), "--window-s", f"{window_s:g}",
           "--cpu", "0", "--driver-cpu", "1"]
    for side, d, n in zip("ab", dirs, pad):
        cmd += [f"--{side}-stdout", "/dev/null" if stdout == "devnull" else str(d / "stdout"),
                f"--{side}-stderr", str(d / "stderr"), f"--{side}-cwd", str(d),
                f"--{side}-env", "PATH=/usr/bin:/bin", f"--{side}-env", "LANG=C",
                f"--{side}-env", "HEAPCOST_PAD=" + "x" * n]
    try:
        proc = subprocess.run([*cmd, "--", *argv, "--", *argv], capture_output=True, text=True,
                              env={"PATH": "/usr/bin:/bin"}, timeout=window_s + 120)
        try:
            data = json.loads(proc.stdout)
        except ValueError:
            raise HeapcostError(f"the alternation driver printed no result: {proc.stderr.strip()[:200]}") from None
        return {s: [e[0] for e in data.get(s, {}).get("each") or []] for s in "ab"}
    finally:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


def _alone(argv, runs: int) -> list[float]:
    """CPU seconds of `runs` runs one after another on CPU 0, stdout to /dev/null (wait4)."""
    times = []
    for _ in range(runs):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child execs
            try:
                os.sched_setaffinity(0, {0})
                fd = os.open(os.devnull, os.O_WRONLY)
                os.dup2(fd, 1)
                os.execvp(argv[0], argv)
            finally:
                os._exit(127)
        _, status, ru = os.wait4(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise HeapcostError(f"{argv[0]} failed alone (status {os.waitstatus_to_exitcode(status)})")
        times.append(ru.ru_utime + ru.ru_stime)
    return times


def runs_bench(program: str = PROGRAM, windows: int = WINDOWS, window_s: float = WINDOW_S, alone_runs: int = ALONE_RUNS,
               seed: int = 1) -> dict:
    from analysis.harness.bench.alternation import write_input

    if windows < 3 or alone_runs < 3:
        raise HeapcostError("the alternation-runs bench needs at least 3 windows and 3 runs alone")
    with tempfile.TemporaryDirectory(prefix="heapcost-bench-runs-") as tmp:
        tmp = Path(tmp)
        argv = _argv(program, write_input(tmp / "words.txt"))
        if shutil.which("setarch") is None:
            raise HeapcostError("the alternation-runs bench turns address randomization off by setarch: install "
                                "util-linux")
        # the conditions take turns window by window, in an order drawn for each round: the machine's drift
        # through the part falls on every condition alike
        rng, got = random.Random(seed), {name: [] for name in CONDITIONS}
        for w in range(windows):
            for name in rng.sample(list(CONDITIONS), len(CONDITIONS)):
                aslr, stdout = CONDITIONS[name]
                got[name].append(_window(argv, tmp, window_s, aslr, stdout, "ab"[w % 2],
                                         (rng.randrange(64), rng.randrange(64))))
        conditions = [{"condition": name, **components(got[name])} for name in CONDITIONS]
        times = _alone(argv, alone_runs)
    return {"program": program, "window_s": window_s, "conditions": conditions,
            "alone": {"runs": len(times), "median_s": statistics.median(times), "successive_sd": successive_sd(times)}}


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.2f}%"


def format_runs(result: dict) -> list[str]:
    if not result:
        return []
    lines = ["", f"### Where an alternation window's spread comes from: {result.get('program')}, A/A", "",
             "Standard deviations of log ratios. Two runs taking turns: the k-th run of each side; explained: "
             "what the runs' pairs give a window of that many runs; shared: the windows' part beyond it.", "",
             "| condition | windows | runs a side | two runs taking turns | windows | explained by runs | shared |",
             "|---|---|---|---|---|---|---|"]
    for c in result.get("conditions", []):
        runs = "-" if c.get("runs_a_side") is None else f"{c['runs_a_side']:.1f}"
        lines.append(f"| {c['condition']} | {c['windows']} | {runs} | {_pct(c['pair_sd'])} | {_pct(c['window_sd'])} | "
                     f"{_pct(c['explained_sd'])} | {_pct(c['shared_sd'])} |")
    alone = result.get("alone") or {}
    if alone:
        lines += ["", f"The program alone on the same CPU, {alone.get('runs')} runs one after another (median "
                  f"{1000 * alone.get('median_s', 0):.1f} ms of CPU): two successive runs differ by "
                  f"{_pct(alone.get('successive_sd'))} (standard deviation of their log ratio)."]
    return lines
