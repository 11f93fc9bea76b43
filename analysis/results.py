"""The paper's results as pure functions of the dataset: speed, memory and instruction counts against
a baseline, ablations inside one allocator, the security-versus-overhead trade-off and the verdicts.

Everything above `write_outputs` is a pure function of tables; `write_outputs` turns them into the
figures (SVG) and numbers (CSV, JSON) the paper reads; notebooks/results.ipynb calls it.
"""
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import compare as cmp
from analysis import security
from analysis.errors import HeapcostError

BASELINE = "glibc"
MARGIN = 0.05  # "no measurable cost": the geometric-mean interval lies inside 1 +- MARGIN
HEAVY = 2.0  # beyond this geometric-mean overhead the cost is reported as a multiple, not a margin

# Each single defence measured inside one allocator: (defence, allocator, its base). The bases are the
# family's default configuration; glibc-perturb also runs against glibc-notcache, because perturb needs
# the tcache off and only that pair isolates the poisoning itself.
ABLATIONS = [
    ("poison on free", "jemalloc-junk-free", "jemalloc"),
    ("poison on free and fill on allocation", "jemalloc-junk", "jemalloc"),
    ("tcache off", "glibc-notcache", "glibc"),
    ("tcache off and perturb (poison on free, fill on allocation)", "glibc-perturb", "glibc"),
    ("perturb alone (tcache off on both sides)", "glibc-perturb", "glibc-notcache"),
    ("quarantine", "scudo-quarantine", "scudo"),
    ("zero on allocation", "scudo-zero", "scudo"),
    ("secure mode (same 2.0.9 source)", "mimalloc-secure", "mimalloc2"),
    ("perl's own malloc instead of the system one (same perl source)", "perl-mymalloc", "perl-sysmalloc"),
]


# ---------------------------------------------------------------------------------------------- runs
@dataclass
class Run:
    path: Path
    info: dict

    @property
    def run_id(self) -> str:
        return self.path.name


def runs_of_kind(runs_dir: Path, kind: str) -> list[Run]:
    out = []
    for run_json in sorted(Path(runs_dir).glob("*/run.json")):
        try:
            info = json.loads(run_json.read_text())
        except ValueError:
            continue
        if info.get("kind") == kind:
            out.append(Run(run_json.parent, info))
    return out


def pick_run(runs_dir: Path, kind: str, table: str) -> Run | None:
    """The run the paper reports for `kind`: the newest complete one with `table`, preferring the full
    profile (run ids start with their UTC start time, so sorting by id sorts by age)."""
    runs = [r for r in runs_of_kind(runs_dir, kind) if (r.path / table).is_file()]
    complete = [r for r in runs if r.info.get("status") == "complete"] or runs
    full = [r for r in complete if (r.info.get("params") or {}).get("profile") == "full"] or complete
    return full[-1] if full else None


def read_table(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, keep_default_na=False, na_values=[""])


# ---------------------------------------------------------------------------------------------- speed
def usable(trials: pd.DataFrame, metric: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(trials of the groups compare can use, the groups left out with why). A group needs
    compare.MIN_RUNS ok, non-warm-up trials; the others are reported, never silently dropped."""
    measured = trials[trials["warmup"].astype(str).isin(["0", "False", "false"])]
    ok = measured[measured["status"] == "ok"]
    if metric in ok.columns:
        ok = ok[pd.to_numeric(ok[metric], errors="coerce") > 0]
    counts = ok.groupby(["workload", "allocator"]).size()
    total = measured.groupby(["workload", "allocator"]).size()
    left_out = []
    for (w, a), n_all in total.items():
        n_ok = int(counts.get((w, a), 0))
        if n_ok < cmp.MIN_RUNS:
            sub = measured[(measured["workload"] == w) & (measured["allocator"] == a)]
            bad = sub[sub["status"] != "ok"]
            why = (bad["status"].value_counts().idxmax() + ": " + str(bad["reason"].dropna().iloc[0])
                   if len(bad) and bad["reason"].notna().any() else
                   (bad["status"].value_counts().idxmax() if len(bad) else "too few runs"))
            left_out.append({"workload": w, "allocator": a, "ok": n_ok, "trials": int(n_all),
                             "why": why.splitlines()[0][:160]})
    keep = counts[counts >= cmp.MIN_RUNS].index
    key = pd.MultiIndex.from_frame(trials[["workload", "allocator"]])
    return (trials[key.isin(keep)].reset_index(drop=True),
            pd.DataFrame(left_out, columns=["workload", "allocator", "ok", "trials", "why"]))


def against(trials: pd.DataFrame, baseline: str, metric: str, margin: float = MARGIN) -> cmp.Comparison:
    """compare() over the workloads the baseline has usable runs of."""
    data, _ = usable(trials, metric)
    has_base = set(data.loc[data["allocator"] == baseline, "workload"])
    data = data[data["workload"].isin(has_base)]
    if data.empty:
        raise HeapcostError(f"no usable runs of the baseline {baseline!r} for {metric}; allocators with runs: "
                            f"{', '.join(sorted(trials['allocator'].unique()))}")
    return cmp.compare(data, baseline, metric, margin=margin)


def ablations(trials: pd.DataFrame, metric: str = "wall_s", plan=ABLATIONS) -> pd.DataFrame:
    """One row per (defence, workload) and a pooled row (workload "all": the geometric mean) per
    defence: the ratio of the variant to its base with a 95% interval."""
    data, _ = usable(trials, metric)
    present = set(data["allocator"])
    rows = []
    for defence, alloc, base in plan:
        if alloc not in present or base not in present:
            continue
        common = (set(data.loc[data["allocator"] == alloc, "workload"])
                  & set(data.loc[data["allocator"] == base, "workload"]))
        sub = data[data["allocator"].isin([alloc, base]) & data["workload"].isin(common)]
        if sub.empty:
            continue
        comp = cmp.compare(sub, base, metric, margin=MARGIN)
        for _, r in comp.results.iterrows():
            rows.append({"defence": defence, "allocator": alloc, "base": base, "metric": metric,
                         "workload": r["workload"], "ratio": r["ratio"], "ci_low": r["ci_low"],
                         "ci_high": r["ci_high"], "n": r["n"], "n_base": r["n_baseline"]})
        g = comp.geomean.iloc[0]
        rows.append({"defence": defence, "allocator": alloc, "base": base, "metric": metric,
                     "workload": "all", "ratio": g["geomean_ratio"], "ci_low": g["ci_low"],
                     "ci_high": g["ci_high"], "n": int(g["workloads"]), "n_base": int(g["workloads"])})
    return pd.DataFrame(rows, columns=["defence", "allocator", "base", "metric", "workload", "ratio",
                                       "ci_low", "ci_high", "n", "n_base"])


# ---------------------------------------------------------------------------------------------- callgrind
def per_free(counts: pd.DataFrame, baseline: str = BASELINE) -> pd.DataFrame:
    """Instructions, data accesses and simulated D1 misses per free (seed 002's unit of useful work:
    the workload's own count of frees, the same under every allocator), with the ratio to the baseline
    on the same workload. Callgrind counts are exact for one deterministic run: no interval."""
    ok = counts[counts["status"] == "ok"].copy()
    for c in ("instructions", "data_reads", "data_writes", "d1_read_misses", "d1_write_misses", "free_calls"):
        ok[c] = pd.to_numeric(ok[c], errors="coerce")
    ok = ok[ok["free_calls"] > 0]
    ok["instructions_per_free"] = ok["instructions"] / ok["free_calls"]
    ok["accesses_per_free"] = (ok["data_reads"] + ok["data_writes"]) / ok["free_calls"]
    ok["d1_misses_per_free"] = (ok["d1_read_misses"] + ok["d1_write_misses"]) / ok["free_calls"]
    # slow allocators run at a smaller scale; the baseline is counted at each of those scales too, and
    # every ratio is taken at the same scale
    ok["scale"] = pd.to_numeric(ok["scale"], errors="coerce").round(8)
    base = ok[ok["allocator"] == baseline].set_index(["workload", "scale"])
    for col in ("instructions_per_free", "accesses_per_free", "d1_misses_per_free"):
        ok[col.replace("_per_free", "_ratio")] = [
            r[col] / base.loc[(r["workload"], r["scale"]), col] if (r["workload"], r["scale"]) in base.index
            else np.nan for _, r in ok.iterrows()]
    cols = ["workload", "allocator", "scale", "instructions", "free_calls", "instructions_per_free",
            "accesses_per_free", "d1_misses_per_free", "instructions_ratio", "accesses_ratio", "d1_misses_ratio"]
    return ok[cols].sort_values(["workload", "allocator", "scale"]).reset_index(drop=True)


def main_scale(table: pd.DataFrame) -> pd.DataFrame:
    """Each (workload, allocator) at the largest scale it was counted at (the baseline's extra
    reduced-scale counts serve only as references for the slow allocators)."""
    idx = table.groupby(["workload", "allocator"])["scale"].idxmax()
    return table.loc[sorted(idx)].reset_index(drop=True)


def per_free_geomean(table: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for alloc, sub in main_scale(table).groupby("allocator", sort=True):
        r = sub["instructions_ratio"].dropna()
        if len(r):
            rows.append({"allocator": alloc, "workloads": len(r),
                         "instructions_ratio": float(np.exp(np.log(r).mean()))})
    return pd.DataFrame(rows, columns=["allocator", "workloads", "instructions_ratio"])


def missing_callgrind(counts: pd.DataFrame) -> pd.DataFrame:
    """Per allocator: the workloads callgrind could not count, and the first reason."""
    bad = counts[counts["status"] != "ok"]
    if bad.empty:
        return pd.DataFrame(columns=["allocator", "workloads", "reason"])
    g = bad.groupby("allocator", sort=True)
    return pd.DataFrame({"allocator": list(g.groups), "workloads": g["workload"].nunique().to_list(),
                         "reason": g["reason"].first().to_list()})


# ---------------------------------------------------------------------------------------------- security
def score_intervals(rows: list[dict], weights: dict | None = None, *, draws: int = 1000,
                    seed: int = 0) -> pd.DataFrame:
    """Security score per allocator with a 95% interval from the probes' own sampling uncertainty.

    Each draw replaces every rate by a draw from its Jeffreys posterior Beta(k + 1/2, n - k + 1/2)
    (k of n fresh processes in which the primitive worked) and every entropy by a normal draw with
    the spread of its bootstrap interval, then recomputes the score; the interval is the 2.5% and
    97.5% quantiles of the draws, widened to contain the point score. Probes that ran only a few
    times (deterministic ones) therefore carry a wide posterior, honestly."""
    rng = np.random.default_rng(seed)
    point = security.scores(rows, weights)
    samples: dict[str, list[float]] = {a: [] for a in point}
    prepared = []
    for row in rows:
        r = dict(row)
        n = security._num(r.get("trials")) or 0
        rate = security._num(r.get("rate"))
        lo, hi = security._num(r.get("bits_ci_low")), security._num(r.get("bits_ci_high"))
        prepared.append((r, n, rate, lo, hi))
    for _ in range(draws):
        drawn = []
        for r, n, rate, lo, hi in prepared:
            d = dict(r)
            if r.get("probe") in ("address-entropy", "placement-entropy"):
                bits = security._num(r.get("bits"))
                if bits is not None and lo is not None and hi is not None and hi > lo:
                    d["bits"] = max(0.0, rng.normal(bits, (hi - lo) / 3.92))
            elif rate is not None and n > 0:
                k = round(rate * n)
                d["rate"] = rng.beta(k + 0.5, n - k + 0.5)
            drawn.append(d)
        for a, entry in security.scores(drawn, weights).items():
            samples[a].append(entry["score"])
    out = []
    for a in sorted(point):
        s = point[a]["score"]
        v = np.array(samples[a], dtype=float)
        if np.isnan(s) or np.isnan(v).all():
            low = high = float("nan")
        else:
            low, high = np.nanquantile(v, [0.025, 0.975])
            low, high = min(float(low), s), max(float(high), s)
        out.append({"allocator": a, "score": s, "score_low": low, "score_high": high,
                    "coverage": point[a]["coverage"]})
    return pd.DataFrame(out, columns=["allocator", "score", "score_low", "score_high", "coverage"])


# ---------------------------------------------------------------------------------------------- trade-off
def pareto_front(points: pd.DataFrame) -> list[str]:
    """Allocators no other beats on both axes (lower overhead and higher score, one strictly)."""
    front = []
    for _, p in points.iterrows():
        dominated = ((points["overhead"] <= p["overhead"]) & (points["score"] >= p["score"])
                     & ((points["overhead"] < p["overhead"]) | (points["score"] > p["score"]))).any()
        if not dominated:
            front.append(p["allocator"])
    return sorted(front, key=lambda a: float(points.set_index("allocator").loc[a, "overhead"]))


def tradeoff(geomean: pd.DataFrame, scores: pd.DataFrame, baseline: str = BASELINE) -> pd.DataFrame:
    """Overhead (geometric-mean ratio to the baseline, interval) against security score (bounds), for
    the allocators that have both; the baseline sits at overhead 1 with a zero-width interval."""
    g = geomean.rename(columns={"geomean_ratio": "overhead", "ci_low": "overhead_low",
                                "ci_high": "overhead_high"})[["allocator", "overhead", "overhead_low",
                                                              "overhead_high", "workloads"]]
    base_row = pd.DataFrame([{"allocator": baseline, "overhead": 1.0, "overhead_low": 1.0, "overhead_high": 1.0,
                              "workloads": int(g["workloads"].max()) if len(g) else 0}])
    g = pd.concat([base_row, g], ignore_index=True)
    t = g.merge(scores, on="allocator", how="inner")
    t = t[t["score"].notna()].sort_values("allocator").reset_index(drop=True)
    front = set(pareto_front(t)) if len(t) else set()
    t["pareto"] = t["allocator"].isin(front)
    t["dominated_by"] = [dominator(t, r) for _, r in t.iterrows()]
    return t


def dominator(points: pd.DataFrame, p) -> str:
    """The allocator that beats p on both axes with both intervals clear of p's (the firm kind of
    domination): the cheapest such, or "" if none."""
    firm = points[(points["overhead_high"] < p["overhead_low"]) & (points["score_low"] > p["score_high"])]
    if firm.empty:
        return ""
    return str(firm.sort_values(["overhead", "allocator"]).iloc[0]["allocator"])


def verdict(row, base, baseline: str = BASELINE, margin: float = MARGIN) -> str:
    """One line per allocator from fixed rules on the intervals (the paper states the rules); `base`
    is the baseline's row. Safer or less safe only when the score intervals do not overlap."""
    if row["allocator"] == baseline:
        return "baseline"
    lo, hi = row["overhead_low"], row["overhead_high"]
    safer = row["score_low"] > base["score_high"]
    less_safe = row["score_high"] < base["score_low"]
    if row.get("dominated_by"):
        return f"dominated by {row['dominated_by']}"
    if lo > HEAVY:
        cost = f"over {HEAVY:g} times the baseline's time"
    elif hi < 1 - margin:
        cost = "faster than the baseline"
    elif lo >= 1 - margin and hi <= 1 + margin:
        cost = "no measurable cost"
    elif hi < 1:
        cost = "not slower"
    elif lo > 1 + margin:
        cost = "costs more than the margin"
    else:
        cost = "cost unresolved"
    if safer and cost in ("faster than the baseline", "no measurable cost", "not slower"):
        return f"a better default: safer, {cost}"
    if safer:
        return f"buys security: {cost}"
    if less_safe:
        return f"less safe than the baseline; {cost}"
    return f"security like the baseline's; {cost}"


def verdicts(trade: pd.DataFrame, baseline: str = BASELINE) -> pd.DataFrame:
    if baseline not in set(trade["allocator"]):
        raise HeapcostError(f"the baseline {baseline!r} has no security score; it must be in the probe run")
    base = trade.set_index("allocator").loc[baseline]
    out = trade.copy()
    out["verdict"] = [verdict(r, base, baseline) for _, r in out.iterrows()]
    return out


# ---------------------------------------------------------------------------------------------- between runs
REPLICATION_COLUMNS = ["allocator", "run_id", "geomean_ratio", "ci_low", "ci_high", "published_ratio",
                       "published_low", "published_high", "overlap", "display", "published_display"]


def between_runs(published: pd.DataFrame, others: dict, baseline: str = BASELINE) -> pd.DataFrame:
    """Each other run of the same profile analysed the same way: does its geometric-mean interval per
    allocator overlap the published run's? (Intervals are for one run; runs differ in machine load.)"""
    pub = published.set_index("allocator")
    rows = []
    for run_id, trials in sorted(others.items()):
        try:
            geo = against(trials, baseline, "wall_s").geomean
        except HeapcostError:
            continue
        for _, g in geo.iterrows():
            if g["allocator"] not in pub.index:
                continue
            p = pub.loc[g["allocator"]]
            rows.append({"allocator": g["allocator"], "run_id": run_id, "geomean_ratio": g["geomean_ratio"],
                         "ci_low": g["ci_low"], "ci_high": g["ci_high"], "published_ratio": p["geomean_ratio"],
                         "published_low": p["ci_low"], "published_high": p["ci_high"],
                         "overlap": bool(g["ci_low"] <= p["ci_high"] and p["ci_low"] <= g["ci_high"]),
                         "display": fmt_interval(g["geomean_ratio"], g["ci_low"], g["ci_high"]),
                         "published_display": fmt_interval(p["geomean_ratio"], p["ci_low"], p["ci_high"])})
    return pd.DataFrame(rows, columns=REPLICATION_COLUMNS)


# ---------------------------------------------------------------------------------------------- method tables
def allocator_table(runs: list["Run"]) -> pd.DataFrame:
    """Every allocator of the runs as measured (run.json's catalogue entries; the first run that has it)."""
    seen: dict[str, dict] = {}
    for run in runs:
        for aid, a in (run.info.get("allocators") or {}).items():
            if aid in seen or not isinstance(a, dict):
                continue
            seen[aid] = {"allocator": aid, "family": a.get("family", ""), "description": a.get("description", ""),
                         "origin": (a.get("origin") or {}).get("kind", ""),
                         "defences": " ".join(a.get("defences") or [])}
    return pd.DataFrame(sorted(seen.values(), key=lambda r: (r["family"], r["allocator"])),
                        columns=["allocator", "family", "description", "origin", "defences"])


def workload_table(run: "Run | None") -> pd.DataFrame:
    rows = []
    for wid, w in ((run.info.get("workloads") or {}) if run else {}).items():
        rows.append({"workload": wid, "kind": w.get("kind", ""), "seed": (w.get("seed") or "")[:3],
                     "description": w.get("description", ""), "full_scale": w.get("scale_note", "")})
    return pd.DataFrame(sorted(rows, key=lambda r: r["workload"]),
                        columns=["workload", "kind", "seed", "description", "full_scale"])


# Allocators no registry here carries: the paper can only report what the seeds measured.
SEED_ONLY = [("000", "OpenBSD malloc", "perl malloc (usemymalloc)", ("wall",)),
             ("001", "hardened_malloc (LD_PRELOAD)", "glibc 2.33", ("wall", "user", "sys", "maxrss"))]


def seed_only_figures(figures: pd.DataFrame) -> pd.DataFrame:
    """The seeds' own measured figures for hardened_malloc and OpenBSD malloc, as ratios to the
    reference each seed used, per benchmark and metric (single runs: no interval is possible)."""
    rows = []
    measured = figures[figures["kind"] == "measured"]
    for seed, cond, ref, metrics in SEED_ONLY:
        sub = measured[measured["seed"].astype(str).str.zfill(3) == seed]
        for (bench, metric), g in sub.groupby(["benchmark", "metric"], sort=True):
            a = pd.to_numeric(g.loc[g["condition"] == cond, "value"], errors="coerce").dropna()
            b = pd.to_numeric(g.loc[g["condition"] == ref, "value"], errors="coerce").dropna()
            if len(a) != 1 or len(b) != 1 or metric not in metrics or b.iloc[0] <= 0 or a.iloc[0] <= 0:
                continue
            rows.append({"seed": seed, "allocator": cond, "reference": ref, "benchmark": str(bench).strip(),
                         "metric": metric, "value": float(a.iloc[0]), "reference_value": float(b.iloc[0]),
                         "ratio": float(a.iloc[0] / b.iloc[0]),
                         "line": ",".join(sorted(set(g["line"].astype(str))))})
    return pd.DataFrame(rows, columns=["seed", "allocator", "reference", "benchmark", "metric", "value",
                                       "reference_value", "ratio", "line"])


# ---------------------------------------------------------------------------------------------- outputs
def fmt_ratio(x) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.3f}"


def fmt_interval(ratio, lo, hi) -> str:
    return f"{fmt_ratio(ratio)} [{fmt_ratio(lo)}, {fmt_ratio(hi)}]"


def fmt_score(x) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.1f}"


def fmt_percent(ratio) -> str:
    """A ratio as a signed percentage change: 1.025 -> +2.5%."""
    return "n/a" if ratio is None or not np.isfinite(ratio) else f"{(ratio - 1) * 100:+.1f}%"


@dataclass
class Results:
    time_run: Run | None
    callgrind_run: Run | None
    probe_run: Run | None
    speed: cmp.Comparison | None
    memory: cmp.Comparison | None
    left_out: pd.DataFrame
    ablation: pd.DataFrame
    ablation_memory: pd.DataFrame
    per_free: pd.DataFrame
    per_free_geomean: pd.DataFrame
    callgrind_missing: pd.DataFrame
    scores: pd.DataFrame
    trade: pd.DataFrame
    allocators: pd.DataFrame
    workloads: pd.DataFrame
    seed_only: pd.DataFrame
    replication: pd.DataFrame


def compute(data_dir: Path, baseline: str = BASELINE, weights: dict | None = None) -> Results:
    """Every result of the paper from one dataset directory (with runs/ inside)."""
    runs_dir = Path(data_dir) / "runs"
    if not runs_dir.is_dir():
        raise HeapcostError(f"{runs_dir} does not exist; give a dataset directory holding runs/ (e.g. data)")
    time_run = pick_run(runs_dir, "time", "trials.csv")
    cg_run = pick_run(runs_dir, "callgrind", "counts.csv")
    probe_run = pick_run(runs_dir, "probe", "probes.csv")
    speed = memory = None
    left_out = pd.DataFrame(columns=["workload", "allocator", "ok", "trials", "why"])
    abl = abl_mem = pd.DataFrame()
    if time_run is not None:
        trials = read_table(time_run.path / "trials.csv")
        _, left_out = usable(trials, "wall_s")
        speed = against(trials, baseline, "wall_s")
        memory = against(trials, baseline, "maxrss_kb")
        abl = ablations(trials, "wall_s")
        abl_mem = ablations(trials, "maxrss_kb")
    pf = pf_g = cg_missing = pd.DataFrame()
    if cg_run is not None:
        counts = read_table(cg_run.path / "counts.csv")
        pf = per_free(counts, baseline)
        pf_g = per_free_geomean(pf[pf["allocator"] != baseline])
        cg_missing = missing_callgrind(counts)
    scores = pd.DataFrame(columns=["allocator", "score", "score_low", "score_high", "coverage"])
    if probe_run is not None:
        scores = score_intervals(security.read_rows(probe_run.path / "probes.csv"), weights)
    trade = pd.DataFrame()
    if speed is not None and len(scores):
        trade = verdicts(tradeoff(speed.geomean, scores, baseline), baseline)
    runs = [r for r in (time_run, cg_run, probe_run) if r is not None]
    figures_csv = Path(data_dir) / "literature" / "figures.csv"
    seed_only = (seed_only_figures(read_table(figures_csv)) if figures_csv.is_file()
                 else seed_only_figures(pd.DataFrame(columns=["seed", "condition", "benchmark", "metric", "value",
                                                               "kind", "line"])))
    replication = pd.DataFrame(columns=REPLICATION_COLUMNS)
    if speed is not None:
        others = [r for r in runs_of_kind(runs_dir, "time")
                  if r.run_id != time_run.run_id and r.info.get("status") == "complete"
                  and (r.info.get("params") or {}).get("profile") == (time_run.info.get("params") or {}).get("profile")
                  and (r.path / "trials.csv").is_file()]
        replication = between_runs(speed.geomean, {r.run_id: read_table(r.path / "trials.csv") for r in others},
                                   baseline)
    return Results(time_run, cg_run, probe_run, speed, memory, left_out, abl, abl_mem, pf, pf_g, cg_missing,
                   scores, trade, allocator_table(runs), workload_table(time_run or cg_run), seed_only, replication)


def _setup_matplotlib():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # byte-identical SVGs from the same data
    plt.rcParams.update({"svg.hashsalt": "heapcost", "svg.fonttype": "path", "font.size": 8,
                         "axes.spines.top": False, "axes.spines.right": False})
    return plt


def _plain_log_axis(ax) -> None:
    """Plain numbers on a log axis: 1, 2, 5 per decade over a short range, decades only over a long one."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    lo, hi = ax.get_xlim()
    subs = (1.0, 2.0, 5.0) if hi / max(lo, 1e-12) < 30 else (1.0,)
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
    ax.xaxis.set_minor_formatter(plt_null_formatter())


def plt_null_formatter():
    from matplotlib.ticker import NullFormatter

    return NullFormatter()


def _save(fig, path: Path) -> None:
    fig.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})


def forest(plt, table: pd.DataFrame, path: Path, xlabel: str, ncols: int = 3) -> None:
    """One panel per workload: each allocator's ratio to the baseline with its 95% interval."""
    workloads = sorted(table["workload"].unique())
    ncols = min(ncols, max(1, len(workloads)))
    nrows = math.ceil(len(workloads) / ncols) or 1
    allocs = sorted(table["allocator"].unique())
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.4 * ncols + 0.6, 0.5 + nrows * (0.4 + 0.1 * len(allocs))),
                             squeeze=False, sharey=True)
    for ax, w in zip(axes.flat, workloads):
        sub = table[table["workload"] == w].set_index("allocator")
        ys = range(len(allocs))
        for y, a in zip(ys, allocs):
            if a in sub.index:
                r = sub.loc[a]
                ax.errorbar([r["ratio"]], [y], xerr=[[r["ratio"] - r["ci_low"]], [r["ci_high"] - r["ratio"]]],
                            fmt="o", ms=2.5, color="#2c5d8f", elinewidth=1, capsize=1.5)
        ax.axvline(1.0, color="grey", lw=0.6, ls="--")
        ax.set_xscale("log")
        _plain_log_axis(ax)
        ax.set_title(w, fontsize=8)
        ax.set_yticks(list(ys), allocs, fontsize=6)
        ax.tick_params(axis="x", labelsize=6)
        ax.invert_yaxis() if w == workloads[0] else None
    for ax in list(axes.flat)[len(workloads):]:
        ax.set_visible(False)
    fig.supxlabel(xlabel, fontsize=8)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def ablation_figure(plt, table: pd.DataFrame, path: Path, xlabel: str) -> None:
    pooled = table[table["workload"] == "all"].reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(5.5, 0.6 + 0.3 * max(1, len(pooled))))
    for y, r in pooled.iterrows():
        ax.errorbar([r["ratio"]], [y], xerr=[[r["ratio"] - r["ci_low"]], [r["ci_high"] - r["ratio"]]],
                    fmt="o", ms=3, color="#8f2c2c", elinewidth=1, capsize=2)
    ax.axvline(1.0, color="grey", lw=0.6, ls="--")
    ax.set_yticks(range(len(pooled)), [f"{r['allocator']} / {r['base']}" for _, r in pooled.iterrows()], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    _plain_log_axis(ax)
    ax.set_xlabel(xlabel)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def per_free_figure(plt, table: pd.DataFrame, path: Path, baseline: str) -> None:
    """One row per allocator, one marker per workload: instructions per free on a log axis."""
    table = main_scale(table)
    workloads = sorted(table["workload"].unique())
    allocs = sorted(table["allocator"].unique())
    markers = "osD^v<>phX*"
    fig, ax = plt.subplots(figsize=(5.5, 0.9 + 0.2 * len(allocs)))
    for i, w in enumerate(workloads):
        sub = table[table["workload"] == w].set_index("allocator")
        ys = [y for y, a in enumerate(allocs) if a in sub.index]
        xs = [sub.loc[a, "instructions_per_free"] for a in allocs if a in sub.index]
        ax.scatter(xs, ys, s=12, marker=markers[i % len(markers)], label=w, alpha=0.8)
    ax.set_yticks(range(len(allocs)), allocs, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    _plain_log_axis(ax)
    ax.set_xlabel("instructions per free (callgrind, whole program)")
    ax.legend(fontsize=6, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def tradeoff_axes(ax, trade: pd.DataFrame, baseline: str) -> None:
    """Security score against overhead, both with their intervals; the Pareto front as a step line."""
    # neighbours in score get their labels above and below in turn, so close points stay readable
    for i, (_, r) in enumerate(trade.sort_values(["score", "allocator"]).iterrows()):
        colour = "#1a9850" if r["pareto"] else "#4d4d4d"
        ax.errorbar([r["overhead"]], [r["score"]],
                    xerr=[[r["overhead"] - r["overhead_low"]], [r["overhead_high"] - r["overhead"]]],
                    yerr=[[r["score"] - r["score_low"]], [r["score_high"] - r["score"]]],
                    fmt="o", ms=3, color=colour, elinewidth=0.7, capsize=1.5)
        ax.annotate(r["allocator"], (r["overhead"], r["score"]), xytext=(3, 3 if i % 2 else -8),
                    textcoords="offset points", fontsize=6, color=colour)
    front = trade[trade["pareto"]].sort_values("overhead")
    if len(front):
        ax.step(front["overhead"], front["score"], where="post", color="#1a9850", lw=0.8)
    ax.set_xscale("log")
    _plain_log_axis(ax)
    ax.set_xlabel(f"time overhead: geometric-mean ratio to {baseline} (95% interval)")
    ax.set_ylabel("security score (95% interval from the probes' uncertainty)")
    ax.set_ylim(0, 100)


def tradeoff_figure(plt, trade: pd.DataFrame, path: Path | None, baseline: str):
    fig, ax = plt.subplots(figsize=(5.5, 4.0))
    tradeoff_axes(ax, trade, baseline)
    fig.tight_layout()
    if path is not None:
        _save(fig, path)
        plt.close(fig)
    return fig


def _records(df: pd.DataFrame) -> list[dict]:
    return json.loads(df.to_json(orient="records")) if df is not None and len(df) else []


def _display_rows(df: pd.DataFrame, ratio="ratio", lo="ci_low", hi="ci_high") -> pd.DataFrame:
    out = df.copy()
    out["display"] = [fmt_interval(r[ratio], r[lo], r[hi]) for _, r in out.iterrows()]
    out["percent"] = [fmt_percent(r[ratio]) for _, r in out.iterrows()]
    return out


def clock_facts(run: Run | None, trials: pd.DataFrame | None, speed: cmp.Comparison | None) -> dict:
    """What the threats-to-validity section states about this machine's clock and noise."""
    if run is None:
        return {}
    machine = json.loads((run.path / "machine.json").read_text()) if (run.path / "machine.json").is_file() else {}
    clock = machine.get("clock", {})
    cpu = machine.get("cpu", {})
    facts = {
        "cpu_model": cpu.get("model", "unknown"), "logical_cpus": cpu.get("logical_cpus"),
        "kernel": machine.get("kernel", "unknown"), "os": machine.get("os", "unknown"),
        "hypervisor": "yes" if cpu.get("hypervisor_flag") else "no",
        "virtualization": clock.get("virtualization") or "none detected",
        "cpufreq_exposed": "yes" if clock.get("cpufreq_exposed") else "no",
        "perf_counters": str(clock.get("perf_counters", "unknown")),
        "constant_tsc": "yes" if cpu.get("constant_tsc") else "no",
        "glibc": machine.get("glibc", "unknown"),
    }
    if trials is not None and "loadavg1" in trials.columns:
        la = pd.to_numeric(trials["loadavg1"], errors="coerce").dropna()
        if len(la):
            facts.update(loadavg_min=f"{la.min():.2f}", loadavg_median=f"{la.median():.2f}",
                         loadavg_max=f"{la.max():.2f}")
        probe = pd.to_numeric(trials["clock_probe_s"], errors="coerce").dropna()
        if len(probe) > 1:
            facts["probe_cv_percent"] = f"{probe.std() / probe.mean() * 100:.2f}"
            facts["probe_range_percent"] = f"{(probe.max() / probe.min() - 1) * 100:.1f}"
    if speed is not None:
        r = speed.results
        facts.update(rows=int(len(r)), rows_probe_adjusted=int(r["adjusted"].sum()),
                     outliers=int((speed.trials["outlier"] != "none").sum()),
                     trials_used=int(len(speed.trials)),
                     clock_regimes=int(speed.trials["clock_regime"].nunique()),
                     rows_with_change_points=int((r["change_points"] > 0).sum()))
    return facts


def write_outputs(res: Results, out_dir: Path, baseline: str = BASELINE, prefix: str = "results_") -> dict:
    """The results figures (SVG) and numbers (CSV, JSON) for the paper; returns the numbers."""
    from analysis import stats

    plt = _setup_matplotlib()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    p = lambda name: out_dir / f"{prefix}{name}"  # noqa: E731
    numbers: dict = {"baseline": baseline, "confidence_percent": f"{stats.CONFIDENCE * 100:.0f}",
                     "margin_percent": f"{MARGIN * 100:.0f}", "heavy": f"{HEAVY:g}",
                     "trim_percent": f"{stats.TRIM * 100:.0f}", "min_runs": cmp.MIN_RUNS}
    trials = None
    if res.time_run is not None:
        info = res.time_run.info
        trials = read_table(res.time_run.path / "trials.csv")
        measured = trials[trials["warmup"].astype(str).isin(["0", "False", "false"])]
        numbers["time_run"] = {
            "run_id": res.time_run.run_id, "profile": (info.get("params") or {}).get("profile", ""),
            "blocks": int(measured["block"].nunique()), "trials": int(len(trials)),
            "measured": int(len(measured)), "ok": int((measured["status"] == "ok").sum()),
            "allocators": int(trials["allocator"].nunique()), "workloads": int(trials["workload"].nunique()),
            "started": info.get("started_utc", ""), "ended": info.get("ended_utc", ""),
            "status": info.get("status", ""),
        }
    numbers["clock"] = clock_facts(res.time_run, trials, res.speed)

    if res.speed is not None:
        speed = _display_rows(res.speed.results)
        speed[["workload", "allocator", "ratio", "ci_low", "ci_high", "n", "n_baseline", "adjusted", "n_outliers",
               "noninferior", "display", "percent"]].to_csv(p("speed.csv"), index=False)
        geo = _display_rows(res.speed.geomean, "geomean_ratio")
        geo.to_csv(p("speed_geomean.csv"), index=False)
        forest(plt, res.speed.results, p("speed_forest.svg"), f"wall time ratio to {baseline} (95% interval, log scale)")
        mem = _display_rows(res.memory.results)
        mem[["workload", "allocator", "ratio", "ci_low", "ci_high", "n", "n_baseline", "display", "percent"]].to_csv(
            p("memory.csv"), index=False)
        mgeo = _display_rows(res.memory.geomean, "geomean_ratio")
        mgeo.to_csv(p("memory_geomean.csv"), index=False)
        forest(plt, res.memory.results, p("memory_forest.svg"), f"peak RSS ratio to {baseline} (95% interval, log scale)")
        numbers["speed"] = {
            "rows": int(len(speed)),
            "slower": int((speed["ci_low"] > 1).sum()), "faster": int((speed["ci_high"] < 1).sum()),
            "noninferior": int(speed["noninferior"].sum()),
            "cheapest": _extreme(geo, "geomean_ratio", min), "dearest": _extreme(geo, "geomean_ratio", max),
            "median_halfwidth_percent": f"{float(np.median(np.expm1(speed['ci_high'].apply(np.log) - speed['ratio'].apply(np.log)))) * 100:.1f}",
        }
        numbers["memory"] = {"rows": int(len(mem)), "larger": int((mem["ci_low"] > 1).sum()),
                             "smaller": int((mem["ci_high"] < 1).sum()),
                             "leanest": _extreme(mgeo, "geomean_ratio", min),
                             "heaviest": _extreme(mgeo, "geomean_ratio", max)}
    res.left_out.to_csv(p("left_out.csv"), index=False)
    numbers["left_out"] = int(len(res.left_out))

    if len(res.ablation):
        abl = _display_rows(res.ablation)
        if len(res.ablation_memory):
            mem_abl = res.ablation_memory.set_index(["defence", "allocator", "base", "workload"])
            abl["memory_display"] = [
                fmt_interval(*mem_abl.loc[(r["defence"], r["allocator"], r["base"], r["workload"]),
                                         ["ratio", "ci_low", "ci_high"]])
                if (r["defence"], r["allocator"], r["base"], r["workload"]) in mem_abl.index else "n/a"
                for _, r in abl.iterrows()]
        abl.to_csv(p("ablations.csv"), index=False)
        ablation_figure(plt, res.ablation, p("ablations.svg"), "wall time ratio to the family's base (95% interval)")
        pooled = abl[abl["workload"] == "all"]
        numbers["ablations"] = {f"{r['allocator']}/{r['base']}": {"defence": r["defence"], "display": r["display"],
                                                                  "percent": r["percent"], "workloads": int(r["n"])}
                                for _, r in pooled.iterrows()}
    if res.speed is not None:
        done = set(zip(res.ablation.get("allocator", []), res.ablation.get("base", [])))
        measured = set(res.speed.trials["allocator"])
        numbers["ablations_missing"] = [
            {"defence": d, "pair": f"{a} / {b}",
             "why": "no valid runs of " + ", ".join(x for x in (a, b) if x not in measured)
             if {a, b} - measured else "no workload with enough valid runs of both"}
            for d, a, b in ABLATIONS if (a, b) not in done]

    if len(res.per_free):
        pf = res.per_free.copy()
        pf["instructions_per_free_display"] = pf["instructions_per_free"].map(lambda x: f"{x:,.0f}")
        pf["instructions_ratio_display"] = pf["instructions_ratio"].map(fmt_ratio)
        pf.to_csv(p("per_free.csv"), index=False)
        res.per_free_geomean.assign(display=res.per_free_geomean["instructions_ratio"].map(fmt_ratio)).to_csv(
            p("per_free_geomean.csv"), index=False)
        res.callgrind_missing.to_csv(p("callgrind_missing.csv"), index=False)
        per_free_figure(plt, res.per_free, p("per_free.svg"), baseline)
        numbers["callgrind"] = {"run_id": res.callgrind_run.run_id, "rows": int(len(pf)),
                                "status": str(res.callgrind_run.info.get("status", "")),
                                "workloads": int(pf["workload"].nunique()), "allocators": int(pf["allocator"].nunique()),
                                "missing_allocators": int(len(res.callgrind_missing)),
                                "scale": f"{pf['scale'].max():g}",
                                "reduced_scale": sorted({str(a) for a in pf.loc[pf["scale"] < pf["scale"].max(), "allocator"]}
                                                        - {baseline})}
        numbers["per_free"] = {r["allocator"]: fmt_ratio(r["instructions_ratio"])
                               for _, r in res.per_free_geomean.iterrows()}

    if len(res.trade):
        t = res.trade.copy()
        t["overhead_display"] = [fmt_interval(r["overhead"], r["overhead_low"], r["overhead_high"])
                                 for _, r in t.iterrows()]
        t["score_display"] = [f"{fmt_score(r['score'])} [{fmt_score(r['score_low'])}, {fmt_score(r['score_high'])}]"
                              for _, r in t.iterrows()]
        t["pareto_display"] = t["pareto"].map({True: "yes", False: ""})
        t = t.sort_values(["overhead", "allocator"]).reset_index(drop=True)
        t.to_csv(p("tradeoff.csv"), index=False)
        tradeoff_figure(plt, res.trade, p("tradeoff.svg"), baseline)
        numbers["tradeoff"] = {"allocators": int(len(t)), "pareto": [str(a) for a in t[t["pareto"]]["allocator"]],
                               "verdicts": {str(r["allocator"]): str(r["verdict"]) for _, r in t.iterrows()}}
    res.replication.assign(overlap_display=res.replication["overlap"].map({True: "yes", False: "no"})).to_csv(
        p("replication.csv"), index=False)
    numbers["replication"] = {"runs": sorted(set(res.replication["run_id"])), "rows": int(len(res.replication)),
                              "overlapping": int(res.replication["overlap"].sum())}
    res.allocators.to_csv(p("allocators.csv"), index=False)
    res.workloads.to_csv(p("workloads.csv"), index=False)
    so = res.seed_only.copy()
    so["ratio_display"] = so["ratio"].map(lambda x: f"{x:.3f}")
    so.to_csv(p("seed_only.csv"), index=False)
    numbers["allocators"] = int(len(res.allocators))
    numbers["workloads"] = int(len(res.workloads))
    if res.time_run is not None:
        prof = res.time_run.info.get("profile") or {}
        numbers["time_run"].update(seed=str(res.time_run.info.get("seed", "")),
                                   probe_iters=str(res.time_run.info.get("probe_iters", "")),
                                   scale=str(prof.get("scale", "")), warmups=str(prof.get("warmups", "")))
    if res.probe_run is not None:
        no_score = sorted(set(res.scores.loc[res.scores["score"].isna(), "allocator"]))
        numbers["probe_run"] = {"run_id": res.probe_run.run_id, "no_score": no_score}
    (out_dir / f"{prefix}numbers.json").write_text(json.dumps(numbers, indent=2, sort_keys=True) + "\n")
    return numbers


def _extreme(geo: pd.DataFrame, col: str, pick) -> dict:
    if geo.empty:
        return {}
    i = pick(range(len(geo)), key=lambda k: geo.iloc[k][col])
    r = geo.iloc[i]
    return {"allocator": str(r["allocator"]), "display": str(r["display"]), "percent": str(r["percent"])}
