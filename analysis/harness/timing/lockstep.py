"""Lockstep pairs: two allocators' processes of one C workload, alive at once on one CPU, taking turns.

The unit of measurement on a machine whose CPUs switch speed regimes (docs/design.md, "The timing
protocol"): process A (allocator X) and process B (allocator Y) are started by the driver
`heapcost-lockstep` (lockstep.c beside it), both pinned to the same CPU, and pass a token to each other
through two pipes every ~chunk_us of their own work (workloads/wl_common.h, wl_turn). Each reports its
own active time, so both times are taken in the same regime and their ratio is free of it. The driver
only starts, pins and reaps them; the harness (this process) runs on the other CPU.

The environment, the resolution check and the verdict are trial.py's (SpeedTrial.env, .judge), applied
to each process of the pair.
"""
import re
from functools import lru_cache
from pathlib import Path

from analysis.errors import HeapcostError, warn
from analysis.harness.process.build import build_c
from analysis.harness.process.launcher import _DEFAULTS, CHILD_IO, LaunchResult
from analysis.harness.process.trial import SpeedTrial, first_line, side_arguments
from analysis.harness.timing.driven_pair import run_driven_pair
from analysis.paths import WORKLOADS_DIR

CHUNK_US = 1000  # default turn length: about 1 ms of a process's own work


@lru_cache(maxsize=None)
def driver_path() -> Path:
    return build_c("heapcost-lockstep", [Path(__file__).with_name("lockstep.c"), CHILD_IO])


def supports_lockstep(workload) -> bool:
    """A single-threaded C workload whose source takes turns (calls wl_turn); others fall back to
    ordinary (pinned) trials."""
    source = getattr(workload, "source", "")
    if workload.kind != "c" or not source or getattr(workload, "threads", False):
        return False
    try:
        return "wl_turn()" in (WORKLOADS_DIR / source).read_text()
    except OSError:
        return False


def driver_command(trial_a: SpeedTrial, trial_b: SpeedTrial, dirs, pads, *, cpu, first, chunk_us,
                   timeout, aslr: bool = True) -> list[str]:
    cmd = [str(driver_path()), "--first", first, "--chunk-us", str(int(chunk_us))]
    if not aslr:
        cmd += ["--no-aslr", "1"]
    if cpu is not None:
        cmd += ["--cpu", str(int(cpu))]
    if timeout:
        cmd += ["--timeout", f"{timeout:g}"]
    for side, trial, workdir, pad in (("a", trial_a, dirs[0], pads[0]), ("b", trial_b, dirs[1], pads[1])):
        cmd += side_arguments(side, trial, workdir, pad)
    return [*cmd, "--", *map(str, trial_a.argv), "--", *map(str, trial_b.argv)]



def _launch_result(d: dict) -> LaunchResult:
    fields = {k: d.get(k, v) for k, v in _DEFAULTS.items()}
    return LaunchResult(status=d.get("status", "spawn-failed"), **fields)


def run_pair(trial_a: SpeedTrial, trial_b: SpeedTrial, *, expected_a: str | None, expected_b: str | None,
             cpu: int | None, first: str = "a", chunk_us: int = CHUNK_US, pads=(0, 0),
             timeout: float | None = None, aslr: bool = True) -> dict:
    """Run one lockstep pair; returns its row of pairs.csv (without run_id, seq, block, warmup).
    aslr=False (the bench's layout part only) starts both processes without address-space randomization."""

    def read_side(d, data, workdir):
        failure = None
        if d.get("active_s") is None:
            failure = "no lockstep report on stderr: " + (first_line(workdir / "stderr")
                                                          or "the workload does not take turns")
        result = _launch_result(d)
        return result, {"active": _fmt(d.get("active_s")), "turns": d.get("turns"),
                        "wall": f"{result.wall_s:.6f}"}, failure

    return run_driven_pair(
        trial_a, trial_b, expected_a=expected_a, expected_b=expected_b, first=first, cpu=cpu, chunk_us=chunk_us,
        pads=pads, driver="lockstep", one_cell="a lockstep pair runs one workload at one scale", prefix="pair",
        command=lambda dirs: driver_command(trial_a, trial_b, dirs, pads, cpu=cpu, first=first, chunk_us=chunk_us,
                                            timeout=timeout, aslr=aslr),
        timeout=None if not timeout else timeout + 60, read_side=read_side,
        own_cpu=lambda data, results: sum(r.user_s + r.sys_s for r in results.values()))


def _fmt(x):
    return "" if x is None else f"{float(x):.9f}"


# ------------------------------------------------------------------------ a campaign of lockstep pairs
DEBATES_FILE = "debates.toml"


def parse_pairs(value, selected, catalogue, baseline: str, debates=None) -> list[tuple[str, str]]:
    """PAIRS=a:b,c:d: configurations that take turns with each other directly (besides each with the
    baseline), so that their ratio b/a carries one interval rather than two (measured: jemalloc-junk-free and
    jemalloc through glibc reached ±1.2-1.6% where direct pairs reach ±0.5-0.8% in the same campaign).
    Every id must be a known allocator in the selection. PAIRS=debates: the contested pairs of debates.toml
    whose two configurations are both selected (the others are named and left out), and the same pair of
    each layout build selected on both sides (a_l2:b_l2)."""
    text = str(value or "").strip()
    if not text:
        return []
    if text == "debates":
        contested = [p for p in debate_pairs(debates) if baseline not in p]
        chosen = [p for p in contested if all(x in selected for x in p)]
        # each layout build N selected on both sides (`<id>_l<N>`) is paired as well
        layouts = sorted({int(m.group(1)) for x in selected if (m := re.search(r"_l([0-9]+)$", str(x)))})
        chosen += [(f"{a}_l{n}", f"{b}_l{n}") for a, b in contested for n in layouts
                   if f"{a}_l{n}" in selected and f"{b}_l{n}" in selected]
        left = [f"{a}:{b}" for a, b in contested if (a, b) not in chosen]
        if not chosen:
            raise HeapcostError(f"PAIRS=debates: no contested pair of {DEBATES_FILE} has both configurations "
                                f"in ALLOCATORS ({', '.join(left) or 'none but with the baseline'})")
        if left:
            warn(f"PAIRS=debates: {', '.join(left)} left out (not both in ALLOCATORS)")
        return chosen
    pairs = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        sides = [s.strip() for s in item.split(":")]
        if len(sides) != 2 or not all(sides):
            raise HeapcostError(f"PAIRS takes a:b items separated by commas, not {item!r}")
        a, b = sides
        for x in (a, b):
            if x not in catalogue and x not in selected:
                raise HeapcostError(f"PAIRS names an unknown allocator {x!r} (in {item!r})")
            if x not in selected:
                raise HeapcostError(f"PAIRS names {x!r}, which is not in ALLOCATORS: add it there")
        if a == b:
            raise HeapcostError(f"PAIRS pairs {a!r} with itself: an A/A pair is the baseline with a copy "
                                "(EXTRA_ALLOCATORS=copy=/path/libc.so.6)")
        if baseline in (a, b):
            raise HeapcostError(f"PAIRS {item!r}: every allocator already takes turns with the baseline {baseline}")
        if frozenset((a, b)) in {frozenset(p) for p in pairs}:
            raise HeapcostError(f"PAIRS names the pair {a}:{b} twice")
        pairs.append((a, b))
    return pairs


def debate_pairs(path=None) -> list[tuple[str, str]]:
    """The contested pairs of debates.toml as (without, with): each debate's `contested = [[with, without],
    ...]` lists the configuration with the defence first, and the direct pair's ratio is b/a = with/without."""
    import tomllib

    from analysis.paths import REPO

    path = Path(path) if path else REPO / DEBATES_FILE
    if not path.is_file():
        raise HeapcostError(f"PAIRS=debates reads the contested pairs from {DEBATES_FILE}, which does not exist")
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise HeapcostError(f"{DEBATES_FILE} is not readable TOML: {str(exc).splitlines()[0]}") from None
    debates = data.get("debate", [])
    out = []
    for d in debates if isinstance(debates, list) else []:
        contested = d.get("contested") if isinstance(d, dict) else None
        if not (isinstance(contested, list) and contested and all(
                isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in contested)):
            name = d.get("seed", d.get("id", "?")) if isinstance(d, dict) else d
            raise HeapcostError(f"{DEBATES_FILE}: debate {name} needs contested = [[\"with\", \"without\"], ...]")
        out += [(without, with_) for with_, without in contested if (without, with_) not in out]
    if not out:
        raise HeapcostError(f"{DEBATES_FILE} names no contested pair ([[debate]] with contested = [[a, b]])")
    return out


def split_cells(camp, baseline: str, direct=(), strict: bool = True) -> tuple[list, list]:
    """(lockstep cells, trial cells) of a campaign. A lockstep cell is (allocator, workload, scale factor,
    reference): every (allocator != baseline, workload that takes turns) cell runs as pairs with the
    baseline as reference, and each direct pair (a, b) of PAIRS adds (b, workload, factor, a) wherever both
    run that workload at that factor (a pair with none is an error, or with strict=False, as PAIRS=debates
    passes it, left out with a warning); the workloads that cannot take turns (perl, python, sqlite,
    compile, server, brought programs that run threads or wait) keep ordinary pinned trials, baseline included;
    a brought program that runs one thread at a time takes turns from outside (harness/timing/alternation.py) once
    the campaign has decided so (camp.alternation_windows)."""
    if baseline not in camp.resolved:
        raise HeapcostError(f"the lockstep protocol compares every allocator with the baseline {baseline}: "
                            "include it in ALLOCATORS")
    turns = {w for w, wl in camp.workloads.items() if supports_lockstep(wl)}
    turns |= set(getattr(camp, "alternation_windows", {}))  # brought programs taking turns from outside
    paired = [(*c, baseline) for c in camp.pairs if c[1] in turns and c[0] != baseline]
    cells = set(camp.pairs)
    for a, b in direct:
        both = [(b, w, f, a) for bb, w, f in camp.pairs if bb == b and w in turns and (a, w, f) in cells]
        if not both:
            why = f"PAIRS {a}:{b}: the two run no selected workload that takes turns at the same scale"
            if strict:
                raise HeapcostError(why)
            warn(why + ": left out")
        paired += both
    trials = [c for c in camp.pairs if c[1] not in turns]
    return paired, trials


def run_pairs(camp, run_dir: Path, info: dict, *, baseline: str, pad_spread: int) -> dict:
    """Randomized complete blocks of pairs into pairs.csv (analysis.harness.process.blocks): one pair per lockstep
    cell and block, who goes first alternating between blocks (and between neighbouring cells); adaptive
    mode (TARGET_CI) adds blocks of the cells whose paired interval is still too wide."""
    import time

    from analysis.contract import runstore
    from analysis.contract.schema import PAIR_COLUMNS
    from analysis.harness.process.blocks import run_blocks
    from analysis.harness.process.trial import progress_bar

    windows = getattr(camp, "alternation_windows", {})
    # a cell whose side ended no run in its window gets a window twice as long from its next pair on, recorded in
    # run.json as it happens (a resumed run keeps them)
    longer = dict(info.get("alternation_widened") or {})
    info["protocol_cells"] = {"lockstep": sorted({c[1] for c in camp.lockstep_cells if c[1] not in windows}),
                              "trials": sorted({w for _, w, _ in camp.trial_cells}),
                              **({"alternating": sorted({c[1] for c in camp.lockstep_cells if c[1] in windows})}
                                 if windows else {})}
    info["lockstep_roles"] = {"baseline": baseline, "roles": "alternating"}
    direct = sorted({(ref, aid) for aid, _, _, ref in camp.lockstep_cells if ref != baseline})
    if direct:
        info["lockstep_roles"]["direct_pairs"] = [list(p) for p in direct]
    runstore.write_json_atomic(run_dir / "run.json", info)
    table = runstore.AppendTable(run_dir / "pairs.csv", PAIR_COLUMNS)
    done = table.rows()
    cells = list(camp.lockstep_cells)
    index = {c: i for i, c in enumerate(cells)}
    expected = info["expected_checksums"]
    started = time.monotonic()
    blocks = camp.pair_blocks
    bar = progress_bar(len(cells) * (blocks + camp.profile.warmups), len(done), camp.progress)

    def measure(block, warm, cell, pads, _done):
        aid, wid, factor, ref = cell
        ta, tb = camp.trial(ref, wid, factor), camp.trial(aid, wid, factor)
        if swapped_roles(block, index[cell]):
            ta, tb = tb, ta
        key = lambda t: f"{wid}|{t.alloc.variant}|{t.scale:.6g}"  # noqa: E731
        if wid in windows:  # a brought program, made to take turns from outside
            from analysis.harness.timing.alternation import SLICE_US, run_window, widened

            label = f"{wid} {aid}:{ref}"
            window = longer.get(label, windows[wid])
            row = run_window(ta, tb, expected_a=expected.get(key(ta)), expected_b=expected.get(key(tb)),
                             cpu=camp.cpu, driver_cpu=next((c for c in camp.all_cpus if c != camp.cpu), None),
                             window_s=window, first=first_side(block, index[cell]), pads=pads,
                             slice_us=getattr(camp, "slice_us", SLICE_US))
            wider = widened(window, row)
            if wider is not None:
                longer[label] = wider
                saved = runstore.read_json(run_dir / "run.json")
                saved["alternation_widened"] = info["alternation_widened"] = dict(sorted(longer.items()))
                runstore.write_json_atomic(run_dir / "run.json", saved)
            return {**row, "run_id": run_dir.name}
        timeout = 2 * max(ta.timeout_s or 0, tb.timeout_s or 0) or None
        row = run_pair(ta, tb, expected_a=expected.get(key(ta)), expected_b=expected.get(key(tb)),
                       cpu=camp.cpu, first=first_side(block, index[cell]), pads=pads, timeout=timeout)
        return {**row, "run_id": run_dir.name}

    try:
        return run_blocks(cells, blocks=blocks, warmups=camp.profile.warmups, seed=info["seed"],
                          salt=0x9A125, done=done, bar=bar, record=table.append, measure=measure,
                          draw=lambda rng: (rng.randrange(pad_spread), rng.randrange(pad_spread)),
                          target=camp.target_ci, budget_min=camp.budget_min,
                          wider=lambda rows, target: _wider_cells(rows, cells, target, camp.scale_of),
                          elapsed_s=float(info.get("elapsed_s", 0)))
    finally:
        bar.close()
        table.close()
        runstore.add_elapsed(run_dir, info, time.monotonic() - started)


# Adaptive mode may call a cell precise enough only from this many pairs on: with 5-9 pairs the trimmed
# mean's standard error is itself so uncertain that stopping when it looks small makes intervals too narrow
# (A/A run 20261130T134138Z-time-quick: 13 of 40 copies excluded 1; with at least 20 pairs, outside the one
# workload with a systematic effect, 1 of 30).
MIN_PAIRS_TO_STOP = 20


def swapped_roles(block: int, cell_index: int) -> bool:
    """True when the baseline runs as process b in this block: the roles alternate between blocks, because a
    process's role moved an A/A ratio by about 1% on small-loop (glibc against glibc, 250 pairs, harness on
    the other CPU: 1.009 [1.004, 1.013]); alternated, that offset cancels in the mean and shows in the
    spread the interval describes."""
    return (block + cell_index) % 2 == 1


def first_side(block: int, cell_index: int) -> str:
    """Who takes the first turn: alternates every second block, so each role goes first as often with
    either allocator in it."""
    return "ab"[(block // 2 + cell_index) % 2]


def _wider_cells(rows, cells, target: float, scale_of) -> list:
    """Cells whose paired interval (stats/paired.py) is wider than ±target, or that have too few pairs; a
    cell's pairs are its two allocators' rows turned so that its reference is side a."""
    import math

    import pandas as pd

    from analysis.contract.schema import is_usable, oriented_pairs
    from analysis.stats import paired

    usable = pd.DataFrame([r for r in rows if is_usable(r)])
    wide = []
    for aid, wid, factor, ref in cells:
        scale = f"{scale_of(factor):.6g}"
        sub = usable[(usable["workload"] == wid) & (usable["scale"] == scale)
                     & (((usable["allocator_a"] == ref) & (usable["allocator_b"] == aid))
                        | ((usable["allocator_a"] == aid) & (usable["allocator_b"] == ref)))] if len(usable) else usable
        if len(sub) < MIN_PAIRS_TO_STOP:
            wide.append((aid, wid, factor, ref))
            continue
        sub = oriented_pairs(sub.reset_index(drop=True), ref)
        d, _ = paired.paired_difference(paired.log_ratios(sub).to_numpy())
        lo, hi = d.interval()
        if math.expm1((hi - lo) / 2) > target:
            wide.append((aid, wid, factor, ref))
    return wide
