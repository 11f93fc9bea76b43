"""Every complete run of the dataset contributes to the paper, whatever its profile and allocators.

A comparison is always made inside one run, against that run's own baseline (runs differ in machine load,
profile and scale, so a ratio across runs would mix their conditions). When several runs measure the same
allocator, the one with the most usable measurements leads (then the run reported for the kind, then the
newest); the others are shown beside it in the replication table. A user's run of the baseline and a
brought allocator (EXTRA_ALLOCATORS) thus adds that allocator to every table without re-running the rest.
A lockstep run's process pairs (pairs.csv) count like trials: a pair measures both of its allocators. The
instrument workloads (the per-call costs) are left out of every time run here: publish/results/per_call.py
reads them from the runs' folders.
The lead goes first to the like-with-like run (like_with_like_run: the complete run at the full workload
scale that measured the most configurations), so that the speed table, the trade-off and its front compare
allocators measured on one machine, at one scale, in one run; an allocator that run did not measure leads in
the run that measured it on the most workloads, so that every geometric mean in one table covers the same kind
of workload set, and only then in the one with more measurements. Those rows are shown apart from the
like-with-like run's, with their run, host and scale.
"""
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd

from analysis.contract import dataset
from analysis.contract.dataset import Run
from analysis.contract.schema import declared_orientation, usable_trials
from analysis.errors import warn
from analysis.stats.compare import MIN_RUNS
from analysis.stats.paired import MIN_PAIRS

TABLES = {"time": "trials.csv", "callgrind": "counts.csv", "probe": "probes.csv"}


@dataclass
class RunTable:
    run: Run
    table: pd.DataFrame | list[dict]
    pairs: pd.DataFrame | None = None  # a lockstep run's pairs.csv

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @cached_property
    def usable(self) -> pd.DataFrame:
        """The usable trials of a time run (read once: the lead is decided for every allocator of every run)."""
        return usable_trials(self.table)

    @cached_property
    def usable_pairs(self) -> pd.DataFrame:
        if self.pairs is None or self.pairs.empty:
            return pd.DataFrame(columns=["workload", "allocator_a", "allocator_b"])
        return usable_trials(self.pairs)

    @cached_property
    def amounts(self) -> dict[str, tuple[int, int]]:
        """allocator -> (workloads, measurements) of a time run: its usable trials and the pairs it was in."""
        workloads, counts = {}, {}
        rows = [(a, w) for a, w in zip(self.usable["allocator"].astype(str), self.usable["workload"])]
        pairs = self.usable_pairs
        for a, b, w in zip(pairs["allocator_a"].astype(str), pairs["allocator_b"].astype(str), pairs["workload"]):
            rows += [(a, w)] if a == b else [(a, w), (b, w)]  # a pair counts once for each allocator in it
        for a, w in rows:
            workloads.setdefault(a, set()).add(w)
            counts[a] = counts.get(a, 0) + 1
        return {a: (len(workloads[a]), counts[a]) for a in counts}


def contributing_runs(runs_dir, kind: str) -> tuple[Run | None, list[RunTable]]:
    """(the run reported for the kind, every run of the kind that contributes, with its table). Complete
    runs contribute; incomplete ones only when no run of the kind is complete. `runs_dir`: the runs folder
    or its Dataset."""
    ds = dataset.load(runs_dir)
    table = TABLES[kind]
    main = ds.pick(kind, table)
    runs = [r for r in ds.runs(kind) if ds.has(r, table) or (kind == "time" and ds.has(r, "pairs.csv"))]
    complete = [r for r in runs if r.complete]
    chosen = complete or runs
    if kind == "probe" and main is not None:
        # scores add over probes and sizes: only runs of the same probe set and sizes can stand side by side
        same = [r for r in chosen if _probe_design(r) == _probe_design(main)]
        for r in chosen:
            if r not in same:
                warn(f"probe run {r.run_id} ran other probes or sizes than {main.run_id}: its scores are not "
                     "comparable and it is left out")
        chosen = same
    for r in runs:
        if r not in chosen and not r.complete:
            warn(f"run {r.run_id} is not complete ({r.info.get('status')}); the complete runs of its kind are used")
    read = ds.rows if kind == "probe" else ds.table
    out = []
    for r in chosen:
        table = read(r, TABLES[kind])
        if table is None:
            table = pd.DataFrame(columns=["workload", "allocator", "status", "warmup"])
        pairs = ds.table(r, "pairs.csv") if kind == "time" else None
        if pairs is not None:
            pairs = declared_orientation(r.info, pairs)
        instruments = False  # whether the run measured instrument workloads (left to their own readers)
        if kind == "time":
            kept_table, kept_pairs = _without_instruments(table), _without_instruments(pairs)
            instruments = len(kept_table) < len(table) or (pairs is not None and len(kept_pairs) < len(pairs))
            table, pairs = kept_table, kept_pairs
        rt = RunTable(r, table, pairs)
        if kind == "time" and not has_usable_cell(rt):
            if not instruments:
                warn(too_few_note(rt))
            continue
        out.append(rt)
    if kind == "time" and out:
        # the run the paper describes is the one that leads the most cells of the standard set, never the newest
        main = leading_run(out)
    return main, out


def instrument_workloads() -> frozenset[str]:
    """Workloads that measure a quantity for a model rather than a program's speed: the per-call cost
    workloads (calls-<class>-<pattern>, LIFO pairs of 8 to 128 KiB with few blocks live, and both of one size), read by
    publish/results/per_call.py, and the programs that check the cost model (harness/workloads/cost_programs.py),
    read by publish/results/cost_check.py; never by the speed tables, the host panel or the lead of a run (a run of
    them alone contributes nothing else)."""
    from analysis.harness.workloads.cost_programs import BY_NAME
    from analysis.harness.workloads.builtin import CALL_WORKLOADS, HELD_WORKLOADS, SAME_SIZE_WORKLOADS

    return frozenset(CALL_WORKLOADS) | frozenset(HELD_WORKLOADS) | frozenset(SAME_SIZE_WORKLOADS) | frozenset(BY_NAME)


def _without_instruments(table: pd.DataFrame | None) -> pd.DataFrame | None:
    if table is None or "workload" not in table.columns:
        return table
    keep = ~table["workload"].astype(str).isin(instrument_workloads())
    return table if keep.all() else table[keep].reset_index(drop=True)


def standard_workloads() -> frozenset[str]:
    """The standard set: the workloads a campaign runs by default (the full profile's workloads)."""
    from analysis.harness.workloads.builtin import DEFAULT_WORKLOADS

    return frozenset(DEFAULT_WORKLOADS)


def _lead_workloads(rt: RunTable, allocator: str) -> set[str]:
    trials = rt.usable
    return set(trials.loc[trials["allocator"] == allocator, "workload"]) | set(_pair_rows(rt, allocator)["workload"])


def led_cells(runs: list[RunTable], standard: frozenset[str] | None = None) -> dict[str, int]:
    """run id -> the allocator x workload cells of the standard set it leads (each allocator's results come
    from its leading run; the cells counted are that run's workloads of the standard set for it)."""
    standard = standard_workloads() if standard is None else standard
    lead = leads("time", runs, None, standard)
    by_id = {rt.run_id: rt for rt in runs}
    counts = {rt.run_id: 0 for rt in runs}
    for alloc, run_id in lead.items():
        counts[run_id] += len(_lead_workloads(by_id[run_id], alloc) & standard)
    return counts


def leading_run(runs: list[RunTable], standard: frozenset[str] | None = None) -> Run | None:
    """The time run the method section, the abstract and the workload table describe: the one that leads the
    most allocator x workload cells of the standard set; among equals the complete one, then the newest. A
    newer run that measured two server workloads does not displace the run the allocators' results come from."""
    if not runs:
        return None
    counts = led_cells(runs, standard)
    best = max(runs, key=lambda rt: (counts[rt.run_id], rt.run.complete, rt.run_id))
    return best.run


def aa_copies(run: Run) -> set[str]:
    """Allocators of a run that are the baseline's own library brought again (EXTRA_ALLOCATORS=
    name=<the path of libc.so.6>): their comparisons with the baseline are A/A trials."""
    return {aid for aid, rec in (run.info.get("allocators") or {}).items()
            if (rec.get("origin") or {}).get("kind") == "path"
            and ((rec.get("origin") or {}).get("library") or Path(str(rec["origin"].get("path", ""))).name).startswith("libc.so")}


def standard_cells(rt: RunTable, standard: frozenset[str] | None = None) -> set[tuple[str, str]]:
    """(allocator, workload) cells of the standard set a time run measured: usable trials or pairs."""
    standard = standard_workloads() if standard is None else standard
    cells = {(str(a), w) for a, w in zip(rt.usable["allocator"], rt.usable["workload"]) if w in standard}
    pairs = rt.usable_pairs
    for a, b, w in zip(pairs["allocator_a"].astype(str), pairs["allocator_b"].astype(str), pairs["workload"]):
        if w in standard:
            cells |= {(a, w), (b, w)}
    return cells


def configurations(rt: RunTable, standard: frozenset[str] | None = None) -> set[str]:
    """The configurations a time run measured on the standard workloads: allocators with a usable trial or pair
    there, less the repeats of a configuration (its layout builds, `<id>_l<N>`, and A/A copies of the
    baseline's library)."""
    from analysis.harness.allocators.catalog import layout_of

    copies = aa_copies(rt.run)
    return {a for a, _ in standard_cells(rt, standard) if a not in copies and layout_of(a)[1] == 1}


def full_scale(run: Run) -> bool:
    """Whether a run measured at the full workload scale (its profile's scale; an allocator's own scale factor,
    which the slowest debugging allocators have below 1, is stated per row)."""
    return float((run.info.get("profile") or {}).get("scale") or 0.0) == 1.0


LIKE_WITH_LIKE_MIN = 3  # configurations, the baseline among them: fewer compare nothing like with like


def like_with_like_run(runs: list[RunTable], standard: frozenset[str] | None = None) -> RunTable | None:
    """The complete time run at the full workload scale that measured the most configurations on the standard
    workloads (then the most of their cells, then the newest): the speed table, the trade-off and its front read
    every row from it, one machine, one scale and one run. A newer run of two server workloads does not displace
    it. None when no complete full-scale run measured LIKE_WITH_LIKE_MIN configurations."""
    def key(rt: RunTable) -> tuple:
        mine = configurations(rt, standard)
        return len(mine), len({c for c in standard_cells(rt, standard) if c[0] in mine}), rt.run_id

    full = {rt.run_id: key(rt) for rt in runs if rt.run.complete and full_scale(rt.run)}
    best = max((rt for rt in runs if rt.run_id in full), key=lambda rt: full[rt.run_id], default=None)
    return best if best is not None and full[best.run_id][0] >= LIKE_WITH_LIKE_MIN else None


def has_usable_cell(rt: RunTable) -> bool:
    """Whether a time run has one cell any analysis can use: MIN_RUNS usable trials of an allocator on a
    workload, or MIN_PAIRS usable lockstep pairs of two allocators on a workload."""
    trials = rt.usable
    if len(trials) and (trials.groupby(["workload", "allocator"]).size() >= MIN_RUNS).any():
        return True
    pairs = rt.usable_pairs
    return bool(len(pairs) and (pairs.groupby(["workload", "allocator_a", "allocator_b"]).size() >= MIN_PAIRS).any())


def too_few_note(rt: RunTable) -> str:
    smoke = " (a smoke run checks the set-up; it is not a measurement)" if rt.run.profile == "smoke" else ""
    return (f"run {rt.run_id} is left out of the results: no cell has {MIN_RUNS} usable trials or "
            f"{MIN_PAIRS} usable pairs{smoke}")


def _probe_design(run: Run) -> tuple:
    """The probes and sizes a probe run's scores add over: its scored probes (a probe read beside the score,
    `scored=False` in harness/security/probes.py, never makes two runs incomparable)."""
    params = run.info.get("params") or {}
    unscored = unscored_probes()
    return tuple(p for p in params.get("probes") or () if p not in unscored), tuple(params.get("sizes") or ())


def unscored_probes() -> frozenset[str]:
    """The probes read beside the security score, never in it (the page-sized entropy runs)."""
    from analysis.harness.security.probes import PROBES

    return frozenset(p for p, probe in PROBES.items() if not probe.scored)


def _pair_rows(rt: RunTable, allocator: str) -> pd.DataFrame:
    used = rt.usable_pairs
    return used[(used["allocator_a"] == allocator) | (used["allocator_b"] == allocator)]


def measured_amount(kind: str, rt: RunTable, allocator: str) -> tuple[int, int]:
    """(workloads, measurements) a run has of an allocator: usable trials and pairs, counted cells, or
    probe processes (one workload set for those)."""
    table = rt.table
    if kind == "time":
        return rt.amounts.get(allocator, (0, 0))
    if kind == "callgrind":
        ok = table[(table["allocator"] == allocator) & (table["status"] == "ok")]
        return ok["workload"].nunique(), len(ok)
    return 1, sum(int(float(r.get("trials") or 0)) for r in table if r["allocator"] == allocator)


def allocators_of(kind: str, rt: RunTable) -> set[str]:
    if kind == "probe":
        return {r["allocator"] for r in rt.table}
    found = set(rt.table["allocator"].astype(str))
    if rt.pairs is not None:
        found |= set(rt.pairs["allocator_a"].astype(str)) | set(rt.pairs["allocator_b"].astype(str))
    return found


def leads(kind: str, runs: list[RunTable], main: Run | None,
          standard: frozenset[str] | None = None) -> dict[str, str]:
    """allocator -> run id of the run that leads for it: for time runs the like-with-like run when it measured
    the allocator; otherwise the run with the most workloads, then measurements, of it."""
    out = {}
    present_in = {rt.run_id: allocators_of(kind, rt) for rt in runs}
    like = like_with_like_run(runs, standard) if kind == "time" else None
    for alloc in sorted(set().union(*present_in.values()) if runs else ()):
        if like is not None and measured_amount(kind, like, alloc)[1] > 0:
            out[alloc] = like.run_id
            continue
        amount = {rt.run_id: measured_amount(kind, rt, alloc) for rt in runs}
        ranked = sorted(runs, key=lambda rt: (amount[rt.run_id], main is not None and rt.run_id == main.run_id,
                                              rt.run_id))
        # an allocator nothing could be measured of still leads somewhere: its rows say why (n/a, failures)
        present = [rt for rt in ranked if alloc in present_in[rt.run_id]]
        out[alloc] = (ranked[-1] if amount[ranked[-1].run_id][1] > 0 else present[-1]).run_id
    return out


def run_labels(run_ids) -> dict[str, str]:
    """Short labels (R1, R2, ...) in the order the runs were started, for tables."""
    return {rid: f"R{i}" for i, rid in enumerate(sorted(set(run_ids)), start=1)}


def merge_rows(per_run: dict[str, pd.DataFrame], lead: dict[str, str], baseline: str) -> pd.DataFrame:
    """The rows of each allocator from its leading run, with that run's id."""
    frames = []
    for run_id, frame in per_run.items():
        if frame is None or frame.empty:
            continue
        mine = frame[[lead.get(a) == run_id or (a == baseline and lead.get(a) is None)
                      for a in frame["allocator"]]]
        frames.append(mine.assign(run_id=run_id))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def merge_pair_rows(per_run: dict[str, pd.DataFrame], lead: dict[str, str]) -> pd.DataFrame:
    """Rows of pairs (an `allocator` against its `base`, as the ablations): each pair's rows from the run that
    leads for its allocator when that run measured the pair, else from the run that leads for its base (a
    knock-out measured only beside its control in a small run), with that run's id."""
    have = {(run_id, a, b) for run_id, frame in per_run.items() if frame is not None and not frame.empty
            for a, b in zip(frame["allocator"], frame["base"])}
    frames = []
    for run_id, frame in per_run.items():
        if frame is None or frame.empty:
            continue
        keep = [lead.get(a) == run_id or ((lead.get(a), a, b) not in have and lead.get(b) == run_id)
                for a, b in zip(frame["allocator"], frame["base"])]
        frames.append(frame[keep].assign(run_id=run_id))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _leading_probe_rows(runs: list[RunTable], lead: dict[str, str], scored: bool) -> list[dict]:
    """Each allocator's probe rows from the run that leads for it, of the scored probes or of the others."""
    unscored = unscored_probes()
    return [dict(r, run_id=rt.run_id) for rt in runs for r in rt.table if lead.get(r["allocator"]) == rt.run_id
            and (r["probe"] in unscored) != scored]


def merge_probe_rows(runs: list[RunTable], lead: dict[str, str]) -> list[dict]:
    """Each allocator's probe rows from the run that leads for it: the scored probes (what the scores add over)."""
    return _leading_probe_rows(runs, lead, scored=True)


def extra_probe_rows(runs: list[RunTable], lead: dict[str, str]) -> list[dict]:
    """The rows merge_probe_rows leaves out: the probes read beside the score (unscored_probes), from each
    allocator's leading run."""
    return _leading_probe_rows(runs, lead, scored=False)
