"""The bench's layout part: the driver's --no-aslr, the statistics (analysis/stats/layout.py) on simulated pairs
whose ratios, shared effects and bias are known, and its table."""
import json
import math
import subprocess

import numpy as np
import pandas as pd
import pytest

from analysis.errors import HeapcostError
from analysis.harness.timing import lockstep
from analysis.harness.bench import command as bench, layout as bench_layout
from analysis.harness.workloads.builtin import WORKLOADS
from analysis.stats import layout

# condition: (true A/A log ratio, share of each process's own effect the pair shares)
TRUTH = {"independent offsets": (0.0, 0.0), "one offset per pair": (0.0, 0.8), "ASLR off": (0.015, 0.9)}


def simulated_pairs(seed: int, n: int = 200, sd: float = 0.04) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for name, (bias, shared) in TRUTH.items():
        for other, ratio in (("scudo", 5.0), ("glibc-copy", 1.0)):
            common = rng.standard_normal(n)
            own_a = math.sqrt(shared) * common + math.sqrt(1 - shared) * rng.standard_normal(n)
            own_b = math.sqrt(shared) * common + math.sqrt(1 - shared) * rng.standard_normal(n)
            a = 0.007 * np.exp(sd * own_a)
            b = 0.007 * ratio * np.exp(sd * own_b + (bias if other == "glibc-copy" else 0.0))
            df = pd.DataFrame({"condition": name, "allocator_a": "glibc", "allocator_b": other, "status": "ok",
                               "active_a_s": a, "active_b_s": b})
            swap = np.arange(n) % 2 == 1  # campaigns' alternating roles
            df.loc[swap, ["allocator_a", "allocator_b"]] = df.loc[swap, ["allocator_b", "allocator_a"]].to_numpy()
            df.loc[swap, ["active_a_s", "active_b_s"]] = df.loc[swap, ["active_b_s", "active_a_s"]].to_numpy()
            rows.append(df)
    return pd.concat(rows, ignore_index=True)


def test_the_conditions_recover_ratio_shared_effect_and_bias():
    rows = layout.conditions(simulated_pairs(1), "glibc", order=list(TRUTH)).set_index(["allocator_b", "condition"])
    assert list(rows.loc["glibc-copy"].index) == list(TRUTH)
    for name, (bias, shared) in TRUTH.items():
        scudo, aa = rows.loc[("scudo", name)], rows.loc[("glibc-copy", name)]
        assert scudo["ci_low"] <= 5.0 <= scudo["ci_high"]
        assert aa["ci_low"] <= math.exp(bias) <= aa["ci_high"]
        assert aa["contains_1"] == (bias == 0.0)
        assert aa["corr"] == pytest.approx(shared, abs=0.1)
        # the log ratio's spread follows the share the pair does not have in common
        assert aa["spread"] == pytest.approx(0.04 * math.sqrt(2 * (1 - shared)), rel=0.2)
    assert rows.loc[("glibc-copy", "one offset per pair"), "halfwidth"] < rows.loc[("glibc-copy", "independent offsets"), "halfwidth"] / 1.5


@pytest.mark.slow  # 200 seeded studies: 3.5 s of CPU on a fast host
def test_the_conditions_cover_the_truth_about_95_percent_of_the_time():
    hits = []
    for seed in range(200):
        rows = layout.conditions(simulated_pairs(seed, n=60), "glibc")
        aa = rows[(rows["allocator_b"] == "glibc-copy") & (rows["condition"] == "independent offsets")].iloc[0]
        hits.append(bool(aa["contains_1"]))
    assert 0.91 <= np.mean(hits) <= 0.99


def test_bad_layout_pairs_get_a_one_line_error():
    with pytest.raises(HeapcostError, match="lack the column"):
        layout.conditions(pd.DataFrame({"condition": ["x"]}), "glibc")
    with pytest.raises(HeapcostError, match="no usable layout pair"):
        layout.conditions(simulated_pairs(1).assign(status="failed"), "glibc")


def test_too_few_pairs_leave_a_condition_without_an_interval():
    rows = layout.conditions(simulated_pairs(1, n=6), "glibc")
    assert rows["ratio"].isna().all() and (rows["n"] == 6).all()


def test_the_driver_starts_processes_without_address_space_randomization_only_when_asked(tmp_path):
    drv = lockstep.driver_path()
    workload = str(WORKLOADS["small-loop"].binary("glibc"))
    seen = {}
    for flag in ((), ("--no-aslr", "1")):
        out = tmp_path / f"personality{len(flag)}"
        done = subprocess.run([drv, *flag, "--a-stdout", str(out), "--a-env", "PATH=/usr/bin:/bin", "--",
                               "/bin/cat", "/proc/self/personality", "--", workload, "0.001"],
                              capture_output=True, text=True, timeout=60)
        assert json.loads(done.stdout)["b"]["status"] == "exited"
        seen[bool(flag)] = int(out.read_text(), 16) & 0x0040000  # ADDR_NO_RANDOMIZE
    assert seen == {False: 0, True: 0x0040000}


def test_the_layout_table_says_which_conditions_keep_the_aa_ratio_at_one():
    rows = layout.conditions(simulated_pairs(1), "glibc", order=list(TRUTH))
    r = {"allocators": ["glibc", "scudo"], "copy": "glibc-copy", "workload": "small-loop", "scale": 0.03,
         "elapsed_s": 240.0, "pairs": 1200, "unusable": 0, "conditions": rows.to_dict("records")}
    text = "\n".join(bench.format_results({"layout": r}).splitlines())
    assert "Layout: scudo/glibc and the A/A pair glibc-copy/glibc" in text
    aa_lines = [line for line in text.splitlines() if line.startswith("| glibc-copy/glibc |")]
    assert len(aa_lines) == 3
    assert [line.rstrip(" |").rsplit("| ", 1)[1] for line in aa_lines] == ["yes", "yes", "no"]
    assert bench_layout.format_layout(None) == []


def test_the_layout_budget_must_be_positive(capsys):
    import argparse

    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    with pytest.raises(HeapcostError, match="layout-budget-min must be positive"):
        bench.run(parser.parse_args(["--only", "layout", "--layout-budget-min", "0"]))
