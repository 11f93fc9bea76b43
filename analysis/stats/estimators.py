"""Estimators on arrays: robust locations with intervals, the probe slope, multiplicity, naive baselines.

Times are compared on the log scale, so a difference of locations is a log ratio. The location is
the 20% trimmed mean with Yuen's (winsorized) standard error: it keeps a valid Welch-type interval
while slow outliers and heavy tails barely move it.
"""
import math
from dataclasses import dataclass

import numpy as np
from scipy import special as spc
from scipy import stats as sps

TRIM = 0.2
CONFIDENCE = 0.95
HUBER_K = 1.345


def t_ppf(p: float, df: float):
    """sps.t.ppf(p, df) for one probability and one df: scipy's own special function without the generic
    argument handling of its distributions (a hundred times cheaper, the same value)."""
    if 0.0 < p < 1.0 and df > 0.0:
        return spc.stdtrit(df, p) * 1.0 + 0.0  # as rv_continuous.ppf: _ppf * scale + loc
    return sps.t.ppf(p, df)


def t_cdf(x: float, df: float):
    """sps.t.cdf(x, df) for one x and one df (see t_ppf)."""
    if math.isfinite(x) and df > 0.0:
        return spc.stdtr(df, (x - 0.0) / 1.0)
    return sps.t.cdf(x, df)


def t_sf(x: float, df: float):
    """sps.t.sf(x, df) for one x and one df (see t_ppf)."""
    if math.isfinite(x) and df > 0.0:
        return spc.stdtr(df, -((x - 0.0) / 1.0))
    return sps.t.sf(x, df)


def median(v) -> float:
    """np.median of a 1-d array, without its generic axis handling: the middle value of the sorted values, or
    the mean of the two middle ones. Empty, NaN or zero medians (numpy's sign of a zero) are numpy's own."""
    v = np.asarray(v, dtype=float)
    n = v.size
    if n == 0:
        return np.median(v)
    s = np.sort(v)
    k = n // 2
    m = s[k] if n % 2 else (s[k - 1] + s[k]) / 2
    if m == 0 or np.isnan(s[-1]):
        return np.median(v)
    return m


@dataclass(frozen=True)
class Location:
    estimate: float
    var: float  # squared standard error
    h: int  # observations left after trimming, for the degrees of freedom


@dataclass(frozen=True)
class Difference:
    estimate: float
    se: float
    df: float

    def interval(self, confidence: float = CONFIDENCE) -> tuple[float, float]:
        if self.se == 0.0:
            return self.estimate, self.estimate
        q = t_ppf(0.5 + confidence / 2, self.df)
        return self.estimate - q * self.se, self.estimate + q * self.se

    @classmethod
    def of_row(cls, row, confidence: float = CONFIDENCE) -> "Difference":
        """A comparison row's log difference back from its ratio, interval (symmetric on the log scale)
        and degrees of freedom."""
        lo, hi = math.log(float(row["ci_low"])), math.log(float(row["ci_high"]))
        df = float(row["df"])
        return cls(math.log(float(row["ratio"])), (hi - lo) / 2 / t_ppf(0.5 + confidence / 2, df), df)


def trimmed_location(x, trim: float = TRIM) -> Location:
    """Trimmed mean and Yuen's standard error (winsorized variance over h(h-1)/(n-1))."""
    x = np.sort(np.asarray(x, dtype=float))
    n = x.size
    g = int(np.floor(trim * n))
    h = n - 2 * g
    if h < 2:
        raise ValueError(f"{n} values are too few for a {trim:.0%} trimmed mean")
    kept = x[g:n - g]
    winsorized = np.clip(x, kept[0], kept[-1])
    sw2 = winsorized.var(ddof=1)
    return Location(float(kept.mean()), float((n - 1) * sw2 / (h * (h - 1))), h)


def yuen_difference(a, b, trim: float = TRIM, extra_var: float = 0.0) -> Difference:
    """Trimmed mean of a minus that of b, Welch-Satterthwaite degrees of freedom (Yuen 1974).

    extra_var adds an independent variance term (the probe slope's, after adjustment)."""
    la, lb = trimmed_location(a, trim), trimmed_location(b, trim)
    return combine_difference(la, lb, extra_var)


def combine_difference(la: Location, lb: Location, extra_var: float = 0.0,
                       fitted_fraction: float = 0.0) -> Difference:
    """Difference of two locations. fitted_fraction is the share of the residual degrees of freedom
    spent on covariates fitted to the same values: their spread understates the noise by that share."""
    inflate = 1.0 / (1.0 - fitted_fraction)
    da, db = la.var * inflate, lb.var * inflate
    total = da + db + extra_var
    denom = da ** 2 / (la.h - 1) + db ** 2 / (lb.h - 1)
    df = total ** 2 / denom if denom > 0 else float(la.h + lb.h - 2)
    df = min(df, float(la.h + lb.h - 2)) if df > 0 else 1.0
    df = max(1.0, df * (1.0 - fitted_fraction))
    return Difference(la.estimate - lb.estimate, float(np.sqrt(total)), float(df))


@dataclass(frozen=True)
class Fit:
    """A robust regression of y on covariates with a free location per group."""
    coef: np.ndarray
    cov: np.ndarray
    df: float
    scale: float  # robust residual scale
    weights: np.ndarray

    def interval(self, j: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
        q = t_ppf(0.5 + confidence / 2, self.df)
        se = float(np.sqrt(self.cov[j, j]))
        return float(self.coef[j] - q * se), float(self.coef[j] + q * se)


def mad_scale(r) -> float:
    r = np.asarray(r, dtype=float)
    return float(1.4826 * median(np.abs(r - median(r))))


def _group_centre(values, codes, ngroups, weights):
    """Weighted mean of each group, broadcast back to the rows (values may be 2-d)."""
    wsum = np.bincount(codes, weights=weights, minlength=ngroups)
    wsum = np.where(wsum > 0, wsum, 1.0)
    if values.ndim == 1:
        return (np.bincount(codes, weights=weights * values, minlength=ngroups) / wsum)[codes]
    cols = [np.bincount(codes, weights=weights * values[:, j], minlength=ngroups) / wsum
            for j in range(values.shape[1])]
    return np.column_stack(cols)[codes]


def robust_fit(y, X, groups, k: float = HUBER_K, iterations: int = 50) -> Fit:
    """Huber M-estimate of common slopes of y on the columns of X with a free location per group
    (IRLS, MAD scale). Covariance from Huber's asymptotic formula with his small-sample factor."""
    y = np.asarray(y, dtype=float)
    X = np.asarray(X, dtype=float).reshape(y.size, -1)
    _, codes = np.unique(np.asarray(groups), return_inverse=True)
    ng = int(codes.max()) + 1
    n, q = X.shape
    p = ng + q
    if n - p < 2:
        raise ValueError("too few runs for the covariates")
    w = np.ones(n)
    if np.linalg.matrix_rank(X - _group_centre(X, codes, ng, w)) < q:
        raise ValueError("the covariates do not vary within groups")
    beta = np.zeros(q)
    s = 1.0
    for _ in range(iterations):
        Xc = X - _group_centre(X, codes, ng, w)
        yc = y - _group_centre(y, codes, ng, w)
        xtwx = Xc.T @ (w[:, None] * Xc)
        new_beta = np.linalg.solve(xtwx, Xc.T @ (w * yc))
        r = yc - Xc @ new_beta
        s = mad_scale(r) or float(np.std(r)) or 1e-12
        u = np.abs(r / s)
        w = np.where(u <= k, 1.0, k / np.maximum(u, 1e-300))
        converged = np.max(np.abs(new_beta - beta)) < 1e-8 * (1 + np.max(np.abs(beta)))
        beta = new_beta
        if converged:
            break
    Xc = X - _group_centre(X, codes, ng, w)
    r = (y - _group_centre(y, codes, ng, w)) - Xc @ beta
    u = r / s
    psi = np.clip(u, -k, k)
    dpsi = (np.abs(u) <= k).astype(float)
    m = dpsi.mean() or 1.0 / n
    correction = 1 + p / n * dpsi.var() / m ** 2
    factor = correction ** 2 * (np.sum(psi ** 2) / (n - p)) / m ** 2 * s ** 2
    cov = factor * np.linalg.inv(Xc.T @ Xc)
    return Fit(beta, cov, float(n - p), mad_scale(r), w)


def group_scale(y, groups) -> float:
    """Robust residual scale with group medians only (the fit without covariates)."""
    y = np.asarray(y, dtype=float)
    g = np.asarray(groups)
    r = np.empty_like(y)
    for v in np.unique(g):
        m = g == v
        r[m] = y[m] - median(y[m])
    return mad_scale(r)


def holm(pvalues) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error over the whole family given)."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    pv = p[ok]
    m = pv.size
    if m == 0:
        return out
    order = np.argsort(pv)
    adjusted = np.maximum.accumulate((m - np.arange(m)) * pv[order])
    res = np.empty(m)
    res[order] = np.minimum(adjusted, 1.0)
    out[ok] = res
    return out


def noninferiority_p(diff: Difference, margin: float) -> float:
    """One-sided p for H0: ratio >= 1 + margin (slower by the margin or more) against 'not slower'."""
    if diff.se == 0:
        return 0.0 if diff.estimate < np.log1p(margin) else 1.0
    tstat = (diff.estimate - np.log1p(margin)) / diff.se
    return float(t_cdf(tstat, diff.df))


def equivalence_p(diff: Difference, margin: float) -> float:
    """TOST p for H1: 1/(1+margin) < ratio < 1+margin."""
    if diff.se == 0:
        return 0.0 if abs(diff.estimate) < np.log1p(margin) else 1.0
    bound = np.log1p(margin)
    upper = t_cdf((diff.estimate - bound) / diff.se, diff.df)
    lower = t_sf((diff.estimate + bound) / diff.se, diff.df)
    return float(max(upper, lower))


def pooled_mean_difference(diffs: list[Difference]) -> Difference:
    """Mean of independent differences (a geometric mean of ratios on the log scale)."""
    k = len(diffs)
    est = sum(d.estimate for d in diffs) / k
    variances = [d.se ** 2 / k ** 2 for d in diffs]
    total = sum(variances)
    denom = sum(v ** 2 / d.df for v, d in zip(variances, diffs) if v > 0)
    df = total ** 2 / denom if denom > 0 else float(min(d.df for d in diffs))
    return Difference(est, float(np.sqrt(total)), float(df))


def welch_ratio_interval(a, b, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """The naive reference: Welch interval for mean(a) - mean(b) on raw times, divided by mean(b)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
    half = t_ppf(0.5 + confidence / 2, df) * np.sqrt(va + vb)
    mb = b.mean()
    ratio = a.mean() / mb
    return ratio, ratio - half / mb, ratio + half / mb


def hyperfine_ratio_interval(a, b) -> tuple[float, float, float]:
    """hyperfine's relative speed: mean ratio +- ratio * sqrt(cv_a^2 + cv_b^2) from standard deviations."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    ratio = a.mean() / b.mean()
    spread = ratio * np.hypot(a.std(ddof=1) / a.mean(), b.std(ddof=1) / b.mean())
    return ratio, ratio - spread, ratio + spread


SYSTEMATIC_P = 0.01


def one_sided(ratios, p: float = SYSTEMATIC_P) -> bool:
    """True when A/A ratios (each a copy against the same baseline) lie on one side of 1 more often than
    chance allows: a two-sided sign test below `p` (with 10 copies, all 10 on one side; never with
    fewer than 8). Ties at exactly 1 are left out."""
    r = np.asarray(ratios, dtype=float)
    r = r[np.isfinite(r) & (r != 1.0)]
    if r.size == 0:
        return False
    return bool(sps.binomtest(int((r > 1).sum()), int(r.size), 0.5).pvalue < p)

