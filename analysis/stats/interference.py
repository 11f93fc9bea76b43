"""How much other work moves a lockstep pair's ratio, and the interference thresholds that follow from it.

Input: lockstep pairs measured under conditions that took turns in randomized blocks (the bench's
interference part, harness/bench/interference.py): a `condition` per pair, its `placement` ("" for the
quiet condition, "other" when the load ran on the other CPU, "same" on the pairs' CPU), the load's `duty`,
the two active times, the pair's `wall_s` and the CPU time other processes used meanwhile as campaigns record
it per trial and pair: on the whole machine (`other_cpu_s`) and, of it, on the pair's own CPU
(`cpu_other_s`).

- effects(): per condition, the pairs' log ratio against the quiet pairs' (Yuen's difference of 20%
  trimmed means, 95% interval), how much wider the pairs spread (robust scale over the quiet one), and the
  shares of the pairs' wall time other processes were recorded to use on the pair's CPU and on the other
  CPUs (total over total: a 50 ms pair sees /proc/stat's 10 ms ticks, so one pair's share is coarse).
- thresholds(): per placement, a line through the origin of the shift against that placement's recorded
  share (the pair's CPU for "same", the other CPUs for "other") beyond the quiet pairs' share, weighted by
  the shifts' precision; the share at which the line's 95% upper bound on the size of the shift reaches
  `tolerance` is the data's threshold for that placement. Added to the quiet share (the harness's own
  work, which every record includes) it is the share above which a record is flagged (`flag_fraction`);
  the floor below which one record is tick noise is the quiet pairs' 99th percentile of it (`min_s`).
"""
import math

import numpy as np
import pandas as pd
from scipy import stats as sps

from analysis.errors import HeapcostError
from analysis.stats.estimators import CONFIDENCE, mad_scale, yuen_difference

QUIET = "quiet"
MIN_PAIRS = 10
REQUIRED = ("condition", "placement", "duty", "active_a_s", "active_b_s", "wall_s", "other_cpu_s", "cpu_other_s")
RECORD = {"same": "same_s", "other": "elsewhere_s"}  # a placement's own part of the record


def _clean(pairs: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in REQUIRED if c not in pairs.columns]
    if missing:
        raise HeapcostError(f"interference pairs lack the column(s) {', '.join(missing)}")
    df = pairs[pairs.get("status", pd.Series("ok", index=pairs.index)).fillna("ok") == "ok"].copy()
    for col in ("active_a_s", "active_b_s", "wall_s", "other_cpu_s", "cpu_other_s", "duty"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    df = df.dropna(subset=["active_a_s", "active_b_s", "wall_s", "other_cpu_s", "cpu_other_s"])
    df["same_s"] = df["cpu_other_s"]
    df["elsewhere_s"] = (df["other_cpu_s"] - df["cpu_other_s"]).clip(lower=0)
    df = df[(df["active_a_s"] > 0) & (df["active_b_s"] > 0) & (df["wall_s"] > 0)]
    df["placement"] = df["placement"].fillna("").astype(str)
    df["y"] = np.log(df["active_b_s"] / df["active_a_s"])
    return df


def effects(pairs: pd.DataFrame) -> pd.DataFrame:
    """One row per condition (the quiet one first): n, placement, duty, same_share and other_share (others'
    CPU time on the pair's CPU and on the other CPUs, over the pairs' wall time), shift (ratio under the
    condition over the quiet ratio, minus 1), shift_low, shift_high, spread (robust scale over the quiet
    one)."""
    df = _clean(pairs)
    quiet = df[df["condition"] == QUIET]
    if len(quiet) < MIN_PAIRS:
        raise HeapcostError(f"the quiet condition has {len(quiet)} usable pairs; at least {MIN_PAIRS} are needed")
    quiet_scale = mad_scale(quiet["y"])
    rows = []
    for name, sub in sorted(df.groupby("condition"), key=lambda kv: (kv[0] != QUIET, kv[1]["placement"].iloc[0],
                                                                      float(kv[1]["duty"].iloc[0] or 0))):
        row = {"condition": name, "placement": sub["placement"].iloc[0], "duty": float(sub["duty"].iloc[0] or 0),
               "n": len(sub), "same_share": float(sub["same_s"].sum() / sub["wall_s"].sum()),
               "other_share": float(sub["elsewhere_s"].sum() / sub["wall_s"].sum())}
        if len(sub) < MIN_PAIRS:
            row.update(shift=math.nan, shift_low=math.nan, shift_high=math.nan, spread=math.nan)
        else:
            diff = yuen_difference(sub["y"], quiet["y"])
            lo, hi = diff.interval()
            row.update(shift=math.expm1(diff.estimate), shift_low=math.expm1(lo), shift_high=math.expm1(hi),
                       log_shift=diff.estimate, log_se=diff.se,
                       spread=mad_scale(sub["y"]) / quiet_scale if quiet_scale > 0 else math.nan)
        rows.append(row)
    return pd.DataFrame(rows)


def thresholds(effect_rows: pd.DataFrame, pairs: pd.DataFrame, tolerance: float) -> dict:
    """Per placement ("same", "other"): the fitted log shift per unit of its recorded share, its 95% bound,
    `fraction` (the share beyond the quiet one that keeps the shift within `tolerance`; 1.0 when even a
    fully busy record would), `flag_fraction` (the quiet share plus it) and `min_s` (the quiet pairs' 99th
    percentile of that record)."""
    if not tolerance > 0:
        raise HeapcostError(f"the tolerance must be positive, not {tolerance!r}")
    df = _clean(pairs)
    quiet = df[df["condition"] == QUIET]
    if len(quiet) < MIN_PAIRS:
        raise HeapcostError(f"the quiet condition has {len(quiet)} usable pairs; at least {MIN_PAIRS} are needed")
    quiet_row = effect_rows[effect_rows["condition"] == QUIET].iloc[0]
    z = sps.norm.ppf(0.5 + CONFIDENCE / 2)
    out = {}
    for placement, sub in effect_rows[effect_rows["condition"] != QUIET].groupby("placement"):
        if placement not in RECORD:
            continue
        share = "same_share" if placement == "same" else "other_share"
        sub = sub.dropna(subset=["log_shift"])
        x = (sub[share] - quiet_row[share]).to_numpy(dtype=float)
        keep = x > 0
        if not keep.any():
            continue
        x, y, se = x[keep], sub["log_shift"].to_numpy(dtype=float)[keep], sub["log_se"].to_numpy(dtype=float)[keep]
        w = 1.0 / np.maximum(se, 1e-12) ** 2
        slope = float(np.sum(w * x * y) / np.sum(w * x * x))
        slope_se = float(1.0 / math.sqrt(np.sum(w * x * x)))
        bound = abs(slope) + z * slope_se
        fraction = min(1.0, math.log1p(tolerance) / bound) if bound > 0 else 1.0
        out[placement] = {"slope": slope, "slope_se": slope_se, "slope_bound": bound, "fraction": fraction,
                          "quiet_share": float(quiet_row[share]),
                          "flag_fraction": min(1.0, float(quiet_row[share]) + fraction),
                          "min_s": float(np.quantile(quiet[RECORD[placement]], 0.99)), "conditions": int(keep.sum())}
    if not out:
        raise HeapcostError("no loaded condition recorded more other-process CPU time than the quiet one")
    return {"tolerance": tolerance, "placements": out}
