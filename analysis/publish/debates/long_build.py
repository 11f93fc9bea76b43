"""Seed 001's long build predicted from the short builds, registered before it is measured, and checked after.

The seed's program was a kernel package build of almost two hours; the `build` workload takes about a second,
much of it start-up. The scaling fit (analysis/stats/scaling.py: time = start-up + per-unit cost x scale, from
trials of `build` at several scales within one run) separates the two. For a build long enough that start-up
vanishes, the ratio of wall times tends to the ratio of per-unit costs, so that ratio, with its 95% interval, is
the prediction of the long build's ratio (LONG_BUILD) on the same host.

`python -m analysis predict-build` computes it per host (processor kind) and per contested pair of seed 001
from every published run that fitted both sides, pools a host's runs (analysis.stats.random_effects), and adds
the entries to predictions.toml as [[long_build]] with the date, the commit and the runs used. Committed before
the long build's runs are merged, it is an out-of-sample check: `check` sets each host's measured answer (the
debates' per-host pooling) beside the registered interval.
"""
import datetime
import math
from pathlib import Path

import pandas as pd

from analysis.contract import dataset, debates_spec
from analysis.errors import HeapcostError
from analysis.publish.debates import pool, predictions
from analysis.stats import random_effects, scaling
from analysis.stats.estimators import Difference

SEED = "001"
SHORT_BUILD = "build"  # the workload whose scaling fit predicts
LONG_BUILD = "linux-build"  # the workload predicted
BASELINE = "glibc"
TRIALS = "trials.csv"
KEYS = predictions.LONG_BUILD_KEYS
SLOPE_COLUMNS = ["run_id", "processor", "allocator", "build", "estimate", "se", "df", "startup_ms",
                 "baseline_startup_ms"]
CHECK_COLUMNS = ["seed", "configuration", "workload", "from_workload", "processor", "registered", "predicted",
                 "measured", "held", "measured_over_predicted"]


def run_slopes(runs_dir: Path, allocators, workload: str = SHORT_BUILD, baseline: str = BASELINE) -> pd.DataFrame:
    """One row per (run, allocator) whose trials of `workload` fit a line at two or more scales on both the
    allocator's and the baseline's side: the log of the per-unit cost ratio, its SE and df, and both start-ups.
    `runs_dir`: the dataset (or its runs folder)."""
    ds = dataset.load(runs_dir)
    processors = pool._processors(ds)
    rows = []
    for run in [r for r in ds.run_ids() if ds.has(r, TRIALS)]:
        trials = ds.table(run, TRIALS)
        if "workload" not in trials or "scale" not in trials:
            continue
        trials = trials[(trials["workload"] == workload) & trials["allocator"].isin([baseline, *allocators])]
        if trials.empty or pd.to_numeric(trials["scale"], errors="coerce").nunique() < 2:
            continue
        model = scaling.cost_model(trials).set_index("allocator")
        if baseline not in model.index:
            continue
        base = model.loc[baseline]
        info = ds.info(run)
        for allocator in allocators:
            if allocator not in model.index:
                continue
            d = scaling.per_unit_difference(model.loc[allocator], base)
            if d is None:
                continue
            rows.append({"run_id": run, "processor": processors.get(run, "?"), "allocator": allocator,
                         "build": pool.build_of(info, allocator), "estimate": d.estimate, "se": d.se, "df": d.df,
                         "startup_ms": 1e3 * float(model.loc[allocator, "startup_s"]),
                         "baseline_startup_ms": 1e3 * float(base["startup_s"])})
    return pd.DataFrame(rows, columns=SLOPE_COLUMNS)


def compute(slopes: pd.DataFrame, pairs, registered: str) -> list[dict]:
    """A prediction per contested pair (against the baseline) and host that some run fitted."""
    out = []
    for with_, without in pairs:
        if without != BASELINE:
            continue
        mine = slopes[slopes["allocator"] == with_]
        for processor, sub in mine.groupby("processor", sort=True):
            p = random_effects.pool(sub[["estimate", "se", "df", "build"]].assign(host="one"))
            lo, hi = Difference(p.estimate, p.se, p.df).interval()
            out.append({"seed": SEED, "configuration": f"{with_} / {without}", "workload": LONG_BUILD,
                        "from_workload": SHORT_BUILD, "registered": registered, "processor": processor,
                        "from_runs": sorted(sub["run_id"]), "centre": round(math.exp(p.estimate), 4),
                        "low": round(math.exp(lo), 4), "high": round(math.exp(hi), 4),
                        "startup_ms": round(float(sub["startup_ms"].median()), 2),
                        "baseline_startup_ms": round(float(sub["baseline_startup_ms"].median()), 2)})
    return out


def check(entries: list[dict], per_host: pd.DataFrame) -> pd.DataFrame:
    """Each registered prediction beside the answer measured since on its host (the debates' per-host rows)."""
    rows = []
    for e in entries:
        if per_host is None or per_host.empty:
            break
        mine = per_host[(per_host["configuration"] == e["configuration"]) & (per_host["workload"] == e["workload"])
                        & (per_host["processor"] == e["processor"])]
        for h in mine.itertuples():
            rows.append({"seed": e["seed"], "configuration": e["configuration"], "workload": e["workload"],
                         "from_workload": e["from_workload"], "processor": h.processor,
                         "registered": e["registered"],
                         "predicted": f"{e['centre']:.3f} [{e['low']:.3f}, {e['high']:.3f}]",
                         "measured": f"{h.ratio:.3f} [{h.ci_low:.3f}, {h.ci_high:.3f}]",
                         "held": bool(e["low"] <= h.ratio <= e["high"]),
                         "measured_over_predicted": round(float(h.ratio) / float(e["centre"]), 4)})
    return pd.DataFrame(rows, columns=CHECK_COLUMNS)


def same_host(e: dict) -> tuple:
    """What makes two long-build predictions one: a host's long build is predicted once, before it is measured;
    registering it again, perhaps after its runs are in the dataset, would not be a prediction."""
    return e["configuration"], e["workload"], e["processor"]


def add_arguments(parser):
    parser.add_argument("--data", default=None, help="the dataset folder (default: data/)")
    parser.add_argument("--output", default=str(predictions.PREDICTIONS_TOML), help="the registration file to add to")


def run(args) -> int:
    from analysis.paths import DATA_DIR
    runs_dir = (Path(args.data) if args.data else DATA_DIR) / "runs"
    q = debates_spec.load()[SEED]
    slopes = run_slopes(runs_dir, sorted({w for w, wo in q.contested if wo == BASELINE}))
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    new = compute(slopes, q.contested, f"{today}, commit {predictions.head_commit()}")
    if not new:
        raise HeapcostError(f"no run holds {SHORT_BUILD} at two or more scales under {BASELINE} and a contested "
                            f"configuration of seed {SEED}: measure it with SCALES first")
    path = Path(args.output)
    earlier = predictions.load_long_builds(path)
    new, already = predictions.not_registered(new, earlier, key=same_host)
    for e in already:
        print(f"seed {e['seed']} {e['configuration']} on {e['workload']} on {e['processor']}: registered before "
              f"({e['registered']}); left as it was")
    if new:
        predictions.write(path, predictions.load(path), earlier + new, predictions.load_next_machines(path))
    for e in new:
        print(f"seed {e['seed']} {e['configuration']} on {e['workload']} on {e['processor']}: predicted "
              f"{e['centre']} [{e['low']}, {e['high']}] from the per-unit cost of {e['from_workload']} "
              f"({len(e['from_runs'])} run(s))")
    return 0


# ---- what the long build measured, host by host ------------------------------------------------------------

TREE_PEAK = "tree_peak_rss_kb"  # the build's whole process tree at its peak (the workload's driver samples it)
TREE_PEAK_ANON = "tree_peak_anon_kb"  # the same, of anonymous memory alone (where the processes' heaps live)
METRICS = ("wall_s", "user_s", "sys_s", TREE_PEAK, TREE_PEAK_ANON)
MEASURED_COLUMNS = ["seed", "configuration", "workload", "processor", "metric", "n_runs", "ratio", "ci_low",
                    "ci_high", "display"]


def measured(cells: dict, runs_dir: Path, pairs, workload: str = LONG_BUILD) -> pd.DataFrame:
    """Per contested pair, host and metric (wall, user and system time, the process tree's peak resident and
    anonymous memory): the
    with/without ratio of the long build, each run's through its own baseline, a host's runs pooled, their hosts
    from the dataset (or its runs folder)."""
    from analysis.publish.render.formats import fmt_interval
    from analysis.stats.within_run import ratio_within_run
    processors = pool._processors(dataset.load(runs_dir))
    rows = []
    for metric in METRICS:
        table = cells.get(metric)
        if table is None or table.empty or "workload" not in table:
            continue
        table = table[table["workload"] == workload]
        for with_, without in pairs:
            per_run = []
            for run_id, sub in table.groupby("run_id", sort=True):
                d = ratio_within_run(sub, with_, without)
                if d is not None:
                    per_run.append({"processor": processors.get(run_id, "?"), "estimate": d.estimate, "se": d.se,
                                    "df": d.df, "build": "one"})
            for processor, sub in pd.DataFrame(per_run).groupby("processor", sort=True) if per_run else []:
                p = random_effects.pool(sub.assign(host="one"))
                lo, hi = Difference(p.estimate, p.se, p.df).interval()
                ratio, lo, hi = math.exp(p.estimate), math.exp(lo), math.exp(hi)
                rows.append({"seed": SEED, "configuration": f"{with_} / {without}", "workload": workload,
                             "processor": processor, "metric": metric, "n_runs": len(sub), "ratio": ratio,
                             "ci_low": lo, "ci_high": hi, "display": fmt_interval(ratio, lo, hi)})
    return pd.DataFrame(rows, columns=MEASURED_COLUMNS)
