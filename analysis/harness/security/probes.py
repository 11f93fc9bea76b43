"""The heap-misuse probes (probes/*.c): building them, running them sandboxed under an allocator at
each block size, and `python -m analysis probe`, which writes probes.csv.

Each probe commits one misuse and reports through the protocol of probes/README.md (`probe <size>`
argv, `heapcost-probe: stage=...`, target and fault-record lines on stderr, a `result ...` line on
stdout). The outcome of one process is decided by one pure function, probe_verdict.verdict, given the
allocator's own objects (its preloaded libraries; libc.so.6 for glibc) and the allocator's routine
chatter (what it prints in a run without misuse). Each (allocator, probe, size) runs in at least 20
fresh processes by default; a probe is random where its outcomes differ, never by declaration.
The processes are sandboxed by the launcher (no shell, no core, CPU and file-size limits, a
timeout, a private temporary directory); memory is capped by the probe itself with RLIMIT_DATA
(probes/probe.h), never with RLIMIT_AS, so hardened allocators may reserve what address space they
like. Cells run in a small pool of worker processes (one per CPU by default), each with its own launcher server.
"""
import os
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from analysis.contract import runstore
from analysis.contract.schema import PROBE_COLUMNS
from analysis.harness.process import launcher
from analysis.harness.security import primitive_probe, techniques
from analysis.harness.security.probe_build import (  # noqa: F401 (PROBE_*FLAGS, probe_binary: callers import them here)
    PROBE_CFLAGS, PROBE_LDFLAGS, binary_for, probe_binary,
)
from analysis.harness.security.probe_verdict import normalize, parse_result, parse_stderr, verdict
from analysis.harness.process.trial import clean_env, preload_env, read_who, wrong_malloc
from analysis.stats import security
from analysis.errors import HeapcostError
from analysis.paths import RUNS_DIR

OUTCOMES = ("caught", "mitigated", "missed", "late-crash", "allocator-failed-to-start", "n/a")
# Block sizes every misuse probe runs at: small (odd 41 included: 4-byte alignment matters to efence),
# medium (about a page, on both sides of glibc's tcache/smallbin limits) and large (>= 256 KiB: mmapped
# by most allocators).
SIZES = (16, 24, 41, 64, 4000, 5000, 262144)
DEFAULT_RUNS = 20  # fresh processes per (allocator, probe, size): the floor, for every probe
DEFAULT_TIMEOUT = 30.0  # seconds; longer than the probes' deadline, so a hang is recorded by the probe
# The probe's deadline (probes/probe.h, HEAPCOST_PROBE_ALARM). A stuck allocator call is found sooner, by the
# watchdog (about 1.5 s without the call returning); the deadline only ends probes that keep calling the
# allocator for that long. A 100,000-allocation hunt takes up to about 3 s under duma, alive all along.
DEFAULT_ALARM = 20
PERL_OWN_MALLOC = ("perl's own malloc lives inside the perl binary: C probes cannot be linked with or preloaded "
                   "into it, and perl code cannot commit heap misuse")
PERL_SYSTEM_MALLOC = "perl built on the system malloc: its heap is glibc's, probed in the glibc rows"


@dataclass(frozen=True)
class Probe:
    id: str
    source: str  # file in probes/
    what: str  # the misuse and the primitive an attacker wants, in one line
    extra: tuple = ()  # arguments after the size (overflow: N)
    kind: str = "misuse"  # misuse | address-entropy | placement-entropy | reuse-entropy | primitives
    # False: a measurement read beside the security score, never in it (the page-sized entropy runs, for the
    # debates): the score's probe set, and so what a run must have probed to stand beside another, stays fixed
    scored: bool = True

    @property
    def cxx(self) -> bool:
        return self.source.endswith(".cc")

    @property
    def sizes(self) -> tuple:
        """The sizes it runs at; (None,) for the entropy probes, which run with their own defaults."""
        return SIZES if self.kind == "misuse" else (None,)

    def argv(self, size: int | None) -> list[str]:
        """The probe's arguments: the size and its extra ones, or for a probe run at its own size (the entropy
        probes), its extra arguments alone (reuse-entropy-page: size, repetitions, candidates)."""
        return list(self.extra) if size is None else [str(size), *self.extra]


PROBES = {p.id: p for p in (
    Probe("double-free", "double_free.c", "free(a) twice: a handed out twice (two live blocks overlap)"),
    Probe("double-free-interleaved", "double_free_interleaved.c", "free a, b, a: a handed out twice"),
    Probe("double-free-cache-full", "double_free_cache_full.c",
          "a, b, a freed after 16 frees fill the thread cache (fastbin dup): a handed out twice"),
    Probe("overlap-after-double-free", "overlap_after_double_free.c",
          "a freed again 32 frees later: two live blocks overlap"),
    Probe("cross-thread-double-free", "cross_thread_double_free.c",
          "a freed in a second live thread, then in the main thread: a handed out twice"),
    Probe("interior-free", "interior_free.c", "free inside a live block: a later block lands inside it"),
    Probe("invalid-free-unaligned", "invalid_free_unaligned.c", "free(p + 1) of a live block: a later block overlaps p"),
    Probe("invalid-free-stack", "invalid_free_stack.c", "free of a stack buffer: a later block lands on the stack"),
    Probe("invalid-free-far", "invalid_free_far.c",
          "free of a pointer into a far mapping: a later block lands in it"),
    Probe("wild-free", "wild_free.c", "free of static memory: a later allocation returns it"),
    Probe("fake-chunk-free", "fake_chunk_free.c",
          "free of a forged chunk in static memory (house of spirit): a later block is the forged chunk"),
    Probe("overflow-1", "overflow.c", "1 byte past the usable end: a neighbour changes or blocks overlap",
          extra=("1",)),
    Probe("overflow-16", "overflow.c", "16 bytes past the usable end: a neighbour changes or blocks overlap",
          extra=("16",)),
    Probe("underflow-1", "overflow.c", "1 byte before the start: a neighbour changes or blocks overlap",
          extra=("-1",)),
    Probe("off-by-one-nul", "off_by_one_nul.c",
          "a NUL byte past the end into the next chunk's header: a neighbour changes or a block overlaps live a"),
    Probe("large-overflow", "large_overflow.c", "1 byte past the end of a lone block lands (no guard page)"),
    Probe("malloc-zero", "malloc_zero.c", "read and write <size> bytes of malloc(0): a neighbour is read or changed"),
    Probe("uaf-read", "uaf_read.c", "read a freed block right after the free: its old contents (stale data)"),
    Probe("uaf-read-reused", "uaf_read.c", "read a freed block once it is handed out again: the next owner's data",
          extra=("reused",)),
    Probe("uaf-write", "uaf_write.c", "write a freed block: the next owner receives the attacker's bytes"),
    Probe("realloc-reuse", "realloc_reuse.c",
          "keep using the old pointer after realloc grew the block: a write changes the new owner's data"),
    Probe("realloc-shrink", "realloc_shrink.c",
          "shrink to a quarter with realloc, write the old size: another live block changes"),
    Probe("reuse-immediate", "reuse_immediate.c", "free then malloc the size: the same block comes back at once"),
    Probe("freelist-poison", "freelist_poison.c",
          "a freed block's link overwritten with a raw static address: a later block lands there"),
    Probe("tcache-poison-safelink", "tcache_poison_safelink.c",
          "a freed block's link overwritten with a target stored as the links are (heap leak known): a block lands there"),
    Probe("fresh-contents", "fresh_contents.c", "free secret-filled blocks, allocate again: a new block shows the secret"),
    Probe("size-mismatch", "size_mismatch.cc",
          "new[] of a destructor type released with scalar delete: a later block lands inside the live array"),
    Probe("sized-delete", "sized_delete.cc",
          "sized delete claiming a far larger size: a later block of that size overlaps a live block"),
    Probe("huge-request", "huge_request.c", "malloc/realloc of an impossible size returns a pointer instead of NULL"),
    Probe("calloc-overflow", "calloc_overflow.c", "calloc(n, size) whose product wraps returns a (small) block"),
    Probe("address-entropy", "address_entropy.c", "the address of a heap block is guessable in a fresh process",
          kind="address-entropy"),
    Probe("placement-entropy", "placement_entropy.c", "the next block's address follows from the previous one",
          kind="placement-entropy"),
    Probe("reuse-entropy", "reuse_entropy.c",
          "which of many freed blocks the next malloc of their size returns is guessable", kind="reuse-entropy"),
    # Placement at 64 KiB, where allocators map large blocks: OpenBSD's malloc relies on mmap for random page
    # addresses, which Linux does not give (it places successive mappings side by side).
    Probe("placement-entropy-page", "placement_entropy.c",
          "the next 64 KiB block's address follows from the previous one", extra=("65536",),
          kind="placement-entropy", scored=False),
    # The same measurement at one page (4096 bytes), 256 candidates: an allocator that caches freed pages
    # picks which one comes back from its page cache. OpenBSD's malloc starts that scan at a random slot, and
    # seed 003's patch narrows the draw from a byte to a nibble (with 64 slots: from 64 starts to 16).
    Probe("reuse-entropy-page", "reuse_entropy.c",
          "which of many freed one-page blocks the next malloc of a page returns is guessable",
          extra=("4096", "512", "256"), kind="reuse-entropy", scored=False),
    Probe("primitive-sequences", "primitive_sequences.c", "random heap-action sequences, one bug each", kind="primitives"),
)}


# ------------------------------------------------------------------------------------------ building
# ------------------------------------------------------------------------------------------ sandbox
@dataclass(frozen=True)
class Target:
    """An allocator as the probes run it: how to build probes for it and the environment to run them in."""
    id: str
    variant: str = "glibc"  # glibc (preloaded) or musl (relinked)
    preload: tuple = ()
    env: dict = field(default_factory=dict)
    expect_malloc: str = ""  # substring of the library malloc must resolve to ("" = do not check)
    unavailable: str = ""  # why probes cannot run under it ("" = they can)
    loader: tuple = ()  # a built glibc's loader argv: the probe binary is linked to that ld.so (binary_for)
    alarm: int = DEFAULT_ALARM  # the probe's own deadline, seconds

    @property
    def objects(self) -> tuple:
        """The allocator's shared objects, for the verdict's "in the allocator" rules: its preloaded
        libraries, and libc.so.6 when malloc is glibc's. A statically linked allocator (musl) has none:
        the fault record's `call=` tells its code from the probe's."""
        glibc = self.expect_malloc == "libc.so.6" or bool(self.loader)  # the system's or a built glibc
        return tuple(self.preload) + (("libc.so.6",) if glibc else ())


def target_for(alloc) -> Target:
    """The Target of a catalogue Allocator (or a bring-your-own one)."""
    from analysis.harness.allocators.catalog import resolve

    if alloc.interpreters or alloc.family == "perl":
        return Target(alloc.id, unavailable=PERL_SYSTEM_MALLOC if alloc.expect_perl_malloc is False else PERL_OWN_MALLOC)
    r = resolve(alloc)
    if not r.available:
        return Target(alloc.id, unavailable=f"not available here: {r.reason}")
    expect = "" if alloc.variant == "musl" else r.expect_malloc
    return Target(alloc.id, alloc.variant, tuple(r.preload), dict(alloc.env), expect, loader=tuple(r.loader))


def _trial_env(target: Target, work: Path, who: Path) -> dict:
    env = {**clean_env(work), **target.env, "HEAPCOST_PROBE_ALARM": str(target.alarm)}
    if target.variant == "glibc":
        env.update(preload_env(target.preload, who))
    return env


@dataclass
class Trial:
    """One probe process: its outcome (probe_verdict.OUTCOMES), the detail, the result line's values."""
    outcome: str
    detail: str = ""
    values: dict = field(default_factory=dict)
    reported: bool = False  # an allocator message came with a missed primitive ("detected silently")


def _launch(argv: list[str], target: Target, *, timeout: float):
    """Run argv in a fresh sandbox (a built glibc's programs carry its ld.so as their interpreter:
    binary_for); (LaunchResult, stdout, stderr, the malloc check's complaint or '')."""
    with tempfile.TemporaryDirectory(prefix="heapcost-probe-") as tmp:
        tmp = Path(tmp)
        work = tmp / "work"
        work.mkdir()
        out, err, who = tmp / "stdout", tmp / "stderr", tmp / "who"
        # No RLIMIT_AS: hardened allocators reserve huge inaccessible regions at start (hardened_malloc,
        # scudo); the probe caps its writable memory with RLIMIT_DATA itself (probes/probe.h).
        res = launcher.run(list(argv), env=_trial_env(target, work, who), stdout=out, stderr=err,
                           timeout=timeout, cwd=work, cpu_limit=max(1, int(timeout)), fsize_limit=16 << 20)
        stdout = out.read_text(errors="replace") if out.exists() else ""
        stderr = err.read_text(errors="replace") if err.exists() else ""
        wrong = wrong_malloc(read_who(who), target.expect_malloc) if target.expect_malloc else ""
    return res, stdout, stderr, wrong


def run_once(probe: Probe, target: Target, binary: Path, size: int | None = None, *,
             timeout: float = DEFAULT_TIMEOUT, chatter=frozenset()) -> Trial:
    """One probe process at one size, sandboxed, classified by probe_verdict.verdict."""
    res, stdout, stderr, wrong = _launch([str(binary), *probe.argv(size)], target, timeout=timeout)
    if res.status == "spawn-failed":
        return Trial("n/a", f"spawn failed: {res.error or 'unknown'}")
    v = verdict(exit_code=res.exit_code if res.status == "exited" else None,
                signal=res.signal if res.status == "signaled" else None, stderr=stderr, stdout=stdout,
                allocator_objects=target.objects, chatter=chatter, timed_out=res.status == "timeout")
    # An allocator that died before main may not have let mallocwho record anything: that is its
    # failure to start, not a wrong malloc.
    if wrong and v.outcome != "allocator-failed-to-start":
        return Trial("n/a", f"wrong malloc: {wrong}")
    return Trial(v.outcome, v.detail, parse_result(stdout) or {},
                 reported=v.outcome == "missed" and bool(parse_stderr(stderr, chatter).messages))


_CHATTER: dict = {}


def learn_chatter(target: Target, *, timeout: float = DEFAULT_TIMEOUT) -> frozenset:
    """What the allocator prints on stderr in a run without misuse (banners, statistics): not reports.
    A run that does not end normally teaches nothing (its message may be a failure to start)."""
    if target.id in _CHATTER:
        return _CHATTER[target.id]
    binary = binary_for(PROBES["address-entropy"].source, target)
    res, _, stderr, _ = _launch([str(binary)], target, timeout=timeout)
    learned = frozenset()
    if res.status == "exited" and res.exit_code == 0:
        learned = frozenset(normalize(ln) for ln in stderr.splitlines()
                            if ln.strip() and not ln.startswith("heapcost-probe:"))
    _CHATTER[target.id] = learned
    return learned


# ------------------------------------------------------------------------------------------ aggregation
# When trials disagree, the most frequent outcome names the row; ties go to the one better for the attacker.
_TIE_ORDER = {"missed": 0, "late-crash": 1, "mitigated": 2, "caught": 3, "allocator-failed-to-start": 4, "n/a": 5}
UNUSABLE = ("n/a", "allocator-failed-to-start")  # say nothing about the misuse


def outcome_counts(trials: list[Trial]) -> str:
    """The outcomes column: `name=count` most frequent first, then `detected-silently=k` if any."""
    counts = Counter(t.outcome for t in trials)
    text = " ".join(f"{o}={n}" for o, n in sorted(counts.items(), key=lambda kv: (-kv[1], _TIE_ORDER[kv[0]])))
    silent = sum(t.reported for t in trials)
    return text + (f" detected-silently={silent}" if silent else "")


def summarize(probe: Probe, trials: list[Trial], *, seed: int = 0) -> dict:
    """One probes.csv row (without run_id/allocator/size) from the trials of one probe at one size."""
    row = {"probe": probe.id, "trials": len(trials), "outcomes": outcome_counts(trials)}
    if not trials:
        return {**row, "outcome": "n/a", "detail": "no trials"}
    usable = [t for t in trials if t.outcome not in UNUSABLE]
    if not usable:
        first = Counter(t.outcome for t in trials).most_common(1)[0][0]
        reasons = Counter(t.detail for t in trials if t.outcome == first)
        return {**row, "outcome": first, "detail": reasons.most_common(1)[0][0]}
    counts = Counter(t.outcome for t in usable)
    outcome = min(counts, key=lambda o: (-counts[o], _TIE_ORDER[o]))
    example = next(t.detail for t in usable if t.outcome == outcome)
    mix = "" if len(counts) == 1 else "; outcomes differ: " + ", ".join(
        f"{o} {n}" for o, n in sorted(counts.items(), key=lambda kv: (-kv[1], _TIE_ORDER[kv[0]])))
    row["outcome"] = outcome
    if probe.kind == "misuse":
        k = counts.get("missed", 0)
        lo, hi = security.clopper_pearson(k, len(usable))
        row.update(rate=k / len(usable), rate_ci_low=lo, rate_ci_high=hi)
        row["detail"] = f"{counts[outcome]}/{len(usable)} {outcome}" + (f": {example}" if example else "") + mix
        return row
    measured = [t.values for t in usable if t.values]
    if not measured:
        row["detail"] = f"{example}{mix}"
        return row
    if probe.kind == "address-entropy":
        est = {}
        for key in ("small", "medium", "large"):
            addrs = [int(v[key], 16) for v in measured if key in v]
            est[key] = security.address_entropy(addrs, seed=seed)
        weakest = min(est, key=lambda key: est[key][0])
        bits, lo, hi = est[weakest]
        detail = ", ".join(f"{key} {b:.1f} [{l:.1f}, {h:.1f}]" for key, (b, l, h) in est.items())
        row.update(bits=bits, bits_ci_low=lo, bits_ci_high=hi,
                   detail=f"bits per fresh process, weakest={weakest}: {detail}; each bit given the "
                          f"{security.context_bits(len(measured))} below it where they predict it, over "
                          f"{len(measured)} processes{mix}")
        # The primitive (knowing the address) works only when there is no entropy at all.
        row["outcome"] = "missed" if hi < 1 else "mitigated"
    elif probe.kind == "reuse-entropy":
        row.update(_reuse_summary([v for v in measured if v.get("picks") and v.get("candidates")], seed, mix))
    else:
        seqs = [[int(a, 16) for a in v["addrs"].split(",")] for v in measured if v.get("addrs")]
        bits, lo, hi = security.placement_entropy(seqs, seed=seed)
        k, n = security.predictable_steps(seqs)
        rlo, rhi = security.clopper_pearson(k, n)
        row.update(bits=bits, bits_ci_low=lo, bits_ci_high=hi, rate=k / n if n else None, rate_ci_low=rlo,
                   rate_ci_high=rhi,
                   detail=f"collision entropy of the next-address distance within a process "
                          f"({security.step_coincidences(seqs)[0]} equal pairs of steps in "
                          f"{security.step_coincidences(seqs)[1]}); rate = steps at the process's most "
                          f"common distance ({k}/{n}){mix}")
        row["outcome"] = "missed" if bits < 1 else "mitigated"
    return row


def _reuse_summary(measured: list[dict], seed: int, mix: str) -> dict:
    """The reuse-entropy columns from the result lines of its processes (probes/reuse_entropy.c)."""
    if not measured:
        return {"detail": f"no picks{mix}"}
    picks = [security.parse_picks(v["picks"]) for v in measured]
    m = min(int(v["candidates"]) for v in measured)  # the cap: log2 of the fewest candidates
    bits, lo, hi = security.reuse_entropy(picks, m, seed=seed)
    given = security.reuse_given_previous(picks, m)
    total, most = sum(len(p) for p in picks), max(len(p) for p in picks)
    picks = [[x for x in p if x is not None] for p in picks]  # the choice among freed blocks
    equal = [security.coincidences(p) for p in picks]
    k, n = security.most_common_share(picks)
    rlo, rhi = security.clopper_pearson(k, n)
    if bits != bits:  # NaN: no process got two freed blocks back (delayed reuse, or a slow allocator)
        why = "no process made two picks in its time budget" if most < 2 else "no process got two back"
        return {"outcome": "n/a", "detail": f"{why}: {n} of {total} picks were among the {m} freed blocks{mix}"}
    return {"bits": bits, "bits_ci_low": lo, "bits_ci_high": hi, "rate": k / n if n else None,
            "rate_ci_low": rlo, "rate_ci_high": rhi, "outcome": "missed" if bits < 1 else "mitigated",
            "detail": f"collision entropy of which of {m} freed blocks the next malloc returns "
                      f"({sum(e for e, _ in equal)} equal pairs of picks in {sum(p for _, p in equal)}){given}; "
                      f"{n}/{total} picks were freed blocks; rate = freed picks at the process's most "
                      f"common one ({k}/{n}){mix}"}


# ------------------------------------------------------------------------------------------ campaign
def _skip(probe: Probe, target: Target) -> str:
    if target.unavailable:
        return target.unavailable
    if probe.cxx and target.variant != "glibc":
        return f"C++ probe: no C++ runtime for the statically linked {target.variant} variant"
    return ""


def probe_target(probe: Probe, target: Target, runs: int, size: int | None = None, *,
                 timeout: float = DEFAULT_TIMEOUT, seed: int = 0) -> dict:
    """The probes.csv row (without run_id) of one probe at one size under one target."""
    base = {"allocator": target.id, "size": size}
    why = _skip(probe, target)
    if why:
        return {**base, "probe": probe.id, "outcome": "n/a", "trials": 0, "detail": why}
    binary = binary_for(probe.source, target)
    chatter = learn_chatter(target, timeout=timeout)
    trials = [run_once(probe, target, binary, size, timeout=timeout, chatter=chatter) for _ in range(runs)]
    return {**base, **summarize(probe, trials, seed=seed)}


def _cell(job):
    probe_id, target, runs, size, timeout, seed = job
    return probe_target(PROBES[probe_id], target, runs, size, timeout=timeout, seed=seed)


def _with_alarm(target: Target, alarm: int) -> Target:
    from dataclasses import replace

    return replace(target, alarm=alarm)


def _probes(names: str) -> list[Probe]:
    if (names or "").strip() == "none":  # only the brought techniques (--techniques)
        return []
    wanted = [n.strip() for n in (names or "").split(",") if n.strip()] or list(PROBES)
    unknown = [n for n in wanted if n not in PROBES]
    if unknown:
        raise HeapcostError(f"unknown probe(s) {', '.join(unknown)}; valid: {', '.join(PROBES)}")
    return [PROBES[n] for n in dict.fromkeys(wanted)]


def _sizes(text: str) -> tuple | None:
    if not text:
        return None
    try:
        sizes = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise HeapcostError(f"--sizes must be comma-separated byte counts, got {text!r}") from None
    if not sizes or any(not 1 <= s <= 64 << 20 for s in sizes):
        raise HeapcostError(f"--sizes must be byte counts in [1, 67108864], got {text!r}")
    return sizes


def add_arguments(parser):
    parser.add_argument("--allocators", default="", help="comma-separated catalogue ids (default: all of them)")
    parser.add_argument("--extra-allocators", "--extra", dest="extra", default="",
                        help="bring-your-own allocators: name=/path/lib.so,...")
    parser.add_argument("--probes", default="", help=f"comma-separated probe ids (default: all; none: only the "
                        f"--techniques): {', '.join(PROBES)}")
    parser.add_argument("--techniques", default="", metavar="DIR",
                        help="a folder of brought exploitation-technique programs, each asserting its own success "
                             "(bring how2heap's glibc_2.36 programs, built by hand; provenance.json beside them says "
                             "the upstream revision and the flags): each runs --runs times under every allocator "
                             "into the run's techniques.csv")
    parser.add_argument("--techniques-musl", default="", metavar="DIR",
                        help="the same technique programs built statically against musl (musl-gcc -static; "
                             "provenance.json says libc musl): run under the configurations whose probes are relinked "
                             "against musl instead of --techniques' glibc-linked ones; a technique of --techniques "
                             "missing here is not-applicable there (it does not build against musl)")
    parser.add_argument("--technique-timeout", type=float, default=techniques.DEFAULT_TIMEOUT,
                        help=f"seconds before a technique program is killed as hung (default {techniques.DEFAULT_TIMEOUT:g})")
    parser.add_argument("--sizes", default="", help=f"block sizes of the misuse probes (default: {','.join(map(str, SIZES))})")
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS,
                        help=f"fresh processes per (allocator, probe, size) (default {DEFAULT_RUNS})")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="worker processes running cells in parallel (default: 2, or 1 on one CPU)")
    parser.add_argument("--alarm", type=int, default=DEFAULT_ALARM,
                        help=f"seconds after which a probe still running reports itself hung (default {DEFAULT_ALARM})")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help="seconds before the runner kills a probe process (longer than --alarm)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap intervals")
    parser.add_argument("--out", default="", help="run directory (default: a new one in data/runs/)")


def _open_run(args, params):
    try:
        from analysis.harness.process.machine import describe_machine
        machine = describe_machine()
    except Exception as exc:  # the description is context, never a reason to lose a probe run
        machine = {"error": f"describe_machine failed: {exc}"}
    run_dir, info = runstore.start_run("probe", "security", params, runs_dir=RUNS_DIR, run_dir=args.out or None)
    if not (run_dir / "machine.json").exists():
        runstore.write_json_atomic(run_dir / "machine.json", machine)
    return run_dir, info


def _fresh_launcher():
    """In a forked worker: its own launcher server (the parent's pipe is not ours to share)."""
    launcher._server = launcher._Server()


def _results(jobs: list, workers: int, cell=_cell):
    """Rows of the cells, in the order they finish; cells run in `workers` processes (1: here)."""
    if workers <= 1 or len(jobs) <= 1:
        yield from map(cell, jobs)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # Build everything first: the workers (forked) find the binaries and the launcher in the cache.
    launcher.launcher_path(), launcher.mallocwho_path()
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                             initializer=_fresh_launcher) as pool:
        futures = [pool.submit(cell, job) for job in jobs]
        for fut in as_completed(futures):
            yield fut.result()


def run(args) -> int:
    import time

    if args.runs < 1:
        raise HeapcostError(f"--runs must be at least 1, got {args.runs}")
    if args.timeout <= 0:
        raise HeapcostError(f"--timeout must be positive, got {args.timeout}")
    if not 1 <= args.alarm < args.timeout:
        raise HeapcostError(f"--alarm must be at least 1 and below --timeout ({args.timeout:g}), got {args.alarm}")
    if args.jobs < 1:
        raise HeapcostError(f"--jobs must be at least 1, got {args.jobs}")
    probes = _probes(args.probes)
    sizes = _sizes(args.sizes)
    if getattr(args, "techniques_musl", "") and not getattr(args, "techniques", ""):
        raise HeapcostError("--techniques-musl DIR completes a glibc-linked set: give --techniques DIR too")
    brought = techniques.bring(args.techniques) if getattr(args, "techniques", "") else None
    others = {"musl": techniques.bring(args.techniques_musl, "musl")} if getattr(args, "techniques_musl", "") else {}
    if not probes and brought is None:
        raise HeapcostError("--probes none runs nothing without --techniques DIR")
    if brought is not None and args.technique_timeout <= 0:
        raise HeapcostError(f"--technique-timeout must be positive, got {args.technique_timeout}")
    from analysis.harness.allocators.brought import library_records
    from analysis.harness.allocators.catalog import select

    allocators = select(args.allocators, args.extra, require_available=False)
    targets = [_with_alarm(target_for(a), args.alarm) for a in allocators]
    params = {"allocators": [t.id for t in targets], "probes": [p.id for p in probes if p.kind != "primitives"],
              "runs": args.runs, "sizes": list(sizes or SIZES), "timeout": args.timeout, "alarm": args.alarm, "seed": args.seed}
    if library_records(allocators):
        params["brought_libraries"] = library_records(allocators)
    if brought is not None:
        params["techniques"] = brought.record()
        for libc, other in others.items():
            params[f"techniques_{libc}"] = other.record()
        params["technique_timeout"] = args.technique_timeout
    run_dir, info = _open_run(args, params)
    table = runstore.AppendTable(run_dir / "probes.csv", PROBE_COLUMNS)
    done = {(r["allocator"], r["probe"], r.get("size") or "") for r in table.rows()}
    jobs = []
    for target in targets:
        for probe in (p for p in probes if p.kind != "primitives"):  # primitive_probe.run_cells runs those
            for size in (probe.sizes if probe.kind != "misuse" or sizes is None else sizes):
                if (target.id, probe.id, "" if size is None else str(size)) in done:
                    continue
                if not _skip(probe, target):
                    binary_for(probe.source, target)  # built once, before the workers start
                jobs.append((probe.id, target, args.runs, size, args.timeout, args.seed))
    started = time.monotonic()
    try:
        for row in _results(jobs, args.jobs):
            table.append({"run_id": info["run_id"], **_rounded(row)})
            size = "" if row.get("size") is None else row["size"]
            print(f"{row['allocator']:<20} {row['probe']:<26} {size!s:>7} {row['outcome']:<10} "
                  f"{row.get('detail', '')[:80]}", flush=True)
    finally:
        table.close()
    primitive_probe.run_cells(args, run_dir, info["run_id"], targets, probes, (_skip, binary_for, _launch, _results))
    if probes:
        print(f"wrote {run_dir / 'probes.csv'}: {len(jobs)} cells in {time.monotonic() - started:.0f} s")
    if brought is not None:
        techniques.run_cells(args, run_dir, info["run_id"], targets, brought, _results, others)
    runstore.finish_run(run_dir)
    return 0


def _rounded(row: dict) -> dict:
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}
