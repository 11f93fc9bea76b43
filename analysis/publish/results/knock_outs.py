"""A defence set laid out option by option: a control against each of its knock-outs (the same source with one
option off, `knock_out_of` in allocators.toml) and against the variant that turns them all off, measured in one
run, so the options' savings can be set beside the saving of all of them together.

Per workload: each part's saving (the control over the knock-out), the whole (the control over the all-off
variant), the parts' savings added on the log scale, and their interaction: the parts' sum over the whole, with a
95% interval. A workload that ran as trials is read block by block (every configuration ran once in each block,
so what a block shares cancels): each quantity is a mean of per-block log ratios with a t interval over the
blocks. A workload that took turns with the baseline (the cost check's programs) is read from each
configuration's pairs with the baseline; those pairs are separate processes, so the variances add. Beside each,
the medians of the trials' minor faults and peak resident memory: the page-level work a defence adds or saves."""
import math

import numpy as np
import pandas as pd

from analysis.contract.schema import usable_trials
from analysis.stats import estimators

# The variant that turns off exactly the options whose knock-outs the catalogue lists: hardened_malloc's
# config/light.mk differs from config/default.mk in those four options and no other (at 72fb357).
TOGETHER = {"hardened-72fb357": "hardened-light-72fb357"}

COLUMNS = ["run_id", "control", "workload", "design", "part", "configuration", "saving", "ci_low", "ci_high",
           "share_of_whole", "minflt", "maxrss_kb"]
SUMMARY_COLUMNS = ["run_id", "control", "workload", "design", "whole", "whole_ci_low", "whole_ci_high", "parts_sum",
                   "interaction", "interaction_ci_low", "interaction_ci_high", "largest_part", "largest_share",
                   "control_minflt", "whole_minflt", "control_maxrss_kb", "whole_maxrss_kb"]


def knock_outs_of(catalog: dict) -> dict[str, list[str]]:
    """{control: its knock-outs} of the catalogue (entries with knock_out_of), for the controls in TOGETHER."""
    out: dict[str, list[str]] = {}
    for aid, entry in catalog.items():
        parent = getattr(entry, "knock_out_of", "") or ""
        if parent in TOGETHER:
            out.setdefault(parent, []).append(aid)
    return out


def _cell(cells: pd.DataFrame, workload: str, allocator: str):
    """A pairs comparison of `allocator` with the baseline on `workload` as an estimators.Difference (log)."""
    rows = cells[(cells["workload"] == workload) & (cells["allocator"] == allocator)]
    if "scale" in rows and len(rows) > 1:
        scale = pd.to_numeric(rows["scale"], errors="coerce").fillna(-1)
        rows = rows[scale == scale.max()]
    return estimators.Difference.of_row(rows.iloc[0]) if len(rows) == 1 else None


def _per_block(trials: pd.DataFrame, workload: str, configs: list[str]) -> pd.DataFrame | None:
    """log wall time per block (rows) and configuration (columns), the blocks where every one ran."""
    mine = trials[(trials["workload"] == workload) & trials["allocator"].isin(configs)]
    if mine.empty or "block" not in mine:
        return None
    table = (mine.assign(log=np.log(pd.to_numeric(mine["wall_s"], errors="coerce")))
             .pivot_table(index="block", columns="allocator", values="log", aggfunc="mean"))
    if set(configs) - set(table.columns):
        return None
    table = table[configs].dropna()
    return table if len(table) >= 3 else None


def _mean(values) -> "estimators.Difference":
    x = np.asarray(values, dtype=float)
    return estimators.Difference(float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size)), float(x.size - 1))


def _blocked(table: pd.DataFrame, control: str, whole: str, kos: list[str]):
    """(parts, whole, interaction) as Differences from per-block log ratios."""
    c = table[control]
    part = {k: _mean(c - table[k]) for k in kos}
    interaction = _mean(sum(c - table[k] for k in kos) - (c - table[whole]))
    return part, _mean(c - table[whole]), interaction


def _paired(cells: pd.DataFrame, workload: str, control: str, whole: str, kos: list[str]):
    """(parts, whole, interaction) from each configuration's own pairs with the baseline (independent)."""
    d = {a: _cell(cells, workload, a) for a in [control, whole, *kos]}
    if any(v is None for v in d.values()):
        return None

    def combine(weights: dict):
        est = sum(w * d[a].estimate for a, w in weights.items())
        terms = [(w * d[a].se) ** 2 for a, w in weights.items() if w]
        dfs = [d[a].df for a, w in weights.items() if w]
        se2 = sum(terms)
        df = se2 ** 2 / sum(t ** 2 / f for t, f in zip(terms, dfs)) if se2 > 0 else 1.0
        return estimators.Difference(est, math.sqrt(se2), df)

    part = {k: combine({control: 1, k: -1}) for k in kos}
    whole_d = combine({control: 1, whole: -1})
    interaction = combine({control: len(kos) - 1, **{k: -1 for k in kos}, whole: 1})
    return part, whole_d, interaction


def _medians(trials: pd.DataFrame | None, workload: str, allocator: str) -> tuple:
    if trials is None or trials.empty or "minflt" not in trials:
        return None, None
    mine = trials[(trials["workload"] == workload) & (trials["allocator"] == allocator)]
    if mine.empty:
        return None, None
    return (float(pd.to_numeric(mine["minflt"], errors="coerce").median()),
            float(pd.to_numeric(mine["maxrss_kb"], errors="coerce").median()))


def _interval(d):
    lo, hi = d.interval()
    return math.exp(d.estimate), math.exp(lo), math.exp(hi)


def parts(run_id: str, trials: pd.DataFrame | None, pair_cells: pd.DataFrame | None, catalog: dict,
          labels: dict[str, str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per part and workload, one summary row per workload) for every control of TOGETHER whose
    knock-outs and all-off variant all ran in this run beside it. `trials`: the run's trials (its usable ones read);
    `pair_cells`: its pairs' comparisons with the baseline (paired.as_comparison results, the cost check's
    programs included); `labels`: {knock-out: what it removes}."""
    rows, summary = [], []
    trials = usable_trials(trials) if trials is not None and len(trials) else None
    for control, kos in sorted(knock_outs_of(catalog).items()):
        kos, whole_id = sorted(kos), TOGETHER[control]
        configs = [control, whole_id, *kos]
        found = {}
        for workload in sorted(set(trials["workload"])) if trials is not None and len(trials) else []:
            table = _per_block(trials, workload, configs)
            if table is not None:
                found[workload] = (_blocked(table, control, whole_id, kos), f"{len(table)} blocks")
        for workload in sorted(set(pair_cells["workload"])) if pair_cells is not None and len(pair_cells) else []:
            got = None if workload in found else _paired(pair_cells, workload, control, whole_id, kos)
            if got is not None:
                found[workload] = (got, "pairs with the baseline")
        for workload, ((part_d, whole, interaction), design) in sorted(found.items()):
            shares = {k: d.estimate / whole.estimate if whole.estimate else float("nan") for k, d in part_d.items()}
            for k, d in part_d.items():
                ratio, lo, hi = _interval(d)
                minflt, rss = _medians(trials, workload, k)
                rows.append({"run_id": run_id, "control": control, "workload": workload, "design": design,
                             "part": labels.get(k, k), "configuration": k, "saving": ratio, "ci_low": lo,
                             "ci_high": hi, "share_of_whole": shares[k], "minflt": minflt, "maxrss_kb": rss})
            ratio, lo, hi = _interval(whole)
            minflt, rss = _medians(trials, workload, whole_id)
            rows.append({"run_id": run_id, "control": control, "workload": workload, "design": design,
                         "part": "all of them", "configuration": whole_id, "saving": ratio, "ci_low": lo,
                         "ci_high": hi, "share_of_whole": 1.0, "minflt": minflt, "maxrss_kb": rss})
            largest = max(part_d, key=lambda k: part_d[k].estimate)
            i_ratio, i_lo, i_hi = _interval(interaction)
            c_minflt, c_rss = _medians(trials, workload, control)
            summary.append({"run_id": run_id, "control": control, "workload": workload, "design": design,
                            "whole": ratio, "whole_ci_low": lo, "whole_ci_high": hi,
                            "parts_sum": math.exp(sum(d.estimate for d in part_d.values())),
                            "interaction": i_ratio, "interaction_ci_low": i_lo, "interaction_ci_high": i_hi,
                            "largest_part": largest, "largest_share": shares[largest],
                            "control_minflt": c_minflt, "whole_minflt": minflt,
                            "control_maxrss_kb": c_rss, "whole_maxrss_kb": rss})
    return pd.DataFrame(rows, columns=COLUMNS), pd.DataFrame(summary, columns=SUMMARY_COLUMNS)
