"""A program's predicted cost under each allocator, from its allocation profile and the dataset's per-call costs
(stats/cost_model.py): the predictions and what carries them, the profile read and placed against the programs the
model was checked on, a processor kind named by part of its label. `python -m analysis cost` (cost.py) prints
them; the cost check (cost_check.py) registers them.
"""
import math
from pathlib import Path

import pandas as pd

from analysis.errors import HeapcostError

COLUMNS = ["processor", "allocator", "ratio", "low", "high", "inputs_low", "inputs_high", "model_error_percent",
           "model_error_from", "machine_spread_percent", "added_s", "why"]
# what a profile is checked against: the range the checked programs span (name, what it is, its format)
FEATURES = (("calls_per_ms", "allocation calls per ms of CPU time", "{:.3g}"),
            ("large_share", "share of calls above the largest measured small class", "{:.3f}"),
            ("realloc_share", "share of calls that are reallocs", "{:.3f}"),
            ("threads", "threads that allocate", "{:.0f}"),
            ("processes", "processes that allocate", "{:.0f}"),
            ("grown_within_kib", "largest block grown within its pages, KiB (the small grow cells' per-byte cost is "
             "linear in the block)", "{:.0f}"))


def family_of(allocator: str) -> str:
    """The allocator's family in the catalogue (a layout build's is its base's); its own name if unknown."""
    from analysis.harness.allocators.catalog import layout_of

    base = layout_of(allocator)[0]
    entry = _catalog().get(base)
    return entry.family if entry else base


_CATALOG: dict = {}


def _catalog() -> dict:
    if not _CATALOG:
        from analysis.harness.allocators.catalog import load_catalog
        _CATALOG.update(load_catalog())
    return _CATALOG


# ---- what a profile is, against what the model was checked on ----

def features(profile: pd.DataFrame, costs: pd.DataFrame) -> dict:
    """The profile's FEATURES: how densely it allocates, how much of it is large blocks and reallocs, threads and
    processes, and the largest class it grew within a block's pages."""
    from analysis.stats import cost_model

    calls = cost_model.class_calls(profile)
    total = float(calls["calls"].sum()) if len(calls) else 0.0
    small = costs.loc[costs["pattern"].isin(cost_model.SMALL_PATTERNS), "size_class"] if len(costs) else []
    largest = max((int(c) for c in small), default=None)
    large = float(calls.loc[calls.index > largest, "calls"].sum()) if largest is not None and total else 0.0
    realloc = sum(cost_model.profile_value(profile, q) or 0.0 for q in ("realloc_calls", "reallocarray_calls"))
    base = cost_model.base_time(profile)
    return {"calls_per_ms": total / (1000 * base) if base else float("nan"),
            "large_share": large / total if total else 0.0,
            "realloc_share": realloc / total if total else 0.0,
            "threads": cost_model.profile_value(profile, "threads") or 0.0,
            "processes": cost_model.profile_value(profile, "processes") or 0.0,
            "grown_within_kib": float(max(cost_model.grown_within(profile).index, default=0)) / 1024}


def outside_checked(profile: pd.DataFrame, costs: pd.DataFrame, checked: pd.DataFrame) -> list[str]:
    """The FEATURES of the profile that lie outside the range of the checked programs', each as a phrase."""
    if checked.empty:
        return []
    mine = features(profile, costs)
    out = []
    for name, what, fmt in FEATURES:
        lo, hi = float(checked[name].min()), float(checked[name].max())
        v = mine[name]
        if not math.isnan(v) and not (lo <= v <= hi):
            out.append(f"{what} {fmt.format(v)} (checked: {fmt.format(lo)} to {fmt.format(hi)})")
    return out


# ---- the predictions ----

def match_processor(given: str, known) -> str:
    """The one processor kind of `known` whose label holds `given` (any part of it, case and spaces ignored; an
    exact label wins), or a one-line error naming the kinds."""
    known = sorted(set(known))
    if given in known:
        return given
    want = " ".join(given.lower().split())
    hits = [k for k in known if want and want in " ".join(k.lower().split())]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise HeapcostError(f"no per-call costs on a processor matching {given!r}; kinds: {'; '.join(known)}")
    raise HeapcostError(f"{given!r} matches {len(hits)} processor kinds: {'; '.join(hits)}; give more of the label")


def unrequested(allocator: str, baseline: str, aa_copies) -> bool:
    """Whether a configuration is shown only when asked for by name: the baseline, an A/A copy of it, a layout
    build (another build of the same source, for the noise model), heapcost's placement allocator (measured per
    call to see what its own calls add to a profile's placement runs, not an allocator to choose)."""
    from analysis.harness.allocators.catalog import layout_of
    from analysis.stats.cost_model import PLACEMENT_ALLOCATOR

    return (allocator == baseline or allocator in aa_copies or layout_of(allocator)[1] > 1
            or allocator == PLACEMENT_ALLOCATOR)


def predictions(profile: pd.DataFrame, costs: pd.DataFrame, allocators=None, processor=None,
                startup: bool = False, residuals: pd.DataFrame | None = None, baseline: str = "glibc",
                aa_copies=frozenset(), machine_spread: tuple[float, float] | None = None,
                premiums: dict | None = None) -> pd.DataFrame:
    """One row per processor kind and allocator: the predicted ratio and its interval (COLUMNS). `allocators`:
    those asked for (default every one measured but the unrequested ones); `processor`: any unambiguous part of
    a kind's label (default every kind); `residuals`: the checked programs' misses, whose conformal half-width
    joins the interval (none given: the inputs' interval alone); `machine_spread`: the between-machine SD of a
    log ratio and the t quantile of its degrees of freedom, whose half-width for a new machine of the kind joins
    it too (cost_model.machine_half_width, from the machines behind the per-call costs; none given: the interval
    is for the machines that measured them); `premiums`: {configuration: stats/cost_terms.Premium}, the time each
    allocation call adds in a program beyond the per-call cells, for the configurations whose model takes it
    (none given: the per-call model alone)."""
    from analysis.stats import cost_model

    if costs.empty:
        raise HeapcostError("the dataset has no per-call costs: measure the calls workloads first "
                            "(make measure WORKLOADS=calls ALLOCATORS=glibc,... PROTOCOL=lockstep)")
    chosen = costs
    if allocators:
        unknown = sorted(set(allocators) - set(costs["allocator"]))
        if unknown:
            raise HeapcostError(f"no per-call costs of {', '.join(unknown)}; measured: "
                                f"{', '.join(sorted(set(costs['allocator'])))}")
        chosen = chosen[chosen["allocator"].isin(allocators)]
    else:
        chosen = chosen[[not unrequested(a, baseline, aa_copies) for a in chosen["allocator"]]]
    if processor:
        processor = match_processor(processor, costs["processor"])
        chosen = chosen[chosen["processor"] == processor]
    residuals = residuals if residuals is not None else pd.DataFrame(columns=cost_model.RESIDUAL_COLUMNS)
    rows = []
    for allocator in sorted(set(allocators or ()) - set(chosen["allocator"])):  # asked for, not on that kind
        rows.append({**dict.fromkeys(COLUMNS), "processor": processor, "allocator": allocator,
                     "why": "no per-call costs on this processor kind"})
    for (host, allocator), cells in chosen.groupby(["processor", "allocator"], sort=True):
        row = dict.fromkeys(COLUMNS)
        row.update(processor=host, allocator=allocator, why="")
        try:
            p = cost_model.predict(profile, cells, startup=startup)
        except HeapcostError as exc:
            rows.append({**row, "why": str(exc)})
            continue
        if premiums and allocator in premiums:
            p = premiums[allocator].applied(p)
        error = cost_model.model_error(residuals, allocator, family_of(allocator)) if len(residuals) else None
        low, high = (cost_model.with_model_error(p.ratio, p.low, p.high, error) if error is not None
                     else (p.low, p.high))
        machine_half_log = None
        if machine_spread is not None:
            measured = int(cells["n_machines"].min()) if "n_machines" in cells.columns else 1
            machine_half_log = cost_model.machine_half_width(*machine_spread, measured_machines=measured)
            low, high = cost_model.widened(p.ratio, low, high, machine_half_log)
        rows.append({**row, "ratio": p.ratio, "low": low, "high": high, "inputs_low": p.low, "inputs_high": p.high,
                     "model_error_percent": (100 * math.expm1(error.half_log)
                                             if error is not None and error.half_log is not None else None),
                     "model_error_from": (f"{error.residuals} misses of {error.programs} checked programs "
                                          f"({error.scope})" if error is not None else "not checked"),
                     "machine_spread_percent": 100 * math.expm1(machine_half_log) if machine_half_log else None,
                     "added_s": p.added_s})
    return pd.DataFrame(rows, columns=COLUMNS)


def explain(profile: pd.DataFrame, costs: pd.DataFrame, processor: str, allocator: str,
            startup: bool = False, top: int = 8, premiums: dict | None = None) -> pd.DataFrame:
    """The measured cells that carry a prediction's added time, largest share first: each cell's pattern and
    size class, the pairs the program's calls stand for, the nanoseconds a pair adds, and its share (the
    configuration's premium, where it takes one, a part of its own: every call one pair)."""
    from analysis.stats import cost_model

    cells = costs[(costs["processor"] == processor) & (costs["allocator"] == allocator)]
    p = cost_model.predict(profile, cells, startup=startup)
    if premiums and allocator in premiums:
        p = premiums[allocator].applied(p)
    parts = p.parts.copy()
    total = float(parts["added_s"].abs().sum())
    parts["share"] = parts["added_s"].abs() / total if total > 0 else 0.0
    parts = parts.sort_values(["share", "pattern", "size_class"], ascending=[False, True, True])
    return parts[(parts["share"] >= 0.01) | (parts.index == parts.index[0])].head(top) if len(parts) else parts


def read_profile(path: Path) -> pd.DataFrame:
    from analysis.contract.profile_schema import PROFILE_COLUMNS

    try:
        profile = pd.read_csv(path, dtype={"quantity": str})
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise HeapcostError(f"{path}: not a readable profile ({exc.__class__.__name__})") from None
    missing = [c for c in PROFILE_COLUMNS if c not in profile.columns]
    if missing:
        raise HeapcostError(f"{path}: not an allocation profile (no column {', '.join(missing)}); "
                            "`python -m analysis profile --out FILE.csv -- PROGRAM ARGS` writes one")
    return profile
