"""Per-call costs: the time one malloc+free pair adds under each allocator over the baseline, per size class and
reuse pattern, on each host (results_per_call.csv).

The calls-<class>-<pattern> workloads (workloads/calls.c) each do a known number of pairs of one size class in
one pattern. Measured in lockstep with the baseline, a run gives the ratio of an allocator's time over the
baseline's on each (its direct pairs, or through the baseline: debates.pool.run_estimates); a host's runs and
builds are pooled as a debate's are (stats.random_effects.pool). The added time per pair is (ratio - 1) times
the baseline's time per pair on that host (the median active time of its processes over the pairs of their
scale), with the ratio's interval. stats.cost_model turns these into a program's predicted cost.
"""
import math

import numpy as np
import pandas as pd

from analysis.harness.workloads import CALL_WORKLOADS
from analysis.publish.debates import pool
from analysis.stats import random_effects

COLUMNS = ["processor", "allocator", "baseline", "workload", "pattern", "size_class", "n_runs", "n_builds",
           "base_ns", "ratio", "ci_low", "ci_high", "added_ns", "added_ns_low", "added_ns_high"]


def table(res, baseline: str) -> pd.DataFrame:
    """One row per host, allocator and calls workload measured against the baseline."""
    cells = res.cells.get("wall_s") if res.cells else None
    runs_dir = pool.runs_dir_of(res)
    if cells is None or cells.empty or runs_dir is None:
        return pd.DataFrame(columns=COLUMNS)
    cells = cells[cells["workload"].isin(CALL_WORKLOADS)]
    rows = []
    for workload, mine in cells.groupby("workload", sort=True):
        spec = CALL_WORKLOADS[workload]
        for allocator in sorted(set(mine["allocator"].astype(str)) - {baseline}):
            est = pool.run_estimates(mine, runs_dir, "calls", allocator, baseline, workload)
            est = est[~est["superseded"].astype(bool)]
            for processor, sub in est.groupby("processor", sort=True):
                base = _base_ns(runs_dir, sub["run_id"], baseline, workload, spec)
                if base is None:
                    continue
                p = random_effects.pool(sub)
                lo, hi = p.interval()
                ratio, low, high = math.exp(p.estimate), math.exp(lo), math.exp(hi)
                rows.append({"processor": processor, "allocator": allocator, "baseline": baseline,
                             "workload": workload, "pattern": spec.pattern, "size_class": spec.size_class,
                             "n_runs": p.runs, "n_builds": p.builds, "base_ns": base, "ratio": ratio,
                             "ci_low": low, "ci_high": high, "added_ns": (ratio - 1) * base,
                             "added_ns_low": (low - 1) * base, "added_ns_high": (high - 1) * base})
    return pd.DataFrame(rows, columns=COLUMNS)


def _base_ns(runs_dir, run_ids, baseline: str, workload: str, spec) -> float | None:
    """The baseline's time per pair on a host: the median over its runs of the median process's active time
    over the pairs it did at its scale."""
    per_pair = []
    for run_id in sorted(set(run_ids)):
        found = pool.time_of(runs_dir / run_id, baseline, workload)
        if found:
            seconds, scale = found
            per_pair.append(seconds / spec.pairs_at(scale) * 1e9)
    return float(np.median(per_pair)) if per_pair else None
