"""The exploitation-primitive numbers (CSV, JSON) and figure (SVG) for the paper, from the primitives.csv
tables of the probe runs (probes/primitive_sequences.c, analysis/stats/primitives.py)."""
import json
from pathlib import Path

import numpy as np

from analysis.contract import dataset
from analysis.errors import HeapcostError
from analysis.paths import RUNS_DIR
from analysis.publish.render.figures import pyplot, save
from analysis.stats import primitives as PR
from analysis.stats import security

TABLE = "primitives.csv"
COLUMNS = [f"{c}/{k}" for c, k in ((c, k) for c in PR.BUG_CLASSES[:-1] for k in PR.CAPABILITIES)] + ["control/none"]


def reported_primitive_rows(runs_dir=RUNS_DIR) -> list[dict]:
    """Every complete probe run's primitives.csv; each allocator's rows from the newest run that has it.
    `runs_dir`: the runs folder or its Dataset."""
    ds = dataset.load(runs_dir)
    latest: dict[str, list[dict]] = {}
    for run in ds.run_ids():  # oldest first: a newer run replaces the allocators it ran
        if "-probe-" not in run or ds.info(run).get("status") != "complete":
            continue
        rows = ds.rows(run, TABLE)
        if rows is None:
            continue
        by_alloc: dict[str, list[dict]] = {}
        for r in rows:
            by_alloc.setdefault(r["allocator"], []).append(r)
        latest.update(by_alloc)
    if not latest:
        raise HeapcostError("no probe run of the dataset has a primitives.csv: run `make probe` first")
    return [r for rows in latest.values() for r in rows]


def primitive_rows_if_any(runs_dir=RUNS_DIR) -> list[dict]:
    """reported_primitive_rows, or [] when no probe run of the dataset has a primitives.csv (`runs_dir`: the
    runs folder or its Dataset)."""
    try:
        return reported_primitive_rows(runs_dir)
    except HeapcostError:
        return []


def number_or_none(v):
    """A table cell as a float, or None when it is empty, not a number or NaN."""
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return None if x != x else x


def table(rows: list[dict]) -> list[dict]:
    """One row per allocator and cell: P(any primitive) with its interval, each primitive's count, detections."""
    by_cell: dict[tuple, dict] = {}
    for r in rows:
        cell = by_cell.setdefault((r["allocator"], r["bug_class"], r["capability"]), {})
        cell[r["primitive"]] = r
    out = []
    for (alloc, bug, cap), prims in sorted(by_cell.items()):
        anyrow, strong = prims.get(PR.ANY, {}), prims.get(PR.STRONG, {})
        out.append({"allocator": alloc, "bug_class": bug, "capability": cap,
                    "sequences": int(number_or_none(anyrow.get("sequences")) or 0),
                    "any_rate": number_or_none(anyrow.get("rate")), "any_ci_low": number_or_none(anyrow.get("rate_ci_low")),
                    "any_ci_high": number_or_none(anyrow.get("rate_ci_high")),
                    "strong_rate": number_or_none(strong.get("rate")), "strong_ci_low": number_or_none(strong.get("rate_ci_low")),
                    "strong_ci_high": number_or_none(strong.get("rate_ci_high")),
                    **{p: int(number_or_none(prims[p].get("count")) or 0) if p in prims else None for p in PR.PRIMITIVES},
                    "detected": int(number_or_none(anyrow.get("detected")) or 0),
                    "median_attempts": number_or_none(anyrow.get("median_attempts")), "detail": anyrow.get("detail", "")})
    return out


def matrix_figure(cells: list[dict], path: Path, key: str = "strong_rate", label: str = "P(strong primitive)") -> None:
    """A primitive's probability per allocator (rows) and bug class / capability (columns); blank: not run."""
    plt = pyplot()
    order = sorted({c["allocator"] for c in cells})
    rate = {(c["allocator"], f"{c['bug_class']}/{c['capability']}"): c[key] for c in cells if c["sequences"]}
    grid = np.array([[rate.get((a, col), np.nan) for col in COLUMNS] for a in order], dtype=float)
    fig, ax = plt.subplots(figsize=(1.5 + 0.45 * len(COLUMNS), 1.0 + 0.17 * len(order)))  # legible on one page
    im = ax.imshow(grid, cmap="rocket_r", vmin=0, vmax=1, aspect="auto")
    for i in range(len(order)):
        for j in range(len(COLUMNS)):
            if not np.isnan(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:.2f}".lstrip("0") if grid[i, j] < 1 else "1", ha="center", va="center",
                        fontsize=6, color="white" if grid[i, j] > 0.5 else "black")
    ax.set_xticks(range(len(COLUMNS)), COLUMNS, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(len(order)), order, fontsize=7)
    ax.grid(False)
    fig.colorbar(im, ax=ax, label=label, shrink=0.6)
    save(fig, path)


def write_outputs(rows: list[dict], out_dir, *, claims: dict | None = None, prefix: str = "primitives_") -> dict:
    """primitives_table.csv, primitives_disagreements.csv, primitives_numbers.json, primitives_matrix.svg (the
    strong primitives) and primitives_any_matrix.svg; returns the numbers."""
    import csv

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if claims is None:
        from analysis.publish.security.writer import catalogue_claims

        claims = catalogue_claims()
    cells = table(rows)
    with open(out_dir / f"{prefix}table.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(cells[0]) if cells else ["allocator"])
        w.writeheader()
        for c in cells:
            w.writerow({k: round(v, 4) if isinstance(v, float) else v for k, v in c.items()})
    ran = [c for c in cells if c["sequences"]]
    numbers = {
        "allocators": sorted({c["allocator"] for c in ran}),
        "sequences_per_cell_min": min((c["sequences"] for c in ran), default=0),
        "cells": len(ran),
        "seed": sorted({int(number_or_none(r.get("seed")) or 0) for r in rows}),
        "overflow_bytes": list(PR.OVERFLOW_BYTES),
        "confidence_percent": round(100 * PR.CONFIDENCE),
        "knockouts": PR.knockout_checks(rows),
        "leak_gains": PR.leak_gains(rows),
        "disagreements": PR.claim_disagreements(rows, claims),
        "false_positives": [{"allocator": r["allocator"], "count": int(number_or_none(r["count"]))}
                            for r in PR.false_positives(rows)],
        "none_found": sorted(a for a in {c["allocator"] for c in ran}
                             if not PR.found_anywhere(rows, a)),
        "no_strong_found": sorted(a for a in {c["allocator"] for c in ran}
                                  if not PR.found_anywhere(rows, a, PR.STRONG)),
    }
    summary = PR.disagreement_summary(numbers["disagreements"])
    numbers["disagreeing_allocators"] = sorted({d["allocator"] for d in summary})
    with open(out_dir / f"{prefix}disagreements.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["allocator", "defence", "cells", "worst"])
        w.writeheader()
        w.writerows(summary)
    (out_dir / f"{prefix}numbers.json").write_text(json.dumps(numbers, indent=2, sort_keys=True) + "\n")
    if ran:
        matrix_figure(ran, out_dir / f"{prefix}matrix.svg")
        matrix_figure(ran, out_dir / f"{prefix}any_matrix.svg", key="any_rate", label="P(any primitive)")
    return numbers


def write_absent(out_dir, why: str, *, prefix: str = "primitives_") -> None:
    """A dataset without primitives: primitives_numbers.json says why, and the paper says the part is absent."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{prefix}numbers.json").write_text(json.dumps({"absent": why}, indent=2) + "\n")


def scored_rows(runs_dir, probe_rows: list[dict]) -> list[dict]:
    """The rows the security score reads: the probes' rows and the exploitation-primitive cells of the probe
    runs (security.primitive_score_rows), for the allocators the probe rows have. `runs_dir`: the runs folder
    or its Dataset."""
    primitive_rows = primitive_rows_if_any(runs_dir)
    probed = {r["allocator"] for r in probe_rows}
    return list(probe_rows) + [r for r in security.primitive_score_rows(primitive_rows) if r["allocator"] in probed]
