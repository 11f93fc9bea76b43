"""Scores under weights drawn around the published ones, on seeded simulated rows."""
import numpy as np
import pytest

from simulated_dataset import probe_rows_for
from analysis.stats import security as S
from analysis.stats import weight_draws as D



def test_the_weight_draws_centre_on_the_published_weights_and_move_each_capability_whole():
    weights = S.DEFAULT_WEIGHTS
    capability_of = S.CAPABILITY_OF
    probes, w = D.weight_draws(weights, 40000, seed=3)
    assert np.allclose(w.mean(axis=0), [weights[p] for p in probes], rtol=0.03)
    assert np.allclose(w.sum(axis=1), sum(weights.values()))
    groups = D.weight_groups(weights)
    assert set(groups) == set(capability_of.values())
    c = D.weight_concentration(len(groups))
    m = 1 / len(groups)
    assert np.sqrt(m * (1 - m) / (c + 1)) / m == pytest.approx(D.WEIGHT_CV)
    # every entry of a capability moves with it: their ratios never change from draw to draw
    members = [probes.index(p) for p in groups["chosen-address"]]
    ratio = w[:, members] / w[:, members[:1]]
    assert np.allclose(ratio, ratio[0])
    # a capability's total varies as the Dirichlet says
    total = w[:, members].sum(axis=1)
    share = sum(weights[p] for p in groups["chosen-address"]) / sum(weights.values())
    assert total.std() / total.mean() == pytest.approx(np.sqrt(share * (1 - share) / (c + 1)) / share, rel=0.05)
    assert not np.array_equal(w, D.weight_draws(weights, 40000, seed=4)[1])
    assert np.array_equal(w, D.weight_draws(weights, 40000, seed=3)[1])


def test_weights_move_an_uneven_allocator_and_not_an_even_one():
    weights = {"double-free": 8, "uaf-read": 4, "overflow-16": 8, "reuse-immediate": 5}
    even = probe_rows_for("even", {p: 0.5 for p in weights})
    uneven = probe_rows_for("uneven", {"double-free": 1.0, "uaf-read": 0.0, "overflow-16": 0.0, "reuse-immediate": 0.0})
    drawn = D.weighted_score_draws(even + uneven, weights, draws=4000, seed=1)
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
