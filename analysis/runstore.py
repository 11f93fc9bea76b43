"""The run directory: run.json, machine.json and append-only tables that survive a kill at any moment."""
import csv
import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

from analysis import __version__
from analysis.errors import HeapcostError
from analysis.paths import REPO, RUNS_DIR

RUN_FORMAT = "heapcost-run/1"

TRIAL_COLUMNS = [
    "run_id", "seq", "block", "warmup", "workload", "allocator", "scale", "status", "reason", "exit_code",
    "signal", "wall_s", "user_s", "sys_s", "maxrss_kb", "minflt", "majflt", "nvcsw", "nivcsw",
    "clock_probe_s", "probe_before_s", "probe_after_s", "malloc_lib", "env_pad", "loadavg1", "started_utc",
]
COUNT_COLUMNS = [
    "run_id", "workload", "allocator", "scale", "status", "reason", "instructions", "data_reads",
    "data_writes", "d1_read_misses", "d1_write_misses", "malloc_calls", "free_calls", "calloc_calls",
    "realloc_calls", "malloc_lib",
]


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
        except ValueError:
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


def start_run(kind: str, label: str, params: dict, extra: dict | None = None, runs_dir: Path = RUNS_DIR):
    """Resume the newest unfinished run with these parameters, or create a new one. Returns (dir, info)."""
    phash = params_hash(params)
    run_dir = find_unfinished(kind, phash, runs_dir)
    if run_dir is not None:
        info = read_json(run_dir / "run.json")
        info.setdefault("resumed_utc", []).append(utc_now())
        info["status"] = "running"
        write_json_atomic(run_dir / "run.json", info)
        return run_dir, info
    run_dir = new_run_dir(kind, label, runs_dir)
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


def discard_run(run_dir: Path) -> None:
    """Remove a run that recorded nothing (setup failed), so no half-written run is left behind."""
    if not any((run_dir / t).exists() for t in ("trials.csv", "counts.csv", "probes.csv")):
        shutil.rmtree(run_dir, ignore_errors=True)


class AppendTable:
    """A CSV that is only ever appended to; each row is flushed and fsynced when written.

    A kill can at worst leave a partial last line: opening the table again cuts it off.
    """

    def __init__(self, path: Path, columns: list[str]):
        self.path = Path(path)
        self.columns = columns
        self._repair()
        new = not self.path.exists() or self.path.stat().st_size == 0
        self._fh = open(self.path, "a", newline="")
        self._writer = csv.DictWriter(self._fh, fieldnames=columns, extrasaction="raise")
        if new:
            self._writer.writeheader()
            self._sync()
        else:
            with open(self.path, newline="") as fh:
                header = next(csv.reader(fh), None)
            if header != columns:
                raise HeapcostError(f"{self.path} has columns {header}, expected {columns}")

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
