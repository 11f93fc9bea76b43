"""The server workloads' throughput and latency ratios (analysis/publish/results/server_metrics.py), on seeded simulated
trials with a known truth, and which workloads the method section says ran single-core."""
from types import SimpleNamespace

import numpy as np
import pandas as pd

from analysis.publish.results import server_metrics
from analysis.publish.results.comparisons import against
from analysis.publish.results.writer import cpu_facts


def _run(seed, true_ratio, n=30, with_metrics=True):
    rng = np.random.default_rng(seed)
    rows = []
    for alloc, factor in (("glibc", 1.0), ("other", true_ratio)):
        for i in range(n):
            rows.append({"workload": "redis", "allocator": alloc, "status": "ok", "warmup": 0, "block": i, "scale": 1,
                         "wall_s": 1.0 / factor * np.exp(rng.normal(0, 0.05)),
                         "maxrss_kb": 16000, "requests_per_s": 40000 * factor * np.exp(rng.normal(0, 0.05)),
                         "p50_ms": 0.5 / factor * np.exp(rng.normal(0, 0.05)),
                         "p99_ms": 4.0 / factor * np.exp(rng.normal(0, 0.1))})
            rows.append({"workload": "small-loop", "allocator": alloc, "status": "ok", "warmup": 0, "block": i,
                         "scale": 1, "wall_s": 0.5, "maxrss_kb": 1000, "requests_per_s": None, "p50_ms": None,
                         "p99_ms": None})
    table = pd.DataFrame(rows)
    if not with_metrics:
        table = table.drop(columns=list(server_metrics.METRICS))
    return SimpleNamespace(run_id=f"run{seed}", table=table)


def test_throughput_and_latency_ratios_cover_the_simulated_truth_and_only_the_server_reports_them():
    truth = 0.8
    covered = {m: 0 for m in server_metrics.METRICS}
    for seed in range(20):
        cells = server_metrics.cells([_run(seed, truth)], "glibc", against)
        for metric, expected in (("requests_per_s", truth), ("p50_ms", 1 / truth), ("p99_ms", 1 / truth)):
            (row,) = cells[metric].to_dict("records")
            assert row["workload"] == "redis" and row["allocator"] == "other" and row["run_id"] == f"run{seed}"
            covered[metric] += row["ci_low"] <= expected <= row["ci_high"]
            assert not row["ci_low"] <= 1 <= row["ci_high"]  # a 20% change at 5% noise is resolved
    assert all(c >= 17 for c in covered.values()), covered  # 95% intervals: 19 of 20 expected
    table = server_metrics.table(cells)
    assert list(table["workload"]) == ["redis"] and {"requests_per_s_ratio", "p99_ms_ci_high"} <= set(table)


def test_runs_from_before_the_metrics_give_no_rows():
    cells = server_metrics.cells([_run(1, 0.9, with_metrics=False)], "glibc", against)
    assert all(cells[m].empty for m in server_metrics.METRICS)
    assert server_metrics.table(cells).empty


def test_the_paper_is_told_which_workloads_ran_single_core():
    trials = pd.DataFrame({"workload": ["redis", "small-loop", "server"]})
    info = {"trial_cpus": {"redis": [0, 1], "small-loop": 1, "server": [0, 1]}}
    assert cpu_facts(info, trials) == {"spread_workloads": ["redis", "server"], "single_core_workloads": ["small-loop"]}
    old = {"pinning": [{"trial_cpu": 1}]}  # before trial_cpus: every trial on the one trial CPU
    assert cpu_facts(old, trials)["single_core_workloads"] == ["redis", "server", "small-loop"]
    assert cpu_facts({"trial_cpus": {"redis": None}}, trials) == {"spread_workloads": [], "single_core_workloads": []}
