"""Run directories: run.json, machine.json and append-only tables that survive a kill at any moment;
and which run of a kind the analysis reports. The only writer of run.json; analysis.contract.dataset reads it."""
import csv
import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

from analysis import __version__
from analysis.contract.dataset import Run, load
from analysis.contract.schema import known_header
from analysis.errors import HeapcostError, warn
from analysis.paths import REPO, RUNS_DIR

RUN_FORMAT = "heapcost-run/1"

def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def params_hash(params: dict) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]


def git_state() -> dict:
    def git(*args):
        try:
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    return {"commit": git("rev-parse", "HEAD") or None, "dirty": bool(git("status", "--porcelain", "--", "analysis",
                                                                                "workloads", "probes", "allocators.toml"))}


def write_json_atomic(path: Path, data) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)


def read_json(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise HeapcostError(f"cannot read {path}: {exc}") from None


def find_unfinished(kind: str, phash: str, runs_dir: Path = RUNS_DIR) -> Path | None:
    """The newest run of this kind and parameters that did not complete, to be resumed."""
    if not runs_dir.is_dir():
        return None
    for run_dir in sorted(runs_dir.iterdir(), reverse=True):
        meta = run_dir / "run.json"
        if not meta.is_file():
            continue
        try:
            info = json.loads(meta.read_text())
        except (OSError, ValueError) as exc:
            warn(f"{meta} cannot be read ({exc}); that run is not resumed")
            continue
        if info.get("kind") == kind and info.get("params_hash") == phash and info.get("status") != "complete":
            return run_dir
    return None


def new_run_dir(kind: str, label: str, runs_dir: Path = RUNS_DIR) -> Path:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    base = f"{stamp}-{kind}-{label}"
    run_dir = runs_dir / base
    n = 1
    while run_dir.exists():
        n += 1
        run_dir = runs_dir / f"{base}-{n}"
    run_dir.mkdir(parents=True)
    return run_dir


def start_run(kind: str, label: str, params: dict, extra: dict | None = None, runs_dir: Path = RUNS_DIR,
              run_dir: Path | None = None):
    """Resume the newest unfinished run with these parameters (or the run in `run_dir` when given), or
    create a new one. Returns (dir, info)."""
    phash = params_hash(params)
    if run_dir is not None:
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        resume = run_dir if (run_dir / "run.json").is_file() else None
    else:
        resume = find_unfinished(kind, phash, runs_dir)
        run_dir = resume
    if resume is not None:
        info = read_json(resume / "run.json")
        info.setdefault("resumed_utc", []).append(utc_now())
        info["status"] = "running"
        write_json_atomic(resume / "run.json", info)
        return resume, info
    run_dir = run_dir or new_run_dir(kind, label, runs_dir)
    info = {
        "format": RUN_FORMAT, "run_id": run_dir.name, "kind": kind, "status": "running",
        "params": params, "params_hash": phash, "started_utc": utc_now(), "ended_utc": None,
        "heapcost_version": __version__, "git": git_state(), **(extra or {}),
    }
    write_json_atomic(run_dir / "run.json", info)
    return run_dir, info


def finish_run(run_dir: Path, status: str = "complete", **updates) -> None:
    info = read_json(run_dir / "run.json")
    info.update(updates)
    info["status"] = status
    info["ended_utc"] = utc_now()
    write_json_atomic(run_dir / "run.json", info)


def add_elapsed(run_dir: Path, info: dict, seconds: float) -> None:
    """Add a stretch of measuring to the run's `elapsed_s` (in run.json and in the caller's copy), so a
    resumed campaign's time and budget count every stretch."""
    saved = read_json(run_dir / "run.json")
    saved["elapsed_s"] = round(float(info.get("elapsed_s", 0)) + seconds, 1)
    info["elapsed_s"] = saved["elapsed_s"]
    write_json_atomic(run_dir / "run.json", saved)


def discard_run(run_dir: Path) -> None:
    """Remove a run that recorded nothing (setup failed), so no half-written run is left behind."""
    if not any((run_dir / t).exists() for t in ("trials.csv", "counts.csv", "probes.csv")):
        shutil.rmtree(run_dir, ignore_errors=True)


class AppendTable:
    """A CSV that is only ever appended to; each row is flushed and fsynced when written.

    A kill can at worst leave a partial last line: opening the table again cuts it off. A table written
    before columns were added at the end keeps its own header (a resumed old run stays readable); the
    new columns are then not written.
    """

    def __init__(self, path: Path, columns: list[str]):
        self.path = Path(path)
        self.columns = columns
        self._repair()
        new = not self.path.exists() or self.path.stat().st_size == 0
        if not new:
            with open(self.path, newline="") as fh:
                header = next(csv.reader(fh), None)
            if not known_header(columns, header or []):
                raise HeapcostError(f"{self.path} has columns {header}, expected {columns}")
            self.columns = header
        self._fh = open(self.path, "a", newline="")
        self._writer = csv.DictWriter(self._fh, fieldnames=self.columns, extrasaction="raise")
        if new:
            self._writer.writeheader()
            self._sync()

    def _repair(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            with open(self.path, "r+b") as fh:
                fh.truncate(cut)

    def _sync(self) -> None:
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def rows(self) -> list[dict]:
        with open(self.path, newline="") as fh:
            return list(csv.DictReader(fh))

    def append(self, row: dict) -> None:
        self._writer.writerow({c: "" if row.get(c) is None else row.get(c) for c in self.columns})
        self._sync()

    def close(self) -> None:
        self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---------------------------------------------------------------------------------------- run selection
def runs_of_kind(runs_dir: Path, kind: str) -> list[Run]:
    """Every run of a kind, oldest first (run ids start with their UTC start time), as the dataset reads them."""
    return load(runs_dir).runs(kind)


def pick_run(runs_dir: Path, kind: str, table: str) -> Run | None:
    """The run reported for `kind` (time, callgrind, probe): analysis.contract.dataset.Dataset.pick."""
    return load(runs_dir).pick(kind, table)
