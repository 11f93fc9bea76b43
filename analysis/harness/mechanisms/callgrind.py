"""MODE=callgrind: exact instruction counts and simulated D1 misses per workload and allocator.

Instruction counts under callgrind repeat exactly for the same binary, input and environment, so one
run per pair is the measurement (jemalloc needs its decay timers off for that: its callgrind_env).
Allocation demand (malloc/free calls) is a property of the workload, counted once per workload and
scale with the malloccount shim under glibc, so costs can be given per free as seed 002 did.

The allocator's own share: the inclusive cost of every call into an allocator entry point (malloc, free,
operator new, ...) made from outside one, read from the call graph callgrind writes. A call from one entry
point into another (realloc into malloc, operator new into malloc) is inside the first and counted once.
"""
import re
import shutil
import tempfile
from pathlib import Path

from analysis.harness.process import launcher
from analysis.contract import runstore
from analysis.contract.schema import COUNT_COLUMNS
from analysis.errors import HeapcostError
from analysis.harness.process.build import build_c
from analysis.harness.process.trial import clean_env, preloadable_path, progress_bar

CALLGRIND_TIMEOUT_S = 1800
EVENT_NAMES = {"Ir": "instructions", "Dr": "data_reads", "Dw": "data_writes", "D1mr": "d1_read_misses",
               "D1mw": "d1_write_misses"}
ALLOCATOR_EVENTS = {"Ir": "alloc_instructions", "Dw": "alloc_data_writes"}
# The public entry points of an allocator under the names the libraries here give them: glibc's aliases
# (__libc_malloc, cfree), hardened_malloc's h_, jemalloc's je_ and its *allocx, tcmalloc's tc_, mimalloc's mi_,
# oneTBB's scalable_, perl's own malloc (Perl_malloc, Perl_mfree); a symbol version may follow
# (libc_malloc_debug.so's malloc@GLIBC_2.2.5), and callgrind marks a recursion with 'N.
ALLOCATOR_ENTRY = re.compile(
    r"^(?:__GI_)?(?:__libc_|__|h_|je_|tc_|mi_|scalable_|Perl_)?"
    r"(?:malloc|free|calloc|realloc|reallocarray|reallocf|posix_memalign|aligned_alloc|memalign|valloc|pvalloc|"
    r"cfree|mfree|malloc_usable_size|free_sized|free_aligned_sized|mallocx|rallocx|xallocx|sallocx|dallocx|"
    r"sdallocx|nallocx)(?:@@?[\w.]+)?(?:'\d+)?$"
    r"|^operator (?:new|delete)(?:\[\])?\("
    r"|^_Z(?:nw|na|dl|da)[mjPv]")


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


def is_allocator_entry(name: str) -> bool:
    return ALLOCATOR_ENTRY.match(name) is not None


def _compressed(value: str, table: dict) -> str:
    """A name of callgrind's compressed form: `(id) name` defines id, `(id)` refers to it."""
    value = value.strip()
    if not value.startswith("("):
        return value
    ident, _, name = value.partition(")")
    if name.strip():
        table[ident] = name.strip()
        return name.strip()
    return table.get(ident, ident + ")")


def parse_allocator_calls(text: str) -> dict:
    """The inclusive cost of the calls into allocator entry points from functions that are not entry points,
    in one callgrind output file: {alloc_instructions, alloc_data_writes} (0 when it made no such call)."""
    events = re.search(r"^events:\s*(.+)$", text, re.M)
    if not events:
        raise ValueError("no events in callgrind output")
    names = events.group(1).split()
    positions = re.search(r"^positions:\s*(.+)$", text, re.M)
    n_positions = len(positions.group(1).split()) if positions else 1
    wanted = {i: ALLOCATOR_EVENTS[n] for i, n in enumerate(names) if n in ALLOCATOR_EVENTS}
    sums = {v: 0 for v in ALLOCATOR_EVENTS.values()}
    functions: dict = {}
    caller_is_entry, callee_is_entry, call_cost_next = False, False, False
    for line in text.splitlines():
        if call_cost_next:
            call_cost_next = False
            if callee_is_entry and not caller_is_entry:
                values = line.split()[n_positions:]
                for i, column in wanted.items():
                    if i < len(values):
                        sums[column] += int(values[i])
        elif line.startswith("fn="):
            caller_is_entry = is_allocator_entry(_compressed(line[3:], functions))
        elif line.startswith("cfn="):
            callee_is_entry = is_allocator_entry(_compressed(line[4:], functions))
        elif line.startswith("calls="):
            call_cost_next = True
    return sums


def sum_outputs(out_dir: Path) -> dict:
    """Event totals and the allocator's inclusive share, summed over every process's output file."""
    total: dict = {}
    files = sorted(out_dir.glob("callgrind.out.*"))
    if not files:
        raise ValueError("callgrind wrote no output")
    for f in files:
        text = f.read_text(errors="replace")
        for k, v in {**parse_totals(text), **parse_allocator_calls(text)}.items():
            total[k] = total.get(k, 0) + v
    return total


def malloccount_path() -> Path:
    return build_c("malloccount", [Path(__file__).resolve().with_name("malloccount.c")], shared=True, ldflags=["-ldl"])


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
