"""Out of sample: whether each kind of interval keeps its promise on what it was not computed from.

- Next machine (leave one machine out): for every debate cell and kind measured on two machines or more, each
  machine in turn is left out of everything, the between-machine spread included; the kind's 95% next-machine
  interval is computed from the rest and the left-out machine's own estimate falls inside it or not (the
  interval of its design: layout builds, or one build).
- Next kind (leave one kind out): for every debate cell measured on two kinds or more, each kind in turn is
  predicted from the others' answers with the spread between kinds borrowed from the catalogue's ablation
  pairs without it (stats.prediction.predict), and its own answer falls inside or not.

Each check is reported as held / checked with a Wilson 95% interval, over every cell and over the primary
cells alone: an interval that holds 4% of held-out cells was never an answer."""
import math

import pandas as pd

from analysis.publish.debates import pool
from analysis.stats import prediction
from analysis.stats.primitives import wilson

DETAIL_COLUMNS = ["check", "seed", "configuration", "workload", "kind", "left_out", "n_builds", "predicted_low",
                  "predicted_high", "measured", "held", "primary"]
COVERAGE_COLUMNS = ["check", "promise", "cells", "held", "checked", "percent", "low", "high"]
NEXT_MACHINE, NEXT_KIND = "next machine, one machine left out", "next kind, one kind left out"
PROMISES = {NEXT_MACHINE: "95% interval of the estimate a new machine of the kind gives",
            NEXT_KIND: "95% interval of the answer on a processor kind not yet measured"}
# the decision plays no part here: only the intervals are checked
_MARGIN, _RULE = 0.02, "cost_at_most"


def _spreads(runs: pd.DataFrame) -> tuple:
    spread = prediction.machine_spread(pool.machine_cells(pool.machine_estimates(runs)))
    tau, n = prediction.borrowed_spread(pool.layout_cells(runs))
    return spread, (tau * tau if n and math.isfinite(tau) else None)


def leave_one_machine_out(runs: pd.DataFrame, floors: dict, primary: set) -> pd.DataFrame:
    """The next-machine check over every cell and kind with two machines or more (`runs`: every debate cell's
    run estimates; `primary`: the (configuration, workload) of the primary cells)."""
    current = runs[~runs["superseded"].astype(bool)] if len(runs) else runs
    machines = pool.machine_estimates(current)
    told = machines[machines["processor"].isin(pool.identified_processors(machines["processor"]))]
    rows, spreads = [], {}
    for (seed, conf, workload, kind), g in told.groupby(["seed", "configuration", "workload", "processor"],
                                                         sort=True):
        if len(g) < 2:
            continue
        for m in g.itertuples():
            if m.machine not in spreads:
                spreads[m.machine] = _spreads(current[current["machine"] != m.machine])
            spread, layout_tau2 = spreads[m.machine]
            cell = current[(current["seed"] == seed) & (current["configuration"] == conf)
                           & (current["workload"] == workload) & (current["processor"] == kind)
                           & (current["machine"] != m.machine)]
            h = pool.per_host(cell, _MARGIN, _RULE, {kind: pool.floor_of(floors, kind)} if floors else {},
                              spread, layout_tau2).iloc[0]
            one = int(m.n_builds) < 2
            lo, hi = (h["next_one_build_low"], h["next_one_build_high"]) if one else (h["next_low"], h["next_high"])
            rows.append({"check": NEXT_MACHINE, "seed": seed, "configuration": conf, "workload": workload,
                         "kind": kind, "left_out": m.machine, "n_builds": int(m.n_builds), "predicted_low": lo,
                         "predicted_high": hi, "measured": m.ratio, "held": bool(lo <= m.ratio <= hi),
                         "primary": (conf, workload) in primary})
    return pd.DataFrame(rows, columns=DETAIL_COLUMNS)


def leave_one_kind_out(per_host: pd.DataFrame, ablations: dict, primary: set) -> pd.DataFrame:
    """The next-kind check: `per_host` every debate cell's answer per kind, `ablations` the catalogue's ablation
    cells by kind (predictions.ablation_cells(..., by_kind=True))."""
    told = per_host[per_host["processor"].isin(pool.identified_processors(per_host["processor"]))] \
        if len(per_host) else per_host
    rows, taus = [], {}
    for (seed, conf, workload), g in (told.groupby(["seed", "configuration", "workload"], sort=True)
                                      if len(told) else []):
        if len(g) < 2:
            continue
        for h in g.itertuples():
            if h.processor not in taus:
                taus[h.processor] = prediction.borrowed_spread(
                    {c: [v for k, v in d.items() if k != h.processor] for c, d in ablations.items()})[0]
            tau = taus[h.processor]
            if not math.isfinite(tau):
                continue
            others = g[g["processor"] != h.processor]
            p = prediction.predict(list(zip(others["estimate"].astype(float), others["se"].astype(float))), tau)
            lo, hi = (math.exp(v) for v in p.interval())
            rows.append({"check": NEXT_KIND, "seed": seed, "configuration": conf, "workload": workload,
                         "kind": h.processor, "left_out": h.processor, "n_builds": int(h.n_builds),
                         "predicted_low": lo, "predicted_high": hi, "measured": float(h.ratio),
                         "held": bool(lo <= float(h.ratio) <= hi), "primary": (conf, workload) in primary})
    return pd.DataFrame(rows, columns=DETAIL_COLUMNS)


def summary(details: pd.DataFrame) -> pd.DataFrame:
    """held / checked with its Wilson 95% interval, per check, over every cell and over the primary cells."""
    rows = []
    for check in (NEXT_MACHINE, NEXT_KIND):
        mine = details[details["check"] == check] if len(details) else details
        for cells, sub in (("every cell", mine), ("primary cells", mine[mine["primary"].astype(bool)] if len(mine)
                                                  else mine)):
            held, checked = int(sub["held"].sum()) if len(sub) else 0, int(len(sub))
            lo, hi = wilson(held, checked)
            rows.append({"check": check, "promise": PROMISES[check], "cells": cells, "held": held,
                         "checked": checked, "percent": f"{100 * held / checked:.0f}" if checked else "",
                         "low": f"{100 * lo:.0f}" if lo is not None else "",
                         "high": f"{100 * hi:.0f}" if hi is not None else ""})
    return pd.DataFrame(rows, columns=COVERAGE_COLUMNS)
