"""The results' figures (SVG) and numbers (CSV, JSON) for the paper, from analysis.publish.results.comparisons."""
import json
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.contract.runstore import Run
from analysis.contract.schema import OK, TRIAL_COLUMNS, measured_trials
from analysis.publish.results import (attribution, cost_check, cost_models, cost_profiles, field, hosts, knock_outs, per_call,
                                      per_call_products, server_metrics)
from analysis.publish.render import figures, front_page
from analysis.publish.security import front
from analysis.publish.debates.writer import write_debates
from analysis.publish.render.products import json_text, write_csv
from analysis.publish.results.ablations import ABLATIONS
from analysis.publish.results.cost_reprofile import newer_profiles
from analysis.publish.results.instruction_counts import main_scale
from analysis.publish.results.comparisons import BASELINE, CHECK_LOADED_AFTER_LIBRARY, HEAVY, MARGIN, Results, interference_counts
from analysis.publish.render.formats import (WIDEST_RESOLVED, fmt_interval, fmt_percent, fmt_ratio, fmt_resolved_interval,
                                      fmt_score, fmt_share, fmt_startup_ms, shared_notes)
from analysis.stats import compare as cmp
from analysis.stats import estimators as stats
from analysis.stats import weight_draws
from analysis.stats.cost_model import GROWN_CLASS


def _records(df: pd.DataFrame) -> list[dict]:
    return json.loads(df.to_json(orient="records")) if df is not None and len(df) else []


def _display_rows(df: pd.DataFrame, ratio="ratio", lo="ci_low", hi="ci_high", labels: dict | None = None) -> pd.DataFrame:
    out = df.copy()
    if labels is not None and "run_id" in out:
        out["run"] = out["run_id"].map(labels).fillna("")
    out["display"] = [fmt_interval(r[ratio], r[lo], r[hi]) for _, r in out.iterrows()]
    out["percent"] = [fmt_percent(r[ratio]) for _, r in out.iterrows()]
    return out


def clock_facts(run: Run | None, trials: pd.DataFrame | None, speed: cmp.Comparison | None) -> dict:
    """What the threats-to-validity section states about this machine's clock and noise."""
    if run is None:
        return {}
    machine = run.dataset.machine(run)
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


def cpu_facts(info: dict, trials: pd.DataFrame) -> dict:
    """Which workloads' trials ran spread over several CPUs and which on one (run.json trial_cpus; a run from
    before it pinned every trial to one CPU, or to none)."""
    cpus = info.get("trial_cpus")
    if cpus is None:
        pinned = any((p.get("trial_cpu") is not None) for p in info.get("pinning", []))
        return {"spread_workloads": [], "single_core_workloads": sorted(set(trials["workload"])) if pinned else []}
    spread = sorted(w for w, c in cpus.items() if isinstance(c, list) and len(c) > 1)
    return {"spread_workloads": spread,
            "single_core_workloads": sorted(w for w, c in cpus.items() if c is not None and w not in spread)}


def _server(res: Results, p) -> dict:
    """The server workloads' throughput and latency ratios to the baseline, with intervals (server_metrics)."""
    rows = server_metrics.table(res.cells)
    for metric in server_metrics.METRICS:
        if f"{metric}_ratio" in rows:
            rows[f"{metric}_display"] = [fmt_interval(r, lo, hi) for r, lo, hi in
                                         zip(rows[f"{metric}_ratio"], rows[f"{metric}_ci_low"], rows[f"{metric}_ci_high"])]
    rows["run"] = rows["run_id"].map(attribution.labels(res)).fillna("") if len(rows) else ""
    write_csv(rows, p("server.csv"))
    return {"server": {"rows": int(len(rows)), "workloads": sorted(set(rows["workload"])) if len(rows) else []}}


def lockstep_facts(pairs: pd.DataFrame, info: dict) -> dict:
    """What the method section says of a lockstep run: its pairs, the workloads that took turns, and how
    precise a cell came out (median half-width; per-pair spread of the log ratio)."""
    from analysis.stats import paired

    measured = measured_trials(pairs)
    ok = measured[measured["status"] == OK]
    cells = paired.compare_pairs(pairs) if len(ok) else pd.DataFrame(columns=["halfwidth"])
    spread = [float(np.std(paired.log_ratios(sub.reset_index(drop=True)), ddof=1))
              for _, sub in ok.groupby(["workload", "scale", "allocator_b"]) if len(sub) > 2]
    cells_of = info.get("protocol_cells") or {}
    return {"pairs": int(len(pairs)), "measured": int(len(measured)), "ok": int(len(ok)),
            "cells": int(len(cells)), "workloads": sorted(cells_of.get("lockstep", sorted(set(pairs["workload"])))),
            "trial_workloads": sorted(cells_of.get("trials", [])),
            "median_halfwidth_percent": f"{100 * np.expm1(np.median(cells['halfwidth'])):.2f}" if len(cells) else "",
            "median_pair_sd_percent": f"{100 * np.median(spread):.1f}" if spread else "",
            "chunk_us": int(pd.to_numeric(pairs["chunk_us"], errors="coerce").median()) if len(pairs) else 0}


def write_outputs(res: Results, out_dir: Path, baseline: str = BASELINE, prefix: str = "results_") -> dict:
    """The results figures (SVG) and numbers (CSV, JSON) for the paper; returns the numbers."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    p = lambda name: out_dir / f"{prefix}{name}"  # noqa: E731
    numbers: dict = {"baseline": baseline, "confidence_percent": f"{stats.CONFIDENCE * 100:.0f}",
                     "margin_percent": f"{MARGIN * 100:.0f}", "heavy": f"{HEAVY:g}",
                     "trim_percent": f"{stats.TRIM * 100:.0f}", "min_runs": cmp.MIN_RUNS}
    trials = None
    ds = res.dataset
    if res.time_run is not None:
        info = res.time_run.info
        # a run whose every cell took turns (built-in lockstep workloads, brought programs alternated) has no trials
        trials = ds.table(res.time_run, "trials.csv")
        trials = pd.DataFrame(columns=TRIAL_COLUMNS) if trials is None else trials
        measured = measured_trials(trials)
        numbers["time_run"] = {
            "run_id": res.time_run.run_id, "profile": (info.get("params") or {}).get("profile", ""),
            "blocks": int(measured["block"].nunique()), "trials": int(len(trials)),
            "measured": int(len(measured)), "ok": int((measured["status"] == OK).sum()),
            "allocators": int(trials["allocator"].nunique()), "workloads": int(trials["workload"].nunique()),
            "trial_workloads": int(trials["workload"].nunique()),
            "started": info.get("started_utc", ""), "ended": info.get("ended_utc", ""),
            "status": info.get("status", ""),
            "protocol": (info.get("params") or {}).get("protocol") or "trials",
            "elapsed_minutes": f"{float(info.get('elapsed_s') or 0) / 60:.0f}",
            **cpu_facts(info, trials),
        }
        pairs = ds.table(res.time_run, "pairs.csv")
        if pairs is not None:
            lock = numbers["time_run"]["lockstep"] = lockstep_facts(pairs, info)
            numbers["time_run"]["workloads"] = len(set(lock["workloads"]) | set(trials["workload"]))
    numbers["clock"] = clock_facts(res.time_run, trials, res.speed)
    if trials is not None:
        pairs = ds.table(res.time_run, "pairs.csv")
        tables = [trials] + ([pairs] if pairs is not None else [])
        numbers["interference"] = interference_counts(*tables)

    numbers.update(_speed_and_memory(res, p, baseline))
    numbers.update(_server(res, p))
    if res.time_run is not None:  # the dataset the runs came from: data_dir/runs/<run>
        numbers["field"] = field.write_outputs(res.time_run.path.parents[1], p("field.csv"))
    write_csv(res.left_out.assign(run=res.left_out["run_id"].map(attribution.labels(res)).fillna("")
                                  if "run_id" in res.left_out else ""), p("left_out.csv"))
    numbers["left_out"] = int(len(res.left_out))

    numbers.update(_ablations(res, p))
    numbers.update(_knock_outs(res, p))
    numbers.update(_callgrind(res, p, baseline))
    numbers.update(_tradeoff(res, p, baseline))
    numbers.update(hosts.host_outputs(res, p))
    write_csv(res.replication.assign(overlap_display=res.replication["overlap"].map({True: "yes", False: "no"}),
                                     superseded=res.replication["run_id"].isin(CHECK_LOADED_AFTER_LIBRARY)),
              p("between_runs.csv"))
    numbers["replication"] = {"runs": sorted(set(res.replication["run_id"])), "rows": int(len(res.replication)),
                              "overlapping": int(res.replication["overlap"].sum())}
    numbers.update(write_debates(res, p, attribution.labels(res), baseline))
    costs = per_call.table(ds, baseline) if ds is not None else pd.DataFrame(columns=per_call.COLUMNS)
    numbers.update(per_call_products.per_call_costs(costs, p))
    numbers.update(per_call_products.startup_split(ds, p, baseline))
    numbers.update(per_call_products.held_split(ds, costs, p, baseline))
    numbers.update(per_call_products.share_rate(costs, p, ds, baseline))
    done = cost_check.checked(ds, costs) if ds is not None else None
    numbers.update(_cost_check(ds, costs, p, done))
    numbers.update(_debates_per_call(ds, costs, p, baseline, done.premiums if done is not None else {}))
    numbers.update(_debate_security(res, p))
    numbers.update(front_page.write_front(p, baseline, attribution.get_reduced(numbers)))
    write_csv(res.runs, p("runs.csv"))
    write_csv(res.aa, p("aa.csv"))
    cost = res.cost.assign(run=res.cost["run_id"].map(attribution.labels(res)).fillna(""),
                           display=[fmt_resolved_interval(r["per_unit_ratio"], r["ci_low"], r["ci_high"])
                                    for _, r in res.cost.iterrows()],
                           startup_display=[fmt_startup_ms(r["startup_ms"], r["startup_low_ms"], r["startup_high_ms"])
                                            for _, r in res.cost.iterrows()],
                           baseline_startup_display=[f"{x:.1f}" for x in res.cost["baseline_startup_ms"]])
    write_csv(cost, p("cost.csv"))
    below_zero = cost[cost["startup_high_ms"] < 0]
    numbers["cost"] = {"rows": int(len(cost)), "allocators": sorted(set(cost["allocator"])),
                       "startup_below_zero": int(len(below_zero)),
                       "not_estimable": int(cost["display"].str.startswith("not estimable").sum()) if len(cost) else 0,
                       "widest_resolved": f"{WIDEST_RESOLVED:g}",
                       "startup_below_zero_cells": [f"{r['allocator']} on {r['workload']} ({r['run']})"
                                                    for _, r in below_zero.iterrows()]}
    numbers["aa"] = {"cells": int(len(res.aa)), "excluding_1": int(res.aa["excludes_1"].sum()),
                     "runs": sorted(set(res.aa["run_id"])),
                     "percent_excluding_1": f"{100 * res.aa['excludes_1'].mean():.1f}" if len(res.aa) else "",
                     "expected_percent": f"{100 - 100 * stats.CONFIDENCE:.0f}",
                     "systematic_percent": f"{100 * stats.SYSTEMATIC_P:g}",
                     "by_design": [{"design": d, "cells": int(len(g)), "excluding_1": int(g["excludes_1"].sum()),
                                    "runs": int(g["run_id"].nunique()),
                                    "percent_excluding_1": f"{100 * g['excludes_1'].mean():.1f}"}
                                   for d, g in res.aa.groupby("design", sort=True)],
                     "by_run": [{"run": attribution.labels(res).get(rid, rid), "cells": int(len(g)), "excluding_1": int(g["excludes_1"].sum()),
                                 "median_n": f"{g['n'].median():g}",
                                 "one_sided_workloads": sorted(w for w, s in g.groupby("workload")
                                                               if stats.one_sided(s["ratio"])),
                                 "one_sided_medians": [f"{s['ratio'].median():.3f}" for w, s in
                                                       sorted(g.groupby("workload")) if stats.one_sided(s["ratio"])]}
                                for rid, g in res.aa.groupby("run_id")]}
    roles = res.roles.assign(run=res.roles["run_id"].map(attribution.labels(res)).fillna(""),
                             display=[fmt_interval(r["ratio"], r["ci_low"], r["ci_high"]) for _, r in res.roles.iterrows()],
                             excludes_1=(res.roles["ci_low"] > 1) | (res.roles["ci_high"] < 1))
    write_csv(roles, p("roles.csv"))
    numbers["roles"] = {"rows": int(len(roles)), "runs": sorted(set(roles["run"])),
                        "excluding_1": [{"run": r["run"], "workload": r["workload"], "scale": f"{r['scale']:g}",
                                         "display": r["display"], "pairs": int(r["pairs"])}
                                        for _, r in roles[roles["excludes_1"]].iterrows()]}
    numbers["runs"] = {r["label"]: {"run_id": r["run_id"], "kind": r["kind"], "leads": int(r["leads"])}
                       for _, r in res.runs.iterrows()}
    write_csv(res.allocators, p("allocators.csv"))
    shown, notes = shared_notes(res.brought["configuration"].fillna("").astype(str))
    write_csv(res.brought.assign(
        sha256_short=res.brought["library_sha256"].str[:16], configuration_display=shown,
        revision_short=res.brought["revision"].str.replace(r"^([0-9a-f]{12})[0-9a-f]{28}$", r"\1", regex=True)),
        p("brought.csv"))
    write_csv(pd.DataFrame(notes, columns=["note", "text"]), p("brought_notes.csv"))
    numbers["brought"] = {"libraries": int(len(res.brought)), "allocators": sorted(set(res.brought["allocator"]))}
    write_csv(res.workloads, p("workloads.csv"))
    so = res.seed_only.copy()
    so["ratio_display"] = so["ratio"].map(lambda x: f"{x:.3f}")
    write_csv(so, p("seed_only.csv"))
    numbers["allocators"] = int(len(res.allocators))
    numbers["aa_copies"] = int(len(set(res.aa["allocator"]) & set(res.allocators["allocator"])))
    numbers["configurations"] = numbers["allocators"] - numbers["aa_copies"]
    numbers["workloads"] = int(len(res.workloads))
    if res.time_run is not None:
        prof = res.time_run.info.get("profile") or {}
        numbers["time_run"].update(seed=str(res.time_run.info.get("seed", "")),
                                   probe_iters=str(res.time_run.info.get("probe_iters", "")),
                                   scale=str(prof.get("scale", "")), warmups=str(prof.get("warmups", "")))
    if res.probe_run is not None:
        no_score = sorted(set(res.scores.loc[res.scores["score"].isna(), "allocator"]))
        numbers["probe_run"] = {"run_id": res.probe_run.run_id, "no_score": no_score}
    (out_dir / f"{prefix}numbers.json").write_text(json_text(numbers, indent=2, sort_keys=True) + "\n")
    return numbers


def _forests(table: pd.DataFrame, geomean: pd.DataFrame, p, name: str, what: str, aa=frozenset()) -> None:
    """Two forest plots: the allocators within 0.5-2x in percent, the others (debugging allocators) in
    multiples, each with 95% confidence intervals; A/A copies of the baseline are left to their own table, and
    the seeds' own cases (perl's benchmark case by case, pow2-ladder, build) to the debates' tables."""
    from analysis.harness.workloads.builtin import WORKLOADS

    # every workload but the seeds' own cases: the default ones, redis, and those users brought (EXTRA_WORKLOADS)
    seed_cases = [w.id for w in WORKLOADS.values() if w.seed and not w.default]
    shown = table[~table["allocator"].isin(aa) & ~table["workload"].isin(seed_cases)]
    near, far = figures.split_near_one(shown, geomean)
    figures.forest(near, p(f"{name}_forest.svg"), f"{what}: change in percent (95% confidence interval)",
                   percent=True)
    figures.forest(far, p(f"{name}_forest_heavy.svg"), f"{what}: ratio (95% confidence interval, log scale)")


def _speed_and_memory(res: Results, p, baseline: str) -> dict:
    numbers = {}
    if res.speed is None:
        return numbers
    speed = _display_rows(res.speed.results, labels=attribution.labels(res))
    write_csv(speed[["workload", "allocator", "ratio", "ci_low", "ci_high", "n", "n_baseline", "adjusted",
                     "n_outliers", "noninferior", "display", "percent"]], p("speed.csv"))
    geo = attribution.with_host(_display_rows(res.speed.geomean, "geomean_ratio", labels=attribution.labels(res)), res)
    write_csv(geo, p("speed_geomean.csv"))
    _forests(res.speed.results, res.speed.geomean, p, "speed", aa=set(res.aa["allocator"]), what=f"wall time against {baseline}")
    mem = _display_rows(res.memory.results, labels=attribution.labels(res))
    write_csv(mem[["workload", "allocator", "ratio", "ci_low", "ci_high", "n", "n_baseline", "display", "percent"]],
              p("memory.csv"))
    mgeo = attribution.with_host(_display_rows(res.memory.geomean, "geomean_ratio", labels=attribution.labels(res)), res)
    write_csv(mgeo, p("memory_geomean.csv"))
    _forests(res.memory.results, res.memory.geomean, p, "memory", aa=set(res.aa["allocator"]), what=f"peak RSS against {baseline}")
    # the A/A copies of the baseline are controls, not comparisons: they count in their own table only
    aa = set(res.aa["allocator"])
    counted, mem_counted = speed[~speed["allocator"].isin(aa)], mem[~mem["allocator"].isin(aa)]
    geo_counted = geo[~geo["allocator"].isin(aa)]
    numbers["speed"] = {
        "rows": int(len(counted)), "aa_rows": int(len(speed) - len(counted)),
        "slower": int((counted["ci_low"] > 1).sum()), "faster": int((counted["ci_high"] < 1).sum()),
        # the rest: an interval that holds 1 (slower + faster + neither = rows, as the paper prints them)
        "neither": int(((counted["ci_low"] <= 1) & (counted["ci_high"] >= 1)).sum()),
        "noninferior": int(counted["noninferior"].sum()),
        "cheapest": attribution.attributed(res, attribution.extreme(geo_counted, "geomean_ratio", min)),
        "dearest": attribution.attributed(res, attribution.extreme(geo_counted, "geomean_ratio", max)),
        "dearest_full_scale": attribution.dearest_at_full_scale(res, geo_counted),
        "reduced_scale": sorted(a for a in geo_counted["allocator"]
                                if attribution.attributed(res, attribution.extreme(geo_counted[geo_counted["allocator"] == a],
                                                             "geomean_ratio", max)).get("reduced_scale")),
        "median_halfwidth_percent": f"{float(np.median(np.expm1(speed['ci_high'].apply(np.log) - speed['ratio'].apply(np.log)))) * 100:.1f}",
        "like_with_like": attribution.like_with_like(res, geo),
    }
    numbers["memory"] = {"rows": int(len(mem_counted)), "larger": int((mem_counted["ci_low"] > 1).sum()),
                         "smaller": int((mem_counted["ci_high"] < 1).sum()),
                         "neither": int(((mem_counted["ci_low"] <= 1) & (mem_counted["ci_high"] >= 1)).sum()),
                         "leanest": attribution.extreme(mgeo, "geomean_ratio", min),
                         "heaviest": attribution.extreme(mgeo, "geomean_ratio", max)}
    return numbers


def _short(part: str) -> str:
    """An ablation's defence without the allocator it names in parentheses."""
    return part.split(" (")[0]


def _knock_outs(res: Results, p) -> dict:
    """results_knock_outs.csv (each option's saving, with the trials' faults and peak memory) and the numbers the
    paper states: per workload the whole saving, the largest part and its share, the interaction."""
    parts, summary = res.knock_outs, res.knock_out_summary
    if parts is None or parts.empty:
        return {}
    labels = attribution.labels(res)

    def count(x):
        return "" if x is None or not np.isfinite(x) else f"{x:,.0f}"

    def mib(kb):
        return count(None if kb is None else kb / 1024)

    table = parts.assign(run=parts["run_id"].map(labels).fillna(""),
                         saving_display=[fmt_interval(r.saving, r.ci_low, r.ci_high) for r in parts.itertuples()],
                         share_display=[f"{100 * x:.0f}%" if np.isfinite(x) else "" for x in parts["share_of_whole"]],
                         minflt_display=[count(x) for x in parts["minflt"]],
                         maxrss_mb_display=[mib(x) for x in parts["maxrss_kb"]])
    write_csv(table, p("knock_outs.csv"))
    rows = []
    for r in summary.itertuples():
        decided = r.interaction_ci_low > 1 or r.interaction_ci_high < 1
        rows.append({"run": labels.get(r.run_id, ""), "control": r.control, "workload": r.workload, "design": r.design,
                     "whole": fmt_interval(r.whole, r.whole_ci_low, r.whole_ci_high),
                     "parts_sum": f"{r.parts_sum:.3f}",
                     "interaction": fmt_interval(r.interaction, r.interaction_ci_low, r.interaction_ci_high),
                     "interaction_decided": bool(decided),
                     "largest": r.largest_part, "largest_share_percent": round(100 * r.largest_share),
                     "largest_label": _short(parts.loc[parts["configuration"] == r.largest_part, "part"].iloc[0]),
                     "largest_saving": fmt_interval(*parts[(parts["run_id"] == r.run_id) & (parts["workload"] == r.workload)
                                                          & (parts["configuration"] == r.largest_part)]
                                                    [["saving", "ci_low", "ci_high"]].iloc[0]),
                     "control_minflt": count(r.control_minflt), "whole_minflt": count(r.whole_minflt),
                     "control_maxrss_mb": mib(r.control_maxrss_kb), "whole_maxrss_mb": mib(r.whole_maxrss_kb)})
    largest = parts[parts["configuration"].isin(set(summary["largest_part"]))]
    with_trials = parts[parts["minflt"].notna()]
    faults, rss = {}, {}
    for (w, k), g in with_trials.groupby(["workload", "configuration"]):
        faults.setdefault(w, {})[k] = count(g["minflt"].iloc[0])
        rss.setdefault(w, {})[k] = mib(g["maxrss_kb"].iloc[0])
    options = parts[parts["configuration"] != parts["control"].map(knock_outs.TOGETHER)]
    return {"knock_outs": {"controls": sorted(set(summary["control"])),
                           "options": int(options["configuration"].nunique()), "runs": sorted(set(summary["run_id"].map(labels))),
                           "workloads": rows, "largest_parts": sorted(set(largest["configuration"])),
                           "largest_labels": sorted({_short(x) for x in largest["part"]}),
                           "interactions_decided": int(sum(r["interaction_decided"] for r in rows)),
                           "minflt": faults, "maxrss_mb": rss}}


def _ablations(res: Results, p) -> dict:
    numbers = {}
    if len(res.ablation):
        abl = _display_rows(res.ablation, labels=attribution.labels(res))
        if len(res.ablation_memory):
            mem_abl = res.ablation_memory.set_index(["defence", "allocator", "base", "workload"])
            abl["memory_display"] = [
                fmt_interval(*mem_abl.loc[(r["defence"], r["allocator"], r["base"], r["workload"]),
                                         ["ratio", "ci_low", "ci_high"]])
                if (r["defence"], r["allocator"], r["base"], r["workload"]) in mem_abl.index else "n/a"
                for _, r in abl.iterrows()]
        for count in ("n", "n_base"):  # counts of workloads or runs: whole numbers, blank where a row has none
            abl[count] = pd.to_numeric(abl[count], errors="coerce").round().astype("Int64")
        write_csv(abl, p("ablations.csv"))
        figures.ablation_figure(res.ablation, p("ablations.svg"), "wall time ratio to the family's base (95% confidence interval)")
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
    return numbers


SHARE_TABLE_MIN_ALLOCATORS = 5  # the paper's table: workloads counted under at least this many allocators


def alloc_shares(per_free: pd.DataFrame) -> pd.DataFrame:
    """The allocator's share of each workload's instructions (inside its entry points), an allocator a row and
    a workload a column, as percentages at the workload's largest scale; only the counts that measured it,
    the workloads counted under the most allocators first."""
    if "alloc_share" not in per_free:
        return pd.DataFrame(columns=["allocator", "run_id"])
    top = main_scale(per_free)
    top = top[pd.to_numeric(top["alloc_share"], errors="coerce").notna()]
    if top.empty:
        return pd.DataFrame(columns=["allocator", "run_id"])
    order = top.groupby("workload")["allocator"].nunique().reset_index().sort_values(
        ["allocator", "workload"], ascending=[False, True])["workload"]
    table = top.pivot(index="allocator", columns="workload", values="alloc_share")[list(order)].map(
        lambda x: "" if pd.isna(x) else fmt_share(x))
    runs = top.groupby("allocator")["run_id"].agg(lambda r: " ".join(sorted(set(map(str, r))))) \
        if "run_id" in top else pd.Series("", index=table.index)
    return table.assign(run_id=runs).reset_index()


def _callgrind(res: Results, p, baseline: str) -> dict:
    numbers = {}
    if len(res.per_free):
        pf = res.per_free.copy()
        pf["run"] = pf["run_id"].map(attribution.labels(res)).fillna("") if "run_id" in pf else ""
        pf["instructions_per_free_display"] = pf["instructions_per_free"].map(lambda x: f"{x:,.0f}")
        pf["instructions_ratio_display"] = pf["instructions_ratio"].map(fmt_ratio)
        write_csv(pf, p("per_free.csv"))
        write_csv(res.per_free_geomean.assign(display=res.per_free_geomean["instructions_ratio"].map(fmt_ratio)),
                  p("per_free_geomean.csv"))
        write_csv(res.callgrind_missing, p("callgrind_missing.csv"))
        shares = alloc_shares(res.per_free)
        write_csv(shares, p("alloc_share.csv"))
        figures.per_free_figure(main_scale(res.per_free), p("per_free.svg"), baseline)
        numbers["callgrind"] = {"run_id": res.callgrind_run.run_id, "rows": int(len(pf)),
                                "run_ids": sorted(set(pf["run_id"].astype(str))) if "run_id" in pf else [],
                                "status": str(res.callgrind_run.info.get("status", "")),
                                "workloads": int(pf["workload"].nunique()), "allocators": int(pf["allocator"].nunique()),
                                "missing_allocators": int(len(res.callgrind_missing)),
                                "scale": f"{pf['scale'].max():g}",
                                # smaller than the largest scale of the allocator's own run (a quick run's
                                # allocators ran at the quick scale, not reduced for their slowness)
                                "reduced_scale": sorted({str(a) for a in pf.loc[
                                    pf["scale"] < pf.groupby("run_id")["scale"].transform("max"), "allocator"]}
                                                        - {baseline})}
        numbers["per_free"] = {r["allocator"]: fmt_ratio(r["instructions_ratio"])
                               for _, r in res.per_free_geomean.iterrows()}
        if len(shares):
            counted = (shares.drop(columns=["allocator", "run_id"]) != "").sum()
            wide = [w for w, n in counted.items() if n >= SHARE_TABLE_MIN_ALLOCATORS]
            numbers["alloc_share"] = {
                "run_ids": sorted(set(" ".join(shares["run_id"]).split())), "allocators": int(len(shares)),
                "workloads": wide, "other_workloads": [w for w in counted.index if w not in wide],
                "min_allocators": SHARE_TABLE_MIN_ALLOCATORS,
                "unrecognised": sorted(set(pf.loc[pf["alloc_unrecognised"].astype(bool), "allocator"]))}
    return numbers


def _tradeoff(res: Results, p, baseline: str) -> dict:
    numbers = {}
    if len(res.trade):
        t = res.trade.copy()
        t["overhead_display"] = [fmt_interval(r["overhead"], r["overhead_low"], r["overhead_high"])
                                 for _, r in t.iterrows()]
        t["score_display"] = [f"{fmt_score(r['score'])} [{fmt_score(r['score_low'])}, {fmt_score(r['score_high'])}]"
                              for _, r in t.iterrows()]
        t["pareto_display"] = t["pareto"].map({True: "yes", False: ""})
        t["run"] = t["run_id"].map(attribution.labels(res)).fillna("") if "run_id" in t else ""
        t = t.sort_values(["overhead", "allocator"]).reset_index(drop=True)
        figures.tradeoff_figure(res.trade, p("tradeoff.svg"), baseline)
        t["primitive_display"] = [f"{r['primitive_points']:.1f} ({100 * r['primitive_share']:.0f}%)"
                                  for _, r in t.iterrows()]
        write_csv(t, p("tradeoff.csv"))
        numbers["tradeoff"] = {"allocators": int(len(t)), "pareto": [str(a) for a in t[t["pareto"]]["allocator"]],
                               "verdicts": {str(r["allocator"]): str(r["verdict"]) for _, r in t.iterrows()},
                               "indistinct": int(t["verdict"].str.startswith(weight_draws.INDISTINCT).sum()),
                               "primitive_share_percent": f"{100 * t['primitive_share'].median():.0f}",
                               "primitive_points_max": f"{t['primitive_points'].max():.1f}",
                               "primitive_points_max_allocator": str(t.loc[t["primitive_points"].idxmax(), "allocator"]),
                               "sure_percent": round(100 * weight_draws.SURE),
                               "roles": {role: sorted(str(a) for a in g["allocator"])
                                         for role, g in t.groupby("role")},
                               "unweighed": attribution.unweighed(res, t)}
        weight_front = front.write_weight_front(res, p("weight_front.csv"), baseline)
        if weight_front:
            numbers["weight_front"] = weight_front
        numbers.update(_defences(res, p))
    return numbers


def _defences(res: Results, p) -> dict:
    """results_defences.csv: each ablation's cost beside the primitive it removes (analysis.publish.security.defences)."""
    from analysis.publish.security import defences
    from analysis.publish.security.primitives import primitive_rows_if_any
    from analysis.publish.security.writer import reported_probe_rows

    if not len(res.ablation) or res.probe_run is None:
        return {}
    from analysis.errors import HeapcostError
    from analysis.publish.security import techniques as known

    ds = res.dataset
    primitive_rows = primitive_rows_if_any(ds)
    try:  # the known exploitation techniques of the newest techniques run (publish/security/techniques.py)
        technique_run, _, technique_rows = known.newest_run(ds)
        technique_rows = [r for r in technique_rows if not known.not_built(r)]  # not run: neither stopped nor working
    except HeapcostError:
        technique_run, technique_rows = "", []
    table = defences.defence_table(res.ablation, res.per_free, reported_probe_rows(ds), primitive_rows,
                                        fmt_interval, techniques=pd.DataFrame(technique_rows) if technique_rows else None)
    write_csv(table, p("defences.csv"))
    return {"defences": {"rows": int(len(table)), "per_mille_of": defences.sequences_per_cell(primitive_rows),
                         "techniques": defences.NOT_MEASURED if not technique_rows else "measured",
                         "techniques_run": technique_run,
                         "removing": int((table["primitive_removed"] != "none measured").sum())}}


def _debate_security(res: Results, p) -> dict:
    """results_debate_security.csv: each debate's primary pair in the misuse probes, side by side
    (publish/debates/security_side.py); empty where the dataset has no probe run."""
    from analysis.errors import HeapcostError
    from analysis.publish.debates import security_side
    from analysis.publish.security.writer import debate_probe_rows

    debates_path = Path(p("debates.csv"))
    debates = pd.read_csv(debates_path, dtype=str, keep_default_na=False) if debates_path.is_file() else pd.DataFrame()
    primary = debates[debates["cell"] == "primary"] if "cell" in debates else debates.iloc[0:0]
    try:
        rows = debate_probe_rows(res.dataset) if res.probe_run is not None else []
    except HeapcostError:
        rows = []
    table = security_side.debate_security(primary, rows) if rows else \
        pd.DataFrame(columns=security_side.COLUMNS)
    write_csv(table, p("debate_security.csv"))
    numbers = {"rows": int(len(table)),
               "measured": int((table["unmeasured"].astype(str) == "").sum()) if len(table) else 0}
    page = security_side.page_placement(rows, table) if rows else None
    return {"debate_security": {**numbers, **({"page_placement": page} if page else {})}}


def _cost_check(ds, costs: pd.DataFrame, p, done=None) -> dict:
    """results_cost_check.csv: the registered predictions of programs nobody tuned for against their measured
    ratios (publish/results/cost_check.py), every registration (one per processor kind, the earliest first) in
    one table; per registration its summary and, once any of its cells is measured, its figure
    (results_cost_check_<processor>.svg); results_cost_turns.csv: cells measured again in longer turns beside the
    check's own (publish/results/cost_turns.py). `done`: cost_check.checked of the dataset, where the caller has it."""
    from analysis.contract.host import processor_slug
    from analysis.publish.results import cost_turns

    def shown(value, low, high):
        return "" if value is None or pd.isna(value) else fmt_interval(value, low, high)

    if ds is not None:
        done = done if done is not None else cost_check.checked(ds, costs)
        checked, residuals = done.tables, done.residuals
    else:
        done = None
        checked = [(folder, pd.DataFrame(columns=cost_check.COLUMNS)) for folder in cost_check.registrations()]
        residuals = cost_check.residuals_of([])
    tables, hosts, folders = [], [], []
    for folder, table in checked:
        reg = cost_check.load(folder)
        head = reg["registration"]
        table = cost_check.leave_one_program_out(table, residuals)
        table = table.assign(predicted_display=[shown(r.predicted, r.low, r.high) for r in table.itertuples()],
                             measured_display=[shown(r.measured, r.measured_low, r.measured_high)
                                               for r in table.itertuples()])
        summary = cost_check.summary(table)
        programs_set = cost_check.programs_of(reg)
        figure = ("cost_check_" + ("" if programs_set == "first" else f"{programs_set}_")
                  + f"{processor_slug(head['processor'])}.svg")
        if summary["cells"]:
            figures.cost_check_figure(table, p(figure))
        tables.append(table.assign(programs_set=programs_set))
        measured = ds is not None and costs is not None
        newer = newer_profiles(ds, reg, folder) if measured else {}
        folders.append(folder)
        hosts.append({"registered": head["registered"], "processor": head["processor"], "programs_set": programs_set,
                      "programs_registered": len(reg["program"]), "predictions": len(reg["prediction"]),
                      "program_names": [p_["name"] for p_ in reg["program"]],
                      "growth_term": bool(head.get("growth")),
                      "held_term": cost_profiles.profiles_hold_peaks(folder),
                      "same_size_term": cost_profiles.profiles_count_same_size(folder),
                      "held_effect": cost_profiles.held_effect(folder, table, costs) if costs is not None else {},
                      "same_size_effect": (cost_profiles.same_size_effect(table, costs, newer, folder)
                                           if measured else {}),
                      "grow_effect": cost_profiles.grow_effect(table, costs, newer, folder) if measured else {},
                      "grow_term": cost_profiles.profiles_count_grow_pages(folder),
                      "grow_page_effect": (cost_profiles.grow_page_effect(table, costs, newer, folder)
                                           if measured else {}),
                      "grow_small_effect": (cost_profiles.grow_small_effect(table, costs, newer, folder)
                                            if measured else {}),
                      "premiums_registered": [{"allocator": a, "ns": round(ns)} for a, ns in sorted(
                          {q["allocator"]: q["premium_ns"] for q in reg["prediction"]
                           if q.get("premium_ns")}.items())],
                      "held_registered": [{"allocator": a, "ms_per_mib": round(v * 1024 / 1e6, 2)} for a, v in sorted(
                          {q["allocator"]: q["held_ns_per_kib"] for q in reg["prediction"]
                           if q.get("held_ns_per_kib")}.items())],
                      "placement_registered": [{"allocator": a, "order": round(o, 2), "shuffle": round(sh, 2)}
                                               for a, (o, sh) in sorted({q["allocator"]: (q["order_part"], q["shuffle_part"])
                                                                         for q in reg["prediction"]
                                                                         if "order_part" in q}.items())],
                      "allocators": list(head.get("allocators", [])),
                      "figure": p(figure).name if summary["cells"] else "", **summary,
                      **cost_check.loo_summary(table)})
    if not tables:
        return {"cost_check": {"registrations": 0, "hosts": [], "measured_hosts": 0}}
    write_csv(pd.concat(tables, ignore_index=True), p("cost_check.csv"))
    models = cost_models.models_compared(tables)
    write_csv(models, p("cost_check_models.csv"))
    terms, term_numbers = cost_models.terms_table(done, tables) if done is not None else (None, {})
    if terms is not None:
        write_csv(terms, p("cost_terms.csv"))
    turns = (cost_turns.table(ds, checked) if ds is not None else pd.DataFrame(columns=cost_turns.COLUMNS))
    write_csv(turns, p("cost_turns.csv"))
    kinds = sorted(set(costs["processor"])) if costs is not None and len(costs) else []
    second = set(cost_models.kinds_checked_later(models))
    return {"cost_check": {"registrations": len(hosts), "hosts": hosts,
                           "measured_hosts": sum(1 for h in hosts if h["cells"]),
                           "second_checked": sorted(second), "second_not_checked": [k for k in kinds if k not in second],
                           "models": models.to_dict("records"), "terms": term_numbers,
                           "goals": cost_check.GOALS, "grown_class_kib": GROWN_CLASS // 1024,
                           "turns": cost_turns.numbers(turns)},
            **_cost_faults(ds, pd.concat(tables, ignore_index=True), p, list(zip(folders, tables)), costs,
                           done.premiums if done is not None else {})}


def _cost_faults(ds, checked: pd.DataFrame, p, pairs=(), costs=None, premiums=None) -> dict:
    """results_cost_faults.csv: the check's programs run alone as trials, each cell's added page faults and CPU
    time beside its miss (publish/results/cost_faults.py); results_cost_misses.csv: the model's far misses, each
    with what those trials, its profile and the per-call table say of it (publish/results/cost_misses.py)."""
    from analysis.harness.allocators.catalog import load_catalog
    from analysis.publish.results import cost_faults, cost_misses

    t = cost_faults.table(ds, checked) if ds is not None else pd.DataFrame(columns=cost_faults.COLUMNS)
    write_csv(t, p("cost_faults.csv"))
    far = (cost_misses.far_misses(pairs, costs, t, premiums or {}) if pairs and costs is not None
           else pd.DataFrame(columns=cost_misses.COLUMNS))
    write_csv(far, p("cost_misses.csv"))
    return {"cost_faults": cost_faults.numbers(t, knock_outs.knock_outs_of(load_catalog())),
            "cost_misses": cost_misses.numbers(far)}


def _debates_per_call(ds, costs: pd.DataFrame, p, baseline: str, premiums: dict | None = None) -> dict:
    """results_debate_per_call.csv: each debated cell whose workload a host profiled, predicted from that host's
    per-call costs, and as `cost` predicts it with the terms the cost check fitted (`premiums`), beside the ratio
    measured there (publish/debates/per_call_prediction.py)."""
    from analysis.contract import debates_spec
    from analysis.publish.debates import per_call_prediction

    def written(name):  # a table write_debates wrote before
        path = p(name)
        return pd.read_csv(path, dtype={"seed": str}) if path.is_file() and path.stat().st_size > 1 else None

    spec = debates_spec.load()
    t = per_call_prediction.table(ds, costs, written("debate_hosts.csv"), spec, baseline,
                                  written("kernel_part.csv"), per_call_prediction.direct_costs(ds, spec, baseline),
                                  premiums)
    write_csv(t, p("debate_per_call.csv"))
    # the cells' per-call predictions registered before their kind measured them again, against those runs
    from analysis.publish.debates import predictions

    from analysis.publish.debates.pool import RUN_COLUMNS

    runs = written("debate_runs.csv")
    checked = per_call_prediction.check(predictions.load_per_calls(),
                                        runs if runs is not None else pd.DataFrame(columns=RUN_COLUMNS))
    write_csv(checked, p("debate_per_call_check.csv"))
    return {"debate_per_call": per_call_prediction.numbers(t),
            "debate_per_call_check": per_call_prediction.check_numbers(checked)}
