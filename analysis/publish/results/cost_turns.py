"""The cost check in turns of other lengths: the same cells measured in turns of 1 ms (the check's own) and in
longer ones, side by side (results_cost_turns.csv).

The check measures a program in turns of about 1 ms against the baseline on one CPU (harness/timing/
alternation.py), so each side finds the caches and the TLB filled by the other after every turn. A program whose
speed rests on where its blocks lie pays that again and again (docs/design.md, "The check's turns amplify
placement"), while a user runs it alone. `cost-check measure --turn-ms N` measures a registration again in turns
of N ms; `check` keeps reading only the runs in its own turns, and `table` sets the others beside them: per cell
the ratio in each turn length, their log distance, and each one's error against the predictions registered
before either was measured."""
import math

import numpy as np
import pandas as pd

from analysis.contract import dataset
from analysis.publish.results import cost_check
from analysis.publish.results.cost_check import SUPERSEDED

COLUMNS = ["program", "allocator", "processor", "programs_set", "slice_us", "measured", "measured_low",
           "measured_high", "runs", "check_measured", "check_low", "check_high", "log_shift", "predicted",
           "log_error", "check_log_error", "per_call_log_error", "check_per_call_log_error", "order_share",
           "shuffle_share", "current_predicted"]
# predicted: the registered prediction (made before either measurement); current_predicted: the model's as it is now
# (the check's column of that name); *_log_error: log measured - log predicted
# in the longer turns and in the check's own; *per_call_log_error: the same against the per-call model alone as
# registered beside it (without the terms fitted on the check's own turns)
# The cells only the longer turns measured whose mechanism was then measured by hand, alone (docs/design.md, "where
# lowdown's time goes under scudo"): the paper gives the mechanism for these and calls the others unexplained.
MEASURED_BY_HAND = frozenset({("lowdown-md", "scudo")})


def table(ds: dataset.Dataset, pairs, superseded=SUPERSEDED) -> pd.DataFrame:
    """A row per registered cell measured in turns other than the check's (COLUMNS), for each such length: its
    measured ratio (cost_check.measured_in_turns), the check's own measured ratio and the registered predictions
    (from `pairs`: [(registration folder, its check table)]), the log distance between the two measurements, and
    the log error of each against the predictions. Runs in `superseded` are left out."""
    rows = []
    for folder, checked in pairs:
        reg = cost_check.load(folder)
        processor = reg["registration"]["processor"]
        mine = checked.set_index(["program", "allocator"])
        for length, got in sorted(cost_check.measured_in_turns(ds, folder, superseded).items()):
            for (program, allocator), row in mine.iterrows():
                if (program, allocator) not in got:
                    continue
                m, lo, hi, n = got[(program, allocator)]
                check_m, pred = _num(row.get("measured")), _num(row.get("predicted"))
                alone = _num(row.get("registered_per_call"))
                rows.append({"program": program, "allocator": allocator, "processor": processor,
                             "programs_set": cost_check.programs_of(reg), "slice_us": length, "measured": m,
                             "measured_low": lo, "measured_high": hi, "runs": n,
                             "check_measured": check_m, "check_low": _num(row.get("measured_low")),
                             "check_high": _num(row.get("measured_high")), "log_shift": _log(m, check_m),
                             "predicted": pred, "log_error": _log(m, pred), "check_log_error": _log(check_m, pred),
                             "per_call_log_error": _log(m, alone), "check_per_call_log_error": _log(check_m, alone),
                             "order_share": _num(row.get("order_share")),
                             "shuffle_share": _num(row.get("shuffle_share")),
                             "current_predicted": _num(row.get("current_predicted"))})
    return pd.DataFrame(rows, columns=COLUMNS)


def _log(a, b):
    return math.log(a / b) if a and b else None


def _num(v):
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def numbers(t: pd.DataFrame) -> dict:
    """What the paper says of the check in longer turns: per turn length and set of programs, the cells, how far
    the ratios moved from the check's (median and 90th percentile of |log shift|, in percent; the cell that moved
    most; the cells only the longer turns measured), in how many cells the two intervals lie apart, and the median and 90th-percentile |log error| of the
    registered predictions (and of the per-call model alone) against each measurement."""
    def pct(e, q):
        e = np.abs(np.asarray([x for x in e if x is not None and not pd.isna(x)], dtype=float))
        return round(100 * math.expm1(float(np.quantile(e, q))), 1) if len(e) else None

    from analysis.harness.workloads.cost_programs import SETS

    place = {name: i for i, name in enumerate(SETS)}
    out = []
    groups = sorted(t.groupby(["slice_us", "programs_set"]), key=lambda kv: (kv[0][0], place.get(kv[0][1], len(place))))
    for (length, programs_set), every in groups:
        g = every[every["check_measured"].notna()]
        only = every[every["check_measured"].isna()]  # the check's own turns gave these no estimate
        if g.empty:
            continue
        apart = ((g["measured_low"] > g["check_high"]) | (g["measured_high"] < g["check_low"])).sum()
        most = g.loc[g["log_shift"].astype(float).abs().idxmax()]
        ms = float(length) / 1000
        out.append({"turn_ms": int(ms) if ms.is_integer() else round(ms, 3), "set": str(programs_set),
                    "cells": int(len(g)), "programs": int(g["program"].nunique()),
                    "processors": sorted(set(g["processor"])),
                    "shift_median": pct(g["log_shift"], 0.5), "shift_p90": pct(g["log_shift"], 0.9),
                    "apart": int(apart),
                    "most": {"program": most["program"], "allocator": most["allocator"],
                             "check": round(float(most["check_measured"]), 2),
                             "longer": round(float(most["measured"]), 2)},
                    "only_longer": [{"program": r.program, "allocator": r.allocator, "longer": round(r.measured, 2),
                                     "predicted": round(r.predicted, 2) if r.predicted else None,
                                     "current": round(r.current_predicted, 2) if _num(r.current_predicted) else None,
                                     "by_hand": (r.program, r.allocator) in MEASURED_BY_HAND}
                                    for r in only.itertuples()],
                    "error_median": pct(g["log_error"], 0.5), "error_p90": pct(g["log_error"], 0.9),
                    "check_error_median": pct(g["check_log_error"], 0.5),
                    "check_error_p90": pct(g["check_log_error"], 0.9),
                    "per_call_error_median": pct(g["per_call_log_error"], 0.5),
                    "per_call_error_p90": pct(g["per_call_log_error"], 0.9),
                    "check_per_call_error_median": pct(g["check_per_call_log_error"], 0.5),
                    "check_per_call_error_p90": pct(g["check_per_call_log_error"], 0.9)})
    return {"lengths": out}
