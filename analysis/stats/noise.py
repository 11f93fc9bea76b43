"""Noise models of a measurement run: clock regimes, change points and drift over seq, outlier classes,
variance components and the runs needed for a target interval width (Kalibera & Jones)."""
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from analysis.stats.estimators import CONFIDENCE, mad_scale, median, t_ppf

OUTLIER_Z = 3.5  # robust z beyond which a run is an outlier (Iglewicz & Hoaglin)
OUTLIER_CLASSES = ("none", "slow-clock", "slow-unexplained", "fast")


def robust_z(values, floor: float = 0.0) -> np.ndarray:
    """(value - median) / MAD scale; floor bounds the scale from below (a MAD from a small group can
    be far too small by chance, which would flag ordinary runs)."""
    v = np.asarray(values, dtype=float)
    centre = median(v)
    scale = max(mad_scale(v), floor)
    if scale == 0:
        scale = float(np.mean(np.abs(v - centre))) * 1.2533  # mean absolute deviation of a normal
    if scale == 0:
        return np.zeros_like(v)
    return (v - centre) / scale


def classify_outliers(z_raw, z_adjusted=None) -> np.ndarray:
    """Class of each run from its robust z within its group, before and after the probe adjustment.

    A slow run that the probe adjustment brings back in line was a clock drop ("slow-clock");
    one that stays slow was something the probe cannot see ("slow-unexplained")."""
    z_raw = np.asarray(z_raw, dtype=float)
    z_adj = z_raw if z_adjusted is None else np.asarray(z_adjusted, dtype=float)
    out = np.full(z_raw.shape, "none", dtype=object)
    slow = z_raw > OUTLIER_Z
    out[slow & (z_adj <= OUTLIER_Z)] = "slow-clock"
    out[slow & (z_adj > OUTLIER_Z)] = "slow-unexplained"
    out[~slow & (z_adj > OUTLIER_Z)] = "slow-unexplained"
    out[(z_raw < -OUTLIER_Z) & (z_adj < -OUTLIER_Z)] = "fast"
    return out


@dataclass(frozen=True)
class Regimes:
    count: int
    labels: np.ndarray  # 0 = fastest regime
    means: np.ndarray  # log-probe mean of each regime
    weights: np.ndarray


def _gmm_1d(x, k, iterations=200):
    qs = np.quantile(x, (np.arange(k) + 0.5) / k)
    mu = qs.astype(float)
    sd = np.full(k, max(np.std(x), 1e-12) / k)
    w = np.full(k, 1.0 / k)
    floor = max(np.std(x) * 1e-3, 1e-12)
    ll = -np.inf
    for _ in range(iterations):
        dens = w / (sd * np.sqrt(2 * np.pi)) * np.exp(-0.5 * ((x[:, None] - mu) / sd) ** 2) + 1e-300
        total = dens.sum(axis=1, keepdims=True)
        resp = dens / total
        new_ll = float(np.log(total).sum())
        nk = resp.sum(axis=0) + 1e-12
        w = nk / x.size
        mu = (resp * x[:, None]).sum(axis=0) / nk
        sd = np.sqrt((resp * (x[:, None] - mu) ** 2).sum(axis=0) / nk)
        sd = np.maximum(sd, floor)
        if abs(new_ll - ll) < 1e-6 * (1 + abs(ll)):
            break
        ll = new_ll
    return mu, sd, w, ll, resp


def clock_regimes(log_probe, max_regimes: int = 3) -> Regimes:
    """Regimes of the clock from the probe: a Gaussian mixture chosen by BIC, whose components must
    be clearly apart (Ashman's D > 2) and each hold at least 3% of the runs (and 2 runs)."""
    x = np.asarray(log_probe, dtype=float)
    one = Regimes(1, np.zeros(x.size, dtype=int), np.array([x.mean()]), np.array([1.0]))
    if x.size < 10 or np.std(x) == 0:
        return one
    best, best_bic = one, x.size * np.log(np.var(x)) + 2 * np.log(x.size)
    for k in range(2, max_regimes + 1):
        mu, sd, w, ll, resp = _gmm_1d(x, k)
        bic = -2 * ll + (3 * k - 1) * np.log(x.size)
        order = np.argsort(mu)
        mu, sd, w, resp = mu[order], sd[order], w[order], resp[:, order]
        apart = all(np.sqrt(2) * abs(mu[i + 1] - mu[i]) / np.hypot(sd[i], sd[i + 1]) > 2
                    for i in range(k - 1))
        labels = resp.argmax(axis=1)
        big = all(np.sum(labels == i) >= max(2, 0.03 * x.size) for i in range(k))
        if apart and big and bic < best_bic:
            best, best_bic = Regimes(k, labels, mu, w), bic
    return best


def change_points(series, min_segment: int = 5, penalty: float | None = None,
                  max_changes: int = 10) -> list[int]:
    """Indices where the mean of the series shifts (binary segmentation on a robustly standardised
    series, clipped at 5 so single outliers do not make segments; BIC-like penalty 3 log n)."""
    y = np.asarray(series, dtype=float)
    n = y.size
    if n < 2 * min_segment:
        return []
    scale = mad_scale(y) or float(np.std(y)) or 1.0
    z = np.clip((y - median(y)) / scale, -5, 5)
    pen = 3 * np.log(n) if penalty is None else penalty
    found = []

    def split(lo, hi):
        if len(found) >= max_changes or hi - lo < 2 * min_segment:
            return
        seg = z[lo:hi]
        m = seg.size
        cs = np.cumsum(seg)
        ks = np.arange(min_segment, m - min_segment + 1)
        left = cs[ks - 1]
        gain = left ** 2 / ks + (cs[-1] - left) ** 2 / (m - ks) - cs[-1] ** 2 / m
        i = int(np.argmax(gain))
        if gain[i] > pen:
            cut = lo + int(ks[i])
            found.append(cut)
            split(lo, cut)
            split(cut, hi)

    split(0, n)
    return sorted(found)


@dataclass(frozen=True)
class Drift:
    rho: float
    p: float


def drift(seq, residual) -> Drift:
    """Monotone drift of the residuals over time: Spearman's rho and its p-value."""
    if len(seq) < 5:
        return Drift(float("nan"), float("nan"))
    res = sps.spearmanr(seq, residual)
    return Drift(float(res.statistic), float(res.pvalue))


@dataclass(frozen=True)
class VarianceComponents:
    between: float  # variance of the upper level's true means (T2 in Kalibera & Jones)
    within: float  # variance within one unit of the upper level (T1)
    n_groups: int
    per_group: float  # mean number of measurements per upper-level unit


def variance_components(values, groups) -> VarianceComponents:
    """Two-level random-effects variance components (method of moments, Kalibera & Jones 2013):
    within = mean within-unit variance; between = variance of unit means - within / n_per_unit."""
    v = np.asarray(values, dtype=float)
    _, codes = np.unique(np.asarray(groups), return_inverse=True)
    k = codes.max() + 1
    counts = np.bincount(codes, minlength=k)
    if np.any(counts < 2) or k < 2:
        raise ValueError("variance components need at least 2 units with 2 measurements each")
    means = np.bincount(codes, weights=v, minlength=k) / counts
    within = float(np.sum((v - means[codes]) ** 2) / (v.size - k))
    n_bar = float(counts.mean())
    between = max(0.0, float(means.var(ddof=1)) - within / n_bar)
    return VarianceComponents(between, within, int(k), n_bar)


def optimal_repetitions(vc: VarianceComponents, cost_repetition: float, cost_unit: float) -> int:
    """Kalibera & Jones: repetitions per upper-level unit minimising cost for a given precision,
    ceil(sqrt(cost_unit * within / (cost_repetition * between)))."""
    if vc.between == 0:
        return max(1, int(round(vc.per_group)))
    return max(1, int(np.ceil(np.sqrt(cost_unit * vc.within / (cost_repetition * vc.between)))))


def units_needed(vc: VarianceComponents, repetitions: int, target_halfwidth: float,
                 confidence: float = CONFIDENCE, samples: int = 2) -> int:
    """Upper-level units per sample so that a difference of `samples` means has the target half-width."""
    per_unit = vc.between + vc.within / repetitions
    return runs_needed(per_unit * samples, target_halfwidth, confidence)


def runs_needed(variance_sum: float, target_halfwidth: float, confidence: float = CONFIDENCE,
                start: int = 2, limit: int = 1_000_000) -> int:
    """Smallest n per group with t(n_total - 2) * sqrt(variance_sum / n) <= target, where
    variance_sum is the sum of the per-run variances of the groups compared."""
    if variance_sum <= 0:
        return start
    q = sps.norm.ppf(0.5 + confidence / 2)
    n = max(start, int(np.ceil(variance_sum * (q / target_halfwidth) ** 2)))
    while n < limit:
        q = t_ppf(0.5 + confidence / 2, 2 * n - 2)
        if q * np.sqrt(variance_sum / n) <= target_halfwidth:
            return n
        n += max(1, n // 50)
    return limit


def drift_basis(seq, min_runs: int = 20, runs_per_knot: int = 15, max_knots: int = 2):
    """Columns of a linear spline in time order (rank of seq, knots at quantiles), centred, or None
    when there are too few runs: a common-mode drift term that the regression removes."""
    seq = np.asarray(seq, dtype=float)
    n = seq.size
    if n < min_runs:
        return None
    t = (sps.rankdata(seq) - 0.5) / n
    knots = min(max_knots, n // runs_per_knot)
    cols = [t] + [np.maximum(t - (j + 1) / (knots + 1), 0.0) for j in range(knots)]
    basis = np.column_stack(cols)
    return basis - basis.mean(axis=0)
