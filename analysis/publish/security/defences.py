"""What each defence costs beside what it buys: for every ablation (a configuration against the same allocator
without one defence, analysis.publish.results.ablations.ABLATIONS), its time ratio pooled over the workloads both ran, the
instructions it adds per malloc+free pair (callgrind), the exploitation primitive it removes from the random
sequences (the cell whose rate falls most, when the two Wilson intervals are apart), the probes it changes, and
the known exploitation techniques it stops (a column filled by a technique run; until one is in the dataset it
says so)."""
import numpy as np
import pandas as pd

from analysis.publish.security.primitives import number_or_none
from analysis.stats import primitives as PR
from analysis.stats import security as S

NOT_MEASURED = "not measured yet"
PER_MILLE = 1000
TOLD_APART = 0.1  # a probe changes when its loss falls by at least this share (as the monotonicity check)
SCORED_PRIMITIVES = ("overlap", "chosen-address", "allocator-write", "metadata-write")
COLUMNS = ["defence", "with", "without", "pair", "workloads", "time_display", "instructions_per_pair",
           "primitive_removed", "primitive_without", "primitive_with", "primitive_display", "probes_changed",
           "techniques_stopped", "techniques_stopped_names"]


def primitive_removed(rows: list[dict], with_: str, without: str) -> dict | None:
    """The primitive cell (bug class, attacker, primitive) whose rate falls most from `without` to `with_`, when
    the Wilson interval under `with_` lies wholly below the one under `without`; None when no cell falls so."""
    cells = {(r["allocator"], r["bug_class"], r["capability"], r["primitive"]): r for r in rows
             if r["primitive"] in SCORED_PRIMITIVES and r["bug_class"] != "control"}
    best = None
    for (alloc, bug, cap, prim), gone in cells.items():
        if alloc != without:
            continue
        kept = cells.get((with_, bug, cap, prim))
        if kept is None or not number_or_none(gone.get("sequences")) or not number_or_none(kept.get("sequences")):
            continue
        high_with, low_without = number_or_none(kept.get("rate_ci_high")), number_or_none(gone.get("rate_ci_low"))
        if high_with is None or low_without is None or high_with >= low_without:
            continue
        drop = number_or_none(gone["rate"]) - number_or_none(kept["rate"])
        if best is None or drop > best["drop"]:
            best = {"bug_class": bug, "capability": cap, "primitive": prim, "drop": drop,
                    "without": number_or_none(gone["rate"]), "with": number_or_none(kept["rate"])}
    return best


def probes_changed(rows: list[dict], with_: str, without: str) -> list[str]:
    """The probes whose loss (size-weighted, as the score takes it) falls by TOLD_APART or more with the defence."""
    mine = [r for r in rows if r["allocator"] in (with_, without)]
    cells = S._probe_loss_cells(mine, [S.posterior_loss(r) for r in mine])
    a, b = cells.get(with_, {}), cells.get(without, {})
    return sorted(p for p in a if a[p] is not None and b.get(p) is not None and b[p] - a[p] >= TOLD_APART)


def instructions_per_pair(per_free: pd.DataFrame, with_: str, without: str) -> float | None:
    """The median over the workloads both were counted on of (instructions per free with the defence - without):
    each free ends one malloc+free pair, so this is what the defence adds to a pair."""
    if per_free is None or per_free.empty:
        return None
    table = per_free.pivot_table(index="workload", columns="allocator", values="instructions_per_free",
                                 aggfunc="first")
    if with_ not in table or without not in table:
        return None
    both = table[[with_, without]].dropna()
    return float(np.median(both[with_] - both[without])) if len(both) else None


def _label(cell: dict) -> str:
    attacker = "no leak" if cell["capability"] == "none" else "heap leak"
    return f"{cell['primitive']} after {cell['bug_class']} ({attacker})"


def defence_table(ablation: pd.DataFrame, per_free: pd.DataFrame, probe_rows: list[dict],
                  primitive_rows: list[dict], fmt_interval, techniques: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per ablation with a pooled time ratio. `techniques`: (technique, allocator, outcome) rows of a
    known-technique run, or None (the column then says NOT_MEASURED)."""
    pooled = ablation[ablation["workload"] == "all"] if len(ablation) else ablation
    out = []
    for _, r in pooled.iterrows():
        with_, without = r["allocator"], r["base"]
        cell = primitive_removed(primitive_rows, with_, without)
        extra = instructions_per_pair(per_free, with_, without)
        stopped, stopped_names = NOT_MEASURED, ""
        if techniques is not None and len(techniques):
            def outcomes(a, wanted=None):
                mine = techniques[(techniques["allocator"] == a) & (techniques["outcome"] != "not-run")]
                return set(mine.loc[mine["outcome"] == wanted, "technique"] if wanted else mine["technique"])
            both = outcomes(with_) & outcomes(without)
            names = sorted((outcomes(without, "works") - outcomes(with_, "works")) & both)
            # the table shows a count (a column of names would not fit); the CSV keeps the names
            stopped, stopped_names = (f"{len(names)} of {len(both)}" if both else "none ran"), ", ".join(names)
        out.append({"defence": r["defence"], "with": with_, "without": without, "pair": f"{with_} / {without}",
                    "workloads": int(r["n"]),
                    "time_display": fmt_interval(r["ratio"], r["ci_low"], r["ci_high"]),
                    "instructions_per_pair": "" if extra is None else f"{extra:+.0f}",
                    "primitive_removed": "none measured" if cell is None else _label(cell),
                    "primitive_without": "" if cell is None else f"{round(PER_MILLE * cell['without'])}",
                    "primitive_with": "" if cell is None else f"{round(PER_MILLE * cell['with'])}",
                    "primitive_display": "none measured" if cell is None else
                    f"{_label(cell)}: {round(PER_MILLE * cell['without'])} \u2192 {round(PER_MILLE * cell['with'])}",
                    "probes_changed": ", ".join(probes_changed(probe_rows, with_, without)) or "none",
                    "techniques_stopped": stopped, "techniques_stopped_names": stopped_names})
    return pd.DataFrame(out, columns=COLUMNS)


def sequences_per_cell(primitive_rows: list[dict]) -> int:
    """The sequences of a cell (the per-mille column's base), the smallest over the cells that ran."""
    counts = [int(number_or_none(r.get("sequences")) or 0) for r in primitive_rows if r.get("primitive") == PR.ANY]
    return min((c for c in counts if c), default=0)
