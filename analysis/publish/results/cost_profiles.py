"""What a registration's profiles say of its check's misses (publish/results/cost_check.py): the buffers a
program grows in place, the heap its baseline gives back and the bytes it holds, whether its profiles record the
blocks of each class held at once, and, where they do, what charging such classes at the held cells
(stats/cost_model.weights) did to the per-call model's errors, and what the cells of one size and the grow cell did
(cells_effect). Reads the profiles and a check's table, never the runs.
"""
import math
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.stats.cost_model import GROWN_CLASS

# what a far miss's registered profile says of its large blocks: where the model's charge for them can be wrong
BIG_CLASS = GROWN_CLASS  # a block of this size or more: its pages, not its call, carry what an allocator adds to it


def profiles_hold_peaks(folder: Path) -> bool:
    """Whether a registration's profiles record each class's most blocks live at once (peak_live_blocks): only
    then do its predictions take the held cells (stats/cost_model.weights)."""
    return any("\npeak_live_blocks," in path.read_text() for path in sorted((Path(folder) / "profiles").glob("*.csv")))


def profiles_count_same_size(folder: Path) -> bool:
    """Whether a registration's profiles count the reused frees taken by the size just freed
    (frees_reused_same_size): only then were its predictions made with the cells of one size, where the kind had
    them (stats/cost_model.weights)."""
    return _profiles_record(folder, "frees_reused_same_size")


def profiles_count_grow_pages(folder: Path) -> bool:
    """Whether a registration's profiles count the pages their in-place grows added (realloc_grown_in_place_pages):
    only then were its predictions made with both grow cells, the grows split between them
    (stats/cost_model.grown_pairs)."""
    return _profiles_record(folder, "realloc_grown_in_place_pages")


def _profiles_record(folder: Path, quantity: str) -> bool:
    return any(f"\n{quantity}," in path.read_text() for path in sorted((Path(folder) / "profiles").glob("*.csv")))


def held_effect(folder: Path, table: pd.DataFrame, costs: pd.DataFrame) -> dict:
    """On a registration whose profiles record blocks held at once: the per-call model's |error| over the measured
    cells with the held cells and with the profiles' peak_live_blocks dropped (every class charged at the cells of
    many live blocks, as before the held cells), median and 90th percentile in percent, and the cells it moved
    by more than 1%. Empty where the profiles do not record it or nothing is measured."""
    from analysis.publish.results.cost_prediction import read_profile
    from analysis.stats import cost_model

    done = table[table["measured"].notna()] if len(table) else table
    if not profiles_hold_peaks(folder) or done.empty:
        return {}
    errors = {"with": [], "without": []}
    moved = 0
    for r in done.itertuples():
        prof = read_profile(Path(folder) / "profiles" / f"{r.program}.csv")
        cells = costs[(costs["processor"] == r.processor) & (costs["allocator"] == r.allocator)]
        with_ = cost_model.predict(prof, cells).ratio
        without = cost_model.predict(prof[prof["quantity"] != "peak_live_blocks"], cells).ratio
        moved += abs(math.log(with_ / without)) > math.log(1.01)
        errors["with"].append(abs(math.log(float(r.measured) / with_)))
        errors["without"].append(abs(math.log(float(r.measured) / without)))
    out = {"cells": int(len(done)), "moved": int(moved)}
    for k, e in errors.items():
        out[f"median_{k}"] = f"{100 * math.expm1(float(np.median(e))):.1f}"
        out[f"p90_{k}"] = f"{100 * math.expm1(float(np.quantile(e, 0.9))):.1f}"
    return out


def same_size_effect(table: pd.DataFrame, costs: pd.DataFrame, newer: dict, folder: Path | None = None) -> dict:
    """On a registration whose programs have a profile that counts reuse by the size just freed (the newer one,
    `newer`: cost_reprofile.newer_profiles's, else the registered one in `folder`) and whose processor kind
    measured the cells of one size: cells_effect of those cells (without them, every pair at the cells of drawn
    sizes, as before)."""
    from analysis.stats import cost_model

    return cells_effect(table, costs, newer, folder, list(cost_model.SAME_SIZE.values()), "frees_reused_same_size")


def grow_effect(table: pd.DataFrame, costs: pd.DataFrame, newer: dict, folder: Path | None = None) -> dict:
    """cells_effect of the grow cells (without them, a large block grown in place under the baseline costs
    nothing, as before), on every program whose kind measured them."""
    from analysis.stats import cost_model

    return cells_effect(table, costs, newer, folder, [*cost_model.GROW_STEPS, cost_model.GROW_SMALL])


def grow_page_effect(table: pd.DataFrame, costs: pd.DataFrame, newer: dict, folder: Path | None = None) -> dict:
    """cells_effect of the grow cell a page at a time (without it, every grow takes the 64 KiB cell, as before),
    on every program whose profile counts the pages its in-place grows added and whose kind measured the cell; the
    small cell, which needs it, left out of both sides (grow_small_effect)."""
    from analysis.stats import cost_model

    return cells_effect(table, costs, newer, folder, [cost_model.GROW_PAGE], "realloc_grown_in_place_pages",
                        apart=[cost_model.GROW_SMALL])


def grow_small_effect(table: pd.DataFrame, costs: pd.DataFrame, newer: dict, folder: Path | None = None) -> dict:
    """cells_effect of the grow cell in steps under a page (without it, a grow within a large block's pages is
    free, as before: stats/cost_model.grown_within_pages), on every program whose profile counts the grows that
    added pages in place and whose kind measured the cell."""
    from analysis.stats import cost_model

    return cells_effect(table, costs, newer, folder, [cost_model.GROW_SMALL], "realloc_grown_in_place")


def cells_effect(table: pd.DataFrame, costs: pd.DataFrame, newer: dict, folder: Path | None, patterns: list,
                 quantity: str | None = None, apart: list = ()) -> dict:
    """The per-call model's |error| over a registration's measured cells with the cells of `patterns` and
    without them, median and 90th percentile in percent, the cells they moved by more than 1%, and the cell they
    moved furthest: on each program's newer profile (`newer`) or else its registered one (in `folder`), those
    profiles that record `quantity` where one is named, and the configurations whose kind measured such a cell.
    The cells of `apart` are left out of both sides. Empty where none is so or nothing is measured."""
    from analysis.publish.results.cost_prediction import read_profile
    from analysis.stats import cost_model

    def profile_of(program):
        if program in newer:
            return newer[program][0]
        path = Path(folder) / "profiles" / f"{program}.csv" if folder is not None else None
        return read_profile(path) if path is not None and path.is_file() else None

    chosen = list(patterns)
    done = table[table["measured"].notna()] if len(table) else table
    if done.empty or costs is None or costs.empty:
        return {}
    profiles = {p: profile_of(p) for p in set(done["program"])}
    profiles = {p: prof for p, prof in profiles.items()
                if prof is not None and (quantity is None or (prof["quantity"] == quantity).any())}
    errors, rows = {"with": [], "without": []}, []
    for r in done[done["program"].isin(list(profiles))].itertuples():
        cells = costs[(costs["processor"] == r.processor) & (costs["allocator"] == r.allocator)
                      & ~costs["pattern"].isin(list(apart))]
        if not cells["pattern"].isin(chosen).any():
            continue
        prof = profiles[r.program]
        with_ = cost_model.predict(prof, cells).ratio
        without = cost_model.predict(prof, cells[~cells["pattern"].isin(chosen)]).ratio
        errors["with"].append(abs(math.log(float(r.measured) / with_)))
        errors["without"].append(abs(math.log(float(r.measured) / without)))
        rows.append((abs(math.log(with_ / without)), r.program, r.allocator, without, with_, float(r.measured)))
    if not rows:
        return {}
    far = max(rows)
    out = {"cells": len(rows), "moved": sum(m > math.log(1.01) for m, *_ in rows),
           "largest": {"program": far[1], "allocator": far[2], "without": f"{far[3]:.3f}", "with": f"{far[4]:.3f}",
                       "measured": f"{far[5]:.3f}"}}
    for k, e in errors.items():
        out[f"median_{k}"] = f"{100 * math.expm1(float(np.median(e))):.1f}"
        out[f"p90_{k}"] = f"{100 * math.expm1(float(np.quantile(e, 0.9))):.1f}"
    return out


def block_growth(folder: Path) -> dict:
    """{program: (growing reallocs, of them moved under the baseline, MiB the baseline's heap grew and shrank
    back, KiB live at the program's peak, of them KiB of small blocks (cost_model.held_small_kib))} from a
    registration's profiles: a buffer grown in place, a heap top the baseline gives back and takes again, few
    large blocks live at once where the cells hold 256, or a heap of small blocks far beyond the cells' 256, is
    what the cells' charge for a block of each size does not describe."""
    from analysis.publish.results.cost_prediction import read_profile
    from analysis.stats import cost_model

    out = {}
    for path in sorted((Path(folder) / "profiles").glob("*.csv")):
        prof = read_profile(path)
        value = lambda q: cost_model.profile_value(prof, q) or 0.0  # noqa: E731
        out[path.stem] = (int(value("realloc_grow")), int(value("realloc_moved")),
                          min(value("brk_grow_bytes"), value("brk_shrink_bytes")) / 2**20,
                          value("peak_live_bytes") / 1024, cost_model.held_small_kib(prof))
    return out
