"""results_store_sequence.csv: each host's newest mechanism run, its cells and the differences at the poison's size,
on canned runs (a published machine.json names the host)."""
import json
import shutil

import pandas as pd
import pytest

from analysis.contract.schema import STORE_SEQUENCE_COLUMNS
from analysis.publish.debates import pool, store_sequence
from conftest import published_machine


def add_run(runs_dir, run_id, machine, shift=0.0, status="complete"):
    d = runs_dir / run_id
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({"run_id": run_id, "kind": "mechanism", "status": status,
                                               "params": {"heap_kib": 2048}}))
    (d / "machine.json").write_text(json.dumps(machine))
    rows = []
    for block in range(11):
        for ws in ("hot", "heap"):
            for n, base in ((16, 4.0), (256, 6.0)):
                for seq, extra in (("memset-call", 0.0), ("rep-stosb", 15.0), ("none", -3.0)):
                    ns = base + extra + shift + (block % 3) * 0.1
                    rows.append({"run_id": run_id, "seq": len(rows), "block": block, "warmup": int(block == 0),
                                 "working_set": ws, "sequence": seq, "bytes": n, "repetitions": 1000,
                                 "elapsed_ns": round(ns * 1000), "ns": f"{ns:.3f}"})
    pd.DataFrame(rows, columns=STORE_SEQUENCE_COLUMNS).to_csv(d / "store_sequence.csv", index=False)


@pytest.fixture
def runs(tmp_path):
    pool._processors.cache_clear()
    pool._machines.cache_clear()
    one, other = published_machine(0), published_machine(1)
    add_run(tmp_path, "20270101T000000Z-mechanism-store-sequence", one, shift=100.0)  # older: replaced
    add_run(tmp_path, "20270102T000000Z-mechanism-store-sequence", one)
    add_run(tmp_path, "20270103T000000Z-mechanism-store-sequence", one, shift=50.0, status="running")  # unfinished
    add_run(tmp_path, "20270104T000000Z-mechanism-store-sequence", other, shift=1.0)
    yield tmp_path
    pool._processors.cache_clear()
    pool._machines.cache_clear()


def test_each_host_is_answered_by_its_newest_complete_run(runs):
    table = store_sequence.results(runs)
    assert table["processor"].nunique() == 2
    assert sorted(set(table["run_id"])) == ["20270102T000000Z-mechanism-store-sequence",
                                            "20270104T000000Z-mechanism-store-sequence"]
    first = table[table["run_id"] == "20270102T000000Z-mechanism-store-sequence"]
    assert set(first["runs_on_host"]) == {2}
    cell = first[(first["working_set"] == "hot") & (first["bytes"] == 256) & (first["sequence"] == "memset-call")
                 & (first["minus"] == "")].iloc[0]
    assert 6.0 <= cell["ns"] <= 6.2 and cell["n_blocks"] == 10 and cell["ci_low"] <= cell["ns"] <= cell["ci_high"]


def test_the_differences_at_the_poison_size_are_paired_by_block_and_listed_after_the_cells(runs):
    table = store_sequence.results(runs)
    diffs = table[table["minus"] != ""]
    # rep-stosq-gcc was not measured: only rep-stosb - memset-call, on both working sets of both hosts
    assert len(diffs) == 4 and set(diffs["sequence"]) == {"rep-stosb"} and set(diffs["bytes"]) == {256}
    assert diffs["ns"].tolist() == pytest.approx([15.0] * 4) and (diffs["display"] == "15.0 [15.0, 15.0]").all()
    first_host = table[table["processor"] == table["processor"].iloc[0]]
    assert (first_host["minus"] != "").tolist() == [False] * 12 + [True] * 2


def test_the_wide_table_has_a_column_per_sequence_measured():
    long = pd.DataFrame([
        {"processor": "P", "working_set": "hot", "bytes": 16, "sequence": s, "minus": "", "display": d}
        for s, d in (("rep-stosb", "14.0 [13.0, 15.0]"), ("none", "1.10 [1.00, 1.20]"))]
        + [{"processor": "P", "working_set": "hot", "bytes": 256, "sequence": "rep-stosb", "minus": "memset-call",
            "display": "15.0 [14.0, 16.0]"}])
    wide = store_sequence.wide(long)
    assert list(wide.columns) == ["processor", "working_set", "bytes", "none", "rep-stosb"]
    assert wide.to_dict("records") == [{"processor": "P", "working_set": "hot", "bytes": 16,
                                        "none": "1.10 [1.00, 1.20]", "rep-stosb": "14.0 [13.0, 15.0]"}]


def test_no_mechanism_run_gives_empty_products_with_their_columns(tmp_path):
    table = store_sequence.results(tmp_path)
    assert list(table.columns) == store_sequence.COLUMNS and table.empty
    assert store_sequence.wide(table).empty and store_sequence.numbers(table)["hosts"] == []


def test_the_numbers_name_the_hosts_the_runs_and_the_heap(runs):
    numbers = store_sequence.numbers(store_sequence.results(runs))
    assert len(numbers["hosts"]) == 2 and len(numbers["runs"]) == 2 and numbers["heap_kib"] == [2048]
    assert numbers["poison_bytes"] == 256 and numbers["blocks"] == [10] and numbers["differences"] == 4


@pytest.mark.parametrize("ns, low, high, shown", [(92.06, 72.71, 111.4, "92.1 [72.7, 111.4]"),
                                                  (4.661, 1.5, 7.82, "4.66 [1.50, 7.82]"),
                                                  (122.85, 42.3, 203.4, "123 [42, 203]"),
                                                  (-0.5, -1.0, 0.1, "-0.500 [-1.000, 0.100]"),
                                                  (3.0, float("nan"), float("nan"), "3.00"),
                                                  (float("nan"), 1.0, 2.0, "n/a")])
def test_a_time_prints_at_three_significant_digits(ns, low, high, shown):
    assert store_sequence.ns_display(ns, low, high) == shown
