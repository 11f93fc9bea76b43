import numpy as np
import pytest
from scipy import stats as sps

from analysis.stats import estimators as stats


def test_trimmed_location_matches_scipy_trim_mean():
    x = np.random.default_rng(1).standard_t(3, 23)
    loc = stats.trimmed_location(x)
    assert loc.estimate == pytest.approx(sps.trim_mean(x, 0.2))
    assert loc.h == 23 - 2 * 4


def test_yuen_difference_matches_scipy_trimmed_welch_test():
    rng = np.random.default_rng(2)
    a, b = rng.standard_t(3, 17) + 0.5, rng.standard_t(3, 25)
    diff = stats.yuen_difference(a, b)
    ref = sps.ttest_ind(a, b, equal_var=False, trim=0.2)
    assert diff.estimate / diff.se == pytest.approx(ref.statistic)
    assert diff.df == pytest.approx(ref.df)
    lo, hi = diff.interval()
    ci = ref.confidence_interval()
    assert (lo, hi) == pytest.approx((ci.low, ci.high))


def test_trimmed_location_rejects_too_few_values():
    with pytest.raises(ValueError):
        stats.trimmed_location([1.0])


def test_welch_ratio_interval_matches_scipy():
    rng = np.random.default_rng(3)
    a, b = rng.normal(11, 1, 12), rng.normal(10, 2, 9)
    ratio, lo, hi = stats.welch_ratio_interval(a, b)
    ci = sps.ttest_ind(a, b, equal_var=False).confidence_interval()
    assert ratio == pytest.approx(a.mean() / b.mean())
    assert lo == pytest.approx(ratio + ci.low / b.mean() - (a.mean() - b.mean()) / b.mean())
    assert hi == pytest.approx(ratio + ci.high / b.mean() - (a.mean() - b.mean()) / b.mean())


def test_hyperfine_interval_is_ratio_times_hypot_of_cvs():
    a, b = np.array([2.0, 2.2, 1.8]), np.array([1.0, 1.1, 0.9])
    ratio, lo, hi = stats.hyperfine_ratio_interval(a, b)
    cv = 0.1
    assert ratio == pytest.approx(2.0)
    assert hi - ratio == pytest.approx(2.0 * np.hypot(cv, cv))
    assert ratio - lo == pytest.approx(hi - ratio)


def test_holm_by_hand():
    p = [0.01, 0.04, 0.03, 0.5, np.nan]
    adj = stats.holm(p)
    assert adj[0] == pytest.approx(0.04)  # 4 * 0.01
    assert adj[2] == pytest.approx(0.09)  # 3 * 0.03
    assert adj[1] == pytest.approx(0.09)  # max(2 * 0.04, 0.09): monotone
    assert adj[3] == pytest.approx(0.5)
    assert np.isnan(adj[4])


def test_robust_fit_recovers_slope_despite_outliers_and_group_offsets():
    rng = np.random.default_rng(4)
    n = 60
    groups = np.repeat(["a", "b", "c"], n // 3)
    x = rng.normal(0, 0.1, n)
    y = np.select([groups == "a", groups == "b"], [0.0, 1.0], 2.0) + 0.8 * x + rng.normal(0, 0.01, n)
    y[:4] += 0.5  # gross outliers
    fit = stats.robust_fit(y, x, groups)
    lo, hi = fit.interval(0)
    assert lo < 0.8 < hi
    assert fit.coef[0] == pytest.approx(0.8, abs=0.03)
    ols = np.polyfit(x, y - np.select([groups == "a", groups == "b"], [0.0, 1.0], 2.0), 1)[0]
    assert abs(ols - 0.8) > abs(fit.coef[0] - 0.8)  # the outliers do pull least squares


def test_robust_fit_slope_interval_covers_over_seeds():
    rng = np.random.default_rng(5)
    hits = 0
    reps = 300
    for _ in range(reps):
        groups = np.repeat([0, 1], 15)
        x = rng.normal(0, 1, 30)
        y = 0.3 * groups + 0.5 * x + rng.standard_t(4, 30) * 0.2
        lo, hi = stats.robust_fit(y, x, groups).interval(0)
        hits += lo <= 0.5 <= hi
    assert 0.92 <= hits / reps <= 0.98


def test_robust_fit_rejects_constant_covariate():
    with pytest.raises(ValueError):
        stats.robust_fit(np.arange(10.0), np.ones(10), np.repeat([0, 1], 5))


def test_noninferiority_and_equivalence_p():
    clear = stats.Difference(estimate=np.log(1.01), se=0.002, df=30)
    assert stats.noninferiority_p(clear, 0.05) < 1e-6
    assert stats.equivalence_p(clear, 0.05) < 1e-6
    slow = stats.Difference(estimate=np.log(1.10), se=0.01, df=30)
    assert stats.noninferiority_p(slow, 0.05) > 0.99
    vague = stats.Difference(estimate=0.0, se=0.1, df=30)  # not different, but not shown equal
    assert stats.equivalence_p(vague, 0.05) > 0.3


def test_pooled_mean_difference_is_mean_with_combined_se():
    d = [stats.Difference(0.1, 0.01, 20), stats.Difference(0.3, 0.02, 10)]
    pooled = stats.pooled_mean_difference(d)
    assert pooled.estimate == pytest.approx(0.2)
    assert pooled.se == pytest.approx(np.sqrt(0.01 ** 2 + 0.02 ** 2) / 2)
    assert 10 <= pooled.df <= 30


def test_combine_difference_inflates_for_fitted_covariates():
    la, lb = stats.Location(1.0, 0.01, 10), stats.Location(0.5, 0.01, 10)
    plain = stats.combine_difference(la, lb)
    fitted = stats.combine_difference(la, lb, fitted_fraction=0.2)
    assert fitted.se == pytest.approx(plain.se / np.sqrt(0.8))
    assert fitted.df < plain.df


def test_a_systematic_aa_difference_is_told_from_noise_by_a_sign_test():
    from analysis.stats.estimators import one_sided

    rng = np.random.default_rng(11)
    null = [one_sided(np.exp(rng.normal(0.0, 0.005, 10))) for _ in range(2000)]
    assert np.mean(null) < 0.01  # 2 x 0.5^10 = 0.2% of honest runs of ten copies
    shifted = [one_sided(np.exp(rng.normal(-0.007, 0.002, 10))) for _ in range(200)]
    assert np.mean(shifted) > 0.95
    assert not one_sided([0.99] * 7)  # too few copies to tell
    assert not one_sided([0.99] * 9 + [1.01]) and one_sided([0.99] * 10)
    assert not one_sided([1.0, 1.0, float("nan")])
