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
