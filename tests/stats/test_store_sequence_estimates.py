"""The store-sequence microbenchmark's statistics on canned rows: each cell's trimmed mean over blocks with its t
interval, the warm-up block left out, and the difference of two sequences taken block by block."""
import math

import pandas as pd
import pytest
from scipy import stats as sps

from analysis.stats import store_sequence as S


def rows(values: dict, warmup_value=1000.0) -> pd.DataFrame:
    """A table of store_sequence.csv's columns: {(working set, bytes, sequence): [ns of block 1, 2, ...]}, each with
    a warm-up block 0 of `warmup_value` ns and 1000 repetitions a measurement."""
    out = []
    for (ws, n, seq), per_block in values.items():
        for block, ns in enumerate([warmup_value, *per_block]):
            out.append({"run_id": "R", "block": block, "warmup": int(block == 0), "working_set": ws, "bytes": n,
                        "sequence": seq, "repetitions": 1000, "elapsed_ns": round(ns * 1000)})
    return pd.DataFrame(out)


def test_a_cell_is_the_trimmed_mean_over_the_measured_blocks_with_its_t_interval():
    values = [10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 500.0]  # one block interrupted
    table = S.cells(rows({("heap", 256, "memset-call"): values}))
    (row,) = table.to_dict("records")
    # 20% of 10 trimmed from each end: the mean of 12..17; the warm-up's 1000 ns never enters
    assert row["n_blocks"] == 10 and row["ns"] == pytest.approx(14.5)
    winsorized = [12.0, 12.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 17.0, 17.0]
    se = math.sqrt(9 * pd.Series(winsorized).var() / (6 * 5))
    q = sps.t.ppf(0.975, 5)
    assert row["se"] == pytest.approx(se) and row["df"] == 5
    assert (row["ci_low"], row["ci_high"]) == (pytest.approx(14.5 - q * se), pytest.approx(14.5 + q * se))


def test_the_difference_is_taken_block_by_block():
    """The two sequences share each block's speed: 20 ns apart in every block, the machine's drift (the blocks
    rising from 10 to 100 ns) leaves the difference exact."""
    drift = [10.0 * (k + 1) for k in range(10)]
    table = rows({("hot", 256, "rep-stosb"): [d + 20 for d in drift], ("hot", 256, "memset-call"): drift,
                  ("hot", 64, "rep-stosb"): drift})
    row = S.difference(table, "rep-stosb", "memset-call", 256, "hot")
    assert row["ns"] == pytest.approx(20.0) and row["ci_low"] == pytest.approx(20.0) == row["ci_high"]
    assert row["n_blocks"] == 10 and row["minus"] == "memset-call"
    both = S.differences(table, S.DIFFERENCES, 256)
    # rep-stosq-gcc was not measured: no row for it
    assert both[["sequence", "minus", "working_set"]].values.tolist() == [["rep-stosb", "memset-call", "hot"]]


def test_too_few_blocks_give_a_value_and_no_interval():
    row = S.cells(rows({("hot", 16, "none"): [1.0, 2.0, 3.0]})).to_dict("records")[0]
    assert row["n_blocks"] == 3 and row["ns"] == pytest.approx(2.0)
    assert all(math.isnan(row[k]) for k in ("se", "ci_low", "ci_high"))
