"""Whether the two processes of a lockstep pair share a layout effect that pairing could cancel.

Input: lockstep pairs measured under layout conditions that took turns in randomized blocks (the bench's
layout part, harness/bench/layout.py): a `condition` per pair (how the two processes' address spaces were
laid out), `allocator_a` and `allocator_b`, their active times and `status`. Rows whose allocator_b is the
baseline have their sides swapped first (contract/schema.py, oriented_pairs), so every ratio reads
other / baseline.

conditions(): per compared allocator and condition, the paired interval of the ratio (stats/paired.py),
the robust spread of the pairs' log ratios (what the interval's width follows), and the correlation of the
two processes' log active times (how much of each process's own noise the pair shares). A condition that
narrows the spread but moves an A/A ratio off 1 trades noise for bias.
"""
import math

import numpy as np
import pandas as pd

from analysis.contract.schema import oriented_pairs
from analysis.errors import HeapcostError
from analysis.stats import paired
from analysis.stats.estimators import mad_scale

REQUIRED = ("condition", "allocator_a", "allocator_b", "active_a_s", "active_b_s")
MIN_PAIRS = 10


def _clean(pairs: pd.DataFrame, baseline: str) -> pd.DataFrame:
    missing = [c for c in REQUIRED if c not in pairs.columns]
    if missing:
        raise HeapcostError(f"layout pairs lack the column(s) {', '.join(missing)}")
    df = pairs[pairs.get("status", pd.Series("ok", index=pairs.index)).fillna("ok") == "ok"].copy()
    for col in ("active_a_s", "active_b_s"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    df = df[(df["active_a_s"] > 0) & (df["active_b_s"] > 0)]
    df = oriented_pairs(df.reset_index(drop=True), baseline)
    return df[df["allocator_a"] == baseline]


def conditions(pairs: pd.DataFrame, baseline: str, order=None) -> pd.DataFrame:
    """One row per (allocator_b, condition), conditions in `order` (else sorted): n, ratio, ci_low, ci_high,
    halfwidth (of the log ratio's interval), spread (robust scale of the log ratios), corr (of the two
    processes' log active times), contains_1."""
    df = _clean(pairs, baseline)
    if df.empty:
        raise HeapcostError(f"no usable layout pair has {baseline} on one side")
    rank = {c: i for i, c in enumerate(order or ())}
    rows = []
    for (other, name), sub in sorted(df.groupby(["allocator_b", "condition"]),
                                     key=lambda kv: (kv[0][0], rank.get(kv[0][1], len(rank)), kv[0][1])):
        row = {"allocator_b": other, "condition": name, "n": len(sub)}
        if len(sub) < MIN_PAIRS:
            row.update(ratio=math.nan, ci_low=math.nan, ci_high=math.nan, halfwidth=math.nan,
                       spread=math.nan, corr=math.nan, contains_1=None)
        else:
            la, lb = np.log(sub["active_a_s"].to_numpy()), np.log(sub["active_b_s"].to_numpy())
            est, _ = paired.paired_difference(lb - la)
            lo, hi = est.interval()
            row.update(ratio=math.exp(est.estimate), ci_low=math.exp(lo), ci_high=math.exp(hi),
                       halfwidth=(hi - lo) / 2, spread=mad_scale(lb - la), corr=float(np.corrcoef(la, lb)[0, 1]),
                       contains_1=bool(lo <= 0 <= hi))
        rows.append(row)
    return pd.DataFrame(rows)
