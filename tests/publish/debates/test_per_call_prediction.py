"""results_debate_per_call.csv: debated cells predicted from a host's per-call costs and its profiles of the
workloads, on canned profile runs whose answer is known by hand (a published machine.json names the host)."""
import json
import math

import pandas as pd
import pytest

from analysis.contract.debates_spec import Question
from analysis.contract.profile_schema import PROFILE_RUN_COLUMNS
from analysis.publish.debates import per_call_prediction, pool
from analysis.stats import cost_model
from conftest import published_machine

SPEC = {"900": Question("900", "does the defence cost more than 5%?", (("defended", "plain"), ("plain", "glibc")),
                        ("loop", "other", "elsewhere"), "wall_s", 0.05, "", "equivalence", primary=(("defended", "plain"), "loop"))}


def add_profile_run(runs_dir, run_id, machine, workload, calls, cpu_s, status="complete", processes=None):
    d = runs_dir / run_id
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({"run_id": run_id, "kind": "profile", "status": status,
                                               "params": {"workloads": [workload], "scale": 0.25}}))
    (d / "machine.json").write_text(json.dumps(machine))
    rows = [("malloc_calls", "", calls), ("malloc_calls", 64, calls), ("free_calls", 64, calls),
            ("timed_runs", "", 5), ("user_s", "", cpu_s), ("sys_s", "", 0.0), ("cpu_sd_log", "", 0.0),
            *([("processes", "", processes)] if processes is not None else [])]
    pd.DataFrame([{"run_id": run_id, "workload": workload, "scale": 0.25, "quantity": q, "size_class": c,
                   "value": v} for q, c, v in rows], columns=PROFILE_RUN_COLUMNS).to_csv(d / "profiles.csv",
                                                                                   index=False)


def per_call(processor, allocator, added):
    return {"processor": processor, "allocator": allocator, "pattern": "random", "size_class": 64,
            "added_ns": added, "added_ns_low": added - 1.0, "added_ns_high": added + 1.0}


@pytest.fixture
def runs(tmp_path):
    pool._processors.cache_clear()
    pool._machines.cache_clear()
    machine = published_machine(0)
    add_profile_run(tmp_path, "20270101T000000Z-profile-workloads", machine, "loop", 1e6, 9.0)  # replaced
    add_profile_run(tmp_path, "20270102T000000Z-profile-workloads", machine, "loop", 1e7, 1.0)
    add_profile_run(tmp_path, "20270103T000000Z-profile-workloads", machine, "loop", 1e5, 5.0, status="running")
    add_profile_run(tmp_path, "20270104T000000Z-profile-workloads", machine, "elsewhere", 1e7, 1.0)
    processor = pool._processors(tmp_path)["20270102T000000Z-profile-workloads"]
    yield tmp_path, processor
    pool._processors.cache_clear()
    pool._machines.cache_clear()


def test_a_debated_pair_is_predicted_from_the_newest_complete_profile_and_set_beside_its_measurement(runs):
    runs_dir, processor = runs
    costs = pd.DataFrame([per_call(processor, "defended", 30.0), per_call(processor, "plain", 10.0)])
    measured = pd.DataFrame([{"seed": "900", "configuration": "defended / plain", "workload": "loop",
                              "processor": processor, "ratio": 1.25, "ci_low": 1.19, "ci_high": 1.31}])
    t = per_call_prediction.table(runs_dir, costs, measured, SPEC, "glibc")
    # the profiled workloads only ("other" was never profiled), each contested pair
    assert sorted(zip(t["configuration"], t["workload"])) == [("defended / plain", "elsewhere"),
                                                             ("defended / plain", "loop"),
                                                             ("plain / glibc", "elsewhere"), ("plain / glibc", "loop")]
    row = t[(t["configuration"] == "defended / plain") & (t["workload"] == "loop")].iloc[0]
    assert row["profile_run"] == "20270102T000000Z-profile-workloads" and row["calls"] == 1e7
    # 1e7 pairs: 0.3 s added against 0.1 s, over 1 s under the baseline
    assert row["predicted"] == pytest.approx(1.3 / 1.1)
    assert row["added_with_ms"] == pytest.approx(300.0) and row["added_without_ms"] == pytest.approx(100.0)
    # the prediction interval is about [1.168, 1.196]: 1.25 lies above it, its confidence interval meets it
    assert row["measured"] == 1.25 and bool(row["inside"]) is False and bool(row["overlap"]) is True
    assert row["per_call_percent"] == pytest.approx(100 * math.log(1.3 / 1.1) / math.log(1.25))
    against_baseline = t[(t["configuration"] == "plain / glibc") & (t["workload"] == "loop")].iloc[0]
    assert against_baseline["predicted"] == pytest.approx(1.1) and against_baseline["added_without_ms"] == 0.0
    assert pd.isna(against_baseline["measured"]) and against_baseline["measured_display"] == ""
    # without terms or start-up costs, the prediction as `cost` makes it is the per-call one, and misses as much
    model = per_call_prediction.numbers(t)["model"]
    assert model["cells"] == 1 and model["terms"] == 0 and model["startup"] == 0
    assert model["median_miss_percent"] == model["per_call_median_miss_percent"] == f"{100 * (1.25 / (1.3 / 1.1) - 1):.1f}"


def test_a_cell_without_per_call_costs_keeps_its_row_with_the_reason(runs):
    runs_dir, processor = runs
    costs = pd.DataFrame([per_call(processor, "plain", 10.0)])
    t = per_call_prediction.table(runs_dir, costs, None, SPEC, "glibc")
    missing = t[t["configuration"] == "defended / plain"]
    assert len(missing) == 2 and missing["predicted"].isna().all()
    assert set(missing["reason"]) == {"no per-call costs of defended on this host"}
    numbers = per_call_prediction.numbers(t)
    assert numbers["predicted"] == 2 and numbers["compared"] == 0
    assert numbers["not_predicted"] == [{"seed": "900", "configurations": ["defended"], "unreachable": [],
                                         "other": []}]
    costs = pd.DataFrame([per_call(processor, "glibc", 0.0)])  # neither side: both named, the unreachable one why
    t = per_call_prediction.table(runs_dir, costs, None, {"901": Question(
        "901", "q", (("defended", "perl-mymalloc"),), ("loop",), "wall_s", 0.05, "", "equivalence")}, "glibc")
    assert list(t["reason"]) == ["no per-call costs of defended and perl-mymalloc on this host"]
    assert per_call_prediction.numbers(t)["not_predicted"][0]["unreachable"] == [
        {"configuration": "perl-mymalloc", "why": per_call_prediction.UNREACHABLE["perl-mymalloc"]}]


def test_no_profile_run_gives_an_empty_table():
    t = per_call_prediction.table(None, pd.DataFrame(columns=["processor", "allocator", *cost_model.COST_COLUMNS]),
                                  None, SPEC, "glibc")
    assert t.empty and list(t.columns) == per_call_prediction.COLUMNS
    assert per_call_prediction.numbers(t)["predicted"] == 0


def test_where_the_trials_timed_user_and_system_the_split_stands_beside_the_prediction(runs):
    runs_dir, processor = runs
    costs = pd.DataFrame([per_call(processor, "plain", 10.0)])
    # without: 2 s user + 0.5 s system; with: 2.5 s user + 1.5 s system, twice the minor faults
    kernel = pd.DataFrame([{"seed": "900", "configuration": "plain / glibc", "workload": "loop",
                            "processor": processor, "with_user_s": 2.5, "with_sys_s": 1.5, "with_minflt": 2000,
                            "without_user_s": 2.0, "without_sys_s": 0.5, "without_minflt": 1000}])
    t = per_call_prediction.table(runs_dir, costs, None, SPEC, "glibc", kernel)
    assert list(t.columns) == per_call_prediction.COLUMNS
    row = t[(t["configuration"] == "plain / glibc") & (t["workload"] == "loop")].iloc[0]
    assert row["cpu_ratio"] == pytest.approx(4.0 / 2.5) and row["minflt_ratio"] == 2.0
    assert row["user_added_percent"] == pytest.approx(20.0) and row["sys_added_percent"] == pytest.approx(40.0)
    assert row["per_call_added_percent"] == pytest.approx(10.0)  # 1e7 pairs of 10 ns over 1 s
    assert row["split_display"] == "CPU 1.600: user +20%, system +40% (minor faults x2.00); per-call +10%"
    assert (row["cpu_display"], row["sys_display"], row["minflt_display"]) == ("1.600", "+40%", "x2.00")
    other = t[(t["configuration"] == "plain / glibc") & (t["workload"] == "elsewhere")].iloc[0]
    assert other["split_display"] == "" and pd.isna(other["cpu_ratio"])


def test_a_pair_measured_per_call_in_turns_with_each_other_is_predicted_from_those_costs(runs):
    runs_dir, processor = runs
    costs = pd.DataFrame([per_call(processor, "defended", 35.0), per_call(processor, "plain", 10.0)])
    # the pair's own per-call difference, measured directly: 20 ns a pair (through glibc it would read 25)
    direct = pd.DataFrame([{**per_call(processor, "defended", 20.0), "baseline": "plain"}])
    t = per_call_prediction.table(runs_dir, costs, None, SPEC, "glibc", direct=direct)
    row = t[(t["configuration"] == "defended / plain") & (t["workload"] == "loop")].iloc[0]
    assert row["per_call_from"] == "in turns with each other"
    # 1e7 pairs of 20 ns over T + the configuration without's own 0.1 s
    assert row["predicted"] == pytest.approx(1 + 0.2 / 1.1)
    assert row["pred_high"] - row["predicted"] == pytest.approx(1e7 * 1.0 * 1e-9 / 1.1)
    assert row["added_with_ms"] == pytest.approx(300.0) and row["added_without_ms"] == pytest.approx(100.0)
    through_glibc = t[(t["configuration"] == "plain / glibc") & (t["workload"] == "loop")].iloc[0]
    assert through_glibc["per_call_from"] == "each against glibc"


def test_where_each_sides_start_up_is_measured_a_second_prediction_charges_it_per_process(tmp_path):
    pool._processors.cache_clear()
    pool._machines.cache_clear()
    add_profile_run(tmp_path, "20270105T000000Z-profile-workloads", published_machine(0), "loop", 1e7, 1.0,
                    processes=100)
    processor = pool._processors(tmp_path)["20270105T000000Z-profile-workloads"]

    def started(allocator, added_us):
        return {**per_call(processor, allocator, added_us * 1e3), "pattern": "processes", "size_class": 0}

    costs = pd.DataFrame([per_call(processor, "defended", 30.0), per_call(processor, "plain", 10.0),
                          started("defended", 2000.0), started("plain", 500.0)])
    t = per_call_prediction.table(tmp_path, costs, None, SPEC, "glibc").set_index("configuration")
    # 1e7 pairs (0.3 s against 0.1 s) and 100 processes (0.2 s against 0.05 s) over 1 s under the baseline
    row = t.loc["defended / plain"]
    assert row["predicted"] == pytest.approx(1.3 / 1.1)
    assert row["startup_predicted"] == pytest.approx(1.5 / 1.15)
    assert row["startup_low"] < row["startup_predicted"] < row["startup_high"]
    assert t.loc["plain / glibc", "startup_predicted"] == pytest.approx(1.15)
    # one side without a start-up cell: no second prediction, the first stands
    t = per_call_prediction.table(tmp_path, costs.iloc[:3], None, SPEC, "glibc").set_index("configuration")
    assert pd.isna(t.loc["defended / plain", "startup_predicted"]) and t.loc["defended / plain", "startup_display"] == ""
    assert t.loc["defended / plain", "predicted"] == pytest.approx(1.3 / 1.1)
    pool._processors.cache_clear()
    pool._machines.cache_clear()


def test_a_registered_cell_is_checked_only_by_its_kinds_runs_after_it():
    from analysis.publish.debates import per_call_prediction as pcp
    from analysis.stats import cost_model

    t = pd.DataFrame([{"seed": "002", "configuration": "poison / plain", "workload": "churn", "processor": "K (1/2/3)",
                       "profile_run": "20990101T000000Z-profile-workloads", "predicted": 1.05, "pred_low": 1.04,
                       "pred_high": 1.06},
                      {"seed": "003", "configuration": "a / b", "workload": "churn", "processor": "K (1/2/3)",
                       "profile_run": "p", "predicted": float("nan"), "pred_low": float("nan"),
                       "pred_high": float("nan")}])
    residuals = pd.DataFrame([{"program": f"p{i}", "allocator": "poison", "family": "poison", "processor": "K (1/2/3)",
                               "log_error": e} for i, e in enumerate([0.01, -0.02, 0.03, -0.04] * 6)],
                             columns=cost_model.RESIDUAL_COLUMNS)
    entries = pcp.registrations(t, residuals, "2099-01-02, commit abc", "20990102T000000Z-time-quick")
    assert len(entries) == 1  # a cell the model could not predict is not registered
    e = entries[0]
    assert e["low"] == 1.04 and e["model_low"] < e["low"] and e["model_high"] > e["high"]

    def run(run_id, ratio, processor="K (1/2/3)"):
        return {"seed": "002", "configuration": "poison / plain", "workload": "churn", "run_id": run_id,
                "processor": processor, "machine": "M-1", "build": "x", "estimate": math.log(ratio), "se": 0.004,
                "df": 30, "superseded": False}
    runs = pd.DataFrame([run("20990101T000000Z-time-quick", 1.30),            # before the registration
                         run("20990103T000000Z-time-quick", 1.052),
                         run("20990104T000000Z-time-quick", 1.30, "Other (9/9/9)")])  # another kind
    got = pcp.check(entries, runs).iloc[0]
    assert got["runs"] == 1 and abs(got["measured"] - 1.052) < 1e-9 and bool(got["inside"]) and bool(got["inside_model"])
    none_after = pcp.check(entries, runs.iloc[[0, 2]]).iloc[0]
    assert none_after["runs"] == 0 and pd.isna(none_after["measured"])
    numbers = pcp.check_numbers(pcp.check(entries, runs))
    assert numbers["registered"] == 1 and numbers["measured"] == 1 and numbers["inside"] == 1
    assert numbers["by_model"] == [{"model": "per-call", "registered": 1, "measured": 1, "inside_model": 1,
                                    "median_abs_error_percent": numbers["median_abs_error_percent"]}]
    assert numbers["waiting_by_model"] == []
    waiting = pcp.check_numbers(pcp.check(entries, runs.iloc[[0]]))
    assert waiting["by_model"] == [] and waiting["waiting_by_model"] == [{"model": "per-call", "cells": 1}]


def test_a_cell_is_also_predicted_as_cost_predicts_it_with_each_sides_terms(runs):
    """The cost check's terms join a pair only where every side that is not the baseline has its own: terms fitted
    against the baseline, on one side alone, would charge the change for what both sides share."""
    from analysis.stats.cost_terms import Premium

    runs_dir, processor = runs
    costs = pd.DataFrame([per_call(processor, "defended", 30.0), per_call(processor, "plain", 10.0)])
    both = {"defended": Premium(ns=5.0, se_ns=0.0, programs=3, cells=3),
            "plain": Premium(ns=2.0, se_ns=0.0, programs=3, cells=3)}
    t = per_call_prediction.table(runs_dir, costs, None, SPEC, "glibc", premiums=both)
    t = t[t["workload"] == "loop"].set_index("configuration")
    # 1e7 calls over 1 s under the baseline: 0.3 s and 0.05 s of terms against 0.1 s and 0.02 s
    assert t.loc["defended / plain", "model_predicted"] == pytest.approx(1.35 / 1.12)
    assert t.loc["plain / glibc", "model_predicted"] == pytest.approx(1.12)
    assert t.loc["defended / plain", "predicted"] == pytest.approx(1.3 / 1.1)  # the per-call prediction unchanged
    assert "defended's terms (+5 ns a call)" in t.loc["defended / plain", "model"]
    one = per_call_prediction.table(runs_dir, costs, None, SPEC, "glibc", premiums={"defended": both["defended"]})
    one = one[one["workload"] == "loop"].set_index("configuration")
    assert one.loc["defended / plain", "model_predicted"] == pytest.approx(1.3 / 1.1)
    assert one.loc["defended / plain", "model"] == "per-call costs; no terms: plain has none fitted"
    assert one.loc["plain / glibc", "model"] == "per-call costs"

    # registered from the model's centre, widened by the misses of the model with terms where it takes them
    def misses(spread):
        return pd.DataFrame([{"program": f"p{i}", "allocator": "defended", "family": "defended",
                              "processor": processor, "log_error": e * spread}
                             for i, e in enumerate([0.01, -0.02, 0.03, -0.04] * 6)],
                            columns=cost_model.RESIDUAL_COLUMNS)
    entries = {e["configuration"]: e for e in per_call_prediction.registrations(
        t.reset_index(), misses(1.0), "2099-01-02, commit abc", "20990102T000000Z-time-quick", misses(5.0))}
    termed = entries["defended / plain"]
    assert termed["centre"] == pytest.approx(1.35 / 1.12, abs=1e-6) and termed["model"] == t.loc["defended / plain", "model"]
    alone = {e["configuration"]: e for e in per_call_prediction.registrations(
        one.reset_index(), misses(1.0), "2099-01-02, commit abc", "20990102T000000Z-time-quick", misses(5.0))}
    assert termed["model_high"] / termed["centre"] > 1.15 > alone["defended / plain"]["model_high"] / alone[
        "defended / plain"]["centre"]


def test_registrations_with_and_without_their_model_are_written_and_read_back(tmp_path):
    from analysis.publish.debates import predictions

    old = {"seed": "002", "configuration": "poison / plain", "workload": "churn", "processor": "K (1/2/3)",
           "registered": "2099-01-01, commit abc", "after_run": "r1", "profile_run": "p1", "centre": 1.05, "low": 1.04,
           "high": 1.06, "model_low": 1.0, "model_high": 1.1, "model_error_from": "not checked"}
    new = {**old, "registered": "2099-01-02, commit def", "centre": 1.2, "model": "per-call costs; start-up per process"}
    path = tmp_path / "predictions.toml"
    predictions.write(path, [], per_calls=[old, new])
    back = predictions.load_per_calls(path)
    assert back == [old, new]
    got = per_call_prediction.check(back, pd.DataFrame(columns=pool.RUN_COLUMNS))
    assert list(got["model"]) == [per_call_prediction.PER_CALL_ALONE, "per-call costs; start-up per process"]


def test_a_registrations_model_is_labelled_in_a_few_words():
    label = per_call_prediction.model_label
    assert label(per_call_prediction.PER_CALL_ALONE) == "per-call"
    assert label("per-call costs in turns with each other; start-up per process") == "per-call in turns + start-up"
    assert label("per-call costs; start-up per process; h's terms (+22 ns a call)") == "per-call + start-up + terms"
