"""Interference thresholds from data: the statistics (analysis/stats/interference.py) on simulated pairs whose
shifts are known, the bench part's load processes, and its table."""
import math
import os
import time

import numpy as np
import pandas as pd
import pytest

from analysis.errors import HeapcostError
from analysis.harness.bench import command as bench, interference as bench_interference
from analysis.stats import interference

# condition: (placement, duty, recorded share on the pairs' CPU, on the other CPU, true log shift)
TRUTH = {
    "quiet": ("", 0.0, 0.01, 0.04, 0.0),
    "other 50": ("other", 0.5, 0.01, 0.50, 0.0),
    "other 100": ("other", 1.0, 0.01, 0.98, 0.0),
    "same 10": ("same", 0.1, 0.08, 0.04, 0.08),
    "same 25": ("same", 0.25, 0.20, 0.04, 0.19),
}


def simulated_pairs(seed: int, n: int = 300, sd: float = 0.05) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for name, (placement, duty, same, other, shift) in TRUTH.items():
        wall = rng.uniform(0.04, 0.06, n)
        a = rng.lognormal(np.log(0.007), 0.03, n)
        b = a * 5.0 * np.exp(shift + rng.standard_normal(n) * sd)
        # /proc/stat's 10 ms ticks: whole ticks, right on average
        same_s = rng.binomial(100, same * wall / 1.0) * 0.01
        other_s = same_s + rng.binomial(100, other * wall / 1.0) * 0.01
        rows.append(pd.DataFrame({"condition": name, "placement": placement, "duty": duty, "status": "ok",
                                  "active_a_s": a, "active_b_s": b, "wall_s": wall, "other_cpu_s": other_s,
                                  "cpu_other_s": same_s}))
    return pd.concat(rows, ignore_index=True)


def test_each_conditions_shift_is_recovered_within_its_interval():
    covered, total = 0, 0
    for seed in range(40):
        eff = interference.effects(simulated_pairs(seed)).set_index("condition")
        assert list(eff.index)[0] == "quiet"
        for name, (*_, shift) in TRUTH.items():
            if name == "quiet":
                continue
            total += 1
            covered += eff.loc[name, "shift_low"] <= math.expm1(shift) <= eff.loc[name, "shift_high"]
    assert 0.9 <= covered / total <= 1.0  # 95% intervals over 160 conditions


def test_the_thresholds_follow_where_the_work_ran():
    pairs = simulated_pairs(1)
    eff = interference.effects(pairs).set_index("condition")
    assert eff.loc["other 100", "other_share"] == pytest.approx(0.98, abs=0.05)
    assert eff.loc["same 25", "same_share"] == pytest.approx(0.20, abs=0.03)
    t = interference.thresholds(eff.reset_index(), pairs, tolerance=0.0025)["placements"]
    # on the pairs' CPU the shift is about its share (slope ~ 0.19/0.19 = 1): a threshold of ~0.25% / 1
    assert t["same"]["slope"] == pytest.approx(1.0, abs=0.15)
    assert t["same"]["fraction"] == pytest.approx(math.log1p(0.0025) / t["same"]["slope_bound"])
    assert t["same"]["fraction"] < 0.01
    # beside it no shift: only the slope's uncertainty limits the threshold, which is far looser
    assert abs(t["other"]["slope"]) < 2 * t["other"]["slope_se"] + 1e-9
    assert t["other"]["fraction"] > 10 * t["same"]["fraction"]
    assert t["other"]["flag_fraction"] == pytest.approx(t["other"]["quiet_share"] + t["other"]["fraction"])
    quiet = pairs[pairs["condition"] == "quiet"]
    assert t["same"]["min_s"] == pytest.approx(np.quantile(quiet["cpu_other_s"], 0.99))


def test_bad_interference_input_is_named():
    pairs = simulated_pairs(2)
    with pytest.raises(HeapcostError, match="lack the column.*cpu_other_s"):
        interference.effects(pairs.drop(columns="cpu_other_s"))
    with pytest.raises(HeapcostError, match="the quiet condition has 3 usable pairs"):
        interference.effects(pd.concat([pairs[pairs["condition"] != "quiet"],
                                        pairs[pairs["condition"] == "quiet"].head(3)]))
    eff = interference.effects(pairs)
    with pytest.raises(HeapcostError, match="tolerance must be positive"):
        interference.thresholds(eff, pairs, 0.0)


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _reaches(pid: int, states: str, within_s: float = 30.0) -> str:
    """The process's state once it is one of `states` (a busy host delays a stop or a continue; no fixed
    sleep is long enough everywhere), or its last state after within_s."""
    deadline = time.monotonic() + within_s
    while (state := _state(pid)) not in states and time.monotonic() < deadline:
        time.sleep(0.01)
    return state


def test_the_load_runs_only_while_its_condition_does():
    cpu = sorted(os.sched_getaffinity(0))[0]
    cond = bench_interference.Condition("same CPU, 50%", "same", 0.5)
    loads = bench_interference.Loads([bench_interference.CONDITIONS[0], cond], cpu, cpu)
    try:
        assert list(loads.procs) == [cond.name]  # the quiet condition has no load
        pid = loads.procs[cond.name].pid
        assert _reaches(pid, "T") == "T"  # started stopped
        loads.start(cond)
        assert _reaches(pid, "RS") in "RS"
        with open(f"/proc/{pid}/status") as f:
            assert f"Cpus_allowed_list:\t{cpu}" in f.read()
        loads.stop(cond)
        assert _reaches(pid, "T") == "T"
    finally:
        loads.close()
    assert loads.procs[cond.name].poll() is not None


def test_the_load_refuses_bad_options():
    import subprocess

    out = subprocess.run([str(bench_interference.load_path()), "--cpu", "0", "--duty", "2"], capture_output=True,
                         text=True)
    assert out.returncode == 2 and "--duty (in (0, 1])" in out.stderr.splitlines()[0]


def test_results_md_shows_every_condition_and_the_thresholds_in_use():
    pairs = simulated_pairs(3)
    eff = interference.effects(pairs)
    r = {"allocators": ["glibc", "scudo"], "workload": "small-loop", "scale": 0.03, "elapsed_s": 300.0,
         "pairs": len(pairs), "effects": eff.to_dict("records"),
         "thresholds": interference.thresholds(eff, pairs, 0.0025),
         "in_use": {"same": {"flag_fraction": 0.05, "min_s": 0.02}, "other": {"flag_fraction": 0.25, "min_s": 0.02}}}
    md = bench.format_results({"measured": {}, "interference": r})
    for name in TRUTH:
        assert f"| {name} | 300 |" in md
    from analysis.harness.process import quiet

    assert "- the pairs' CPU:" in md and "- the other CPU:" in md and "(when measured: 5.0% and 0.020 s)" in md
    assert f"campaigns use {quiet.SAME_CPU_FRACTION:.1%} and {quiet.SAME_CPU_MIN_S:.3f} s" in md
    assert "interference" in bench.PARTS


def test_the_thresholds_campaigns_use_are_the_ones_the_bench_measured():
    import json

    from analysis.harness.process import quiet
    from analysis.paths import REPO

    measured = json.loads((REPO / "bench" / "results.json").read_text())["interference"]["thresholds"]["placements"]
    assert quiet.SAME_CPU_FRACTION == round(measured["same"]["flag_fraction"], 3)
    assert quiet.SAME_CPU_MIN_S == round(measured["same"]["min_s"], 3)
    assert quiet.OTHER_CPUS_FRACTION == round(measured["other"]["flag_fraction"], 3)
    assert quiet.OTHER_CPUS_MIN_S == round(measured["other"]["min_s"], 3)
