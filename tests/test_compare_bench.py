"""The bench's pure parts: the adaptive design on simulated data and the printed table."""
from analysis.harness import bench


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
