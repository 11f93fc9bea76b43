"""The fronts under drawn weights: panels, hosts, the common workload set, front shares, knock-outs left out and
the probes that separate nothing."""
import numpy as np
import pandas as pd
import pytest

from analysis.publish.security import front as F
from simulated_dataset import probe_rows_for as rows_for

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
    front, _ = F.weight_front(rows, results, ["base", "fast", "safe", "dominated", "debugger"], "base",
                              roles={"debugger": "debugging"}, weights=WEIGHTS, draws=400, seed=2)
    front = front.set_index(["panel", "allocator"])
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


def test_knock_outs_and_controls_enter_no_front_and_each_host_has_its_own():
    results = pd.DataFrame(ratio_rows("fast", {"a": 0.5, "b": 0.5}) + ratio_rows("knocked", {"a": 0.4, "b": 0.4})
                           + ratio_rows("control", {"a": 1.0, "b": 1.0}) + ratio_rows("other", {"a": 2.0, "b": 2.0}))
    results["run_id"] = ["r1"] * 6 + ["r2"] * 2
    rows = (rows_for("base", {p: 0.5 for p in WEIGHTS}) + rows_for("fast", {p: 0.9 for p in WEIGHTS})
            + rows_for("knocked", {p: 1.0 for p in WEIGHTS}) + rows_for("control", {p: 0.5 for p in WEIGHTS})
            + rows_for("other", {p: 0.1 for p in WEIGHTS}))
    front, _ = F.weight_front(rows, results, ["base", "fast", "knocked", "control", "other"], "base",
                              roles={"knocked": "knock-out", "control": "control"}, weights=WEIGHTS,
                              host_of={"r1": "host one", "r2": "host two"}, draws=200, seed=1)
    assert "knocked" not in set(front["allocator"]) and "control" not in set(front["allocator"])
    by_host = {h: set(g["allocator"]) for h, g in front.groupby("host")}
    assert by_host == {"host one": {"base", "fast"}, "host two": {"base", "other"}}


def test_a_probe_every_deployable_configuration_missed_or_caught_separates_nothing_and_weighs_nothing():
    def row(alloc, probe, **counts):
        return {"allocator": alloc, "probe": probe, "size": 64, "outcome": max(counts, key=counts.get),
                "outcomes": " ".join(f"{k}={v}" for k, v in counts.items()), "trials": sum(counts.values())}
    rows = [row("a", "double-free", missed=20), row("b", "double-free", missed=20),
            row("a", "uaf-read", caught=20), row("b", "uaf-read", caught=20),
            row("a", "overflow-16", caught=20), row("b", "overflow-16", missed=5, caught=15),
            row("a", "reuse-immediate", caught=10, mitigated=10), row("b", "reuse-immediate", caught=20),
            row("debugger", "double-free", caught=20)]
    assert F.separates_nothing(rows, {"a", "b"}) == {"double-free": "missed", "uaf-read": "caught"}
    results = pd.DataFrame(ratio_rows("b", {"w": 1.5}))
    front, silent = F.weight_front(rows, results, ["a", "b"], "a", roles={}, weights=WEIGHTS, draws=100)
    assert silent["deployable"] == {"double-free": "missed", "uaf-read": "caught"}
    # reuse-immediate was never missed, but caught under b and partly mitigated under a: it still separates
    assert silent["never missed: deployable"] == {"reuse-immediate": "stopped"}
    assert F.never_missed(rows, {"a", "b"}) == ["reuse-immediate"]
    from analysis.stats import security as S
    without = S.scores(rows, {**WEIGHTS, "double-free": 0, "uaf-read": 0})
    assert front.set_index("allocator").loc["b", "score"] == pytest.approx(without["b"]["score"])
    assert without["b"]["score"] != pytest.approx(S.scores(rows, WEIGHTS)["b"]["score"])
