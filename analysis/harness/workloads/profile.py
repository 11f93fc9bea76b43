"""`python -m analysis profile [--out FILE.csv] -- PROGRAM ARGS`: a program's allocation profile.

The program runs under the system glibc in three ways, each run as a brought workload's trial runs it (a
scratch folder, the fixed small environment of trial.clean_env, arguments naming existing files made absolute):
1. first, with the counting shim allocprofile.c preloaded: calls per entry point and size class, realloc growth,
   reuse of freed sizes, threads, peak live bytes (the shim's report format is in its header);
2. under `strace -f` (when installed): the mmap, munmap, brk, mremap, mprotect and madvise calls of every
   process and thread, and the bytes they map and unmap (a preloaded shim cannot see the allocator's own);
3. with nothing preloaded, through heapcost's launcher, TIMED_RUNS times in TIMED_BLOCKS blocks placed at
   random around the system-call run, pinned to one CPU for a program with one thread: the medians of wall
   time, CPU time and peak RSS, the run-to-run spread of the CPU times and the spread between the blocks;
4. beside each of those runs, in the same block, once under heapcost's placement allocator in each of its two
   modes (placement.c: blocks laid side by side in allocation order, or scattered at random among a class's
   free slots), in an order drawn for each turn: the medians of their CPU times, which say how much the
   program's speed depends on where its blocks lie (the cost model's placement terms, stats/cost_terms.py).
The profile is a tidy CSV: quantity, size_class, value (contract/profile_schema.py: PROFILE, PROFILE_QUANTITIES).
The counting run and the system-call run are separate runs of the same command: a program that does not
allocate the same way every time gives each its own run's numbers.
"""
import argparse
import csv
import io
import math
import re
import shutil
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from analysis.contract.profile_schema import PROFILE_COLUMNS, PROFILE_ENTRY_POINTS, PROFILE_QUANTITIES
from analysis.errors import HeapcostError, warn
from analysis.harness.process import launcher
from analysis.harness.workloads.brought import absolute_word, dynamic_program
from analysis.harness.process.build import build_c
from analysis.harness.process.trial import clean_env, first_line, preloadable_path

TIMEOUT_S = 600
TIMED_RUNS = 6
TIMED_BLOCKS = 3  # the timed runs' blocks, spread over the profile's run (below)
TRACED = ("execve", "mmap", "munmap", "brk", "mremap", "mprotect", "madvise")
RELEASE_ADVICE = ("MADV_DONTNEED", "MADV_FREE", "MADV_REMOVE")
PER_CLASS = [q for q, (_, per_class, _) in PROFILE_QUANTITIES.items() if per_class]
LARGEST_OVER_PROCESSES = ("peak_live_bytes", "peak_live_blocks", "reuse_window")


PLACEMENT_MODES = ("ordered", "shuffled")


def allocprofile_path() -> Path:
    return build_c("allocprofile", [Path(__file__).resolve().with_name("allocprofile.c")], shared=True, ldflags=["-ldl"])


def placement_path() -> Path:
    return build_c("placement", [Path(__file__).resolve().with_name("placement.c")], shared=True,
                   ldflags=["-lpthread"])


def placement_env(mode: str) -> dict:
    """The environment that runs a program under the placement allocator in `mode` (PLACEMENT_MODES)."""
    return {"LD_PRELOAD": preloadable_path(placement_path()), "HEAPCOST_PLACEMENT": mode}


# ---- the program ----

def resolve_command(command: list[str]) -> list[str]:
    """The argv to run: the program found (on PATH when it names no folder) and checked, the arguments that
    name existing files made absolute (the runs happen in a scratch folder)."""
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise HeapcostError("no program to profile: write `profile -- PROGRAM ARGS`")
    path = dynamic_program(command[0], preload_does="count its malloc calls")
    return [str(path), *(absolute_word(arg)[0] for arg in command[1:])]


def launch(argv, workdir: Path, env: dict, timeout: float, what: str, wrapper=(), cpu: int | None = None):
    """One run of the program through heapcost's launcher, or a one-line error saying how it failed."""
    result = launcher.run(argv, env=env, stdout=workdir / "stdout", stderr=workdir / "stderr", cwd=workdir,
                          timeout=timeout, wrapper=wrapper, cpu=cpu)
    if result.status != "exited" or result.exit_code != 0:
        how = {"exited": f"exited with status {result.exit_code}", "signaled": f"was killed by signal {result.signal}",
               "timeout": f"did not finish within {timeout:g} s"}.get(result.status, result.error or result.status)
        why = first_line(workdir / "stderr")
        raise HeapcostError(f"{Path(argv[0]).name} {how} in the {what}" + (f": {why}" if why else ""))
    return result


# ---- the counting run ----

def parse_shim_report(text: str) -> dict:
    """The shim's reports (one block per process) summed: {(quantity, size_class or None): value}.
    peak_live_bytes, peak_live_blocks and reuse_window are the largest over processes; everything else adds up."""
    out: dict = defaultdict(int)
    for number, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 3 or parts[0] not in PROFILE_QUANTITIES:
            raise HeapcostError(f"the counting shim's report has an unreadable line {number}: {line[:80]!r}")
        key = (parts[0], None if parts[1] == "-" else int(parts[1]))
        value = int(parts[2])
        out[key] = max(out[key], value) if parts[0] in LARGEST_OVER_PROCESSES else out[key] + value
    return dict(out)


def with_totals(counts: dict) -> dict:
    """The per-class quantities' totals (size_class None), free_calls with the untracked frees, and the
    reuse shares (per class and in all: frees_reused over the frees of a known class)."""
    out = dict(counts)
    for q in PER_CLASS:
        if q in ("reuse_share", "peak_live_blocks"):  # a share, and peaks of different moments: no total
            continue
        classes = {c: v for (name, c), v in counts.items() if name == q and c is not None}
        out[(q, None)] = sum(classes.values()) + (counts.get(("free_untracked_calls", None), 0)
                                                  if q == "free_calls" else 0)
    frees = {c: v for (name, c), v in counts.items() if name == "free_calls" and c is not None}
    for c, n in frees.items():
        if n:
            out[("reuse_share", c)] = counts.get(("frees_reused", c), 0) / n
    if sum(frees.values()):
        out[("reuse_share", None)] = out[("frees_reused", None)] / sum(frees.values())
    return out


def count_calls(argv, timeout: float = TIMEOUT_S, extra_env=None) -> dict:
    with tempfile.TemporaryDirectory(prefix="heapcost-profile-") as tmp:
        # the report lies beside the program's scratch folder, not in it: a program that removes what it made
        # there when it ends (the build workload's driver does) would take the other processes' reports along
        work, report = Path(tmp) / "work", Path(tmp) / "allocprofile.report"
        work.mkdir()
        env = {**clean_env(work), **(extra_env or {}), "LD_PRELOAD": preloadable_path(allocprofile_path()),
               "HEAPCOST_PROFILE": str(report)}
        launch(argv, work, env, timeout, "counting run")
        text = report.read_text() if report.is_file() else ""
    counts = parse_shim_report(text)
    if not counts.get(("processes", None)):
        raise HeapcostError(f"{Path(argv[0]).name} left no allocation report: none of its processes exited "
                            "normally with the counting shim loaded")
    return with_totals(counts)


# ---- the system-call run ----

CALL = re.compile(r"^(?:\d+\s+)?(\w+)\((.*)\)\s+=\s+(-?\w+)")


def _int(text: str) -> int:
    text = text.strip()
    return 0 if text == "NULL" else int(text, 0)


def parse_trace(texts) -> dict:
    """{(quantity, None): value} from strace output, one text per traced task (strace -ff): the calls that
    succeeded, the bytes they mapped, unmapped, moved the break by, made writable or gave back."""
    out = {(q, None): 0 for q in ("syscall_tasks", "mmap_calls", "mmap_anon_bytes", "mmap_reserve_bytes",
                                  "mmap_stack_bytes", "mmap_other_bytes", "munmap_calls", "munmap_bytes",
                                  "brk_calls", "brk_grow_bytes", "brk_shrink_bytes", "mremap_calls",
                                  "mremap_grow_bytes", "mremap_shrink_bytes", "mprotect_calls", "mprotect_rw_bytes",
                                  "madvise_calls", "madvise_release_bytes")}

    def add(quantity, value):
        out[(quantity, None)] += value

    for text in texts:
        add("syscall_tasks", 1)
        brk = None
        for line in text.splitlines():
            m = CALL.match(line)
            if not m:
                continue
            name, args, ret = m.group(1), [a.strip() for a in m.group(2).split(",")], m.group(3)
            if ret.startswith("-"):
                continue  # failed (or, for mmap, MAP_FAILED)
            if name == "execve":
                brk = None
            elif name == "brk":
                add("brk_calls", 1)
                new = _int(ret)
                if brk is not None and args[0] != "NULL":
                    add("brk_grow_bytes" if new > brk else "brk_shrink_bytes", abs(new - brk))
                brk = new
            elif name == "mmap" and len(args) >= 4:
                add("mmap_calls", 1)
                length, prot, flags = _int(args[1]), args[2], args[3]
                if "MAP_ANONYMOUS" not in flags or "MAP_FIXED" in flags:
                    add("mmap_other_bytes", length)
                elif "MAP_STACK" in flags:
                    add("mmap_stack_bytes", length)
                elif prot == "PROT_NONE":
                    add("mmap_reserve_bytes", length)
                else:
                    add("mmap_anon_bytes", length)
            elif name == "munmap" and len(args) >= 2:
                add("munmap_calls", 1)
                add("munmap_bytes", _int(args[1]))
            elif name == "mremap" and len(args) >= 3:
                add("mremap_calls", 1)
                old, new = _int(args[1]), _int(args[2])
                add("mremap_grow_bytes" if new > old else "mremap_shrink_bytes", abs(new - old))
            elif name == "mprotect" and len(args) >= 3:
                add("mprotect_calls", 1)
                if "PROT_READ" in args[2] and "PROT_WRITE" in args[2]:
                    add("mprotect_rw_bytes", _int(args[1]))
            elif name == "madvise" and len(args) >= 3:
                add("madvise_calls", 1)
                if args[2] in RELEASE_ADVICE:
                    add("madvise_release_bytes", _int(args[1]))
    return out


def trace_memory_calls(argv, timeout: float = TIMEOUT_S, extra_env=None) -> dict:
    strace = shutil.which("strace")
    if strace is None:
        raise HeapcostError("strace is not installed (apt-get install strace, or `make system-deps`)")
    with tempfile.TemporaryDirectory(prefix="heapcost-profile-") as tmp:
        tmp = Path(tmp)
        traces = tmp / "traces"
        traces.mkdir()
        wrapper = [strace, "-ff", "-qq", "-e", "signal=none", "-e", "trace=" + ",".join(TRACED),
                   "-o", str(traces / "task")]
        launch(argv, tmp, {**clean_env(tmp), **(extra_env or {})}, timeout, "system-call run", wrapper)
        texts = [p.read_text(errors="replace") for p in sorted(traces.iterdir())]
    return parse_trace(texts)


# ---- the timed runs, the profile ----
#
# The baseline's time T divides every added time, so how far it moves between two profiles of one program moves
# the prediction. Runs back to back see one state of the machine and understate that: the timed runs come in
# TIMED_BLOCKS blocks, back to back within a block, spread over the profile's run. The counting run goes first
# (it also warms the caches every later run finds); the blocks and the system-call run follow in an order drawn
# at random, so that a disturbance tied to a phase of the profile does not always fall on the same block. A
# program with one thread is timed pinned to one CPU, heapcost on the others, as the lockstep trials it is
# checked against are. The spread between the blocks' means (cpu_sd_log_blocks) is carried into the
# prediction's interval (stats/cost_model.base_se_log).

def block_sizes(runs: int, blocks: int | None = None) -> list[int]:
    """The timed runs split into at most `blocks` (TIMED_BLOCKS) blocks as evenly as they go, larger first."""
    blocks = max(1, min(TIMED_BLOCKS if blocks is None else blocks, runs))
    return [runs // blocks + (1 if i < runs % blocks else 0) for i in range(blocks)]


def run_order(blocks: int, syscalls: bool, rng) -> list:
    """The steps after the counting run: each block's index and, when traced, "trace", in an order drawn by
    `rng` (random.Random)."""
    steps = [*range(blocks), *(["trace"] if syscalls else [])]
    rng.shuffle(steps)
    return steps


def time_block(argv, timeout: float, runs: int, extra_env=None, cpu: int | None = None, placement: bool = False,
               rng=None) -> dict:
    """`runs` turns back to back (on CPU `cpu` when given), each a run with nothing preloaded and, with
    `placement`, one under the placement allocator in each mode, in an order drawn by `rng` each turn: the
    launcher results, {"glibc": results with nothing preloaded, and with `placement` each mode: its results}."""
    import random

    rng = rng or random.Random()
    results: dict = {"glibc": [], **({m: [] for m in PLACEMENT_MODES} if placement else {})}
    for _ in range(runs):
        turn = list(results)
        rng.shuffle(turn)
        for how in turn:
            with tempfile.TemporaryDirectory(prefix="heapcost-profile-") as tmp:
                env = {**clean_env(Path(tmp)), **(extra_env or {}), **(placement_env(how) if how != "glibc" else {})}
                what = "timed run" if how == "glibc" else f"timed run under the placement allocator ({how})"
                results[how].append(launch(argv, Path(tmp), env, timeout, what, cpu=cpu))
    return results


def placement_values(blocks: list[dict]) -> dict:
    """The placement quantities from the blocks' results ({"glibc" | mode: results}): each mode's median CPU
    time, and the spread of each turn's log CPU-time difference between the modes and the baseline."""
    def cpu(r):
        return r.user_s + r.sys_s

    out = {("placement_runs", None): sum(len(b["ordered"]) for b in blocks)}
    for mode in PLACEMENT_MODES:
        out[(f"placement_{mode}_cpu_s", None)] = statistics.median(cpu(r) for b in blocks for r in b[mode])
    for mode, against in (("ordered", "glibc"), ("shuffled", "ordered")):
        d = [math.log(max(cpu(x), 1e-6) / max(cpu(y), 1e-6)) for b in blocks for x, y in zip(b[mode], b[against])]
        out[(f"placement_{mode}_sd_log", None)] = statistics.stdev(d) if len(d) > 1 else 0.0
    return out


def timed_values(blocks: list[list], pinned: bool) -> dict:
    """The profile's timed quantities from the blocks' results: the medians over every run, the spread of the
    runs' log CPU times and that of the blocks' means."""
    results = [r for b in blocks for r in b]
    logs = [[math.log(max(r.user_s + r.sys_s, 1e-6)) for r in b] for b in blocks]
    every = [x for b in logs for x in b]
    out = {("timed_runs", None): len(results), ("timed_blocks", None): len(blocks),
           ("timed_pinned", None): int(bool(pinned)),
           ("wall_s", None): statistics.median(r.wall_s for r in results),
           ("user_s", None): statistics.median(r.user_s for r in results),
           ("sys_s", None): statistics.median(r.sys_s for r in results),
           ("cpu_sd_log", None): statistics.stdev(every) if len(every) > 1 else 0.0,
           ("maxrss_kb", None): int(statistics.median(r.maxrss_kb for r in results))}
    if len(blocks) > 1:
        out[("cpu_sd_log_blocks", None)] = statistics.stdev(statistics.fmean(b) for b in logs)
    return out


def profile_rows(values: dict) -> list[dict]:
    """The tidy rows, in the schema's order of quantities, then by size class (the total first)."""
    order = {q: i for i, q in enumerate(PROFILE_QUANTITIES)}
    rows = []
    for (quantity, size_class), value in sorted(values.items(),
                                                key=lambda kv: (order[kv[0][0]], -1 if kv[0][1] is None else kv[0][1])):
        if isinstance(value, float):
            value = round(value, 6)
        rows.append({"quantity": quantity, "size_class": "" if size_class is None else size_class, "value": value})
    return rows


def profile(command, timeout: float = TIMEOUT_S, syscalls: bool = True, runs: int = TIMED_RUNS,
            placement: bool = True) -> list[dict]:
    """The allocation profile of `command` (PROGRAM ARGS...) as tidy rows. Without strace (or with syscalls
    False) the system-call quantities are left out, with a warning when strace was wanted; without `placement`,
    the placement allocator's runs."""
    return profile_argv(resolve_command(list(command)), timeout, syscalls, runs, placement=placement)


def runs_made(runs: int = TIMED_RUNS, syscalls: bool = True, placement: bool = True) -> int:
    """How many runs of the program a profile makes: the counting run, the timed ones (and, with placement,
    two more beside each), the system-call run."""
    return 1 + runs * (1 + len(PLACEMENT_MODES) * bool(placement)) + bool(syscalls)


def profile_argv(argv, timeout: float = TIMEOUT_S, syscalls: bool = True, runs: int = TIMED_RUNS,
                 extra_env=None, rng=None, placement: bool = False) -> list[dict]:
    """The profile's rows of a resolved argv, its processes started with `extra_env` over the fixed small one:
    the counting run, then the timed blocks (with `placement`, the placement allocator's runs in them) and the
    system-call run in an order drawn by `rng` (a random.Random; a fresh one when not given)."""
    import random

    rng = rng or random.Random()
    values = count_calls(argv, timeout, extra_env)
    traced = bool(syscalls and shutil.which("strace"))
    if syscalls and not traced:
        warn("strace is not installed: the profile has no mmap, munmap or brk counts (apt-get install strace)")
    sizes = block_sizes(runs)
    one_thread = (values.get(("threads", None)) or 1) <= 1
    trial_cpu = launcher.default_trial_cpu() if one_thread else None
    blocks = []
    with launcher.pinned(trial_cpu):
        for step in run_order(len(sizes), traced, rng):
            if step == "trace":
                values.update(trace_memory_calls(argv, timeout, extra_env))
            else:
                blocks.append(time_block(argv, timeout, sizes[step], extra_env, cpu=trial_cpu, placement=placement,
                                         rng=rng))
    if placement:
        values.update(placement_values(blocks))
    values.update(timed_values([b["glibc"] for b in blocks], pinned=trial_cpu is not None))
    return profile_rows(values)


# ---- heapcost's own workloads: a run of the dataset ----

LABEL = "workloads"
DEFAULT_SCALE = 0.25  # the quick profile's scale: the scale of the time runs whose cells the profiles predict


def workload_rows(workload_id: str, scale: float, timeout: float = TIMEOUT_S, syscalls: bool = True,
                  runs: int = TIMED_RUNS, placement: bool = False) -> list[dict]:
    """A heapcost workload's profile, run as a time run runs it under the system glibc: its argv and its
    environment at that scale, from a scratch folder; with `placement`, the placement allocator's runs beside
    the timed ones, whose shares the cost model's placement terms multiply."""
    from analysis.harness.workloads import builtin as workloads

    workload = workloads.get(workload_id)
    workload.prepare("glibc")
    argv = [str(a) for a in workload.argv(scale, "glibc", {})]
    return profile_argv(argv, timeout, syscalls, runs, extra_env=workload.env(scale), placement=placement)


def record_workloads(names, scale=DEFAULT_SCALE, timeout: float = TIMEOUT_S, syscalls: bool = True,
                     runs: int = TIMED_RUNS, force=None, runs_dir=None, placement: bool = True) -> Path:
    """Profile heapcost's own workloads into a run of kind `profile` (machine.json, run.json, profiles.csv):
    alone on the machine, as every run of the dataset, since its timed runs give each workload's time under
    the baseline; with `placement` (recorded in run.json), the placement allocator's runs beside them, so that
    the debated cells are predicted with the placement terms as `cost` predicts a program. A run stopped part
    way is resumed with the same parameters; its profiled workloads are kept."""
    from analysis.harness.workloads import builtin as workloads
    from analysis.harness.workloads.builtin import check_scale

    ids = workloads.expand([n.strip() for n in str(names).split(",") if n.strip()])
    if not ids:
        raise HeapcostError("--workloads names no workload")
    scale = check_scale(scale)
    params = {"workloads": ids, "scale": scale, "timed_runs": runs, "syscalls": bool(syscalls and shutil.which("strace")),
              "timeout_s": timeout, **({"placement": True} if placement else {})}
    jobs = [(wid, scale, lambda wid=wid: workload_rows(wid, scale, timeout, params["syscalls"], runs, placement))
            for wid in ids]
    return _record(LABEL, params, jobs, force, runs_dir)


PROGRAMS_LABEL = "programs"


def record_programs(programs_set: str, names=None, timeout: float = TIMEOUT_S, syscalls: bool = True,
                    runs: int = TIMED_RUNS, force=None, runs_dir=None) -> Path:
    """Profile the cost check's programs of a set (harness/workloads/cost_programs.py) on their inputs, the
    placement allocator's runs included, into a run of kind `profile` labelled `programs`: what the check of a
    registration made before the profile had placement runs reads for its programs' placement shares on this
    processor kind (publish/results/cost_check.py), the inputs' sha256s recorded so that only the same bytes
    are matched. Alone on the machine, as every run of the dataset."""
    import shlex

    from analysis.harness.workloads import cost_inputs, cost_programs
    from analysis.paths import file_sha256

    programs = cost_programs.chosen(names, programs_set)
    inputs = cost_inputs.write_inputs(cost_inputs.INPUTS_DIR, programs)
    commands = cost_programs.commands(programs, inputs)
    traced = bool(syscalls and shutil.which("strace"))
    params = {"programs_set": programs_set, "programs": [p.name for p in programs], "timed_runs": runs,
              "syscalls": traced, "placement": True, "timeout_s": timeout,
              "input_sha256": {p.name: file_sha256(inputs[p.input]) if p.input else "" for p in programs}}
    jobs = [(p.name, 1, lambda p=p: profile(shlex.split(commands[p.name]), timeout, traced, runs, placement=True))
            for p in programs]
    return _record(PROGRAMS_LABEL, params, jobs, force, runs_dir)


def _record(label: str, params: dict, jobs, force=None, runs_dir=None) -> Path:
    """A run of kind `profile` labelled `label` with `params`, a profile per job (name, scale, a function giving
    its rows): resumed with the same parameters where a run stopped part way, its profiled names kept."""
    import time

    from analysis.contract import runstore
    from analysis.contract.profile_schema import PROFILE_RUN_COLUMNS, RUN_KIND, RUN_TABLE
    from analysis.harness.process import machine, quiet
    from analysis.paths import RUNS_DIR

    runs_dir = Path(runs_dir or RUNS_DIR)
    with quiet.CampaignLock(runs_dir, force) as lock:
        run_dir, info = runstore.start_run(RUN_KIND, label, params, runs_dir=runs_dir)
        info.setdefault("quiet", []).append({"utc": runstore.utc_now(), **lock.record})
        if not (run_dir / "machine.json").exists():
            runstore.write_json_atomic(run_dir / "machine.json", machine.describe_machine(["libc6", "strace"]))
        runstore.write_json_atomic(run_dir / "run.json", info)
        table = runstore.AppendTable(run_dir / RUN_TABLE, PROFILE_RUN_COLUMNS)
        done = {r["workload"] for r in table.rows()}
        try:
            for name, scale, rows_of in jobs:
                if name in done:
                    continue
                started = time.monotonic()
                rows = rows_of()
                for row in rows:
                    table.append({"run_id": run_dir.name, "workload": name, "scale": f"{scale:g}", **row})
                runstore.add_elapsed(run_dir, info, time.monotonic() - started)
                print(f"{name}: {summary(rows)}", flush=True)
        except BaseException:
            if not table.rows():  # nothing profiled: no half-made run is left behind (one with rows resumes)
                runstore.discard_run(run_dir)
            raise
        finally:
            table.close()
        runstore.finish_run(run_dir, "complete")
    return run_dir


def csv_text(rows: list[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=PROFILE_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def summary(rows: list[dict]) -> str:
    total = {r["quantity"]: r["value"] for r in rows if r["size_class"] == ""}
    allocations = sum(total.get(f"{e}_calls", 0) for e in PROFILE_ENTRY_POINTS if e != "free")
    share = total.get("reuse_share")
    parts = [f"{allocations} allocation calls, {total.get('free_calls', 0)} frees",
             f"{share:.1%} of frees reused within {total.get('reuse_window')} allocations" if share is not None
             else "no frees", f"threads that allocated: {total.get('threads', 0)}"]
    if "mmap_calls" in total:
        parts.append(f"{total['mmap_calls']} mmap / {total['munmap_calls']} munmap calls")
    parts.append(f"wall {total['wall_s']:.3f} s")
    if "placement_ordered_cpu_s" in total:
        parts.append(f"CPU {total['user_s'] + total['sys_s']:.3f} s, {total['placement_ordered_cpu_s']:.3f} s blocks "
                     f"side by side, {total['placement_shuffled_cpu_s']:.3f} s scattered")
    return "; ".join(parts)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = ("%(prog)s [--out FILE.csv] [--timeout S] [--runs N] [--no-syscalls] -- PROGRAM ARGS...\n"
                    "       %(prog)s --workloads ID,ID [--scale S] [--timeout S] [--runs N] [--no-syscalls] [--force]")
    parser.add_argument("--out", help="write the profile CSV here (default: standard output)")
    parser.add_argument("--workloads", help="profile these heapcost workloads (ids or groups) instead of a program, "
                        "into a run of the dataset (data/runs/, kind profile), alone on the machine")
    parser.add_argument("--scale", type=float, default=DEFAULT_SCALE,
                        help=f"with --workloads: the workloads' scale (default {DEFAULT_SCALE:g}, the quick profile's)")
    parser.add_argument("--force", action="store_true",
                        help="with --workloads: profile even on a busy machine (recorded in run.json)")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S,
                        help=f"seconds each run of the program may take (default {TIMEOUT_S})")
    parser.add_argument("--runs", type=int, default=TIMED_RUNS,
                        help=f"timed runs with nothing preloaded; the profile keeps their medians (default {TIMED_RUNS})")
    parser.add_argument("--no-syscalls", action="store_true",
                        help="skip the system-call run under strace (no mmap, munmap or brk quantities)")
    parser.add_argument("--no-placement", action="store_true",
                        help="skip the runs under heapcost's placement allocator (no placement quantities: the cost "
                        "model then predicts without its placement terms)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the program and its arguments, after --")


def run(args) -> int:
    if args.timeout <= 0:
        raise HeapcostError(f"--timeout must be positive, not {args.timeout:g}")
    if args.runs < 1:
        raise HeapcostError(f"--runs must be at least 1, not {args.runs}")
    if args.workloads:
        if [w for w in args.command if w != "--"]:
            raise HeapcostError("give --workloads or a program after --, not both")
        if args.out:
            raise HeapcostError("--out is for a program's profile: --workloads writes a run into data/runs/")
        run_dir = record_workloads(args.workloads, args.scale, args.timeout, not args.no_syscalls, args.runs,
                                   force="1" if args.force else None,
                                   placement=not getattr(args, "no_placement", False))
        print(run_dir)
        return 0
    placement = not getattr(args, "no_placement", False)
    rows = profile(args.command, timeout=args.timeout, syscalls=not args.no_syscalls, runs=args.runs,
                   placement=placement)
    print(f"profile: {runs_made(args.runs, not args.no_syscalls, placement)} runs of the program", file=sys.stderr)
    text = csv_text(rows)
    if not args.out:
        sys.stdout.write(text)
        return 0
    out = Path(args.out)
    if out.parent and not out.parent.is_dir():
        raise HeapcostError(f"--out: folder {out.parent} does not exist")
    out.write_text(text)
    print(f"{out}: {summary(rows)}")
    return 0
