"""A first look at a run: what was measured, what failed and why (no statistics here)."""
from pathlib import Path

import pandas as pd

from analysis.contract.schema import OK, measured_trials, read_table


def read_trials(run_dir) -> pd.DataFrame:
    return read_table(Path(run_dir) / "trials.csv")


def run_summary(run_dir) -> pd.DataFrame:
    """Per workload and allocator: trials by status, and the median wall time and max RSS of ok trials
    (for a callgrind run: status and instruction counts)."""
    if not (Path(run_dir) / "trials.csv").exists():
        counts = read_table(Path(run_dir) / "counts.csv")
        return counts[["workload", "allocator", "scale", "status", "instructions", "free_calls", "reason"]]
    df = read_trials(run_dir)
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
