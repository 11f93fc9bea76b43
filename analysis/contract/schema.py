"""The data contract: every table of the dataset, its columns, their meaning and how to read them.

Everything that writes or reads trials.csv, counts.csv, probes.csv or literature/figures.csv takes the
columns, statuses, the warm-up encoding and the usable-trials rule from here. datapackage.json, the
validation and the codebook (data/README.md) are generated from these Table Schemas.
"""
from collections import Counter
from pathlib import Path

import pandas as pd

from analysis.contract.fields import field as _f
from analysis.contract.profile_schema import PROFILE_RUN, RUN_TABLE

STATUS_TRIAL = ["ok", "failed", "crashed", "timeout", "wrong-malloc", "bad-checksum", "spawn-failed", "skipped"]
STATUS_COUNT = ["ok", "missing"] + STATUS_TRIAL[1:]
OK = "ok"
# warm-up is written 0/1 in trials.csv; readers accept what pandas or a hand-made CSV may hold
WARMUP_TRUE = frozenset({"1", "true", "yes", "t"})


# how every path in a run is written (analysis.paths.portable_text): no folder of the measuring machine
PORTABLE_PATHS = "Paths are portable: {cache}/... inside the allocator cache, {venv}/... inside the virtual environment, relative to the repository inside it, system paths as they are."


INTERFERED = (
    "1 when measured during interference; kept, and counted by the analysis. Runs with cpu_other_s: others "
    "used more than the thresholds of analysis/harness/process/quiet.py on the trial's own CPU (cpu_other_s) or on the "
    "other CPUs (other_cpu_s - cpu_other_s), thresholds measured by `make bench` (bench/results.md, "
    "interference); unpinned trials are judged by the other-CPU thresholds. Earlier runs: other_cpu_s above a "
    "quarter of the wall time and above 0.02 s.")

TRIALS = [
    _f("run_id", "string", "The run this trial belongs to (its directory name).", required=True),
    _f("seq", "integer", "Position of the trial in the run's randomized order; unique within a run.",
       required=True, minimum=0),
    _f("block", "integer", "Randomized block: every (allocator, workload) pair runs once per block.", minimum=0),
    _f("warmup", "integer", "1 for warm-up blocks, excluded from statistics.", enum=[0, 1]),
    _f("workload", "string", "Workload id (see analysis/harness/workloads/builtin.py).", required=True),
    _f("allocator", "string", "Allocator id (see allocators.toml, run.json).", required=True),
    _f("scale", "number", "Workload scale actually run (profile scale x the allocator's scale factor).",
       minimum=0),
    _f("status", "string", "ok, or why the trial does not count: non-zero exit (failed), a signal (crashed), "
       "timeout, malloc not from the expected library (wrong-malloc), wrong or missing checksum "
       "(bad-checksum), exec failure (spawn-failed), not run because the pair timed out in the warm-up "
       "block (skipped).", required=True, enum=STATUS_TRIAL),
    _f("reason", "string", "Why a trial is not ok: signal or exit code and the first line of its stderr."),
    _f("exit_code", "integer", "Exit status of the workload process, when it exited."),
    _f("signal", "integer", "Signal that ended the workload process, when one did."),
    _f("wall_s", "number", "Wall-clock time from fork to reaping the process (CLOCK_MONOTONIC).", "s", minimum=0),
    _f("user_s", "number", "User CPU time of the process and its reaped children (wait4 rusage).", "s", minimum=0),
    _f("sys_s", "number", "System CPU time of the process and its reaped children.", "s", minimum=0),
    _f("maxrss_kb", "integer", "Peak resident set size of the process (or its largest child), ru_maxrss; "
       "measured from a tiny launcher so the parent's size is not carried over.", "KiB", minimum=0),
    _f("minflt", "integer", "Minor page faults.", minimum=0),
    _f("majflt", "integer", "Major page faults.", minimum=0),
    _f("nvcsw", "integer", "Voluntary context switches.", minimum=0),
    _f("nivcsw", "integer", "Involuntary context switches (preemptions: a sign of interference).", minimum=0),
    _f("clock_probe_s", "number", "Mean of probe_before_s and probe_after_s: tracks the core's clock rate.", "s"),
    _f("probe_before_s", "number", "Time of a fixed spin loop (run.json probe_iters) just before the trial.", "s"),
    _f("probe_after_s", "number", "Time of the same spin loop just after the trial.", "s"),
    _f("malloc_lib", "string", "The shared object every process of the trial bound malloc to (mallocwho), "
       "'musl-static' for statically relinked musl binaries, '+ perl malloc' when perl's own is in use. "
       + PORTABLE_PATHS),
    _f("env_pad", "integer", "Random extra bytes of environment for this trial (on top of padding every "
       "allocator's environment to the same size).", "bytes", minimum=0),
    _f("loadavg1", "number", "1-minute load average when the trial started."),
    _f("started_utc", "datetime", "When the trial started (UTC)."),
    # added with the timing protocol; older runs lack them and readers must accept that
    _f("other_cpu_s", "number", "CPU time the rest of the machine used during the trial: the busy time of "
       "all CPUs in /proc/stat (user, nice, system, irq, softirq) minus the trial's own user+sys; counted in "
       "clock ticks, so coarse for short trials. Includes the harness's own few milliseconds.", "s",
       minimum=0),
    _f("steal_s", "number", "Steal time of all CPUs during the trial (/proc/stat): time the hypervisor "
       "ran other guests instead of this machine.", "s", minimum=0),
    _f("interfered", "integer", INTERFERED, enum=[0, 1]),
    # added with the interference thresholds (bench/interference.py); older runs lack it
    _f("cpu_other_s", "number", "Of other_cpu_s, the part on the trial's own CPU (its line of /proc/stat, "
       "the trial's own time and the launcher's clock probes subtracted); empty for unpinned trials.", "s",
       minimum=0),
    # added with the request-serving workload (redis); empty for the others, and older runs lack them
    _f("requests_per_s", "number", "A server workload's throughput as its client saw it: every request sent "
       "over the client's wall time, start to exit (the workload's `metric requests_per_s=` line).",
       "1/s", minimum=0),
    _f("p50_ms", "number", "A server workload's median request latency: the geometric mean over the client's "
       "tests of each test's median.", "ms", minimum=0),
    _f("p99_ms", "number", "A server workload's 99th-percentile request latency: the geometric mean over the "
       "client's tests of each test's 99th percentile.", "ms", minimum=0),
    # added with the kernel build workload (linux-build); empty for the others, and older runs lack them
    _f("tree_peak_rss_kb", "integer", "A build's peak memory as a whole: the largest sum of the resident memory "
       "of make and all its descendants over the samples its driver took from /proc (statm) every 10 ms while "
       "make ran (the workload's `metric tree_peak_rss_kb=` line). Pages processes share (a program's text, "
       "libc) count in every process that has them; a process living less than 10 ms may be missed. maxrss_kb is the largest "
       "single process.", "KiB", minimum=0),
    _f("tree_peak_anon_kb", "integer", "The same peak of the anonymous resident memory (resident minus file and "
       "shared memory): each process's own pages, where its heap lives (`metric tree_peak_anon_kb=`).", "KiB",
       minimum=0),
]

COUNTS = [
    _f("run_id", "string", "The callgrind run (directory name).", required=True),
    _f("workload", "string", "Workload id.", required=True),
    _f("allocator", "string", "Allocator id.", required=True),
    _f("scale", "number", "Workload scale run under callgrind.", minimum=0),
    _f("status", "string", "ok, or missing (it could not be measured under valgrind: see reason).",
       required=True, enum=STATUS_COUNT),
    _f("reason", "string", "What happened when status is not ok."),
    _f("instructions", "integer", "Instructions executed (callgrind Ir), all processes of the workload.",
       minimum=0),
    _f("data_reads", "integer", "Data reads (Dr).", minimum=0),
    _f("data_writes", "integer", "Data writes (Dw).", minimum=0),
    _f("d1_read_misses", "integer", "Simulated L1 data cache read misses (D1mr).", minimum=0),
    _f("d1_write_misses", "integer", "Simulated L1 data cache write misses (D1mw).", minimum=0),
    _f("malloc_calls", "integer", "malloc calls of the workload at this scale (counted once per workload "
       "under glibc with the malloccount shim: the demand, independent of the allocator).", minimum=0),
    _f("free_calls", "integer", "free calls with a non-NULL pointer (same counting).", minimum=0),
    _f("calloc_calls", "integer", "calloc calls (same counting).", minimum=0),
    _f("realloc_calls", "integer", "realloc calls (same counting).", minimum=0),
    _f("malloc_lib", "string", "The shared object malloc resolved to under valgrind. " + PORTABLE_PATHS),
    _f("alloc_instructions", "integer", "Instructions executed inside the allocator: the inclusive Ir of every "
       "call into an allocator entry point (malloc, free, calloc, realloc, the aligned ones, operator new and "
       "delete, and their aliases) from a function that is not one, from callgrind's call graph. Empty in runs "
       "published before it existed.", minimum=0),
    _f("alloc_data_writes", "integer", "Data writes (Dw) inside the allocator, counted the same way.", minimum=0),
]

PROBES = [
    _f("run_id", "string", "The probe run (directory name).", required=True),
    _f("allocator", "string", "Allocator id.", required=True),
    _f("probe", "string", "Probe id (see probes/README.md and analysis/harness/security/probes.py).", required=True),
    _f("size", "integer", "Block size the misuse worked on (the probe's argv[1]); empty for the entropy "
       "probes, which take no size. Runs published before sizes existed lack the column: one size per "
       "probe (the probe's old default).", "bytes", minimum=1),
    _f("outcome", "string", "caught: the allocator stopped the misuse (its message or abort, a trap or fault "
       "in its code, or a guard page at the misusing access) before the primitive; mitigated: the program "
       "went on but the primitive failed; missed: the primitive was achieved (a crash or an allocator "
       "message after it does not change that); late-crash: it broke later, in the probe's own code, or "
       "hung; allocator-failed-to-start: the process died before the probe's setup was done (the detail "
       "has its first stderr line); n/a: not applicable at this size or not runnable (see detail). The "
       "outcome of the majority of the trials (ties go to the one better for the attacker); see outcomes.",
       required=True),
    _f("outcomes", "string", "Count of each outcome over the trials, most frequent first, as "
       "`name=count` separated by spaces (more than one name: the probe is random here), plus "
       "`detected-silently=k`: of the missed trials, those in which the allocator printed a message. "
       "Empty in runs published before it existed."),
    _f("trials", "integer", "Fresh processes run for this probe at this size.", minimum=0),
    _f("rate", "number", "Fraction of the usable trials (neither n/a nor allocator-failed-to-start) in "
       "which the primitive was achieved (missed).", minimum=0, maximum=1),
    _f("rate_ci_low", "number", "Clopper-Pearson 95% lower bound of rate.", minimum=0, maximum=1),
    _f("rate_ci_high", "number", "Clopper-Pearson 95% upper bound of rate.", minimum=0, maximum=1),
    _f("bits", "number", "Entropy estimate (entropy probes).", "bits"),
    _f("bits_ci_low", "number", "95% lower bound of bits.", "bits"),
    _f("bits_ci_high", "number", "95% upper bound of bits.", "bits"),
    _f("detail", "string", "The allocator's message or what the probe observed; `outcomes differ: ...` "
       "when the trials disagree."),
]
# Columns added after runs were published: a table without them is still read and validated.
ADDED_COLUMNS = {"probes.csv": ("size", "outcomes")}


def _side(name, type_, description, unit=None, **constraints):
    """A column of each process of a lockstep pair: `<name>` with a or b in place of `{}`."""
    return [_f(name.format(s), type_, description.format(s.upper()), unit, **constraints) for s in "ab"]


PAIRS = [
    _f("run_id", "string", "The run this pair belongs to (its directory name).", required=True),
    _f("seq", "integer", "Position of the pair in the run's randomized order; unique within a run: the pair's id.",
       required=True, minimum=0),
    _f("block", "integer", "Randomized block: every (allocator, workload) cell runs one pair per block.", minimum=0),
    _f("warmup", "integer", "1 for warm-up blocks, excluded from statistics.", enum=[0, 1]),
    _f("workload", "string", "Workload id (a C workload that takes turns: workloads/wl_common.h wl_turn).",
       required=True),
    _f("scale", "number", "Workload scale both processes ran.", minimum=0),
    _f("allocator_a", "string", "Allocator of process A, as it ran. Runs whose run.json has lockstep_roles "
       "'alternating' put the baseline in A in half the blocks and in B in the others; earlier runs always in A. "
       "Readers turn the rows so that A is the baseline (contract.schema.oriented_pairs) before taking B/A.",
       required=True),
    _f("allocator_b", "string", "Allocator of process B, as it ran (compared with A: the ratio is B/A once "
       "the rows are turned so that A is the baseline).", required=True),
    _f("first", "string", "Which process got the token first (alternates between blocks).", enum=["a", "b"]),
    _f("cpu", "integer", "The CPU both processes were pinned to (the harness ran on the others).", minimum=0),
    _f("chunk_us", "integer", "Turn length: a process passes the token after about this much of its own work. "
       "For a brought program taking turns from outside (run.json protocol_cells 'alternating'): the slice each "
       "process runs before the driver stops it and continues the other.", "microseconds", minimum=0),
    _f("status", "string", "ok when both processes are ok, else the first failing process's status "
       "(statuses as in trials.csv; 'failed' also when a process printed no lockstep report).",
       required=True, enum=STATUS_TRIAL),
    _f("reason", "string", "Why the pair does not count: the failing process (a or b) and its reason."),
    *_side("active_{}_s", "number", "Process {0}'s own active time: CLOCK_MONOTONIC from getting the token to "
           "passing it, summed over its turns (start-up and exit excluded). The measurement of the pair. For a "
           "brought program taking turns from outside: side {0}'s CPU time (user + system) per completed run of "
           "the window.", "s", minimum=0),
    *_side("turns_{}", "integer", "How many times process {0} passed the token; for a brought program taking "
           "turns from outside, side {0}'s runs completed in the window.", minimum=0),
    *_side("wall_{}_s", "number", "Process {}'s wall time from the pair's start to its reaping (waiting "
           "turns included).", "s", minimum=0),
    *_side("user_{}_s", "number", "Process {}'s user CPU time (wait4 rusage).", "s", minimum=0),
    *_side("sys_{}_s", "number", "Process {}'s system CPU time.", "s", minimum=0),
    *_side("maxrss_{}_kb", "integer", "Process {}'s peak resident set size (ru_maxrss).", "KiB", minimum=0),
    *_side("status_{}", "string", "Process {}'s own status (as in trials.csv).", enum=STATUS_TRIAL),
    *_side("exit_code_{}", "integer", "Process {}'s exit status, when it exited."),
    *_side("malloc_lib_{}", "string", "The shared object process {} bound malloc to (mallocwho). "
           + PORTABLE_PATHS.replace("{", "{{").replace("}", "}}")),
    *_side("env_pad_{}", "integer", "Random extra bytes of environment of process {}.", "bytes", minimum=0),
    _f("loadavg1", "number", "1-minute load average when the pair started."),
    _f("other_cpu_s", "number", "CPU time the rest of the machine used during the pair (as in trials.csv, "
       "both processes' own time subtracted).", "s", minimum=0),
    _f("steal_s", "number", "Steal time during the pair (as in trials.csv).", "s", minimum=0),
    _f("interfered", "integer", INTERFERED, enum=[0, 1]),
    _f("started_utc", "datetime", "When the pair started (UTC)."),
    _f("cpu_other_s", "number", "Of other_cpu_s, the part on the pair's CPU (as in trials.csv).", "s",
       minimum=0),
]

PRIMITIVES = [
    _f("run_id", "string", "The probe run (directory name).", required=True),
    _f("allocator", "string", "Allocator id.", required=True),
    _f("bug_class", "string", "The bug injected once in every sequence (probes/primitive_sequences.c); "
       "control: none, so any primitive there is a false positive of the checks.", required=True,
       enum=["overflow", "write-after-free", "double-free", "invalid-free", "control"]),
    _f("capability", "string", "What the attacker knows: none (links written as raw addresses) or heap-leak "
       "(links encoded as glibc's safe-linking stores them, (pos >> 12) ^ target).", required=True,
       enum=["none", "heap-leak"]),
    _f("primitive", "string", "overlap, chosen-address, neighbour-write, metadata-write, allocator-write, "
       "any (any of overlap, chosen-address, metadata-write, allocator-write), or strong (overlap, "
       "chosen-address or allocator-write: the allocator itself steered by the attacker).", required=True),
    _f("sequences", "integer", "Sequences run (each in its own process).", minimum=0),
    _f("count", "integer", "Sequences in which the primitive appeared.", minimum=0),
    _f("rate", "number", "count / sequences.", minimum=0, maximum=1),
    _f("rate_ci_low", "number", "Wilson 95% interval, low end.", minimum=0, maximum=1),
    _f("rate_ci_high", "number", "Wilson 95% interval, high end.", minimum=0, maximum=1),
    _f("median_attempts", "number", "Median spray allocations before the primitive, over the sequences that "
       "found it during the spray.", minimum=0),
    _f("detected", "integer", "Sequences the allocator stopped (a signal, an abort or an exit of its own).",
       minimum=0),
    _f("hangs", "integer", "Sequences that hung (the driver's per-sequence alarm).", minimum=0),
    _f("signals", "string", "`signal:si_code:where=count` of the stopped sequences (where: alloc = inside an "
       "allocator call, misuse = at the bug's own access, driver = elsewhere)."),
    _f("seed", "integer", "Seed of the sequence generator: the same sequences under every allocator."),
    _f("cpu_s", "number", "CPU time of the cell's driver processes and their sequences (user + system).", "s",
       minimum=0),
    _f("detail", "string", "Why a cell has no sequences (not runnable here), else empty."),
]

TECHNIQUE_OUTCOMES = ["works", "stopped", "not-applicable", "crashes", "hangs", "not-run"]
TECHNIQUES = [
    _f("run_id", "string", "The probe run (directory name).", required=True),
    _f("technique", "string", "The brought technique program, by file name (how2heap's glibc_2.36 programs, built "
       "by hand: run.json's params.techniques has each program's sha256, the upstream revision and the build flags).",
       required=True),
    _f("allocator", "string", "Allocator id.", required=True),
    _f("outcome", "string", "works: the program exited 0, its own checks of the technique held; stopped: the "
       "allocator ended it with its own message (glibc's malloc(): / free(): / double free or corruption, scudo, "
       "hardened_malloc, ...) or a deliberate trap or write to address 0 in its own code; not-applicable: the "
       "technique's own assertion failed (its precondition or result did not hold here) before the allocator "
       "ended it; crashes: another signal or a non-zero exit without an allocator message; hangs: killed at the "
       "timeout; not-run: it could not run under this allocator (detail). The outcome of the most runs (ties go "
       "to the one better for the attacker); see outcomes. Rules: analysis/harness/security/technique_verdict.py.",
       required=True, enum=TECHNIQUE_OUTCOMES),
    _f("outcomes", "string", "Count of each outcome over the runs, most frequent first, as `name=count` "
       "separated by spaces (more than one name: the outcome is random here)."),
    _f("runs", "integer", "Fresh processes run for this cell (fewer than asked when three hung, or malloc came "
       "from another library).", minimum=0),
    _f("works", "integer", "Runs in which the technique worked.", minimum=0),
    _f("rate", "number", "works over the runs that ran (not not-run).", minimum=0, maximum=1),
    _f("rate_ci_low", "number", "Clopper-Pearson 95% lower bound of rate.", minimum=0, maximum=1),
    _f("rate_ci_high", "number", "Clopper-Pearson 95% upper bound of rate.", minimum=0, maximum=1),
    _f("program_sha256", "string", "sha256 of the program that ran.", pattern="[0-9a-f]{64}"),
    _f("detail", "string", "How many runs gave the outcome and one run's account: the allocator's message, the "
       "technique's failed assertion, the signal and the object it was raised in."),
]

# The store sequences a poisoning free can execute, timed alone (mechanism runs: harness/mechanisms/store_sequence.py,
# mechanisms/store_sequence.c); the program's names
STORE_SEQUENCES = ["none", "rep-stosb", "rep-stosq-gcc", "memset-call", "stores-16"]
WORKING_SETS = ["hot", "heap"]
STORE_SEQUENCE = [
    _f("run_id", "string", "The mechanism run (directory name).", required=True),
    _f("seq", "integer", "Position of the measurement in the run's order; unique within a run.", required=True,
       minimum=0),
    _f("block", "integer", "Block: every cell (working set, bytes, sequence) is measured once per block, the groups "
       "(working set, bytes) in a fresh random order and a group's sequences back to back in a fresh random order. "
       "Block 0 is the warm-up, which also calibrates each cell's repetitions.", required=True, minimum=0),
    _f("warmup", "integer", "1 for the warm-up block, excluded from statistics.", enum=[0, 1]),
    _f("working_set", "string", "Where the stores go. hot: one 16-byte-aligned block stored over and over (it "
       "stays in the L1 cache: the cheapest case); heap: blocks of `bytes` bytes packed in a region of run.json's "
       "params.heap_kib KiB, visited in a fixed random order, as the frees of a busy heap reach them.",
       required=True, enum=WORKING_SETS),
    _f("sequence", "string", "What one repetition stores over the block (the poison byte 0xe5): none (the walk "
       "to the next block alone), rep-stosb (`rep stosb` of the block's bytes), rep-stosq-gcc (gcc's lowering "
       "of a bounded memset as the gcc build of mozjemalloc has it: an 8-byte store at each end, then `rep stosq` "
       "over the 8-aligned rest), memset-call (a call to libc's memset through the PLT, as the clang build makes "
       "it), stores-16 (a loop of aligned 16-byte SSE2 stores). analysis/harness/mechanisms/store_sequence.c.",
       required=True, enum=STORE_SEQUENCES),
    _f("bytes", "integer", "Bytes one sequence stores (the size of the block poisoned).", "bytes", required=True,
       minimum=16),
    _f("repetitions", "integer", "Sequences run back to back in this measurement (each cell's count is "
       "calibrated in the warm-up block to about run.json's params.target_us microseconds).", required=True,
       minimum=1),
    _f("elapsed_ns", "integer", "CLOCK_MONOTONIC time of the repetitions, on the pinned CPU.", "ns",
       required=True, minimum=0),
    _f("ns", "number", "elapsed_ns / repetitions: one sequence's time, the walk to its block included (the "
       "sequence none is the walk alone).", "ns", minimum=0),
]

TABLE_SCHEMAS = {"trials.csv": TRIALS, "counts.csv": COUNTS, "probes.csv": PROBES, "pairs.csv": PAIRS,
                 "primitives.csv": PRIMITIVES, "techniques.csv": TECHNIQUES, "store_sequence.csv": STORE_SEQUENCE,
                 RUN_TABLE: PROFILE_RUN}
TRIAL_COLUMNS = [f["name"] for f in TRIALS]
PAIR_COLUMNS = [f["name"] for f in PAIRS]
COUNT_COLUMNS = [f["name"] for f in COUNTS]
PROBE_COLUMNS = [f["name"] for f in PROBES]
PRIMITIVE_COLUMNS = [f["name"] for f in PRIMITIVES]
TECHNIQUE_COLUMNS = [f["name"] for f in TECHNIQUES]
STORE_SEQUENCE_COLUMNS = [f["name"] for f in STORE_SEQUENCE]


def table_schema(filename: str, header: list[str] | None = None) -> dict | None:
    """The Table Schema of a known table, given the file's header: columns added after it was written
    (ADDED_COLUMNS, or new ones at the end: its header a prefix of ours) are left out when the file lacks
    them; any other difference still fails."""
    fields = TABLE_SCHEMAS.get(filename)
    if fields is None:
        return None
    if header is not None:
        added = set(ADDED_COLUMNS.get(filename, ())) - set(header)
        fields = [f for f in fields if f["name"] not in added]
        names = [f["name"] for f in fields]
        if 0 < len(header) < len(names) and names[:len(header)] == list(header):
            fields = fields[:len(header)]
    return {"fields": fields, "missingValues": [""]}


def known_header(columns: list[str], header: list[str]) -> bool:
    """True when a table's header is ours or an older version of it (ours with columns missing at the end)."""
    return 0 < len(header) <= len(columns) and list(columns[:len(header)]) == list(header)


# The Table Schema of figures.csv (datapackage.json and the codebook in data/README.md come from it).
LITERATURE_SCHEMAS = {"figures.csv": {"missingValues": [""], "fields": [
    _f("seed", "string", "Seed number, 000 to 004.", required=True, pattern="00[0-4]"),
    _f("file", "string", "Seed file name in shared/seeds/.", required=True),
    _f("line", "integer", "1-based line of that file the number is printed on (seed 001 is one long "
           "line: all its rows cite line 2).", required=True, minimum=1),
    _f("condition", "string", "The arm: allocator or configuration as the author names it."),
    _f("benchmark", "string", "The program or benchmark that was timed."),
    _f("machine", "string", "The machine as the seed describes it."),
    _f("metric", "string", "wall, user, sys, cpu (user+sys), rate, maxrss, *_faults, callgrind and perf "
           "counters, score (higher is faster), claim* for a stated conclusion."),
    _f("unit", "string", "s, ms, KiB, count, runs/min, ratio, %, ..."),
    _f("text", "string", "The exact text on the cited line the number comes from."),
    _f("value", "number", "The number as a float (1:49:06 in seconds; 13224M as 13224e6)."),
    _f("replicate", "integer", "Run number within the arm, in the order printed; empty for derived "
           "figures and claims.", minimum=1),
    _f("kind", "string", "measured (a reading), derived (the author's arithmetic), claim (a conclusion).",
           enum=["measured", "derived", "claim"]),
    _f("slip", "string", "The author's slip on this row, if any (the number is kept as printed)."),
    _f("note", "string", "Context for the re-analysis."),
]}, "field.csv": {"missingValues": [""], "fields": [
    _f("source", "string", "The publication: a repository's README at a commit, an issue or pull request.", required=True),
    _f("url", "string", "Where the figure is printed.", required=True),
    _f("published", "string", "The date the source was published (YYYY-MM-DD)."),
    _f("machine", "string", "The source's machine as it describes it.", required=True),
    _f("versions", "string", "The allocators' versions and the runs per figure, as the source states them."),
    _f("benchmark", "string", "The mimalloc-bench program.", required=True),
    _f("workload", "string", "The heapcost workload the program was brought as (EXTRA_WORKLOADS name).", required=True),
    _f("allocator", "string", "The source's name of the allocator in the numerator.", required=True),
    _f("reference", "string", "The source's name of the allocator in the denominator.", required=True),
    _f("our_allocator", "string", "The heapcost allocator id the numerator maps to.", required=True),
    _f("our_reference", "string", "The heapcost allocator id the denominator maps to.", required=True),
    _f("metric", "string", "wall: elapsed time.", enum=["wall"]),
    _f("ratio", "number", "allocator's time over reference's time, from the source's numbers.", required=True),
    _f("kind", "string", "measured (from printed times), claim (a stated conclusion).", enum=["measured", "claim"]),
    _f("text", "string", "The printed times or statement the ratio comes from (rows' whitespace condensed)."),
    _f("note", "string", "How the ratio was read, and what limits it."),
]}}


def _side_columns(columns) -> list[tuple[str, str]]:
    """(a column, b column) of every per-process column of pairs.csv present in `columns`."""
    import re

    out = []
    for col in columns:
        m = list(re.finditer(r"_a(?=_|$)", col))
        if m:
            other = col[:m[-1].start()] + "_b" + col[m[-1].end():]
            if other in columns:
                out.append((col, other))
    return out


def oriented_pairs(pairs: pd.DataFrame, baseline: str | None = None, order=()) -> pd.DataFrame:
    """Lockstep pairs with the baseline's process as side a in every row. Campaigns alternate the roles
    (the baseline runs as a in half the blocks and as b in the other half: a process's role moved a ratio by
    about 1% on small-loop), so a row whose allocator_b is the baseline has its a and b columns swapped (and
    `first` flipped). Without a baseline, each pair of allocators takes the orientation in which side a is the
    allocator found in more rows of the table (a campaign's baseline is in every pair), or else that of its
    first row; a pair of allocators found in one orientation only keeps it (a table turned once stays as it
    is). `order` lists (a, b) pairs whose a is side a whatever the counts (declared_orientation: what a run
    declares, since with direct pairs the baseline is no longer in more rows than the others)."""
    if pairs.empty or not {"allocator_a", "allocator_b"} <= set(pairs.columns):
        return pairs
    a, b = pairs["allocator_a"].astype(str).to_numpy(), pairs["allocator_b"].astype(str).to_numpy()
    if baseline is None:
        counts = Counter(a) + Counter(b)
        first: dict = {}
        for x, y in zip(a, b):
            first.setdefault(frozenset((x, y)), x)

        declared = {frozenset(p): p[0] for p in order}
        present = set(zip(a, b))

        def side_a(x, y):
            if frozenset((x, y)) in declared:
                return declared[frozenset((x, y))]
            if (y, x) not in present:
                return x
            return first[frozenset((x, y))] if counts[x] == counts[y] else (x if counts[x] > counts[y] else y)
        # decided once per (a, b) as found in the rows
        turned = {(x, y): x != y and side_a(x, y) == y for x, y in present}
        swap = [turned[xy] for xy in zip(a, b)]
    else:
        swap = [(y == baseline and x != baseline) for x, y in zip(a, b)]
    swap = pd.Series(swap, index=pairs.index, dtype=bool)
    if not swap.any():
        return pairs
    out = pairs.copy()
    for col_a, col_b in _side_columns(list(pairs.columns)):
        out[col_a] = pairs[col_a].where(~swap, pairs[col_b])
        out[col_b] = pairs[col_b].where(~swap, pairs[col_a])
    if "first" in out.columns:
        out["first"] = pairs["first"].where(~swap, pairs["first"].map({"a": "b", "b": "a"}))
    return out


def declared_orientation(info: dict, pairs: pd.DataFrame) -> pd.DataFrame:
    """A run's pairs turned as its run.json declares them (lockstep_roles): the baseline as side a, and in
    each direct pair (PAIRS=a:b) its a; oriented_pairs' count rule decides only what the run leaves open."""
    roles = (info or {}).get("lockstep_roles") or {}
    order = [tuple(p) for p in roles.get("direct_pairs") or ()]
    if roles.get("baseline") and {"allocator_a", "allocator_b"} <= set(pairs.columns):
        others = set(pairs["allocator_a"].astype(str)) | set(pairs["allocator_b"].astype(str))
        order += [(roles["baseline"], x) for x in sorted(others - {roles["baseline"]})]
    return oriented_pairs(pairs, order=order)


def read_table(path, columns=None) -> pd.DataFrame:
    """A dataset table as written: empty cells are missing values, nothing else is. `columns`: only those
    of them the table has (the others are not read)."""
    usecols = None if columns is None else (lambda name: name in columns)
    return pd.read_csv(Path(path), keep_default_na=False, na_values=[""], usecols=usecols)


def read_rows(path) -> list[dict]:
    """A dataset table as a list of dicts of strings (the probes' scoring works on plain rows)."""
    import csv

    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def is_warmup(value) -> bool:
    return str(value).strip().lower() in WARMUP_TRUE


def warmup_mask(column: pd.Series) -> pd.Series:
    if column.dtype == bool:
        return column
    if column.dtype.kind in "iu":  # an integer reads as its digits: only 1 is in WARMUP_TRUE
        return pd.Series(column.to_numpy() == 1, index=column.index, name=column.name)
    return column.astype(str).str.strip().str.lower().isin(WARMUP_TRUE)


def is_usable(row: dict) -> bool:
    """The rule every statistic uses: a trial counts when it is ok and not warm-up."""
    return str(row.get("status", OK)) == OK and not is_warmup(row.get("warmup", 0))


def measured_trials(trials: pd.DataFrame) -> pd.DataFrame:
    """The trials outside the warm-up blocks (any status); a table without the column is all measured."""
    if "warmup" not in trials.columns:
        return trials
    return trials[~warmup_mask(trials["warmup"])]


def usable_trials(trials: pd.DataFrame) -> pd.DataFrame:
    """ok and not warm-up (columns that a table does not have do not filter: compare takes any CSV)."""
    if "status" not in trials.columns:
        return measured_trials(trials)
    ok = trials["status"].astype(str) == OK
    if "warmup" in trials.columns:
        ok &= ~warmup_mask(trials["warmup"])
    return trials[ok]
