"""The machine as a level of the noise model (pool.per_host with a Spread, stats.prediction.machine_spread) on
synthetic runs with a known truth: a disagreeing second machine widens its kind's interval, the joint
between-machine variance is recovered, and the prior stands in, never zero, until a kind has two machines."""
import math

import numpy as np
import pandas as pd

from analysis.publish.debates import pool
from analysis.stats import prediction
from synthetic_machines import machine_runs


def answer(runs: pd.DataFrame):
    spread = prediction.machine_spread(pool.machine_cells(pool.machine_estimates(runs)))
    return pool.per_host(runs, 0.025, "cost_at_most", {}, spread).iloc[0], spread


def test_a_second_machine_that_disagrees_widens_the_kinds_interval_and_one_that_agrees_does_not():
    rng = np.random.default_rng(7)
    first = machine_runs("K", "M-1", 1.10, rng)
    # other cells measured on two machines each: the joint estimate has data besides this kind's cell
    others = pd.concat([machine_runs("K", f"M-{m}", 1.05, rng, cell=f"c{c}") for c in range(4) for m in (1, 2)])
    alone, _ = answer(pd.concat([first, others]))
    disagree, spread = answer(pd.concat([first, machine_runs("K", "M-2", 1.16, rng), others]))
    width = lambda row: math.log(row["mean90_high"]) - math.log(row["mean90_low"])  # noqa: E731
    # the two machines differ by 5.3%, beyond both within-machine intervals (about ±0.5%)
    assert width(disagree) > width(alone) and disagree["next_high"] / disagree["next_low"] > alone["next_high"] / alone["next_low"]
    assert spread.cells == 5 and spread.estimate > prediction.PRIOR_TAU_MACHINE ** 2
    agree, spread_agree = answer(pd.concat([first, machine_runs("K", "M-2", 1.10, rng), others]))
    assert width(agree) < width(disagree) and spread_agree.tau2 < spread.tau2
    assert disagree["n_machines"] == 2 and disagree["machines"] == "M-1; M-2"


def test_without_a_kind_on_two_machines_the_prior_stands_in_and_is_never_zero():
    rng = np.random.default_rng(3)
    _, spread = answer(machine_runs("K", "M-1", 1.10, rng))
    assert spread.tau == prediction.PRIOR_TAU_MACHINE > 0 and spread.df == prediction.PRIOR_DF_MACHINE
    assert spread.cells == 0 and math.isnan(spread.estimate) and "prior" in spread.source
    # machines that agree exactly still leave the prior's weight in the variance used
    exact = {("c", k): [(0.05, 0.001), (0.05, 0.001)] for k in range(3)}
    assert prediction.machine_spread(exact).tau2 > 0


def test_the_joint_between_machine_variance_is_recovered_on_ten_kinds_of_three_machines():
    """'Recovered': the variance's 95% interval holds the truth in at least 90% of datasets."""
    rng = np.random.default_rng(11)
    for tau in (0.005, 0.01, 0.02):
        held = 0
        for _ in range(200):
            cells = {}
            for k in range(10):
                u = rng.normal(0, tau, 3)
                se = rng.uniform(0.002, 0.005, 3)
                cells[("c", k)] = [(u[m] + rng.normal(0, se[m]), se[m]) for m in range(3)]
            s = prediction.machine_spread(cells)
            held += s.low <= tau * tau <= s.high
        assert held / 200 >= 0.9, (tau, held)


def test_a_kind_with_one_layout_build_borrows_the_layout_variance_or_is_not_decided():
    rng = np.random.default_rng(5)
    one = machine_runs("K", "M-1", 1.10, rng, builds=1, runs_per_build=4)
    spread = prediction.machine_spread({})
    borrowed = pool.per_host(one, 0.025, "cost_at_most", {}, spread, layout_tau2=0.01 ** 2).iloc[0]
    none = pool.per_host(one, 0.025, "cost_at_most", {}, spread, layout_tau2=None).iloc[0]
    assert "borrowed" in borrowed["layout_variance"] and none["decision"] == "not decided at this precision"
    assert "not decided" in none["layout_variance"]
