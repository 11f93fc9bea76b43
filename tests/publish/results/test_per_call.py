"""Per-call costs from lockstep runs of the calls workloads: the added nanoseconds per pair recover the truth
a simulation put in, per host, and a program's prediction reads them."""
import json
import math
import shutil

import pandas as pd
import pytest

from analysis.errors import HeapcostError
from analysis.harness.workloads.builtin import CALL_WORKLOADS
from analysis.publish.results import cost, cost_prediction, per_call
from analysis.stats import cost_model, simulate

BASE_S = 0.2  # the baseline's active time per process at scale 1
TRUTH = {("hardened", "calls-16-lifo"): 1.5, ("hardened", "calls-16-random"): 2.5,
         ("hardened", "calls-262144-pages"): 40.0, ("scudo", "calls-16-lifo"): 1.2,
         ("scudo", "calls-16-random"): 1.3, ("scudo", "calls-262144-pages"): 3.0}


def lockstep_run(runs, run_id, seed, machine):
    frames = []
    for i, ((alloc, workload), ratio) in enumerate(sorted(TRUTH.items())):
        frames.append(simulate.simulate_pairs(ratio, 30, seed + i, active_s=BASE_S, workload=workload,
                                              baseline="glibc", other=alloc))
    pairs = pd.concat(frames, ignore_index=True).assign(run_id=run_id)
    pairs["seq"] = range(len(pairs))
    folder = runs / run_id
    folder.mkdir(parents=True)
    pairs.to_csv(folder / "pairs.csv", index=False)
    (folder / "machine.json").write_text(json.dumps(machine))
    info = {"format": "heapcost-run/1", "run_id": run_id, "kind": "time", "status": "complete",
            "params": {"profile": "quick", "protocol": "lockstep"}}
    (folder / "run.json").write_text(json.dumps(info))
    return folder


MACHINE = {"cpu_model": "Simulated CPU", "cpu_mhz": 2000.0, "kernel": "6.0", "cpu_family": 1, "cpu_model_number": 1,
           "cpu_stepping": 1}


@pytest.fixture(scope="module")
def costs(tmp_path_factory):
    runs = tmp_path_factory.mktemp("data") / "runs"
    lockstep_run(runs, "20990101T000000Z-time-quick", 7, MACHINE)
    lockstep_run(runs, "20990102T000000Z-time-quick", 70, MACHINE)
    return per_call.table(runs, "glibc")


def test_the_added_time_per_pair_covers_the_truth(costs):
    assert set(zip(costs["allocator"], costs["workload"])) == set(TRUTH)
    assert (costs["n_runs"] == 2).all() and costs["processor"].nunique() == 1
    for r in costs.itertuples():
        spec = CALL_WORKLOADS[r.workload]
        base_ns = BASE_S / spec.pairs_at(1.0) * 1e9
        # the simulated machine runs at full speed or up to its slow regime's factor slower, as this VM does
        assert base_ns * 0.99 <= r.base_ns <= base_ns * simulate.RegimeNoise().factor
        truth = (TRUTH[(r.allocator, r.workload)] - 1) * r.base_ns
        assert r.added_ns_low <= truth <= r.added_ns_high, r.workload
        assert (r.pattern, r.size_class) == (spec.pattern, spec.size_class)


def test_the_rate_at_which_a_pairs_difference_makes_a_share_covers_the_truth(costs):
    rates = per_call.rate_for_share(costs, "hardened", "scudo", 0.025)
    assert sorted(rates["pattern"]) == ["lifo", "random"]  # the pages cell is no pair of one class: left out
    for r in rates.itertuples():
        cell = costs[(costs["pattern"] == r.pattern) & (costs["allocator"] == "hardened")].iloc[0]
        truth_ns = (TRUTH[("hardened", cell.workload)] - TRUTH[("scudo", cell.workload)]) * cell.base_ns
        assert r.added_ns_low <= truth_ns <= r.added_ns_high, r.pattern
        assert r.pairs_per_s == pytest.approx(0.025 / (r.added_ns * 1e-9))
        assert r.pairs_per_s_low <= 0.025 / (truth_ns * 1e-9) <= r.pairs_per_s_high
    # the difference's interval is the two intervals combined as independent: wider than either
    lifo = rates[rates["pattern"] == "lifo"].iloc[0]
    widths = costs[costs["pattern"] == "lifo"].set_index("allocator")
    widths = widths["added_ns_high"] - widths["added_ns_low"]
    assert lifo.added_ns_high - lifo.added_ns_low > max(widths["hardened"], widths["scudo"])


def test_a_difference_that_may_be_zero_leaves_the_rate_open():
    row = {"processor": "P", "baseline": "glibc", "workload": "calls-64-lifo", "pattern": "lifo", "size_class": 64}
    costs = pd.DataFrame([{**row, "allocator": "a", "added_ns": 10.0, "added_ns_low": 9.0, "added_ns_high": 11.0},
                          {**row, "allocator": "b", "added_ns": 8.0, "added_ns_low": 5.0, "added_ns_high": 11.0}])
    r = per_call.rate_for_share(costs, "a", "b", 0.02).iloc[0]
    assert r.added_ns == pytest.approx(2.0) and r.added_ns_low < 0 < r.added_ns_high
    assert r.pairs_per_s == pytest.approx(0.02 / 2e-9) and r.pairs_per_s_high == float("inf")
    assert per_call.rate_for_share(costs, "b", "a", 0.02).iloc[0].pairs_per_s == float("inf")
    assert per_call.rate_for_share(costs, "a", "c", 0.02).empty  # c measured nowhere
    assert list(per_call.rate_for_share(costs.iloc[0:0], "a", "b", 0.02).columns) == per_call.RATE_COLUMNS


def test_a_pair_measured_in_turns_with_each_other_gives_the_rate_from_its_own_difference():
    row = {"processor": "P", "pattern": "lifo", "size_class": 64, "workload": "calls-64-lifo"}
    costs = pd.DataFrame([{**row, "baseline": "glibc", "allocator": "a", "added_ns": 10.0, "added_ns_low": 5.0,
                           "added_ns_high": 15.0},
                          {**row, "baseline": "glibc", "allocator": "b", "added_ns": 8.0, "added_ns_low": 3.0,
                           "added_ns_high": 13.0},
                          {**row, "processor": "Q", "baseline": "glibc", "allocator": "a", "added_ns": 10.0,
                           "added_ns_low": 5.0, "added_ns_high": 15.0},
                          {**row, "processor": "Q", "baseline": "glibc", "allocator": "b", "added_ns": 8.0,
                           "added_ns_low": 3.0, "added_ns_high": 13.0}])
    # host P also ran a in turns with b: a adds 2.5 ns over b there, within [2, 3]
    direct = pd.DataFrame([{**row, "baseline": "b", "allocator": "a", "added_ns": 2.5, "added_ns_low": 2.0,
                            "added_ns_high": 3.0},
                           {**row, "pattern": "pages", "size_class": 262144, "baseline": "b", "allocator": "a",
                            "added_ns": 900.0, "added_ns_low": 800.0, "added_ns_high": 1000.0}])
    rates = per_call.rate_for_share(costs, "a", "b", 0.02, direct).set_index("processor")
    assert sorted(rates.index) == ["P", "Q"]  # one row a host and cell; the pages cell left out
    p, q = rates.loc["P"], rates.loc["Q"]
    assert p.per_call_from == per_call.DIRECT and q.per_call_from == "each against glibc"
    assert (p.added_ns, p.added_ns_low, p.added_ns_high) == (2.5, 2.0, 3.0)
    assert p.pairs_per_s == pytest.approx(0.02 / 2.5e-9) and p.pairs_per_s_high == pytest.approx(0.02 / 2e-9)
    assert q.added_ns == pytest.approx(2.0) and q.added_ns_low < 0 < q.added_ns_high
    # a direct table of another pair changes nothing
    other = direct.assign(allocator="c")
    assert list(per_call.rate_for_share(costs, "a", "b", 0.02, other)["per_call_from"]) == ["each against glibc"] * 2
    # direct costs alone, with no host measuring both against the baseline
    alone = per_call.rate_for_share(costs.iloc[0:0], "a", "b", 0.02, direct)
    assert list(alone["processor"]) == ["P"] and list(alone.columns) == per_call.RATE_COLUMNS


def test_a_program_is_predicted_from_its_profile(costs, tmp_path):
    profile = pd.DataFrame([{"quantity": "malloc_calls", "size_class": 16, "value": 1e6},
                            {"quantity": "reuse_share", "size_class": 16, "value": 0.5},
                            {"quantity": "wall_s", "size_class": None, "value": 0.5}])
    out = cost_prediction.predictions(profile, costs)
    assert list(out["allocator"]) == ["hardened", "scudo"] and (out["why"] == "").all()
    hardened, scudo = out.iloc[0], out.iloc[1]
    assert hardened["ratio"] > scudo["ratio"] > 1
    assert hardened["low"] < hardened["ratio"] < hardened["high"]
    with pytest.raises(HeapcostError, match="no per-call costs of nope"):
        cost_prediction.predictions(profile, costs, allocators=["nope"])
    # with each process's start-up asked for: an allocator whose host has no such cell says so on its line
    started = pd.concat([costs, costs[costs["allocator"] == "hardened"].head(1).assign(
        workload="calls-processes", pattern="processes", size_class=0, added_ns=2e6, added_ns_low=1.5e6,
        added_ns_high=2.5e6)], ignore_index=True)
    two = pd.concat([profile, pd.DataFrame([{"quantity": "processes", "size_class": None, "value": 10}])],
                    ignore_index=True)
    out = cost_prediction.predictions(two, started, startup=True).set_index("allocator")
    assert out.loc["hardened", "added_s"] == pytest.approx(hardened["added_s"] + 10 * 2e-3)
    assert pd.isna(out.loc["scudo", "ratio"]) and "calls-processes" in out.loc["scudo", "why"]
    assert cost_prediction.predictions(two, started).loc[0, "added_s"] == pytest.approx(hardened["added_s"])


def test_a_file_that_is_no_profile_is_a_one_line_error(tmp_path):
    from conftest import cli

    bad = tmp_path / "p.csv"
    bad.write_text("a,b\n1,2\n")
    done = cli("cost", str(bad))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "not an allocation profile" in done.stderr
    done = cli("cost", str(tmp_path / "missing.csv"))
    assert done.returncode == 2 and "not a readable profile" in done.stderr


def trials_run(tmp_path, name):
    """An empty complete run of the trials protocol on a simulated host: (its runs folder, its own folder)."""
    runs = tmp_path / "runs"
    folder = runs / name
    folder.mkdir(parents=True)
    (folder / "machine.json").write_text(json.dumps({"cpu_model": "Simulated CPU", "cpu_mhz": 2000.0, "kernel": "6.0",
                                                     "cpu_family": 1, "cpu_model_number": 1, "cpu_stepping": 1}))
    (folder / "run.json").write_text(json.dumps({"format": "heapcost-run/1", "run_id": folder.name, "kind": "time",
                                                 "status": "complete", "params": {"protocol": "trials"}}))
    return runs, folder


def test_a_process_start_up_splits_into_user_and_system_time_from_trials(tmp_path):
    """Trials of calls-processes (each trial's times over the processes it started): the medians per process and
    what each adds over the baseline's on the same host; warm-ups, failed trials and other workloads left out."""
    from analysis.contract.schema import TRIAL_COLUMNS

    runs, folder = trials_run(tmp_path, "20990103T000000Z-time-quick")
    steps = CALL_WORKLOADS["calls-processes"].pairs_at(0.25)
    rows = []
    for i, (user_us, sys_us, faults) in enumerate([(300, 50, 120), (310, 60, 121), (290, 40, 119)]):
        rows.append({"allocator": "glibc", "user_s": user_us * steps * 1e-6, "sys_s": sys_us * steps * 1e-6,
                     "minflt": faults * steps})
        rows.append({"allocator": "hm", "user_s": (user_us + 700) * steps * 1e-6,
                     "sys_s": (sys_us + 900) * steps * 1e-6, "minflt": (faults + 200) * steps})
    rows.append({"allocator": "hm", "user_s": 99.0, "sys_s": 99.0, "minflt": 1e9, "warmup": 1})
    rows.append({"allocator": "hm", "user_s": 99.0, "sys_s": 99.0, "minflt": 1e9, "status": "failed"})
    rows.append({"allocator": "hm", "user_s": 99.0, "sys_s": 99.0, "minflt": 1e9, "workload": "small-loop"})
    table = pd.DataFrame([{**{c: "" for c in TRIAL_COLUMNS}, "run_id": folder.name, "workload": "calls-processes",
                           "scale": 0.25, "status": "ok", "warmup": 0, **r} for r in rows])
    table.to_csv(folder / "trials.csv", index=False)
    split = per_call.startup_split(runs, "glibc")
    assert len(split) == 1
    r = split.iloc[0]
    assert (r.allocator, r.trials, r.base_trials) == ("hm", 3, 3)
    assert r.added_user_us == pytest.approx(700) and r.added_sys_us == pytest.approx(900)
    assert r.added_minflt == pytest.approx(200) and r.user_us == pytest.approx(1000)
    assert r.display == "user +700 µs, system +900 µs, minor faults +200"
    assert per_call.startup_split(runs, "nope").empty  # no baseline measured: nothing to subtract


def test_the_held_blocks_split_sets_the_32k_cell_beside_few_blocks_live_from_trials(tmp_path):
    """Trials of the 32 KiB LIFO cell and of the same pairs with few blocks live: per allocator and number of live
    blocks, what a pair adds over the baseline's same workload in CPU time and minor faults."""
    from analysis.contract.schema import TRIAL_COLUMNS
    from analysis.harness.workloads.builtin import HELD_SLOTS, HELD_WORKLOADS

    runs, folder = trials_run(tmp_path, "20990104T000000Z-time-quick")
    few = f"calls-32768-lifo-{HELD_SLOTS}live"  # the 32 KiB pairs with few blocks live
    assert HELD_WORKLOADS[few].slots == HELD_SLOTS < per_call.SLOTS
    rows = []
    # the cell: hm adds 3.5 us and 0.9 faults a pair over glibc; with few live, 0.2 us and no fault
    for workload, added_us, added_flt in (("calls-32768-lifo", 3.5, 0.9), (few, 0.2, 0.0)):
        steps = (CALL_WORKLOADS.get(workload) or HELD_WORKLOADS[workload]).pairs_at(0.25)
        for base_us in (0.10, 0.11, 0.09):
            rows.append({"workload": workload, "allocator": "glibc", "user_s": base_us * steps * 1e-6, "sys_s": 0.0,
                         "minflt": 0.01 * steps})
            rows.append({"workload": workload, "allocator": "hm", "user_s": (base_us + added_us) * steps * 1e-6,
                         "sys_s": 0.0, "minflt": (0.01 + added_flt) * steps})
    rows.append({"workload": few, "allocator": "hm", "user_s": 99.0, "sys_s": 99.0, "minflt": 1e9, "warmup": 1})
    table = pd.DataFrame([{**{c: "" for c in TRIAL_COLUMNS}, "run_id": folder.name, "scale": 0.25, "status": "ok",
                           "warmup": 0, **r} for r in rows])
    table.to_csv(folder / "trials.csv", index=False)
    split = per_call.held_split(runs, "glibc")
    assert split["slots"].tolist() == [HELD_SLOTS, per_call.SLOTS] and set(split["allocator"]) == {"hm"}
    assert split["size_class"].tolist() == [32768, 32768]
    few_row, many_row = split.iloc[0], split.iloc[1]
    assert many_row.added_cpu_us == pytest.approx(3.5) and many_row.added_minflt == pytest.approx(0.9)
    assert few_row.added_cpu_us == pytest.approx(0.2) and few_row.added_minflt == pytest.approx(0.0, abs=1e-9)
    assert few_row.trials == 3  # the warm-up left out
    assert per_call.held_split(runs, "nope").empty


# ---- the cost command as a user meets it ----

def _two_kinds(costs):
    costs = costs.assign(processor="Simulated CPU 2000 MHz (1/1/1)")
    other = costs.assign(processor="Intel Xeon 2600 MHz (6/167/1)")
    return pd.concat([costs, other, costs[costs["allocator"] == "scudo"].assign(allocator="glibc-copy"),
                      costs[costs["allocator"] == "scudo"].assign(allocator="scudo_l2"),
                      costs[costs["allocator"] == "scudo"].assign(allocator="heapcost-placement")], ignore_index=True)


def _profile(calls=1e6, wall=0.5, extra=()):
    return pd.DataFrame([{"quantity": "malloc_calls", "size_class": 16, "value": calls},
                         {"quantity": "reuse_share", "size_class": 16, "value": 0.5},
                         {"quantity": "wall_s", "size_class": None, "value": wall}, *extra])


def test_a_processor_is_named_by_any_unambiguous_part_of_its_label(costs):
    kinds = set(_two_kinds(costs)["processor"])
    assert cost_prediction.match_processor("6/167/1", kinds) == "Intel Xeon 2600 MHz (6/167/1)"
    assert cost_prediction.match_processor("intel", kinds) == "Intel Xeon 2600 MHz (6/167/1)"
    assert cost_prediction.match_processor("Simulated CPU 2000 MHz (1/1/1)", kinds) == "Simulated CPU 2000 MHz (1/1/1)"
    with pytest.raises(HeapcostError, match="no per-call costs on a processor matching 'AMD'") as e:
        cost_prediction.match_processor("AMD", kinds)
    assert "kinds: Intel Xeon" in str(e.value)
    with pytest.raises(HeapcostError, match=r"'MHz' matches 2 processor kinds: Intel.*; Simulated"):
        cost_prediction.match_processor("MHz", kinds)
    out = cost_prediction.predictions(_profile(), _two_kinds(costs), processor="1/1/1")
    assert set(out["processor"]) == {"Simulated CPU 2000 MHz (1/1/1)"}


def test_no_configuration_is_reported_that_the_user_did_not_ask_for(costs):
    both = _two_kinds(costs)
    out = cost_prediction.predictions(_profile(), both, aa_copies=frozenset({"glibc-copy"}))
    assert set(out["allocator"]) == {"hardened", "scudo"}
    asked = cost_prediction.predictions(_profile(), both, allocators=["glibc-copy", "scudo_l2", "heapcost-placement"],
                                        processor="intel", aa_copies=frozenset({"glibc-copy"}))
    assert sorted(asked["allocator"]) == ["glibc-copy", "heapcost-placement", "scudo_l2"]
    only_here = both[both["allocator"] == "hardened"].head(1).assign(allocator="here-only")
    out = cost_prediction.predictions(_profile(), pd.concat([both, only_here]), allocators=["here-only"], processor="intel")
    assert list(out["why"]) == ["no per-call costs on this processor kind"]


def test_the_interval_carries_the_checked_programs_misses(costs):
    misses = pd.DataFrame({"program": [f"p{i}" for i in range(20)], "allocator": "scudo", "family": "scudo",
                           "processor": "P", "log_error": [0.1] * 20})
    plain = cost_prediction.predictions(_profile(), costs, allocators=["scudo"]).iloc[0]
    wide = cost_prediction.predictions(_profile(), costs, allocators=["scudo"], residuals=misses).iloc[0]
    assert wide["ratio"] == plain["ratio"]
    assert wide["low"] < plain["low"] and wide["high"] > plain["high"]
    assert math.log(wide["high"] / wide["ratio"]) > 0.1
    assert wide["model_error_percent"] == pytest.approx(100 * math.expm1(0.1))
    assert "20 misses of 20 checked programs (configuration)" == wide["model_error_from"]
    assert plain["model_error_from"] == "not checked"


def test_a_configurations_premium_is_added_to_its_prediction_only(costs):
    from analysis.stats.cost_terms import PREMIUM, Premium

    premiums = {"scudo": Premium(40.0, 4.0, 20, 30)}
    plain = cost_prediction.predictions(_profile(), costs).set_index("allocator")
    taken = cost_prediction.predictions(_profile(), costs, premiums=premiums).set_index("allocator")
    calls, base = 1e6, cost_model.base_time(_profile())
    assert taken.loc["scudo", "ratio"] == pytest.approx(plain.loc["scudo", "ratio"] + 40e-9 * calls / base)
    assert taken.loc["scudo", "high"] - taken.loc["scudo", "ratio"] > plain.loc["scudo", "high"] - plain.loc["scudo", "ratio"]
    others = [a for a in plain.index if a != "scudo"]
    assert others and (taken.loc[others, "ratio"] == plain.loc[others, "ratio"]).all()
    explained = cost_prediction.explain(_profile(), costs, str(plain.loc["scudo", "processor"]), "scudo", premiums=premiums)
    assert PREMIUM in set(explained["pattern"])


def test_the_interval_for_a_new_machine_carries_the_spread_between_machines(costs):
    scudo = costs[costs["allocator"] == "scudo"]
    plain = cost_prediction.predictions(_profile(), scudo).iloc[0]
    spread = (0.02, cost_model.t_quantile(14))
    one = cost_prediction.predictions(_profile(), scudo.assign(n_machines=1), machine_spread=spread).iloc[0]
    three = cost_prediction.predictions(_profile(), scudo.assign(n_machines=3), machine_spread=spread).iloc[0]
    assert one["ratio"] == plain["ratio"] and one["low"] < three["low"] < plain["low"]
    assert one["machine_spread_percent"] == pytest.approx(100 * math.expm1(cost_model.machine_half_width(*spread)))
    assert pd.isna(plain["machine_spread_percent"])


def test_a_profile_outside_what_the_model_was_checked_on_says_so(costs):
    checked = pd.DataFrame([{**cost_prediction.features(_profile(calls=c), costs), "program": f"p{c}", "processor": "P"}
                            for c in (1e5, 1e6)])
    assert cost_prediction.outside_checked(_profile(calls=5e5), costs, checked) == []
    dense = cost_prediction.outside_checked(_profile(calls=1e8), costs, checked)
    assert len(dense) == 1 and dense[0].startswith("allocation calls per ms of CPU time 2e+05 (checked: 200 to 2e+03)")
    threaded = _profile(extra=[{"quantity": "threads", "size_class": None, "value": 8}])
    assert [x.split(" 8 ")[0] for x in cost_prediction.outside_checked(threaded, costs, checked)] == ["threads that allocate"]
    # a buffer grown within its pages at a class larger than any checked program's: the per-byte cost extrapolated
    grows = [{"quantity": q, "size_class": 2**26, "value": v} for q, v in (("realloc_grown", 500), ("realloc_grown_in_place", 20))]
    assert cost_prediction.features(_profile(extra=grows), costs)["grown_within_kib"] == 2**16
    far = cost_prediction.outside_checked(_profile(calls=5e5, extra=grows), costs, checked)
    assert [x.split(", KiB")[0] for x in far] == ["largest block grown within its pages"]


def _cost_dataset(tmp_path, costs_runs):
    data = tmp_path / "data"
    shutil.copytree(costs_runs, data / "runs")
    profile = tmp_path / "p.csv"
    _profile().assign(size_class=lambda d: d["size_class"].astype("Int64")).to_csv(profile, index=False)
    return data, profile


@pytest.fixture(scope="module")
def costs_runs(tmp_path_factory):
    runs = tmp_path_factory.mktemp("cost") / "runs"
    lockstep_run(runs, "20990101T000000Z-time-quick", 7, MACHINE)
    return runs


@pytest.mark.slow  # reads the published dataset or runs a command end to end: in make test, not test-fast
def test_the_command_prints_every_kind_off_its_own_machine_and_writes_a_table(tmp_path, costs_runs, monkeypatch):
    from conftest import cli

    data, profile = _cost_dataset(tmp_path, costs_runs)
    out_csv = tmp_path / "out.csv"
    done = cli("cost", str(profile), "--data", str(data), "--explain", "--csv", str(out_csv),
               env_extra={"HEAPCOST_MEMO": "0"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "this machine's kind has no per-call costs in the dataset: every measured kind is shown"
    label = per_call.table(data / "runs", "glibc")["processor"].iloc[0]
    assert any(line.startswith(f"{label}  hardened: ") for line in lines)
    assert any("class      16:" in line for line in lines)
    # a dataset without debate runs on two machines gives the prior's spread, and says so
    assert any(line.startswith("on a new machine of the kind") and "the prior alone" in line for line in lines)
    assert all("new machine +-" in line for line in lines if line.startswith(f"{label}  "))
    table = pd.read_csv(out_csv)
    assert list(table.columns) == cost_prediction.COLUMNS and set(table["allocator"]) == {"hardened", "scudo"}
    done = cli("cost", str(profile), "--data", str(data), "--processor", "no-such-kind")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no-such-kind" in done.stderr


def _cost_with_terms(monkeypatch, premiums: dict):
    """`cost` with the model's inputs as the dataset gives them but for the terms, `premiums`: a function running
    it on a profile and a dataset for scudo alone."""
    import argparse

    real = cost.model_inputs

    def with_terms(*args, **kw):
        inputs = real(*args, **kw)
        inputs.premiums = premiums
        return inputs

    monkeypatch.setattr(cost, "model_inputs", with_terms)
    monkeypatch.setenv("HEAPCOST_MEMO", "0")
    parser = argparse.ArgumentParser()
    cost.add_arguments(parser)
    return lambda profile, data: cost.run(parser.parse_args([str(profile), "--data", str(data), "--allocators", "scudo"]))


def test_the_command_names_only_the_asked_configurations_premium(tmp_path, costs_runs, monkeypatch, capsys):
    from analysis.stats.cost_terms import Premium

    data, profile = _cost_dataset(tmp_path, costs_runs)
    run = _cost_with_terms(monkeypatch, {"scudo": Premium(30.0, 3.0, 20, 30), "hardened": Premium(70.0, 7.0, 20, 30)})
    assert run(profile, data) == 0
    said = capsys.readouterr().out
    premium_line = [line for line in said.splitlines() if line.startswith("what a program pays beyond")]
    assert premium_line == [premium_line[0]] and "scudo +30 ns a call" in premium_line[0]
    assert "hardened" not in said


@pytest.mark.slow  # reads the published dataset or runs a command end to end: in make test, not test-fast
def test_the_command_says_when_placement_parts_meet_a_profile_without_runs_or_with_large_shares(
        tmp_path, costs_runs, monkeypatch, capsys):
    from analysis.stats.cost_terms import PLACEMENT, Premium

    data, profile = _cost_dataset(tmp_path, costs_runs)
    run = _cost_with_terms(monkeypatch, {"scudo": Premium(0.0, 0.0, 20, 30, terms=PLACEMENT, order=1.0, se_order=0.1,
                                                          shuffle=1.0, se_shuffle=0.1)})
    assert run(profile, data) == 0
    assert "no runs under heapcost's placement allocator" in capsys.readouterr().out
    placed = tmp_path / "placed.csv"
    placed.write_text(profile.read_text() + "placement_ordered_cpu_s,,0.001\nplacement_shuffled_cpu_s,,0.5\n")
    assert run(placed, data) == 0
    said = capsys.readouterr().out
    assert "where this program's blocks lie moves its time" in said and "no runs under" not in said


def test_the_kept_inputs_follow_the_runs(tmp_path, costs_runs, monkeypatch, capsys):
    data, _ = _cost_dataset(tmp_path, costs_runs)
    registry = tmp_path / "registry"
    key = cost.inputs_key(data / "runs", "glibc", registry)
    assert cost.inputs_key(data / "runs", "glibc", registry) == key
    assert cost.inputs_key(data / "runs", "jemalloc", registry) != key
    run = next((data / "runs").iterdir())
    (run / "intake.json").write_text('{"files": {}}')
    assert cost.inputs_key(data / "runs", "glibc", registry) != key
    from analysis.publish.results import memo

    monkeypatch.setattr(memo, "MEMO_DIR", tmp_path / "kept")
    monkeypatch.setenv("HEAPCOST_MEMO", "1")
    first = cost.model_inputs(data / "runs", "glibc", registry)
    assert capsys.readouterr().out.startswith("computing the model's inputs from the dataset: once")
    assert len(list((tmp_path / "kept" / "cost_inputs").glob("*.pickle"))) == 1
    again = cost.model_inputs(data / "runs", "glibc", registry)
    assert "computing the model's inputs" not in capsys.readouterr().out  # read back, said nothing
    pd.testing.assert_frame_equal(first.costs, again.costs)


def test_the_grow_cells_are_listed_per_kind_and_step_with_what_each_configuration_adds():
    """per_call_products._grow_cells: per kind, the 64 KiB cell before the page cell, the baseline's microseconds a
    step, and the configurations whose added time's interval lies above zero, the dearest first; a tenth of a
    microsecond shown below ten."""
    from analysis.publish.results.per_call_products import _grow_cells

    rows = [("grow", "s", 800_000.0, 700_000.0), ("grow", "j", 17_000.0, 15_000.0), ("grow", "g", -60.0, -300.0),
            ("grow-page", "s", 812_000.0, 630_000.0), ("grow-page", "k", 54.0, 25.0), ("lifo", "s", 9.0, 8.0),
            ("grow-small", "s", 130_000.0, 120_000.0), ("grow-small", "S", 520_000.0, 500_000.0)]
    costs = pd.DataFrame([{"processor": "K", "pattern": p, "size_class": 2**20 if a == "s" and p == "grow-small"
                           else 4 * 2**20, "allocator": a.lower(), "added_ns": ns, "added_ns_low": low,
                           "added_ns_high": ns * 1.2, "base_ns": 3000.0 if p == "grow" else 850.0}
                          for p, a, ns, low in rows])
    got = _grow_cells(costs)
    assert [(g["pattern"], g["step"], g["mib"], g["base_us"]) for g in got] == [
        ("grow", "64 KiB", 4, "3.0"), ("grow-page", "4 KiB", 4, "0.8"), ("grow-small", "256 bytes", 1, "0.8"),
        ("grow-small", "256 bytes", 4, "0.8")]
    assert [(c["allocator"], c["added_us"]) for c in got[3]["cells"]] == [("s", "520")]
    assert [(c["allocator"], c["added_us"]) for c in got[0]["cells"]] == [("s", "800"), ("j", "17")]
    assert [(c["allocator"], c["added_us"]) for c in got[1]["cells"]] == [("s", "812"), ("k", "0.054")]
    assert [g["block"] for g in got] == ["4 MiB", "4 MiB", "1 MiB", "4 MiB"]
