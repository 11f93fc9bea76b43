"""The cost of each defence alone: inside one allocator family, the variant with one defence against its base.

From a run's trials when both sides ran as trials (compare with the base as the baseline); from a run's
comparisons with its own baseline otherwise (a lockstep run pairs every allocator with the baseline), as the
ratio of the two comparisons (stats/within_run.py)."""
import math

import pandas as pd

from analysis.stats import compare as cmp
from analysis.stats import estimators
from analysis.stats.within_run import WithinRun
from analysis.publish.results import memo

MARGIN = 0.05  # as results.MARGIN: the non-inferiority margin of the comparisons


# Each single defence measured inside one allocator: (defence, allocator, its base). The bases are the
# family's default configuration; glibc-perturb also runs against glibc-notcache, because perturb needs
# the tcache off and only that pair isolates the poisoning itself.
COLUMNS = ["defence", "allocator", "base", "metric", "workload", "ratio", "ci_low", "ci_high", "n", "n_base"]
ABLATIONS = [
    ("poison on free", "jemalloc-junk-free", "jemalloc"),
    ("poison on free and fill on allocation", "jemalloc-junk", "jemalloc"),
    ("tcache off", "glibc-notcache", "glibc"),
    ("tcache off and perturb (poison on free, fill on allocation)", "glibc-perturb", "glibc"),
    ("perturb alone (tcache off on both sides)", "glibc-perturb", "glibc-notcache"),
    ("quarantine", "scudo-quarantine", "scudo"),
    ("zero on allocation", "scudo-zero", "scudo"),
    ("secure mode (same 2.0.9 source)", "mimalloc-secure", "mimalloc2"),
    ("perl's own malloc instead of the system one (same perl source)", "perl-mymalloc", "perl-sysmalloc"),
    # glibc built from the system's source with one check compiled out (seed 004): the check over its absence
    ("tcache double-free key check", "glibc-built", "glibc-no-tcache-key"),
    ("safe-linking", "glibc-built", "glibc-no-safe-linking"),
    # mozjemalloc from Firefox ESR's source (seed 002): poisoning as shipped (first 256 bytes) and whole blocks
    ("poison on free, the first 256 bytes (as Firefox ships it)", "mozjemalloc-poison", "mozjemalloc"),
    ("poison on free, whole blocks (early beta)", "mozjemalloc-poison-full", "mozjemalloc"),
    # hardened_malloc (brought): what its light configuration turns off
    ("slot randomization, write-after-free check, slab quarantines, a guard slab every slab (hardened_malloc 72fb357)",
     "hardened-72fb357", "hardened-light-72fb357"),
    ("slot randomization, write-after-free check, slab quarantines, a guard slab every slab (hardened_malloc 2026062800)",
     "hardened-2026062800", "hardened-light-2026062800"),
    # the same four, one at a time: the default variant against it with one option set to light.mk's value
    ("write-after-free check (hardened_malloc 72fb357)", "hardened-72fb357", "hardened-72fb357-no-wafc"),
    ("random slot selection (hardened_malloc 72fb357)", "hardened-72fb357", "hardened-72fb357-no-slot-random"),
    ("slab quarantines (hardened_malloc 72fb357)", "hardened-72fb357", "hardened-72fb357-no-quarantine"),
    ("a guard slab every slab instead of every 8th (hardened_malloc 72fb357)", "hardened-72fb357",
     "hardened-72fb357-guard8"),
]


def ablations(trials: pd.DataFrame, metric: str = "wall_s", plan=ABLATIONS) -> pd.DataFrame:
    """One row per (defence, workload) and a pooled row (workload "all": the geometric mean) per
    defence: the ratio of the variant to its base with a 95% confidence interval. `trials`: the usable
    ones (results.usable)."""
    data = trials
    present = set(data["allocator"])
    rows = []
    for defence, alloc, base in plan:
        if alloc not in present or base not in present:
            continue
        common = (set(data.loc[data["allocator"] == alloc, "workload"])
                  & set(data.loc[data["allocator"] == base, "workload"]))
        sub = data[data["allocator"].isin([alloc, base]) & data["workload"].isin(common)]
        if sub.empty:
            continue
        comp = memo.remembered("compare", (sub, base, metric, MARGIN),
                               lambda: cmp.compare(sub, base, metric, margin=MARGIN))
        for _, r in comp.results.iterrows():
            rows.append({"defence": defence, "allocator": alloc, "base": base, "metric": metric,
                         "workload": r["workload"], "ratio": r["ratio"], "ci_low": r["ci_low"],
                         "ci_high": r["ci_high"], "n": r["n"], "n_base": r["n_baseline"], "df": r["df"]})
        g = comp.geomean.iloc[0]
        rows.append({"defence": defence, "allocator": alloc, "base": base, "metric": metric,
                     "workload": "all", "ratio": g["geomean_ratio"], "ci_low": g["ci_low"],
                     "ci_high": g["ci_high"], "n": int(g["workloads"]), "n_base": int(g["workloads"])})
    return pd.DataFrame(rows, columns=[*COLUMNS, "df"])


def cell_ablations(cells: pd.DataFrame, metric: str, plan=ABLATIONS, skip=None) -> pd.DataFrame:
    """Ablation rows from one run's comparisons with its baseline (a lockstep run pairs every allocator
    with the baseline, not with its family's base), per workload, for the workloads `skip` does not list for
    that pair ({(allocator, base): workloads the run's trials already answer})."""
    rows = []
    skip = skip or {}
    workloads = ([] if cells is None or cells.empty else
                 [(w, WithinRun(sub)) for w, sub in cells.groupby("workload", sort=True)])
    for defence, alloc, base in plan:
        for w, within in workloads:
            d = None if w in skip.get((alloc, base), ()) else within.ratio(alloc, base)
            if d is not None:
                lo, hi = d.interval()
                rows.append({"defence": defence, "allocator": alloc, "base": base, "metric": metric, "workload": w,
                             "ratio": math.exp(d.estimate), "ci_low": math.exp(lo), "ci_high": math.exp(hi),
                             "n": None, "n_base": None, "df": d.df})
    return pd.DataFrame(rows, columns=[*COLUMNS, "df"])


def run_ablations(usable_trials: pd.DataFrame, comparisons: dict | None, metric: str) -> pd.DataFrame:
    """A run's ablations, per workload and pooled over every workload both sides ran: from its usable trials
    where both ran as trials (a direct comparison), from its comparisons with the baseline on the others
    (lockstep pairs). A pair measured only as trials keeps compare's geometric mean; one measured both ways is
    pooled over all its workloads (estimators.pooled_mean_difference)."""
    from_trials = ablations(usable_trials, metric)
    per_workload = from_trials[from_trials["workload"] != "all"]
    answered = {k: set(g["workload"]) for k, g in per_workload.groupby(["allocator", "base"])}
    from_cells = cell_ablations(comparisons[metric].results if comparisons else None, metric, skip=answered)
    if from_cells.empty:
        return from_trials[COLUMNS]
    out = [from_trials[from_trials["workload"] != "all"], from_cells]
    for (defence, alloc, base), rows in pd.concat(out).groupby(["defence", "allocator", "base"], sort=False):
        pooled_by_compare = from_trials[(from_trials["allocator"] == alloc) & (from_trials["base"] == base)
                                        & (from_trials["workload"] == "all")]
        if not ((from_cells["allocator"] == alloc) & (from_cells["base"] == base)).any():
            out.append(pooled_by_compare)
            continue
        pooled = estimators.pooled_mean_difference([estimators.Difference.of_row(r) for _, r in rows.iterrows()])
        lo, hi = pooled.interval()
        out.append(pd.DataFrame([{"defence": defence, "allocator": alloc, "base": base, "metric": metric,
                                  "workload": "all", "ratio": math.exp(pooled.estimate), "ci_low": math.exp(lo),
                                  "ci_high": math.exp(hi), "n": len(rows), "n_base": len(rows)}]))
    return pd.concat(out, ignore_index=True)[COLUMNS]
