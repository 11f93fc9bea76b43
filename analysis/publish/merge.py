"""Every complete run of the dataset contributes to the paper, whatever its profile and allocators.

A comparison is always made inside one run, against that run's own baseline (runs differ in machine load,
profile and scale, so a ratio across runs would mix their conditions). When several runs measure the same
allocator, the one with the most usable measurements leads (then the run reported for the kind, then the
newest); the others are shown beside it in the replication table. A user's run of the baseline and a
brought allocator (EXTRA_ALLOCATORS) thus adds that allocator to every table without re-running the rest.
"""
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analysis.contract.runstore import Run, pick_run, runs_of_kind
from analysis.contract.schema import read_rows, read_table, usable_trials
from analysis.errors import warn

TABLES = {"time": "trials.csv", "callgrind": "counts.csv", "probe": "probes.csv"}


@dataclass
class RunTable:
    run: Run
    table: pd.DataFrame | list[dict]

    @property
    def run_id(self) -> str:
        return self.run.run_id


def contributing_runs(runs_dir: Path, kind: str) -> tuple[Run | None, list[RunTable]]:
    """(the run reported for the kind, every run of the kind that contributes, with its table). Complete
    runs contribute; incomplete ones only when no run of the kind is complete."""
    table = TABLES[kind]
    main = pick_run(runs_dir, kind, table)
    runs = [r for r in runs_of_kind(runs_dir, kind) if (r.path / table).is_file()]
    complete = [r for r in runs if r.complete]
    chosen = complete or runs
    for r in runs:
        if r not in chosen:
            warn(f"run {r.run_id} is not complete ({r.info.get('status')}); the complete runs of its kind are used")
    reader = read_rows if kind == "probe" else read_table
    return main, [RunTable(r, reader(r.path / table)) for r in chosen]


def measured_amount(kind: str, table, allocator: str) -> int:
    """How much a run measured of an allocator: usable trials, counted cells, or probe processes."""
    if kind == "time":
        return int((usable_trials(table)["allocator"] == allocator).sum())
    if kind == "callgrind":
        return int(((table["allocator"] == allocator) & (table["status"] == "ok")).sum())
    return sum(int(float(r.get("trials") or 0)) for r in table if r["allocator"] == allocator)


def allocators_of(kind: str, table) -> set[str]:
    if kind == "probe":
        return {r["allocator"] for r in table}
    return set(table["allocator"].astype(str))


def leads(kind: str, runs: list[RunTable], main: Run | None) -> dict[str, str]:
    """allocator -> run id of the run that leads for it."""
    out = {}
    for alloc in sorted(set().union(*(allocators_of(kind, rt.table) for rt in runs)) if runs else ()):
        ranked = sorted(runs, key=lambda rt: (measured_amount(kind, rt.table, alloc),
                                              main is not None and rt.run_id == main.run_id, rt.run_id))
        if measured_amount(kind, ranked[-1].table, alloc) > 0:
            out[alloc] = ranked[-1].run_id
    return out


def run_labels(run_ids) -> dict[str, str]:
    """Short labels (R1, R2, ...) in the order the runs were started, for tables."""
    return {rid: f"R{i}" for i, rid in enumerate(sorted(set(run_ids)), start=1)}


def merge_rows(per_run: dict[str, pd.DataFrame], lead: dict[str, str], baseline: str) -> pd.DataFrame:
    """The rows of each allocator from its leading run, with that run's id."""
    frames = []
    for run_id, frame in per_run.items():
        if frame is None or frame.empty:
            continue
        mine = frame[[lead.get(a) == run_id or (a == baseline and lead.get(a) is None)
                      for a in frame["allocator"]]]
        frames.append(mine.assign(run_id=run_id))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def merge_probe_rows(runs: list[RunTable], lead: dict[str, str]) -> list[dict]:
    return [dict(r, run_id=rt.run_id) for rt in runs for r in rt.table if lead.get(r["allocator"]) == rt.run_id]
