"""Seed 001's long build predicted from the short build's per-unit cost: simulated runs with a known per-unit
ratio, the registration file keeping both kinds of prediction, and the check against a measured answer."""
import json
import math

import numpy as np
import pandas as pd
import pytest

from analysis.errors import HeapcostError
from analysis.publish.debates import long_build, pool, predictions

AMD = {"cpu": {"model": "AMD EPYC", "family": 25, "model_number": 1, "stepping": 1, "cpuinfo_mhz": [2445.4]}}
INTEL = {"cpu": {"model": "Intel(R) Xeon(R) Processor", "family": 6, "model_number": 167, "stepping": 1,
                 "cpuinfo_mhz": [2600.0]}}


def write_run(runs, name, machine, per_unit, startup, seed, scales=(0.25, 0.5, 0.75), n=8, noise=0.004):
    """A run whose trials of the short build follow time = startup + per_unit x scale, with noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for alloc in per_unit:
        for s in scales:
            for _ in range(n):
                t = (startup[alloc] + per_unit[alloc] * s) * math.exp(rng.normal(0, noise))
                rows.append({"workload": long_build.SHORT_BUILD, "allocator": alloc, "scale": s, "wall_s": t,
                             "status": "ok"})
    d = runs / name
    d.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(d / "trials.csv", index=False)
    (d / "machine.json").write_text(json.dumps(machine))
    (d / "run.json").write_text(json.dumps({"allocators": {}}))


@pytest.fixture
def runs(tmp_path):
    runs = tmp_path / "runs"
    truth = {"glibc": 4.0, "hardened": 4.0 * 1.45, "light": 4.0 * 1.10}
    start = {"glibc": 0.05, "hardened": 0.09, "light": 0.06}
    write_run(runs, "r1-amd", AMD, truth, start, 1)
    write_run(runs, "r2-amd", AMD, truth, start, 2)
    write_run(runs, "r3-intel", INTEL, {k: v * (1.2 if k != "glibc" else 1.0) for k, v in truth.items()}, start, 3)
    write_run(runs, "r4-one-scale", AMD, truth, start, 4, scales=(0.25,))
    pool._processors.cache_clear()
    pool._machines.cache_clear()
    return runs


def test_the_per_unit_ratio_is_recovered_per_host_and_start_up_is_set_apart(runs):
    slopes = long_build.run_slopes(runs, ["hardened", "light"])
    assert set(slopes["run_id"]) == {"r1-amd", "r2-amd", "r3-intel"}  # one scale fits no line
    entries = long_build.compute(slopes, [("hardened", "glibc"), ("light", "glibc"), ("light", "hardened")], "today")
    by = {(e["configuration"], e["processor"].split()[0]): e for e in entries}
    assert len(entries) == 4  # the pair not against the baseline is not predicted
    amd = by[("hardened / glibc", "AMD")]
    assert amd["low"] < 1.45 < amd["high"] and amd["centre"] == pytest.approx(1.45, rel=0.01)
    assert amd["from_runs"] == ["r1-amd", "r2-amd"]
    assert amd["startup_ms"] == pytest.approx(90, rel=0.2) and amd["baseline_startup_ms"] == pytest.approx(50, rel=0.2)
    intel = by[("light / glibc", "Intel(R)")]
    assert intel["low"] < 1.10 * 1.2 < intel["high"]
    # each host answered alone: the Intel host's slower ratio does not move the AMD one
    assert by[("light / glibc", "AMD")]["high"] < 1.2


def test_the_registration_file_keeps_both_kinds_and_refuses_an_entry_that_lacks_a_key(runs, tmp_path):
    path = tmp_path / "predictions.toml"
    host = {"seed": "001", "configuration": "hardened / glibc", "workload": "build", "registered": "d, commit c",
            "from_hosts": ["AMD EPYC"], "centre": 1.5, "low": 1.4, "high": 1.6, "tau_percent": 2.0, "spread_cells": 3}
    entries = long_build.compute(long_build.run_slopes(runs, ["hardened"]), [("hardened", "glibc")], "d, commit c")
    predictions.write(path, [host], entries)
    assert predictions.load(path) == [host]
    assert [e["processor"] for e in predictions.load_long_builds(path)] == [e["processor"] for e in entries]
    path.write_text(path.read_text().replace("baseline_startup_ms", "other"))
    with pytest.raises(HeapcostError, match="long_build 1 lacks baseline_startup_ms"):
        predictions.load_long_builds(path)


def test_the_check_sets_each_host_measured_answer_beside_its_prediction():
    entry = {"seed": "001", "configuration": "hardened / glibc", "workload": long_build.LONG_BUILD,
             "from_workload": "build", "registered": "d", "processor": "AMD EPYC 2450 MHz (25/1/1)",
             "centre": 1.45, "low": 1.40, "high": 1.50}
    per_host = pd.DataFrame([
        {"configuration": "hardened / glibc", "workload": long_build.LONG_BUILD, "processor": entry["processor"],
         "ratio": 1.31, "ci_low": 1.29, "ci_high": 1.33},
        {"configuration": "hardened / glibc", "workload": long_build.LONG_BUILD, "processor": "another host",
         "ratio": 1.45, "ci_low": 1.4, "ci_high": 1.5},
        {"configuration": "hardened / glibc", "workload": "build", "processor": entry["processor"],
         "ratio": 1.45, "ci_low": 1.4, "ci_high": 1.5}])
    out = long_build.check([entry], per_host)
    assert len(out) == 1 and not out.iloc[0]["held"]
    assert out.iloc[0]["measured_over_predicted"] == pytest.approx(1.31 / 1.45, abs=1e-4)
    assert long_build.check([entry], per_host.assign(ratio=1.42)).iloc[0]["held"]


def test_registering_without_a_scaling_run_is_a_one_line_error(tmp_path, capsys):
    from analysis.cli import main
    (tmp_path / "runs").mkdir()
    assert main(["predict-build", "--data", str(tmp_path), "--output", str(tmp_path / "p.toml")], prog="heapcost") != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "SCALES" in err[0]


def test_the_long_build_is_reported_per_host_and_metric_with_each_host_runs_pooled(runs):
    def rows(metric_ratio):
        out = []
        for run_id, ratio in (("r1-amd", metric_ratio), ("r2-amd", metric_ratio * 1.01), ("r3-intel", 1.3)):
            out.append({"workload": long_build.LONG_BUILD, "allocator": "hardened", "baseline": "glibc",
                        "ratio": ratio, "ci_low": ratio * 0.98, "ci_high": ratio * 1.02, "df": 4.0, "run_id": run_id})
        out.append({"workload": "build", "allocator": "hardened", "baseline": "glibc", "ratio": 9.0,
                    "ci_low": 8.0, "ci_high": 10.0, "df": 4.0, "run_id": "r1-amd"})
        return pd.DataFrame(out)
    cells = {"wall_s": rows(1.30), "user_s": rows(1.35), "sys_s": rows(1.9), long_build.TREE_PEAK: rows(1.1),
             long_build.TREE_PEAK_ANON: rows(1.4)}
    out = long_build.measured(cells, runs, [("hardened", "glibc"), ("light", "glibc")])
    assert set(out["metric"]) == set(long_build.METRICS) and len(out) == 10  # 5 metrics x 2 hosts, light unmeasured
    amd = out[out["processor"].str.startswith("AMD")].set_index("metric")
    assert (amd["n_runs"] == 2).all()
    assert 1.30 < amd.loc["wall_s", "ratio"] < 1.313 and amd.loc["wall_s", "ci_low"] < 1.30
    assert amd.loc["sys_s", "ratio"] == pytest.approx(1.9 * math.sqrt(1.01), rel=1e-3)
    assert long_build.measured({}, runs, [("hardened", "glibc")]).empty


def test_a_host_long_build_is_registered_once(runs, tmp_path):
    path = tmp_path / "predictions.toml"
    first = long_build.compute(long_build.run_slopes(runs, ["hardened"]), [("hardened", "glibc")], "day 1, commit a")
    predictions.write(path, [], first)
    again = long_build.compute(long_build.run_slopes(runs, ["hardened", "light"]),
                               [("hardened", "glibc"), ("light", "glibc")], "day 2, commit b")
    new, already = predictions.not_registered(again, predictions.load_long_builds(path), key=long_build.same_host)
    assert {e["configuration"] for e in new} == {"light / glibc"}
    assert len(already) == len(first) and {e["registered"] for e in already} == {"day 1, commit a"}


def test_a_new_host_prediction_from_the_same_hosts_is_registered_once():
    def entry(hosts, registered):
        return {"seed": "002", "configuration": "p / q", "workload": "w", "registered": registered,
                "from_hosts": hosts, "centre": 1.2, "low": 1.1, "high": 1.3, "tau_percent": 2.0, "spread_cells": 3}
    earlier = [entry(["AMD", "Intel"], "day 1")]
    new, already = predictions.not_registered([entry(["AMD", "Intel"], "day 2"), entry(["AMD", "Intel", "X"], "day 2")],
                                              earlier)
    assert [e["from_hosts"] for e in new] == [["AMD", "Intel", "X"]] and already == earlier
