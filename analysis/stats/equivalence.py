"""Equivalence tests (TOST) on a log ratio against a pre-registered margin, and a measured interval against a
claimed figure with its own interval.

A cost no larger than m (rule cost_at_most) is shown when the one-sided 95% upper bound of log(with/without)
is below log(1 + m): the one test of TOST that matters for a cost. A cost larger than m is shown when the
one-sided lower bound is above log(1 + m). Two-sided (rule equivalent), both tests at 5% each: the 90%
interval inside [-log(1 + m), log(1 + m)] is "no larger than m" either way; wholly outside it, "larger than m".
Anything else is not decided at this precision: the interval is too wide for the margin, which says how many
more runs are needed, not that the two are equal.

Across hosts (processor kinds), each answered alone, the verdict is an intersection-union test: "larger than
m on every host measured" when every host's test says larger, "no larger than m on every host measured" when
every host's says no larger (each at 5%, so the conjunction holds at 5% too), "depends on the host" when at
least one host says larger and another no larger, "not decided" otherwise.
"""
import math
from dataclasses import dataclass

from scipy import stats as sps

ALPHA = 0.05
NO_LARGER = "no larger than m"
LARGER = "larger than m"
UNDECIDED = "not decided at this precision"
EVERY_HOST = " on every host measured"
DEPENDS = "depends on the host"


@dataclass(frozen=True)
class Decision:
    outcome: str  # NO_LARGER, LARGER or UNDECIDED
    low: float  # the bounds the rule used, as ratios
    high: float
    margin: float

    def words(self) -> str:
        if self.outcome == UNDECIDED:
            return self.outcome
        return f"{self.outcome[:-1]}{self.margin * 100:g}%"


def tost(estimate: float, se: float, df: float, margin: float, rule: str = "cost_at_most",
         alpha: float = ALPHA) -> Decision:
    """The decision on a log ratio with its standard error and degrees of freedom."""
    if not 0 < margin < 1:
        raise ValueError(f"margin {margin} is not a fraction between 0 and 1")
    bound = math.log1p(margin)
    q = sps.t.ppf(1 - alpha, df) if se > 0 else 0.0
    lo, hi = estimate - q * se, estimate + q * se
    if rule == "cost_at_most":
        outcome = NO_LARGER if hi < bound else LARGER if lo > bound else UNDECIDED
    elif rule == "equivalent":
        outcome = (NO_LARGER if -bound < lo and hi < bound else
                   LARGER if lo > bound or hi < -bound else UNDECIDED)
    else:
        raise ValueError(f"unknown rule {rule!r}")
    return Decision(outcome, math.exp(lo), math.exp(hi), margin)


def se_of_interval(low: float, high: float, df: float, confidence: float = 0.95) -> float:
    """The standard error on the log scale behind a symmetric (log-scale) interval of ratios."""
    return (math.log(high) - math.log(low)) / (2 * sps.t.ppf(0.5 + confidence / 2, df))


def against_claim(estimate: float, se: float, df: float, claim_ratio: float, claim_low: float | None,
                  claim_high: float | None, claim_df: float | None, margin: float) -> str:
    """Our log ratio against a claimed ratio that carries its own 95% interval (the seed's replicates,
    re-analysed): both uncertainties enter the difference (Welch-Satterthwaite degrees of freedom), and the
    difference is tested two-sided against the margin. A claim without an interval (one run per arm) is not
    compared: a point has no precision to be held to."""
    if claim_low is None or claim_high is None or not (claim_low > 0 and claim_high > 0) or not claim_df:
        return "the claim has no interval of its own (one run per arm): not compared"
    claim_se = se_of_interval(claim_low, claim_high, claim_df)
    diff = estimate - math.log(claim_ratio)
    var = se ** 2 + claim_se ** 2
    dof = var ** 2 / (se ** 4 / df + claim_se ** 4 / claim_df) if var > 0 else 1.0
    d = tost(diff, math.sqrt(var), dof, margin, "equivalent")
    if d.outcome == NO_LARGER:
        return f"agrees with the claim within {margin * 100:g}%"
    if d.outcome == LARGER:
        return f"differs from the claim by more than {margin * 100:g}%"
    return "not decided against the claim at this precision (the claim's own interval is part of it)"


def across(decisions: dict, margin: float) -> tuple[str, str]:
    """(outcome, words) of the intersection-union verdict over {host: outcome of its own test}."""
    if not decisions:
        return UNDECIDED, UNDECIDED
    m = f"{margin * 100:g}%"
    outcomes = set(decisions.values())
    if outcomes == {LARGER}:
        return LARGER + EVERY_HOST, f"larger than {m}{EVERY_HOST}"
    if outcomes == {NO_LARGER}:
        return NO_LARGER + EVERY_HOST, f"no larger than {m}{EVERY_HOST}"

    def said(outcome: str) -> str:
        hosts = ", ".join(sorted(h for h, o in decisions.items() if o == outcome))
        word = Decision(outcome, 0, 0, margin).words() if outcome != UNDECIDED else "not decided"
        return f"{word} on {hosts}"
    named = "; ".join(said(o) for o in (LARGER, NO_LARGER, UNDECIDED) if o in outcomes)
    if {LARGER, NO_LARGER} <= outcomes:
        return DEPENDS, f"{DEPENDS}: {named}"
    return UNDECIDED, f"not decided across hosts: {named}" if len(decisions) > 1 else UNDECIDED
