"""The debates' products: results_debates.csv (a row per debate, workload and contested pair: the pre-registered
margin, the runs, builds and hosts behind the pooled interval, the transferable quantities, the verdict),
results_debate_runs.csv (every run behind them, superseded ones marked), results_aa_pooled.csv (A/A across
runs) and a forest plot per debate."""
import pandas as pd

from analysis.contract import debates_spec
from analysis.publish import debate_figures, debate_pool, debates
from analysis.publish.results import BASELINE, Results, fmt_interval
from analysis.publish.products import write_csv


def write_debates(res: Results, p, labels: dict, baseline: str = BASELINE) -> dict:
    """Writes the products through `p` (name -> path); returns the numbers for results_numbers.json."""
    spec = debates_spec.load()
    answers, runs = debates.answers(res, res.figures, spec)
    answers["run"] = answers["run_id"].map(labels).fillna("")
    write_csv(answers, p("debates.csv"))
    hosts = debate_figures.host_labels(runs) if len(runs) else {}
    runs = runs.assign(run=runs["run_id"].map(labels).fillna(""), host_label=runs["host"].map(hosts),
                       display=[fmt_interval(r["ratio"], r["ci_low"], r["ci_high"]) for _, r in runs.iterrows()])
    write_csv(runs, p("debate_runs.csv"))
    drawn = debate_figures.write_all(answers, runs, labels, spec, lambda seed: p(f"debate_{seed}.svg"))
    runs_dir = debate_pool.runs_dir_of(res)
    aa = debate_pool.aa_across_runs(res.cells.get("wall_s"), runs_dir, baseline) if runs_dir else \
        pd.DataFrame(columns=debate_pool.AA_POOLED_COLUMNS)
    aa = aa.assign(display=[fmt_interval(r["ratio"], r["ci_low"], r["ci_high"]) for _, r in aa.iterrows()])
    write_csv(aa, p("aa_pooled.csv"))
    return {
        "debates": {seed: list(g["verdict"]) for seed, g in answers.groupby("seed", sort=True)},
        "debate_figures": drawn,
        "debate_hosts": {v: k for k, v in hosts.items()},
        "debate_superseded_runs": sorted(set(runs.loc[runs["superseded"].astype(bool), "run"])) if len(runs) else [],
        "aa_pooled": {"cells": int(len(aa)), "excluding_1": int(aa["excludes_1"].sum()) if len(aa) else 0,
                      "percent_excluding_1": f"{100 * aa['excludes_1'].mean():.1f}" if len(aa) else "",
                      "min_runs": int(aa["n_runs"].min()) if len(aa) else 0},
    }
