"""The paper's results as pure functions of the dataset: speed, memory and instruction counts against
a baseline, ablations inside one allocator, the security-versus-overhead trade-off and the verdicts.

Every function here is a pure function of tables; analysis.publish.results.writer turns the results into
the figures (SVG, drawn by analysis.publish.render.figures) and numbers (CSV, JSON) the paper reads.
"""
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analysis.stats import compare as cmp
from analysis.stats import estimators, paired, scaling
from analysis.stats import security, weight_draws
from analysis.contract import dataset
from analysis.contract.runstore import Run
from analysis.contract.schema import LITERATURE_SCHEMAS, OK, declared_orientation, measured_trials, read_table
from analysis.publish.results import ablations as ablation
from analysis.publish.render.formats import fmt_interval
from analysis.publish.results import cpu_split, memo, provenance, server_metrics
from analysis.publish.dataset import paper_runs
from analysis.publish.security import primitives
from analysis.publish.results.instruction_counts import missing_callgrind, per_free, per_free_geomean
from analysis.errors import HeapcostError, warn
from analysis.paths import repo_relative

BASELINE = "glibc"
MARGIN = 0.05  # "no measurable cost": the geometric-mean interval lies inside 1 +- MARGIN
HEAVY = 2.0  # beyond this geometric-mean overhead the cost is reported as a multiple, not a margin



# ---------------------------------------------------------------------------------------------- speed
LEFT_OUT_COLUMNS = ["workload", "allocator", "ok", "trials", "why"]


def usable(trials: pd.DataFrame, metric: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(trials of the groups compare can use, the groups left out with why). A group needs
    compare.MIN_RUNS ok, non-warm-up trials; the others are reported, never silently dropped."""
    measured = measured_trials(trials)
    ok = measured[measured["status"] == OK]
    if metric in ok.columns:
        ok = ok[pd.to_numeric(ok[metric], errors="coerce") > 0]
    counts = ok.groupby(["workload", "allocator"]).size()
    total = measured.groupby(["workload", "allocator"]).size()
    left_out = []
    for (w, a), n_all in total.items():
        n_ok = int(counts.get((w, a), 0))
        if n_ok < cmp.MIN_RUNS:
            sub = measured[(measured["workload"] == w) & (measured["allocator"] == a)]
            bad = sub[sub["status"] != OK]
            why = (bad["status"].value_counts().idxmax() + ": " + str(bad["reason"].dropna().iloc[0])
                   if len(bad) and bad["reason"].notna().any() else
                   (bad["status"].value_counts().idxmax() if len(bad) else "too few runs"))
            left_out.append({"workload": w, "allocator": a, "ok": n_ok, "trials": int(n_all),
                             "why": repo_relative(why.splitlines()[0])[:160]})
    keep = counts[counts >= cmp.MIN_RUNS].index
    key = pd.MultiIndex.from_frame(trials[["workload", "allocator"]])
    return (trials[key.isin(keep)].reset_index(drop=True),
            pd.DataFrame(left_out, columns=LEFT_OUT_COLUMNS))


def interference_counts(*tables: pd.DataFrame) -> dict:
    """How many measured trials (or lockstep pairs) ran during interference (the `interfered` column of
    analysis/harness/process/quiet.py): kept in every statistic, but said. Tables from before the column existed
    count as not recorded."""
    out = {"recorded": 0, "interfered": 0, "not_recorded": 0}
    for table in tables:
        measured = measured_trials(table)
        if "interfered" not in measured.columns:
            out["not_recorded"] += int(len(measured))
            continue
        flag = pd.to_numeric(measured["interfered"], errors="coerce")
        out["recorded"] += int(flag.notna().sum())
        out["interfered"] += int((flag == 1).sum())
        out["not_recorded"] += int(flag.isna().sum())
    return out


def against(trials: pd.DataFrame, baseline: str, metric: str, margin: float = MARGIN) -> cmp.Comparison:
    """compare() over the workloads the baseline has usable runs of."""
    data, _ = usable(trials, metric)
    has_base = set(data.loc[data["allocator"] == baseline, "workload"])
    data = data[data["workload"].isin(has_base)]
    if data.empty:
        raise HeapcostError(f"no usable runs of the baseline {baseline!r} for {metric}; allocators with runs: "
                            f"{', '.join(sorted(trials['allocator'].unique()))}")
    return memo.remembered("compare", (data, baseline, metric, margin),
                           lambda: cmp.compare(data, baseline, metric, margin=margin))


# ---------------------------------------------------------------------------------------------- trade-off
SCORE_COLUMNS = ["allocator", "score", "score_low", "score_high", "coverage", "sampling_low", "sampling_high",
                 "above_baseline", "primitive_points", "primitive_share"]
WEIGHT_DRAWS = 2000



def security_scores(rows: list[dict], weights: dict | None, baseline: str, *, draws: int = 1000) -> pd.DataFrame:
    """Per allocator: the score (posterior mean) with its 95% interval under drawn weights and the probes'
    sampling together (score_low, score_high: what the verdicts read), the interval from the sampling alone
    (sampling_low, sampling_high), the share of the joint draws in which it scores above the baseline, and how
    much of the score the primitive cells carry."""
    sampling = security.score_intervals(rows, weights, draws=draws).rename(
        columns={"score_low": "sampling_low", "score_high": "sampling_high"})
    weighted = weight_draws.weighted_intervals(rows, weights, baseline, draws=WEIGHT_DRAWS).rename(
        columns={"weights_low": "score_low", "weights_high": "score_high"})
    return sampling.merge(weighted, on="allocator", how="left").reindex(columns=SCORE_COLUMNS)


def pareto_front(points: pd.DataFrame) -> list[str]:
    """Allocators no other beats on both axes (lower overhead and higher score, one strictly)."""
    front = []
    for _, p in points.iterrows():
        dominated = ((points["overhead"] <= p["overhead"]) & (points["score"] >= p["score"])
                     & ((points["overhead"] < p["overhead"]) | (points["score"] > p["score"]))).any()
        if not dominated:
            front.append(p["allocator"])
    return sorted(front, key=lambda a: float(points.set_index("allocator").loc[a, "overhead"]))


def tradeoff(geomean: pd.DataFrame, scores: pd.DataFrame, baseline: str = BASELINE,
             roles: dict | None = None) -> pd.DataFrame:
    """Overhead (geometric-mean ratio to the baseline, interval) against security score (bounds), for
    the allocators that have both; the baseline sits at overhead 1 with a zero-width interval. `role`: each
    allocator's (security.roles.catalogue_roles); only deployable configurations are on the front or dominate
    another: a knock-out build, its control and a debugging allocator are no choice a user deploys."""
    if roles is None:
        from analysis.publish.security.roles import catalogue_roles

        roles = catalogue_roles()
    g = geomean.rename(columns={"geomean_ratio": "overhead", "ci_low": "overhead_low",
                                "ci_high": "overhead_high"})
    g = g[[c for c in ("allocator", "overhead", "overhead_low", "overhead_high", "workloads", "run_id") if c in g]]
    base_row = pd.DataFrame([{"allocator": baseline, "overhead": 1.0, "overhead_low": 1.0, "overhead_high": 1.0,
                              "workloads": int(g["workloads"].max()) if len(g) else 0}])
    g = pd.concat([base_row, g], ignore_index=True)
    t = g.merge(scores, on="allocator", how="inner")
    t = t[t["score"].notna()].sort_values("allocator").reset_index(drop=True)
    t["role"] = [roles.get(a, "deployable") for a in t["allocator"]]
    deployable = t[t["role"] == "deployable"]
    front = set(pareto_front(deployable)) if len(deployable) else set()
    t["pareto"] = t["allocator"].isin(front)
    t["dominated_by"] = [dominator(deployable, r) if r["role"] == "deployable" else "" for _, r in t.iterrows()]
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
    is the baseline's row. Safer or less safe only when the score is above (below) the baseline's in at least
    weight_draws.SURE of the draws of the weights and the probes' sampling together (above_baseline)."""
    if row["allocator"] == baseline:
        return "baseline"
    lo, hi = row["overhead_low"], row["overhead_high"]
    security_side = weight_draws.safety_verdict(float(row.get("above_baseline", float("nan"))))
    safer, less_safe = security_side == "safer", security_side == "less safe"
    if row.get("dominated_by"):
        return f"dominated by {row['dominated_by']}"
    if lo > HEAVY:
        cost = f"over {HEAVY:g} times the baseline's time"
    elif hi < 1 - margin:
        cost = "faster than the baseline"
    elif lo >= 1 - margin and hi <= 1 + margin:
        cost = "no measurable cost" if lo <= 1 <= hi else "within the margin"
    elif hi < 1:
        cost = "not slower"
    elif lo > 1 + margin:
        cost = "costs more than the margin"
    else:
        cost = "cost unresolved"
    if safer and cost in ("faster than the baseline", "no measurable cost", "within the margin", "not slower"):
        return f"a better default: safer, {cost}"
    if safer:
        return f"buys security: {cost}"
    if less_safe:
        return f"less safe than the baseline; {cost}"
    return f"{weight_draws.INDISTINCT}; {cost}"


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


def between_runs(lead_geomean: pd.DataFrame, others: dict[str, pd.DataFrame], cells: dict | None = None) -> pd.DataFrame:
    """Each other run that measured an allocator, analysed the same way inside that run: does its
    geometric-mean interval overlap the leading run's? With `cells` ({run_id: that run's comparison rows}),
    only runs that measured the allocator on the same workloads at the same scales and by the same protocol
    (lockstep pairs time the turns without start-up, trials the whole process) as the leading run count: a
    geometric mean over other workloads, scales or protocols is another quantity."""
    def design(run_id, allocator):
        rows = cells[run_id]
        rows = rows[rows["allocator"] == allocator]
        paired_rows = rows["method"].astype(str).str.contains("paired") if "method" in rows.columns else False
        return frozenset(zip(rows["workload"], pd.to_numeric(rows["scale"], errors="coerce").round(6).fillna(-1),
                             pd.Series(paired_rows, index=rows.index)))

    lead = lead_geomean.set_index("allocator")
    rows = []
    for run_id, geo in sorted(others.items()):
        for _, g in geo.iterrows():
            if g["allocator"] not in lead.index or lead.loc[g["allocator"], "run_id"] == run_id:
                continue
            p = lead.loc[g["allocator"]]
            if cells is not None and design(run_id, g["allocator"]) != design(p["run_id"], g["allocator"]):
                continue
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


def workload_table(run: "Run | None", others=()) -> pd.DataFrame:
    """Every workload the runs measured: the leading run's first (its description wins), then each other
    run's workloads it lacks, so the table names every workload a result of the paper comes from."""
    rows, seen = [], set()
    for r in ([run] if run else []) + [o for o in others if o is not None]:
        for wid, w in (r.info.get("workloads") or {}).items():
            if wid in seen:
                continue
            seen.add(wid)
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


@dataclass
class Results:
    time_run: Run | None  # the run the method section describes (pick_run); others may contribute
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
    runs: pd.DataFrame  # every contributing run: label, kind, profile, the allocators it leads
    figures: pd.DataFrame  # the seeds' transcribed figures (data/literature/figures.csv)
    cells: dict  # metric -> each run's comparisons with its baseline (user_s, sys_s: cpu_split; server_metrics)
    aa: pd.DataFrame  # A/A cells: the baseline against a brought copy of its own library
    cost: pd.DataFrame  # per-unit cost ratios and start-up costs, from runs with cells at several scales
    roles: pd.DataFrame  # lockstep role effects (time in role b over role a) of runs whose roles alternate
    brought: pd.DataFrame  # brought libraries: file, sha256, upstream revision, configuration (provenance.py)
    knock_outs: pd.DataFrame  # a defence set option by option (knock_outs.parts): one row per part and workload
    knock_out_summary: pd.DataFrame  # and per workload: the whole, the parts' sum, their interaction
    like_run: str | None = None  # the like-with-like run (paper_runs.like_with_like_run): the speed table's and
    # the trade-off's rows, one machine, one scale, one run; None when the dataset has no such run

    @property
    def dataset(self) -> dataset.Dataset | None:
        """The dataset these results were computed from (analysis.contract.dataset: read once per process), or
        None when it had no run of any kind."""
        run = self.time_run or self.callgrind_run or self.probe_run
        return None if run is None else run.dataset


def run_comparison(rt, baseline: str, metric: str) -> cmp.Comparison:
    """One run's comparisons with its own baseline: from its trials (compare) and, for a lockstep run,
    from its process pairs (the paired estimator), the workloads of both in one table."""
    parts = []
    if baseline in set(rt.table["allocator"].astype(str)):
        parts.append(against(rt.table, baseline, metric))
    if rt.pairs is not None and len(rt.pairs):
        parts.append(memo.remembered("paired", (rt.pairs, baseline, metric),
                                     lambda: paired.as_comparison(rt.pairs, baseline, metric)))
    if not parts:
        raise HeapcostError(f"no trials or pairs of the baseline {baseline!r}")
    if len(parts) == 1:
        return parts[0]
    results = pd.concat([p.results for p in parts], ignore_index=True)
    # compare's rows carry their interval, the paired rows their Difference: the geometric mean pools both
    own = results.get("_diff", pd.Series([None] * len(results)))
    with_diff = results.assign(_diff=[d if isinstance(d, estimators.Difference) else estimators.Difference.of_row(r)
                                      for d, (_, r) in zip(own, results.iterrows())])
    return cmp.Comparison(results=results, trials=pd.concat([p.trials for p in parts], ignore_index=True),
                          geomean=cmp.geometric_means(with_diff))


def _speed(time_runs, main, baseline: str):
    """Speed and memory comparisons made inside each run, merged by the leading run of each allocator."""
    lead = paper_runs.leads("time", time_runs, main)
    per_run = {}
    for rt in time_runs:
        try:
            per_run[rt.run_id] = {m: run_comparison(rt, baseline, m) for m in ("wall_s", "maxrss_kb")}
        except HeapcostError as exc:
            warn(f"run {rt.run_id} is left out: {exc}")
    if not per_run:
        return None, None, lead, {}
    merged = []
    for metric in ("wall_s", "maxrss_kb"):
        merged.append(cmp.Comparison(
            results=paper_runs.merge_rows({r: c[metric].results for r, c in per_run.items()}, lead, baseline),
            trials=paper_runs.merge_rows({r: c[metric].trials for r, c in per_run.items()}, lead, baseline),
            geomean=paper_runs.merge_rows({r: c[metric].geomean for r, c in per_run.items()}, lead, baseline)))
    return merged[0], merged[1], lead, per_run


def compute(data_dir: Path, baseline: str = BASELINE, weights: dict | None = None) -> Results:
    """Every result of the paper from a dataset directory (runs/ inside): every complete run contributes (merge).
    Remembered by the folder's bytes, the folder as given and where it is (the runs it returns are named by that
    path, relative or not), the arguments and the code (memo)."""
    folder = Path(data_dir).resolve()
    if not (folder / "runs").is_dir():
        raise HeapcostError(f"{Path(data_dir) / 'runs'} does not exist; give a dataset directory holding runs/ "
                            "(e.g. data)")
    return memo.remembered("results", (str(data_dir), str(folder), folder, baseline, weights),
                           lambda: _compute(Path(data_dir), baseline, weights))


def _compute(data_dir: Path, baseline: str, weights: dict | None) -> Results:
    ds = dataset.load(Path(data_dir) / "runs")
    time_run, time_runs = paper_runs.contributing_runs(ds, "time")
    cg_run, cg_runs = paper_runs.contributing_runs(ds, "callgrind")
    probe_run, probe_runs = paper_runs.contributing_runs(ds, "probe")
    speed, memory, time_lead, per_run = _speed(time_runs, time_run, baseline)
    left_out = pd.concat([usable(rt.table, "wall_s")[1].assign(run_id=rt.run_id) for rt in time_runs]
                         or [pd.DataFrame(columns=LEFT_OUT_COLUMNS)], ignore_index=True)
    abl, abl_mem = ({rt.run_id: ablation.run_ablations(usable(rt.table, m)[0], per_run.get(rt.run_id), m) for rt in time_runs}
                    for m in ("wall_s", "maxrss_kb"))
    knock = _knock_outs(time_runs, baseline)
    abl = paper_runs.merge_pair_rows(abl, time_lead)
    abl_mem = paper_runs.merge_pair_rows(abl_mem, time_lead)
    cg_lead = paper_runs.leads("callgrind", cg_runs, cg_run)
    if cg_run is not None and any(rt.run_id == cg_run.run_id and baseline in set(rt.table["allocator"]) for rt in cg_runs):
        # every callgrind run counts the baseline as its own reference: its rows come from the main run, not from
        # a small run that counted it on more (its own) workloads
        cg_lead[baseline] = cg_run.run_id
    pf = paper_runs.merge_rows({rt.run_id: per_free(rt.table, baseline) for rt in cg_runs}, cg_lead, baseline)
    pf_g = per_free_geomean(pf[pf["allocator"] != baseline]) if len(pf) else pd.DataFrame()
    cg_missing = (pd.concat([missing_callgrind(rt.table) for rt in cg_runs], ignore_index=True)
                  .drop_duplicates("allocator", keep="last") if cg_runs else pd.DataFrame())
    if len(cg_missing):
        cg_missing = cg_missing[~cg_missing["allocator"].isin(set(pf.get("allocator", [])))].reset_index(drop=True)
    probe_lead = paper_runs.leads("probe", probe_runs, probe_run)
    scores = pd.DataFrame(columns=SCORE_COLUMNS)
    if probe_runs:
        scores = security_scores(primitives.scored_rows(ds, paper_runs.merge_probe_rows(probe_runs, probe_lead)), weights,
                                 baseline)
    like = paper_runs.like_with_like_run(time_runs)
    trade = pd.DataFrame()
    if speed is not None and len(scores):
        # one machine, one scale, one run: the like-with-like run's allocators only, when the dataset has one
        geo = speed.geomean if like is None else speed.geomean[speed.geomean["run_id"] == like.run_id]
        trade = verdicts(tradeoff(geo, scores, baseline), baseline)
    figures_csv = Path(data_dir) / "literature" / "figures.csv"
    figures = (read_table(figures_csv) if figures_csv.is_file() else
               pd.DataFrame(columns=[f["name"] for f in LITERATURE_SCHEMAS["figures.csv"]["fields"]]))
    seed_only = seed_only_figures(figures)
    replication = pd.DataFrame(columns=REPLICATION_COLUMNS)
    if speed is not None:
        replication = between_runs(speed.geomean, {r: c["wall_s"].geomean for r, c in per_run.items()},
                                   {r: c["wall_s"].results for r, c in per_run.items()})
    all_runs = [rt.run for rt in time_runs + cg_runs + probe_runs]
    return Results(time_run, cg_run, probe_run, speed, memory, left_out, abl, abl_mem, pf, pf_g, cg_missing,
                   scores, trade, allocator_table(all_runs),
                   workload_table(time_run or cg_run, [rt.run for rt in reversed(time_runs)]), seed_only,
                   replication, run_table(time_runs, cg_runs, probe_runs, time_lead, cg_lead, probe_lead), figures,
                   cells := {**{m: pd.concat([c[m].results.assign(run_id=r) for r, c in per_run.items()],
                                             ignore_index=True) if per_run else pd.DataFrame()
                                for m in ("wall_s", "maxrss_kb")}, **cpu_split.cells(time_runs, baseline, against),
                            **server_metrics.cells(time_runs, baseline, against)},
                   aa_cells(cells["wall_s"], {rt.run_id: rt.run for rt in time_runs}),
                   pd.concat([scaling.per_unit_ratios(scaling.cost_model(rt.table), baseline).assign(run_id=rt.run_id)
                              for rt in time_runs] or [pd.DataFrame(columns=scaling.RATIO_COLUMNS)], ignore_index=True),
                   role_table(time_runs, baseline), provenance.brought_libraries(all_runs), *knock,
                   like_run=None if like is None else like.run_id)


def _knock_outs(time_runs, baseline: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """knock_outs.parts of every run that measured a control beside all its knock-outs and its all-off variant."""
    from analysis.harness.allocators.catalog import load_catalog
    from analysis.publish.results import knock_outs

    catalog = load_catalog()
    labels = {base: defence for defence, alloc, base in ablation.ABLATIONS if alloc in knock_outs.TOGETHER}
    found = []
    for rt in time_runs:
        controls = set(knock_outs.TOGETHER) & set(rt.run.info.get("allocators") or {})
        if not controls:
            continue
        pairs = _pairs(rt.run)  # read again: rt.pairs leaves out the cost check's programs
        cells = (paired.as_comparison(declared_orientation(rt.run.info, pairs), baseline).results
                 if pairs is not None else None)
        found.append(knock_outs.parts(rt.run_id, usable(rt.table, "wall_s")[0], cells, catalog, labels))
    found = [f for f in found if len(f[0])]
    if not found:
        return pd.DataFrame(columns=knock_outs.COLUMNS), pd.DataFrame(columns=knock_outs.SUMMARY_COLUMNS)
    return (pd.concat([f[0] for f in found], ignore_index=True), pd.concat([f[1] for f in found], ignore_index=True))


def _pairs(run: Run) -> pd.DataFrame | None:
    """A run's pairs.csv as written (all of it), or None, from the dataset the run is in."""
    return run.dataset.table(run, "pairs.csv")


def role_table(time_runs, baseline: str) -> pd.DataFrame:
    """Per run with alternating lockstep roles and per workload: how much longer role b took than role a."""
    alternating = [rt for rt in time_runs if rt.pairs is not None
                   and (rt.run.info.get("lockstep_roles") or {}).get("roles") == "alternating"]
    return pd.concat([paired.role_effects(_pairs(rt.run), baseline).assign(run_id=rt.run_id)
                      for rt in alternating] or [pd.DataFrame(columns=[*paired.ROLE_COLUMNS, "run_id"])],
                     ignore_index=True)


AA_COLUMNS = ["run_id", "workload", "allocator", "ratio", "ci_low", "ci_high", "n", "method", "design", "excludes_1"]


def aa_cells(cells: pd.DataFrame, runs: dict) -> pd.DataFrame:
    """Every A/A comparison in the dataset: a 95% interval should exclude 1 in about 5% of them."""
    if cells is None or cells.empty:
        return pd.DataFrame(columns=AA_COLUMNS)
    copies = {(rid, a) for rid, run in runs.items() for a in paper_runs.aa_copies(run)}
    rows = cells[[(r, a) in copies for r, a in zip(cells["run_id"], cells["allocator"])]].copy()
    rows["excludes_1"] = (rows["ci_low"] > 1) | (rows["ci_high"] < 1)
    rows["design"] = [aa_design(runs[r], m) for r, m in zip(rows["run_id"], rows["method"])]
    return rows.reindex(columns=AA_COLUMNS).reset_index(drop=True)


# Published runs measured before commit bfb3990 put the malloc resolution check first in LD_PRELOAD: in them
# a preloaded copy of libc sat in front of the check while the baseline's libc sat behind it, a layout
# difference of its own (tests/integration/test_paper_published.py checks this list against the runs' commits).
CHECK_LOADED_AFTER_LIBRARY = frozenset({"20261130T023620Z-time-full", "20261130T030827Z-time-full",
                                        "20261130T134138Z-time-quick", "20261130T134457Z-time-quick",
                                        "20261130T135001Z-time-quick"})
# Published runs with a share of their rows flagged interfered that a later run of the same cells, on the same
# machine and measured alone, replaces: they stay in the dataset as recorded and enter no table. The seventh set's
# first run in 100 ms turns (its bison trials measured while the analysis ran beside them; docs/design.md, "The
# check in longer turns, measured"); the first 1 MiB and 4 MiB small grow cells (pairs of a few milliseconds that a
# little kernel work on their CPU flagged; docs/design.md, "Grows within a block's pages"). A test checks that each
# has such a later run, with a smaller flagged share.
REPLACED_BY_A_RUN_ALONE = frozenset({"20261207T165805Z-time-quick", "20261207T213342Z-time-quick",
                                     "20261207T214658Z-time-quick"})


def aa_design(run: Run, method: str) -> str:
    """How a cell was measured: single trials, or lockstep pairs whose roles were fixed (the baseline always
    process a, before run.json recorded lockstep_roles) or alternating between blocks."""
    if "paired" not in str(method):
        return "trials"
    if run.run_id in CHECK_LOADED_AFTER_LIBRARY:
        return "lockstep, fixed roles, check loaded after the library"
    return f"lockstep, {(run.info.get('lockstep_roles') or {}).get('roles', 'fixed')} roles"


def run_table(time_runs, cg_runs, probe_runs, *leads_by_kind) -> pd.DataFrame:
    labels = paper_runs.run_labels(rt.run_id for rt in time_runs + cg_runs + probe_runs)
    rows = []
    for kind, runs, lead in zip(("time", "callgrind", "probe"), (time_runs, cg_runs, probe_runs), leads_by_kind):
        for rt in runs:
            led = sorted(a for a, r in lead.items() if r == rt.run_id)
            rows.append({"label": labels[rt.run_id], "run_id": rt.run_id, "kind": kind, "profile": rt.run.profile,
                         "status": rt.run.info.get("status", ""), "leads": len(led), "allocators": " ".join(led)})
    return pd.DataFrame(rows, columns=["label", "run_id", "kind", "profile", "status", "leads", "allocators"])
