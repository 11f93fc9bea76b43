"""A server's own measures beside its time: the throughput and latency percentiles a request-serving workload
(redis) reports per trial (trial columns requests_per_s, p50_ms, p99_ms), each compared with the baseline's in the
same run, with intervals, as wall time is. A throughput ratio above 1 is faster; a latency ratio above 1 slower."""
import pandas as pd

from analysis.errors import HeapcostError

METRICS = ("requests_per_s", "p50_ms", "p99_ms")


def cells(time_runs, baseline: str, against) -> dict:
    """metric -> every run's comparisons with its own baseline on the workloads that reported the metric (rows
    with run_id), each made by `against` (results.against)."""
    out = {}
    for metric in METRICS:
        parts = []
        for rt in time_runs:
            if metric not in rt.table.columns:
                continue  # a run from before the server metrics
            reported = rt.table.loc[pd.to_numeric(rt.table[metric], errors="coerce") > 0, "workload"]
            table = rt.table[rt.table["workload"].isin(set(reported))]
            if table.empty or baseline not in set(table["allocator"].astype(str)):
                continue
            try:
                parts.append(against(table, baseline, metric).results.assign(run_id=rt.run_id))
            except HeapcostError:
                continue
        out[metric] = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    return out


def table(cells_by_metric: dict) -> pd.DataFrame:
    """One row per (run, workload, allocator): the ratio to the baseline and its interval for each metric."""
    columns = ["run_id", "workload", "allocator"]
    merged = None
    for metric in METRICS:
        rows = cells_by_metric.get(metric)
        if rows is None or rows.empty:
            continue
        part = rows[columns + ["ratio", "ci_low", "ci_high", "n", "n_baseline"]].rename(
            columns={c: f"{metric}_{c}" for c in ("ratio", "ci_low", "ci_high", "n", "n_baseline")})
        merged = part if merged is None else merged.merge(part, on=columns, how="outer")
    if merged is None:
        return pd.DataFrame(columns=columns)
    return merged.sort_values(columns).reset_index(drop=True)
