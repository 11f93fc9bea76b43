"""Estimates per group of runs (a host kind, or clock locked / not) and pooled over the groups with the
group as a random effect.

Input: the comparison rows each run made against its own baseline (one row per run, workload, scale and
allocator: ratio, ci_low, ci_high, df), and which group each run belongs to. For each allocator, only the
cells (workload, scale, protocol) measured in every group count, so every group's geometric mean is over the
same workloads. Inside a group, the runs of one cell are pooled with the run as a random effect; a group's
estimate is the geometric mean over the cells; the pooled estimate combines the groups' estimates with the
group as a random effect.

The random-effects model is a parameter (`pool`: a list of Differences -> one Difference), so the model the
debate answers use for runs can be put in. The default, `random_effects_pool`, is DerSimonian-Laird's
between-group variance with the Hartung-Knapp-Sidik-Jonkman interval (t with k - 1 degrees of freedom, never
narrower than DerSimonian-Laird's), which holds its coverage with few groups where the normal interval does not.
"""
import math
from typing import Callable

import numpy as np
import pandas as pd

from analysis.stats.estimators import CONFIDENCE, Difference, pooled_mean_difference

Pool = Callable[[list[Difference]], Difference]
GROUP_COLUMNS = ["group", "allocator", "cells", "runs", "ratio", "ci_low", "ci_high"]
# with two groups, `contrast_*` is the first group's estimate over the second's (groups in sorted order)
POOLED_COLUMNS = ["allocator", "groups", "cells", "ratio", "ci_low", "ci_high", "tau",
                  "contrast_ratio", "contrast_low", "contrast_high"]
MIN_SE = 1e-12


def random_effects_pool(diffs: list[Difference]) -> Difference:
    """One estimate from independent estimates of the same quantity whose true values vary between them."""
    if len(diffs) == 1:
        return diffs[0]
    y = np.array([d.estimate for d in diffs])
    v = np.maximum(np.array([d.se for d in diffs]) ** 2, MIN_SE ** 2)
    k = len(y)
    w = 1 / v
    fixed = float(np.sum(w * y) / np.sum(w))
    q = float(np.sum(w * (y - fixed) ** 2))
    c = float(np.sum(w) - np.sum(w ** 2) / np.sum(w))
    tau2 = max(0.0, (q - (k - 1)) / c) if c > 0 else 0.0
    ws = 1 / (v + tau2)
    est = float(np.sum(ws * y) / np.sum(ws))
    se_dl = math.sqrt(1 / float(np.sum(ws)))
    se_hk = math.sqrt(float(np.sum(ws * (y - est) ** 2)) / ((k - 1) * float(np.sum(ws))))
    return Difference(est, max(se_dl, se_hk), float(k - 1))


def cochran_q(diffs: list[Difference]) -> float:
    """Cochran's Q: the estimates' weighted squared distances from their fixed-effect mean (chi-squared on
    len(diffs) - 1 degrees of freedom when they estimate one value)."""
    y = np.array([d.estimate for d in diffs])
    w = 1 / np.maximum(np.array([d.se for d in diffs]) ** 2, MIN_SE ** 2)
    fixed = np.sum(w * y) / np.sum(w)
    return float(np.sum(w * (y - fixed) ** 2))


def between_variance(diffs: list[Difference]) -> float:
    """DerSimonian-Laird's estimate of the variance of the true values between the estimates (tau squared)."""
    if len(diffs) < 2:
        return 0.0
    w = 1 / np.maximum(np.array([d.se for d in diffs]) ** 2, MIN_SE ** 2)
    c = float(np.sum(w) - np.sum(w ** 2) / np.sum(w))
    return max(0.0, (cochran_q(diffs) - (len(diffs) - 1)) / c) if c > 0 else 0.0


def contrast(a: Difference, b: Difference) -> Difference:
    """a - b of two independent estimates (Welch-Satterthwaite degrees of freedom)."""
    var = a.se ** 2 + b.se ** 2
    denom = (a.se ** 4 / a.df if a.se > 0 else 0.0) + (b.se ** 4 / b.df if b.se > 0 else 0.0)
    return Difference(a.estimate - b.estimate, math.sqrt(var), var ** 2 / denom if denom > 0 else min(a.df, b.df))


def _cell_key(rows: pd.DataFrame) -> pd.Series:
    scale = pd.to_numeric(rows["scale"], errors="coerce").round(6).fillna(-1) if "scale" in rows else -1
    paired = rows["method"].astype(str).str.contains("paired") if "method" in rows else False
    return (rows["workload"].astype(str) + "|" + pd.Series(scale, index=rows.index).astype(str) + "|"
            + pd.Series(paired, index=rows.index).astype(str))


def usable_cells(cells: pd.DataFrame, group_of_run: dict) -> pd.DataFrame:
    """The comparison rows with a finite interval and a known group, keyed by cell."""
    need = {"run_id", "workload", "allocator", "ratio", "ci_low", "ci_high", "df"}
    if cells is None or not len(cells) or not need <= set(cells.columns):
        return pd.DataFrame(columns=[*need, "group", "cell"])
    rows = cells.copy()
    for col in ("ratio", "ci_low", "ci_high", "df"):
        rows[col] = pd.to_numeric(rows[col], errors="coerce")
    rows = rows[np.isfinite(rows[["ratio", "ci_low", "ci_high", "df"]]).all(axis=1)
                & (rows["ratio"] > 0) & (rows["ci_low"] > 0) & (rows["df"] > 0)]
    rows = rows.assign(group=rows["run_id"].map(group_of_run))
    rows = rows[rows["group"].notna()]
    return rows.assign(cell=_cell_key(rows))


def _interval(diff: Difference, confidence: float) -> tuple[float, float, float]:
    lo, hi = diff.interval(confidence)
    return math.exp(diff.estimate), math.exp(lo), math.exp(hi)


def group_panel(cells: pd.DataFrame, group_of_run: dict, pool: Pool = random_effects_pool,
                confidence: float = CONFIDENCE, allocators=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per group and allocator, pooled per allocator) over the cells every group measured.

    Allocators measured in fewer than two groups on common cells are left out of both tables."""
    rows = usable_cells(cells, group_of_run)
    per_group, pooled = [], []
    for alloc, sub in rows.groupby("allocator", sort=True):
        if allocators is not None and alloc not in allocators:
            continue
        groups = sorted(sub["group"].unique())
        if len(groups) < 2:
            continue
        common = set.intersection(*(set(sub.loc[sub["group"] == g, "cell"]) for g in groups))
        if not common:
            continue
        estimates = {}
        for g in groups:
            in_group = sub[(sub["group"] == g) & sub["cell"].isin(common)]
            per_cell = [pool([Difference.of_row(r, confidence) for _, r in c.iterrows()])
                        for _, c in in_group.groupby("cell", sort=True)]
            estimates[g] = pooled_mean_difference(per_cell)
            ratio, lo, hi = _interval(estimates[g], confidence)
            per_group.append({"group": g, "allocator": alloc, "cells": len(common),
                              "runs": int(in_group["run_id"].nunique()), "ratio": ratio, "ci_low": lo, "ci_high": hi})
        together = pool(list(estimates.values()))
        ratio, lo, hi = _interval(together, confidence)
        two = _interval(contrast(estimates[groups[0]], estimates[groups[1]]), confidence) if len(groups) == 2 else (
            math.nan, math.nan, math.nan)
        pooled.append({"allocator": alloc, "groups": len(groups), "cells": len(common), "ratio": ratio,
                       "ci_low": lo, "ci_high": hi, "tau": math.sqrt(between_variance(list(estimates.values()))),
                       "contrast_ratio": two[0], "contrast_low": two[1], "contrast_high": two[2]})
    return (pd.DataFrame(per_group, columns=GROUP_COLUMNS), pd.DataFrame(pooled, columns=POOLED_COLUMNS))
