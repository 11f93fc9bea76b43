"""The front under drawn weights: panels, the common workload set, front shares."""
import numpy as np
import pandas as pd
import pytest

from analysis.publish import security_front as F
from tests.test_security_weights import rows_for

WEIGHTS = {"double-free": 8, "uaf-read": 4, "overflow-16": 8, "reuse-immediate": 5}


def ratio_rows(alloc, ratios: dict, scale=1.0):
    """Comparison rows with a tight interval (+-1% on the log scale, 20 degrees of freedom)."""
    return [{"allocator": alloc, "workload": w, "scale": scale, "ratio": r, "ci_low": r * np.exp(-0.01),
             "ci_high": r * np.exp(0.01), "df": 20.0} for w, r in ratios.items()]


def test_front_members_are_the_points_nothing_beats_on_both_axes():
    overhead = np.array([1.0, 0.8, 2.0, 1.2, 0.8])
    score = np.array([70.0, 40.0, 90.0, 60.0, 40.0])
    assert F.front_members(overhead, score).tolist() == [True, True, True, False, True]


def test_each_panel_is_drawn_on_the_workloads_all_its_allocators_ran():
    results = pd.DataFrame(ratio_rows("fast", {"a": 0.5, "b": 0.5, "c": 100.0})  # c is not common: left out
                           + ratio_rows("safe", {"a": 2.0, "b": 2.0})
                           + ratio_rows("dominated", {"a": 3.0, "b": 3.0, "c": 3.0})
                           + ratio_rows("debugger", {"a": 50.0, "b": 50.0, "d": 50.0}, scale=0.001))
    rows = (rows_for("base", {p: 0.5 for p in WEIGHTS}) + rows_for("fast", {p: 0.9 for p in WEIGHTS})
            + rows_for("safe", {p: 0.05 for p in WEIGHTS}) + rows_for("dominated", {p: 0.6 for p in WEIGHTS})
            + rows_for("debugger", {p: 0.0 for p in WEIGHTS}))
    front = F.weight_front(rows, results, ["base", "fast", "safe", "dominated", "debugger"], "base",
                           debugging={"debugger"}, weights=WEIGHTS, draws=400, seed=2).set_index(["panel", "allocator"])
    deployable = front.loc["deployable"]
    assert set(deployable.index) == {"base", "fast", "safe", "dominated"}
    assert set(deployable["workloads"]) == {"a b"}
    assert deployable.loc["fast", "overhead"] == pytest.approx(0.5, rel=1e-6)
    assert deployable.loc["base", "overhead"] == 1.0
    for alloc in ("base", "fast", "safe"):
        assert deployable.loc[alloc, "front_share"] > 0.95
    assert deployable.loc["dominated", "front_share"] < 0.05
    assert deployable.loc["safe", "score_low"] < deployable.loc["safe", "score"] < deployable.loc["safe", "score_high"]
    debugging = front.loc["debugging"]
    assert set(debugging.index) == {"debugger", "base"} and set(debugging["workloads"]) == {"a b d"}
    assert debugging.loc["debugger", "overhead"] == pytest.approx(50, rel=1e-6)
