"""Cost as the work grows: time = start-up + per-unit cost x scale, fitted from trials at two or more scales.

The debugging allocators are compared at reduced scales where a run lasts a few milliseconds, mostly process
start-up, so their plain time ratios are pulled toward 1. Fitting each (allocator, workload) at several
scales separates the two: the per-unit cost (seconds per unit of scale) is compared with the baseline's on
the same workload, and the start-up cost (the intercept) is reported on its own.

Per scale, the trimmed mean of the raw times and Yuen's standard error; a weighted least-squares line through
those means (weights: 1 / squared standard error); t intervals with the smallest trimmed sample's degrees of
freedom. The per-unit ratio to the baseline takes the delta method on the log scale.
"""
import math

import numpy as np
import pandas as pd

from analysis.contract.schema import usable_trials
from analysis.stats import estimators as stats

COLUMNS = ["workload", "allocator", "scales", "n", "startup_s", "startup_low", "startup_high", "per_unit_s",
           "per_unit_low", "per_unit_high", "df"]
RATIO_COLUMNS = ["workload", "allocator", "baseline", "per_unit_ratio", "ci_low", "ci_high", "startup_ms",
                 "startup_low_ms", "startup_high_ms", "baseline_startup_ms"]


def fit_line(scales, means, variances) -> tuple[np.ndarray, np.ndarray]:
    """(intercept, slope) of the weighted least-squares line and their covariance matrix."""
    x = np.column_stack([np.ones(len(scales)), np.asarray(scales, dtype=float)])
    w = 1.0 / np.maximum(np.asarray(variances, dtype=float), 1e-30)
    cov = np.linalg.inv(x.T @ (x * w[:, None]))
    beta = cov @ (x.T @ (w * np.asarray(means, dtype=float)))
    return beta, cov


def cost_model(trials: pd.DataFrame, metric: str = "wall_s") -> pd.DataFrame:
    """One row per (workload, allocator) measured at two or more scales: start-up and per-unit cost with
    their 95% confidence intervals."""
    if trials.empty or metric not in trials or "scale" not in trials:
        return pd.DataFrame(columns=COLUMNS)
    df = usable_trials(trials).copy()
    df[metric] = pd.to_numeric(df[metric], errors="coerce")
    df["scale"] = pd.to_numeric(df["scale"], errors="coerce").round(10)
    rows = []
    for (w, a), sub in df.groupby(["workload", "allocator"], sort=True):
        per_scale = [(s, stats.trimmed_location(g[metric].dropna().to_numpy())) for s, g in sub.groupby("scale")
                     if g[metric].notna().sum() >= 3]
        if len(per_scale) < 2:
            continue
        beta, cov = fit_line([s for s, _ in per_scale], [loc.estimate for _, loc in per_scale],
                             [loc.var for _, loc in per_scale])
        df_t = max(1, min(loc.h for _, loc in per_scale) - 1)
        (start_lo, start_hi), (unit_lo, unit_hi) = (
            stats.Difference(float(beta[i]), math.sqrt(cov[i, i]), df_t).interval() for i in (0, 1))
        rows.append({"workload": w, "allocator": a, "scales": len(per_scale), "n": int(len(sub)),
                     "startup_s": float(beta[0]), "startup_low": start_lo, "startup_high": start_hi,
                     "per_unit_s": float(beta[1]), "per_unit_low": unit_lo, "per_unit_high": unit_hi, "df": df_t})
    return pd.DataFrame(rows, columns=COLUMNS)


def per_unit_difference(row, base) -> stats.Difference | None:
    """The log of one fitted row's per-unit cost over the baseline's fitted row on the same workload (delta
    method), or None where either slope is not positive."""
    if row["per_unit_s"] <= 0 or base["per_unit_s"] <= 0:
        return None
    se_r = _se(row, "per_unit") / row["per_unit_s"]
    se_b = _se(base, "per_unit") / base["per_unit_s"]
    return stats.Difference(math.log(row["per_unit_s"] / base["per_unit_s"]), math.hypot(se_r, se_b),
                            float(min(row["df"], base["df"])))


def per_unit_ratios(model: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Each allocator's per-unit cost over the baseline's on the same workload (delta method on logs), and
    its start-up cost in milliseconds beside the baseline's."""
    rows = []
    base = model[model["allocator"] == baseline].set_index("workload")
    for _, r in model[model["allocator"] != baseline].iterrows():
        if r["workload"] not in base.index:
            continue
        b = base.loc[r["workload"]]
        d = per_unit_difference(r, b)
        if d is None:
            continue
        lo, hi = d.interval()
        rows.append({"workload": r["workload"], "allocator": r["allocator"], "baseline": baseline,
                     "per_unit_ratio": math.exp(d.estimate), "ci_low": math.exp(lo), "ci_high": math.exp(hi),
                     "startup_ms": 1e3 * r["startup_s"], "startup_low_ms": 1e3 * r["startup_low"],
                     "startup_high_ms": 1e3 * r["startup_high"], "baseline_startup_ms": 1e3 * b["startup_s"]})
    return pd.DataFrame(rows, columns=RATIO_COLUMNS)


def _se(row, name: str) -> float:
    """The standard error behind a fitted row's interval (its half-width over the t quantile)."""
    q = stats.Difference(0.0, 1.0, float(row["df"])).interval()[1]
    return (row[f"{name}_high"] - row[f"{name}_low"]) / (2 * q)
