"""The equal-budget precision grid of `make bench` and the merge of results.json, with hyperfine and the
campaign faked: no process runs."""
import json
import os
import shlex
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from analysis.errors import HeapcostError
from analysis.harness.bench import command as bench
from analysis.harness.bench import precision as bp

PROFILE_SCALES = {"smoke": 0.03, "quick": 0.25}
OTHER_FACTOR = 0.5  # the other allocator's scale factor: the baseline must run at it too


class FakeCampaign:
    """What precision_equal_budget uses of measure.Campaign; run() writes a pairs.csv of 15 pairs."""

    made: list = []

    def __init__(self, allocators, workload, budget_min, runs_dir, seed, profile="quick"):
        self.profile, self.budget_min, self.runs_dir, self.workload = profile, budget_min, Path(runs_dir), workload
        self.allocators = allocators
        self.resolved = {a: SimpleNamespace(allocator=SimpleNamespace(scale=OTHER_FACTOR if a == allocators[1]
                                                                      else 1.0)) for a in allocators}
        self.protocol = "lockstep"
        FakeCampaign.made.append(self)

    def scale_of(self, factor):
        return PROFILE_SCALES[self.profile] * factor

    def trial(self, aid, wid, factor):
        return SimpleNamespace(argv=[f"/wl/{wid}-{aid}", repr(self.scale_of(factor))],
                               env=lambda workdir, pad: {"HOME": str(workdir)})

    def run(self):
        run_dir = self.runs_dir / "run"
        run_dir.mkdir(parents=True)
        rng = np.random.default_rng(0)
        a = rng.lognormal(np.log(0.01), 0.02, 15)
        pd.DataFrame({"workload": self.workload, "allocator_a": self.allocators[0],
                      "allocator_b": self.allocators[1], "status": "ok", "active_a_s": a,
                      "active_b_s": a * 5 * rng.lognormal(0, 0.04, 15)}).to_csv(run_dir / "pairs.csv", index=False)
        return run_dir


class FakeHyperfine:
    """hyperfine_json: the calibration's mean times fixed, the main run's elapsed time fixed."""

    def __init__(self, means=(0.05, 0.25), elapsed=61.5, calibration_elapsed=2.0):
        self.means, self.elapsed, self.calibration_elapsed = means, elapsed, calibration_elapsed
        self.calls = []

    def __call__(self, args):
        self.calls.append(list(args))
        rng = np.random.default_rng(len(self.calls))
        runs = int(args[args.index("--runs") + 1]) if "--runs" in args else None
        results = [{"mean": m, "times": list(rng.lognormal(np.log(m), 0.03, runs or n))}
                   for m, n in zip(self.means, (45, 10))]
        is_calibration = runs == bp.CALIBRATION_RUNS
        return {"results": results}, self.calibration_elapsed if is_calibration else self.elapsed


@pytest.fixture
def faked(monkeypatch):
    FakeCampaign.made = []
    hyperfine = FakeHyperfine()
    monkeypatch.setattr(bp, "_campaign", FakeCampaign)
    monkeypatch.setattr(bp, "hyperfine_json", hyperfine)
    return hyperfine


def test_runs_for_a_budget_fill_it_from_the_calibrated_means_and_never_fall_below_ten():
    assert bp.runs_for_budget(60, [0.05, 0.25]) == 200
    assert bp.runs_for_budget(60, [0.01, 0.04]) == 1200
    assert bp.runs_for_budget(1, [0.05, 0.25]) == 10


def test_a_budget_is_met_by_hyperfine_runs_sized_on_a_calibration_and_our_campaign_gets_its_time(faked, tmp_path):
    r = bp.precision_equal_budget(("glibc", "scudo"), "small-loop", 1, tmp_path, budget_s=60, profile="quick")
    calibration, main = faked.calls
    assert calibration[:2] == ["--runs", "3"] and main[:2] == ["--runs", "200"]
    assert calibration[2:] == main[2:] and len(main) == 4  # the same two commands
    assert r["hyperfine"]["runs"] == {"glibc": 200, "scudo": 200}
    assert r["hyperfine"]["calibration"] == {"runs": 3, "elapsed_s": 2.0, "mean_s": {"glibc": 0.05, "scudo": 0.25},
                                             "runs_chosen": 200}
    # machine time: the main run's elapsed time only, the calibration not counted
    measured = FakeCampaign.made[-1]
    assert measured.budget_min == pytest.approx(61.5 / 60)
    assert r["budget_s"] == 60 and r["heapcost"]["runs"] == {"glibc": 15, "scudo": 15}
    assert r["heapcost"]["unit"] == "pairs"
    assert (tmp_path / "precision_pairs-quick-60s.csv").is_file()


def test_the_default_budget_is_hyperfines_own_run(faked, tmp_path):
    r = bp.precision_equal_budget(("glibc", "scudo"), "small-loop", 1, tmp_path)
    assert len(faked.calls) == 1 and "--runs" not in faked.calls[0]
    assert r["hyperfine"]["calibration"] is None and r["budget_s"] is None
    assert FakeCampaign.made[-1].budget_min == pytest.approx(61.5 / 60)
    assert (tmp_path / "precision_pairs.csv").is_file()


@pytest.mark.parametrize("profile", ["quick", "smoke"])
def test_hyperfine_and_the_campaign_run_the_same_scale(faked, tmp_path, profile):
    r = bp.precision_equal_budget(("glibc", "scudo"), "small-loop", 1, tmp_path, budget_s=None, profile=profile)
    scale = PROFILE_SCALES[profile] * OTHER_FACTOR
    assert r["scale"] == scale and r["profile"] == profile
    assert {c.profile for c in FakeCampaign.made} == {profile}
    for command, aid in zip(faked.calls[0], ("glibc", "scudo")):
        argv = shlex.split(command)
        assert argv[-2:] == [f"/wl/small-loop-{aid}", repr(scale)]  # the baseline at the other's scale too


def fake_round(halfwidth_ratio, profile="quick", budget_s=None, seed=1):
    return {"allocators": ["glibc", "scudo"], "workload": "small-loop", "profile": profile,
            "budget_s": budget_s, "scale": PROFILE_SCALES[profile], "seed": seed,
            "hyperfine": {"elapsed_s": 6.0 if budget_s is None else budget_s + 1, "runs": {"glibc": 45, "scudo": 10},
                          "welch_halfwidth": 0.04, "plusminus_halfwidth": 0.05, "heapcost_estimator_halfwidth": 0.03},
            "heapcost": {"elapsed_s": 6.2, "unit": "pairs", "runs": {"glibc": 15, "scudo": 15},
                         "halfwidth": 0.04 * halfwidth_ratio, "welch_raw_halfwidth": 0.02}}


# ratio of half-widths per (profile, budget) and round seed
RATIOS = {("quick", None): [1.68, 0.66, 0.91], ("quick", 60.0): [0.5], ("smoke", None): [0.2, 0.9, 0.4],
          ("smoke", 60.0): [0.3]}


@pytest.fixture
def fake_rounds(monkeypatch):
    calls = []

    def fake(allocators, workload, seed, out_dir, budget_s, profile):
        calls.append((profile, budget_s, seed))
        return fake_round(RATIOS[profile, budget_s][seed - 1], profile, budget_s, seed)

    monkeypatch.setattr(bp, "precision_equal_budget", fake)
    return calls


def test_the_grid_runs_rounds_for_the_default_budget_only_and_takes_the_median_ratio(fake_rounds, tmp_path):
    plan = bp.grid_plan("default,60", "quick,smoke", 3)
    grid = bp.precision_grid(("glibc", "scudo"), "small-loop", plan, 1, tmp_path)
    assert fake_rounds == [("quick", None, 1), ("quick", None, 2), ("quick", None, 3), ("quick", 60.0, 1),
                           ("smoke", None, 1), ("smoke", None, 2), ("smoke", None, 3), ("smoke", 60.0, 1)]
    assert [(e["profile"], e["budget_s"], len(e["rounds"])) for e in grid] == [
        ("quick", None, 3), ("quick", 60.0, 1), ("smoke", None, 3), ("smoke", 60.0, 1)]
    ratios = [e["halfwidth_ratio"] for e in grid]
    assert ratios == pytest.approx([0.91, 0.5, 0.4, 0.3])
    assert [e["meets_half"] for e in grid] == [False, True, True, True]  # 0.5 itself is at most half
    assert [e["scale"] for e in grid] == [0.25, 0.25, 0.03, 0.03]

    part = bp.precision_results(grid)
    assert part["precision"]["seed"] == 3  # the median round of quick at hyperfine's default
    assert part["precision"]["halfwidth_ratio_all_rounds"] == pytest.approx([1.68, 0.66, 0.91])
    assert [r["seed"] for r in part["precision_rounds"]] == [1, 2, 3]
    assert "precision" not in bp.precision_results(grid[1:])


def test_an_even_number_of_rounds_takes_the_median_of_the_ratios():
    entry = bp.grid_entry("quick", None, [fake_round(k) for k in (0.2, 0.6, 0.4, 1.0)])
    assert entry["halfwidth_ratio"] == pytest.approx(0.5) and entry["meets_half"]


def test_format_results_has_a_row_per_grid_entry_losers_included(fake_rounds, tmp_path):
    grid = bp.precision_grid(("glibc", "scudo"), "small-loop", bp.grid_plan("default,60", "quick,smoke", 3), 1,
                             tmp_path)
    text = bench.format_results({"precision_grid": grid, **bp.precision_results(grid)})
    assert "precision at equal machine time, by budget and scale" in text
    rows = [line for line in text.splitlines() if line.startswith(("| quick |", "| smoke |"))]
    assert len(rows) == 4
    assert rows[0].startswith("| quick | 0.25 | hyperfine default (6 s) | 45+10 | 15 | ±4.00% | ±3.64% | 0.91 "
                              "(median of 3 rounds: 1.68, 0.66, 0.91) | no |")
    assert rows[1].startswith("| quick | 0.25 | 60 s (61 s) |") and rows[1].endswith("| 0.50 | yes |")
    assert rows[2].startswith("| smoke | 0.03 | hyperfine default") and rows[2].endswith("| yes |")


def test_bad_grid_input_is_a_one_line_error():
    for budgets in ("abc", "-5", "0", "60,60", "", "nan", "inf"):
        with pytest.raises(HeapcostError, match="--budgets"):
            bp.parse_budgets(budgets)
    assert bp.parse_budgets("Default, 60,120.5") == [None, 60.0, 120.5]
    with pytest.raises(HeapcostError, match="unknown profile 'fast'"):
        bp.parse_profiles("quick,fast")
    with pytest.raises(HeapcostError, match="--rounds"):
        bp.grid_plan("default", "quick", 0)


def bench_args(out, **kw):
    return SimpleNamespace(**{"allocators": "glibc,scudo", "workload": "small-loop", "true_runs": 5, "only": None,
                              "out": str(out), "seed": 1, "rounds": 3, "budgets": "default,60",
                              "precision_profiles": "quick,smoke", "protocol_budget_min": 3.0, "candidates": "",
                              "force": False, **kw})


def test_bad_grid_input_fails_before_the_bench_takes_the_lock(monkeypatch, tmp_path):
    from analysis.harness.process import quiet

    def no_lock(*a, **k):
        raise AssertionError("the lock was taken")

    monkeypatch.setattr(quiet, "CampaignLock", no_lock)
    with pytest.raises(HeapcostError, match="--budgets"):
        bench.run(bench_args(tmp_path, budgets="abc"))
    with pytest.raises(HeapcostError, match="unknown profile"):
        bench.run(bench_args(tmp_path, precision_profiles="tiny"))


@pytest.fixture
def loads(monkeypatch):
    values = iter([0.1, 0.7, 0.2])
    monkeypatch.setattr(os, "getloadavg", lambda: (next(values), 0.0, 0.0))


def test_only_precision_keeps_the_other_parts_of_the_earlier_results(fake_rounds, loads, tmp_path, capsys):
    old_overhead = {"heapcost_per_trial_s": 0.003, "probe_fixed_s": 0.004, "hyperfine_per_run_s": 0.0015,
                    "heapcost_minus_hyperfine_s": 0.0015}
    old_measured = {"utc_start": "2026-11-30T15:43:00Z", "utc_end": "2026-11-30T15:44:00Z",
                    "loadavg_before": 0.12, "loadavg_after": 0.5}
    (tmp_path / "results.json").write_text(json.dumps({
        "loadavg_before": 0.12, "cpus": 2, "overhead": old_overhead,
        "adaptive": {"target": 0.01, "adaptive_trials_mean": 100, "fixed_trials_mean": 150, "saving": 1 / 3},
        "precision": {"stale": True}, "precision_rounds": [{"stale": True}],
        "measured": {"overhead": old_measured, "precision": {"stale": True}}}))
    bench._run_benchmarks(bench_args(tmp_path, only=["precision"]), ["glibc", "scudo"], {"precision"},
                          {"cpus": 2})
    new = json.loads((tmp_path / "results.json").read_text())
    assert new["overhead"] == old_overhead and new["measured"]["overhead"] == old_measured
    assert "adaptive" in new and "adaptive" not in new["measured"]  # kept, its provenance unknown
    assert new["precision"]["seed"] == 3 and len(new["precision_rounds"]) == 3 and len(new["precision_grid"]) == 4
    prec = new["measured"]["precision"]
    assert set(prec) == {"utc_start", "utc_end", "loadavg_before", "loadavg_after", "host"}
    assert (prec["loadavg_before"], prec["loadavg_after"]) == (0.1, 0.7)
    assert prec["host"] == bench.measuring_host() and " MHz" in prec["host"] and "kernel " in prec["host"]
    md = (tmp_path / "results.md").read_text()
    assert (f"- precision: measured {prec['utc_start']} to {prec['utc_end']} on {prec['host']}, load 0.10 before, "
            "0.70 after" in md)
    assert "- overhead: measured 2026-11-30T15:43:00Z to 2026-11-30T15:44:00Z, load 0.12 before, 0.50 after" in md
    assert "- adaptive: when and under what load not recorded" in md
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", "\xff\xfe"])
def test_a_corrupt_earlier_results_json_is_a_warning_and_not_merged(fake_rounds, loads, tmp_path, capsys, content):
    (tmp_path / "results.json").write_bytes(content.encode("latin-1"))
    bench._run_benchmarks(bench_args(tmp_path, only=["precision"], budgets="60", precision_profiles="smoke"),
                          ["glibc", "scudo"], {"precision"}, {"cpus": 2})
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("heapcost: warning:") and "results.json" in err
    new = json.loads((tmp_path / "results.json").read_text())
    assert set(new["measured"]) == {"precision"} and "precision" not in new  # no quick/default cell ran
    assert [(e["profile"], e["budget_s"]) for e in new["precision_grid"]] == [("smoke", 60.0)]


def test_a_part_run_again_replaces_all_of_its_earlier_keys(fake_rounds, loads, tmp_path):
    (tmp_path / "results.json").write_text(json.dumps({"precision": {"stale": True}, "precision_rounds": [],
                                                       "precision_grid": [{"stale": True}]}))
    bench._run_benchmarks(bench_args(tmp_path, only=["precision"], budgets="60"), ["glibc", "scudo"],
                          {"precision"}, {"cpus": 2})
    new = json.loads((tmp_path / "results.json").read_text())
    assert "precision" not in new and "precision_rounds" not in new  # the grid had no quick/default cell
    assert [(e["profile"], e["budget_s"]) for e in new["precision_grid"]] == [("quick", 60.0), ("smoke", 60.0)]


def test_the_default_grid_is_three_budgets_at_two_scales():
    import argparse

    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    args = parser.parse_args([])
    assert bp.grid_plan(args.budgets, args.precision_profiles, args.rounds) == [
        ("quick", None, 3), ("quick", 60.0, 1), ("quick", 180.0, 1),
        ("smoke", None, 3), ("smoke", 60.0, 1), ("smoke", 180.0, 1)]
