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
from analysis.publish.results.cost_check import CHECK_SLICE_US, at_slice, slice_of

COLUMNS = ["program", "allocator", "processor", "programs_set", "slice_us", "measured", "measured_low",
           "measured_high", "runs", "check_measured", "check_low", "check_high", "log_shift", "predicted",
           "log_error", "check_log_error", "per_call_log_error", "check_per_call_log_error", "order_share",
           "shuffle_share"]
# predicted: the registered prediction (made before either measurement); *_log_error: log measured - log predicted
# in the longer turns and in the check's own; *per_call_log_error: the same against the per-call model alone as
# registered beside it (without the terms fitted on the check's own turns)
# Runs in longer turns that a later run of the same set, measured alone, replaces: they stay in the dataset, as
# recorded, and enter no table. The seventh set's first run in 100 ms turns had its last trials (bison's, which no
# table reads) measured while the analysis ran beside them (docs/design.md, "The check in longer turns, measured").
SUPERSEDED = frozenset({"20261207T165805Z-time-quick"})


def table(ds: dataset.Dataset, pairs, superseded=SUPERSEDED) -> pd.DataFrame:
    """A row per registered cell measured in turns other than the check's (COLUMNS), for each such length: its
    measured ratio (the runs in those turns pooled as the check pools its own), the check's own measured ratio and
    the registered predictions (from `pairs`: [(registration folder, its check table)]), the log distance between
    the two measurements, and the log error of each against the predictions. Runs in `superseded` are left out."""
    from analysis.publish.results import per_call

    rows = []
    for folder, checked in pairs:
        reg = cost_check.load(folder)
        baseline = reg["registration"].get("baseline", cost_check.BASELINE)
        processor = reg["registration"]["processor"]
        matching = cost_check.matching_runs(ds, reg)
        lengths = sorted({slice_of(ds, r) for runs in matching.values() for r in runs} - {CHECK_SLICE_US})
        if not lengths:
            continue
        mine = checked.set_index(["program", "allocator"])
        for length in lengths:
            runs = {program: kept for program, found in at_slice(ds, matching, length).items()
                    if (kept := set(found) - set(superseded))}
            cells = per_call.measured_cells(ds, baseline, set(runs))
            if cells.empty:
                continue
            cells = cells[[r in runs.get(w, ()) for r, w in zip(cells["run_id"], cells["workload"])]]
            for (program, allocator), row in mine.iterrows():
                if program not in runs:
                    continue
                got = cost_check.measured_ratio(cells, ds, program, allocator, baseline, processor)
                if got is None:
                    continue
                m, lo, hi, n = got
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
                             "shuffle_share": _num(row.get("shuffle_share"))})
    return pd.DataFrame(rows, columns=COLUMNS)


def longest(ds: dataset.Dataset, pairs, superseded=SUPERSEDED) -> list:
    """`pairs` ([(registration folder, its check table)]) with each table's model_measured and model_turn_ms taken
    from the longest turns each cell was measured in (`table`): the ratio the model's terms are fitted on and its
    own error measured against, since a user runs a program alone and longer turns come near that (docs/design.md,
    "The model is held to the longest turns"). A cell measured only in the check's turns keeps the check's ratio;
    the check's own columns never change."""
    out = []
    for folder, checked in pairs:
        longer = table(ds, [(folder, checked)], superseded)
        checked = checked.copy()
        if len(longer):
            top = longer.sort_values("slice_us").groupby(["program", "allocator"]).tail(1)
            got = {(r.program, r.allocator): (r.measured, r.slice_us / 1000) for r in top.itertuples()}
            for i, r in checked.iterrows():
                if (r["program"], r["allocator"]) in got:
                    checked.loc[i, ["model_measured", "model_turn_ms"]] = got[(r["program"], r["allocator"])]
        out.append((folder, checked))
    return out


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
                                     "predicted": round(r.predicted, 2) if r.predicted else None}
                                    for r in only.itertuples()],
                    "error_median": pct(g["log_error"], 0.5), "error_p90": pct(g["log_error"], 0.9),
                    "check_error_median": pct(g["check_log_error"], 0.5),
                    "check_error_p90": pct(g["check_log_error"], 0.9),
                    "per_call_error_median": pct(g["per_call_log_error"], 0.5),
                    "per_call_error_p90": pct(g["per_call_log_error"], 0.9),
                    "check_per_call_error_median": pct(g["check_per_call_log_error"], 0.5),
                    "check_per_call_error_p90": pct(g["check_per_call_log_error"], 0.9)})
    return {"lengths": out}
