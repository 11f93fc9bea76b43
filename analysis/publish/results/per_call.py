"""Per-call costs: the time one malloc+free pair adds under each allocator over the baseline, per size class and
reuse pattern, on each host (results_per_call.csv).

The calls-<class>-<pattern> workloads (workloads/calls.c) each do a known number of pairs of one size class in
one pattern. Measured in lockstep with the baseline, a run gives the ratio of an allocator's time over the
baseline's on each (the pairs that put it in turn with the baseline: debates.pool.run_estimates); a host's runs and
builds are pooled as a debate's are (stats.random_effects.pool). The added time per pair is (ratio - 1) times
the baseline's time per pair on that host (the median active time of its processes over the pairs of their
scale), with the ratio's interval. stats.cost_model turns these into a program's predicted cost. LIFO pairs of
32 to 128 KiB with few blocks live (HELD_WORKLOADS) are cells of their own pattern, "held"; the LIFO and held cells
with every block of one size (SAME_SIZE_WORKLOADS), "lifo-same" and "held-same".
"""
import math
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.contract import dataset
from analysis.contract.host import dataset_machines
from analysis.contract.schema import OK
from analysis.harness.workloads.builtin import (CALL_CHILD_PAIRS, CALL_SLOTS, CALL_WORKLOADS, HELD_WORKLOADS,
                                                SAME_SIZE_WORKLOADS)
from analysis.publish.debates import pool
from analysis.publish.results import memo
from analysis.stats import cost_model, random_effects

SLOTS = CALL_SLOTS  # the live blocks of the lifo, fifo and random patterns (the paper says it)
# every workload whose pairs are a per-call cell
CELL_WORKLOADS = {**CALL_WORKLOADS, **HELD_WORKLOADS, **SAME_SIZE_WORKLOADS}
CHILD_PAIRS = CALL_CHILD_PAIRS  # the pairs each process of calls-processes makes (the paper says it)
SMALL_PATTERNS, STARTUP_PATTERN = cost_model.SMALL_PATTERNS, cost_model.PROCESSES
COLUMNS = ["processor", "allocator", "baseline", "workload", "pattern", "size_class", "n_runs", "n_builds",
           "n_machines", "base_ns", "ratio", "ci_low", "ci_high", "added_ns", "added_ns_low", "added_ns_high"]


def table(runs_dir: Path, baseline: str) -> pd.DataFrame:
    """One row per host, allocator and calls workload measured against the baseline, from every complete time
    run of the dataset (`runs_dir`: the dataset, or its runs folder) whose pairs.csv holds calls workloads (the
    speed tables leave them out: paper_runs.instrument_workloads). Remembered by the runs' bytes and place (a
    warning names a run's file), the baseline and the code (memo): the paper, the cost commands and the explore
    notebook ask for the same table."""
    ds = dataset.load(runs_dir)
    return memo.remembered("per_call", (str(ds.root.resolve()), ds.root, baseline),
                           lambda: _table(ds, baseline))


def _table(ds: dataset.Dataset, baseline: str) -> pd.DataFrame:
    cells = measured_cells(ds, baseline)
    if cells.empty:
        return pd.DataFrame(columns=COLUMNS)
    rows = []
    for workload, mine in cells.groupby("workload", sort=True):
        spec = CELL_WORKLOADS[workload]
        for allocator in sorted(set(mine["allocator"].astype(str)) - {baseline}):
            est = pool.run_estimates(mine, ds, "calls", allocator, baseline, workload)
            est = est[~est["superseded"].astype(bool)]
            for processor, sub in est.groupby("processor", sort=True):
                base = _base_ns(ds, sub["run_id"], baseline, workload, spec)
                if base is None:
                    continue
                p = random_effects.pool(sub)
                lo, hi = p.interval()
                ratio, low, high = math.exp(p.estimate), math.exp(lo), math.exp(hi)
                rows.append({"processor": processor, "allocator": allocator, "baseline": baseline,
                             "workload": workload, "pattern": spec.cell_pattern, "size_class": spec.size_class,
                             "n_runs": p.runs, "n_builds": p.builds,
                             "n_machines": int(sub["machine"].nunique()) if "machine" in sub.columns else 1,
                             "base_ns": base, "ratio": ratio,
                             "ci_low": low, "ci_high": high, "added_ns": (ratio - 1) * base,
                             "added_ns_low": (low - 1) * base, "added_ns_high": (high - 1) * base})
    return pd.DataFrame(rows, columns=COLUMNS)


def measured_cells(runs_dir: Path, baseline: str, workloads=CELL_WORKLOADS) -> pd.DataFrame:
    """(run_id, workload, allocator, scale) of every allocator a complete run put in turn with the baseline on one of
    `workloads` (the calls workloads unless told; the baseline's own rows included). `runs_dir`: the dataset, or
    its runs folder."""
    ds = dataset.load(runs_dir)
    frames = []
    for run in ds.runs("time"):
        pairs = ds.table(run, "pairs.csv", shared=True) if run.complete else None
        if pairs is None:
            continue
        a, b = pairs["allocator_a"].astype(str), pairs["allocator_b"].astype(str)
        mine = pairs[pairs["workload"].astype(str).isin(set(workloads)) & (pairs["status"] == OK)
                     & ((a == baseline) | (b == baseline))]
        for side in ("allocator_a", "allocator_b"):
            frames.append(pd.DataFrame({"run_id": run.run_id, "workload": mine["workload"].astype(str),
                                        "allocator": mine[side].astype(str), "scale": mine["scale"]}))
    if not frames:
        return pd.DataFrame(columns=["run_id", "workload", "allocator", "scale"])
    return pd.concat(frames, ignore_index=True).drop_duplicates().reset_index(drop=True)


def _base_ns(ds: dataset.Dataset, run_ids, baseline: str, workload: str, spec) -> float | None:
    """The baseline's time per pair on a host: the median over its runs of the median process's active time
    over the pairs it did at its scale."""
    per_pair = []
    for run_id in sorted(set(run_ids)):
        found = pool.time_of(ds, run_id, baseline, workload)
        if found:
            seconds, scale = found
            per_pair.append(seconds / spec.pairs_at(scale) * 1e9)
    return float(np.median(per_pair)) if per_pair else None


def added_display(added: float, low: float, high: float) -> str:
    """Nanoseconds added per pair with the interval, at a precision the interval resolves."""
    digits = 0 if max(abs(low), abs(high)) >= 100 else 1
    return f"{added:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"


def wide(costs: pd.DataFrame) -> pd.DataFrame:
    """One row per host, allocator and pattern, one column per size class: the nanoseconds each pair adds
    (the estimate; the intervals are in the long table), and the baseline's own time per pair as a row."""
    if costs.empty:
        return pd.DataFrame(columns=["processor", "allocator", "pattern"])
    out = []
    for (processor, pattern), mine in costs.groupby(["processor", "pattern"], sort=True):
        base = mine.groupby("size_class")["base_ns"].median()
        out.append({"processor": processor, "allocator": f"{mine['baseline'].iloc[0]} (its own ns per pair)",
                    "pattern": pattern, **{f"c{int(c)}": f"{v:.1f}" for c, v in base.items()}})
        for allocator, cells in mine.groupby("allocator", sort=True):
            out.append({"processor": processor, "allocator": allocator, "pattern": pattern,
                        **{f"c{int(r.size_class)}": f"{r.added_ns:+.1f}" for r in cells.itertuples()}})
    return pd.DataFrame(out).fillna("")


RATE_COLUMNS = ["processor", "pattern", "size_class", "added_ns", "added_ns_low", "added_ns_high",
                "pairs_per_s", "pairs_per_s_low", "pairs_per_s_high", "per_call_from"]
DIRECT = "in turns with each other"


def rate_for_share(costs: pd.DataFrame, with_: str, without: str, share: float,
                   direct: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per host, pattern and size class: the nanoseconds `with_` adds per malloc+free pair over `without`, and the
    pairs per second of a program's time at which that makes `share` of it (share / added time; its interval from
    the added time's, open above where that reaches zero or below). The pages and processes cells are left out (a step
    there is a whole fresh block, or a process started and ended).

    Where `direct` (table(runs_dir, without): the calls workloads with `without` as the baseline, PAIRS=with:without)
    has the cell, the pair's own difference measured in turns is the added time, with its own interval. Elsewhere,
    where a host measured both configurations against the baseline of `costs`, it is the difference of their added
    times, each interval read as a normal one at stats.estimators.CONFIDENCE and the two taken as independent,
    which is wider."""
    from scipy import stats as sps

    from analysis.stats.estimators import CONFIDENCE

    keys = ["processor", "pattern", "size_class"]
    rows = []
    paired = set()
    if direct is not None and len(direct):
        own = direct[(direct["allocator"] == with_) & (direct["baseline"] == without)
                     & direct["pattern"].isin(SMALL_PATTERNS)]
        for r in own.sort_values(keys).itertuples():
            paired.add((r.processor, r.pattern, int(r.size_class)))
            rows.append(_rate_row(r.processor, r.pattern, r.size_class, r.added_ns, r.added_ns_low, r.added_ns_high,
                                  share, DIRECT))
    if not costs.empty:
        z = float(sps.norm.ppf(0.5 + CONFIDENCE / 2))
        cells = costs[costs["pattern"].isin(SMALL_PATTERNS)]
        both = cells[cells["allocator"] == with_].merge(cells[cells["allocator"] == without], on=keys,
                                                        suffixes=("_with", "_without"))
        for r in both.sort_values(keys).itertuples():
            if (r.processor, r.pattern, int(r.size_class)) in paired:
                continue
            se = math.hypot((r.added_ns_high_with - r.added_ns_low_with) / (2 * z),
                            (r.added_ns_high_without - r.added_ns_low_without) / (2 * z))
            added = r.added_ns_with - r.added_ns_without
            rows.append(_rate_row(r.processor, r.pattern, r.size_class, added, added - z * se, added + z * se,
                                  share, f"each against {r.baseline_with}"))
    out = pd.DataFrame(rows, columns=RATE_COLUMNS)
    return out.sort_values(keys, ignore_index=True) if len(out) else out


def _rate_row(processor, pattern, size_class, added, low, high, share, source) -> dict:
    return {"processor": processor, "pattern": pattern, "size_class": int(size_class),
            "added_ns": added, "added_ns_low": low, "added_ns_high": high,
            "pairs_per_s": share / (added * 1e-9) if added > 0 else math.inf,
            "pairs_per_s_low": share / (high * 1e-9) if high > 0 else math.inf,
            "pairs_per_s_high": share / (low * 1e-9) if low > 0 else math.inf,
            "per_call_from": source}


STARTUP_COLUMNS = ["processor", "allocator", "baseline", "trials", "base_trials", "user_us", "sys_us", "minflt",
                   "added_user_us", "added_sys_us", "added_minflt", "display"]
STARTUP_WORKLOAD = "calls-processes"


def _trial_steps(ds, workloads: dict) -> pd.DataFrame:
    """The trials (PROTOCOL=trials) of the given calls workloads ({id: CallWorkload}), ok and past warm-up, each
    run's on its processor kind: user and system time and minor faults per step (a pair, or a started process)."""
    from analysis.contract.schema import warmup_mask

    labels = {run: m.kind for run, m in dataset_machines(ds).items()}  # each run's processor kind
    frames = []
    for run in ds.runs("time"):
        t = ds.table(run, "trials.csv") if run.complete else None
        if t is None:
            continue
        t = t[t["workload"].astype(str).isin(list(workloads)) & (t["status"] == OK) & ~warmup_mask(t["warmup"])]
        if len(t):
            steps = [workloads[w].pairs_at(float(x)) for w, x in zip(t["workload"].astype(str), t["scale"])]
            frames.append(pd.DataFrame({"processor": labels.get(run.run_id, run.run_id),
                                        "workload": t["workload"].astype(str).to_numpy(),
                                        "allocator": t["allocator"].astype(str).to_numpy(),
                                        "user_us": t["user_s"].astype(float).to_numpy() / steps * 1e6,
                                        "sys_us": t["sys_s"].astype(float).to_numpy() / steps * 1e6,
                                        "minflt": t["minflt"].astype(float).to_numpy() / steps}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["processor", "workload", "allocator", "user_us", "sys_us", "minflt"])


HELD_COLUMNS = ["processor", "allocator", "baseline", "size_class", "slots", "trials", "cpu_us", "minflt",
                "added_cpu_us", "added_minflt", "display"]


def held_split(runs_dir: Path, baseline: str) -> pd.DataFrame:
    """Where trials timed the 32 KiB LIFO cell (calls-32768-lifo, CALL_SLOTS blocks live) and LIFO pairs of 8 to
    128 KiB with few blocks live (harness/workloads/builtin.HELD_WORKLOADS): per host, allocator, size class and
    number of live blocks, the medians per pair of CPU time (user + system) and minor faults, and what each adds
    over the baseline's medians of the same workload on that host (descriptive: what the cells charge a program
    that holds few such blocks at once). `runs_dir`: the dataset, or its runs folder."""
    cell = "calls-32768-lifo"
    workloads = {cell: CALL_WORKLOADS[cell], **HELD_WORKLOADS}
    trials = _trial_steps(dataset.load(runs_dir), workloads)
    rows = []
    for (processor, workload), mine in trials.groupby(["processor", "workload"], sort=True):
        mine = mine.assign(cpu_us=mine["user_us"] + mine["sys_us"])
        med = mine.groupby("allocator")[["cpu_us", "minflt"]].median()
        n = mine.groupby("allocator").size()
        if baseline not in med.index:
            continue
        for allocator in sorted(set(med.index) - {baseline}):
            m, base = med.loc[allocator], med.loc[baseline]
            added_cpu, added_flt = m["cpu_us"] - base["cpu_us"], m["minflt"] - base["minflt"]
            rows.append({"processor": processor, "allocator": allocator, "baseline": baseline,
                         "size_class": workloads[workload].size_class, "slots": workloads[workload].slots,
                         "trials": int(n[allocator]), "cpu_us": m["cpu_us"],
                         "minflt": m["minflt"], "added_cpu_us": added_cpu, "added_minflt": added_flt,
                         "display": f"{added_cpu:+.2f} µs, {added_flt:+.2f} minor faults"})
    out = pd.DataFrame(rows, columns=HELD_COLUMNS)
    return out.sort_values(["processor", "allocator", "size_class", "slots"], kind="stable").reset_index(drop=True)


def startup_split(runs_dir: Path, baseline: str) -> pd.DataFrame:
    """Where a run timed calls-processes as trials (PROTOCOL=trials: each trial's user and system time and minor
    faults, its waited-for children included): per host and allocator, the medians per started process, and what
    each adds over the baseline's medians on that host (descriptive: the lockstep runs give the interval of the
    whole, table()). A host's trial runs of the workload are taken together. `runs_dir`: the dataset, or its runs
    folder."""
    trials = _trial_steps(dataset.load(runs_dir), {STARTUP_WORKLOAD: CALL_WORKLOADS[STARTUP_WORKLOAD]})
    if trials.empty:
        return pd.DataFrame(columns=STARTUP_COLUMNS)
    rows = []
    for processor, mine in trials.groupby("processor", sort=True):
        med = mine.groupby("allocator")[["user_us", "sys_us", "minflt"]].median()
        n = mine.groupby("allocator").size()
        if baseline not in med.index:
            continue
        base = med.loc[baseline]
        for allocator in sorted(set(med.index) - {baseline}):
            m = med.loc[allocator]
            added = {"added_user_us": m["user_us"] - base["user_us"], "added_sys_us": m["sys_us"] - base["sys_us"],
                     "added_minflt": m["minflt"] - base["minflt"]}
            rows.append({"processor": processor, "allocator": allocator, "baseline": baseline,
                         "trials": int(n[allocator]), "base_trials": int(n[baseline]), "user_us": m["user_us"],
                         "sys_us": m["sys_us"], "minflt": m["minflt"], **added,
                         "display": f"user {added['added_user_us']:+.0f} µs, system {added['added_sys_us']:+.0f} µs, "
                                    f"minor faults {added['added_minflt']:+.0f}"})
    return pd.DataFrame(rows, columns=STARTUP_COLUMNS)
