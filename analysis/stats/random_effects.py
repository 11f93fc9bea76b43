"""A pooled log ratio over runs, with run, build, machine and host as random effects.

Each run gives one estimate y_i of a log ratio with its within-run standard error s_i. Between runs the true
value moves: a run samples the machine's state (variance tau_run^2), a build samples a library's code
layout (tau_build^2, shared by the runs of one build), a machine samples one computer of its processor kind
(tau_machine^2, shared by the runs on one machine) and a host samples a processor (tau_host^2, shared by the
runs on one host). Builds and machines are crossed: the same layout builds, named by sha256, run on every
machine. The model is

    y_i = mu + u_host[h(i)] + u_machine[m(i)] + u_build[b(i)] + e_i,   e_i ~ N(0, s_i^2 + tau_run^2),

A level's variance may be given instead of estimated (`fixed`): the between-machine variance is one
component estimated jointly over every cell and kind that has two machines or more (stats/prediction.py,
`machine_spread`), since one kind's one or two machines cannot estimate it; a fixed level enters the model
even when the runs come from one group of it (one machine still samples the machines of its kind).

a random-effects meta-analysis whose variance components are estimated by REML (restricted likelihood,
maximised over the log variances). The interval of mu uses the Hartung-Knapp scale (never narrower than the
model's own standard error) and a t quantile whose degrees of freedom are those of the coarsest level whose
variance is resolved: with three hosts and a host variance that matters, two.

"""
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy import stats as sps

from analysis.stats.estimators import CONFIDENCE

LEVELS = ("host", "machine", "build")  # crossed grouping columns, coarsest first (a frame may lack machine)
RESOLVED = 0.05  # a component counts as resolved when it holds at least this share of the pooled variance
_FLOOR = -30.0  # log variance taken as zero


@dataclass(frozen=True)
class Pooled:
    estimate: float  # mu, log scale
    se: float
    df: float
    tau2: dict  # component -> estimated (or given) variance ("run", "host", "machine", "build")
    runs: int
    builds: int
    hosts: int
    machines: int = 1

    def interval(self, confidence: float = CONFIDENCE) -> tuple[float, float]:
        q = sps.t.ppf(0.5 + confidence / 2, self.df)
        return self.estimate - q * self.se, self.estimate + q * self.se


def _design(frame: pd.DataFrame, fixed=()) -> tuple[list[list[int]], list[str]]:
    """Each grouping level with at least two groups (one group is not a sample to estimate from), and each
    level whose variance is fixed: its group index per run, and the levels' names."""
    out, names = [], []
    for level in LEVELS:
        if level not in frame.columns:
            continue
        codes, uniq = pd.factorize(frame[level].astype(str))
        if len(uniq) >= 2 or level in fixed:
            out.append([int(c) for c in codes])
            names.append(level)
    return out, names


# The restricted likelihood is computed in plain floating point, with correctly rounded sums (math.fsum) and
# the standard library's exp and log, never through a linear-algebra library: those round differently on
# different processors, and an optimiser fed values that differ in the last bit stops elsewhere, so the
# published digits moved with the machine that rendered them. Here every operation is IEEE arithmetic in
# a fixed order, and so is the optimiser (a Nelder-Mead simplex of our own): the same runs give the same bits
# on any host. The covariance V = D + sum_l tau_l Z_l Z_l' (D diagonal: within-run variance + tau_run) is
# inverted through Woodbury's identity, so only a matrix of the size of the number of groups is factored.
# The per-run estimates themselves come from numpy and scipy, whose sums and kernels are chosen by the processor
# (SIMD width, the BLAS core type) and may differ in their last bits from host to host; the optimiser would carry
# such a difference into the fourth digit where the likelihood is flat. So they enter rounded to INPUT_DIGITS
# significant digits, far above any difference in rounding and far below anything a run can measure.
INPUT_DIGITS = 12


def _quantized(value: float) -> float:
    return float(f"{value:.{INPUT_DIGITS}g}")

def _cholesky(a: list[list[float]]) -> list[list[float]]:
    n = len(a)
    low = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1):
            acc = a[i][j] - math.fsum(low[i][k] * low[j][k] for k in range(j))
            if i == j:
                if acc <= 0:
                    raise ValueError("not positive definite")
                low[i][i] = math.sqrt(acc)
            else:
                low[i][j] = acc / low[j][j]
    return low


def _solve(low: list[list[float]], b: list[float]) -> list[float]:
    n = len(b)
    z = [0.0] * n
    for i in range(n):
        z[i] = (b[i] - math.fsum(low[i][k] * z[k] for k in range(i))) / low[i][i]
    x = [0.0] * n
    for i in reversed(range(n)):
        x[i] = (z[i] - math.fsum(low[k][i] * x[k] for k in range(i + 1, n))) / low[i][i]
    return x


def _dot(a, b) -> float:
    return math.fsum(x * y for x, y in zip(a, b))


@lru_cache(maxsize=64)
def _layout(codes: tuple) -> tuple:
    """What _fit needs of the design, which the optimiser does not move: the group sizes and offsets, each
    cell of the groups' matrix with the runs that fall in it, each group with its runs."""
    sizes = [max(c) + 1 for c in codes]
    offsets = [sum(sizes[:j]) for j in range(len(sizes))]
    m = sum(sizes)
    index = [[offsets[j] + codes[j][i] for j in range(len(codes))] for i in range(len(codes[0]) if codes else 0)]
    cells: dict = {}
    members = [[] for _ in range(m)]
    for i, idx in enumerate(index):
        for a in idx:
            members[a].append(i)
            for b in idx:
                cells.setdefault((a, b), []).append(i)
    cell_runs = [[cells.get((r, c), ()) for c in range(m)] for r in range(m)]
    return sizes, offsets, m, cell_runs, members


def _fit(theta, y, s2, codes) -> tuple[float, float, float, float]:
    """(restricted negative log-likelihood, mu, 1' V^-1 1, r' V^-1 r) at log variances theta. Every sum is
    math.fsum, correctly rounded whatever the order of its terms."""
    d = [s + math.exp(theta[0]) for s in s2]
    inv_d = [1.0 / x for x in d]
    sizes, offsets, m, cell_runs, members = _layout(tuple(tuple(c) for c in codes))
    if m == 0:
        w = math.fsum(inv_d)
        mu = _dot(inv_d, y) / w
        rvr = math.fsum(iv * (yi - mu) ** 2 for iv, yi in zip(inv_d, y))
        return 0.5 * (math.fsum(math.log(x) for x in d) + math.log(w) + rvr), mu, w, rvr
    a_mat = [[math.fsum([inv_d[i] for i in runs]) for runs in row] for row in cell_runs]
    for j, t in enumerate(theta[1:]):
        for g in range(sizes[j]):
            a_mat[offsets[j] + g][offsets[j] + g] += math.exp(-t)
    low = _cholesky(a_mat)

    def group_sums(values):
        return [math.fsum([values[i] for i in runs]) for runs in members]
    u = group_sums(inv_d)
    v = group_sums([iv * yi for iv, yi in zip(inv_d, y)])
    a_u = _solve(low, u)
    w = math.fsum(inv_d) - _dot(u, a_u)
    mu = (_dot(inv_d, y) - _dot(v, a_u)) / w
    r = [yi - mu for yi in y]
    q = group_sums([iv * ri for iv, ri in zip(inv_d, r)])
    rvr = math.fsum(iv * ri * ri for iv, ri in zip(inv_d, r)) - _dot(q, _solve(low, q))
    logdet = (math.fsum(math.log(x) for x in d) + math.fsum(sizes[j] * t for j, t in enumerate(theta[1:]))
              + 2 * math.fsum(math.log(low[i][i]) for i in range(m)))
    return 0.5 * (logdet + math.log(w) + rvr), mu, w, rvr


def _restricted_nll(theta, y, s2, codes) -> float:
    try:
        return _fit(theta, y, s2, codes)[0]
    except (ValueError, OverflowError, ZeroDivisionError):
        return math.inf


def _nelder_mead(f, x0: list[float], step: float = 1.0, lo: float = _FLOOR, hi: float = 5.0,
                 xtol: float = 1e-7, ftol: float = 1e-12, max_evals: int = 4000) -> list[float]:
    """A deterministic Nelder-Mead simplex within [lo, hi] (points are clipped into the box)."""
    n = len(x0)

    def clip(x):
        return [min(hi, max(lo, v)) for v in x]

    pts = [clip(x0)] + [clip([v + (step if i == j else 0.0) for j, v in enumerate(x0)]) for i in range(n)]
    vals = [f(p) for p in pts]
    evals = n + 1
    while evals < max_evals:
        order = sorted(range(n + 1), key=lambda i: (vals[i], i))
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        if (max(abs(v - vals[0]) for v in vals) <= ftol * (1 + abs(vals[0]))
                and max(abs(a - b) for p in pts[1:] for a, b in zip(p, pts[0])) <= xtol):
            break
        centre = [math.fsum(p[j] for p in pts[:-1]) / n for j in range(n)]
        worst = pts[-1]
        refl = clip([c + (c - w) for c, w in zip(centre, worst)])
        fr = f(refl)
        evals += 1
        if fr < vals[0]:
            exp_ = clip([c + 2 * (c - w) for c, w in zip(centre, worst)])
            fe = f(exp_)
            evals += 1
            pts[-1], vals[-1] = (exp_, fe) if fe < fr else (refl, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = refl, fr
        else:
            outside = fr < vals[-1]
            con = clip([c + 0.5 * ((r if outside else w) - c) for c, r, w in zip(centre, refl, worst)])
            fc = f(con)
            evals += 1
            if fc < (fr if outside else vals[-1]):
                pts[-1], vals[-1] = con, fc
            else:
                best = pts[0]
                pts = [best] + [clip([b + 0.5 * (v - b) for b, v in zip(best, p)]) for p in pts[1:]]
                vals = [vals[0]] + [f(p) for p in pts[1:]]
                evals += n
    return pts[min(range(n + 1), key=lambda i: (vals[i], i))]


def pool(frame: pd.DataFrame, confidence: float = CONFIDENCE, start: float | None = None,
         fixed: dict | None = None, fixed_df: dict | None = None) -> Pooled:
    """Pool per-run log ratios: `frame` has columns estimate (log ratio), se, host, build (any labels) and
    optionally machine. One run gives its own interval back (nothing is known between runs), unless a level's
    variance is fixed. `start` moves the optimiser's starting log variance (the published digits must not
    depend on it). `fixed`: {level: variance} given rather than estimated, each with the degrees of freedom it
    was estimated on (`fixed_df`), which bound the interval's when that level's variance is resolved."""
    if frame.empty:
        raise ValueError("no runs to pool")
    fixed = {k: float(v) for k, v in (fixed or {}).items() if k in frame.columns}
    frame = frame.reset_index(drop=True)
    y = [_quantized(float(v)) for v in frame["estimate"]]
    s2 = [_quantized(float(v)) ** 2 for v in frame["se"]]
    k = len(y)
    hosts, builds = (int(frame[c].astype(str).nunique()) for c in ("host", "build"))
    machines = int(frame["machine"].astype(str).nunique()) if "machine" in frame.columns else 1
    if k == 1 and not fixed:
        return Pooled(float(y[0]), float(math.sqrt(s2[0])), float(frame.get("df", pd.Series([1e6])).iloc[0]),
                      {"run": 0.0, "host": 0.0, "build": 0.0, "machine": 0.0}, 1, builds, hosts, machines)
    codes, names = _design(frame, fixed)
    free = [n for n in names if n not in fixed]
    given = {n: (math.log(v) if v > 0 else _FLOOR) for n, v in fixed.items() if n in names}

    def full(t):
        rest = iter(t[1:])
        return [t[0]] + [given[n] if n in given else next(rest) for n in names]
    if start is None:
        mean = math.fsum(y) / k
        var = math.fsum((v - mean) ** 2 for v in y) / max(k - 1, 1)
        start = math.log(max(var, 1e-12) / (1 + len(free)))
    if k == 1:  # one run and a fixed level: nothing to estimate from the runs
        theta = [_FLOOR] + [given[n] for n in names]
    else:
        theta = full(_nelder_mead(lambda t: _restricted_nll(full(t), y, s2, codes), [start] * (1 + len(free))))
    tau2 = {"run": math.exp(theta[0]) if theta[0] > _FLOOR + 1 else 0.0, "host": 0.0, "build": 0.0, "machine": 0.0}
    for t, name in zip(theta[1:], names):
        tau2[name] = fixed[name] if name in fixed else (math.exp(t) if t > _FLOOR + 1 else 0.0)
    _, mu, w, rvr = _fit(theta, y, s2, codes)
    q = rvr / (k - 1) if k > 1 else 1.0  # Hartung-Knapp: the residuals' own scale, never below the model's
    se = math.sqrt(max(q, 1.0) / w)
    return Pooled(mu, se, _df(tau2, s2, k, hosts, builds, machines, fixed_df or {}), tau2, k, builds, hosts,
                  machines)


@lru_cache(maxsize=4096)
def quantile(df: float, confidence: float = CONFIDENCE) -> float:
    """The two-sided t quantile of an interval at this confidence (kept per df: the cost model's term choice asks
    for the same few hundreds of thousands of times)."""
    return float(sps.t.ppf(0.5 + confidence / 2, df))


def floored_se(se: float, df: float, floor_halfwidth: float, confidence: float = CONFIDENCE) -> float:
    """The standard error of an interval never narrower than floor_halfwidth (log scale) at this confidence:
    a variance floor, such as the A/A across runs of the host, that a pooled interval may not undercut."""
    if floor_halfwidth <= 0:
        return se
    return max(se, floor_halfwidth / quantile(df, confidence))


def _df(tau2: dict, s2, k: int, hosts: int, builds: int, machines: int = 1, fixed_df: dict = None) -> float:
    """Degrees of freedom of the coarsest level whose variance is resolved (a share of at least RESOLVED of
    a typical run's total variance): the interval cannot be surer than the number of hosts allows when hosts
    differ. A level whose variance was given carries the degrees of freedom it was estimated on."""
    fixed_df = fixed_df or {}
    total = math.fsum(s2) / len(s2) + math.fsum(tau2.values())
    for level, groups in (("host", hosts), ("machine", machines), ("build", builds)):
        if tau2.get(level, 0.0) < RESOLVED * total:
            continue
        if level in fixed_df:
            return float(fixed_df[level])
        if groups >= 2:
            return float(groups - 1)
    return float(max(k - 1, 1))


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
