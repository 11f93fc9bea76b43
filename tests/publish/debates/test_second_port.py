"""A debated pair timed again as its second port: the run's direct pairs read with/without, beside the first
port's answer on the run's kind, and whether the one-build next-machine interval holds it; simulated runs with
a known ratio."""
import pandas as pd

from analysis.publish.debates import pool, second_port
from analysis.stats.simulate import simulate_pairs

PAIR = "omalloc-1.128 / omalloc-1.128-getrbyte"
WITH, WITHOUT = "omalloc-1.128-port2", "omalloc-1.128-getrbyte-port2"


def _run(runs, run_id, ratio, seed, layouts=None):
    """A run of direct pairs of the second ports (and of their layout builds: {N: ratio})."""
    folder = runs / run_id
    folder.mkdir(parents=True)
    tables = [simulate_pairs(ratio, 60, seed, workload="pow2-churn", baseline=WITHOUT, other=WITH)]
    for n, r in (layouts or {}).items():
        tables.append(simulate_pairs(r, 60, seed + n, workload="pow2-churn", baseline=f"{WITHOUT}_l{n}",
                                     other=f"{WITH}_l{n}"))
    pd.concat(tables, ignore_index=True).assign(run_id=run_id).to_csv(folder / "pairs.csv", index=False)


def _answer(low, high, processor="K1"):
    return {"seed": "003", "configuration": PAIR, "workload": "pow2-churn", "processor": processor, "ratio": 1.0,
            "mean90_low": 0.99, "mean90_high": 1.01, "next_one_build_low": low, "next_one_build_high": high}


def test_the_second_port_is_read_with_over_without_and_checked_against_the_one_build_interval(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    _run(runs, "r-near", 1.03, 1)
    _run(runs, "r-far", 1.30, 2)
    monkeypatch.setattr(pool, "_processors", lambda _: {"r-near": "K1", "r-far": "K1"})
    monkeypatch.setattr(pool, "_machines", lambda _: {"r-near": "M-1", "r-far": "M-2"})
    cells = pd.DataFrame({"allocator": [WITH, WITHOUT, WITH, "glibc"], "workload": ["pow2-churn"] * 4,
                          "run_id": ["r-near", "r-near", "r-far", "r-far"]})
    other = {**_answer(0.5, 2.0), "configuration": "mozjemalloc-poison / mozjemalloc"}  # no second port: no row
    got = second_port.check(pd.DataFrame([_answer(0.95, 1.10), other]), cells, runs).set_index("run_id")
    assert list(got.index) == ["r-far", "r-near"] and set(got["port_configuration"]) == {f"{WITH} / {WITHOUT}"}
    near, far = got.loc["r-near"], got.loc["r-far"]
    assert near["ci_low"] < 1.03 < near["ci_high"] and far["ci_low"] < 1.30 < far["ci_high"]
    assert near["inside"] and not far["inside"] and near["machine"] == "M-1"
    assert (near["first_next_one_build_low"], near["first_next_one_build_high"]) == (0.95, 1.10)


def test_a_run_on_a_kind_the_first_port_was_not_measured_on_is_listed_unchecked(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    _run(runs, "r-new", 1.0, 3)
    monkeypatch.setattr(pool, "_processors", lambda _: {"r-new": "K2"})
    monkeypatch.setattr(pool, "_machines", lambda _: {"r-new": "M-3"})
    cells = pd.DataFrame({"allocator": [WITH], "workload": ["pow2-churn"], "run_id": ["r-new"]})
    got = second_port.check(pd.DataFrame([_answer(0.95, 1.10)]), cells, runs)
    assert len(got) == 1 and got.iloc[0]["inside"] is None and got.iloc[0]["processor"] == "K2"
    assert second_port.check(pd.DataFrame([_answer(0.95, 1.10)]), None, runs).empty


def test_each_layout_build_is_a_row_with_callgrinds_instruction_ratio_beside_it(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    _run(runs, "r-lay", 1.14, 4, layouts={2: 0.97})
    monkeypatch.setattr(pool, "_processors", lambda _: {"r-lay": "K1"})
    monkeypatch.setattr(pool, "_machines", lambda _: {"r-lay": "M-1"})
    cells = pd.DataFrame({"allocator": [WITH, WITHOUT, f"{WITH}_l2", f"{WITHOUT}_l2"], "workload": ["pow2-churn"] * 4,
                          "run_id": ["r-lay"] * 4})
    per_free = pd.DataFrame({"workload": ["pow2-churn"] * 2, "allocator": [WITH, WITHOUT],
                             "instructions_per_free": [722.0, 730.0]})
    got = second_port.check(pd.DataFrame([_answer(0.95, 1.10)]), cells, runs, per_free).set_index("layout")
    assert list(got.index) == [1, 2]
    assert got.loc[1, "ci_low"] < 1.14 < got.loc[1, "ci_high"] and got.loc[2, "ci_low"] < 0.97 < got.loc[2, "ci_high"]
    assert not got.loc[1, "inside"] and got.loc[2, "inside"]
    # fewer instructions, yet slower: the counts are the first layout's (the one callgrind counted)
    assert abs(got.loc[1, "instructions_ratio"] - 722 / 730) < 1e-12 and pd.isna(got.loc[2, "instructions_ratio"])
    said = second_port.summary(got.reset_index())
    assert said == {"checked": 2, "inside": 1, "layouts_apart": True, "fewer_instructions_slower": True}
    assert second_port.summary(got.reset_index().iloc[1:])["layouts_apart"] is False
