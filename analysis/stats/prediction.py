"""A prediction interval for a debate's answer on a host not yet measured, and the check of one.

The earlier hosts' answers (each host's log ratio and standard error) give the centre, their mean. What a new
host adds is its own deviation, and its spread cannot be taken from the debate's own hosts: with one or two
of them a t quantile on hosts - 1 degrees of freedom makes any prediction hold. It is borrowed instead from
the catalogue's other pairs measured on the same hosts (the ablations: one defence inside one allocator, as a
debate's pair is): for each pair and workload measured on two hosts or more, the DerSimonian-Laird variance
between the hosts' estimates, and their median over those cells. The prediction for a new host's estimate
is then normal with

    var = var(centre) + tau_borrowed^2 + se_new^2,

se_new being the median standard error the earlier hosts reached (a new host measures with the same
protocol). It is registered before the new host is measured; the host's answer falls inside or outside it.
"""
import math
from dataclasses import dataclass

from scipy import stats as sps

CONFIDENCE = 0.95


def between_variance(estimates: list[float], ses: list[float]) -> float:
    """DerSimonian-Laird's variance of the true values between estimates with their standard errors."""
    if len(estimates) < 2:
        return 0.0
    w = [1 / max(s, 1e-9) ** 2 for s in ses]
    sw = math.fsum(w)
    fixed = math.fsum(wi * y for wi, y in zip(w, estimates)) / sw
    q = math.fsum(wi * (y - fixed) ** 2 for wi, y in zip(w, estimates))
    c = sw - math.fsum(wi * wi for wi in w) / sw
    return max(0.0, (q - (len(estimates) - 1)) / c) if c > 0 else 0.0


def borrowed_spread(cells: dict) -> tuple[float, int]:
    """(tau, number of cells) from {cell: [(estimate, se) per host]}: the median between-host variance over
    the cells measured on at least two hosts, as a standard deviation on the log scale."""
    taus = sorted(between_variance([e for e, _ in v], [s for _, s in v]) for v in cells.values() if len(v) >= 2)
    if not taus:
        return math.nan, 0
    mid = len(taus) // 2
    median = taus[mid] if len(taus) % 2 else (taus[mid - 1] + taus[mid]) / 2
    return math.sqrt(median), len(taus)


@dataclass(frozen=True)
class Prediction:
    centre: float  # log ratio
    sd: float
    hosts: int

    def interval(self, confidence: float = CONFIDENCE) -> tuple[float, float]:
        z = float(sps.norm.ppf(0.5 + confidence / 2))
        return self.centre - z * self.sd, self.centre + z * self.sd

    def holds(self, estimate: float, confidence: float = CONFIDENCE) -> bool:
        lo, hi = self.interval(confidence)
        return lo <= estimate <= hi


def predict(host_estimates: list[tuple[float, float]], tau: float) -> Prediction:
    """The prediction for a new host from the earlier hosts' (log ratio, standard error) and a borrowed tau."""
    if not host_estimates or not math.isfinite(tau):
        raise ValueError("a prediction needs at least one earlier host and a between-host spread")
    n = len(host_estimates)
    centre = math.fsum(e for e, _ in host_estimates) / n
    var_centre = math.fsum(s * s for _, s in host_estimates) / n ** 2 + (tau * tau / n)
    ses = sorted(s for _, s in host_estimates)
    se_new = ses[len(ses) // 2] if n % 2 else (ses[n // 2 - 1] + ses[n // 2]) / 2
    return Prediction(centre, math.sqrt(var_centre + tau * tau + se_new * se_new), n)


# ---- the machine level: how machines of one processor kind differ ------------------------------------------
#
# A kind's answer is a promise about the machines of that kind, and its one or two machines cannot say how
# much the next one may differ. The between-machine variance is therefore one component estimated jointly
# over every cell (a pair on a workload) and kind measured on two machines or more: each such cell and kind
# gives its machines' estimates (each machine's own runs and builds pooled) with their standard errors, and
# the variance is the Paule-Mandel value at which the cells' generalised Q statistics sum to their degrees of
# freedom (sum of machines - 1), with the Q-profile 95% interval (Viechtbauer 2007). What is used is that
# estimate moderated by a conservative prior, as limma moderates a gene's variance: a prior variance s0^2 worth
# d0 degrees of freedom, (d0 s0^2 + d tau^2) / (d0 + d) on d0 + d degrees of freedom. Until the dataset has a
# kind measured on two machines it is the prior alone, never zero; as machines are added the data outweigh it.
#
# The prior: a standard deviation of 1% on the log scale between machines of one kind, worth 2 degrees of
# freedom. Its source is the size of what it stands for, measured before the dataset held two machines of a
# kind: a fresh machine of the kind 25/17/1 read seed 002's dom-churn cell above the published interval
# (about ±0.7% wide) in four of five layout builds, and the seeds' own reports put two machines of one kind
# apart by more than either's interval; 1% is above both the A/A floors (±0.3-0.7%) and those differences'
# typical size, and 2 degrees of freedom let a handful of cells overrule it.
PRIOR_TAU_MACHINE = 0.01
PRIOR_DF_MACHINE = 2.0
PRIOR_SOURCE = ("prior: 1% between machines of a kind on 2 degrees of freedom (stats/prediction.py), the size of "
                "the differences seen between two machines of one kind before the dataset held two")


@dataclass(frozen=True)
class Spread:
    """The between-machine variance: `tau2` as used (the data moderated by the prior) on `df` degrees of freedom;
    `estimate`, `low`, `high` the data's own Paule-Mandel value and Q-profile 95% interval (nan without data),
    from `cells` cells and kinds on `data_df` degrees of freedom."""
    tau2: float
    df: float
    estimate: float
    low: float
    high: float
    cells: int
    data_df: float
    source: str

    @property
    def tau(self) -> float:
        return math.sqrt(self.tau2)


def _q_statistic(groups: list[list[tuple[float, float]]], tau2: float) -> float:
    """The generalised Q summed over the groups: each group's machines' squared deviations from their
    inverse-variance mean, weighted by 1 / (se^2 + tau2)."""
    total = []
    for g in groups:
        w = [1.0 / (max(s, 1e-9) ** 2 + tau2) for _, s in g]
        mean = math.fsum(wi * e for wi, (e, _) in zip(w, g)) / math.fsum(w)
        total.append(math.fsum(wi * (e - mean) ** 2 for wi, (e, _) in zip(w, g)))
    return math.fsum(total)


def _solve_q(groups, target: float, hi: float = 1.0) -> float:
    """The tau2 at which the summed Q equals `target` (Q falls as tau2 grows), 0 when Q(0) is already below."""
    if _q_statistic(groups, 0.0) <= target:
        return 0.0
    while _q_statistic(groups, hi) > target and hi < 1e3:
        hi *= 4
    lo = 0.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if _q_statistic(groups, mid) > target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-14 + 1e-9 * hi:
            break
    return (lo + hi) / 2


def machine_spread(cells: dict, prior_tau: float = PRIOR_TAU_MACHINE, prior_df: float = PRIOR_DF_MACHINE,
                   confidence: float = CONFIDENCE) -> Spread:
    """The between-machine variance from {(cell, kind): [(estimate, se) per machine]}: the cells with two
    machines or more estimate it jointly (Paule-Mandel, Q-profile interval), moderated by the prior."""
    groups = [list(v) for _, v in sorted(cells.items(), key=lambda kv: str(kv[0])) if len(v) >= 2]
    d = float(sum(len(g) - 1 for g in groups))
    p2 = prior_tau ** 2
    if not groups:
        return Spread(p2, prior_df, math.nan, math.nan, math.nan, 0, 0.0, PRIOR_SOURCE)
    estimate = _solve_q(groups, d)
    low = _solve_q(groups, float(sps.chi2.ppf(0.5 + confidence / 2, d)))
    high = _solve_q(groups, float(sps.chi2.ppf(0.5 - confidence / 2, d)))
    used = (prior_df * p2 + d * estimate) / (prior_df + d)
    source = (f"estimated from {len(groups)} cells and kinds with two machines or more ({d:g} degrees of "
              f"freedom), moderated by the {PRIOR_SOURCE}")
    return Spread(used, prior_df + d, estimate, low, high, len(groups), d, source)


def next_machine(centre: float, se_centre: float, spread: Spread, se_new: float,
                 confidence: float = CONFIDENCE, centre_df: float | None = None) -> tuple[float, float]:
    """The prediction interval (log scale) of the estimate a new machine of the kind gives: the kind's mean, its
    uncertainty, the new machine's own deviation (the spread) and the new machine's measurement error under the
    design it runs (`se_new`), on the spread's degrees of freedom, or on the mean's own (`centre_df`) where
    fewer: a kind whose mean is known from one or two degrees of freedom cannot promise more about its next
    machine than about its mean, so this interval is never narrower than the mean's at the same confidence."""
    sd = math.sqrt(se_centre ** 2 + spread.tau2 + se_new ** 2)
    df = spread.df if centre_df is None or not centre_df > 0 else min(spread.df, centre_df)
    q = float(sps.t.ppf(0.5 + confidence / 2, df))
    return centre - q * sd, centre + q * sd
