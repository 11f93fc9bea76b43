"""The seeds' own numbers (data/literature/figures.csv) and what they can support.

Each comparison is re-analysed on the log scale with the estimator of `compare` where replicates
exist (Yuen's trimmed-mean interval; with 2 to 4 runs nothing is trimmed and it is Welch's interval
on log values), recomputed exactly where the figures are deterministic counts, and reported as
'single run: no interval' where one run per arm is all there is.
"""
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as sps

from analysis.stats import estimators as stats
from analysis.paths import DATA_DIR

FIGURES = DATA_DIR / "literature" / "figures.csv"
REANALYSIS_COLUMNS = ["seed", "comparison", "metric", "scenario", "n", "n_baseline", "ratio",
                      "ci_low", "ci_high", "p_value", "method", "published", "verdict"]


def load_figures(path: Path = FIGURES) -> pd.DataFrame:
    df = pd.read_csv(path, dtype={"seed": str, "text": str, "slip": str, "note": str})
    df["slip"] = df["slip"].fillna("")
    df["note"] = df["note"].fillna("")
    return df


def _values(fig, seed, condition, metric, **match) -> np.ndarray:
    sel = (fig["seed"] == seed) & (fig["condition"] == condition) & (fig["metric"] == metric)
    for k, v in match.items():
        sel &= fig[k] == v
    return fig.loc[sel].sort_values(["line", "replicate"])["value"].astype(float).to_numpy()


def log_ratio_interval(a, b) -> dict:
    """Ratio of typical values a/b with a 95% interval, from replicate runs of each arm."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if min(a.size, b.size) < 2:
        return {"ratio": float(a.mean() / b.mean()), "ci_low": np.nan, "ci_high": np.nan,
                "p_value": np.nan, "method": "single run: no interval"}
    trim = stats.TRIM if min(a.size, b.size) >= 5 else 0.0
    diff = stats.yuen_difference(np.log(a), np.log(b), trim=trim)
    lo, hi = diff.interval()
    p = 2 * sps.t.sf(abs(diff.estimate / diff.se), diff.df) if diff.se > 0 else 0.0
    method = "yuen-trim20-log" if trim else "welch-log"
    return {"ratio": float(np.exp(diff.estimate)), "ci_low": float(np.exp(lo)),
            "ci_high": float(np.exp(hi)), "p_value": float(p), "method": method}


def welch_raw(a, b) -> dict:
    """What a reader with a t-test on raw times would have concluded."""
    ratio, lo, hi = stats.welch_ratio_interval(a, b)
    p = sps.ttest_ind(a, b, equal_var=False).pvalue
    return {"ratio": ratio, "ci_low": lo, "ci_high": hi, "p_value": float(p),
            "method": "welch-raw (naive)"}


def _verdict(r: dict, lower_is_better: bool = True) -> str:
    if np.isnan(r["ci_low"]):
        return "one run per arm: a ratio, but no variance to judge it against"
    if r["ci_high"] < 1:
        return "supported: lower than the baseline" if lower_is_better else "supported: higher"
    if r["ci_low"] > 1:
        return "supported: higher than the baseline" if lower_is_better else "supported: lower"
    return "not supported: the interval includes no change"


def _row(seed, comparison, metric, scenario, a, b, result, published=""):
    return {"seed": seed, "comparison": comparison, "metric": metric, "scenario": scenario,
            "n": len(a), "n_baseline": len(b), **result, "published": published,
            "verdict": _verdict(result)}


def seed003_runs(fig: pd.DataFrame, metric: str = "wall") -> dict:
    """003's runs by scenario: as published, without the repeated line, without the outlier, both."""
    rows = fig[(fig["seed"] == "003") & (fig["metric"] == metric)].sort_values("line")
    un = rows[rows["condition"] == "unpatched"]
    pa = rows[rows["condition"] == "patched"]
    repeated = pa["slip"].str.contains("identical", regex=False)
    outlier = un["note"].str.contains("outlier", regex=False)
    return {
        "as published": (pa["value"].to_numpy(), un["value"].to_numpy()),
        "without the repeated line": (pa.loc[~repeated, "value"].to_numpy(), un["value"].to_numpy()),
        "without the outlier": (pa["value"].to_numpy(), un.loc[~outlier, "value"].to_numpy()),
        "without both": (pa.loc[~repeated, "value"].to_numpy(), un.loc[~outlier, "value"].to_numpy()),
    }


def reanalyse(fig: pd.DataFrame | None = None) -> pd.DataFrame:
    fig = load_figures() if fig is None else fig
    rows = []

    # 000: one run of each benchmark per malloc
    for bench in fig.loc[(fig["seed"] == "000") & (fig["metric"] == "wall"), "benchmark"].unique():
        a = _values(fig, "000", "OpenBSD malloc", "wall", benchmark=bench)
        b = _values(fig, "000", "perl malloc (usemymalloc)", "wall", benchmark=bench)
        rows.append(_row("000", f"OpenBSD malloc / perl malloc: {bench}", "wall", "as published",
                         a, b, log_ratio_interval(a, b)))

    # 001: one build per malloc
    for metric in ("wall", "user", "sys", "maxrss", "minor_faults", "major_faults"):
        a = _values(fig, "001", "hardened_malloc (LD_PRELOAD)", metric)
        b = _values(fig, "001", "glibc 2.33", metric, kind="measured")
        published = {"wall": "1.3 (from 8563/6536; 6536 is a slip for 6546)", "user": "1.35",
                     "sys": "1.9"}.get(metric, "")
        rows.append(_row("001", "hardened_malloc / glibc: kernel rpmbuild", metric, "as published",
                         a, b, log_ratio_interval(a, b), published))

    # 002: Speedometer scores are rates (higher is faster); time ratio = baseline score inverted
    for machine_key, label in (("Skylake", "Skylake"), ("Silvermont", "Silvermont")):
        sel = fig["machine"].str.contains(machine_key, regex=False)
        a = 1 / _values(fig[sel], "002", "baseline (poison on free)", "score")
        b = 1 / _values(fig[sel], "002", "nopoison", "score")
        published = "about 2.5% slower" if label == "Skylake" else "almost unaffected"
        rows.append(_row("002", f"poison / nopoison, time per Speedometer run ({label})",
                         "1/score", "as published", a, b, log_ratio_interval(a, b), published))
    for metric, claim in (("instructions_per_free", "+8.7%"), ("data_accesses_per_free", "+15.1%"),
                          ("d1_misses_per_free", "around +8%")):
        a = _values(fig, "002", "baseline (poison on free)", metric)
        b = _values(fig, "002", "nopoison", metric)
        rows.append({"seed": "002", "comparison": "poison / nopoison, callgrind per free",
                     "metric": metric, "scenario": "as published", "n": 1, "n_baseline": 1,
                     "ratio": float(a[0] / b[0]), "ci_low": np.nan, "ci_high": np.nan,
                     "p_value": np.nan, "method": "exact (deterministic counts)",
                     "published": claim, "verdict": "exact: no interval needed (one run per arm "
                     "of a deterministic count; the two runs did differ in frees by 8%)"})

    # 003: the scenarios of the outlier and the repeated line
    for scenario, (a, b) in seed003_runs(fig).items():
        for result in (log_ratio_interval(a, b), welch_raw(a, b)):
            rows.append(_row("003", "patched / unpatched: malloc-test", "wall", scenario, a, b,
                             result, "small, but significant speedup"))

    # 004: two perf stat runs per arm
    for metric in ("elapsed", "task_clock", "instructions", "cycles"):
        a = _values(fig, "004", "patched", metric)
        b = _values(fig, "004", "unpatched", metric)
        result = log_ratio_interval(a, b)
        if metric == "instructions":
            result["method"] += " (instructions nearly deterministic)"
        rows.append(_row("004", "patched / unpatched: tcache loop", metric, "as published", a, b,
                         result, "no big impact"))
    return pd.DataFrame(rows, columns=REANALYSIS_COLUMNS)


def slips(fig: pd.DataFrame | None = None) -> pd.DataFrame:
    fig = load_figures() if fig is None else fig
    return (fig[fig["slip"] != ""].drop_duplicates(["seed", "line", "slip"])
            [["seed", "file", "line", "text", "slip"]].reset_index(drop=True))
