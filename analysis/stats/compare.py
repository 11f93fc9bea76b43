"""python -m analysis compare TRIALS.csv --baseline NAME: ratios of typical values against a baseline.

Per workload, each allocator's 20% trimmed mean of log(metric) against the baseline's (Yuen's
interval), with and without the clock-probe adjustment, outliers classified and counted (never
dropped), non-inferiority at a margin with Holm's correction over the whole table, and a
geometric mean over workloads per allocator.
"""
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.contract.schema import read_table, usable_trials
from analysis.stats import noise
from analysis.stats import estimators as stats
from analysis.errors import HeapcostError

MIN_RUNS = 5
TIME_METRICS = {"wall_s", "user_s", "sys_s", "cpu_s"}
# callgrind counts (counts.csv) are deterministic: one run per pair, reported as exact ratios
EXACT_METRICS = {"instructions", "data_reads", "data_writes", "d1_read_misses", "d1_write_misses",
                 "malloc_calls", "free_calls", "realloc_calls", "calloc_calls"}
DERIVED = {"cpu_s": ("user_s", "sys_s")}
METHOD = "yuen-trim20-log"
# Residuals of a Huber fit shrink more than least squares' q / (n - groups): by about 1.3-1.4 times
# that for normal errors (measured by simulation, tests/stats/test_simulate.py checks the coverage)
HUBER_FIT_SHRINK = 1.4

RESULT_COLUMNS = [
    "workload", "allocator", "baseline", "metric", "ratio", "ci_low", "ci_high", "n", "n_baseline",
    "scale", "method", "adjusted", "adjustment_supported", "ratio_unadjusted", "ci_low_unadjusted",
    "ci_high_unadjusted", "ratio_adjusted", "ci_low_adjusted", "ci_high_adjusted", "probe_slope",
    "probe_slope_ci_low", "probe_slope_ci_high", "halfwidth", "df", "n_outliers",
    "n_outliers_baseline", "clock_regimes", "change_points", "drift_rho", "drift_p", "margin",
    "p_noninferior", "p_noninferior_holm", "noninferior", "p_equivalent", "p_equivalent_holm",
    "equivalent", "runs_needed",
]


@dataclass
class Comparison:
    results: pd.DataFrame  # one row per (workload, allocator != baseline), RESULT_COLUMNS
    trials: pd.DataFrame  # the runs used, with log value, adjusted value, outlier class, regime
    geomean: pd.DataFrame  # per allocator over workloads


def _numeric(df: pd.DataFrame, column: str) -> pd.Series:
    values = pd.to_numeric(df[column], errors="coerce")
    bad = values.isna()
    if bad.any():
        row = df.index[bad][0]
        raise HeapcostError(f"column {column!r} has a missing or non-numeric value "
                            f"{df.loc[row, column]!r} (data row {row + 1}); it must be a positive number")
    return values.astype(float)


def prepare(trials: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The analysable runs: ok and not warm-up rows, metric validated, iterations averaged per process."""
    needed = ["workload", "allocator"] + list(DERIVED.get(metric, (metric,)))
    missing = [c for c in needed if c not in trials.columns]
    if missing:
        raise HeapcostError(f"input lacks column(s) {', '.join(missing)}; required: workload, "
                            f"allocator and the metric ({metric}); columns present: "
                            f"{', '.join(map(str, trials.columns))}")
    df = trials.reset_index(drop=True)
    df = usable_trials(df).reset_index(drop=True)
    if df.empty:
        raise HeapcostError("no usable runs (rows with status 'ok' and not warm-up) in the input")
    df["workload"] = df["workload"].astype(str)
    df["allocator"] = df["allocator"].astype(str)
    if metric in DERIVED:
        a, b = DERIVED[metric]
        df[metric] = _numeric(df, a) + _numeric(df, b)
    df[metric] = _numeric(df, metric)
    if (df[metric] <= 0).any():
        row = df.index[df[metric] <= 0][0]
        raise HeapcostError(f"column {metric!r} has a non-positive value {df.loc[row, metric]!r}; "
                            "ratios need positive values")
    if "clock_probe_s" in df.columns:
        df["clock_probe_s"] = pd.to_numeric(df["clock_probe_s"], errors="coerce")
    if "seq" in df.columns:
        df["seq"] = pd.to_numeric(df["seq"], errors="coerce")
    if "scale" in df.columns:
        df["scale"] = _numeric(df, "scale")
    if "invocation" in df.columns:
        keys = [k for k in ("run_id", "workload", "scale", "allocator", "invocation") if k in df.columns]
        agg = {metric: "mean"}
        for extra in ("clock_probe_s", "seq"):
            if extra in df.columns:
                agg[extra] = "mean" if extra == "clock_probe_s" else "min"
        df = df.groupby(keys, sort=False, as_index=False).agg(agg)
    return df


def cell_keys(df: pd.DataFrame) -> list[str]:
    """Runs are compared within a workload, and within a scale when the table has several."""
    return ["workload", "scale"] if "scale" in df.columns else ["workload"]


def _check_groups(df: pd.DataFrame, baseline: str, metric: str) -> None:
    allocators = sorted(df["allocator"].unique())
    if baseline not in allocators:
        raise HeapcostError(f"unknown baseline {baseline!r}; allocators in the data: "
                            f"{', '.join(allocators)}")
    keys = cell_keys(df)
    counts = df.groupby([*keys, "allocator"]).size()
    cells = counts.index.droplevel(-1)  # the cell of each (cell, allocator) group
    if not cells.isin(cells[counts.index.get_level_values(-1) == baseline]).all():
        for key, sub in df.groupby(keys, sort=True):  # the first cell without the baseline, named
            present = set(sub["allocator"])
            if baseline not in present:
                where = " at scale ".join(str(k) for k in (key if isinstance(key, tuple) else (key,)))
                raise HeapcostError(f"workload {where} has runs of {', '.join(sorted(present))} but none "
                                    f"of the baseline {baseline!r}")
    few = counts[counts < MIN_RUNS]
    if len(few):
        key, n = few.index[0], int(few.iloc[0])
        w, a = key[0], key[-1]
        raise HeapcostError(f"group workload={w!r} allocator={a!r} has {n} usable run(s) of "
                            f"{metric}; at least {MIN_RUNS} are needed")


def _workload_probe(sub: pd.DataFrame, metric: str, use_probe: bool):
    if not use_probe or metric not in TIME_METRICS or "clock_probe_s" not in sub.columns:
        return None
    x = sub["clock_probe_s"].to_numpy(dtype=float)
    if np.any(~np.isfinite(x)) or np.any(x <= 0) or np.ptp(x) == 0:
        return None
    return np.log(x)


def _interval_fields(diff: stats.Difference, prefix_suffix: str = "") -> dict:
    lo, hi = diff.interval()
    s = prefix_suffix
    return {f"ratio{s}": float(np.exp(diff.estimate)), f"ci_low{s}": float(np.exp(lo)),
            f"ci_high{s}": float(np.exp(hi))}


def exact_ratios(counts: pd.DataFrame, baseline: str, metric: str = "instructions") -> pd.DataFrame:
    """Ratios of deterministic callgrind counts, total and per free, with no interval to compute.

    Runs of one pair that disagree are reported (a count that varies is not deterministic)."""
    df = prepare(counts, metric)
    allocators = sorted(df["allocator"].unique())
    if baseline not in allocators:
        raise HeapcostError(f"unknown baseline {baseline!r}; allocators in the data: "
                            f"{', '.join(allocators)}")
    per_free = "free_calls" in df.columns
    if per_free:
        df["free_calls"] = _numeric(df, "free_calls")
    keys = cell_keys(df)
    grouped = df.groupby([*keys, "allocator"])
    value = grouped[metric].median()
    spread = (grouped[metric].max() - grouped[metric].min()) / value
    frees = grouped["free_calls"].median() if per_free else None
    sizes = grouped.size()
    rows = []
    for key, v in value.items():
        *cell, a = key
        if a == baseline:
            continue
        base_key = (*cell, baseline)
        if base_key not in value.index:
            raise HeapcostError(f"workload {cell[0]!r} has no count for the baseline {baseline!r}")
        b = value[base_key]
        row = {"workload": cell[0], "allocator": a, "baseline": baseline, "metric": metric,
               "ratio": v / b, "ci_low": v / b, "ci_high": v / b,
               "n": int(sizes[key]), "n_baseline": int(sizes[base_key]),
               "scale": cell[1] if len(cell) > 1 else np.nan, "method": "exact", "value": v,
               "value_baseline": b, "max_relative_spread": float(max(spread[key], spread[base_key]))}
        if per_free and frees[key] > 0 and frees[base_key] > 0:
            row.update(per_free=v / frees[key], per_free_baseline=b / frees[base_key])
            row["ratio_per_free"] = row["per_free"] / row["per_free_baseline"]
        rows.append(row)
    return pd.DataFrame(rows)


def process_variance(trials: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Variance components of log(metric) between and within processes, per (workload, allocator),
    when the input has several rows (iterations) per `invocation`."""
    cols = ["workload", "allocator", "var_between_process", "var_within_process",
            "iterations_per_process"]
    if "invocation" not in trials.columns:
        return pd.DataFrame(columns=cols)
    df = usable_trials(trials).copy()
    keys = [k for k in ("run_id", "invocation") if k in df.columns]
    rows = []
    for (w, a), sub in df.groupby(["workload", "allocator"]):
        if "scale" in sub.columns and sub["scale"].nunique() > 1:
            continue  # one allocator at several scales: components per scale are not worth a table
        units = sub[keys].astype(str).agg("|".join, axis=1)
        try:
            vc = noise.variance_components(np.log(pd.to_numeric(sub[metric]).to_numpy()), units)
        except ValueError:
            continue
        rows.append({"workload": str(w), "allocator": str(a), "var_between_process": vc.between,
                     "var_within_process": vc.within, "iterations_per_process": vc.per_group})
    return pd.DataFrame(rows, columns=cols)


def compare(trials: pd.DataFrame, baseline: str, metric: str = "wall_s", *, margin: float = 0.05,
            target: float | None = None, use_probe: bool = True) -> Comparison:
    """Pure function: the comparison table of every allocator against `baseline`, per workload."""
    df = prepare(trials, metric)
    _check_groups(df, baseline, metric)
    df["log_value"] = np.log(df[metric].to_numpy())
    df["adjusted_value"] = df["log_value"]
    df["outlier"] = "none"
    df["clock_regime"] = 0
    df["segment"] = 0

    probe_all = _workload_probe(df, metric, use_probe)
    if probe_all is not None:
        regimes = noise.clock_regimes(probe_all)
        df["clock_regime"] = regimes.labels

    rows = []
    keys = cell_keys(df)
    # each cell's annotations of its runs, by position, written into df once after the loop
    notes = {"adjusted_value": df["log_value"].to_numpy(copy=True),
             "outlier": np.full(len(df), "none", dtype=object), "segment": np.zeros(len(df), dtype=np.int64)}
    for key, sub in df.groupby(keys, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        if set(sub["allocator"]) == {baseline}:
            continue
        cell_rows = _workload_rows(notes, df.index.get_indexer(sub.index), sub, key[0], baseline, metric, margin,
                                   target, use_probe)
        for row in cell_rows:
            row["scale"] = key[1] if len(key) > 1 else np.nan
        rows += cell_rows
    for column, values in notes.items():
        df[column] = pd.Series(values, index=df.index, dtype=df[column].dtype)
    if not rows:
        raise HeapcostError(f"no allocator but the baseline {baseline!r} has usable runs of {metric}")
    results = pd.DataFrame(rows)
    results["p_noninferior_holm"] = stats.holm(results["p_noninferior"])
    results["noninferior"] = results["p_noninferior_holm"] < 1 - stats.CONFIDENCE
    results["p_equivalent_holm"] = stats.holm(results["p_equivalent"])
    results["equivalent"] = results["p_equivalent_holm"] < 1 - stats.CONFIDENCE
    geomean = geometric_means(results)
    results = results.drop(columns="_diff")[RESULT_COLUMNS]
    variance = process_variance(trials, metric)
    if len(variance):
        results = results.merge(variance, on=["workload", "allocator"], how="left")
    return Comparison(results, df, geomean)


def _workload_rows(notes, pos, sub, workload, baseline, metric, margin, target, use_probe) -> list[dict]:
    """Fit one workload's covariates, annotate its runs (at positions `pos` of the arrays in notes), and
    return its result rows."""
    y = sub["log_value"].to_numpy()
    alloc = sub["allocator"].to_numpy()
    x = _workload_probe(sub, metric, use_probe)
    has_seq = "seq" in sub.columns and sub["seq"].notna().all()
    basis = noise.drift_basis(sub["seq"].to_numpy()) if has_seq else None
    model = _fit_workload(y, alloc, x, basis)
    y_unadj, y_adj = model.unadjusted_values, model.adjusted_values
    notes["adjusted_value"][pos] = y_adj

    classes = _outlier_classes(y_unadj, y_adj if model.probe is not None else None, alloc)
    notes["outlier"][pos] = classes

    # change points and drift are looked for before the drift term takes drift out
    y_nodrift = y if model.probe is None else y - model.probe_coef * (x - x.mean())
    residual = y_nodrift.copy()
    for a in np.unique(alloc):
        residual[alloc == a] -= stats.trimmed_location(y_nodrift[alloc == a]).estimate
    cps, dr = [], noise.Drift(float("nan"), float("nan"))
    if has_seq:
        order = np.argsort(sub["seq"].to_numpy(), kind="stable")
        cps = noise.change_points(residual[order])
        seg = np.zeros(y.size, dtype=int)
        for c in cps:
            seg[order[c:]] += 1
        notes["segment"][pos] = seg
        dr = noise.drift(sub["seq"].to_numpy(), residual)
    n_regimes = int(sub["clock_regime"].nunique())

    rows = []
    base_mask = alloc == baseline
    for a in sorted(set(alloc) - {baseline}):
        a_mask = alloc == a
        unadj = model.difference(a, baseline, adjusted=False)
        row = {"workload": workload, "allocator": a, "baseline": baseline, "metric": metric,
               "n": int(a_mask.sum()), "n_baseline": int(base_mask.sum())}
        row.update(_interval_fields(unadj, "_unadjusted"))
        primary = unadj
        if model.probe is not None:
            adj = model.difference(a, baseline, adjusted=True)
            row.update(_interval_fields(adj, "_adjusted"))
            lo, hi = model.probe.interval(0)
            row.update(probe_slope=model.probe_coef, probe_slope_ci_low=lo,
                       probe_slope_ci_high=hi, adjustment_supported=model.supported)
            if model.supported:
                primary = adj
        else:
            row.update(ratio_adjusted=np.nan, ci_low_adjusted=np.nan, ci_high_adjusted=np.nan,
                       probe_slope=np.nan, probe_slope_ci_low=np.nan, probe_slope_ci_high=np.nan,
                       adjustment_supported=False)
        adjusted = primary is not unadj
        row.update(_interval_fields(primary))
        lo, hi = primary.interval()
        method = METHOD + ("+drift" if model.fit_unadjusted is not None else "")
        row.update(
            method=method + ("+probe" if adjusted else ""), adjusted=adjusted,
            halfwidth=(hi - lo) / 2, df=primary.df,
            n_outliers=int(np.sum(classes[a_mask] != "none")),
            n_outliers_baseline=int(np.sum(classes[base_mask] != "none")),
            clock_regimes=n_regimes, change_points=len(cps), drift_rho=dr.rho, drift_p=dr.p,
            margin=margin, p_noninferior=stats.noninferiority_p(primary, margin),
            p_equivalent=stats.equivalence_p(primary, margin), _diff=primary,
            runs_needed=np.nan,
        )
        if target is not None:
            # runs per arm at which the current per-run spread gives the target half-width
            per_run = primary.se ** 2 / (1 / row["n"] + 1 / row["n_baseline"]) * 2
            row["runs_needed"] = noise.runs_needed(per_run, float(np.log1p(target)))
        rows.append(row)
    return rows


def _outlier_classes(y_unadj, y_adj, alloc) -> np.ndarray:
    """Outlier class of each run from robust z within its allocator (scale floored by the pooled one)."""
    z_raw = np.zeros(y_unadj.size)
    z_adj = np.zeros(y_unadj.size)
    floor_raw = stats.group_scale(y_unadj, alloc)
    floor_adj = floor_raw if y_adj is None else stats.group_scale(y_adj, alloc)
    for a in np.unique(alloc):
        m = alloc == a
        z_raw[m] = noise.robust_z(y_unadj[m], floor_raw)
        if y_adj is not None:
            z_adj[m] = noise.robust_z(y_adj[m], floor_adj)
    return noise.classify_outliers(z_raw, z_adj if y_adj is not None else None)


@dataclass
class WorkloadModel:
    """Drift (seq spline) and clock-probe covariates of one workload, and the values they adjust."""
    alloc: np.ndarray
    covariates_unadjusted: np.ndarray | None
    covariates_adjusted: np.ndarray | None
    fit_unadjusted: stats.Fit | None
    probe: stats.Fit | None  # the fit with the probe (its column 0) and the drift columns
    unadjusted_values: np.ndarray
    adjusted_values: np.ndarray
    supported: bool

    @property
    def probe_coef(self) -> float:
        return float(self.probe.coef[0])

    def difference(self, a: str, b: str, adjusted: bool) -> stats.Difference:
        values = self.adjusted_values if adjusted else self.unadjusted_values
        fit = self.probe if adjusted else self.fit_unadjusted
        cov_x = self.covariates_adjusted if adjusted else self.covariates_unadjusted
        ma, mb = self.alloc == a, self.alloc == b
        extra, fitted = 0.0, 0.0
        if fit is not None:
            n, q = cov_x.shape
            groups = np.unique(self.alloc).size
            fitted = min(0.5, HUBER_FIT_SHRINK * q / (n - groups))
            # the covariates' own estimation error enters when the groups' covariates differ
            dx = np.array([stats.trimmed_location(cov_x[ma, j]).estimate
                           - stats.trimmed_location(cov_x[mb, j]).estimate
                           for j in range(cov_x.shape[1])])
            extra = float(dx @ fit.cov @ dx)
        return stats.combine_difference(stats.trimmed_location(values[ma]),
                                        stats.trimmed_location(values[mb]), extra, fitted)


def _fit_workload(y, alloc, x, basis) -> WorkloadModel:
    fit_u = None
    y_u = y
    if basis is not None:
        # the drift term is always fitted where the trials have an order (seq); the simulation study
        # calibrates the residual shrinkage it causes (HUBER_FIT_SHRINK)
        try:
            fit_u = stats.robust_fit(y, basis, alloc)
            y_u = y - basis @ fit_u.coef
        except (ValueError, np.linalg.LinAlgError):
            basis, fit_u = None, None
    probe_fit, y_a, supported, cov_a = None, y_u, False, None
    if x is not None:
        xc = (x - x.mean())[:, None]
        cov_a = xc if basis is None else np.column_stack([xc, basis])
        try:
            probe_fit = stats.robust_fit(y, cov_a, alloc)
        except (ValueError, np.linalg.LinAlgError):
            probe_fit = None
        if probe_fit is not None:
            y_a = y - cov_a @ probe_fit.coef
            lo, hi = probe_fit.interval(0)
            scale_without = fit_u.scale if fit_u is not None else stats.group_scale(y, alloc)
            supported = bool((lo > 0 or hi < 0) and probe_fit.scale < scale_without)
    return WorkloadModel(alloc, basis, cov_a, fit_u, probe_fit, y_u, y_a, supported)


def geometric_means(results: pd.DataFrame) -> pd.DataFrame:
    """Per allocator, the geometric mean ratio over its workloads with an interval (the workloads
    are the fixed set measured, so the interval is for that set, not for all possible workloads)."""
    rows = []
    for alloc, sub in results.groupby("allocator", sort=True):
        pooled = stats.pooled_mean_difference(list(sub["_diff"]))
        lo, hi = pooled.interval()
        rows.append({"allocator": alloc, "baseline": sub["baseline"].iloc[0],
                     "metric": sub["metric"].iloc[0], "workloads": len(sub),
                     "geomean_ratio": float(np.exp(pooled.estimate)), "ci_low": float(np.exp(lo)),
                     "ci_high": float(np.exp(hi))})
    return pd.DataFrame(rows, columns=["allocator", "baseline", "metric", "workloads",
                                       "geomean_ratio", "ci_low", "ci_high"])


def pairs_to_extend(results: pd.DataFrame, target: float) -> pd.DataFrame:
    """The (workload, allocator) rows whose interval is still wider than +-target (relative)."""
    return results[results["halfwidth"] > np.log1p(target)][["workload", "allocator", "halfwidth",
                                                              "runs_needed"]]


def format_table(comp: Comparison) -> str:
    r = comp.results
    head = ["workload", "allocator", "ratio", "95% CI", "n/base", "probe", "outliers",
            f"not slower +{r['margin'].iloc[0]:.0%}" if len(r) else "not slower"]
    lines = []
    scaled = "scale" in r.columns and r["scale"].nunique() > 1
    if scaled:
        head.insert(2, "scale")
    for _, x in r.iterrows():
        probe = ("adjusted" if x["adjusted"] else
                 "no-support" if not np.isnan(x["probe_slope"]) else "-")
        lines.append([x["workload"], x["allocator"], *([f"{x['scale']:g}"] if scaled else []),
                      f"{x['ratio']:.4f}",
                      f"[{x['ci_low']:.4f}, {x['ci_high']:.4f}]", f"{x['n']}/{x['n_baseline']}",
                      probe, f"{x['n_outliers']}/{x['n_outliers_baseline']}",
                      "yes" if x["noninferior"] else "no"])
    widths = [max(len(h), *(len(l[i]) for l in lines)) if lines else len(h)
              for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [f"{r['metric'].iloc[0] if len(r) else ''} against {r['baseline'].iloc[0] if len(r) else ''}"
           f" (method {METHOD}; Holm over {len(r)} rows)", fmt.format(*head),
           fmt.format(*("-" * w for w in widths))]
    out += [fmt.format(*l) for l in lines]
    if len(comp.geomean):
        out.append("")
        out.append("geometric mean over workloads:")
        for _, g in comp.geomean.iterrows():
            out.append(f"  {g['allocator']:<24} {g['geomean_ratio']:.4f} "
                       f"[{g['ci_low']:.4f}, {g['ci_high']:.4f}]  ({g['workloads']} workloads)")
    flagged = comp.trials[comp.trials["outlier"] != "none"]
    if len(flagged):
        out.append("")
        out.append(f"outliers (kept, down-weighted by trimming): {len(flagged)}")
        counts = flagged.groupby(["workload", "allocator", "outlier"]).size()
        for (w, a, c), k in counts.items():
            out.append(f"  {w} / {a}: {k} {c}")
    return "\n".join(out)


def read_trials(path: str | Path) -> pd.DataFrame:
    p = Path(path)
    if not p.is_file():
        raise HeapcostError(f"trials file {str(p)!r} does not exist; give a CSV with columns "
                            "workload, allocator and the metric")
    try:
        return read_table(p)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise HeapcostError(f"cannot read {str(p)!r} as CSV: {first}") from None


def add_arguments(parser) -> None:
    parser.add_argument("trials", help="CSV with columns workload, allocator and the metric")
    parser.add_argument("--baseline", required=True, help="allocator the others are compared to")
    parser.add_argument("--metric", default="wall_s",
                        help="column to compare (default wall_s; cpu_s = user_s + sys_s)")
    parser.add_argument("--out", help="write the result table to this CSV")
    parser.add_argument("--margin", type=float, default=0.05,
                        help="non-inferiority/equivalence margin as a fraction (default 0.05)")
    parser.add_argument("--target", type=float, default=None,
                        help="target interval half-width (fraction) for the runs-needed column")
    parser.add_argument("--no-probe", action="store_true", help="ignore clock_probe_s")
    parser.add_argument("--trials-out", help="write the runs used, with outlier classes, to this CSV")
    parser.add_argument("--geomean-out", help="write the geometric means per allocator to this CSV")


def run(args) -> int:
    if args.metric in EXACT_METRICS:
        table = exact_ratios(read_trials(args.trials), args.baseline, args.metric)
        print(table.to_string(index=False, float_format=lambda v: f"{v:.6g}"))
        if args.out:
            table.to_csv(args.out, index=False)
        return 0
    if not 0 < args.margin < 1:
        raise HeapcostError(f"--margin {args.margin} is out of range; give a fraction in (0, 1)")
    if args.target is not None and not 0 < args.target < 1:
        raise HeapcostError(f"--target {args.target} is out of range; give a fraction in (0, 1)")
    comp = compare(read_trials(args.trials), args.baseline, args.metric, margin=args.margin,
                   target=args.target, use_probe=not args.no_probe)
    print(format_table(comp))
    if args.out:
        comp.results.to_csv(args.out, index=False)
    if args.trials_out:
        comp.trials.to_csv(args.trials_out, index=False)
    if args.geomean_out:
        comp.geomean.to_csv(args.geomean_out, index=False)
    return 0
