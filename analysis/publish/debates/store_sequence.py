"""Seed 002's mechanism, timed alone: the store-sequence microbenchmark (mechanism runs, harness/mechanisms/store_sequence.py)
per host. results_store_sequence.csv has a row per host, working set, size and sequence (ns per sequence with its
interval over the run's blocks) and, at the shipped poison's size, a row per difference of gcc's string store and
clang's call to memset (`minus` names the sequence subtracted, block by block); results_store_sequence_wide.csv
has the same cells as a table, a column per sequence. Each host's newest complete mechanism run answers for it
(`runs_on_host` counts the others): runs of one host are not pooled, so a run measured on a busy machine is
replaced by measuring again, not averaged in."""
import math
from pathlib import Path

import pandas as pd

from analysis.contract import dataset
from analysis.contract.schema import STORE_SEQUENCES
from analysis.publish.debates import pool
from analysis.stats import store_sequence as S

KIND = "mechanism"
TABLE = "store_sequence.csv"
COLUMNS = ["processor", "run_id", "runs_on_host", "heap_kib", "working_set", "bytes", "sequence", "minus", "n_blocks",
           "ns", "ci_low", "ci_high", "display"]
WIDE_KEYS = ["processor", "working_set", "bytes"]


def ns_display(ns, low, high) -> str:
    """ns [low, high] at three significant digits of the estimate, the bounds to the same decimals."""
    if ns is None or not math.isfinite(ns):
        return "n/a"
    decimals = max(0, 2 - math.floor(math.log10(abs(ns)))) if ns else 2
    text = f"{ns:.{decimals}f}"
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return text
    return f"{text} [{low:.{decimals}f}, {high:.{decimals}f}]"


def host_runs(runs_dir: Path) -> dict[str, list]:
    """{processor label: its complete mechanism runs holding the table, oldest first}, of the dataset (or its
    runs folder)."""
    ds = dataset.load(runs_dir)
    runs = [r for r in ds.runs(KIND) if r.complete and ds.has(r, TABLE)]
    labels = pool._processors(ds) if runs else {}
    out: dict[str, list] = {}
    for r in runs:
        out.setdefault(labels.get(r.run_id, r.run_id), []).append(r)
    return out


def results(runs_dir: Path | None) -> pd.DataFrame:
    """The cells and the differences at POISON_BYTES of each host's newest mechanism run (COLUMNS), from the
    dataset (or its runs folder; None for none)."""
    rows = []
    ds = dataset.load(runs_dir) if runs_dir else None
    for processor, runs in sorted(host_runs(ds).items()) if ds is not None else []:
        run = runs[-1]
        table = ds.table(run, TABLE)
        common = {"processor": processor, "run_id": run.run_id, "runs_on_host": len(runs),
                  "heap_kib": (run.info.get("params") or {}).get("heap_kib")}
        for r in S.cells(table).to_dict("records"):
            rows.append({**common, **r, "minus": ""})
        for r in S.differences(table, S.DIFFERENCES, S.POISON_BYTES).to_dict("records"):
            rows.append({**common, **r})
    out = pd.DataFrame(rows, columns=COLUMNS)
    if len(out):
        out["display"] = [ns_display(r.ns, r.ci_low, r.ci_high) for r in out.itertuples()]
        order = {s: i for i, s in enumerate(STORE_SEQUENCES)}
        out = out.assign(_m=out["minus"] != "", _s=out["sequence"].map(order)).sort_values(
            ["processor", "_m", "working_set", "bytes", "_s"]).drop(columns=["_m", "_s"]).reset_index(drop=True)
    return out


def wide(long: pd.DataFrame) -> pd.DataFrame:
    """The cells (not the differences) with a column per sequence holding its display."""
    cells = long[long["minus"] == ""] if len(long) else long
    present = [s for s in STORE_SEQUENCES if len(cells) and s in set(cells["sequence"])]
    if not len(cells):
        return pd.DataFrame(columns=[*WIDE_KEYS, *STORE_SEQUENCES])
    table = cells.pivot_table(index=WIDE_KEYS, columns="sequence", values="display", aggfunc="first")
    return table.reindex(columns=present).reset_index()


def numbers(long: pd.DataFrame) -> dict:
    """What the paper's text reads besides the table: the hosts, the size of the differences, the blocks."""
    diffs = long[long["minus"] != ""] if len(long) else long
    return {"hosts": sorted(set(long["processor"])) if len(long) else [],
            "runs": sorted(set(long["run_id"])) if len(long) else [],
            "poison_bytes": S.POISON_BYTES,
            "heap_kib": sorted({int(k) for k in long["heap_kib"].dropna()}) if len(long) else [],
            "blocks": sorted({int(b) for b in long["n_blocks"]}) if len(long) else [],
            "differences": int(len(diffs))}
