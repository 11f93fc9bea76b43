"""Table Schemas of the dataset's tables: the single place that says what every column means.

datapackage.json, the validation and the codebook (data/README.md) are all generated from here.
"""
from analysis.runstore import COUNT_COLUMNS, TRIAL_COLUMNS

STATUS_TRIAL = ["ok", "failed", "crashed", "timeout", "wrong-malloc", "bad-checksum", "spawn-failed", "skipped"]


def _f(name, type_, description, unit=None, **constraints):
    field = {"name": name, "type": type_, "description": description}
    if unit:
        field["unit"] = unit
    if constraints:
        field["constraints"] = constraints
    return field


TRIALS = [
    _f("run_id", "string", "The run this trial belongs to (its directory name).", required=True),
    _f("seq", "integer", "Position of the trial in the run's randomized order; unique within a run.",
       required=True, minimum=0),
    _f("block", "integer", "Randomized block: every (allocator, workload) pair runs once per block.", minimum=0),
    _f("warmup", "integer", "1 for warm-up blocks, excluded from statistics.", enum=[0, 1]),
    _f("workload", "string", "Workload id (see analysis/workloads.py).", required=True),
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
       "'musl-static' for statically relinked musl binaries, '+ perl malloc' when perl's own is in use."),
    _f("env_pad", "integer", "Random extra bytes of environment for this trial (on top of padding every "
       "allocator's environment to the same size).", "bytes", minimum=0),
    _f("loadavg1", "number", "1-minute load average when the trial started."),
    _f("started_utc", "datetime", "When the trial started (UTC)."),
]

COUNTS = [
    _f("run_id", "string", "The callgrind run (directory name).", required=True),
    _f("workload", "string", "Workload id.", required=True),
    _f("allocator", "string", "Allocator id.", required=True),
    _f("scale", "number", "Workload scale run under callgrind.", minimum=0),
    _f("status", "string", "ok, or missing (it could not be measured under valgrind: see reason).",
       required=True, enum=["ok", "missing"] + STATUS_TRIAL[1:]),
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
    _f("malloc_lib", "string", "The shared object malloc resolved to under valgrind."),
]

PROBES = [
    _f("run_id", "string", "The probe run (directory name).", required=True),
    _f("allocator", "string", "Allocator id.", required=True),
    _f("probe", "string", "Probe id (see probes/ and analysis/probe.py).", required=True),
    _f("outcome", "string", "caught: stopped or reported at or before the misuse could be used; "
       "mitigated: the program went on but the primitive failed; missed: the primitive worked silently; "
       "late-crash: it broke later, somewhere unrelated; n/a: not applicable (see detail); for random "
       "probes the outcome of the majority, with the rate beside it.", required=True),
    _f("trials", "integer", "Fresh processes run for this probe.", minimum=0),
    _f("rate", "number", "Fraction of trials in which the primitive worked (missed).", minimum=0, maximum=1),
    _f("rate_ci_low", "number", "Clopper-Pearson 95% lower bound of rate.", minimum=0, maximum=1),
    _f("rate_ci_high", "number", "Clopper-Pearson 95% upper bound of rate.", minimum=0, maximum=1),
    _f("bits", "number", "Entropy estimate (entropy probes).", "bits"),
    _f("bits_ci_low", "number", "95% lower bound of bits.", "bits"),
    _f("bits_ci_high", "number", "95% upper bound of bits.", "bits"),
    _f("detail", "string", "The allocator's message or what the probe observed."),
]

TABLE_SCHEMAS = {"trials.csv": TRIALS, "counts.csv": COUNTS, "probes.csv": PROBES}

assert [f["name"] for f in TRIALS] == TRIAL_COLUMNS
assert [f["name"] for f in COUNTS] == COUNT_COLUMNS


def table_schema(filename: str, header: list[str] | None = None) -> dict | None:
    """The Table Schema of a known table; a table whose header differs from ours gets none (it fails)."""
    fields = TABLE_SCHEMAS.get(filename)
    if fields is None:
        return None
    return {"fields": fields, "missingValues": [""]}
