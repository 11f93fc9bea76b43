"""The trade-off's front under other weights: each allocator's score interval when the weights
are drawn around the published ones (analysis.stats.security.weighted_score_draws) and how often it is on the
Pareto front, drawn separately for deployable configurations and for debugging allocators, each panel on the
one workload set every allocator of it ran."""
import functools

import numpy as np
import pandas as pd

from analysis.stats import estimators
from analysis.stats.security import DEFAULT_WEIGHTS, WEIGHT_CV, scores, weight_concentration, weighted_score_draws

PANELS = ("deployable", "debugging")
ALWAYS, SOMETIMES = 0.95, 0.05  # on the front in this share of draws or more: always; from SOMETIMES: weights decide
COLUMNS = ["panel", "allocator", "workloads", "overhead", "overhead_low", "overhead_high", "score", "score_low",
           "score_high", "front_share"]


def catalogue_debugging() -> set[str]:
    """The catalogue's debugging allocators: those it runs at a reduced scale (scale < 1 in allocators.toml:
    efence, duma, dmalloc, tcmalloc-debug), too slow to be anyone's default."""
    from analysis.harness.allocators.catalog import load_catalog

    return {a.id for a in load_catalog().values() if a.scale < 1}


def _difference(row) -> estimators.Difference:
    own = row.get("_diff")
    return own if isinstance(own, estimators.Difference) else estimators.Difference.of_row(row)


def common_overheads(results: pd.DataFrame, allocators, baseline: str) -> tuple[pd.DataFrame, list[str]]:
    """(per allocator the geometric-mean time ratio to the baseline with its interval and log-scale standard
    error, over the workloads every one of `allocators` ran, each at its largest scale; those workloads). The
    baseline is ratio 1 exactly."""
    others = [a for a in allocators if a != baseline]
    rows = results[results["allocator"].isin(others)]
    if "scale" in rows:
        rows = rows[rows["scale"] == rows.groupby(["allocator", "workload"])["scale"].transform("max")]
    sets = [set(rows.loc[rows["allocator"] == a, "workload"]) for a in others]
    common = sorted(functools.reduce(set.intersection, sets)) if sets else []
    out = [{"allocator": baseline, "overhead": 1.0, "overhead_low": 1.0, "overhead_high": 1.0, "log_se": 0.0}]
    for alloc in others:
        sub = rows[(rows["allocator"] == alloc) & rows["workload"].isin(common)]
        if sub.empty:
            continue
        pooled = estimators.pooled_mean_difference([_difference(r) for _, r in sub.iterrows()])
        lo, hi = pooled.interval()
        out.append({"allocator": alloc, "overhead": float(np.exp(pooled.estimate)), "overhead_low": float(np.exp(lo)),
                    "overhead_high": float(np.exp(hi)), "log_se": pooled.se})
    return pd.DataFrame(out), common


def front_members(overhead: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Which points no other beats on both axes (lower overhead and higher score, one strictly)."""
    beats = ((overhead[None, :] <= overhead[:, None]) & (score[None, :] >= score[:, None])
             & ((overhead[None, :] < overhead[:, None]) | (score[None, :] > score[:, None])))
    return ~beats.any(axis=1)


def weight_front(rows, results: pd.DataFrame, allocators, baseline: str, *, debugging=None,
                 weights: dict | None = None, draws: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Per panel and allocator (those of `allocators` with a score and a time ratio): the overhead over the
    panel's common workloads, the score at the published weights, its 95% interval under drawn weights and
    the probes' sampling together, and the share of draws (weights, the probes' sampling and the overheads'
    own sampling drawn at once) in which it is on the panel's Pareto front."""
    weights = DEFAULT_WEIGHTS if weights is None else weights
    debugging = catalogue_debugging() if debugging is None else set(debugging)
    rows = list(rows)
    drawn = weighted_score_draws(rows, weights, draws=draws, seed=seed)
    published = scores(rows, weights)
    rng = np.random.default_rng(seed + 2)
    out = []
    for panel in PANELS:
        members = [a for a in allocators if a in drawn and not np.isnan(drawn[a]).all()
                   and (a in debugging) == (panel == "debugging")]
        if panel == "debugging" and members and baseline not in members:
            members.append(baseline)  # the debugging panel is read against the baseline too
        over, common = common_overheads(results, members, baseline)
        over = over.set_index("allocator")
        members = [a for a in members if a in over.index]
        if len(members) < 2:
            continue
        log_draws = np.stack([rng.normal(np.log(over.loc[a, "overhead"]), over.loc[a, "log_se"], draws)
                              for a in members])
        score_draws = np.stack([drawn[a] for a in members])
        on_front = np.mean([front_members(log_draws[:, k], score_draws[:, k]) for k in range(draws)], axis=0)
        for i, a in enumerate(members):
            low, high = np.quantile(drawn[a], [0.025, 0.975])
            out.append({"panel": panel, "allocator": a, "workloads": " ".join(common),
                        **over.loc[a, ["overhead", "overhead_low", "overhead_high"]].to_dict(),
                        "score": float(published[a]["score"]), "score_low": float(low), "score_high": float(high),
                        "front_share": float(on_front[i])})
    return pd.DataFrame(out, columns=COLUMNS)


def weight_numbers(front: pd.DataFrame, weights: dict | None = None) -> dict:
    """What the paper states about the weights' interval: the Dirichlet, the panels' workloads and fronts."""
    weights = DEFAULT_WEIGHTS if weights is None else weights
    n = sum(1 for w in weights.values() if w > 0)
    numbers = {"cv": WEIGHT_CV, "concentration": round(weight_concentration(n), 1), "probes": n, "panels": {},
               "always_percent": round(100 * ALWAYS), "sometimes_percent": round(100 * SOMETIMES)}
    for panel, sub in front.groupby("panel", sort=False):
        top = sub.sort_values(["front_share", "allocator"], ascending=[False, True])
        numbers["panels"][panel] = {
            "workloads": str(sub["workloads"].iloc[0]), "allocators": int(len(sub)),
            "always": [str(a) for a in top[top["front_share"] >= ALWAYS]["allocator"]],
            "sometimes": [str(a) for a in top[(top["front_share"] >= SOMETIMES) & (top["front_share"] < ALWAYS)]
                          ["allocator"]],
            "widest": float((sub["score_high"] - sub["score_low"]).max())}
    return numbers


def write_weight_front(res, path, baseline: str, *, draws: int = 2000) -> dict:
    """The weights' table for the paper (the trade-off's allocators, both panels) at `path`, and its numbers;
    {} when the results have no trade-off or no probe run."""
    from analysis.publish.products import write_csv
    from analysis.publish.results import fmt_interval, fmt_score
    from analysis.publish.security_writer import reported_probe_rows

    if not len(res.trade) or res.probe_run is None or res.speed is None:
        return {}
    rows = reported_probe_rows(res.probe_run.path.parent)
    front = weight_front(rows, res.speed.results, list(res.trade["allocator"]), baseline, draws=draws)
    if front.empty:
        return {}
    front = (front.assign(order=front["panel"].map(PANELS.index)).sort_values(["order", "overhead", "allocator"])
             .drop(columns="order").reset_index(drop=True))
    front["overhead_display"] = [fmt_interval(r["overhead"], r["overhead_low"], r["overhead_high"])
                                 for _, r in front.iterrows()]
    front["score_display"] = [f"{fmt_score(r['score'])} [{fmt_score(r['score_low'])}, {fmt_score(r['score_high'])}]"
                              for _, r in front.iterrows()]
    front["front_display"] = [f"{100 * s:.0f}%" for s in front["front_share"]]
    write_csv(front, path)
    return weight_numbers(front)
