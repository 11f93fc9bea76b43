"""The debates' products: results_debates.csv (a row per debate, workload and contested pair: the pre-registered
margin, the runs, builds and hosts behind it, each host's answer, the verdict across hosts, the transferable
quantities), results_debate_hosts.csv (a row per debate cell and host: its runs and builds pooled, the A/A
floor, the rule's decision there), results_debate_runs.csv (every run behind them, superseded ones marked),
results_aa_pooled.csv and results_aa_hosts.csv (A/A across runs, over every host and on each alone) and a forest
plot per debate."""
import pandas as pd

from analysis.contract import debates_spec
from analysis.publish import debate_figures, debate_pool, debates, predictions
from analysis.publish.results import BASELINE, Results, fmt_interval
from analysis.publish.products import write_csv
from analysis.stats import equivalence


def write_debates(res: Results, p, labels: dict, baseline: str = BASELINE) -> dict:
    """Writes the products through `p` (name -> path); returns the numbers for results_numbers.json."""
    spec = debates_spec.load()
    answers, runs, per_host = debates.answers(res, res.figures, spec)
    answers["run"] = answers["run_id"].map(labels).fillna("")
    write_csv(answers, p("debates.csv"))
    per_host = per_host.assign(display=[fmt_interval(r["ratio"], r["ci_low"], r["ci_high"])
                                        for _, r in per_host.iterrows()])
    write_csv(per_host, p("debate_hosts.csv"))
    hosts = debate_figures.host_labels(runs) if len(runs) else {}
    runs = runs.assign(run=runs["run_id"].map(labels).fillna(""), host_label=runs["host"].map(hosts),
                       display=[fmt_interval(r["ratio"], r["ci_low"], r["ci_high"]) for _, r in runs.iterrows()])
    write_csv(runs, p("debate_runs.csv"))
    drawn = debate_figures.write_all(answers, runs, per_host, labels, spec, lambda seed: p(f"debate_{seed}.svg"))
    runs_dir = debate_pool.runs_dir_of(res)
    aa = debate_pool.aa_across_runs(res.cells.get("wall_s"), runs_dir, baseline) if runs_dir else \
        pd.DataFrame(columns=debate_pool.AA_POOLED_COLUMNS)
    aa = aa.assign(display=[fmt_interval(r["ratio"], r["ci_low"], r["ci_high"]) for _, r in aa.iterrows()])
    write_csv(aa, p("aa_pooled.csv"))
    aa_hosts = debate_pool.aa_by_host(res.cells.get("wall_s"), runs_dir, baseline) if runs_dir else \
        pd.DataFrame(columns=debate_pool.AA_HOST_COLUMNS)
    aa_hosts = aa_hosts.assign(display=[fmt_interval(r["ratio"], r["ci_low"], r["ci_high"]) for _, r in aa_hosts.iterrows()])
    write_csv(aa_hosts, p("aa_hosts.csv"))
    decided = per_host[per_host["decision"] != equivalence.UNDECIDED] if len(per_host) else per_host
    registered = predictions.load()
    replication = predictions.replication(registered, per_host)
    write_csv(replication, p("replication.csv"))
    return {
        "debates": {seed: list(g["verdict"]) for seed, g in answers.groupby("seed", sort=True)},
        "debate_figures": drawn,
        "debate_hosts": {v: k for k, v in hosts.items()},
        "debate_superseded_runs": sorted(set(runs.loc[runs["superseded"].astype(bool), "run"])) if len(runs) else [],
        "debate_hosts_count": int(per_host["processor"].nunique()) if len(per_host) else 0,
        "debate_host_cells": int(len(per_host)), "debate_host_cells_decided": int(len(decided)),
        "debate_host_cells_floored": int(per_host["floored"].astype(bool).sum()) if len(per_host) else 0,
        "debate_min_hosts_to_pool": debate_pool.MIN_HOSTS_TO_POOL, "debate_min_aa_runs": debate_pool.MIN_AA_RUNS,
        "replication": {"predictions": len(registered), "checked": int(len(replication)),
                        "held": int(replication["held"].sum()) if len(replication) else 0,
                        "percent_held": f"{100 * replication['held'].mean():.0f}" if len(replication) else "",
                        "registered": sorted({e["registered"] for e in registered}),
                        "spread_percent": sorted({e["tau_percent"] for e in registered}),
                        "spread_cells": sorted({e["spread_cells"] for e in registered})},
        "aa_pooled": {"cells": int(len(aa)), "excluding_1": int(aa["excludes_1"].sum()) if len(aa) else 0,
                      "percent_excluding_1": f"{100 * aa['excludes_1'].mean():.1f}" if len(aa) else "",
                      "min_runs": int(aa["n_runs"].min()) if len(aa) else 0},
    }
