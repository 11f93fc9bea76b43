"""The cost model's out-of-sample check: registered predictions read back, the runs that measure the registered
bytes on the registered processor found, and the measured ratios recovering the truth a simulation put in."""
import json
import math

import pandas as pd
import pytest

from analysis.contract.host import processor_groups
from analysis.errors import HeapcostError
from analysis.publish.results import cost_check, cost_measure, cost_models, cost_profiles
from analysis.stats import simulate

MACHINE = {"cpu": {"model": "Simulated CPU", "family": 1, "model_number": 2, "stepping": 3, "logical_cpus": 2},
           "kernel": "6.0"}
OTHER_MACHINE = {"cpu": {"model": "Other CPU", "family": 9, "model_number": 9, "stepping": 9, "logical_cpus": 2},
                 "kernel": "6.0"}
PROCESSOR = processor_groups({"r": MACHINE})["r"]
TRUTH = {("prog-a", "hardened"): 1.30, ("prog-a", "scudo"): 1.05, ("prog-b", "hardened"): 2.00,
         ("prog-b", "scudo"): 1.10}
PREDICTED = {("prog-a", "hardened"): (1.28, 1.25, 1.31), ("prog-a", "scudo"): (1.20, 1.18, 1.22),
             ("prog-b", "hardened"): (1.60, 1.50, 1.70)}
SHA = {"prog-a": ("a" * 64, "1" * 64), "prog-b": ("b" * 64, "2" * 64)}


def registration(folder):
    head = {"registered": "2099-01-01, commit abc1234", "processor": PROCESSOR, "baseline": "glibc",
            "model": "analysis/stats/cost_model.py", "per_call_runs": ["x"], "allocators": ["hardened", "scudo"]}
    programs = [{"name": n, "command": f"{n} {{input}}", "input": "words", "input_sha256": s[1],
                 "program_sha256": s[0], "package": "p", "what": "w", "base_cpu_s": 0.2, "calls": 10}
                for n, s in SHA.items()]
    predictions = [{"program": p, "allocator": a, "ratio": r, "low": lo, "high": hi, "why": ""}
                   for (p, a), (r, lo, hi) in PREDICTED.items()]
    predictions.append({"program": "prog-b", "allocator": "scudo", "why": "no per-call cost of the lifo pattern"})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / cost_check.REGISTERED).write_text(cost_check.render(head, programs, predictions))
    return folder


def alternation_run(runs, run_id, seed, machine=MACHINE, sha=SHA, truth=TRUTH):
    frames = [simulate.simulate_pairs(ratio, 12, seed + i, active_s=0.2, workload=prog, baseline="glibc", other=alloc)
              for i, ((prog, alloc), ratio) in enumerate(sorted(truth.items()))]
    pairs = pd.concat(frames, ignore_index=True).assign(run_id=run_id)
    pairs["seq"] = range(len(pairs))
    folder = runs / run_id
    folder.mkdir(parents=True)
    pairs.to_csv(folder / "pairs.csv", index=False)
    (folder / "machine.json").write_text(json.dumps(machine))
    workloads = {n: {"kind": "command", "files": [{"path": f"/usr/bin/{n}", "sha256": s[0]},
                                                  {"path": "{elsewhere}/words.txt", "sha256": s[1]}]}
                 for n, s in sha.items()}
    info = {"format": "heapcost-run/1", "run_id": run_id, "kind": "time", "status": "complete",
            "params": {"profile": "quick", "protocol": "lockstep"}, "workloads": workloads}
    (folder / "run.json").write_text(json.dumps(info))
    return folder


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    root = tmp_path_factory.mktemp("check")
    runs = root / "data" / "runs"
    alternation_run(runs, "20990101T000000Z-time-quick", 11)
    alternation_run(runs, "20990102T000000Z-time-quick", 31)
    # neither of these checks the registration: another processor; other input bytes
    alternation_run(runs, "20990103T000000Z-time-quick", 51, machine=OTHER_MACHINE)
    alternation_run(runs, "20990104T000000Z-time-quick", 71, sha={n: (s[0], "f" * 64) for n, s in SHA.items()})
    return cost_check.check(runs, registration(root / "reg"))


def test_a_cell_with_too_few_windows_ended_says_so_instead_of_failing(tmp_path):
    runs = tmp_path / "data" / "runs"
    folder = alternation_run(runs, "20990101T000000Z-time-quick", 11)
    pairs = pd.read_csv(folder / "pairs.csv")
    few = (pairs["workload"] == "prog-a") & ((pairs["allocator_a"] == "hardened") | (pairs["allocator_b"] == "hardened"))
    pairs.loc[few & (pairs.groupby(few).cumcount() >= 3), "status"] = "failed"  # a window in which no run ended
    pairs.to_csv(folder / "pairs.csv", index=False)
    table = cost_check.check(runs, registration(tmp_path / "reg")).set_index(["program", "allocator"])
    assert pd.isna(table.loc[("prog-a", "hardened"), "measured"])
    assert "too few windows" in table.loc[("prog-a", "hardened"), "why"]
    assert table.loc[("prog-a", "scudo"), "measured"] > 0
    # the same windows, with the record that the slower side ended no run in them: the window was too short
    pairs["turns_a"], pairs["turns_b"] = 3, 3
    pairs.loc[few & (pairs["status"] == "failed"), ["turns_a", "turns_b"]] = [0, 3]
    pairs.to_csv(folder / "pairs.csv", index=False)
    from analysis.contract import dataset

    dataset.load(runs)  # the loader sees the file change by its size and time
    table = cost_check.check(runs, registration(tmp_path / "reg2")).set_index(["program", "allocator"])
    assert pd.isna(table.loc[("prog-a", "hardened"), "measured"])
    assert "windows a side ended no run" in table.loc[("prog-a", "hardened"), "why"]
    # the summary names it apart, with its registered prediction and the model's as it is now where it has one
    slow = cost_check.summary(table.reset_index())["too_slow_for_windows"]
    assert slow == [{"program": "prog-a", "allocator": "hardened", "predicted": "1.28", "current": ""}]
    now = table.reset_index().assign(current_predicted=2.345)
    assert cost_check.summary(now)["too_slow_for_windows"][0]["current"] == "2.35"


def test_the_registration_reads_back_as_it_was_written(tmp_path):
    reg = cost_check.load(registration(tmp_path))
    assert reg["registration"]["processor"] == PROCESSOR
    assert [p["name"] for p in reg["program"]] == ["prog-a", "prog-b"]
    assert {(p["program"], p["allocator"]): (p["ratio"], p["low"], p["high"])
            for p in reg["prediction"] if "ratio" in p} == PREDICTED


def test_the_measured_ratios_recover_the_truth_from_the_matching_runs_alone(checked):
    measured = checked[checked["measured"].notna()]
    assert len(measured) == len(TRUTH)
    for r in measured.itertuples():
        assert r.runs == 2, (r.program, r.allocator)  # the other processor's run and the other input's are left out
        assert r.measured_low <= TRUTH[(r.program, r.allocator)] <= r.measured_high, (r.program, r.allocator)


def test_inside_overlap_and_error_follow_from_the_intervals(checked):
    row = {(r.program, r.allocator): r for r in checked.itertuples()}
    # prog-a under scudo: predicted 1.20 [1.18, 1.22], truth 1.05: outside, about 13% off
    a = row[("prog-a", "scudo")]
    assert a.inside is False and a.overlaps is False
    assert a.log_error == pytest.approx(math.log(a.measured / 1.20))
    # prog-a under hardened: predicted 1.28 [1.25, 1.31], truth 1.30
    assert row[("prog-a", "hardened")].overlaps is True
    # the cell the model could not predict keeps its reason and no error
    b = row[("prog-b", "scudo")]
    assert pd.isna(b.predicted) and pd.isna(b.log_error) and b.inside is None and "lifo" in b.why
    assert b.measured_low <= TRUTH[("prog-b", "scudo")] <= b.measured_high  # measured all the same


def test_the_summary_counts_the_checked_cells(checked):
    s = cost_check.summary(checked)
    done = checked[checked["log_error"].notna()]
    assert s["cells"] == 3 and s["programs"] == 2 and s["configurations"] == 2
    assert s["inside"] == int(done["inside"].sum())
    errors = sorted(abs(e) for e in done["log_error"])
    assert s["median_abs_error_percent"] == f"{100 * math.expm1(errors[1]):.1f}"
    assert [a["allocator"] for a in s["by_allocator"]] == ["hardened", "scudo"]
    assert sum(a["cells"] for a in s["by_allocator"]) == 3
    worst = done.loc[done["log_error"].abs().idxmax()]
    assert (s["misses"][0]["program"], s["misses"][0]["allocator"]) == (worst["program"], worst["allocator"])
    assert s["misses"][0]["error_percent"] == f"{100 * math.expm1(worst['log_error']):+.1f}"
    # every program here allocates 10 times in 0.2 s: sparse, none resting on large blocks (no profile registered)
    assert checked["calls_per_ms"].tolist() == [pytest.approx(0.05)] * len(checked)
    assert checked["large_share"].isna().all()
    assert s["groups"]["sparse"]["cells"] == 3 and s["groups"]["large_blocks"]["cells"] == 0
    assert s["groups"]["sparse"]["median_abs_error_percent"] == s["median_abs_error_percent"]
    # a run of prog-a or prog-b (0.2 s under the baseline) under hardened: (measured - 1) x 0.2 s, the median
    hardened = done[done["allocator"] == "hardened"]
    ms = 1000 * ((hardened["measured"] - 1) * 0.2).median()
    assert {"allocator": "hardened", "ms": f"{ms:.2f}"} in s["groups"]["sparse"]["added_ms"]
    # prog-a and prog-b under hardened: predicted 1.28 and 1.60, truth 1.30 and 2.00: dearer by more than 5%
    assert s["dearer_than_predicted"] == ["hardened"] and s["cheaper_than_predicted"] == ["scudo"]
    assert cost_check.summary(checked.iloc[0:0]) == {"cells": 0}


def test_the_large_block_share_is_what_the_model_charges_to_the_pages_cell(tmp_path):
    costs = pd.DataFrame([{"processor": PROCESSOR, "allocator": "hardened", "pattern": p, "size_class": c,
                           "added_ns": a, "added_ns_low": a - 1, "added_ns_high": a + 1}
                          for p, c, a in (("lifo", 16, 10.0), ("random", 16, 10.0), ("pages", 262144, 1000.0))])
    (tmp_path / "profiles").mkdir()
    # 1000 small calls (10 us added) and one 1 MiB block (4 x 1000 ns = 4 us added): 4/14 of it large
    (tmp_path / "profiles" / "prog-a.csv").write_text(
        "quantity,size_class,value\nmalloc_calls,16,1000\nmalloc_calls,1048576,1\nuser_s,,0.1\nsys_s,,0.0\n")
    shares = cost_check.large_shares(tmp_path, costs, PROCESSOR)
    assert shares == {("prog-a", "hardened"): pytest.approx(4 / 14)}
    assert cost_check.large_shares(tmp_path, costs, "another processor") == {}
    # the model as it is now, on the registered profile: 1 + 14 us over 0.1 s
    now = cost_check.current_predictions(tmp_path, costs, PROCESSOR)
    assert now[("prog-a", "hardened")][0] == pytest.approx(1 + 14e-6 / 0.1)
    # a resident set of 512 KiB: at most half of the 1 MiB block's pages touched, so 2 us of its 4
    (tmp_path / "profiles" / "prog-a.csv").write_text(
        "quantity,size_class,value\nmalloc_calls,16,1000\nmalloc_calls,1048576,1\nuser_s,,0.1\nsys_s,,0.0\n"
        "maxrss_kb,,512\n")
    assert cost_check.current_predictions(tmp_path, costs, PROCESSOR)[("prog-a", "hardened")][0] == \
        pytest.approx(1 + 12e-6 / 0.1)


def test_a_missing_or_foreign_registration_is_a_one_line_error(tmp_path):
    with pytest.raises(HeapcostError, match="register predictions first"):
        cost_check.load(tmp_path)
    (tmp_path / cost_check.REGISTERED).write_text("[registration]\nprocessor = 'x'\n")
    with pytest.raises(HeapcostError, match=r"no \[program\] entries"):
        cost_check.load(tmp_path)


def test_each_processor_keeps_its_own_registration_the_earliest_first(tmp_path, monkeypatch):
    from analysis.contract.host import processor_slug

    assert processor_slug("AMD EPYC 2450 MHz (25/1/1)") == "amd-epyc-2450-mhz-25-1-1"
    assert processor_slug("Intel(R) Xeon(R) Processor 2600 MHz (6/167/1)") == "intel-r-xeon-r-processor-2600-mhz-6-167-1"
    first = registration(cost_check.folder_of(PROCESSOR, tmp_path))
    later = cost_check.folder_of("Other CPU (9/9/9)", tmp_path)
    later.mkdir()
    (later / cost_check.REGISTERED).write_text(
        (first / cost_check.REGISTERED).read_text().replace("2099-01-01", "2099-02-01").replace(PROCESSOR, "Other CPU (9/9/9)"))
    (tmp_path / "not-a-registration").mkdir()
    assert first != later and first.parent == later.parent == tmp_path
    assert cost_check.registrations(tmp_path) == [first, later]
    assert [cost_check.load(f)["registration"]["processor"] for f in cost_check.registrations(tmp_path)] == [
        PROCESSOR, "Other CPU (9/9/9)"]
    assert cost_check.registrations(tmp_path / "nowhere") == []
    # measuring on a processor with no registration of its own is a one-line error, whatever the others hold
    monkeypatch.setattr(cost_check, "REGISTRY", tmp_path)
    monkeypatch.setattr(cost_check, "this_processor", lambda: "Third CPU (1/1/1)")
    with pytest.raises(HeapcostError, match=r"no predicted costs are registered on this host's processor \(Third CPU"):
        cost_measure.measure()


@pytest.mark.parametrize("args, message", [
    (["cost-check", "check", "--data", "/nonexistent"], "/nonexistent/runs does not exist"),
    (["cost-check", "register", "--data", "/nonexistent"], "/nonexistent/runs does not exist"),
    (["cost-check", "measure", "--blocks", "1"], "--blocks must be at least 6"),
    (["cost-check", "measure", "--turn-ms", "0"], "--turn-ms must lie between 0.1 and 10000"),
    (["cost-check", "measure", "--turn-ms", "nan"], "--turn-ms must lie between 0.1 and 10000"),
    (["cost-check"], "required"),
])
def test_bad_input_is_one_line_and_a_non_zero_exit(args, message):
    from conftest import cli

    done = cli(*args)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") <= 1 or done.stderr.startswith("usage:")


@pytest.mark.slow
def test_a_program_is_measured_against_the_baseline_in_a_scratch_folder(tmp_path):
    """The explore notebook's check: a one-thread program takes turns and gets a ratio with its interval; a
    program that sleeps cannot and says why."""
    import shutil
    import subprocess

    from conftest import FIXTURES, libc_path

    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    program = tmp_path / "brought_workload"
    subprocess.run(["gcc", "-O2", "-o", str(program), str(FIXTURES / "brought_workload.c")], check=True)
    copy = f"glibc-copy={libc_path()}"
    busy = cost_measure.measure_program(f"{program} 1", ["glibc", "glibc-copy"], copy, blocks=6, force="1")
    assert list(busy["allocator"]) == ["glibc-copy"] and busy["why"].iloc[0] == ""
    row = busy.iloc[0]
    assert 0 < row["low"] <= row["measured"] <= row["high"]
    sleeper = cost_measure.measure_program(f"{program} 1 sleep", ["glibc", "glibc-copy"], copy, blocks=6, force="1")
    assert sleeper["measured"].isna().all() and "waits" in sleeper["why"].iloc[0]


def test_left_out_program_by_program_the_widened_intervals_are_checked(checked):
    # three cells of two programs: too few misses for a conformal half-width, so the intervals stay the inputs'
    checked = checked.assign(current_predicted=checked["predicted"], current_low=checked["low"],
                             current_high=checked["high"], current_log_error=checked["log_error"])
    residuals = cost_check.residuals_of([checked])
    assert len(residuals) == 3 and set(residuals["program"]) == {"prog-a", "prog-b"}
    few = cost_check.leave_one_program_out(checked, residuals)
    done = few[few["loo_inside"].notna()]
    assert (done["loo_low"] == done["low"]).all() and (done["loo_high"] == done["high"]).all()
    assert set(done["loo_scope"].str.split(",").str[0]) == {"too few programs checked"}
    # with twenty other programs missing by 30%, each interval widens to hold a 30% miss and its counts follow
    others = pd.DataFrame({"program": [f"o{i}" for i in range(20)], "allocator": "hardened", "family": "hardened",
                           "processor": PROCESSOR, "log_error": [0.3] * 20})
    wide = cost_check.leave_one_program_out(checked, pd.concat([residuals, others], ignore_index=True))
    hardened = wide[(wide["allocator"] == "hardened") & wide["loo_inside"].notna()]
    assert (hardened["loo_high"] / hardened["predicted"] > math.exp(0.3)).all() and hardened["loo_inside"].all()
    s = cost_check.loo_summary(wide)
    assert s["loo_cells"] == 3 and s["loo_inside"] == int(wide["loo_inside"].fillna(False).astype(bool).sum())
    assert [a["allocator"] for a in s["loo_by_allocator"]] == ["hardened", "scudo"]
    assert len(s["loo_outside"]) == 3 - s["loo_inside"]
    assert cost_check.loo_summary(checked.iloc[0:0]) == {"loo_cells": 0}


def test_a_later_set_of_programs_registers_beside_the_first_and_both_are_found(tmp_path, monkeypatch):
    first = registration(cost_check.folder_of(PROCESSOR, tmp_path))
    second = cost_check.folder_of(PROCESSOR, tmp_path, programs="second")
    assert second.parent.name == "second" and second.name == first.name
    second.mkdir(parents=True)
    (second / cost_check.REGISTERED).write_text((first / cost_check.REGISTERED).read_text().replace(
        "2099-01-01", "2099-03-01").replace('[registration]\n', '[registration]\nprograms = "second"\n'))
    assert cost_check.registrations(tmp_path) == [first, second]
    assert [cost_check.programs_of(cost_check.load(f)) for f in cost_check.registrations(tmp_path)] == ["first", "second"]
    # sets registered on one day are in the sets' order, whatever their commits' hashes
    ninth = cost_check.folder_of(PROCESSOR, tmp_path, programs="ninth")
    ninth.mkdir(parents=True)
    (ninth / cost_check.REGISTERED).write_text((second / cost_check.REGISTERED).read_text().replace(
        'programs = "second"', 'programs = "ninth"').replace("commit ", "commit 0"))
    (second / cost_check.REGISTERED).write_text((second / cost_check.REGISTERED).read_text().replace("commit ", "commit f"))
    assert cost_check.registrations(tmp_path) == [first, second, ninth]
    ninth.joinpath(cost_check.REGISTERED).unlink()
    monkeypatch.setattr(cost_check, "REGISTRY", tmp_path)
    monkeypatch.setattr(cost_check, "this_processor", lambda: "Third CPU (1/1/1)")
    with pytest.raises(HeapcostError, match=r"\(Third CPU \(1/1/1\)\) for the second set of programs"):
        cost_measure.measure(programs_set="second")


def test_the_models_compared_keep_out_of_sample_and_in_sample_apart():
    def table(programs_set, errors, inside, loo=None):
        rows = []
        for i, (e, held) in enumerate(zip(errors, inside)):
            m = 1.1 * math.exp(e)
            rows.append({"program": f"p{i}", "allocator": "hardened", "processor": PROCESSOR, "predicted": 1.1,
                         "low": 1.0, "high": 1.21, "measured": m, "inside": held, "log_error": e,
                         "current_predicted": m, "current_log_error": 0.0 if loo else None,
                         "loo_low": 0.9 * m if loo else None, "loo_high": 1.1 * m if loo else None,
                         "loo_inside": True if loo else None, "programs_set": programs_set})
        return pd.DataFrame(rows)

    first = table("first", [0.01, -0.02, 0.30, 0.05], [True, True, False, True], loo=True)
    second = table("second", [0.02, 0.01, -0.01], [True, True, True])
    got = cost_models.models_compared([second, first]).set_index("column")
    assert list(got.index) == [1, 2, 3]
    assert got.loc[1, "sample"] == "out of sample" and got.loc[1, "inside"] == 3 and got.loc[1, "cells"] == 4
    assert got.loc[1, "worst_program"] == "p2" and got.loc[1, "worst_error_percent"] == "+35.0"
    assert got.loc[2, "sample"] == "in sample" and got.loc[2, "inside"] == 4 and got.loc[2, "median_abs_error_percent"] == "0.0"
    assert got.loc[3, "programs_set"] == "second" and got.loc[3, "coverage_percent"] == "100"
    assert got.loc[3, "median_abs_error_percent"] == "1.0"
    # a second set registered but not measured yet adds no row
    assert 3 not in set(cost_models.models_compared([first, table("second", [], [])])["column"])
    # a later set registered with the premium: the model with it and the per-call model alone, both out of sample
    third = table("third", [0.01, -0.01, 0.02], [True, True, True]).assign(
        registered_per_call=1.0, registered_per_call_low=0.95, registered_per_call_high=1.05,
        registered_per_call_inside=[False, False, False],
        registered_per_call_log_error=[math.log(1.1 * math.exp(e)) for e in (0.01, -0.01, 0.02)])
    got = cost_models.models_compared([first, second, third]).set_index("column")
    assert list(got.index) == [1, 2, 3, 4, 5]
    assert got.loc[3, "model"] == "as it was then"
    assert got.loc[4, "model"] == "with its terms" and got.loc[4, "coverage_percent"] == "100"
    assert got.loc[5, "model"] == "per-call alone" and got.loc[5, "inside"] == 0
    assert got.loc[5, "median_abs_error_percent"] == "11.1" and got.loc[4, "median_abs_error_percent"] == "1.0"
    # each set with the model as it is now (in sample) in column 2, and a fourth set's rows after the third's
    fourth = table("fourth", [0.2, -0.1], [False, True], loo=True).assign(
        registered_per_call=1.0, registered_per_call_low=0.95, registered_per_call_high=1.05,
        registered_per_call_inside=[False, True], registered_per_call_log_error=[0.1, 0.0])
    got = cost_models.models_compared([first, second, third, fourth])
    assert got[got["column"] == 2]["programs_set"].tolist() == ["first", "fourth"]
    assert got[got["column"] == 4]["programs_set"].tolist() == ["third", "fourth"]
    assert got[(got["column"] == 4) & (got["programs_set"] == "fourth")]["inside"].tolist() == [1]
    # a kind is checked on a later set by the second set (column 3) or a later set with its terms (column 4); the
    # first set alone, in or out of sample, is not that
    assert cost_models.kinds_checked_later(got) == [PROCESSOR]
    assert cost_models.kinds_checked_later(got[got["column"] == 4]) == [PROCESSOR]
    assert cost_models.kinds_checked_later(got[got["column"].isin([1, 2])]) == []
    assert cost_models.kinds_checked_later(got.iloc[0:0]) == []


def test_measuring_leaves_out_a_hand_built_configuration_not_brought_and_says_so(tmp_path, monkeypatch, capsys):
    from analysis.harness.timing import measure
    from analysis.harness.workloads import cost_inputs, cost_programs

    folder = registration(tmp_path / "reg")
    text = (folder / cost_check.REGISTERED).read_text().replace(
        'allocators = ["hardened", "scudo"]', 'allocators = ["scudo", "omalloc-1.128", "hardened-72fb357"]')
    (folder / cost_check.REGISTERED).write_text(text.replace('name = "prog-a"', 'name = "gzip-text"').replace(
        'name = "prog-b"', 'name = "sort-text"'))
    monkeypatch.setattr(cost_inputs, "write_inputs", lambda folder, programs=(): {"words": tmp_path / "w"})
    monkeypatch.setattr(cost_measure, "file_sha256", lambda path: SHA["prog-a"][1])
    monkeypatch.setattr(cost_programs, "extra_workloads", lambda programs, inputs: ",".join(p.name for p in programs))
    started = {}

    class Campaign:
        def __init__(self, **kw):
            started.update(kw)

        def run(self):
            return tmp_path / "run"

    monkeypatch.setattr(measure, "Campaign", Campaign)
    cost_measure.measure("hardened-72fb357=/lib/h.so", folder=folder, names=["gzip-text"])
    assert started["allocators"] == "scudo" and started["extra_allocators"] == "hardened-72fb357=/lib/h.so"
    assert "not measured (neither in the catalogue nor brought" in capsys.readouterr().out
    with pytest.raises(HeapcostError, match="which the catalogue does not build"):
        cost_measure.measure("", folder=_only(folder, tmp_path), names=["gzip-text"])
    # as trials, for each run's faults: the baseline runs too, and a knock-out brought beside the registration's
    started.clear()
    cost_measure.measure("hardened-72fb357=/lib/h.so,hardened-72fb357-no-quarantine=/lib/q.so", folder=folder,
                       names=["gzip-text"], protocol="trials",
                       allocators=["scudo", "hardened-72fb357", "hardened-72fb357-no-quarantine"])
    assert started["protocol"] == "trials" and started["allocators"] == "glibc,scudo"
    assert started["extra_allocators"] == "hardened-72fb357=/lib/h.so,hardened-72fb357-no-quarantine=/lib/q.so"
    assert started["slice_us"] is None  # the check's own turns unless told
    cost_measure.measure("hardened-72fb357=/lib/h.so", folder=folder, names=["gzip-text"], slice_us=100_000)
    assert started["slice_us"] == 100_000 and started["protocol"] == "lockstep"


def _only(folder, tmp_path):
    """The registration in `folder` predicting only the hand-built OpenBSD malloc."""
    out = tmp_path / "only"
    out.mkdir()
    (out / cost_check.REGISTERED).write_text((folder / cost_check.REGISTERED).read_text().replace(
        'allocators = ["scudo", "omalloc-1.128", "hardened-72fb357"]', 'allocators = ["omalloc-1.128"]'))
    return out


def test_misses_beyond_the_named_factor_are_listed_either_way(checked):
    table = checked[checked["log_error"].notna()].head(3).reset_index(drop=True).copy()
    table["log_error"] = [math.log(1.30), -math.log(1.30), math.log(1.20)]  # dearer, cheaper, within the factor
    s = cost_check.summary(table)
    assert s["far_factor"] == "1.25"
    assert [(m["program"], m["allocator"]) for m in s["far_misses"]] == [
        (r.program, r.allocator) for r in table.iloc[:2].itertuples()]


def test_the_premium_moves_the_current_prediction_and_its_error_never_the_registered_one():
    from analysis.stats.cost_terms import Premium

    row = dict.fromkeys(cost_check.COLUMNS)
    row.update(program="p", allocator="hardened", processor=PROCESSOR, predicted=1.05, low=1.0, high=1.1,
               measured=1.2, log_error=math.log(1.2 / 1.05), current_predicted=1.05, current_low=1.04,
               current_high=1.06, current_log_error=math.log(1.2 / 1.05), per_call_predicted=1.05, calls=1e6,
               base_cpu_s=1.0, term_added=0.0)
    other = {**row, "allocator": "jemalloc"}
    got = cost_models.with_premiums(pd.DataFrame([row, other]), {"hardened": Premium(100.0, 10.0, 20, 30)})
    h, j = got.iloc[0], got.iloc[1]
    assert h["current_predicted"] == pytest.approx(1.15) and h["term_added"] == pytest.approx(0.1)
    assert h["current_log_error"] == pytest.approx(math.log(1.2 / 1.15))
    assert h["current_low"] < 1.14 and h["current_high"] > 1.16
    assert h["predicted"] == 1.05 and h["log_error"] == pytest.approx(math.log(1.2 / 1.05))
    assert j["current_predicted"] == 1.05 and j["term_added"] == 0.0


def test_a_far_misss_profile_facts_are_read_from_the_registered_profile(tmp_path):
    """block_growth: the growing reallocs, those moved, the heap's churn at its top and the peak live bytes, each
    from the profile's whole-program row, and the small blocks' part of the peak (every call here of a small class)."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    rows = [("realloc_grow", 600), ("realloc_moved", 150), ("brk_grow_bytes", 5 * 2**20), ("brk_shrink_bytes", 3 * 2**20),
            ("peak_live_bytes", 512 * 1024), ("malloc_calls", 10)]
    (profiles / "prog.csv").write_text("quantity,size_class,value\n" + "".join(f"{q},,{v}\n" for q, v in rows)
                                       + "malloc_calls,64,10\n")
    assert cost_profiles.block_growth(tmp_path) == {"prog": (600, 150, 3.0, 512.0, 512.0)}
    assert not cost_profiles.profiles_hold_peaks(tmp_path)  # taken before the profile recorded blocks held at once
    (profiles / "held.csv").write_text("quantity,size_class,value\npeak_live_blocks,32768,3\n")
    assert cost_profiles.profiles_hold_peaks(tmp_path)
    assert cost_profiles.held_effect(tmp_path, pd.DataFrame(columns=["measured"]), pd.DataFrame()) == {}  # none measured


def test_the_held_cells_effect_sets_the_predictions_beside_those_without_blocks_held_at_once(tmp_path):
    """held_effect: on profiles that record blocks held at once, the per-call model's |error| with the held cells
    and with the profile's peaks dropped, and how many predictions the held cells moved."""
    from analysis.stats.cost_model import COST_COLUMNS

    profiles = tmp_path / "profiles"
    profiles.mkdir()
    rows = [("malloc_calls", 32768, 1000), ("reuse_share", 32768, 1.0), ("user_s", "", 0.9), ("sys_s", "", 0.1)]
    (profiles / "few.csv").write_text("quantity,size_class,value\n" + "".join(f"{q},{c},{v}\n" for q, c, v in rows)
                                      + "peak_live_blocks,32768,2\n")
    (profiles / "many.csv").write_text("quantity,size_class,value\n" + "".join(f"{q},{c},{v}\n" for q, c, v in rows)
                                       + "peak_live_blocks,32768,100\n")
    cells = [("lifo", 16, 1.0), ("random", 16, 2.0), ("lifo", 32768, 100_000.0), ("random", 32768, 100_000.0),
             ("held", 32768, 1_000.0), ("pages", 262144, 50_000.0)]
    costs = pd.DataFrame([{"processor": PROCESSOR, "allocator": "hm", "pattern": pt, "size_class": c, "added_ns": a,
                           "added_ns_low": a * 0.9, "added_ns_high": a * 1.1} for pt, c, a in cells])
    assert set(COST_COLUMNS) <= set(costs.columns)
    # few: 1,000 held pairs of 1 us add 1 ms to 1 s (1.001), where the cells of many live add 0.1 s (1.1)
    table = pd.DataFrame([{"program": "few", "allocator": "hm", "processor": PROCESSOR, "measured": 1.001},
                          {"program": "many", "allocator": "hm", "processor": PROCESSOR, "measured": 1.1}])
    got = cost_profiles.held_effect(tmp_path, table, costs)
    assert got["cells"] == 2 and got["moved"] == 1
    assert float(got["median_with"]) == pytest.approx(0.0, abs=0.05)
    assert float(got["p90_without"]) > 8  # few, charged at the cells of many live: 1.1 against 1.001 measured


def test_the_one_size_cells_effect_sets_the_predictions_beside_those_at_the_drawn_cells(tmp_path):
    """same_size_effect: on profiles that count reuse by the size just freed (the newer one where there is one, else
    the registered one), the per-call model's |error| with the cells of one size and at the drawn cells alone;
    profiles_count_same_size: whether a registration was made with the count."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    rows = [("malloc_calls", 8192, 1000), ("free_calls", 8192, 1000), ("reuse_share", 8192, 1.0),
            ("frees_reused", 8192, 1000), ("user_s", "", 0.9), ("sys_s", "", 0.1)]
    text = "quantity,size_class,value\n" + "".join(f"{q},{c},{v}\n" for q, c, v in rows)
    (profiles / "old.csv").write_text(text)  # registered before the count: no one-size share
    assert not cost_profiles.profiles_count_same_size(tmp_path)
    (profiles / "awk.csv").write_text(text + "frees_reused_same_size,8192,1000\n")
    assert cost_profiles.profiles_count_same_size(tmp_path)
    cells = [("lifo", 16, 1.0), ("random", 16, 2.0), ("lifo", 8192, 40_000.0), ("random", 8192, 40_000.0),
             ("lifo-same", 8192, 0.0)]
    costs = pd.DataFrame([{"processor": PROCESSOR, "allocator": "je", "pattern": pt, "size_class": c, "added_ns": a,
                           "added_ns_low": a - 1, "added_ns_high": a + 1} for pt, c, a in cells])
    # awk: 1,000 pairs of one size cost the same as the baseline's (1.0 measured), where the drawn cells say 40 us
    table = pd.DataFrame([{"program": "awk", "allocator": "je", "processor": PROCESSOR, "measured": 1.0},
                          {"program": "old", "allocator": "je", "processor": PROCESSOR, "measured": 1.04}])
    got = cost_profiles.same_size_effect(table, costs, {}, tmp_path)
    assert got["cells"] == 1 and got["moved"] == 1  # the old profile has no count: left out
    assert float(got["median_with"]) == pytest.approx(0.0, abs=0.01) and float(got["median_without"]) > 3.9
    assert got["largest"]["program"] == "awk" and got["largest"]["with"] == "1.000"
    # a newer profile is read before the registered one; the kind without the cells gives nothing
    newer = {"old": (pd.read_csv(profiles / "awk.csv"), "run")}
    assert cost_profiles.same_size_effect(table, costs, newer, tmp_path)["cells"] == 2
    drawn = costs[costs["pattern"] != "lifo-same"]
    assert cost_profiles.same_size_effect(table, drawn, newer, tmp_path) == {}


def test_the_page_grow_cell_effect_sets_the_predictions_beside_those_at_the_64_kib_cell_alone(tmp_path):
    """grow_page_effect: on profiles that count the pages their in-place grows added, the per-call model's |error|
    with the grows split between the two grow cells and with the 64 KiB cell alone; profiles_count_grow_pages:
    whether a registration was made with the count."""
    from analysis.stats import cost_model

    profiles = tmp_path / "profiles"
    profiles.mkdir()
    big = 2**21
    rows = [("realloc_calls", big, 100), ("realloc_grown", big, 100), ("realloc_grown_pages", big, 100),
            ("user_s", "", 0.09), ("sys_s", "", 0.01)]
    text = "quantity,size_class,value\n" + "".join(f"{q},{c},{v}\n" for q, c, v in rows)
    (profiles / "old.csv").write_text(text)  # registered before the count: the 64 KiB cell alone
    assert not cost_profiles.profiles_count_grow_pages(tmp_path)
    (profiles / "buffer.csv").write_text(text + f"realloc_grown_in_place,{big},100\n"
                                         f"realloc_grown_in_place_pages,{big},100\n")
    assert cost_profiles.profiles_count_grow_pages(tmp_path)
    cells = [("lifo", 16, 1.0), ("random", 16, 2.0), ("grow", 4 * 2**20, 140_000.0), ("grow-page", 4 * 2**20, 10_000.0)]
    costs = pd.DataFrame([{"processor": PROCESSOR, "allocator": "hm", "pattern": pt, "size_class": c, "added_ns": a,
                           "added_ns_low": a * 0.9, "added_ns_high": a * 1.1} for pt, c, a in cells])
    buffer = pd.read_csv(profiles / "buffer.csv")
    split = cost_model.predict(buffer, costs[costs["processor"] == PROCESSOR]).ratio
    alone = cost_model.predict(buffer, costs[costs["pattern"] != "grow-page"]).ratio
    assert 1 < split < alone  # a page a grow: most of the steps at the page cell's price
    table = pd.DataFrame([{"program": "buffer", "allocator": "hm", "processor": PROCESSOR, "measured": split},
                          {"program": "old", "allocator": "hm", "processor": PROCESSOR, "measured": alone}])
    got = cost_profiles.grow_page_effect(table, costs, {}, tmp_path)
    assert got["cells"] == 1 and got["moved"] == 1  # the old profile has no count: left out
    assert float(got["median_with"]) == pytest.approx(0.0, abs=0.01) and float(got["median_without"]) > 1
    assert got["largest"]["program"] == "buffer" and got["largest"]["with"] == f"{split:.3f}"
    # both grow cells against none: the old profile counts the grows past a page, so it is in
    assert cost_profiles.grow_effect(table, costs, {}, tmp_path)["cells"] == 2


def test_the_small_grow_cells_effect_is_told_apart_from_the_page_cells(tmp_path):
    """grow_small_effect: the per-call model with the two small grow cells and without them, on profiles that count
    the grows past a page in place; grow_page_effect leaves the small cells out of both its sides, so what they add
    is never counted as the page cell's."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    big = 2**21
    rows = [("realloc_calls", big, 1000), ("realloc_grown", big, 1000), ("realloc_grown_pages", big, 100),
            ("realloc_grown_in_place", big, 100), ("realloc_grown_in_place_pages", big, 100),
            ("user_s", "", 0.09), ("sys_s", "", 0.01)]
    (profiles / "buffer.csv").write_text("quantity,size_class,value\n" + "".join(f"{q},{c},{v}\n" for q, c, v in rows))
    cells = [("lifo", 16, 1.0), ("random", 16, 2.0), ("grow", 4 * 2**20, 800_000.0), ("grow-page", 4 * 2**20, 800_000.0),
             ("grow-small", 2**20, 130_000.0), ("grow-small", 4 * 2**20, 520_000.0)]
    costs = pd.DataFrame([{"processor": PROCESSOR, "allocator": "s", "pattern": pt, "size_class": c, "added_ns": a,
                           "added_ns_low": a * 0.95, "added_ns_high": a * 1.05} for pt, c, a in cells])
    table = pd.DataFrame([{"program": "buffer", "allocator": "s", "processor": PROCESSOR, "measured": 50.0}])
    small = cost_profiles.grow_small_effect(table, costs, {}, tmp_path)
    assert small["cells"] == 1 and small["moved"] == 1
    assert float(small["largest"]["with"]) > 2 * float(small["largest"]["without"])
    page = cost_profiles.grow_page_effect(table, costs, {}, tmp_path)
    assert page == cost_profiles.grow_page_effect(table, costs[costs["pattern"] != "grow-small"], {}, tmp_path)
    assert float(page["largest"]["with"]) < float(small["largest"]["without"]) * 1.001


def test_runs_in_longer_turns_stay_out_of_the_check_and_are_set_beside_it(tmp_path):
    from analysis.contract import dataset
    from analysis.publish.results import cost_turns

    runs = tmp_path / "data" / "runs"
    alternation_run(runs, "20990101T000000Z-time-quick", 11)
    alternation_run(runs, "20990102T000000Z-time-quick", 31)
    longer = alternation_run(runs, "20990105T000000Z-time-quick", 91, truth={k: v * 1.3 for k, v in TRUTH.items()})
    info = json.loads((longer / "run.json").read_text())
    info["params"]["slice_us"] = 100_000
    (longer / "run.json").write_text(json.dumps(info))
    folder = registration(tmp_path / "reg")
    ds = dataset.load(runs)
    assert cost_check.slice_of(ds, longer.name) == 100_000
    assert cost_check.slice_of(ds, "20990101T000000Z-time-quick") == cost_check.CHECK_SLICE_US
    t = cost_check.check(ds, folder)
    got = t.set_index(["program", "allocator"])
    for key, ratio in TRUTH.items():  # the check pools its own turns only: the longer run's 1.3x stays out
        assert got.loc[key, "measured_low"] <= ratio <= got.loc[key, "measured_high"], key
        assert got.loc[key, "runs"] == 2
    turns = cost_turns.table(ds, [(folder, t)])
    assert set(turns["slice_us"]) == {100_000} and len(turns) == len(TRUTH)
    assert turns["log_shift"].between(math.log(1.3) - 0.05, math.log(1.3) + 0.05).all()
    assert (turns["runs"] == 1).all() and turns["check_measured"].notna().all()
    n = cost_turns.numbers(turns)["lengths"]
    assert [x["turn_ms"] for x in n] == [100] and n[0]["cells"] == len(TRUTH) and n[0]["apart"] >= 1
    assert n[0]["set"] == "first" and n[0]["most"]["longer"] > n[0]["most"]["check"] and n[0]["only_longer"] == []
    # a cell the check's turns gave no estimate is named apart and left out of the comparison
    lone = turns.assign(check_measured=[None] + list(turns["check_measured"].iloc[1:]))
    got = cost_turns.numbers(lone)["lengths"][0]
    assert got["cells"] == len(TRUTH) - 1 and [c["program"] for c in got["only_longer"]] == [turns["program"].iloc[0]]
    assert got["only_longer"][0]["by_hand"] is False  # no mechanism measured by hand for a simulated cell
    # with the model's prediction as it is now beside the registered one, where the check has one
    assert "current_predicted" in turns and got["only_longer"][0]["current"] is None
    now = cost_turns.numbers(lone.assign(current_predicted=1.234))["lengths"][0]
    assert now["only_longer"][0]["current"] == 1.23
    mended = cost_turns.numbers(lone.assign(program=["lowdown-md"] + list(lone["program"].iloc[1:]),
                                            allocator=["scudo"] + list(lone["allocator"].iloc[1:])))
    assert mended["lengths"][0]["only_longer"][0]["by_hand"] is True  # the cell measured alone by hand
    assert 25 <= n[0]["shift_median"] <= 35
    # the model is held to the longest turns: the check's own columns stay, model_measured is the longer run's
    held = cost_check.longest(ds, [(folder, t)])[0][1]
    held = held[held["measured"].notna()]
    assert held["measured"].tolist() == t.loc[t["measured"].notna(), "measured"].tolist()
    assert (held["model_turn_ms"] == 100).all()
    assert (held["model_measured"] / held["measured"]).between(1.3 * 0.95, 1.3 * 1.05).all()
    modelled = held.assign(per_call_predicted=1.0, calls=10.0, base_cpu_s=0.2)  # what a per-call table would give
    assert cost_models.term_cells([modelled])["measured"].tolist() == held["model_measured"].astype(float).tolist()
    # an interval around the longer turns' ratio holds it, never the check's 1.3 times below it
    m = held["model_measured"].astype(float)
    aimed = held.assign(current_predicted=m, current_low=m * 0.99, current_high=m * 1.01, current_log_error=0.0)
    assert cost_check.leave_one_program_out(aimed, cost_check.residuals_of([]))["loo_inside"].all()
    # a run a later one supersedes enters no table: its 2x is never pooled with the 1.3x
    odd = alternation_run(runs, "20990106T000000Z-time-quick", 97, truth={k: v * 2.0 for k, v in TRUTH.items()})
    (odd / "run.json").write_text(json.dumps({**info, "run_id": odd.name}))
    ds = dataset.Dataset(runs)  # read again: load() keeps the one it read first
    assert (cost_turns.table(ds, [(folder, t)])["runs"] == 2).all()
    kept = cost_turns.table(ds, [(folder, t)], superseded={odd.name})
    assert (kept["runs"] == 1).all() and kept["log_shift"].between(math.log(1.3) - 0.05, math.log(1.3) + 0.05).all()
    # a registration measured in the check's turns alone has nothing to set beside it
    alone = tmp_path / "alone"
    alternation_run(alone, "20990101T000000Z-time-quick", 11)
    assert cost_turns.table(dataset.load(alone), [(folder, cost_check.check(alone, folder))]).empty
