"""The store-sequence microbenchmark's statistics: each cell's time per sequence, and the difference between two
sequences, over the run's blocks.

A cell is (working set, bytes, sequence); each measured block gives one value of it, ns per sequence (many
repetitions back to back). The location over blocks is the 20% trimmed mean with Yuen's standard error and a t
interval on h - 1 degrees of freedom (estimators.trimmed_location): a block measured while the machine was slow
or interrupted is trimmed rather than averaged in. The difference of two sequences at one size is taken block by
block (the sequences of a group run back to back in each block, so they share its speed) and then located the
same way. Works on a table of store_sequence.csv's columns (contract/schema.py STORE_SEQUENCE)."""
import math

import pandas as pd
from scipy import stats as sps

from analysis.contract.schema import warmup_mask
from analysis.stats.estimators import CONFIDENCE, TRIM, trimmed_location

# the differences the paper reads: gcc's inline string stores against clang's call to memset, at the size the
# shipped poisoning stores (mozjemalloc's first 256 bytes of a freed block)
DIFFERENCES = (("rep-stosb", "memset-call"), ("rep-stosq-gcc", "memset-call"))
POISON_BYTES = 256
MIN_BLOCKS = 5  # fewer measured blocks give no interval (the trimmed mean needs at least two values kept)
CELL = ["working_set", "bytes", "sequence"]
SUMMARY_COLUMNS = ["working_set", "bytes", "sequence", "n_blocks", "ns", "se", "df", "ci_low", "ci_high"]
DIFFERENCE_COLUMNS = ["working_set", "bytes", "sequence", "minus", "n_blocks", "ns", "se", "df", "ci_low",
                      "ci_high"]


def measured(rows: pd.DataFrame) -> pd.DataFrame:
    """The measured blocks' rows (not the warm-up), with ns per sequence as a number."""
    df = rows[~warmup_mask(rows["warmup"])] if "warmup" in rows.columns else rows
    ns = pd.to_numeric(df["elapsed_ns"], errors="coerce") / pd.to_numeric(df["repetitions"], errors="coerce")
    return df.assign(ns=ns, bytes=pd.to_numeric(df["bytes"], errors="coerce").astype("Int64"))


def location(values, trim: float = TRIM, confidence: float = CONFIDENCE) -> dict:
    """{n_blocks, ns, se, df, ci_low, ci_high} of values over blocks: the trimmed mean with its t interval; the
    interval is left empty (NaN) below MIN_BLOCKS values."""
    values = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(values)
    nan = float("nan")
    if n < MIN_BLOCKS:
        mean = sum(values) / n if n else nan
        return {"n_blocks": n, "ns": mean, "se": nan, "df": nan, "ci_low": nan, "ci_high": nan}
    loc = trimmed_location(values, trim)
    se = math.sqrt(loc.var)
    df = loc.h - 1
    q = float(sps.t.ppf(0.5 + confidence / 2, df))
    return {"n_blocks": n, "ns": loc.estimate, "se": se, "df": df, "ci_low": loc.estimate - q * se,
            "ci_high": loc.estimate + q * se}


def cells(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per cell (working set, bytes, sequence): ns per sequence over the measured blocks."""
    df = measured(rows)
    out = [{"working_set": ws, "bytes": int(n), "sequence": seq, **location(g["ns"])}
           for (ws, n, seq), g in df.groupby(CELL, sort=True)]
    return pd.DataFrame(out, columns=SUMMARY_COLUMNS)


def difference(rows: pd.DataFrame, sequence: str, minus: str, bytes_: int, working_set: str) -> dict:
    """sequence's ns minus `minus`'s ns at one size and working set, paired by block: a row of DIFFERENCE_COLUMNS
    (n_blocks 0 when either was not measured there)."""
    df = measured(rows)
    at = df[(df["working_set"] == working_set) & (df["bytes"] == bytes_)]
    a = at[at["sequence"] == sequence].groupby("block")["ns"].mean()
    b = at[at["sequence"] == minus].groupby("block")["ns"].mean()
    both = a.index.intersection(b.index)
    return {"working_set": working_set, "bytes": int(bytes_), "sequence": sequence, "minus": minus,
            **location((a[both] - b[both]).tolist())}


def differences(rows: pd.DataFrame, pairs, bytes_: int) -> pd.DataFrame:
    """difference() of every (sequence, minus) pair at `bytes_` on every working set measured there."""
    df = measured(rows)
    sets = sorted(set(df.loc[df["bytes"] == bytes_, "working_set"]))
    out = [difference(rows, a, b, bytes_, ws) for ws in sets for a, b in pairs]
    return pd.DataFrame([r for r in out if r["n_blocks"] > 0], columns=DIFFERENCE_COLUMNS)
