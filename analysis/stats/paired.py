"""python -m analysis compare-pairs PAIRS.csv: ratios from process pairs (the lockstep protocol).

The unit is the process pair (docs/design.md, "The timing protocol"): A (the baseline) and B ran at
once on one CPU, taking turns, so the ratio active_b / active_a of one pair is free of the CPU's speed
regime (campaigns alternate which allocator runs as a and which as b; rows are turned so that a is the
baseline, contract.schema.oriented_pairs); what is left varies from pair to pair (each pair of processes has its own memory layout). Per
(workload, scale, allocator pair): the log ratio of every pair, then Yuen's 20% trimmed mean of those log
ratios across pairs with its t interval (h - 1 degrees of freedom), reported like compare's rows. An
optional covariate column (e.g. a reference probe's log ratio) is regressed out first by a Huber fit.
"""
import math

import numpy as np
import pandas as pd

from analysis.contract.schema import oriented_pairs, read_table, usable_trials
from analysis.errors import HeapcostError
from analysis.stats import estimators as stats

MIN_PAIRS = 5
METHOD = "yuen-trim20-paired-log"
HUBER_FIT_SHRINK = 1.4  # as in compare: a Huber fit's residuals understate the noise by about this x q/n
RESULT_COLUMNS = ["workload", "scale", "allocator", "baseline", "metric", "ratio", "ci_low", "ci_high",
                  "n_pairs", "halfwidth", "df", "method", "adjusted", "covariate_slope", "n_interfered",
                  "margin", "p_noninferior", "noninferior", "runs_needed"]


def log_ratios(pairs: pd.DataFrame, a: str = "active_a_s", b: str = "active_b_s") -> pd.Series:
    """log(b / a) of every pair; both times must be positive numbers."""
    out = []
    for col in (a, b):
        values = pairs[col].to_numpy()
        if values.dtype.kind != "f":
            values = pd.to_numeric(pairs[col], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        bad = np.isnan(values) | (values <= 0)
        if bad.any():
            row = pairs.index[bad][0]
            raise HeapcostError(f"column {col!r} has a missing or non-positive value {pairs.loc[row, col]!r} "
                                f"(data row {row + 1}); it must be a positive time")
        out.append(values.astype(float))
    return pd.Series(np.log(out[1]) - np.log(out[0]), index=pairs.index)


def paired_difference(y, covariate=None, trim: float = stats.TRIM, *,
                      at_zero: bool = False) -> tuple[stats.Difference, float]:
    """The trimmed mean of per-pair log ratios with Yuen's standard error (one sample: df = h - 1);
    with a covariate, its Huber slope is removed first. Returns (difference, slope or nan).

    The adjusted difference is read at the covariate's mean, unless `at_zero`: for a covariate that is
    itself a difference between the two sides (a reference probe's log ratio, the share of B's runs in the
    fast regime minus A's), zero means both ran in equal conditions, and the difference is read there. The
    sample's mean covariate is random, so reading at zero adds the slope's variance times its square."""
    y = np.asarray(y, dtype=float)
    slope = float("nan")
    inflate, df_share, shift, extra_var = 1.0, 0.0, 0.0, 0.0
    if covariate is not None:
        x = np.asarray(covariate, dtype=float)
        if np.all(np.isfinite(x)) and np.ptp(x) > 0 and y.size >= MIN_PAIRS + 2:
            fit = stats.robust_fit(y, x - x.mean(), np.zeros(y.size))
            slope = float(fit.coef[0])
            y = y - slope * (x - x.mean())
            df_share = min(0.5, HUBER_FIT_SHRINK / (y.size - 1))
            inflate = 1.0 / (1.0 - df_share)
            if at_zero:
                shift = -slope * float(x.mean())
                extra_var = float(x.mean()) ** 2 * float(fit.cov[0, 0])
    loc = stats.trimmed_location(y, trim)
    df = max(1.0, (loc.h - 1) * (1.0 - df_share))
    return stats.Difference(loc.estimate + shift, float(math.sqrt(loc.var * inflate + extra_var)), df), slope


def _keys(df: pd.DataFrame) -> list[str]:
    return ["workload", *(["scale"] if "scale" in df.columns else []), "allocator_a", "allocator_b"]


def _cells(df: pd.DataFrame, keys: list[str]):
    """(key tuple, row positions) of each group of df.groupby(keys, sort=True), in its order, without
    building the groups: rows missing a key are in none, positions ascend within a group."""
    codes, values = [], []
    for k in keys:
        c, u = pd.factorize(df[k], sort=True)
        codes.append(c)
        values.append(u.tolist())
    codes = np.array(codes).reshape(len(keys), len(df))
    rows = np.flatnonzero((codes >= 0).all(axis=0))
    rows = rows[np.lexsort(codes[::-1, rows])]
    if not rows.size:
        return
    starts = np.flatnonzero(np.r_[True, (np.diff(codes[:, rows], axis=1) != 0).any(axis=0)])
    for pos in np.split(rows, starts[1:]):
        yield tuple(v[c] for v, c in zip(values, codes[:, pos[0]])), pos


def compare_pairs(pairs: pd.DataFrame, *, a: str = "active_a_s", b: str = "active_b_s", covariate: str | None = None,
                  margin: float = 0.05, target: float | None = None, at_zero: bool = False) -> pd.DataFrame:
    """One row per (workload[, scale], allocator_a, allocator_b): the ratio B/A with its 95% interval."""
    needed = ["workload", "allocator_a", "allocator_b", a, b] + ([covariate] if covariate else [])
    missing = [c for c in needed if c not in pairs.columns]
    if missing:
        raise HeapcostError(f"input lacks column(s) {', '.join(missing)}; a pairs table needs workload, "
                            f"allocator_a, allocator_b, {a} and {b}; columns present: "
                            f"{', '.join(map(str, pairs.columns))}")
    oriented = oriented_pairs(pairs.reset_index(drop=True))
    if covariate and not oriented[["allocator_a", "allocator_b"]].equals(
            pairs.reset_index(drop=True)[["allocator_a", "allocator_b"]]):
        raise HeapcostError(f"the pairs take both roles (a and b) for one allocator pair; a covariate "
                            f"({covariate}) cannot be turned with them: give pairs of one orientation")
    df = usable_trials(oriented).reset_index(drop=True)
    if df.empty:
        raise HeapcostError("no usable pairs (rows with status 'ok' and not warm-up) in the input")
    log_ratio = log_ratios(df, a, b).to_numpy()
    # whole columns read once; each cell takes its rows by position
    interfered = (pd.to_numeric(df["interfered"], errors="coerce").to_numpy() == 1
                  if "interfered" in df.columns else None)
    rows = []
    for key, pos in _cells(df, _keys(df)):
        key = dict(zip(_keys(df), key))
        n = len(pos)
        if n < MIN_PAIRS:
            raise HeapcostError(f"{key['workload']}: {key['allocator_b']}/{key['allocator_a']} has {n} "
                                f"usable pair(s); at least {MIN_PAIRS} are needed")
        x = pd.to_numeric(df[covariate].iloc[pos], errors="coerce").to_numpy() if covariate else None
        diff, slope = paired_difference(log_ratio[pos], x, at_zero=at_zero)
        lo, hi = diff.interval()
        p_ni = stats.noninferiority_p(diff, margin)
        halfwidth = (hi - lo) / 2
        needed_n = (math.ceil(n * (halfwidth / math.log1p(target)) ** 2)
                    if target and halfwidth > 0 else None)
        rows.append({"workload": key["workload"], "scale": key.get("scale", np.nan),
                     "allocator": key["allocator_b"], "baseline": key["allocator_a"], "metric": b,
                     "ratio": math.exp(diff.estimate), "ci_low": math.exp(lo), "ci_high": math.exp(hi),
                     "n_pairs": n, "halfwidth": halfwidth, "df": diff.df, "method": METHOD,
                     "adjusted": bool(covariate and not math.isnan(slope)), "covariate_slope": slope,
                     "n_interfered": int(interfered[pos].sum()) if interfered is not None else 0,
                     "margin": margin, "p_noninferior": p_ni, "noninferior": bool(p_ni < 0.05),
                     "runs_needed": needed_n})
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def wider_than(results: pd.DataFrame, target: float) -> pd.DataFrame:
    """The rows whose interval is still wider than +-target (relative), as the adaptive mode asks."""
    return results[results["halfwidth"] > math.log1p(target)]


def format_table(res: pd.DataFrame) -> str:
    head = f"paired ratios B/A (method {METHOD}: Yuen's 20% trimmed mean of per-pair log ratios)"
    lines = [head, f"{'workload':<14} {'scale':>7} {'B / A':<34} {'ratio':>7}  {'95% CI':<18} pairs"]
    for _, r in res.iterrows():
        lines.append(f"{r['workload']:<14} {r['scale']:>7.4g} {r['allocator'] + ' / ' + r['baseline']:<34} "
                     f"{r['ratio']:>7.4f}  [{r['ci_low']:.4f}, {r['ci_high']:.4f}] {r['n_pairs']}"
                     + (f" ({r['n_interfered']} interfered)" if r["n_interfered"] else ""))
    return "\n".join(lines)


def add_arguments(parser) -> None:
    parser.add_argument("pairs", help="CSV with one row per process pair: workload, allocator_a, allocator_b, "
                                      "active_a_s, active_b_s (pairs.csv of a lockstep run)")
    parser.add_argument("--a", default="active_a_s", help="column of process A's time (default active_a_s)")
    parser.add_argument("--b", default="active_b_s", help="column of process B's time (default active_b_s)")
    parser.add_argument("--covariate", default=None, help="column regressed out of the log ratios first")
    parser.add_argument("--at-zero", action="store_true", help="read the adjusted ratio where the covariate is 0 "
                        "(a covariate that is a B-minus-A difference), not at its mean")
    parser.add_argument("--margin", type=float, default=0.05, help="non-inferiority margin (default 0.05)")
    parser.add_argument("--target", type=float, default=None, help="half-width goal for runs_needed")
    parser.add_argument("--out", help="write the result table to this CSV")


def run(args) -> int:
    path = args.pairs
    try:
        table = read_table(path)
    except FileNotFoundError:
        raise HeapcostError(f"pairs file {path!r} does not exist") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise HeapcostError(f"cannot read {path!r} as CSV: {str(exc).strip()[:200]}") from None
    res = compare_pairs(table, a=args.a, b=args.b, covariate=args.covariate, margin=args.margin,
                        target=args.target, at_zero=args.at_zero)
    print(format_table(res))
    if args.out:
        res.to_csv(args.out, index=False)
    return 0


def as_comparison(pairs: pd.DataFrame, baseline: str, metric: str = "wall_s"):
    """A lockstep run's pairs against `baseline` as a compare.Comparison (results per workload with the
    paired interval, their geometric means), so the paper treats them like any run's comparisons.
    metric wall_s takes the processes' active time; maxrss_kb their peak RSS."""
    from analysis.stats import compare

    a, b = ("active_a_s", "active_b_s") if metric == "wall_s" else ("maxrss_a_kb", "maxrss_b_kb")
    df = usable_trials(oriented_pairs(pairs.reset_index(drop=True), baseline))
    df = df[df["allocator_a"].astype(str) == baseline].reset_index(drop=True)
    if df.empty:
        raise HeapcostError(f"no usable pairs against the baseline {baseline!r}")
    df["log_ratio"] = log_ratios(df, a, b)
    rows = []
    for key, sub in df.groupby(_keys(df), sort=True):
        key = dict(zip(_keys(df), key))
        if len(sub) < MIN_PAIRS:
            continue
        diff, _ = paired_difference(sub["log_ratio"].to_numpy())
        lo, hi = diff.interval()
        rows.append({"workload": key["workload"], "allocator": key["allocator_b"], "baseline": baseline,
                     "metric": metric, "ratio": math.exp(diff.estimate), "ci_low": math.exp(lo),
                     "ci_high": math.exp(hi), "n": len(sub), "n_baseline": len(sub),
                     "scale": key.get("scale", np.nan), "method": METHOD, "adjusted": False,
                     "halfwidth": (hi - lo) / 2, "df": diff.df, "n_outliers": 0, "change_points": 0,
                     "noninferior": bool(stats.noninferiority_p(diff, 0.05) < 0.05), "_diff": diff})
    results = pd.DataFrame(rows)
    if results.empty:
        raise HeapcostError(f"no cell has {MIN_PAIRS} usable pairs against {baseline!r}")
    trials = df.rename(columns={"allocator_b": "allocator"}).assign(outlier="none", clock_regime=0)
    return compare.Comparison(results=results, trials=trials, geomean=compare.geometric_means(results))


ROLE_COLUMNS = ["workload", "scale", "cells", "pairs", "ratio", "ci_low", "ci_high"]


def role_effects(pairs: pd.DataFrame, baseline: str, a: str = "active_a_s", b: str = "active_b_s") -> pd.DataFrame:
    """How much longer the process in role b took than the one in role a, per workload, from raw (not
    turned) pairs of a run whose roles alternate. In a cell, log(b/a) is role + d where the baseline was a
    and role - d where it was b (d the allocators' difference), so the mean of the two orientations'
    trimmed means is the role effect; cells with at least MIN_PAIRS pairs of each orientation are pooled
    per workload as a mean of independent estimates."""
    df = usable_trials(pairs.reset_index(drop=True)).reset_index(drop=True)
    if df.empty:
        return pd.DataFrame(columns=ROLE_COLUMNS)
    df = df.assign(log_ratio=log_ratios(df, a, b).to_numpy(),
                   baseline_a=df["allocator_a"].astype(str) == baseline,
                   other=np.where(df["allocator_a"].astype(str) == baseline, df["allocator_b"], df["allocator_a"]))
    df = df[(df["allocator_a"].astype(str) == baseline) != (df["allocator_b"].astype(str) == baseline)]
    keys = ["workload", *(["scale"] if "scale" in df.columns else [])]
    rows = []
    for key, sub in df.groupby(keys, sort=True):
        key = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        cells = []
        for _, cell in sub.groupby("other", sort=True):
            sides = [cell.loc[cell["baseline_a"] == s, "log_ratio"].to_numpy() for s in (True, False)]
            if min(len(s) for s in sides) < MIN_PAIRS:
                continue
            la, lb = (stats.trimmed_location(s) for s in sides)
            both = stats.combine_difference(la, stats.Location(-lb.estimate, lb.var, lb.h))  # la + lb
            cells.append((stats.Difference(both.estimate / 2, both.se / 2, both.df), len(cell)))
        if not cells:
            continue
        pooled = stats.pooled_mean_difference([d for d, _ in cells])
        lo, hi = pooled.interval()
        rows.append({"workload": key["workload"], "scale": key.get("scale", np.nan), "cells": len(cells),
                     "pairs": sum(n for _, n in cells), "ratio": math.exp(pooled.estimate),
                     "ci_low": math.exp(lo), "ci_high": math.exp(hi)})
    return pd.DataFrame(rows, columns=ROLE_COLUMNS)
