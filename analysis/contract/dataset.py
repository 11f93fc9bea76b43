"""The dataset's runs, read once per process: each run's run.json and machine.json, and its tables.

Every product of publish, and the cost, cost-check and explore commands, read the runs through a Dataset,
never the folder itself. `load(runs_dir)` gives the same Dataset for the same folder for the life of the
process (the published runs are about 60 MB of text), and a Dataset reads each file the first time it is
asked for it, and never again while the file is unchanged on disk: a file that a campaign rewrites or
appends to (a run in progress, seen from JupyterLab) is read again, and a run folder added or removed is
seen at the next listing.

Tables are read as the dataset writes them: an empty cell is a missing value, nothing else is ("n/a" is a
probe outcome, not a missing one). A table is shared by every reader: `table(...)` gives a copy, which the
reader may change; `table(..., shared=True)` gives the shared frame itself, for hot loops that only read.
"""
import csv
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analysis.errors import warn

RUN_JSON = "run.json"
MACHINE_JSON = "machine.json"


@dataclass
class Run:
    """One run folder: where it is and its run.json."""
    path: Path
    info: dict

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def kind(self) -> str:
        return self.info.get("kind", "")

    @property
    def profile(self) -> str:
        return (self.info.get("params") or {}).get("profile", "")

    @property
    def complete(self) -> bool:
        return self.info.get("status") == "complete"

    @property
    def dataset(self) -> "Dataset":
        """The dataset the run is in (its folder's parent), as load gives it."""
        return load(self.path.parent)


def _stamp(path: Path):
    """What says a file changed: its inode (a file replaced whole), modification and change times and size
    (a file appended to or rewritten); None when it is not a file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size) if stat.S_ISREG(st.st_mode) else None


class Dataset:
    """The runs under one folder, each file read once (see the module's docstring)."""

    def __init__(self, runs_dir):
        self.root = Path(runs_dir)
        self._files: dict[tuple, tuple] = {}

    def __repr__(self):
        return f"Dataset({self.root.name!r}, {len(self.run_ids())} runs)"

    # ------------------------------------------------------------------------------------ the runs
    def run_ids(self) -> list[str]:
        """Every run folder that has a run.json, in run-id order (oldest first: ids start with their UTC start).
        Listed anew at each call (a stat per run, well under a millisecond for the published runs): a folder's
        time stamp moves in ticks too coarse to say that a run was added since the last listing."""
        if not self.root.is_dir():
            return []
        return sorted(d.name for d in self.root.iterdir() if not d.name.startswith(".") and (d / RUN_JSON).is_file())

    def path(self, run) -> Path:
        """A run's folder (for naming it and for tools that take a folder, never to read it)."""
        return self.root / _run_id(run)

    def run(self, run) -> Run | None:
        """A run by id, or None when it has no readable run.json (a warning says why)."""
        info = self._read(_run_id(run), RUN_JSON, "json")
        return None if info is None else Run(self.path(run), info)

    def runs(self, kind: str | None = None) -> list[Run]:
        """Every readable run, or every run of one kind (time, callgrind, probe, ...), oldest first."""
        out = [r for r in (self.run(rid) for rid in self.run_ids()) if r is not None]
        return [r for r in out if kind is None or r.kind == kind]

    def pick(self, kind: str, table: str) -> Run | None:
        """The run reported for `kind`: the newest complete one holding `table`, preferring the full profile;
        an incomplete one only when no run is complete."""
        runs = [r for r in self.runs(kind) if self.has(r, table)]
        complete = [r for r in runs if r.complete] or runs
        full = [r for r in complete if r.profile == "full"] or complete
        return full[-1] if full else None

    # ------------------------------------------------------------------------------------ a run's files
    def has(self, run, name: str) -> bool:
        return (self.path(run) / name).is_file()

    def files(self, run, pattern: str = "*") -> list[str]:
        """The names of a run's files matching `pattern`, sorted."""
        folder = self.path(run)
        return sorted(p.name for p in folder.glob(pattern) if p.is_file()) if folder.is_dir() else []

    def state(self, run) -> bytes:
        """What says a run changed, without reading its files: each file's path inside the run's folder, its size
        and modification time (for a key asked for often; a file's bytes are what its table or JSON give)."""
        folder = self.path(run)
        parts = []
        for path in sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []:
            st = path.stat()
            parts.append(f"{path.relative_to(folder)}\0{st.st_size}\0{st.st_mtime_ns}")
        return "\n".join(parts).encode()

    def info(self, run) -> dict:
        """A run's run.json ({} when it has none or it cannot be read). Shared: never change it."""
        return self._read(_run_id(run), RUN_JSON, "json") or {}

    def machine(self, run) -> dict:
        """A run's machine.json ({} when it has none or it cannot be read). Shared: never change it."""
        return self._read(_run_id(run), MACHINE_JSON, "json") or {}

    def json(self, run, name: str) -> dict | None:
        """Any JSON file of a run (intake.json, ...), or None when absent or unreadable. Shared."""
        return self._read(_run_id(run), name, "json")

    def table(self, run, name: str, columns=None, shared: bool = False) -> pd.DataFrame | None:
        """A run's table as the dataset writes it, or None when the run has no such file. `columns`: only
        those of them the table has. A copy unless `shared` (then never change it)."""
        frame = self._read(_run_id(run), name, "table")
        if frame is None:
            return None
        if columns is not None:
            return frame[[c for c in frame.columns if c in columns]].copy()
        return frame if shared else frame.copy()

    def rows(self, run, name: str) -> list[dict] | None:
        """A run's table as a list of dicts of strings (every cell as written), or None when absent."""
        rows = self._read(_run_id(run), name, "rows")
        return None if rows is None else [dict(r) for r in rows]

    def _read(self, run_id: str, name: str, how: str):
        path = self.root / run_id / name
        stamp = _stamp(path)
        if stamp is None:
            return None
        key = (run_id, name, how)
        held = self._files.get(key)
        if held is not None and held[0] == stamp:
            return held[1]
        value = _READERS[how](path)
        self._files[key] = (stamp, value)
        return value


def _run_id(run) -> str:
    return run.run_id if isinstance(run, Run) else Path(str(run)).name


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        warn(f"{path.parent.name}/{path.name} cannot be read ({exc}); it is left out")
        return None


def _read_table(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path, keep_default_na=False, na_values=[""], low_memory=False)
    except pd.errors.EmptyDataError:  # a table created and not yet written to
        return pd.DataFrame()


def _read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


_READERS = {"json": _read_json, "table": _read_table, "rows": _read_rows}
_LOADED: dict[str, Dataset] = {}


def load(runs) -> Dataset:
    """The Dataset of a runs folder, the same one for the life of the process; a Dataset is returned as it is."""
    if isinstance(runs, Dataset):
        return runs
    key = str(Path(runs).resolve())
    if key not in _LOADED:
        _LOADED[key] = Dataset(runs)
    return _LOADED[key]
