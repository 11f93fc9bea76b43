import numpy as np
import pandas as pd
import pytest

from analysis.stats import simulate

DESIGN_COLUMNS = ("run_id, seq, block, warmup, workload, allocator, scale, status, reason, exit_code, "
                  "signal, wall_s, user_s, sys_s, maxrss_kb, minflt, majflt, nvcsw, nivcsw, "
                  "clock_probe_s, probe_before_s, probe_after_s, malloc_lib, env_pad, loadavg1, "
                  "started_utc, other_cpu_s, steal_s, interfered, cpu_other_s, requests_per_s, p50_ms, p99_ms, "
                  "tree_peak_rss_kb, tree_peak_anon_kb").split(", ")


def test_trials_table_has_the_design_columns_and_is_seeded():
    sc = simulate.Scenario(failure_prob=0.1)
    a, b = simulate.simulate_trials(sc, 7), simulate.simulate_trials(sc, 7)
    assert list(a.columns) == DESIGN_COLUMNS
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(simulate.simulate_trials(sc, 8))
    assert a["seq"].is_unique
    assert set(a["status"]) == {"ok", "crashed"}
    per_block = a.groupby("block").size()
    assert (per_block == len(sc.workloads) * len(sc.ratios)).all()


def test_clean_simulation_has_the_true_ratio():
    sc = simulate.Scenario(ratios={"base": 1.0, "x": 1.2}, n_blocks=400, noise=simulate.CLEAN)
    t = simulate.simulate_trials(sc, 1)
    t = t[t["warmup"] == 0]
    med = t.groupby("allocator")["wall_s"].median()
    assert med["x"] / med["base"] == pytest.approx(1.2, rel=0.003)


def test_clock_drops_show_in_the_probe_and_interference_does_not():
    nm = simulate.NoiseModel(clock_drop_prob=0.1, interference_prob=0.3, outlier_prob=0.0)
    t = simulate.simulate_trials(simulate.Scenario(noise=nm, n_blocks=200), 2)
    slow_probe = t["clock_probe_s"] > 0.002 * 1.15
    assert 0.1 < slow_probe.mean() < 0.6
    ratio = t["wall_s"] / t["clock_probe_s"]
    # with the clock divided out, what is left (interference, noise) no longer tracks the probe
    assert abs(np.corrcoef(np.log(ratio), slow_probe)[0, 1]) < 0.1
    assert np.corrcoef(np.log(t["wall_s"]), slow_probe)[0, 1] > 0.5


# The coverage test: the 95% intervals of `compare` cover the true ratio 93-97% of the time over
# many seeded simulated datasets with drift, clock drops, interference, heavy tails and outliers,
# and are at most 0.6x as wide as a Welch interval on the raw times of the same data.
@pytest.fixture(scope="module")
def noisy_study():
    parts = [simulate.coverage_study(simulate.Scenario(n_blocks=nb), 400, seed=10_000 * nb)
             for nb in (12, 24)]
    return pd.concat(parts, ignore_index=True)


@pytest.mark.slow
def test_coverage_of_compare_intervals_is_nominal(noisy_study):
    coverage = noisy_study["covered"].mean()
    assert len(noisy_study) == 800
    assert 0.93 <= coverage <= 0.97, coverage


@pytest.mark.slow
def test_intervals_are_much_tighter_than_welch_on_raw_times(noisy_study):
    ratio = noisy_study["halfwidth"] / noisy_study["welch_halfwidth"]
    assert ratio.mean() <= 0.6, ratio.mean()


@pytest.mark.slow  # the study takes 13 s on a fast host; in `make test` the slow tests above share it
def test_the_coverage_band_rejects_intervals_that_are_too_narrow(noisy_study):
    # the same check on intervals shrunk by 30%: it must fail, or the band tests nothing
    centre = np.log(noisy_study["ratio"])
    half = 0.7 * noisy_study["halfwidth"]
    truth = np.log(noisy_study["truth"])
    shrunk = ((centre - half <= truth) & (truth <= centre + half)).mean()
    assert shrunk < 0.93


@pytest.mark.slow
def test_coverage_on_clean_gaussian_data():
    study = simulate.coverage_study(simulate.Scenario(noise=simulate.CLEAN, n_blocks=10), 150,
                                    seed=99)
    assert 0.90 <= study["covered"].mean() <= 0.99


@pytest.mark.slow
def test_sequential_order_breaks_the_naive_interval_but_not_ours():
    # hyperfine's order (all runs of A, then all of B) lets drift and clock regimes bias raw means
    study = simulate.coverage_study(simulate.Scenario(order="sequential"), 150, seed=7)
    assert study["welch_covered"].mean() < 0.85
    assert 0.90 <= study["covered"].mean() <= 0.99
