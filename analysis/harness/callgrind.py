"""MODE=callgrind: exact instruction counts and simulated D1 misses per workload and allocator.

Instruction counts under callgrind repeat exactly for the same binary, input and environment, so one
run per pair is the measurement (jemalloc needs its decay timers off for that: its callgrind_env).
Allocation demand (malloc/free calls) is a property of the workload, counted once per workload and
scale with the malloccount shim under glibc, so costs can be given per free as seed 002 did.
"""
import re
import shutil
import tempfile
from pathlib import Path

from analysis.harness import launcher
from analysis.contract import runstore
from analysis.contract.schema import COUNT_COLUMNS
from analysis.errors import HeapcostError
from analysis.harness.build import build_c
from analysis.harness.trial import clean_env, preloadable_path, progress_bar
from analysis.paths import NATIVE_DIR

CALLGRIND_TIMEOUT_S = 1800
EVENT_NAMES = {"Ir": "instructions", "Dr": "data_reads", "Dw": "data_writes", "D1mr": "d1_read_misses",
               "D1mw": "d1_write_misses"}


def valgrind_wrapper(out_dir: Path) -> list[str]:
    if shutil.which("valgrind") is None:
        raise HeapcostError("valgrind is not installed (apt-get install valgrind)")
    return ["valgrind", "--tool=callgrind", "--cache-sim=yes", "--trace-children=yes",
            f"--callgrind-out-file={out_dir}/callgrind.out.%p", "--log-file=" + str(out_dir / "valgrind.log")]


def parse_totals(text: str) -> dict:
    """Event totals of one callgrind output file (its `events:` and `totals:`/`summary:` lines)."""
    events = re.search(r"^events:\s*(.+)$", text, re.M)
    totals = re.search(r"^(?:totals|summary):\s*(.+)$", text, re.M)
    if not events or not totals:
        raise ValueError("no events/totals in callgrind output")
    names = events.group(1).split()
    values = [int(v) for v in totals.group(1).split()]
    return {EVENT_NAMES[n]: v for n, v in zip(names, values) if n in EVENT_NAMES}


def sum_outputs(out_dir: Path) -> dict:
    total: dict = {}
    files = sorted(out_dir.glob("callgrind.out.*"))
    if not files:
        raise ValueError("callgrind wrote no output")
    for f in files:
        for k, v in parse_totals(f.read_text(errors="replace")).items():
            total[k] = total.get(k, 0) + v
    return total


def malloccount_path() -> Path:
    return build_c("malloccount", [NATIVE_DIR / "malloccount.c"], shared=True, ldflags=["-ldl"])


def count_calls(workload, scale: float, timeout: float) -> dict:
    """malloc/free/calloc/realloc calls of a workload at a scale, summed over its processes."""
    with tempfile.TemporaryDirectory(prefix="heapcost-count-") as tmp:
        tmp = Path(tmp)
        env = {**clean_env(tmp), **workload.env(scale), "LD_PRELOAD": preloadable_path(malloccount_path()),
               "HEAPCOST_COUNT": str(tmp / "counts")}
        result = launcher.run(workload.argv(scale, "glibc", {}), env=env, stdout=tmp / "stdout",
                              stderr=tmp / "stderr", cwd=tmp, timeout=timeout)
        if result.status != "exited" or result.exit_code != 0:
            raise HeapcostError(f"counting {workload.id}'s malloc calls failed: {result.status} {result.exit_code}")
        sums = [0, 0, 0, 0]
        for line in (tmp / "counts").read_text().splitlines():
            for i, v in enumerate(line.split()[1:5]):
                sums[i] += int(v)
    return dict(zip(("malloc_calls", "free_calls", "calloc_calls", "realloc_calls"), sums))


def run_counts(campaign, run_dir: Path, info: dict) -> dict:
    table = runstore.AppendTable(run_dir / "counts.csv", COUNT_COLUMNS)
    done = {(r["workload"], r["allocator"], r["scale"]) for r in table.rows()}
    calls = info.setdefault("malloc_calls", {})
    todo = [(a, w, f) for a, w, f in campaign.pairs if (w, a, f"{campaign.scale_of(f):.6g}") not in done]
    bar = progress_bar(len(campaign.pairs), len(campaign.pairs) - len(todo), campaign.progress)
    try:
        for aid, wid, factor in todo:
            trial = campaign.trial(aid, wid, factor)
            trial.timeout_s = CALLGRIND_TIMEOUT_S
            key = f"{wid}|{trial.scale:.6g}"
            if key not in calls:
                calls[key] = count_calls(trial.workload, trial.scale, campaign.profile.timeout_s)
                runstore.write_json_atomic(run_dir / "run.json", info)
            row = {"run_id": run_dir.name, "workload": wid, "allocator": aid, "scale": f"{trial.scale:.6g}",
                   **calls[key]}
            if trial.alloc.callgrind is not True:
                row.update(status="missing", reason=str(trial.alloc.callgrind))
            else:
                row.update(_measure_one(trial, info, wid))
            table.append(row)
            bar.update(1)
    finally:
        bar.close()
        table.close()
    return {}


def _measure_one(trial, info, wid) -> dict:

    out_dir = Path(tempfile.mkdtemp(prefix="heapcost-cg-"))
    workdir = Path(tempfile.mkdtemp(prefix="heapcost-trial-"))
    try:
        env = trial.env(workdir, 0)
        result = launcher.run(trial.argv, env=env, stdout=workdir / "stdout", stderr=workdir / "stderr",
                              cwd=workdir, timeout=CALLGRIND_TIMEOUT_S, wrapper=valgrind_wrapper(out_dir))
        expected = info["expected_checksums"].get(f"{wid}|glibc|{trial.scale:.6g}")
        status, reason, malloc_lib = trial.judge(result, workdir, expected)
        if status != "ok":
            # Recorded as missing with what happened (standalone scudo, for one, aborts under valgrind).
            return {"status": "missing", "reason": f"{status} under valgrind: {reason}"[:300], "malloc_lib": malloc_lib}
        try:
            totals = sum_outputs(out_dir)
        except ValueError as exc:
            return {"status": "failed", "reason": str(exc), "malloc_lib": malloc_lib}
        return {"status": "ok", "reason": "", "malloc_lib": malloc_lib, **totals}
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
        shutil.rmtree(workdir, ignore_errors=True)
