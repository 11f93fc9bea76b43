"""The bench's pure parts: the adaptive design on simulated data and the printed table."""
from analysis.harness.bench import command as bench


def test_adaptive_design_needs_fewer_trials_than_fixed():
    r = bench.adaptive_vs_fixed(target=0.03, seeds=range(2), start_blocks=5)
    assert r["adaptive_trials_mean"] < r["fixed_trials_mean"]
    for row in r["per_seed"]:
        # the noisy allocator needs more runs than the quiet one
        assert row["adaptive_runs"]["noisy"] > row["adaptive_runs"]["quiet"]


def test_format_results_has_a_row_per_benchmark():
    results = {
        "overhead": {"heapcost_per_trial_s": 0.003, "probe_fixed_s": 0.004,
                     "hyperfine_per_run_s": 0.0015, "heapcost_minus_hyperfine_s": 0.0015},
        "adaptive": {"target": 0.01, "adaptive_trials_mean": 100, "fixed_trials_mean": 150,
                     "saving": 1 / 3},
    }
    text = bench.format_results(results)
    assert "+1.50 ms" in text and "adaptive saves 33%" in text
    assert text.count("\n") == 3


def test_format_results_tabulates_candidates_best_first_and_the_published_aa():
    cand = lambda name, hw, t: {"candidate": name, "allocators": ["glibc", "scudo"], "workload": "small-loop",  # noqa: E731
                                "elapsed_s": t, "ratio": 1.1, "ci": [1.09, 1.11], "halfwidth": hw, "n": "9 pairs",
                                "precision_per_s": 1 / (hw ** 2 * t), "note": "n" + name}
    results = {"protocols": [cand("slow", 0.02, 180), cand("fast", 0.005, 180)],
               "aa": {"source": "x.csv", "runs": [{"run_id": "r1", "cells": 40, "exclude_1": 2,
                                                   "methods": ["m"], "median_halfwidth": 0.004,
                                                   "excluding": ["c1 w 0.99 [0.98, 0.995]"]}]}}
    text = bench.format_results(results)
    rows = [line for line in text.splitlines() if line.startswith("| fast") or line.startswith("| slow")]
    assert rows[0].startswith("| fast") and "1.00x the best" in rows[0] and "0.06x the best" in rows[1]
    assert "| r1 | 40 | 2 (5%) | ±0.40% |" in text and "c1 w 0.99" in text


def test_aa_published_counts_the_intervals_excluding_1(tmp_path):
    path = tmp_path / "results_aa.csv"
    path.write_text("run_id,workload,allocator,ratio,ci_low,ci_high,n,method,excludes_1\n"
                    "r,w,c1,1.0,0.99,1.01,20,m,False\nr,v,c1,0.98,0.97,0.99,20,m,True\n")
    aa = bench.aa_published(path)
    assert aa["runs"][0]["cells"] == 2 and aa["runs"][0]["exclude_1"] == 1
    assert aa["runs"][0]["excluding"] == ["c1 v 0.9800 [0.9700, 0.9900]"]
    assert "make paper" in bench.aa_published(tmp_path / "none.csv")["missing"]
