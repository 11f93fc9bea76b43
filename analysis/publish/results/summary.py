"""A first look at a run: what was measured, what failed and why (no statistics here)."""
from pathlib import Path

import pandas as pd

from analysis.contract.schema import OK, declared_orientation, measured_trials, read_table


def _run_info(run_dir) -> dict:
    import json

    try:
        return json.loads((Path(run_dir) / "run.json").read_text())
    except (OSError, ValueError):
        return {}


def read_trials(run_dir) -> pd.DataFrame:
    return read_table(Path(run_dir) / "trials.csv")


def run_summary(run_dir) -> pd.DataFrame:
    """Per workload and allocator: trials by status, and the median wall time and max RSS of ok trials
    (for a callgrind run: status and instruction counts)."""
    run_dir = Path(run_dir)
    if (run_dir / "counts.csv").exists():
        counts = read_table(run_dir / "counts.csv")
        return counts[["workload", "allocator", "scale", "status", "instructions", "free_calls", "reason"]]
    parts = ([pairs_summary(declared_orientation(_run_info(run_dir), read_table(run_dir / "pairs.csv")))]
             if (run_dir / "pairs.csv").exists() else [])
    if not (run_dir / "trials.csv").exists():
        return parts[0] if parts else pd.DataFrame()
    return pd.concat([*parts, trials_summary(read_trials(run_dir))], ignore_index=True)


def pairs_summary(pairs: pd.DataFrame) -> pd.DataFrame:
    """A lockstep run: per workload and allocator (B, against A: the baseline, or the other side of a direct
    pair), pairs by status and the median ratio of the processes' active times."""
    measured = measured_trials(pairs)
    ok = measured[measured["status"] == OK]
    keys = ["workload", "allocator_b", "allocator_a"]
    table = measured.pivot_table(index=keys, columns="status", values="seq", aggfunc="count", fill_value=0)
    table["median_active_ratio"] = (ok["active_b_s"] / ok["active_a_s"]).groupby([ok[k] for k in keys]).median()
    return table.reset_index().rename(columns={"allocator_b": "allocator", "allocator_a": "baseline"})


def trials_summary(df: pd.DataFrame) -> pd.DataFrame:
    measured = measured_trials(df)
    ok = measured[measured["status"] == OK]
    table = measured.pivot_table(index=["workload", "allocator"], columns="status", values="seq",
                                 aggfunc="count", fill_value=0)
    table["median_wall_s"] = ok.groupby(["workload", "allocator"])["wall_s"].median()
    table["median_maxrss_kb"] = ok.groupby(["workload", "allocator"])["maxrss_kb"].median()
    return table.reset_index()


def failures(run_dir) -> pd.DataFrame:
    """Every trial that was not ok, with its reason: nothing is dropped silently."""
    df = read_trials(run_dir)
    return df[df["status"] != OK][["seq", "workload", "allocator", "status", "reason"]]
