"""Scores under weights drawn around the published ones, on seeded simulated rows."""
import numpy as np
import pytest

from analysis.stats import security as S


def rows_for(alloc, losses: dict, n=20):
    """One row per probe at size 64: `missed` in round(loss * n) of n processes, caught in the rest."""
    out = []
    for probe, loss in losses.items():
        k = round(loss * n)
        out.append({"allocator": alloc, "probe": probe, "size": 64, "outcome": "missed" if k else "caught",
                    "outcomes": f"missed={k} caught={n - k}", "trials": n})
    return out


def test_the_weight_draws_centre_on_the_published_weights_with_the_stated_spread():
    weights = S.DEFAULT_WEIGHTS
    probes, w = S.weight_draws(weights, 40000, seed=3)
    assert np.allclose(w.mean(axis=0), [weights[p] for p in probes], rtol=0.03)
    assert np.allclose(w.sum(axis=1), sum(weights.values()))
    c = S.weight_concentration(len(probes))
    m = 1 / len(probes)
    assert np.sqrt(m * (1 - m) / (c + 1)) / m == pytest.approx(S.WEIGHT_CV)
    assert not np.array_equal(w, S.weight_draws(weights, 40000, seed=4)[1])
    assert np.array_equal(w, S.weight_draws(weights, 40000, seed=3)[1])


def test_weights_move_an_uneven_allocator_and_not_an_even_one():
    weights = {"double-free": 8, "uaf-read": 4, "overflow-16": 8, "reuse-immediate": 5}
    even = rows_for("even", {p: 0.5 for p in weights})
    uneven = rows_for("uneven", {"double-free": 1.0, "uaf-read": 0.0, "overflow-16": 0.0, "reuse-immediate": 0.0})
    drawn = S.weighted_score_draws(even + uneven, weights, draws=4000, seed=1)
    sampling = S.score_intervals(even + uneven, weights, draws=4000, seed=1).set_index("allocator")
    published = S.scores(even + uneven, weights)
    for alloc in ("even", "uneven"):
        low, high = np.quantile(drawn[alloc], [0.025, 0.975])
        assert low < published[alloc]["score"] < high
    even_width = np.subtract(*np.quantile(drawn["even"], [0.975, 0.025]))
    uneven_width = np.subtract(*np.quantile(drawn["uneven"], [0.975, 0.025]))
    # the even allocator loses half of every primitive: weights cannot move it beyond its sampling
    assert even_width < 1.5 * (sampling.loc["even", "score_high"] - sampling.loc["even", "score_low"])
    # the uneven one loses one primitive whole: how much it weighs is most of its interval
    assert uneven_width > 2 * (sampling.loc["uneven", "score_high"] - sampling.loc["uneven", "score_low"])
