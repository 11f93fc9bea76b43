"""A workload's own measures beside its time, each compared with the baseline's in the same run, with intervals,
as wall time is: the throughput and latency percentiles a request-serving workload (redis) reports per trial
(trial columns requests_per_s, p50_ms, p99_ms; a throughput ratio above 1 is faster, a latency ratio above 1
slower), and the peak resident and anonymous memory of a build's whole process tree (tree_peak_rss_kb,
tree_peak_anon_kb, which its driver samples: ru_maxrss holds only the largest single process)."""
import pandas as pd

from analysis.publish.results.cpu_split import comparisons_by_run

METRICS = ("requests_per_s", "p50_ms", "p99_ms")  # a server's (results_server.csv)
BUILD_METRICS = ("tree_peak_rss_kb", "tree_peak_anon_kb")  # a build's


def _reported(rt, metric):
    if metric not in rt.table.columns:
        return None  # a run from before the server metrics
    reported = rt.table.loc[pd.to_numeric(rt.table[metric], errors="coerce") > 0, "workload"]
    return rt.table[rt.table["workload"].isin(set(reported))]


def cells(time_runs, baseline: str, against) -> dict:
    """metric -> every run's comparisons with its own baseline on the workloads that reported the metric (rows
    with run_id), each made by `against` (results.against)."""
    return comparisons_by_run(time_runs, baseline, against, METRICS + BUILD_METRICS, _reported)


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
