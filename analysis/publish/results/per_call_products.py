"""The per-call costs as the paper reads them (results_per_call*.csv, results_held_blocks.csv,
results_startup_split.csv, results_share_rate.csv): the cells' tables, what trials split of the held and start-up
cells, the cells of one size, and the allocation rate at which a debated pair's per-call difference makes its
margin. Written by writer.write_outputs from per_call.table's costs.
"""
import math

import pandas as pd

from analysis.contract import dataset
from analysis.publish.render.formats import fmt_interval
from analysis.publish.render.products import write_csv
from analysis.publish.results import cost_check, per_call
from analysis.stats.cost_model import GROWN_CLASS, HELD, HELD_LIVE, PAGES, SAME_SIZE

# the debate whose seed's figure is a share of a whole program's time (a browser benchmark's): its primary pair's
# per-call difference says how fast that program would have to allocate for the figure to hold
SHARE_SEED = "002"


def _rate_display(value: float, low: float, high: float) -> str:
    """Millions of pairs per second with the interval (open above where the difference's interval reaches zero)."""
    def m(x):
        return f"{x / 1e6:.2g}"
    if math.isinf(value):
        return "none: the difference is not above zero"
    return f"{m(value)} [{m(low)}, {'open' if math.isinf(high) else m(high)}]"


def share_rate(costs: pd.DataFrame, p, ds: dataset.Dataset | None, baseline: str) -> dict:
    """results_share_rate.csv: per host and calls cell, what the share seed's primary pair adds per malloc+free
    pair (from the pair in turns with each other where a host measured it so, else each against the baseline),
    and the allocation rate at which that gives the debate's margin (per_call.rate_for_share); beside it the
    allocation rates of the cost check's programs on that host (their registered calls over their CPU time)."""
    from analysis.contract import debates_spec

    q = debates_spec.load().get(SHARE_SEED)
    if q is None:
        return {"share_rate": {"rows": 0}}
    (with_, without), workload = q.primary
    direct = per_call.table(ds, without) if ds is not None and without != baseline else None
    rates = per_call.rate_for_share(costs, with_, without, q.margin, direct)
    rates = rates.assign(added_display=[per_call.added_display(r.added_ns, r.added_ns_low, r.added_ns_high)
                                        for r in rates.itertuples()],
                         rate_display=[_rate_display(r.pairs_per_s, r.pairs_per_s_low, r.pairs_per_s_high)
                                       for r in rates.itertuples()])
    write_csv(rates, p("share_rate.csv"))
    programs = {}
    for folder in cost_check.registrations():
        reg = cost_check.load(folder)
        per_s = [prog["calls"] / prog["base_cpu_s"] for prog in reg["program"] if prog.get("base_cpu_s")]
        if per_s:
            programs[reg["registration"]["processor"]] = per_s
    hosts = [{"processor": h, "programs": len(programs[h]), "lowest": f"{min(programs[h]) / 1e6:.2g}",
              "highest": f"{max(programs[h]) / 1e6:.2g}"} for h in sorted(set(rates["processor"])) if h in programs]
    return {"share_rate": {"rows": int(len(rates)), "seed": q.seed, "with": with_, "without": without,
                           "workload": workload, "margin_percent": f"{100 * q.margin:g}",
                           "processors": sorted(set(rates["processor"])), "programs": hosts}}


def held_split(ds: dataset.Dataset | None, costs: pd.DataFrame, p, baseline: str) -> dict:
    """results_held_blocks.csv: where trials timed the 32 KiB LIFO cell and LIFO pairs of 32 to 128 KiB with few
    blocks live, what a pair adds in CPU time and minor faults (per_call.held_split); per allocator, the 32 KiB cell
    with many and with few live, and each larger class with few live beside what the model charges such a block
    (the pages cell's added time scaled by the class's size, every page written)."""
    held = per_call.held_split(ds, baseline) if ds is not None else pd.DataFrame(columns=per_call.HELD_COLUMNS)
    write_csv(held, p("held_blocks.csv"))
    pages = costs[costs["pattern"] == PAGES] if len(costs) else costs
    out = []
    for (processor, allocator), g in held.groupby(["processor", "allocator"], sort=True):
        cell = g[g["size_class"] == g["size_class"].min()]
        by = {int(r.slots): r for r in cell.itertuples()}
        if len(by) != 2:
            continue
        many, few = by[max(by)], by[min(by)]
        page = pages[(pages["processor"] == processor) & (pages["allocator"] == allocator)]
        larger = []
        for r in g[(g["size_class"] > cell["size_class"].iloc[0]) & (g["slots"] == min(by))].itertuples():
            charged = (float(page["added_ns"].iloc[0]) * r.size_class / int(page["size_class"].iloc[0]) / 1000
                       if len(page) else None)
            larger.append({"kib": int(r.size_class) // 1024, "few_us": f"{r.added_cpu_us:.2f}",
                           "few_minflt": f"{r.added_minflt:.3f}",
                           "charged_us": "" if charged is None else f"{charged:.1f}"})
        out.append({"processor": processor, "allocator": allocator, "many": max(by), "few": min(by),
                    "many_us": f"{many.added_cpu_us:.2f}", "few_us": f"{few.added_cpu_us:.2f}",
                    "many_minflt": f"{many.added_minflt:.2f}", "few_minflt": f"{few.added_minflt:.3f}",
                    "trials": int(min(many.trials, few.trials)), "larger": larger})
    cells = costs[costs["pattern"] == HELD] if len(costs) else costs
    return {"held_blocks": out, "held_cells": {"live": HELD_LIVE, "grown_kib": GROWN_CLASS // 1024,
                                               "classes_kib": sorted({int(c) // 1024 for c in cells["size_class"]})},
            "same_size_cells": _same_size_cells(costs), "grow_cells": _grow_cells(costs)}


def _us(ns: float) -> str:
    """Microseconds from nanoseconds: whole ones from 10 up, a tenth below, two significant digits under a tenth
    (a grow a page at a time adds 0.1 us under one configuration and 800 under another; a small step 0.008)."""
    if abs(ns) >= 10_000:
        return f"{ns / 1000:.0f}"
    return f"{ns / 1000:.1f}" if abs(ns) >= 95 else f"{ns / 1000:.2g}"


def _grow_cells(costs: pd.DataFrame) -> list:
    """Per processor kind and grow cell it measured (the 64 KiB step first, then the page, then the small steps by
    class):
    its largest block and step, the baseline's own microseconds a step, and what each configuration adds a step, in
    microseconds, the largest first."""
    from analysis.stats.cost_model import GROW_SMALL, GROW_SMALL_STEP, GROW_STEPS

    steps = {**GROW_STEPS, GROW_SMALL: GROW_SMALL_STEP}
    out = []
    grow = costs[costs["pattern"].isin(steps)] if len(costs) else costs
    for (processor, pattern, size_class), g in grow.groupby(["processor", "pattern", "size_class"], sort=True):
        step = steps[pattern]
        block = int(size_class)
        out.append({"processor": processor, "pattern": pattern, "mib": block // 2**20,
                    "block": f"{block // 2**20} MiB" if block % 2**20 == 0 else f"{block // 1024} KiB",
                    "step": f"{step // 1024} KiB" if step % 1024 == 0 else f"{step} bytes",
                    "base_us": _us(float(g["base_ns"].median())),
                    "cells": [{"allocator": r.allocator, "added_us": _us(r.added_ns),
                               "display": per_call.added_display(r.added_ns / 1000, r.added_ns_low / 1000,
                                                                 r.added_ns_high / 1000)}
                              for r in g.sort_values("added_ns", ascending=False).itertuples() if r.added_ns_low > 0]})
    return out


def _same_size_cells(costs: pd.DataFrame) -> list:
    """Per processor kind that measured the cells of one size: the classes of each, and the baseline's own ns per
    pair in the smallest held class and in the largest LIFO class below it, with sizes drawn and of one size."""
    out = []
    if costs.empty:
        return out
    for processor, mine in costs.groupby("processor", sort=True):
        base = mine.groupby(["pattern", "size_class"])["base_ns"].median()
        pairs = []
        for drawn, same in SAME_SIZE.items():
            classes = sorted(int(c) for c in mine.loc[mine["pattern"] == same, "size_class"].unique())
            if not classes:
                continue
            below = [c for c in classes if c < GROWN_CLASS] or classes
            shown = classes[0] if drawn == HELD else below[-1]
            if (drawn, shown) in base.index and (same, shown) in base.index:
                labels = [f"{c} B" if c < 1024 else f"{c // 1024} KiB" for c in classes]
                pairs.append({"pattern": drawn, "classes": labels, "kib": shown // 1024,
                              "drawn_ns": f"{base[(drawn, shown)]:.0f}", "same_ns": f"{base[(same, shown)]:.0f}"})
        if pairs:
            out.append({"processor": processor, "cells": pairs})
    return out


def startup_split(ds: dataset.Dataset | None, p, baseline: str) -> dict:
    """results_startup_split.csv: where trials timed calls-processes, what one process's start-up adds in user and
    system time and minor faults under each allocator (per_call.startup_split)."""
    split = (per_call.startup_split(ds, baseline) if ds is not None
             else pd.DataFrame(columns=per_call.STARTUP_COLUMNS))
    write_csv(split, p("startup_split.csv"))
    return {"startup_split": [{"processor": h, "trials": int(g["trials"].min()),
                               "cells": [{"allocator": r.allocator, "display": r.display} for r in g.itertuples()]}
                              for h, g in split.groupby("processor", sort=True)]}


def per_call_costs(costs: pd.DataFrame, p) -> dict:
    """results_per_call.csv (per host, allocator and calls workload: the ratio and the nanoseconds a pair adds)
    and results_per_call_wide.csv (the added nanoseconds by size class, a row per allocator and pattern)."""
    costs = costs.assign(display=[fmt_interval(r.ratio, r.ci_low, r.ci_high) for r in costs.itertuples()],
                         added_display=[per_call.added_display(r.added_ns, r.added_ns_low, r.added_ns_high)
                                        for r in costs.itertuples()])
    write_csv(costs, p("per_call.csv"))
    write_csv(per_call.wide(costs), p("per_call_wide.csv"))
    if costs.empty:
        return {"per_call": {"rows": 0}}
    pages = costs[costs["pattern"] == "pages"]
    started = costs[costs["pattern"] == per_call.STARTUP_PATTERN]
    small = costs[costs["pattern"].isin(per_call.SMALL_PATTERNS)]
    return {"per_call": {
        "rows": int(len(costs)), "allocators": sorted(set(costs["allocator"])),
        "processors": sorted(set(costs["processor"])), "workloads": int(costs["workload"].nunique()),
        "runs": int(costs["n_runs"].max()),
        "classes": sorted(int(c) for c in set(small["size_class"])),
        "largest_class_kib": int(small["size_class"].max()) // 1024 if len(small) else 0,
        "slots": per_call.SLOTS,
        "child_pairs": per_call.CHILD_PAIRS,
        "pages_class_kib": int(pages["size_class"].iloc[0]) // 1024 if len(pages) else 0,
        "fewest_runs": int(costs["n_runs"].min()),
        # per host, each allocator's added time for a block of fresh pages
        "pages": [{"processor": host, "cells": [{"allocator": r.allocator, "added_us": f"{r.added_ns / 1000:.1f}",
                                                 "display": r.added_display} for r in g.itertuples()]}
                  for host, g in pages.groupby("processor", sort=True)],
        # per host, what a short process's start-up and exit add under each allocator, in microseconds, beside
        # the baseline's own time per process
        "processes": [{"processor": host, "base_us": f"{g['base_ns'].median() / 1000:.0f}",
                       "cells": [{"allocator": r.allocator, "below": bool(r.added_ns_high < 0),
                                  "display": per_call.added_display(r.added_ns / 1000, r.added_ns_low / 1000,
                                                                    r.added_ns_high / 1000)}
                                 for r in g.itertuples()]}
                      for host, g in started.groupby("processor", sort=True)],
    }}
