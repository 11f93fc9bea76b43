"""A pooled log ratio over runs, with run, build and host as random effects.

Each run gives one estimate y_i of a log ratio with its within-run standard error s_i. Between runs the true
value moves: a run samples the machine's state (variance tau_run^2), a build samples a library's code
layout (tau_build^2, shared by the runs of one build) and a host samples a processor (tau_host^2, shared by the
runs on one host). The model is

    y_i = mu + u_host[h(i)] + u_build[b(i)] + e_i,   e_i ~ N(0, s_i^2 + tau_run^2),

a random-effects meta-analysis whose variance components are estimated by REML (restricted likelihood,
maximised over the log variances). The interval of mu uses the Hartung-Knapp scale (never narrower than the
model's own standard error) and a t quantile whose degrees of freedom are those of the coarsest level whose
variance is resolved: with three hosts and a host variance that matters, two.

"""
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import optimize
from scipy import stats as sps

from analysis.stats.estimators import CONFIDENCE

LEVELS = ("host", "build")  # crossed grouping columns, coarsest first
RESOLVED = 0.05  # a component counts as resolved when it holds at least this share of the pooled variance
_FLOOR = -30.0  # log variance taken as zero


@dataclass(frozen=True)
class Pooled:
    estimate: float  # mu, log scale
    se: float
    df: float
    tau2: dict  # component -> estimated variance ("run", "host", "build")
    runs: int
    builds: int
    hosts: int

    def interval(self, confidence: float = CONFIDENCE) -> tuple[float, float]:
        q = sps.t.ppf(0.5 + confidence / 2, self.df)
        return self.estimate - q * self.se, self.estimate + q * self.se


def _design(frame: pd.DataFrame) -> dict:
    """Indicator matrices of the grouping levels that have at least two groups (one group is not a sample)."""
    out = {}
    for level in LEVELS:
        codes, uniq = pd.factorize(frame[level].astype(str))
        if len(uniq) >= 2:
            out[level] = np.eye(len(uniq))[codes]
    return out


def _covariance(s2, theta, names, z):
    v = np.diag(s2 + math.exp(theta[0]))
    for t, name in zip(theta[1:], names):
        v = v + math.exp(t) * (z[name] @ z[name].T)
    return v


def _restricted_nll(theta, y, s2, names, z):
    v = _covariance(s2, theta, names, z)
    sign, logdet = np.linalg.slogdet(v)
    vi = np.linalg.inv(v)
    one = np.ones_like(y)
    w = one @ vi @ one
    mu = (one @ vi @ y) / w
    r = y - mu
    return 0.5 * (logdet + math.log(w) + r @ vi @ r)


def pool(frame: pd.DataFrame, confidence: float = CONFIDENCE, start: float | None = None) -> Pooled:
    """Pool per-run log ratios: `frame` has columns estimate (log ratio), se, host, build (any labels).
    One run gives its own interval back (nothing is known between runs). `start` moves the optimiser's
    starting log variance (the published digits must not depend on it)."""
    if frame.empty:
        raise ValueError("no runs to pool")
    frame = frame.reset_index(drop=True)
    y = frame["estimate"].to_numpy(float)
    s2 = frame["se"].to_numpy(float) ** 2
    k = len(y)
    hosts, builds = (int(frame[c].astype(str).nunique()) for c in ("host", "build"))
    if k == 1:
        return Pooled(float(y[0]), float(math.sqrt(s2[0])), float(frame.get("df", pd.Series([1e6])).iloc[0]),
                      {"run": 0.0, "host": 0.0, "build": 0.0}, 1, builds, hosts)
    z = _design(frame)
    names = list(z)
    if start is None:
        start = math.log(max(float(np.var(y, ddof=1)), 1e-12) / (1 + len(names)))
    fit = optimize.minimize(_restricted_nll, np.full(1 + len(names), start), args=(y, s2, names, z),
                            method="L-BFGS-B", bounds=[(_FLOOR, 5.0)] * (1 + len(names)))
    theta = fit.x
    tau2 = {"run": math.exp(theta[0]) if theta[0] > _FLOOR + 1 else 0.0, "host": 0.0, "build": 0.0}
    for t, name in zip(theta[1:], names):
        tau2[name] = math.exp(t) if t > _FLOOR + 1 else 0.0
    vi = np.linalg.inv(_covariance(s2, theta, names, z))
    one = np.ones(k)
    w = one @ vi @ one
    mu = float(one @ vi @ y / w)
    r = y - mu
    q = float(r @ vi @ r) / (k - 1)  # Hartung-Knapp: the residuals' own scale, never below the model's
    se = math.sqrt(max(q, 1.0) / w)
    return Pooled(mu, se, _df(tau2, s2, k, hosts, builds), tau2, k, builds, hosts)


def quantile(df: float, confidence: float = CONFIDENCE) -> float:
    """The two-sided t quantile of an interval at this confidence."""
    return float(sps.t.ppf(0.5 + confidence / 2, df))


def floored_se(se: float, df: float, floor_halfwidth: float, confidence: float = CONFIDENCE) -> float:
    """The standard error of an interval never narrower than floor_halfwidth (log scale) at this confidence:
    a variance floor, such as the A/A across runs of the host, that a pooled interval may not undercut."""
    if floor_halfwidth <= 0:
        return se
    return max(se, floor_halfwidth / quantile(df, confidence))


def _df(tau2: dict, s2, k: int, hosts: int, builds: int) -> float:
    """Degrees of freedom of the coarsest level whose variance is resolved (a share of at least RESOLVED of
    a typical run's total variance): the interval cannot be surer than the number of hosts allows when hosts
    differ."""
    total = float(np.mean(s2)) + sum(tau2.values())
    for level, groups in (("host", hosts), ("build", builds)):
        if groups >= 2 and tau2[level] >= RESOLVED * total:
            return float(groups - 1)
    return float(k - 1)


def simulate(rng: np.random.Generator, mu: float, hosts: int, builds: int, runs_per_cell: int,
             tau_host: float, tau_build: float, tau_run: float, se: float) -> pd.DataFrame:
    """Per-run estimates with known variance components: every build measured on every host, runs_per_cell
    runs each, within-run standard errors scattered around `se`."""
    u_h = rng.normal(0, tau_host, hosts)
    u_b = rng.normal(0, tau_build, builds)
    rows = []
    for h in range(hosts):
        for b in range(builds):
            for _ in range(runs_per_cell):
                s = se * rng.uniform(0.5, 1.5)
                rows.append({"estimate": mu + u_h[h] + u_b[b] + rng.normal(0, tau_run) + rng.normal(0, s),
                             "se": s, "host": f"h{h}", "build": f"b{b}"})
    return pd.DataFrame(rows)


def coverage(rng: np.random.Generator, reps: int, **design) -> float:
    """The share of 95% intervals that hold the true mu over `reps` simulated datasets."""
    hits = 0
    for _ in range(reps):
        lo, hi = pool(simulate(rng, **design)).interval()
        hits += lo <= design["mu"] <= hi
    return hits / reps
