"""Our ratios beside the field's published ones (data/literature/field.csv): the same mimalloc-bench program,
the same pair of allocators, their number against ours with its interval.

A published figure is a ratio of two allocators' times (theirs: `allocator` over `reference`, printed or
stated). Ours is measured directly between the two heapcost allocators it maps to, from the trials of a
run that ran both on the workload the program was brought as (compare, the same estimator and interval as
every speed result), not derived from two ratios to glibc. The published numbers are mostly single runs on
other machines: they have no interval, so a figure "agrees" when it lies inside our interval and otherwise
is reported as higher or lower than ours, by how much.
"""
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.errors import HeapcostError
from analysis.publish.dataset import paper_runs
from analysis.publish.render.products import write_csv
from analysis.publish.results.comparisons import against
from analysis.publish.render.formats import fmt_interval, fmt_ratio

FIELD_CSV = "field.csv"
COLUMNS = ["benchmark", "workload", "pair", "source", "url", "published", "machine", "versions", "kind",
           "theirs", "ours", "ours_low", "ours_high", "n", "run_id", "verdict", "theirs_display", "ours_display"]
REQUIRED = ["source", "url", "machine", "versions", "benchmark", "workload", "allocator", "reference",
            "our_allocator", "our_reference", "metric", "ratio", "kind", "text"]
MIB_PREFIX = "mib-"  # workloads brought from mimalloc-bench are named mib-<program> (data/literature/README.md)


def load_field(path: Path) -> pd.DataFrame:
    """The published figures, checked: every required column, a positive ratio on every row."""
    path = Path(path)
    if not path.is_file():
        raise HeapcostError(f"{path} does not exist: the field's published figures are read from it")
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in REQUIRED if c not in table.columns]
    if missing:
        raise HeapcostError(f"{path} lacks the column(s) {', '.join(missing)}")
    ratio = pd.to_numeric(table["ratio"], errors="coerce")
    bad = table[~(ratio > 0)]
    if len(bad):
        raise HeapcostError(f"{path}: row {int(bad.index[0]) + 2} has no positive ratio ({bad.iloc[0]['ratio']!r})")
    return table.assign(ratio=ratio)


def verdict(theirs: float, ours: float, low: float, high: float) -> str:
    if not np.isfinite(ours):
        return "not measured here"
    if low <= theirs <= high:
        return "agrees (inside our interval)"
    side = "higher" if theirs > high else "lower"
    return f"theirs {abs(theirs / ours - 1) * 100:.0f}% {side} than ours"


def our_ratio(tables: list[tuple[str, pd.DataFrame]], workload: str, allocator: str, reference: str,
              metric: str = "wall_s") -> dict:
    """allocator / reference on workload from the newest run that ran both (ratio, interval, n, run)."""
    for run_id, table in reversed(tables):
        sub = table[(table["workload"] == workload) & table["allocator"].isin([allocator, reference])]
        if set(sub["allocator"]) != {allocator, reference}:
            continue
        try:
            row = against(sub, reference, metric).results.set_index("allocator").loc[allocator]
        except (HeapcostError, KeyError):
            continue
        return {"ours": float(row["ratio"]), "ours_low": float(row["ci_low"]), "ours_high": float(row["ci_high"]),
                "n": int(row["n"]), "run_id": run_id}
    return {"ours": np.nan, "ours_low": np.nan, "ours_high": np.nan, "n": 0, "run_id": ""}


def side_by_side(field: pd.DataFrame, tables: list[tuple[str, pd.DataFrame]]) -> pd.DataFrame:
    """One row per published figure: theirs, ours with its interval, and the verdict."""
    rows = []
    for _, f in field.iterrows():
        ours = our_ratio(tables, f["workload"], f["our_allocator"], f["our_reference"])
        rows.append({
            "benchmark": f["benchmark"], "workload": f["workload"],
            "pair": f"{f['allocator']} / {f['reference']} = {f['our_allocator']} / {f['our_reference']}",
            "source": f["source"], "url": f["url"], "published": f.get("published", ""), "machine": f["machine"],
            "versions": f["versions"], "kind": f["kind"], "theirs": float(f["ratio"]), **ours,
            "verdict": verdict(float(f["ratio"]), ours["ours"], ours["ours_low"], ours["ours_high"]),
            "theirs_display": fmt_ratio(float(f["ratio"])),
            "ours_display": (fmt_interval(ours["ours"], ours["ours_low"], ours["ours_high"])
                             if np.isfinite(ours["ours"]) else "not measured")})
    return pd.DataFrame(rows, columns=COLUMNS)


def time_tables(data_dir: Path) -> list[tuple[str, pd.DataFrame]]:
    """(run id, trials) of every contributing time run, oldest first."""
    _, runs = paper_runs.contributing_runs(Path(data_dir) / "runs", "time")
    return [(rt.run_id, rt.table) for rt in runs if len(rt.table)]


def programs_without_figures(tables: list[tuple[str, pd.DataFrame]], field: pd.DataFrame) -> list[str]:
    """The mimalloc-bench programs we measured that no published source gives a figure for."""
    measured = {w for _, t in tables for w in t["workload"].astype(str) if w.startswith(MIB_PREFIX)}
    return sorted(measured - set(field["workload"]))


def write_outputs(data_dir: Path, out_csv: Path) -> dict:
    """field.csv beside our ratios into out_csv; the numbers the paper states about it."""
    field_path = Path(data_dir) / "literature" / FIELD_CSV
    if not field_path.is_file():
        return {}
    field = load_field(field_path)
    tables = time_tables(data_dir)
    table = side_by_side(field, tables)
    write_csv(table, out_csv)
    measured = table[table["n"] > 0]
    return {"figures": int(len(table)), "sources": int(table["source"].nunique()),
            "compared": int(len(measured)),
            "agree": int(measured["verdict"].str.startswith("agrees").sum()),
            "disagree": int((~measured["verdict"].str.startswith("agrees")).sum()),
            "not_measured": sorted(set(table.loc[table["n"] == 0, "pair"])),
            "benchmarks": sorted(set(table["benchmark"])),
            "no_source": [w[len(MIB_PREFIX):] for w in programs_without_figures(tables, field)]}
