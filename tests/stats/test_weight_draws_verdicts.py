"""Verdicts that survive the weights: "safer" or "less safe" only when the difference holds in at least 95% of
the joint draws of the weights and the probes' sampling, checked on simulated probe rows with a known truth."""
import numpy as np
import pytest

from analysis.stats import security as S
from analysis.stats import weight_draws as D

PROBES = ("double-free", "interior-free", "overflow-16", "uaf-write", "freelist-poison", "uaf-read")


def weights():
    return {p: S.PROBE_WEIGHTS[p] for p in PROBES}


def simulated(rng, alloc: str, true_loss: dict, n: int = 20) -> list[dict]:
    """One row per probe: each of n processes misses with the probe's true probability, else is caught."""
    out = []
    for probe in PROBES:
        k = int(rng.binomial(n, true_loss[probe]))
        out.append({"allocator": alloc, "probe": probe, "size": 64, "outcome": "missed" if k else "caught",
                    "outcomes": f"missed={k} caught={n - k}", "trials": n})
    return out


def verdict_of(rows, a: str, b: str, seed: int) -> str:
    table = D.weighted_intervals(rows, weights(), baseline=b, draws=1000, seed=seed).set_index("allocator")
    return D.safety_verdict(table.loc[a, "above_baseline"])


def test_the_capabilities_of_the_test_probes_are_the_ones_the_cases_rely_on():
    capability = S.CAPABILITY_OF
    assert {capability[p] for p in ("double-free", "interior-free")} == {"overlapping-chunks"}
    assert {capability[p] for p in ("overflow-16", "uaf-write")} == {"restricted-write"}
    assert S.PROBE_WEIGHTS["double-free"] > S.PROBE_WEIGHTS["uaf-write"]


def test_an_allocator_better_at_every_probe_is_called_safer():
    """Truth: a loses less on every probe, so it is safer under any weights; the verdict says so."""
    rng = np.random.default_rng(11)
    strong = {p: 0.1 for p in PROBES}
    weak = {p: 0.6 for p in PROBES}
    found = [verdict_of(simulated(rng, "a", strong) + simulated(rng, "b", weak), "a", "b", seed=i)
             for i in range(40)]
    assert found.count("safer") >= 38, found
    assert "less safe" not in found


def test_a_difference_whose_sign_the_weights_decide_is_not_called():
    """Truth: a gives every overlap and stops every restricted write, b the reverse. Under the published weights
    b is safer (an overlap weighs more), but drawn capability weights reverse the order in a large share of
    draws: neither verdict may stand, however many processes ran."""
    a = {**{p: 0.0 for p in PROBES}, "double-free": 1.0, "interior-free": 1.0}
    b = {**{p: 0.0 for p in PROBES}, "overflow-16": 1.0, "uaf-write": 1.0}
    rng = np.random.default_rng(12)
    rows = simulated(rng, "a", a, n=2000) + simulated(rng, "b", b, n=2000)
    published = S.scores(rows, weights())
    assert published["b"]["score"] > published["a"]["score"] + 5
    table = D.weighted_intervals(rows, weights(), baseline="a", draws=4000, seed=3).set_index("allocator")
    share = table.loc["b", "above_baseline"]
    assert 0.05 < share < 0.95
    assert D.safety_verdict(share) == D.INDISTINCT
    # under the probes' sampling alone the two are far apart: the old rule would have called b safer
    sampling = S.score_intervals(rows, weights(), draws=1000).set_index("allocator")
    assert sampling.loc["b", "score_low"] > sampling.loc["a", "score_high"]


@pytest.mark.parametrize("seed", [21, 22])
def test_two_allocators_with_one_truth_are_rarely_told_apart(seed):
    """Truth: the same loss on every probe. A verdict either way is a false one; at 95% of the draws each way it
    should come in about 10% of the simulations at most."""
    rng = np.random.default_rng(seed)
    truth = dict(zip(PROBES, (0.2, 0.5, 0.1, 0.7, 0.3, 0.9)))
    found = [verdict_of(simulated(rng, "a", truth) + simulated(rng, "b", truth), "a", "b", seed=i)
             for i in range(60)]
    assert sum(v != D.INDISTINCT for v in found) <= 9, found


def test_the_verdict_thresholds():
    assert D.safety_verdict(0.95) == "safer" and D.safety_verdict(0.05) == "less safe"
    assert D.safety_verdict(0.949) == D.INDISTINCT == D.safety_verdict(0.051) == D.safety_verdict(float("nan"))
