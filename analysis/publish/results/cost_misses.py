"""The check's far misses, each with what the data say of it: every measured cell the model as it is now misses by
more than FAR (a factor of 1.25), and for each the mechanisms the dataset measured that bear on it, read from the
registration's profile, the per-call table and the trials run alone (publish/results/cost_faults.py), never
typed in:

- `protocol`: the check's ratio in turns and the same cell's ratio alone differ by more than a tenth: the
  program pays in turns what it does not alone (docs/design.md, the check's turns amplify placement);
- `placement`: the program's shuffle share or order share (stats/cost_model.placement_shares) is at least
  PLACEMENT_SHARE and the configuration takes no placement term: where its blocks lie moves its time, and the
  model does not charge it;
- `unmeasured_class`: the class that carries most (half or more) of the program's allocating calls, under
  GROWN_CLASS, has no per-call cell of its own and lies in a gap of the configuration's cells on the kind (more
  than their usual factor of 4 between the cells around it, or beyond them), so its calls are charged at a cell
  far from it (an allocator whose cost grows with a block's bytes is then undercharged for larger blocks);
- `large_blocks`: most of the prediction rests on blocks above the largest small cell (the pages cell scaled).
- `placement_own_calls`: the configuration takes the order term, the model predicted the program dearer than it
  measured, at least half of that miss is what the order term added, and at least half of the program's order
  share is what heapcost's placement allocator's own calls cost beside the baseline's (its per-call cells on the
  kind, cost_model.PLACEMENT_ALLOCATOR): the share stands for that allocator's speed, not for where it lays the
  blocks (docs/design.md, the order share also carries the placement allocator's own speed).

A miss none of these describes is `unexplained`. results_cost_misses.csv holds one row per far miss.
"""
import math
from pathlib import Path

import pandas as pd

FAR = math.log(1.25)
PROTOCOL = math.log(1.10)
PLACEMENT_SHARE = 0.2
LARGE = 0.5
OWN_SHARE = 0.5  # of the order share, what the placement allocator's own calls must account for
GAP = 4  # the per-call cells' step between classes (16, 64, 256, 1024, 4096 bytes)
COLUMNS = ["programs_set", "processor", "program", "allocator", "predicted", "measured", "error_percent", "reasons",
           "top_class", "top_class_share", "nearest_cell", "order_share", "shuffle_share", "placement_own", "alone",
           "display"]
SMALL_CELL_PATTERNS = ("lifo", "random", "fifo")


def _top_class(profile: pd.DataFrame) -> tuple[int, float]:
    """The class with the most allocating calls and its share of them."""
    from analysis.stats import cost_model

    calls = cost_model.class_calls(profile)["calls"]
    if calls.empty or calls.sum() <= 0:
        return 0, 0.0
    top = int(calls.idxmax())
    return top, float(calls[top] / calls.sum())


def _in_gap(size_class: int, cells: list[int]) -> bool:
    """Whether a class has no cell of its own and the cells around it lie more than GAP apart (the cells step by
    a factor of 4 up to 4 KiB; a class beyond that ladder is charged at a cell far from it)."""
    if not cells or size_class in cells:
        return False
    below = [c for c in cells if c < size_class]
    above = [c for c in cells if c > size_class]
    if not below or not above:
        return True
    return min(above) / max(below) > GAP


def _placement_own(profile: pd.DataFrame, costs: pd.DataFrame, processor: str) -> float | None:
    """The share of the program's time under the baseline that heapcost's placement allocator's own calls add,
    predicted from its per-call cells on the kind as any configuration's are; None where the kind has none."""
    from analysis.stats import cost_model

    mine = costs[(costs["processor"] == processor) & (costs["allocator"] == cost_model.PLACEMENT_ALLOCATOR)] \
        if len(costs) else costs
    if mine.empty or not cost_model.base_time(profile):
        return None
    return cost_model.predict(profile, mine).ratio - 1.0


def far_misses(tables, costs: pd.DataFrame, faults: pd.DataFrame, premiums: dict) -> pd.DataFrame:
    """COLUMNS over `tables` ([(registration folder, its check table with the current model and programs_set)]):
    each cell the model as it is now misses by more than FAR, with its reasons."""
    from analysis.publish.results.cost_prediction import read_profile
    from analysis.stats import cost_model
    from analysis.stats.cost_terms import ORDER_TERM

    alone = {}
    if faults is not None and len(faults) and "alone" in faults:
        for r in faults.itertuples():
            if not pd.isna(r.alone):
                alone[(r.processor, r.program, r.allocator)] = float(r.alone)
    rows = []
    for folder, table in tables:
        done = table[table["current_log_error"].notna()] if len(table) else table
        for r in done.itertuples():
            error = float(r.current_log_error)
            if abs(error) <= FAR:
                continue
            path = Path(folder) / "profiles" / f"{r.program}.csv"
            prof = read_profile(path) if path.is_file() else None
            top, share = _top_class(prof) if prof is not None else (0, 0.0)
            cells = costs[(costs["processor"] == r.processor) & (costs["allocator"] == r.allocator)
                          & costs["pattern"].isin(SMALL_CELL_PATTERNS)] if len(costs) else costs
            measured_classes = sorted(int(c) for c in cells["size_class"].unique()) if len(cells) else []
            nearest = cost_model._nearest(top, measured_classes) if top and measured_classes else 0
            reasons = []
            a = alone.get((r.processor, r.program, r.allocator))
            if a and abs(math.log(float(r.measured) / a)) > PROTOCOL:
                reasons.append("protocol")
            order = None if pd.isna(getattr(r, "order_share", None)) else float(r.order_share)
            shuffle = None if pd.isna(getattr(r, "shuffle_share", None)) else float(r.shuffle_share)
            term = premiums.get(r.allocator)
            if ((shuffle or 0) >= PLACEMENT_SHARE or abs(order or 0) >= PLACEMENT_SHARE) \
                    and not (term and ORDER_TERM in term.terms):
                reasons.append("placement")
            if top and top < cost_model.GROWN_CLASS and share >= 0.5 and _in_gap(top, measured_classes):
                reasons.append("unmeasured_class")
            if not pd.isna(r.large_share) and float(r.large_share) >= LARGE:
                reasons.append("large_blocks")
            own = _placement_own(prof, costs, r.processor) if prof is not None else None
            if term and ORDER_TERM in term.terms and order and order > 0 and own is not None \
                    and own >= OWN_SHARE * order and error < 0 \
                    and term.order * order >= OWN_SHARE * (float(r.current_predicted) - float(r.measured)):
                reasons.append("placement_own_calls")
            rows.append({"programs_set": r.programs_set, "processor": r.processor, "program": r.program,
                         "allocator": r.allocator, "predicted": round(float(r.current_predicted), 3),
                         "measured": round(float(r.measured), 3),
                         "error_percent": f"{100 * math.expm1(error):+.0f}",
                         "reasons": "+".join(reasons) or "unexplained", "top_class": top,
                         "top_class_share": round(share, 3), "nearest_cell": nearest,
                         "order_share": None if order is None else round(order, 3),
                         "shuffle_share": None if shuffle is None else round(shuffle, 3),
                         "placement_own": None if own is None else round(own, 3),
                         "alone": None if a is None else round(a, 3),
                         "display": f"{float(r.current_predicted):.2f} / {float(r.measured):.2f}"})
    return pd.DataFrame(rows, columns=COLUMNS)


def numbers(t: pd.DataFrame) -> dict:
    """The paper's summary: how many far misses, how many each reason describes, and the unexplained ones; the
    newest set's misses listed one by one (its check is the latest out of sample)."""
    if t.empty:
        return {"cells": 0}
    from analysis.harness.workloads.cost_programs import SETS

    reasons = t["reasons"].str.split("+").explode()
    newest = [name for name in SETS if name in set(t["programs_set"])][-1]
    return {"cells": int(len(t)), "far_percent": f"{100 * math.expm1(FAR):.0f}",
            "protocol_percent": f"{100 * math.expm1(PROTOCOL):.0f}", "placement_share": PLACEMENT_SHARE,
            "by_reason": {k: int(v) for k, v in reasons.value_counts().sort_index().items()},
            "unexplained": int((t["reasons"] == "unexplained").sum()),
            "listed": [{"program": r.program, "allocator": r.allocator, "set": r.programs_set,
                        "processor": r.processor, "display": r.display, "reasons": r.reasons.replace("+", ", "),
                        "top_class": int(r.top_class), "nearest_cell": int(r.nearest_cell)}
                       for r in t[t["programs_set"] == newest].itertuples()], "newest_set": newest}
