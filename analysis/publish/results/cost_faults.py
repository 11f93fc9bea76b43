"""What the cost check's misses come from, measured: the check's programs run alone as trials (`python -m analysis
cost-check faults`), each run's minor page faults and user and system CPU time recorded, set beside each cell's
miss (results_cost_faults.csv).

The model (stats/cost_model.py) charges a program its calls at the per-call cells' costs; it has no term for the
fresh pages an allocator takes beyond the program's own (a quarantine holds freed memory back, so new
allocations touch pages that reuse would not). Per processor kind, program and configuration: the medians of the
measured trials (status ok, not warm-up) of the configuration and of the baseline in the same run, their
difference in minor faults and in user and system time, and, from the check (publish/results/cost_check.py, the
model as it is now where it predicts the cell, else as registered), the predicted and the measured ratio (in
turns with the baseline), the miss on the log scale and in milliseconds of the baseline's CPU time, and the share
of that miss the added system time carries. The summary ranks the added faults per millisecond against the
misses (Spearman, over every cell and per configuration) and, for a control with knock-outs measured beside it
(knock_outs.TOGETHER), the share of the control's added faults each knock-out removes.
"""
import math

import pandas as pd

from analysis.contract import dataset
from analysis.contract.schema import usable_trials

COLUMNS = ["run_id", "processor", "program", "allocator", "trials", "base_minflt", "minflt", "added_minflt",
           "base_cpu_ms", "added_minflt_per_ms", "added_user_ms", "added_sys_ms", "predicted", "measured",
           "log_error", "miss_ms", "sys_share_of_miss", "added_minflt_display", "added_user_display",
           "added_sys_display", "check_display", "alone", "turns_over_alone"]
# alone: the ratio of the configuration's median CPU time (user + system) over the baseline's in the trials, each
# program run alone; turns_over_alone: log(the check's measured ratio, in turns of a millisecond with the baseline
# on one CPU / alone): where the two protocols disagree (docs/design.md, the check's turns amplify placement)
BASELINE = "glibc"
UNDER = math.log(1.05)  # a cell the model underpredicts: measured over predicted above 1.05
MANY_FAULTS = 1000      # a control's added faults from which a knock-out's share of them is read


def fault_runs(runs_dir) -> list:
    """The complete time runs of trials that ran only the cost check's programs (`cost-check faults`);
    `runs_dir`: the dataset, or its runs folder."""
    from analysis.harness.workloads.cost_programs import BY_NAME

    ds = dataset.load(runs_dir)
    out = []
    for run in ds.runs("time"):
        params = run.info.get("params") or {}
        workloads = set(params.get("workloads") or ())
        if (run.complete and params.get("protocol") == "trials" and ds.has(run, "trials.csv")
                and workloads and workloads <= set(BY_NAME)):
            out.append(run)
    return out


def registered_programs(runs_dir) -> set[tuple[str, str]]:
    """(run, program) where the run ran a registration's very program and input bytes (cost_check.matching_runs);
    `runs_dir`: the dataset, or its runs folder."""
    from analysis.publish.results import cost_check

    ds = dataset.load(runs_dir)
    out = set()
    for folder in cost_check.registrations():
        for program, runs in cost_check.matching_runs(ds, cost_check.load(folder)).items():
            out.update((run, program) for run in runs)
    return out


def _medians(trials: pd.DataFrame) -> pd.DataFrame:
    t = usable_trials(trials).copy()
    for c in ("minflt", "user_s", "sys_s"):
        t[c] = pd.to_numeric(t[c], errors="coerce")
    return t.groupby(["workload", "allocator"]).agg(trials=("minflt", "size"), minflt=("minflt", "median"),
                                                    user_s=("user_s", "median"), sys_s=("sys_s", "median"))


def table(runs_dir, checked: pd.DataFrame) -> pd.DataFrame:
    """One row per fault run, program and configuration (COLUMNS); `checked`: the check's cells
    (cost_check.COLUMNS with the current model's columns); `runs_dir`: the dataset, or its runs folder."""
    from analysis.contract.host import dataset_machines

    ds = dataset.load(runs_dir)
    kinds = {run: m.kind for run, m in dataset_machines(ds).items()}
    registered = registered_programs(ds)
    frames = [cells_of(ds.table(run, "trials.csv"), run.run_id, kinds.get(run.run_id, ""), checked,
                       {p for r, p in registered if r == run.run_id}) for run in fault_runs(ds)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)


def cells_of(trials: pd.DataFrame, run_id: str, processor: str, checked: pd.DataFrame, programs) -> pd.DataFrame:
    """One run's rows (COLUMNS): each of `programs` under each configuration against the baseline's trials."""
    med = _medians(trials)
    rows = []
    for (program, allocator), r in med.iterrows():
        if allocator == BASELINE or (program, BASELINE) not in med.index or program not in programs:
            continue
        b = med.loc[(program, BASELINE)]
        base_cpu_ms = 1000 * (b["user_s"] + b["sys_s"])
        row = {"run_id": run_id, "processor": processor, "program": program, "allocator": allocator,
               "trials": int(r["trials"]), "base_minflt": b["minflt"], "minflt": r["minflt"],
               "added_minflt": r["minflt"] - b["minflt"], "base_cpu_ms": base_cpu_ms,
               "added_minflt_per_ms": (r["minflt"] - b["minflt"]) / base_cpu_ms if base_cpu_ms > 0 else math.nan,
               "added_user_ms": 1000 * (r["user_s"] - b["user_s"]), "added_sys_ms": 1000 * (r["sys_s"] - b["sys_s"])}
        row.update(_miss(checked, processor, program, allocator, base_cpu_ms, row["added_sys_ms"]))
        if base_cpu_ms > 0:
            row["alone"] = 1000 * (r["user_s"] + r["sys_s"]) / base_cpu_ms
            if row.get("measured") and row["alone"] > 0:
                row["turns_over_alone"] = math.log(row["measured"] / row["alone"])
        row.update(added_minflt_display=f"{row['added_minflt']:+.0f}",
                   added_user_display=f"{row['added_user_ms']:+.1f}", added_sys_display=f"{row['added_sys_ms']:+.1f}",
                   check_display=(f"{row['predicted']:.3f} / {row['measured']:.3f}" if "measured" in row else ""))
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def _miss(checked: pd.DataFrame, processor: str, program: str, allocator: str, base_cpu_ms: float,
          added_sys_ms: float) -> dict:
    """The check's predicted and measured ratio of the cell, its miss and the added system time's share of it."""
    if checked is None or checked.empty:
        return {}
    cell = checked[(checked["processor"] == processor) & (checked["program"] == program)
                   & (checked["allocator"] == allocator)]
    if cell.empty or pd.isna(cell.iloc[0]["measured"]):
        return {}
    c = cell.iloc[0]
    now = "current_predicted" in c and pd.notna(c["current_predicted"])
    predicted = float(c["current_predicted"] if now else c["predicted"])
    measured = float(c["measured"])
    miss_ms = (measured - predicted) * base_cpu_ms
    return {"predicted": predicted, "measured": measured, "log_error": math.log(measured / predicted),
            "miss_ms": miss_ms, "sys_share_of_miss": added_sys_ms / miss_ms if miss_ms > 0 else math.nan}


def numbers(t: pd.DataFrame, knock_outs: dict[str, list[str]]) -> dict:
    """The summary the paper prints: how the added faults rank with the misses, what they carry of the misses a
    control is underpredicted by, and what share of its added faults each of its knock-outs removes."""
    from scipy import stats

    done = t[t["log_error"].notna() & t["added_minflt_per_ms"].notna()] if len(t) else t
    if done.empty:
        return {"runs": sorted(set(t["run_id"])) if len(t) else [], "cells": 0}

    def rank(sub):
        if len(sub) < 5:
            return None
        r = stats.spearmanr(sub["added_minflt_per_ms"], sub["log_error"])
        p = "p < 0.001" if r.pvalue < 0.001 else f"p = {r.pvalue:.2f}"
        return {"cells": int(len(sub)), "rho": f"{r.correlation:.2f}", "p": p}

    out = {"runs": sorted(set(t["run_id"])), "trials": int(t["trials"].sum()), "cells": int(len(done)),
           "under_percent": f"{100 * math.expm1(UNDER):.0f}", "many_faults": MANY_FAULTS,
           "programs": int(done["program"].nunique()), "all": rank(done),
           "by_allocator": [{"allocator": a, **r} for a, r in ((a, rank(s)) for a, s in done.groupby("allocator"))
                            if r]}
    controls = []
    for control, kos in sorted(knock_outs.items()):
        mine = done[done["allocator"] == control]
        under = mine[mine["log_error"] > UNDER]
        entry = {"control": control, "cells": int(len(mine)), "under": int(len(under)),
                 "under_programs": sorted(under["program"]),
                 "under_median_added_minflt": f"{under['added_minflt'].median():.0f}" if len(under) else "",
                 "under_median_sys_share_percent": (f"{100 * under['sys_share_of_miss'].median():.0f}"
                                                    if under["sys_share_of_miss"].notna().any() else ""),
                 "knock_outs": []}
        many = t[(t["allocator"] == control) & (t["added_minflt"] >= MANY_FAULTS)]
        for ko in sorted(kos):
            pairs = many.merge(t[t["allocator"] == ko][["run_id", "program", "added_minflt"]],
                               on=["run_id", "program"], suffixes=("", "_ko"))
            if len(pairs):
                share = (pairs["added_minflt"] - pairs["added_minflt_ko"]) / pairs["added_minflt"]
                entry["knock_outs"].append({"knock_out": ko, "programs": int(len(pairs)),
                                            "median_share_removed_percent": f"{100 * share.median():.0f}",
                                            "low_percent": f"{100 * share.min():.0f}",
                                            "high_percent": f"{100 * share.max():.0f}"})
        controls.append(entry)
    out["controls"] = controls
    out["protocols"] = protocols(t)
    return out


DISAGREE = math.log(1.10)  # the two protocols disagree on a cell: its ratios more than 10% apart


def protocols(t: pd.DataFrame) -> dict:
    """How the check's ratio in turns compares with the same cell's ratio alone, over the cells both measure:
    median and 90th percentile of |log(turns / alone)| in percent, the cells more than 10% apart, and the
    largest; per processor kind. Empty where no cell has both."""
    both = t[t["turns_over_alone"].notna()] if len(t) and "turns_over_alone" in t else t.iloc[0:0]
    if both.empty:
        return {}
    out = []
    for processor, sub in both.groupby("processor", sort=True):
        gap = sub["turns_over_alone"].astype(float)
        worst = sub.loc[gap.abs().idxmax()]
        out.append({"processor": processor, "cells": int(len(sub)), "programs": int(sub["program"].nunique()),
                    "median_percent": f"{100 * math.expm1(float(gap.abs().median())):.1f}",
                    "p90_percent": f"{100 * math.expm1(float(gap.abs().quantile(0.9))):.1f}",
                    "disagree": int((gap.abs() > DISAGREE).sum()), "disagree_percent": f"{100 * math.expm1(DISAGREE):.0f}",
                    "largest": {"program": worst["program"], "allocator": worst["allocator"],
                                "turns": f"{float(worst['measured']):.2f}", "alone": f"{float(worst['alone']):.2f}"}})
    return {"kinds": out}
