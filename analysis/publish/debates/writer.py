"""The debates' products: results_debates.csv (a row per debate, workload and contested pair: the pre-registered
margin, the runs, builds and hosts behind it, each host's answer, the verdict across hosts, the transferable
quantities), results_debate_hosts.csv (a row per debate cell and host: its runs and builds pooled, the A/A
floor, the rule's decision there, its machines' names), results_debate_runs.csv (every run behind them with
its processor kind and machine name, superseded ones marked),
results_aa_pooled.csv and results_aa_hosts.csv (A/A across runs, over every host and on each alone),
results_kernel_part.csv (where each side's time goes on each host: user, system, minor faults),
results_code_census.csv (what each debated library's code is made of: instructions, rep stos, memset calls),
results_long_build.csv (seed 001's long build on each host: wall, user and system time and the process tree's
peak memory), results_long_build_check.csv (its registered prediction beside the measured answer),
results_store_sequence.csv and results_store_sequence_wide.csv (seed 002's store sequences timed alone on each
host: store_sequence.py), results_debate_second_port.csv (a pair timed again as its second port beside the first
port's answer: second_port.py) and a forest plot per debate."""
import pandas as pd

from analysis.contract import debates_spec
from analysis.publish.debates import forest, long_build, pool, questions, predictions, second_port, store_sequence
from analysis.publish.results.comparisons import BASELINE, Results
from analysis.publish.render.formats import fmt_interval, fmt_ratio
from analysis.publish.render.products import write_csv
from analysis.stats import equivalence
from analysis.stats.primitives import wilson


def write_debates(res: Results, p, labels: dict, baseline: str = BASELINE) -> dict:
    """Writes the products through `p` (name -> path); returns the numbers for results_numbers.json."""
    spec = debates_spec.load()
    ds = res.dataset
    grouped = pool.grouped_cells(res.cells)  # split once for every debate, layout and A/A copy
    wall = grouped.get("wall_s")
    aa_hosts = pool.aa_by_host(res.cells.get("wall_s"), ds, baseline, wall) if ds else \
        pd.DataFrame(columns=pool.AA_HOST_COLUMNS)
    answers, runs, per_host = questions.answers(res, res.figures, spec, grouped,
                                                aa_hosts if baseline == BASELINE else None)
    answers["run"] = answers["run_id"].map(labels).fillna("")
    write_csv(answers, p("debates.csv"))
    write_csv(pd.DataFrame(debates_spec.timeline(spec), columns=debates_spec.TIMELINE_COLUMNS),
              p("debate_timeline.csv"))
    per_host = per_host.assign(display=[fmt_interval(r["ratio"], r["ci_low"], r["ci_high"])
                                        for _, r in per_host.iterrows()])
    write_csv(per_host, p("debate_hosts.csv"))
    ported = second_port.check(per_host, res.cells.get("wall_s"), ds, res.per_free)
    ported = ported.assign(run=ported["run_id"].map(labels).fillna(""),
                           display=[fmt_interval(r["ratio"], r["ci_low"], r["ci_high"]) for _, r in ported.iterrows()],
                           first_display=[fmt_interval(r["first_ratio"], r["first_mean90_low"], r["first_mean90_high"])
                                          for _, r in ported.iterrows()],
                           first_next_display=[f"[{fmt_ratio(r['first_next_one_build_low'])}, "
                                               f"{fmt_ratio(r['first_next_one_build_high'])}]"
                                               if pd.notna(r["first_next_one_build_low"]) else ""
                                               for _, r in ported.iterrows()])
    write_csv(ported, p("debate_second_port.csv"))
    runs = runs.assign(run=runs["run_id"].map(labels).fillna(""),
                       display=[fmt_interval(r["ratio"], r["ci_low"], r["ci_high"]) for _, r in runs.iterrows()])
    write_csv(runs, p("debate_runs.csv"))
    kernel = pool.kernel_part(runs, ds) if ds else pd.DataFrame(columns=pool.KERNEL_COLUMNS)
    write_csv(pool.kernel_part_wide(kernel), p("kernel_part.csv"))
    debated = {side.strip() for conf in answers["configuration"].astype(str) for side in conf.split(" / ")} \
        if len(answers) else set()
    write_csv(pool.code_census(ds, debated), p("code_census.csv"))
    drawn = forest.write_all(answers, runs, per_host, labels, spec, lambda seed: p(f"debate_{seed}.svg"))
    aa = pool.aa_across_runs(res.cells.get("wall_s"), ds, baseline, wall) if ds else \
        pd.DataFrame(columns=pool.AA_POOLED_COLUMNS)
    aa = aa.assign(display=[fmt_interval(r["ratio"], r["ci_low"], r["ci_high"]) for _, r in aa.iterrows()])
    write_csv(aa, p("aa_pooled.csv"))
    aa_hosts = aa_hosts.assign(display=[fmt_interval(r["ratio"], r["ci_low"], r["ci_high"]) for _, r in aa_hosts.iterrows()])
    write_csv(aa_hosts, p("aa_hosts.csv"))
    decided = per_host[per_host["decision"] != equivalence.UNDECIDED] if len(per_host) else per_host
    layouts = pool.layout_aa(res.cells.get("wall_s"), ds, wall) if ds else \
        pd.DataFrame(columns=pool.LAYOUT_AA_COLUMNS)
    layouts = layouts.assign(display=[fmt_interval(r["ratio"], r["ci_low"], r["ci_high"]) for _, r in layouts.iterrows()])
    write_csv(layouts, p("layout_aa.csv"))
    # a cell of fewer runs than an A/A floor needs has a t on one degree of freedom: it holds 1 whatever the
    # layout does, so only cells of MIN_AA_RUNS runs or more count toward the rate
    rated = layouts[layouts["n_runs"] >= pool.MIN_AA_RUNS] if len(layouts) else layouts
    excluding = int(rated["excludes_1"].sum()) if len(rated) else 0
    rate_low, rate_high = wilson(excluding, len(rated))
    apart = []  # cells whose hosts' intervals do not overlap: the hosts disagree beyond what each measured
    for (seed, conf, wl), g in (per_host.groupby(["seed", "configuration", "workload"], sort=True) if len(per_host) else []):
        if len(g) >= 2 and g["ci_low"].max() > g["ci_high"].min():
            apart.append({"seed": seed, "configuration": conf, "workload": wl,
                          "hosts": "; ".join(f"{h.processor}: {_host_display(h)}" for h in g.itertuples())})
    registered = predictions.load()
    replication = predictions.replication(registered, per_host)
    write_csv(replication, p("replication.csv"))
    machine_numbers = _machine_level(res, spec, runs, per_host, p)
    long_pairs = spec[long_build.SEED].contested if long_build.SEED in spec else []
    long_measured = long_build.measured(res.cells, ds, long_pairs) if ds else \
        pd.DataFrame(columns=long_build.MEASURED_COLUMNS)
    write_csv(long_measured, p("long_build.csv"))
    long_registered = predictions.load_long_builds()
    long_checked = long_build.check(long_registered, per_host)
    write_csv(long_checked, p("long_build_check.csv"))
    stores = store_sequence.results(ds)
    write_csv(stores, p("store_sequence.csv"))
    write_csv(store_sequence.wide(stores), p("store_sequence_wide.csv"))
    return {
        "store_sequence": store_sequence.numbers(stores),
        "second_port": second_port.summary(ported),
        "debates": {seed: list(g["verdict"]) for seed, g in answers.groupby("seed", sort=True)},
        "debate_figures": drawn,
        "debate_machines": machine_kinds(runs),
        "debate_superseded_runs": sorted(set(runs.loc[runs["superseded"].astype(bool), "run"])) if len(runs) else [],
        "debate_hosts_count": len(pool.identified_processors(per_host["processor"])) if len(per_host) else 0,
        "debate_hosts_not_identified": sorted(set(per_host["processor"]) - set(pool.identified_processors(
            per_host["processor"]))) if len(per_host) else [],
        "debate_host_cells": int(len(per_host)), "debate_host_cells_decided": int(len(decided)),
        "debate_host_cells_floored": int(per_host["floored"].astype(bool).sum()) if len(per_host) else 0,
        "debate_min_hosts_to_pool": pool.MIN_HOSTS_TO_POOL, "debate_min_aa_runs": pool.MIN_AA_RUNS,
        "layout_aa": {"cells": int(len(rated)), "cells_all": int(len(layouts)), "excluding_1": excluding,
                      "min_runs": pool.MIN_AA_RUNS,
                      "percent_excluding_1": f"{100 * excluding / len(rated):.1f}" if len(rated) else "",
                      "percent_low": f"{100 * rate_low:.1f}" if rate_low is not None else "",
                      "percent_high": f"{100 * rate_high:.1f}" if rate_high is not None else "",
                      "configurations": sorted(set(rated["configuration"])) if len(rated) else [],
                      "hosts": sorted(set(rated["processor"])) if len(rated) else []},
        "hosts_apart": apart,
        "machine_level": machine_numbers,
        "host_predictions": {"predictions": len(registered), "checked": int(len(replication)),
                        "held": int(replication["held"].sum()) if len(replication) else 0,
                        "percent_held": f"{100 * replication['held'].mean():.0f}" if len(replication) else "",
                        "registered": sorted({e["registered"] for e in registered}),
                        "spread_percent": sorted({e["tau_percent"] for e in registered}),
                        "spread_cells": sorted({e["spread_cells"] for e in registered})},
        "long_build": {"workload": long_build.LONG_BUILD, "from_workload": long_build.SHORT_BUILD,
                       "predictions": len(long_registered), "checked": int(len(long_checked)),
                       "held": int(long_checked["held"].sum()) if len(long_checked) else 0,
                       "registered": sorted({e["registered"] for e in long_registered})},
        "aa_pooled": {"cells": int(len(aa)), "excluding_1": int(aa["excludes_1"].sum()) if len(aa) else 0,
                      "percent_excluding_1": f"{100 * aa['excludes_1'].mean():.1f}" if len(aa) else "",
                      "min_runs": int(aa["n_runs"].min()) if len(aa) else 0},
    }


def _machine_level(res: Results, spec: dict, runs: pd.DataFrame, per_host: pd.DataFrame, p) -> dict:
    """Writes results_debate_machines.csv (each machine's own estimate of each cell), results_next_machine_check.csv
    (the registered next-machine intervals against the machines measured after them) and
    results_coverage_out_of_sample.csv (one machine left out, one kind left out: held / checked with a Wilson
    interval); returns their numbers and the between-machine spread's."""
    from analysis.publish.debates import coverage

    current = runs[~runs["superseded"].astype(bool)] if len(runs) else runs
    machines = pool.machine_estimates(current)
    write_csv(machines, p("debate_machines.csv"))
    checked = predictions.next_machine_check(predictions.load_next_machines(), machines)
    write_csv(checked, p("next_machine_check.csv"))
    primary = {(f"{a} / {b}", w) for q in spec.values() for (a, b), w in [q.primary]}
    ds = res.dataset
    skip = {pair for q in spec.values() for pair in q.contested}
    ablations = predictions.ablation_cells(res.cells.get("wall_s"), ds, skip, by_kind=True) if ds else {}
    details = pd.concat([coverage.leave_one_machine_out(current, {}, primary),
                         coverage.leave_one_kind_out(per_host, ablations, primary)], ignore_index=True)
    write_csv(details, p("coverage_out_of_sample_cells.csv"))
    table = coverage.summary(details)
    write_csv(table, p("coverage_out_of_sample.csv"))
    spread, _ = questions.spreads({k: g for k, g in current.groupby(["seed", "configuration", "workload"])}
                                  if len(current) else {})
    held = int(checked["held"].sum()) if len(checked) else 0
    low, high = wilson(held, len(checked))
    return {"spread": {"tau_percent": f"{spread.tau * 100:.2f}", "df": spread.df, "cells": spread.cells,
                       "source": spread.source,
                       "estimate_percent": "" if spread.cells == 0 else f"{100 * spread.estimate ** 0.5:.2f}"},
            "machines": int(machines["machine"].nunique()) if len(machines) else 0,
            "next_machine_check": {"checked": int(len(checked)), "held": held,
                                   "low": "" if low is None else f"{100 * low:.0f}",
                                   "high": "" if high is None else f"{100 * high:.0f}"},
            "coverage": table.to_dict(orient="records"),
            "changed_verdicts": int((per_host["decision"] != per_host["registered_decision"]).sum())
            if "registered_decision" in per_host.columns and len(per_host) else 0}


def machine_kinds(runs) -> dict:
    """{machine name: its processor kind's label} of the machines behind the debates' runs."""
    if not len(runs):
        return {}
    pairs = runs[["machine", "processor"]].drop_duplicates().sort_values(["machine", "processor"])
    return dict(zip(pairs["machine"].astype(str), pairs["processor"].astype(str)))


def _host_display(h) -> str:
    """A host's interval as the main text lists it. Where the host's builds (code layouts, or libraries built
    again) leave the interval a single degree of freedom, it holds almost any value: the estimate is named with
    its builds and runs instead of printed with it."""
    df = pd.to_numeric(pd.Series([h.df]), errors="coerce").iloc[0]
    builds = pd.to_numeric(pd.Series([h.n_builds]), errors="coerce").iloc[0]
    if pd.notna(df) and df < 2 and pd.notna(builds) and builds >= 2:
        return (f"{h.ratio:.3f} from {builds:g} builds that differ over {h.n_runs} runs, its interval on "
                f"{df:g} degree of freedom not shown")
    return h.display
