"""The five debates, answered by their pre-registered questions (debates.toml, analysis.contract.debates_spec):
for each seed, its claim (from data/literature/figures.csv, never typed), what heapcost measured for the
contested configuration pair on the workloads that re-create the seed's benchmark, and the verdict the
pre-registered rule gives.

- Every run that measured both sides gives a log ratio; they are pooled with run, build and host as random
  effects (debates.pool, stats.random_effects), runs of a superseded design left out of the pool;
- the verdict is the equivalence test (TOST, stats.equivalence) of the pooled ratio against the margin: "no
  larger than m", "larger than m", or "not decided at this precision";
- a claimed ratio is compared together with its own interval from the literature re-analysis, never as a point;
- a configuration this machine cannot run is *not measured here*, with why; a stand-in measured in its place is
  named with its numbers but gets no verdict.
Beside each ratio, the quantities that carry to another program: the added nanoseconds per malloc+free pair,
callgrind's exact added instructions and data writes per free (reported beside the seed's, without a verdict),
and the allocator's share of the workload's instructions with the ratio k of its own instructions: a program whose
allocator takes a share s pays about 1 + s (k - 1), and claim_share is the s at which k gives the seed's figure.
"""
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.contract import debates_spec
from analysis.publish.debates import pool
from analysis.publish.results.comparisons import BASELINE, Results
from analysis.publish.render.formats import fmt_interval, fmt_ratio, fmt_share
from analysis.stats import equivalence, literature

COLUMNS = ["seed", "topic", "question", "claim", "claim_line", "claimed", "cell", "configuration", "workload", "run_id",
           "ratio", "ci_low", "ci_high", "display", "halfwidth_percent", "memory_display", "user_display",
           "sys_display", "per_free_ratio", "added_per_free", "writes_per_free_ratio", "added_writes_per_free",
           "claimed_per_free", "seed_instructions", "alloc_share_without", "alloc_share_with",
           "alloc_instructions_ratio", "claim_share", "margin", "margin_reason", "rule", "n_runs", "n_estimates", "n_builds", "n_hosts", "superseded_runs",
           "pooled_ratio", "pooled_low", "pooled_high", "pooled_display", "tau_run", "tau_host", "tau_build",
           "hosts_display", "added_ns_display", "claim_comparison", "verdict", "not_measured", "registered",
           "amendments"]


@dataclass(frozen=True)
class Debate:
    """What the paper says of a debate beside its pre-registered question (debates.toml: contested pairs,
    workloads, margin, rule)."""
    seed: str
    topic: str
    stand_ins: tuple  # measured in its place when no contested pair is in the dataset
    claim_metric: str  # the metric of the claim row in figures.csv; "" for a bound ("not slower")
    per_free_metric: str = ""  # the seed's own per-free figure, when it has one
    not_measured: str = ""  # why the contested configuration itself cannot be measured here


DEBATES = [
    Debate("000", "perl on OpenBSD: the system malloc instead of perl's own",
           (("perl-sysmalloc", "perl-mymalloc"),), "",
           not_measured="OpenBSD's malloc is in no package registry here: bring it as a library "
                        "(EXTRA_ALLOCATORS=perl-omalloc=...); measured in its place: perl on the system malloc "
                        "(glibc) against perl's own malloc, one perl source built both ways"),
    Debate("001", "hardened_malloc in Fedora: the kernel build",
           (("scudo", BASELINE), ("mimalloc-secure", BASELINE)), "wall_ratio",
           not_measured="hardened_malloc is in no package registry here: bring it as a library "
                        "(EXTRA_ALLOCATORS=hardened-72fb357=...); measured in its place: the first of scudo and "
                        "mimalloc-secure present"),
    Debate("002", "poisoning freed memory in mozjemalloc",
           (("jemalloc-junk-free", "jemalloc"),), "claim_slowdown", "claim_instructions_per_free_increase",
           not_measured="mozjemalloc (Firefox's fork) is not built here (`make allocators` builds it from "
                        "Debian's firefox-esr source): jemalloc's own poison on free (junk:free) is measured in "
                        "its place"),
    Debate("003", "saving random bits in OpenBSD's malloc", (), "",
           not_measured="the patch changes OpenBSD's malloc, which is in no package registry here: bring "
                        "revision 1.128 and the same with the seed's diff reversed (EXTRA_ALLOCATORS="
                        "omalloc-1.128=...,omalloc-1.128-getrbyte=...); nothing stands in for it"),
    Debate("004", "glibc's tcache double-free check", (("glibc", "glibc-notcache"),), "",
           not_measured="the key check cannot be switched off by a tunable; until a build of glibc without it "
                        "is measured (glibc-no-tcache-key), the whole tcache (glibc against glibc-notcache) "
                        "stands in, which is not the question"),
]


def _ratio_row(table: pd.DataFrame, with_: str, without: str, workload: str) -> dict | None:
    """The ratio with/without on a workload from a table of ratios (ablations: allocator over base; or
    comparisons with the baseline), inverted when the table holds without/with."""
    if table is None or table.empty:
        return None
    base_col = "base" if "base" in table else None
    for a, b, invert in ((with_, without, False), (without, with_, True)):
        if base_col:
            hit = table[(table["allocator"] == a) & (table["base"] == b) & (table["workload"] == workload)]
        elif b == BASELINE:
            hit = table[(table["allocator"] == a) & (table["workload"] == workload)]
        else:
            continue
        if len(hit):
            r = hit.iloc[0]
            ratio, lo, hi = float(r["ratio"]), float(r["ci_low"]), float(r["ci_high"])
            if invert:
                ratio, lo, hi = 1 / ratio, 1 / hi, 1 / lo
            return {"ratio": ratio, "ci_low": lo, "ci_high": hi, "run_id": r.get("run_id", "")}
    return None


def _within_run(cells: pd.DataFrame, with_: str, without: str, workload: str,
                grouped: pool.RunCells | None = None) -> list[dict]:
    """with/without from each run's comparisons with its own baseline (stats/within_run.py), with the
    number of measurements behind it (the smaller side's trials or pairs). `grouped`: the RunCells of
    `cells` when the caller asks it again."""
    import math

    if cells is None or cells.empty:
        return []
    grouped = pool.RunCells(cells) if grouped is None else grouped.of(cells)
    out = []
    for run_id, rows in grouped.groups(workload).items():
        d = grouped.within(workload, run_id).ratio(with_, without)
        if d is not None:
            lo, hi = d.interval()
            used = rows[rows["allocator"].isin([with_, without])]["n"]
            out.append({"ratio": math.exp(d.estimate), "ci_low": math.exp(lo), "ci_high": math.exp(hi),
                        "run_id": run_id, "n": int(used.min()) if len(used) else 0,
                        "direct": base_of(rows) in (with_, without)})
    return out


def _pair_ratio(res: Results, with_: str, without: str, workload: str, memory: bool = False,
                metric: str = "", grouped: dict | None = None) -> dict | None:
    """The measurement of with/without on a workload with the most trials or pairs behind it (then the one
    from the run that leads for the allocator, then a direct comparison over a ratio of two, then the narrower
    interval): an ablation row of one family
    or any run's comparisons with its own baseline. Never the narrowest interval alone: a run that stopped
    early can have an interval narrower than its data support."""
    abl = None if metric else (res.ablation_memory if memory else res.ablation)
    found = []
    row = _ratio_row(abl, with_, without, workload)
    if row:
        pair = ((abl["allocator"] == with_) & (abl["base"] == without)) | ((abl["allocator"] == without) & (abl["base"] == with_))
        hit = abl[pair & (abl["workload"] == workload)]
        found.append({**row, "n": int(pd.to_numeric(hit["n"], errors="coerce").fillna(0).max()) if len(hit) else 0,
                      "direct": True})
    name = metric or ("maxrss_kb" if memory else "wall_s")
    found += _within_run(res.cells.get(name), with_, without, workload, (grouped or {}).get(name))
    if not found:
        return None
    geo = res.speed.geomean.set_index("allocator") if res.speed is not None else pd.DataFrame()
    lead = geo["run_id"].get(with_) if "run_id" in geo else None
    # a run of a superseded design is shown only when no current run measured the pair
    return max(found, key=lambda r: (r["run_id"] not in pool.SUPERSEDED, r["n"], r["run_id"] == lead,
                                     r["direct"], -(r["ci_high"] / r["ci_low"])))


def base_of(rows: pd.DataFrame) -> str:
    return str(rows["baseline"].iloc[0]) if len(rows) else ""


def _per_free(res: Results, with_: str, without: str, workload: str) -> dict:
    """Exact callgrind quantities per free of with/without at their largest common scale: the ratio of
    instructions, the instructions added (they carry to a program with another allocation rate) and the ratio
    of data writes (what poisoning adds); {} when callgrind counted only one side."""
    if res.per_free is None or res.per_free.empty:
        return {}
    pf = res.per_free[res.per_free["workload"] == workload]
    a, b = (pf[pf["allocator"] == x].set_index("scale") for x in (with_, without))
    common = sorted(set(a.index) & set(b.index))
    if not common:
        return {}
    a, b = a.loc[common[-1]], b.loc[common[-1]]
    writes = (float(a["data_writes"]) / float(a["free_calls"])) / (float(b["data_writes"]) / float(b["free_calls"])) \
        if "data_writes" in a and float(b["data_writes"]) > 0 else None
    added_writes = float(a["data_writes"]) / float(a["free_calls"]) - float(b["data_writes"]) / float(b["free_calls"]) \
        if "data_writes" in a else None
    share = {}
    if "alloc_instructions" in a and pd.notna(a["alloc_instructions"]) and pd.notna(b["alloc_instructions"]) \
            and float(b["alloc_instructions"]) > 0:
        share = {"share_with": float(a["alloc_share"]), "share_without": float(b["alloc_share"]),
                 "alloc_ratio": float(a["alloc_instructions"]) / float(b["alloc_instructions"])}
    return {"ratio": float(a["instructions_per_free"] / b["instructions_per_free"]),
            "added": float(a["instructions_per_free"] - b["instructions_per_free"]), "writes": writes,
            "added_writes": added_writes, **share}


def claim_share(claimed: float | None, alloc_ratio: float | None) -> str:
    """The allocator's share of a program's instructions at which the allocator's own instructions, grown by
    alloc_ratio (with/without, exact), make the program's ratio the claimed one: 1 + s (k - 1) = claimed.
    It carries the claim to its program's allocation rate; "" when the claim is no number or k is not above 1."""
    if not claimed or alloc_ratio is None or not np.isfinite(alloc_ratio) or alloc_ratio <= 1:
        return ""
    return fmt_share((claimed - 1) / (alloc_ratio - 1))


def _claim(figures: pd.DataFrame, seed: str, metric: str) -> tuple[str, str, float | None]:
    """(the claim's words, its line, the claimed ratio when it is a number) from the transcribed figures."""
    rows = figures[figures["seed"].astype(str).str.zfill(3) == seed]
    words = rows[rows["kind"] == "claim"]
    text = words.iloc[0]["text"] if len(words) else ""
    line = str(words.iloc[0]["line"]) if len(words) else ""
    if not metric:
        return text, line, None
    hit = rows[rows["metric"] == metric]
    if hit.empty:
        return text, line, None
    r = hit.iloc[0]
    value = float(r["value"])
    ratio = 1 + value / 100 if str(r["unit"]).strip() == "%" else value
    return text or str(r["text"]), str(r["line"]), ratio


def _measured(res: Results, with_: str, without: str, workload: str, grouped: dict | None = None) -> dict | None:
    """One row's measurements of with/without on a workload (None when no run has both): the measurement with
    most pairs behind it, its memory and CPU split, and callgrind's exact counts per free. `grouped`:
    {metric: pool.RunCells} of res.cells."""
    speed = _pair_ratio(res, with_, without, workload, grouped=grouped)
    if speed is None:
        return None
    mem = _pair_ratio(res, with_, without, workload, memory=True, grouped=grouped)
    cpu = {m: _pair_ratio(res, with_, without, workload, metric=m, grouped=grouped) for m in ("user_s", "sys_s")}
    pf = _per_free(res, with_, without, workload)
    return dict(configuration=f"{with_} / {without}", workload=workload, run_id=speed["run_id"],
                ratio=speed["ratio"], ci_low=speed["ci_low"], ci_high=speed["ci_high"],
                display=fmt_interval(speed["ratio"], speed["ci_low"], speed["ci_high"]),
                halfwidth_percent=f"{(speed['ci_high'] / speed['ci_low']) ** 0.5 * 100 - 100:.1f}",
                memory_display=_shown(mem),
                user_display=_shown(cpu["user_s"]), sys_display=_shown(cpu["sys_s"]),
                per_free_ratio=fmt_ratio(pf["ratio"]) if pf else "n/a",
                added_per_free=f"{pf['added']:+.0f}" if pf else "n/a",
                writes_per_free_ratio=fmt_ratio(pf["writes"]) if pf.get("writes") else "n/a",
                added_writes_per_free=f"{pf['added_writes']:+.1f}" if pf.get("added_writes") is not None else "n/a",
                alloc_share_without=fmt_share(pf.get("share_without")), alloc_share_with=fmt_share(pf.get("share_with")),
                alloc_instructions_ratio=fmt_ratio(pf.get("alloc_ratio")), _alloc_ratio=pf.get("alloc_ratio"))


def _shown(r: dict | None) -> str:
    return fmt_interval(r["ratio"], r["ci_low"], r["ci_high"]) if r else "n/a"


def _claim_interval(seed: str) -> tuple[float, float, float, float] | None:
    """The claim's own time ratio with its 95% interval and degrees of freedom from the literature re-analysis
    (the first as-published time comparison of the seed that has replicates); None when it has none. The
    degrees of freedom are the smaller arm's runs minus one: Welch's are never fewer."""
    table = literature.reanalyse()
    rows = table[(table["seed"].astype(str).str.zfill(3) == seed) & (table["scenario"] == "as published")
                 & table["metric"].isin(TIME_METRICS) & pd.to_numeric(table["ci_low"], errors="coerce").notna()]
    if rows.empty:
        return None
    r = rows.iloc[0]
    return float(r["ratio"]), float(r["ci_low"]), float(r["ci_high"]), max(min(int(r["n"]), int(r["n_baseline"])) - 1, 1)


TIME_METRICS = ("wall", "elapsed", "1/score")
COUNT_METRICS = ("instructions_per_free", "instructions")


def _seed_instructions(seed: str) -> str:
    """The seed's own ratio of instructions (per free, or in its loop) from the literature re-analysis, with
    its interval where it had replicates: what callgrind's exact ratio per free is set beside."""
    table = literature.reanalyse()
    rows = table[(table["seed"].astype(str).str.zfill(3) == seed) & (table["scenario"] == "as published")
                 & table["metric"].isin(COUNT_METRICS)]
    if rows.empty:
        return ""
    r = rows.iloc[0]
    lo, hi = pd.to_numeric(pd.Series([r["ci_low"], r["ci_high"]]), errors="coerce")
    return fmt_ratio(float(r["ratio"])) + (" (exact)" if pd.isna(lo) else f" [{fmt_ratio(lo)}, {fmt_ratio(hi)}]")


def _decided(res: Results, q, ds, with_: str, without: str, workload: str, claim,
             floors: dict, grouped: dict | None = None, runs: pd.DataFrame | None = None,
             spread=None, layout_tau2=None) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """The pre-registered answer of one contested pair on one workload: every run's ratio, each host's pooled
    ratio (never narrower than the host's A/A floor) with the rule's decision there, the verdict across hosts
    (intersection-union), a single ratio over hosts only where there is one host or enough hosts to estimate
    their spread, the added time per malloc+free pair and the comparison with the claim's own interval."""
    if runs is None:
        runs = _pair_runs(res, q, ds, with_, without, workload, grouped)
    out = {"margin": f"{q.margin * 100:g}%", "margin_reason": q.margin_reason, "rule": q.rule,
           "superseded_runs": int(runs["superseded"].sum()) if len(runs) else 0}
    current = runs[~runs["superseded"].astype(bool)] if len(runs) else runs
    if current.empty:
        return {**out, "verdict": "no verdict: no run of the current design measured both", "n_runs": 0, "n_estimates": 0,
                "n_builds": 0, "n_hosts": 0, "pooled_display": "n/a", "hosts_display": "n/a",
                "added_ns_display": "n/a", "claim_comparison": ""}, runs, pd.DataFrame(columns=pool.HOST_COLUMNS)
    hosts = pool.per_host(runs, q.margin, q.rule, {h: pool.floor_of(floors, h) for h in set(current["processor"])},
                          spread, layout_tau2)
    pooled = pool.pooled(runs, q.margin, q.rule)
    out.update({k: pooled[k] for k in ("n_runs", "n_estimates", "n_builds", "n_hosts")})
    out["hosts_display"] = "; ".join(
        f"{h.processor}: {fmt_interval(h.ratio, h.ci_low, h.ci_high)} ({_count(h.n_runs, 'run')}, "
        f"{_count(h.n_builds, 'build')}{'' if h.n_builds > 1 else ': layout variance not estimable'})"
        for h in hosts.itertuples())
    out["verdict"] = pool.across_hosts(hosts, q.margin)[1]
    pools, why_not_pooled = pool.pools_across_hosts(hosts["processor"])
    if len(hosts) == 1:  # one host: its own answer, floor included, is the single one
        h = hosts.iloc[0]
        single = {"pooled_ratio": h["ratio"], "pooled_low": h["ci_low"], "pooled_high": h["ci_high"],
                  "pooled_estimate": h["estimate"], "pooled_se": h["se"], "pooled_df": h["df"]}
    elif pools:
        single = pooled
    else:
        single = {}
    out.update({k: pooled[k] for k in ("tau_run", "tau_host", "tau_build")})
    if not single:
        out["pooled_display"] = why_not_pooled
        out.update(_per_host_transfer(res, runs, hosts, with_, without, workload, claim, q.margin))
        return out, runs, hosts
    moved = pool.transfer(res, runs, single, with_, without, workload)
    out.update({k: single[k] for k in ("pooled_ratio", "pooled_low", "pooled_high")})
    out["pooled_display"] = fmt_interval(single["pooled_ratio"], single["pooled_low"], single["pooled_high"])
    out["added_ns_display"] = (f"{moved['added_ns_per_pair']:+.1f} [{moved['added_ns_low']:+.1f}, "
                               f"{moved['added_ns_high']:+.1f}]") if moved else "n/a"
    out["claim_comparison"] = "" if claim is None else equivalence.against_claim(
        single["pooled_estimate"], single["pooled_se"], single["pooled_df"], claim[0], claim[1], claim[2],
        claim[3], q.margin)
    return out, runs, hosts


def _pair_runs(res: Results, q, ds, with_: str, without: str, workload: str,
               grouped: dict | None = None) -> pd.DataFrame:
    return pool.pair_estimates(res.cells.get("wall_s"), ds, q.seed, with_, without, workload,
                               (grouped or {}).get("wall_s")) \
        if ds is not None else pd.DataFrame(columns=pool.RUN_COLUMNS)


def debate_runs(res: Results, spec: dict, grouped: dict | None = None) -> dict:
    """{(seed, with, without, workload): every run's estimate of that debate cell} over every contested pair
    and workload measured: read once, for the machine level's joint spread and for each cell's answer."""
    ds = res.dataset
    out = {}
    for d in DEBATES:
        q = spec[d.seed]
        for workload in q.workloads:
            for with_, without in q.contested:
                if _measured(res, with_, without, workload, grouped):
                    out[(d.seed, with_, without, workload)] = _pair_runs(res, q, ds, with_, without,
                                                                         workload, grouped)
    return out


def spreads(cell_runs: dict) -> tuple:
    """(the between-machine Spread, the layout variance a kind with one build borrows or None), estimated
    jointly over every debate cell's runs (stats.prediction)."""
    from analysis.stats import prediction

    frames = [r for r in cell_runs.values() if len(r)]
    runs = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=pool.RUN_COLUMNS)
    spread = prediction.machine_spread(pool.machine_cells(pool.machine_estimates(runs)))
    tau, n = prediction.borrowed_spread(pool.layout_cells(runs))
    return spread, (tau * tau if n and math.isfinite(tau) else None)


def _per_host_transfer(res: Results, runs: pd.DataFrame, hosts: pd.DataFrame, with_: str, without: str,
                       workload: str, claim, margin: float) -> dict:
    """Where hosts are too few to pool, the added time per malloc+free pair and the comparison with the claim
    host by host, each from that host's own answer and runs ("host: ..." joined by "; ")."""
    added, compared = [], []
    for h in hosts.itertuples():
        row = {"pooled_ratio": h.ratio, "pooled_low": h.ci_low, "pooled_high": h.ci_high}
        moved = pool.transfer(res, runs[runs["processor"] == h.processor], row, with_, without, workload)
        if moved:
            added.append(f"{h.processor}: {moved['added_ns_per_pair']:+.1f} [{moved['added_ns_low']:+.1f}, "
                         f"{moved['added_ns_high']:+.1f}]")
        if claim is not None:
            compared.append(f"{h.processor}: " + equivalence.against_claim(
                h.estimate, h.se, h.df, claim[0], claim[1], claim[2], claim[3], margin))
    return {"added_ns_display": "; ".join(added) or "n/a", "claim_comparison": "; ".join(compared)}


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def answers(res: Results, figures: pd.DataFrame, spec: dict | None = None, grouped: dict | None = None,
            aa_hosts: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(a row per debate, workload and contested pair present, the pre-registered verdict in it; every run
    behind those rows, superseded ones marked; a row per debate cell and host). Stand-ins only where no contested pair was measured at all:
    their numbers are shown, never a verdict. `grouped`: pool.grouped_cells(res.cells) when the caller has it;
    `aa_hosts`: pool.aa_by_host of res's wall_s cells against BASELINE when the caller has it."""
    spec = debates_spec.load() if spec is None else spec
    grouped = pool.grouped_cells(res.cells) if grouped is None else grouped
    ds = res.dataset
    if ds is None:
        floors = {}
    else:
        floors = pool.aa_floors(pool.aa_by_host(res.cells.get("wall_s"), ds, BASELINE, grouped.get("wall_s"))
                                if aa_hosts is None else aa_hosts)
    cell_runs = debate_runs(res, spec, grouped) if ds is not None else {}
    spread, layout_tau2 = spreads(cell_runs)
    rows, run_rows, host_rows = [], [], []
    for d in DEBATES:
        q = spec[d.seed]
        text, line, claimed = _claim(figures, d.seed, d.claim_metric)
        _, _, claimed_pf = _claim(figures, d.seed, d.per_free_metric) if d.per_free_metric else ("", "", None)
        claim = _claim_interval(d.seed) if claimed else None
        head = {"seed": d.seed, "topic": d.topic, "question": q.question, "claim": text, "claim_line": line,
                "claimed": fmt_ratio(claimed) if claimed else "not slower",
                "claimed_per_free": fmt_ratio(claimed_pf) if claimed_pf else "", "not_measured": "",
                "seed_instructions": _seed_instructions(d.seed),
                "margin": f"{q.margin * 100:g}%", "margin_reason": q.margin_reason, "rule": q.rule,
                "registered": q.registered, "amendments": " ".join(q.amendments)}
        found = []
        for workload in q.workloads:
            for with_, without in q.contested:
                m = _measured(res, with_, without, workload, grouped)
                if m:
                    decided, runs, hosts = _decided(res, q, ds, with_, without, workload, claim, floors,
                                                    grouped, cell_runs.get((d.seed, with_, without, workload)),
                                                    spread, layout_tau2)
                    found.append({**m, **decided, "claim_share": claim_share(claimed, m.get("_alloc_ratio")),
                                  "cell": "primary" if q.is_primary(with_, without, workload) else "secondary"})
                    run_rows.append(runs)
                    host_rows.append(hosts)
                    if not q.every_pair:
                        break
        if not found:
            for workload in q.workloads:
                for with_, without in d.stand_ins:
                    m = _measured(res, with_, without, workload, grouped)
                    if m:
                        found.append({**m, "not_measured": d.not_measured,
                                      "verdict": f"no verdict: {m['configuration']} stands in for the debated system"})
                        break
        rows += [{**head, **m} for m in found] or [
            {**head, "workload": q.workloads[0], "configuration": "", "display": "n/a", "memory_display": "n/a",
             "user_display": "n/a", "sys_display": "n/a", "per_free_ratio": "n/a", "added_per_free": "n/a",
             "writes_per_free_ratio": "n/a", "added_writes_per_free": "n/a", "pooled_display": "n/a",
             "added_ns_display": "n/a", "verdict": "not measured here", "not_measured": d.not_measured}]
    out = pd.DataFrame(rows, columns=COLUMNS).replace({np.nan: ""})
    runs = pd.concat(run_rows, ignore_index=True) if run_rows else pd.DataFrame(columns=pool.RUN_COLUMNS)
    host_rows = [h for h in host_rows if len(h)]
    hosts = pd.concat(host_rows, ignore_index=True)[pool.HOST_COLUMNS] if host_rows else \
        pd.DataFrame(columns=pool.HOST_COLUMNS)
    return out, runs, hosts


def answer(res: Results, figures: pd.DataFrame, spec: dict | None = None) -> pd.DataFrame:
    return answers(res, figures, spec)[0]
