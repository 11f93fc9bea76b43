"""Per-host estimates and the pooled one with the host as a random effect (analysis/stats/hosts.py), on
seeded simulated estimates with a known truth."""
import math

import numpy as np
import pandas as pd
import scipy.stats as sps

from analysis.stats.estimators import Difference
from analysis.stats.hosts import between_variance, contrast, group_panel, random_effects_pool


def noisy(rng, truth, se, df=30.0):
    return Difference(truth + rng.normal(0, se), se, df)


def test_the_pooled_interval_covers_the_mean_over_hosts_at_its_level():
    rng = np.random.default_rng(7)
    mu, tau, se, k = math.log(1.05), 0.03, 0.01, 5
    covered = 0
    for _ in range(600):
        diffs = [noisy(rng, mu + rng.normal(0, tau), se) for _ in range(k)]
        lo, hi = random_effects_pool(diffs).interval()
        covered += lo <= mu <= hi
    assert 0.92 <= covered / 600 <= 0.99, covered / 600


def test_the_between_host_spread_is_recovered():
    rng = np.random.default_rng(3)
    taus = [math.sqrt(between_variance([noisy(rng, rng.normal(0, 0.05), 0.01) for _ in range(40)]))
            for _ in range(200)]
    assert abs(np.mean(taus) - 0.05) < 0.005
    same = [math.sqrt(between_variance([noisy(rng, 0.0, 0.01) for _ in range(40)])) for _ in range(200)]
    assert np.mean(same) < 0.004


def test_one_estimate_is_its_own_pool_and_equal_estimates_pool_to_their_value():
    d = Difference(0.1, 0.02, 12.0)
    assert random_effects_pool([d]) == d
    pooled = random_effects_pool([Difference(0.1, 0.02, 12.0)] * 4)
    assert pooled.estimate == 0.1 and pooled.df == 3.0
    assert math.isclose(pooled.se, 0.01)  # four equal estimates: se / 2, no between-host variance


def cells_of(rng, truths: dict, runs_per_host=2, workloads=("a", "b", "c"), se=0.004):
    """Comparison rows as a run makes them, each host with its own true log ratio per allocator."""
    rows, host_of = [], {}
    for host, by_alloc in truths.items():
        for r in range(runs_per_host):
            run_id = f"{host}-run{r}"
            host_of[run_id] = host
            run_shift = rng.normal(0, 0.002)
            for alloc, (truth, measured) in by_alloc.items():
                for w in measured or workloads:
                    est = truth + run_shift + rng.normal(0, se)
                    half = sps.t.ppf(0.975, 20) * se
                    rows.append({"run_id": run_id, "workload": w, "allocator": alloc, "scale": 1.0, "method": "yuen",
                                 "ratio": math.exp(est), "ci_low": math.exp(est - half),
                                 "ci_high": math.exp(est + half), "df": 20.0})
    return pd.DataFrame(rows), host_of


def test_each_host_estimate_recovers_its_host_and_the_pooled_the_mean_over_hosts():
    rng = np.random.default_rng(11)
    truth = {"h1": 1.02, "h2": 1.10, "h3": 1.05}
    cells, host_of = cells_of(rng, {h: {"x": (math.log(t), None), "only-h1": (0.0, None)} if h == "h1"
                                    else {"x": (math.log(t), None)} for h, t in truth.items()})
    per_host, pooled = group_panel(cells, host_of)
    assert set(per_host["allocator"]) == {"x"} and list(pooled["allocator"]) == ["x"]  # only-h1: one host
    for _, r in per_host.iterrows():
        assert r["ci_low"] <= truth[r["group"]] <= r["ci_high"], r.to_dict()
        assert r["runs"] == 2 and r["cells"] == 3
    p = pooled.iloc[0]
    mean = math.exp(np.mean(np.log(list(truth.values()))))
    assert p["ci_low"] <= mean <= p["ci_high"] and p["groups"] == 3
    assert 0.02 < p["tau"] < 0.06  # the hosts differ by about 0.04 on the log scale
    assert math.isnan(p["contrast_ratio"])


def test_only_cells_every_host_measured_count():
    rng = np.random.default_rng(5)
    cells, host_of = cells_of(rng, {"h1": {"x": (0.05, ("a", "b", "extra"))}, "h2": {"x": (0.05, ("a", "b"))}})
    per_host, pooled = group_panel(cells, host_of)
    assert set(per_host["cells"]) == {2} and pooled.iloc[0]["cells"] == 2


def test_the_pooled_model_is_a_parameter():
    rng = np.random.default_rng(5)
    cells, host_of = cells_of(rng, {"h1": {"x": (0.05, None)}, "h2": {"x": (0.05, None)}})
    seen = []

    def first_only(diffs):
        seen.append(len(diffs))
        return diffs[0]

    group_panel(cells, host_of, pool=first_only)
    assert seen == [2, 2, 2, 2, 2, 2, 2]  # two runs in each of 3 cells on 2 hosts, then the two hosts


def test_two_groups_are_contrasted():
    rng = np.random.default_rng(9)
    cells, host_of = cells_of(rng, {"locked": {"x": (math.log(1.04), None)},
                                    "not locked": {"x": (math.log(1.00), None)}})
    _, pooled = group_panel(cells, host_of)
    p = pooled.iloc[0]
    assert p["contrast_low"] <= 1.04 <= p["contrast_high"] and p["contrast_low"] > 1.0
    d = contrast(Difference(0.3, 0.3, 10.0), Difference(0.1, 0.4, 10.0))
    assert math.isclose(d.estimate, 0.2) and math.isclose(d.se, 0.5) and 10 < d.df < 20


def test_rows_without_an_interval_or_a_group_are_ignored():
    rng = np.random.default_rng(1)
    cells, host_of = cells_of(rng, {"h1": {"x": (0.0, None)}, "h2": {"x": (0.0, None)}})
    broken = cells.copy()
    broken.loc[0, "ci_low"] = float("nan")
    broken = pd.concat([broken, cells.head(3).assign(run_id="stranger")], ignore_index=True)
    per_host, _ = group_panel(broken, host_of)
    assert set(per_host["group"]) == {"h1", "h2"}
    assert group_panel(pd.DataFrame(), host_of)[0].empty


def test_the_next_machines_interval_is_never_narrower_than_the_kinds_mean_known_from_few_degrees_of_freedom():
    """A kind's mean from one machine and one degree of freedom: the next machine's interval takes the mean's
    degrees of freedom where they are fewer than the spread's, so it holds the mean's own interval."""
    import math

    import scipy.stats as sps

    from analysis.stats import prediction

    spread = prediction.Spread(0.015 ** 2, 14.0, math.nan, math.nan, math.nan, 6, 12.0, "test")
    centre, se = 1.28, 0.2
    lo, hi = prediction.next_machine(centre, se, spread, 0.01, centre_df=1.0)
    q_mean = float(sps.t.ppf(0.975, 1.0))
    assert lo <= centre - q_mean * se and hi >= centre + q_mean * se
    # with the mean known from many degrees of freedom, the spread's own are used, as before
    wide = prediction.next_machine(centre, se, spread, 0.01)
    assert prediction.next_machine(centre, se, spread, 0.01, centre_df=100.0) == wide
