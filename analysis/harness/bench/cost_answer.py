"""`make bench --only cost`: how long a cost prediction takes a user, from a program to its predicted ratios.

Two numbers, each from fresh processes of the real commands, as a user runs them:
1. the answer: `python -m analysis cost PROFILE` once to keep the model's inputs (the first call after the dataset
   or the code changed computes them), then ANSWERS more times with them kept: the wall time of each call;
2. profiling: `python -m analysis profile --out FILE -- PROGRAM` on one of the cost check's programs (default
   sqlite-index, on its fixed input): its wall time, the program runs it makes (the counting run, the system-call
   run when strace is installed, and the timed runs) and the program's own wall time alone (the median of
   ALONE_RUNS runs), so that what profiling adds beyond the runs it makes is its wall time less that many runs.
The target: an answer in about a second once the inputs are kept, and profiling plus one answer adding at most
30 s beyond the program's own runs.
"""
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from analysis.errors import HeapcostError
from analysis.paths import REPO

PROGRAM = "sqlite-index"
ANSWERS, ALONE_RUNS = 5, 7
ANSWER_TARGET_S, ADDED_TARGET_S = 1.0, 30.0


def _timed(argv, **kw) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, **kw)
    return time.perf_counter() - started, done


def _has_strace() -> bool:
    return shutil.which("strace") is not None


def _analysis(*args) -> tuple[float, subprocess.CompletedProcess]:
    wall, done = _timed([sys.executable, "-m", "analysis", *args], cwd=REPO)
    if done.returncode != 0:
        raise HeapcostError(f"`python -m analysis {' '.join(args[:1])}` failed: "
                            f"{(done.stderr.strip().splitlines() or ['no message'])[-1]}")
    return wall, done


def cost_bench(program: str = PROGRAM, answers: int = ANSWERS, alone_runs: int = ALONE_RUNS) -> dict:
    from analysis.harness.workloads import cost_inputs, cost_programs
    from analysis.harness.workloads.profile import TIMED_RUNS

    chosen = cost_programs.chosen([program])
    missing = cost_programs.missing_programs(chosen)
    if missing:
        raise HeapcostError(f"the cost benchmark's program is not installed: {', '.join(missing)}")
    with tempfile.TemporaryDirectory(prefix="heapcost-bench-cost-") as tmp:
        tmp = Path(tmp)
        inputs = cost_inputs.write_inputs(tmp / "inputs")
        command = cost_programs.commands(chosen, inputs)[program]
        alone = []
        for _ in range(alone_runs):
            wall, done = _timed(["sh", "-c", command + " > /dev/null"])
            if done.returncode != 0:
                raise HeapcostError(f"{program} failed on its own: {done.stderr.strip()[:200]}")
            alone.append(wall)
        out = tmp / "profile.csv"
        profile_s, _ = _analysis("profile", "--out", str(out), "--", "sh", "-c", command + " > /dev/null")
        runs = 1 + (1 if _has_strace() else 0) + TIMED_RUNS
        first_s, _ = _analysis("cost", str(out))
        kept = [_analysis("cost", str(out))[0] for _ in range(answers)]
    program_s = statistics.median(alone)
    added = profile_s + statistics.median(kept) - runs * program_s
    return {"program": program, "command": command.replace(str(tmp), "{tmp}"),
            "program_wall_s": program_s, "profile_runs": runs, "profile_wall_s": profile_s,
            "first_answer_s": first_s, "answers": len(kept), "answer_median_s": statistics.median(kept),
            "answer_max_s": max(kept), "added_beyond_runs_s": added,
            "answer_target_s": ANSWER_TARGET_S, "added_target_s": ADDED_TARGET_S,
            "answer_meets_target": statistics.median(kept) <= ANSWER_TARGET_S * 1.5,
            "added_meets_target": added <= ADDED_TARGET_S}


def format_cost(result: dict | None) -> list[str]:
    if not result:
        return []
    return ["", f"### A cost prediction as a user gets it: {result['program']}", "",
            "| step | wall time | target |", "|---|---|---|",
            f"| `cost`, the model's inputs computed (first call) | {result['first_answer_s']:.1f} s | - |",
            f"| `cost`, inputs kept (median of {result['answers']}; max) | {result['answer_median_s']:.2f} s; "
            f"{result['answer_max_s']:.2f} s | about {result['answer_target_s']:.0f} s |",
            f"| `profile` ({result['profile_runs']} runs of a program taking {result['program_wall_s']:.2f} s "
            f"alone) | {result['profile_wall_s']:.1f} s | - |",
            f"| profiling and one answer, beyond the program's own runs | {result['added_beyond_runs_s']:.1f} s | "
            f"at most {result['added_target_s']:.0f} s |"]
