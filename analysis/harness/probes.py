"""The heap-misuse probes (probes/*.c): building them, running them sandboxed under an allocator,
classifying what happened, and `python -m analysis probe`, which writes probes.csv.

Each probe commits one misuse and reports through a small protocol (probes/probe.h): a stderr marker
right after the misuse, a `result worked=0|1 ...` line on stdout once the primitive was tried, and a
stderr marker before it goes on with unrelated heap work. The outcome of one trial follows from where
the process stopped relative to those markers, how, and what the allocator printed:
- stopped (signal or non-zero exit) before the result: caught (the signal and the allocator's first
  message are the detail; a SIGSEGV without a message is a crash that still stopped the misuse);
- ran on, with an allocator message before the "used" marker that a clean run does not print: caught
  (reported);
- ran on and the primitive worked: missed; it failed: mitigated;
- stopped after the result: late-crash, unless the primitive had failed and the allocator stopped the
  program with a message of its own (a delayed check, e.g. a quarantine verified on eviction): caught;
- a hang (timeout) counts as late-crash; no usable run (setup failed, wrong malloc): n/a.
"""
import re
import shutil
import signal as signals
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from analysis.contract import runstore
from analysis.contract.schema import PROBE_COLUMNS
from analysis.harness import launcher
from analysis.harness.trial import clean_env, preload_env, read_who, wrong_malloc
from analysis.stats import security
from analysis.errors import HeapcostError
from analysis.paths import PROBES_DIR, RUNS_DIR

OUTCOMES = ("caught", "mitigated", "missed", "late-crash", "n/a")
# Only the misuse may be undefined behaviour: no optimisation may fold, move or drop it.
PROBE_CFLAGS = ("-O0", "-fno-builtin", "-U_FORTIFY_SOURCE", "-Wno-use-after-free", "-Wno-free-nonheap-object",
                "-Wno-alloc-size-larger-than", "-Wno-unused-function")
SETUP_FAILED_EXIT = 99
DEFAULT_RUNS = 20  # fresh processes for probes whose result is random
DETERMINISTIC_RUNS = 3  # enough to notice when a supposedly fixed outcome is not
PERL_OWN_MALLOC = ("perl's own malloc lives inside the perl binary: C probes cannot be linked with or preloaded "
                   "into it, and perl code cannot commit heap misuse")
PERL_SYSTEM_MALLOC = "perl built on the system malloc: its heap is glibc's, probed in the glibc rows"


@dataclass(frozen=True)
class Probe:
    id: str
    source: str  # file in probes/
    what: str  # the primitive an attacker wants, in one line
    args: tuple = ()
    kind: str = "misuse"  # misuse | address-entropy | placement-entropy
    random: bool = False  # the result may differ between fresh processes: run many

    @property
    def cxx(self) -> bool:
        return self.source.endswith(".cc")


PROBES = {p.id: p for p in (
    Probe("double-free", "double_free.c", "free(a) twice: the next two allocations share a block"),
    Probe("double-free-interleaved", "double_free_interleaved.c", "free a, b, a: two later allocations share a block"),
    Probe("double-free-cache-full", "double_free_cache_full.c",
          "a, b, a freed after the thread cache is full (fastbin dup): two later allocations share a block"),
    Probe("overlap-after-double-free", "overlap_after_double_free.c",
          "a double free 32 frees apart: two of 256 later live blocks share memory", random=True),
    Probe("interior-free", "interior_free.c", "free inside a live block: a later block lands inside it"),
    Probe("wild-free", "wild_free.c", "free of static memory: a later allocation returns it"),
    Probe("fake-chunk-free", "fake_chunk_free.c",
          "free of a forged chunk header in static memory (house of spirit): malloc returns it"),
    Probe("overflow-1", "overflow.c", "1 byte past the usable end corrupts a neighbour or makes blocks overlap",
          args=("1",)),
    Probe("overflow-16", "overflow.c", "16 bytes past the usable end corrupt a neighbour or make blocks overlap",
          args=("16",)),
    Probe("underflow-1", "overflow.c", "1 byte before the start corrupts a neighbour or makes blocks overlap",
          args=("-1",)),
    Probe("large-overflow", "large_overflow.c", "a byte past a 256 KiB block lands silently (no guard page)"),
    Probe("uaf-read", "uaf_read.c", "a freed block still shows its old contents"),
    Probe("uaf-write", "uaf_write.c", "a write after free goes unnoticed and reaches the block's next owner",
          random=True),
    Probe("reuse-immediate", "reuse_immediate.c", "the next malloc of the size returns the block just freed",
          random=True),
    Probe("freelist-poison", "freelist_poison.c", "an overwritten free-list link makes malloc return a chosen address",
          random=True),
    Probe("fresh-contents", "fresh_contents.c", "a new allocation reveals earlier freed data", random=True),
    Probe("size-mismatch", "size_mismatch.cc", "new[] released by delete: a later block lands inside the live array"),
    Probe("sized-delete", "sized_delete.cc", "sized delete with a wrong size: a small block comes back as a big one"),
    Probe("huge-request", "huge_request.c", "an impossible size returns a pointer instead of NULL"),
    Probe("calloc-overflow", "calloc_overflow.c", "calloc whose size product wraps returns a (small) block"),
    Probe("address-entropy", "address_entropy.c", "the address of a heap block is guessable in a fresh process",
          kind="address-entropy", random=True),
    Probe("placement-entropy", "placement_entropy.c", "the next block's address follows from the previous one",
          kind="placement-entropy", random=True),
)}


# ------------------------------------------------------------------------------------------ building
@lru_cache(maxsize=None)
def probe_binary(source: str, variant: str = "glibc") -> Path:
    """The built probe program for a source in probes/ and a variant (glibc, or musl: static)."""
    from analysis.harness.build import build_c

    src = PROBES_DIR / source
    header = PROBES_DIR / "probe.h"
    name = "probe-" + src.stem.replace("_", "-")
    if src.suffix == ".cc":
        if variant != "glibc":
            raise HeapcostError(f"{source} is C++: no C++ runtime for the {variant} variant")
        if shutil.which("g++") is None:
            raise HeapcostError("compiler 'g++' not found: apt-get install g++")
        return build_c(name, [src, header], cflags=PROBE_CFLAGS, cc="g++")
    return build_c(name, [src, header], variant=variant, cflags=PROBE_CFLAGS)


# ------------------------------------------------------------------------------------------ one trial
@dataclass
class ProbeResult:
    outcome: str  # caught | mitigated | missed | late-crash | n/a
    worked: bool | None  # did the primitive work (None: not tried or not a yes/no probe)
    detail: str = ""
    values: dict = field(default_factory=dict)  # the result line's key=value pairs
    late: bool = False  # an abnormal end after the primitive was tried


def signal_name(num: int | None) -> str:
    try:
        return signals.Signals(num).name
    except (ValueError, TypeError):
        return f"signal {num}"


def parse_result(stdout: str) -> dict | None:
    for line in stdout.splitlines():
        if line.startswith("result "):
            return dict(part.split("=", 1) for part in line.split()[1:] if "=" in part)
    return None


_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|\d+")


def normalize(line: str) -> str:
    """A message with its addresses and numbers blanked, to recognise an allocator's routine chatter."""
    return _NUMBERS.sub("#", line.strip())


def classify(status: str, exit_code: int | None, sig: int | None, stdout: str, stderr: str,
             chatter: frozenset = frozenset(), error: str | None = None) -> ProbeResult:
    """The outcome of one probe process from how it ended and what it printed (see the module doc)."""
    if status == "spawn-failed":
        return ProbeResult("n/a", None, f"spawn failed: {error or 'unknown'}")
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    markers = [ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("heapcost-probe:")]
    setup = next((m for m in markers if m.startswith("setup-failed")), None)
    if setup:
        return ProbeResult("n/a", None, f"probe setup failed: {setup[len('setup-failed'):].strip()}")
    # The allocator's own messages, split at the "used" marker: before it, a report of the misuse.
    before, after, seen_used = [], [], False
    for ln in lines:
        if ln.startswith("heapcost-probe:"):
            seen_used = seen_used or ln.split(":", 1)[1].strip() == "used"
            continue
        if normalize(ln) in chatter:
            continue
        (after if seen_used else before).append(ln.strip())
    message = (before or after or [""])[0][:200]
    values = parse_result(stdout)
    worked = None if values is None or values.get("worked") not in ("0", "1") else values["worked"] == "1"
    where = "at the misuse" if "misuse-done" not in markers else "after the misuse, before the primitive was used"
    how = (f"{signal_name(sig)}" if status == "signaled" else
           "timeout (hung)" if status == "timeout" else f"exit {exit_code}")
    abnormal = status in ("signaled", "timeout") or (status == "exited" and exit_code != 0)
    tail = f": {message}" if message else ""
    if abnormal and values is None:
        if status == "timeout":
            return ProbeResult("late-crash", None, f"{how} {where}{tail}", late=True)
        return ProbeResult("caught", False, f"{how} {where}{tail}")
    if abnormal:
        after_msg = f": {after[0][:200]}" if after else tail
        if after and worked is False and status == "signaled":
            # The allocator stopped the program with a report of its own, later (a quarantine checked on
            # eviction), and the primitive had failed: a delayed detection, not an unrelated breakage.
            return ProbeResult("caught", False, f"{how} reported later, the primitive having failed{after_msg}", values)
        return ProbeResult("late-crash", worked, f"{how} after the primitive was tried (worked={values.get('worked')})"
                     f"{after_msg}", values, late=True)
    if values is None:
        return ProbeResult("n/a", None, f"probe printed no result{tail}")
    if before:
        return ProbeResult("caught", worked, f"reported: {before[0][:200]}", values)
    note = f"; later reported: {after[0][:200]}" if after else ""
    if worked is None:
        return ProbeResult("mitigated", None, note.lstrip("; "), values)
    return ProbeResult("missed" if worked else "mitigated", worked, _describe(values) + note, values)


def _describe(values: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in values.items() if k != "worked")


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
    loader: tuple = ()  # a built glibc's loader argv, put in front of the probe binary


def target_for(alloc) -> Target:
    """The Target of a catalogue Allocator (or a bring-your-own one)."""
    from analysis.harness.catalog import resolve

    if alloc.interpreters or alloc.family == "perl":
        return Target(alloc.id, unavailable=PERL_SYSTEM_MALLOC if alloc.expect_perl_malloc is False else PERL_OWN_MALLOC)
    r = resolve(alloc)
    if not r.available:
        return Target(alloc.id, unavailable=f"not available here: {r.reason}")
    expect = "" if alloc.variant == "musl" else r.expect_malloc
    return Target(alloc.id, alloc.variant, tuple(r.preload), dict(alloc.env), expect, loader=tuple(r.loader))


def _trial_env(target: Target, work: Path, who: Path) -> dict:
    env = {**clean_env(work), **target.env}
    if target.variant == "glibc":
        env.update(preload_env(target.preload, who))
    return env


def _check_malloc(target: Target, who: Path) -> str:
    """'' when the probe's malloc came from the expected library, else why not."""
    if not target.expect_malloc:
        return ""
    return wrong_malloc(read_who(who), target.expect_malloc)


def run_once(probe: Probe, target: Target, binary: Path, *, timeout: float = 20, chatter=frozenset()) -> ProbeResult:
    """One probe process in a sandbox: launcher (no shell, no core, CPU and memory limits, timeout),
    a private temporary directory as cwd, HOME and TMPDIR, deleted afterwards."""
    with tempfile.TemporaryDirectory(prefix="heapcost-probe-") as tmp:
        tmp = Path(tmp)
        work = tmp / "work"
        work.mkdir()
        out, err, who = tmp / "stdout", tmp / "stderr", tmp / "who"
        res = launcher.run(
            [*target.loader, str(binary), *probe.args], env=_trial_env(target, work, who), stdout=out, stderr=err,
            timeout=timeout, cwd=work, cpu_limit=max(1, int(timeout)),
            # Loose on purpose: hardened allocators reserve huge inaccessible regions; the probe caps its
            # own writable memory with RLIMIT_DATA (probes/probe.h).
            as_limit=1 << 40, fsize_limit=16 << 20)
        stdout = out.read_text(errors="replace") if out.exists() else ""
        stderr = err.read_text(errors="replace") if err.exists() else ""
        wrong = _check_malloc(target, who)
    if wrong:
        return ProbeResult("n/a", None, f"wrong malloc: {wrong}")
    return classify(res.status, res.exit_code, res.signal, stdout, stderr, chatter, res.error)


def learn_chatter(target: Target, *, timeout: float = 20) -> frozenset:
    """What the allocator prints on stderr in a run without misuse (banners, statistics): not reports."""
    probe = PROBES["address-entropy"]
    binary = probe_binary(probe.source, target.variant)
    with tempfile.TemporaryDirectory(prefix="heapcost-probe-") as tmp:
        tmp = Path(tmp)
        (tmp / "work").mkdir()
        launcher.run([*target.loader, str(binary)], env=_trial_env(target, tmp / "work", tmp / "who"),
                     stdout=tmp / "out", stderr=tmp / "err", timeout=timeout, cwd=tmp / "work", as_limit=1 << 40)
        text = (tmp / "err").read_text(errors="replace") if (tmp / "err").exists() else ""
    return frozenset(normalize(ln) for ln in text.splitlines() if ln.strip() and not ln.startswith("heapcost-probe:"))


# ------------------------------------------------------------------------------------------ aggregation
# When trials disagree, the most frequent outcome wins; ties go to the one better for the attacker.
_TIE_ORDER = {"missed": 0, "late-crash": 1, "mitigated": 2, "caught": 3, "n/a": 4}


def summarize(probe: Probe, trials: list[ProbeResult], *, seed: int = 0) -> dict:
    """One probes.csv row (without run_id/allocator) from the trials of one probe under one allocator."""
    row = {"probe": probe.id, "trials": len(trials)}
    usable = [t for t in trials if t.outcome != "n/a"]
    if not usable:
        reasons = Counter(t.detail for t in trials)
        return {**row, "outcome": "n/a", "detail": reasons.most_common(1)[0][0] if reasons else "no trials"}
    counts = Counter(t.outcome for t in usable)
    outcome = min(counts, key=lambda o: (-counts[o], _TIE_ORDER[o]))
    example = next(t.detail for t in usable if t.outcome == outcome)
    mix = "" if len(counts) == 1 else " [" + ", ".join(f"{o} {n}" for o, n in counts.most_common()) + "]"
    row.update(outcome=outcome, trials=len(usable))
    if probe.kind == "misuse":
        k = sum(1 for t in usable if t.worked)
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
                   detail=f"bits per fresh process, weakest={weakest}: {detail}; per-bit estimate over "
                          f"{len(measured)} processes{mix}")
        # The primitive (knowing the address) works only when there is no entropy at all.
        row["outcome"] = "missed" if hi < 1 else "mitigated"
    else:
        seqs = [[int(a, 16) for a in v["addrs"].split(",")] for v in measured if v.get("addrs")]
        bits, lo, hi = security.placement_entropy(seqs, seed=seed)
        k, n = security.predictable_steps(seqs)
        rlo, rhi = security.clopper_pearson(k, n)
        row.update(bits=bits, bits_ci_low=lo, bits_ci_high=hi, rate=k / n if n else None, rate_ci_low=rlo,
                   rate_ci_high=rhi,
                   detail=f"next-address entropy per step; rate = steps at the process's most common "
                          f"distance ({k}/{n}){mix}")
        row["outcome"] = "missed" if bits < 1 else "mitigated"
    return row


# ------------------------------------------------------------------------------------------ campaign
def runs_for(probe: Probe, runs: int) -> int:
    return runs if probe.random else min(runs, DETERMINISTIC_RUNS)


def probe_target(probe: Probe, target: Target, runs: int, *, timeout: float = 20, chatter=frozenset(),
                 seed: int = 0) -> dict:
    """The probes.csv row (without run_id) of one probe under one target."""
    base = {"allocator": target.id}
    if target.unavailable:
        return {**base, "probe": probe.id, "outcome": "n/a", "trials": 0, "detail": target.unavailable}
    if probe.cxx and target.variant != "glibc":
        return {**base, "probe": probe.id, "outcome": "n/a", "trials": 0,
                "detail": f"C++ probe: no C++ runtime for the statically linked {target.variant} variant"}
    binary = probe_binary(probe.source, target.variant)
    trials = [run_once(probe, target, binary, timeout=timeout, chatter=chatter) for _ in range(runs_for(probe, runs))]
    return {**base, **summarize(probe, trials, seed=seed)}


def _targets(names: str, extra: str) -> list[Target]:
    from analysis.harness.catalog import select

    return [target_for(alloc) for alloc in select(names, extra, require_available=False)]


def _probes(names: str) -> list[Probe]:
    wanted = [n.strip() for n in (names or "").split(",") if n.strip()] or list(PROBES)
    unknown = [n for n in wanted if n not in PROBES]
    if unknown:
        raise HeapcostError(f"unknown probe(s) {', '.join(unknown)}; valid: {', '.join(PROBES)}")
    return [PROBES[n] for n in dict.fromkeys(wanted)]


def add_arguments(parser):
    parser.add_argument("--allocators", default="", help="comma-separated catalogue ids (default: all of them)")
    parser.add_argument("--extra-allocators", "--extra", dest="extra", default="",
                        help="bring-your-own allocators: name=/path/lib.so,...")
    parser.add_argument("--probes", default="", help=f"comma-separated probe ids (default: all): {', '.join(PROBES)}")
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS,
                        help=f"fresh processes per random probe (deterministic ones: at most {DETERMINISTIC_RUNS})")
    parser.add_argument("--timeout", type=float, default=20, help="seconds before a probe process is killed")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap intervals")
    parser.add_argument("--out", default="", help="run directory (default: a new one in data/runs/)")


def _open_run(args, params):
    try:
        from analysis.harness.machine import describe_machine
        machine = describe_machine()
    except Exception as exc:  # the description is context, never a reason to lose a probe run
        machine = {"error": f"describe_machine failed: {exc}"}
    run_dir, info = runstore.start_run("probe", "security", params, runs_dir=RUNS_DIR, run_dir=args.out or None)
    if not (run_dir / "machine.json").exists():
        runstore.write_json_atomic(run_dir / "machine.json", machine)
    return run_dir, info


def run(args) -> int:
    if args.runs < 1:
        raise HeapcostError(f"--runs must be at least 1, got {args.runs}")
    if args.timeout <= 0:
        raise HeapcostError(f"--timeout must be positive, got {args.timeout}")
    probes = _probes(args.probes)
    targets = _targets(args.allocators, args.extra)
    params = {"allocators": [t.id for t in targets], "probes": [p.id for p in probes], "runs": args.runs,
              "timeout": args.timeout, "seed": args.seed}
    run_dir, info = _open_run(args, params)
    table = runstore.AppendTable(run_dir / "probes.csv", PROBE_COLUMNS)
    done = {(r["allocator"], r["probe"]) for r in table.rows()}
    try:
        for target in targets:
            chatter = frozenset()
            if not target.unavailable:
                chatter = learn_chatter(target, timeout=args.timeout)
            for probe in probes:
                if (target.id, probe.id) in done:
                    continue
                row = probe_target(probe, target, args.runs, timeout=args.timeout, chatter=chatter, seed=args.seed)
                table.append({"run_id": info["run_id"], **_rounded(row)})
                print(f"{target.id:<20} {probe.id:<26} {row['outcome']:<10} {row.get('detail', '')[:90]}",
                      flush=True)
    finally:
        table.close()
    runstore.finish_run(run_dir)
    print(f"wrote {run_dir / 'probes.csv'}")
    return 0


def _rounded(row: dict) -> dict:
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}
