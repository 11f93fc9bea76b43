"""The trade-off's fronts under other weights: each allocator's score interval when the weights are drawn around
the published ones (analysis.stats.weight_draws.weighted_score_draws) and how often it is on the Pareto front. Only
configurations a user can deploy (their project ships them) enter the deployable front; builds with one defence
knocked out and the controls built for them are ablations (analysis.publish.security.defences), and the debugging
allocators have a panel of their own. Each front is drawn on one host (a processor kind, as the debates define
it) and on the one workload set every allocator of it ran there. In the deployable front a probe that every
deployable configuration missed, or every one caught, tells none of them apart and carries no weight."""
import functools

import numpy as np
import pandas as pd

from analysis.contract import dataset
from analysis.publish.security.roles import catalogue_roles, catalogue_settings
from analysis.stats import estimators
from analysis.stats import security as S
from analysis.stats.security import scores
from analysis.stats.weight_draws import WEIGHT_CV, weight_concentration, weight_groups, weighted_score_draws

PANELS = ("deployable", "debugging")
ROLES = ("deployable", "debugging", "knock-out", "control", "rebuild")
ALWAYS, SOMETIMES = 0.95, 0.05  # on the front in this share of draws or more: always; from SOMETIMES: weights decide
COLUMNS = ["panel", "host", "allocator", "workloads", "overhead", "overhead_low", "overhead_high", "score",
           "score_low", "score_high", "front_share"]


def run_hosts(runs_dir, run_ids) -> dict[str, str]:
    """{run: its host}: the processor kind of the machine that measured it (analysis/contract/host.py).
    `runs_dir`: the runs folder or its Dataset."""
    from analysis.contract.host import processor_groups

    ds = dataset.load(runs_dir)
    return processor_groups({run: ds.machine(run) for run in sorted(set(run_ids))})


def _trial_outcomes(row: dict) -> set[str]:
    counts = S.outcome_counts(row)
    named = {k for k, v in counts.items() if v and k in S.LEVELS}
    return named or {row.get("outcome")}


def separates_nothing(rows, members) -> dict[str, str]:
    """{probe: "missed" or "caught"} for the misuse probes whose every usable trial, under every one of `members`
    that ran them, was missed (or every one caught): such a probe tells none of them apart."""
    seen: dict[str, set] = {}
    for r in rows:
        if (r["allocator"] not in members or r.get("kind") == S.PRIMITIVE_KIND
                or r.get("probe") in S.ENTROPY_TARGETS or S.probe_loss(r) is None):
            continue
        seen.setdefault(r["probe"], set()).update(_trial_outcomes(r))
    return {p: next(iter(o)) for p, o in sorted(seen.items()) if o in ({"missed"}, {"caught"})}


def never_missed(rows, members) -> list[str]:
    """The misuse probes no trial of which was missed under any of `members` (caught under some, mitigated under
    others: they still separate, since a caught bug and a mitigated one score apart)."""
    seen: dict[str, set] = {}
    for r in rows:
        if (r["allocator"] in members and r.get("kind") != S.PRIMITIVE_KIND
                and r.get("probe") not in S.ENTROPY_TARGETS and S.probe_loss(r) is not None):
            seen.setdefault(r["probe"], set()).update(_trial_outcomes(r))
    return sorted(p for p, o in seen.items() if o and not o & {"missed", "late-crash"} and len(o) > 1)


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


def weight_front(rows, results: pd.DataFrame, allocators, baseline: str, *, roles: dict | None = None,
                 weights: dict | None = None, host_of: dict | None = None, draws: int = 2000,
                 seed: int = 0) -> tuple[pd.DataFrame, dict]:
    """(per panel, host and allocator: the overhead over the front's common workloads, the score at the
    published weights, its 95% interval under drawn weights and the probes' sampling together, and the share of
    draws (weights, the probes' sampling and the overheads' own sampling drawn at once) in which it is on the
    front; {front: the probes that separate nothing there, with their one outcome}). Knock-outs and controls
    enter no front. `host_of`: {run: host} (one front per host; without it, one front); in the deployable panel
    the probes that separate nothing carry weight 0."""
    weights = S.weights_file().weights() if weights is None else weights
    roles = catalogue_roles() if roles is None else roles
    rows = list(rows)
    results = results.assign(host=results["run_id"].map(host_of or {}).fillna("") if "run_id" in results else "")
    rng = np.random.default_rng(seed + 2)
    out, silent = [], {}
    for panel in PANELS:
        panel_members = [a for a in allocators if roles.get(a, "deployable") == panel or a == baseline]
        if panel == "debugging" and len(panel_members) < 2:
            continue
        for host, sub in results[results["allocator"].isin(panel_members)].groupby("host", sort=True):
            members = [a for a in panel_members if a == baseline or a in set(sub["allocator"])]
            mine = [r for r in rows if r["allocator"] in members]
            panel_weights = dict(weights)
            if panel == "deployable":
                nothing = separates_nothing(mine, members)
                silent[f"{panel} ({host})" if host else panel] = nothing
                silent[f"never missed: {panel} ({host})" if host else f"never missed: {panel}"] = {
                    p: "stopped" for p in never_missed(mine, members)}
                panel_weights.update({p: 0.0 for p in nothing})
            drawn = weighted_score_draws(mine, panel_weights, draws=draws, seed=seed)
            members = [a for a in members if a in drawn and not np.isnan(drawn[a]).all()]
            published = scores(mine, panel_weights)
            over, common = common_overheads(sub, members, baseline)
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
                out.append({"panel": panel, "host": host, "allocator": a, "workloads": " ".join(common),
                            **over.loc[a, ["overhead", "overhead_low", "overhead_high"]].to_dict(),
                            "score": float(published[a]["score"]), "score_low": float(low),
                            "score_high": float(high), "front_share": float(on_front[i])})
    return pd.DataFrame(out, columns=COLUMNS), silent


def weight_numbers(front: pd.DataFrame, silent: dict, weights: dict | None = None) -> dict:
    """What the paper states about the weights' interval: the Dirichlet, the fronts' hosts, workloads and members,
    and the probes that separate nothing among the deployable configurations."""
    weights = S.weights_file().weights() if weights is None else weights
    groups = weight_groups(weights)
    numbers = {"cv": WEIGHT_CV, "concentration": round(weight_concentration(len(groups)), 1),
               "capabilities": len(groups), "panels": {}, "fronts": [],
               "always_percent": round(100 * ALWAYS), "sometimes_percent": round(100 * SOMETIMES)}
    for (panel, host), sub in front.groupby(["panel", "host"], sort=False):
        top = sub.sort_values(["front_share", "allocator"], ascending=[False, True])
        key = f"{panel} ({host})" if host else panel
        nothing = silent.get(key, {})
        entry = {
            "panel": panel, "host": str(host), "workloads": str(sub["workloads"].iloc[0]), "allocators": int(len(sub)),
            "always": [str(a) for a in top[top["front_share"] >= ALWAYS]["allocator"]],
            "sometimes": [str(a) for a in top[(top["front_share"] >= SOMETIMES) & (top["front_share"] < ALWAYS)]
                          ["allocator"]],
            "widest": float((sub["score_high"] - sub["score_low"]).max()),
            "missed_by_all": [p for p, o in nothing.items() if o == "missed"],
            "caught_by_all": [p for p, o in nothing.items() if o == "caught"],
            "never_missed": sorted(silent.get(f"never missed: {key}", {}))}
        numbers["fronts"].append(entry)
        numbers["panels"].setdefault(panel, entry)  # the first host's (the paper names the host)
    numbers["hosts"] = sorted({f["host"] for f in numbers["fronts"]})
    return numbers


def write_weight_front(res, path, baseline: str, *, draws: int = 2000) -> dict:
    """The fronts' table for the paper (the trade-off's deployable and debugging allocators) at `path`, and its
    numbers; {} when the results have no trade-off or no probe run."""
    from analysis.publish.render.products import write_csv
    from analysis.publish.security.primitives import scored_rows
    from analysis.publish.render.formats import fmt_interval, fmt_score
    from analysis.publish.security.writer import reported_probe_rows

    if not len(res.trade) or res.probe_run is None or res.speed is None:
        return {}
    ds = res.dataset
    rows = scored_rows(ds, reported_probe_rows(ds))
    speed = res.speed.results
    hosts = run_hosts(ds, speed["run_id"].dropna()) if "run_id" in speed else {}
    front, silent = weight_front(rows, speed, list(res.trade["allocator"]), baseline, host_of=hosts, draws=draws)
    if front.empty:
        return {}
    front = (front.assign(order=front["panel"].map(PANELS.index))
             .sort_values(["order", "host", "overhead", "allocator"]).drop(columns="order").reset_index(drop=True))
    front["overhead_display"] = [fmt_interval(r["overhead"], r["overhead_low"], r["overhead_high"])
                                 for _, r in front.iterrows()]
    front["score_display"] = [f"{fmt_score(r['score'])} [{fmt_score(r['score_low'])}, {fmt_score(r['score_high'])}]"
                              for _, r in front.iterrows()]
    front["front_display"] = [f"{100 * s:.0f}%" for s in front["front_share"]]
    settings = {r["allocator"]: r for r in catalogue_settings()}
    front["settings"] = [settings.get(a, {}).get("settings", "") for a in front["allocator"]]
    front["settings_why"] = [settings.get(a, {}).get("why", "") for a in front["allocator"]]
    write_csv(front, path)
    numbers = weight_numbers(front, silent)
    roles = catalogue_roles()
    numbers["left_out"] = {role: sorted(a for a in res.trade["allocator"] if roles.get(a) == role)
                           for role in ("knock-out", "control", "rebuild")}
    return numbers
