"""The cost model compared across its checks: each registration's cells as the terms' data
(stats/cost_terms.py: the premium per call, the held term per KiB of small blocks held) and the terms added to
the model as it is now, their choice and nested leave-one-program-out errors per configuration, and the model checked several ways per processor kind (as
registered, as it is now, on each set of programs). Reads check tables (publish/results/cost_check.py), never
the runs.
"""
import math

import numpy as np
import pandas as pd


# ---- the premium, over every registration's cells ----

def term_cells(tables) -> pd.DataFrame:
    """The measured cells of the check tables as stats/cost_terms.CELL_COLUMNS: the measured ratio the model is held
    to (model_measured: in the longest turns measured) beside the per-call model's prediction, the program's calls, its CPU time under the baseline and the KiB of small blocks
    it holds at its peak."""
    from analysis.stats.cost_terms import CELL_COLUMNS

    rows = [{"program": r.program, "allocator": r.allocator, "processor": r.processor, "measured": model_measured(r),
             "predicted": float(r.per_call_predicted), "calls": float(r.calls), "base_s": float(r.base_cpu_s),
             "held_kib": 0.0 if pd.isna(getattr(r, "held_kib", None)) else float(r.held_kib),
             "order_share": _share(getattr(r, "order_share", None)),
             "shuffle_share": _share(getattr(r, "shuffle_share", None))}
            for t in tables for r in t.itertuples()
            if not pd.isna(r.measured) and not pd.isna(r.per_call_predicted) and not pd.isna(r.calls)
            and not pd.isna(r.base_cpu_s)]
    return pd.DataFrame(rows, columns=CELL_COLUMNS)


def model_measured(r) -> float:
    """The ratio a row of a check table holds the model to (its model_measured: the cell in the longest turns it
    was measured in, cost_check.longest), or the check's own where the row has none."""
    m = r.get("model_measured") if isinstance(r, (dict, pd.Series)) else getattr(r, "model_measured", None)
    if m is None or pd.isna(m):
        m = r["measured"] if isinstance(r, (dict, pd.Series)) else r.measured
    return float(m)


def _share(x) -> float:
    return math.nan if x is None or pd.isna(x) else float(x)


def with_premiums(table: pd.DataFrame, premiums: dict) -> pd.DataFrame:
    """A check table's current_* columns with each configuration's terms (stats/cost_terms.Premium) added to the
    per-call model's prediction, their standard error joined to the interval's half-widths; term_added says what
    they added; current_log_error is against the ratio the model is held to (model_measured)."""
    table = table.copy()
    for i, r in table.iterrows():
        term = premiums.get(r["allocator"])
        if term is None or pd.isna(r["per_call_predicted"]) or pd.isna(r["calls"]) or pd.isna(r["base_cpu_s"]):
            continue
        calls, base = float(r["calls"]), float(r["base_cpu_s"])
        held = 0.0 if pd.isna(r.get("held_kib")) else float(r["held_kib"])
        order, shuffle = _share(r.get("order_share")), _share(r.get("shuffle_share"))
        ratio, low, high = term.joined(float(r["per_call_predicted"]), float(r["current_low"]),
                                       float(r["current_high"]), calls, base, held, order, shuffle)
        table.loc[i, ["current_predicted", "current_low", "current_high", "term_added"]] = \
            [ratio, low, high, term.ratio_added(calls, base, held, order, shuffle)]
        if not pd.isna(r["measured"]) and ratio > 0:
            table.loc[i, "current_log_error"] = math.log(model_measured(r)) - math.log(ratio)
    return table


def _r(x, digits: int = 1):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), digits)


TERM_COLUMNS = ["allocator", "takes_term", "terms", "premium_ns", "premium_low_ns", "premium_high_ns",
                "held_ms_per_mib", "held_low_ms_per_mib", "held_high_ms_per_mib", "programs", "cells",
                "nested_median_without", "nested_median", "nested_p90_without", "nested_p90", "premium_display",
                "held_display", "median_display", "p90_display", "order_part", "order_low", "order_high",
                "shuffle_part", "shuffle_low", "shuffle_high", "placement_display"]
TERM_WORDS = {"calls": "premium", "held": "held", "calls+held": "premium and held", "order+shuffle": "placement",
              "calls+order+shuffle": "premium and placement", "held+order+shuffle": "held and placement",
              "calls+held+order+shuffle": "premium, held and placement"}


def terms_table(done, tables) -> tuple[pd.DataFrame, dict]:
    """`done`: cost_check.checked's. Per configuration checked: which terms its model takes, each fitted on every
    checked program with its 95% interval (both fitted together where it takes both or neither, else the one it
    takes), and the nested leave-one-program-out errors (median and 90th percentile of |error|, in percent)
    without and with the terms as chosen without each program (TERM_COLUMNS); and the same errors over all cells,
    per set of programs, for the paper."""
    from analysis.stats import cost_model, cost_terms

    cells = term_cells([t for _, t in done.tables])
    nested = done.nested
    rows = []
    z = cost_model.Z
    for allocator, mine in cells.groupby("allocator", sort=True):
        taken = done.premiums.get(allocator)
        fitted = taken or cost_terms.fit(mine, (cost_terms.CALLS_TERM, cost_terms.HELD_TERM)) \
            or cost_terms.fit(mine)
        n = cost_terms.summary(nested[nested["allocator"] == allocator])
        has = set(fitted.terms) if fitted else set()
        calls = (fitted.ns, fitted.ns - z * fitted.se_ns, fitted.ns + z * fitted.se_ns) \
            if cost_terms.CALLS_TERM in has else (None, None, None)
        mib = 1024 / 1e6
        held = (fitted.ms_per_mib, (fitted.ns_per_kib - z * fitted.se_ns_per_kib) * mib,
                (fitted.ns_per_kib + z * fitted.se_ns_per_kib) * mib) if cost_terms.HELD_TERM in has \
            else (None, None, None)
        place = {t: (getattr(fitted, t), getattr(fitted, t) - z * getattr(fitted, f"se_{t}"),
                     getattr(fitted, t) + z * getattr(fitted, f"se_{t}")) if t in has else (None, None, None)
                 for t in cost_terms.PLACEMENT}
        rows.append({"allocator": allocator, "takes_term": taken is not None,
                     **{f"{t}_{k}": _r(v, 2) for t in cost_terms.PLACEMENT
                        for k, v in zip(("part", "low", "high"), place[t])},
                     "placement_display": "order {:.2f} [{:.2f}, {:.2f}], shuffle {:.2f} [{:.2f}, {:.2f}]".format(
                         *place["order"], *place["shuffle"]) if place["order"][0] is not None else "",
                     "terms": TERM_WORDS.get("+".join(taken.terms), "") if taken else "none",
                     "premium_ns": _r(calls[0]), "premium_low_ns": _r(calls[1]), "premium_high_ns": _r(calls[2]),
                     "held_ms_per_mib": _r(held[0], 2), "held_low_ms_per_mib": _r(held[1], 2),
                     "held_high_ms_per_mib": _r(held[2], 2),
                     "programs": int(mine["program"].nunique()), "cells": int(len(mine)),
                     "nested_median_without": _r(n["median_without"]), "nested_median": _r(n["median_nested"]),
                     "nested_p90_without": _r(n["p90_without"]), "nested_p90": _r(n["p90_nested"]),
                     "premium_display": f"{calls[0]:+.0f} [{calls[1]:+.0f}, {calls[2]:+.0f}]"
                     if calls[0] is not None else "",
                     "held_display": f"{held[0]:+.2f} [{held[1]:+.2f}, {held[2]:+.2f}]" if held[0] is not None else "",
                     "median_display": f"{n['median_without']:.1f} / {n['median_nested']:.1f}",
                     "p90_display": f"{n['p90_without']:.1f} / {n['p90_nested']:.1f}"})
    set_of = {r.program: r.programs_set for t in tables for r in t[["program", "programs_set"]].itertuples()}
    by_set = {}
    for name in dict.fromkeys(list(set_of.values())):
        sub = nested[nested["program"].map(set_of) == name]
        if len(sub):
            by_set[name] = {k: (round(v, 1) if isinstance(v, float) else v) for k, v in cost_terms.summary(sub).items()}
    every = {k: (round(v, 1) if isinstance(v, float) else v) for k, v in cost_terms.summary(nested).items()} \
        if len(nested) else {}

    def taken_row(a, t):
        row = {"allocator": a, "terms": "+".join(t.terms), "programs": t.programs}
        if cost_terms.CALLS_TERM in t.terms:
            row.update(ns=round(t.ns), low_ns=round(t.ns - z * t.se_ns), high_ns=round(t.ns + z * t.se_ns))
        if cost_terms.HELD_TERM in t.terms:
            row.update(ms_per_mib=round(t.ms_per_mib, 2),
                       low_ms_per_mib=round((t.ns_per_kib - z * t.se_ns_per_kib) * 1024 / 1e6, 2),
                       high_ms_per_mib=round((t.ns_per_kib + z * t.se_ns_per_kib) * 1024 / 1e6, 2))
        if cost_terms.ORDER_TERM in t.terms:
            for name in cost_terms.PLACEMENT:
                v, se = getattr(t, name), getattr(t, f"se_{name}")
                row.update({name: round(v, 2), f"{name}_low": round(v - z * se, 2), f"{name}_high": round(v + z * se, 2)})
        return row

    numbers = {"taken": [taken_row(a, t) for a, t in sorted(done.premiums.items())],
               "not_taken": sorted(set(cells["allocator"]) - set(done.premiums)),
               "min_programs": cost_terms.MIN_PROGRAMS, "all": every, "by_set": by_set}
    placed = cells.dropna(subset=["order_share", "shuffle_share"]).drop_duplicates(["program", "processor"])
    if len(placed):  # the checked programs whose profiles give placement shares, and the largest of each
        top, low = placed.loc[placed["shuffle_share"].idxmax()], placed.loc[placed["order_share"].idxmin()]
        numbers["placement"] = {"programs": int(placed["program"].nunique()),
                                "most_shuffle": {"program": top["program"], "share": round(float(top["shuffle_share"]), 2)},
                                "most_order": {"program": low["program"], "share": round(float(low["order_share"]), 2)}}
    return pd.DataFrame(rows, columns=TERM_COLUMNS), numbers


def term_words(premiums: dict) -> str:
    """What a registration's predictions add to the per-call model, in words for its head."""
    from analysis.stats import cost_terms

    if any(cost_terms.ORDER_TERM in t.terms for t in premiums.values()):
        return ("a premium per allocation call, a cost per KiB of small blocks held at the peak (held_ns_per_kib) and "
                "the parts of the program's placement shares (order_part, shuffle_part: what laying its blocks side by "
                "side gains and scattering them costs, measured by the profile's runs under heapcost's placement "
                "allocator), each for the configurations that take it, chosen and fitted on every program checked "
                "before (analysis/stats/cost_terms.py); per_call_*: the per-call model without them")
    if any(cost_terms.HELD_TERM in t.terms for t in premiums.values()):
        return ("a premium per allocation call and a cost per KiB of small blocks held at the peak (held_ns_per_kib), "
                "each for the configurations that take it, chosen and fitted on every program checked before "
                "(analysis/stats/cost_terms.py); per_call_*: the per-call model without them")
    return ("a premium per allocation call for each configuration that takes it, chosen and fitted on every program "
            "checked before (analysis/stats/cost_terms.py); per_call_*: the per-call model without it")


def pct(log_value: float) -> str:
    return f"{100 * math.expm1(log_value):+.1f}"



# ---- the models compared ----

MODEL_COLUMNS = ["processor", "column", "programs_set", "model", "sample", "programs", "cells", "inside",
                 "coverage_percent", "coverage_low_percent", "coverage_high_percent", "median_half_percent",
                 "median_abs_error_percent", "p90_abs_error_percent", "worst_program", "worst_allocator",
                 "worst_predicted", "worst_measured", "worst_error_percent"]


def _model_row(processor: str, column: int, programs_set: str, model: str, sample: str, done: pd.DataFrame,
               predicted: str, low: str, high: str, inside: str, error: str) -> dict:
    from analysis.stats.primitives import wilson

    row = dict.fromkeys(MODEL_COLUMNS, "")
    row.update(processor=processor, column=column, programs_set=programs_set, model=model, sample=sample,
               programs=int(done["program"].nunique()), cells=int(len(done)))
    if done.empty:
        return row
    err = done[error].astype(float)
    held = done[inside].astype(bool)
    lo, hi = wilson(int(held.sum()), int(len(done)))
    half = (np.log(done[high].astype(float)) - np.log(done[low].astype(float))) / 2
    worst = done.loc[err.abs().idxmax()]
    row.update(inside=int(held.sum()), coverage_percent=f"{100 * held.mean():.0f}",
               coverage_low_percent=f"{100 * lo:.0f}", coverage_high_percent=f"{100 * hi:.0f}",
               median_half_percent=f"{100 * math.expm1(float(half.median())):.1f}",
               median_abs_error_percent=f"{100 * math.expm1(float(err.abs().median())):.1f}",
               p90_abs_error_percent=f"{100 * math.expm1(float(err.abs().quantile(0.9))):.1f}",
               worst_program=worst["program"], worst_allocator=worst["allocator"],
               worst_predicted=f"{float(worst[predicted]):.3f}", worst_measured=f"{float(worst['measured']):.3f}",
               worst_error_percent=pct(float(worst[error])))
    return row


def models_compared(tables) -> pd.DataFrame:
    """Per processor kind, the model checked several ways (MODEL_COLUMNS), from the check tables of every
    registration (each with its `programs_set` and leave_one_program_out's columns):
    1. the model as registered, on the first set: out of sample;
    2. the model as it is now on each set, its intervals widened by the other programs' misses: in sample for
       every term chosen after that set was measured;
    3. the model as it was then, registered on the second set with the model's own error before it was measured:
       out of sample;
    4. on a later set registered with the terms (stats/cost_terms.py): the model with them, as registered, out of
       sample;
    5. and on that set the per-call model alone, registered beside it, out of sample.
    A kind whose later sets are not measured has no row for them; rows of one column keep the sets' order."""
    rows = []
    for t in tables:
        if t.empty:
            continue
        processor = str(t["processor"].iloc[0])
        programs_set = str(t["programs_set"].iloc[0]) if "programs_set" in t else "first"
        done = t[t["log_error"].notna()]
        now = t[t["loo_inside"].notna()] if "loo_inside" in t else t.iloc[0:0]
        if len(now):
            rows.append(_model_row(processor, 2, programs_set, "as it is now", "in sample", now,
                                   "current_predicted", "loo_low", "loo_high", "loo_inside", "current_log_error"))
        if programs_set == "first":
            rows.append(_model_row(processor, 1, programs_set, "as registered", "out of sample", done,
                                   "predicted", "low", "high", "inside", "log_error"))
        elif len(done) and ("registered_per_call" not in done or done["registered_per_call"].isna().all()):
            rows.append(_model_row(processor, 3, programs_set, "as it was then", "out of sample", done,
                                   "predicted", "low", "high", "inside", "log_error"))
        elif len(done):
            rows.append(_model_row(processor, 4, programs_set, "with its terms", "out of sample", done,
                                   "predicted", "low", "high", "inside", "log_error"))
            alone = done[done["registered_per_call"].notna()]
            rows.append(_model_row(processor, 5, programs_set, "per-call alone", "out of sample", alone,
                                   "registered_per_call", "registered_per_call_low", "registered_per_call_high",
                                   "registered_per_call_inside", "registered_per_call_log_error"))
    out = pd.DataFrame(rows, columns=MODEL_COLUMNS)
    return out.sort_values(["processor", "column"], kind="stable").reset_index(drop=True)


def kinds_checked_later(models: pd.DataFrame) -> list[str]:
    """The processor kinds checked out of sample on a set of programs after the first (models_compared's columns
    3 and 4: the second set as the model was then, a later set as registered with its terms)."""
    return sorted(set(models.loc[models["column"].isin([3, 4]), "processor"])) if len(models) else []
