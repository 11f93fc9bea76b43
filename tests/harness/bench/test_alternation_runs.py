"""Taking an alternation window's spread apart (bench/alternation_runs.py): on simulated windows with a known
per-run spread and a known shared part, then once on the real driver."""
import math
import random
import shutil

import pytest

from analysis.errors import HeapcostError
from analysis.harness.bench import alternation_runs as R


def simulated(windows: int, runs: int, run_sd: float, shared_sd: float, seed: int = 3) -> list[dict]:
    """A/A windows: each run's CPU time off by its own lognormal part; each window's side a off by a shared part."""
    rng = random.Random(seed)
    out = []
    for _ in range(windows):
        shared = rng.gauss(0, shared_sd)
        out.append({"a": [math.exp(shared + rng.gauss(0, run_sd)) * 0.04 for _ in range(runs)],
                    "b": [math.exp(rng.gauss(0, run_sd)) * 0.04 for _ in range(runs)]})
    return out


def test_runs_alone_explain_the_windows_when_nothing_is_shared():
    c = R.components(simulated(2000, 6, 0.05, 0.0))
    assert c["pair_sd"] == pytest.approx(0.05 * math.sqrt(2), rel=0.05)
    assert c["window_sd"] == pytest.approx(c["explained_sd"], rel=0.08)
    assert c["shared_sd"] < 0.012


def test_a_part_shared_by_a_window_is_found_beside_the_runs():
    c = R.components(simulated(2000, 6, 0.05, 0.03))
    assert c["shared_sd"] == pytest.approx(0.03, rel=0.15)
    assert c["window_sd"] > c["explained_sd"]


def test_windows_without_a_run_a_side_are_left_out_and_too_few_give_no_spread():
    c = R.components([{"a": [0.1], "b": []}, {"a": [0.1, 0.11], "b": [0.1]}])
    assert c["windows"] == 1 and c["pair_sd"] is None and c["shared_sd"] is None


def test_successive_runs_spread():
    assert R.successive_sd([1.0, 1.0, 1.0]) == 0.0
    assert R.successive_sd([1.0, 2.0, 1.0]) == pytest.approx(math.sqrt(2) * math.log(2))
    assert R.successive_sd([1.0]) is None


def test_an_unknown_program_is_a_one_line_error():
    with pytest.raises(HeapcostError, match="knows no program 'nope'"):
        R.runs_bench(program="nope")


def test_the_table_says_each_condition_and_the_runs_alone():
    result = {"program": "sort-text", "conditions": [{"condition": "as campaigns run it", **R.components(
        simulated(40, 6, 0.05, 0.0))}, {"condition": "stdout to /dev/null", **R.components([])}],
              "alone": {"runs": 60, "median_s": 0.035, "successive_sd": 0.13}}
    text = "\n".join(R.format_runs(result))
    assert "| as campaigns run it | 40 | 6.0 |" in text and "| stdout to /dev/null | 0 | - | - |" in text
    assert "60 runs one after another (median 35.0 ms of CPU)" in text and "13.00%" in text


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("sort") is None or shutil.which("setarch") is None, reason="needs sort, setarch")
def test_the_real_driver_records_every_run_under_each_condition():
    result = R.runs_bench(windows=3, window_s=0.2, alone_runs=3)
    assert [c["condition"] for c in result["conditions"]] == list(R.CONDITIONS)
    for c in result["conditions"]:
        # every window is taken and recorded; how many complete a run on both sides within 0.2 s is the host's
        # speed and load, not the driver's
        assert c["windows_taken"] == 3 and 0 <= c["windows"] <= 3
        assert c["pair_sd"] is None or (c["windows"] == 3 and c["runs_a_side"] >= 1)
    assert result["alone"]["runs"] == 3 and result["alone"]["median_s"] > 0
