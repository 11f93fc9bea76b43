import numpy as np
import pytest

from analysis.stats import noise


def test_clock_regimes_finds_two_clock_states():
    rng = np.random.default_rng(1)
    slow = rng.random(200) < 0.2
    log_probe = np.where(slow, np.log(1.3), 0.0) + rng.normal(0, 0.003, 200)
    reg = noise.clock_regimes(log_probe)
    assert reg.count == 2
    assert np.array_equal(reg.labels == 1, slow)


@pytest.mark.parametrize("draw", ["normal", "t3"])
def test_clock_regimes_rarely_splits_a_single_regime(draw):
    found = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        x = rng.normal(0, 0.003, 150) if draw == "normal" else rng.standard_t(3, 150) * 0.003
        found += noise.clock_regimes(x).count > 1
    assert found <= 4


def test_change_points_finds_a_step_and_not_noise():
    rng = np.random.default_rng(2)
    y = rng.normal(0, 1, 120)
    y[70:] += 2.0
    cps = noise.change_points(y)
    assert len(cps) == 1 and abs(cps[0] - 70) <= 3
    false = sum(bool(noise.change_points(np.random.default_rng(s).standard_t(3, 120)))
                for s in range(50))
    assert false <= 5


def test_change_points_ignore_a_single_outlier():
    y = np.random.default_rng(3).normal(0, 1, 80)
    y[40] = 30
    assert noise.change_points(y) == []


def test_classify_outliers():
    z_raw = np.array([0.0, 5.0, 6.0, -5.0, 1.0])
    z_adj = np.array([0.0, 0.5, 6.0, -5.0, 4.0])
    assert list(noise.classify_outliers(z_raw, z_adj)) == [
        "none", "slow-clock", "slow-unexplained", "fast", "slow-unexplained"]
    assert list(noise.classify_outliers(z_raw)) == [
        "none", "slow-unexplained", "slow-unexplained", "fast", "none"]


def test_robust_z_handles_ties():
    z = noise.robust_z([1.0, 1.0, 1.0, 1.0, 2.0])
    assert z[-1] > 3.5 and np.all(z[:4] == 0)
    assert np.all(noise.robust_z([3.0] * 5) == 0)


def test_drift_detects_a_trend():
    seq = np.arange(100)
    rng = np.random.default_rng(4)
    assert noise.drift(seq, seq * 0.01 + rng.normal(0, 0.1, 100)).p < 0.01
    assert noise.drift(seq, rng.normal(0, 0.1, 100)).p > 0.01


def test_variance_components_recover_known_truth():
    rng = np.random.default_rng(5)
    units, reps = 400, 5
    unit_means = rng.normal(0, 2.0, units)  # between variance 4
    values = np.repeat(unit_means, reps) + rng.normal(0, 1.0, units * reps)  # within 1
    vc = noise.variance_components(values, np.repeat(np.arange(units), reps))
    assert vc.within == pytest.approx(1.0, rel=0.1)
    assert vc.between == pytest.approx(4.0, rel=0.15)
    # Kalibera & Jones: cheap repetitions, costly units -> repeat more inside a unit
    assert noise.optimal_repetitions(vc, cost_repetition=1, cost_unit=100) in (5, 6)  # sqrt(100 / 4)
    assert noise.optimal_repetitions(vc, cost_repetition=1, cost_unit=1) == 1


def test_runs_needed_reaches_the_target_width():
    sd, target = 0.02, 0.01
    n = noise.runs_needed(2 * sd ** 2, target)
    rng = np.random.default_rng(6)
    widths = []
    for _ in range(200):
        a, b = rng.normal(0, sd, n), rng.normal(0, sd, n)
        se = np.sqrt(a.var(ddof=1) / n + b.var(ddof=1) / n)
        widths.append(1.99 * se)
    assert np.mean(widths) == pytest.approx(target, rel=0.08)
    assert noise.runs_needed(2 * sd ** 2, target / 2) > 3.5 * n


def test_drift_basis():
    assert noise.drift_basis(np.arange(10)) is None
    b = noise.drift_basis(np.arange(60) * 3)
    assert b.shape == (60, 3)  # a linear spline with 2 knots
    assert np.allclose(b.mean(axis=0), 0)
