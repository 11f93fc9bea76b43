"""Results remembered by what they were computed from: the dataset's bytes, the arguments and the code.

Every number of the paper comes from `comparisons.compute(data)`, and the explorer recomputes the same
per-run comparisons for its selections: minutes of robust fits on the published dataset. A result is stored
under build/memo/ by a key made of
- the bytes of its inputs: every file under a dataset folder, or the content of a table (pandas' row hashes,
  its columns and dtypes);
- its other arguments;
- the source of every module of `analysis/` (any edit to the code computes everything again);
and read back instead of computed when the key is found. The warnings the computation gave are stored with
it and said again on a hit, so a remembered result reads exactly like a computed one.

HEAPCOST_MEMO=0 turns it off (the tests that check that two computations agree, under other numeric
settings, set it: a remembered result would make them agree by construction). A stored file that cannot be
read is computed again and rewritten; files are written whole (a temporary file, then a rename), so two
processes at once never read half of one.
"""
import hashlib
import json
import os
import pickle
from functools import lru_cache
from pathlib import Path

import pandas as pd

from analysis import errors
from analysis.paths import BUILD_DIR, REPO

MEMO_DIR = BUILD_DIR / "memo"


def enabled() -> bool:
    return os.environ.get("HEAPCOST_MEMO", "1") != "0"


@lru_cache(maxsize=1)
def code_digest() -> str:
    """The source of every module of the analysis package (read once per process)."""
    h = hashlib.sha256()
    for path in sorted((REPO / "analysis").rglob("*.py")):
        h.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def folder_digest(folder: Path) -> str:
    """Every file under `folder`: its path inside the folder and its bytes."""
    h = hashlib.sha256()
    folder = Path(folder)
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(folder)).encode() + b"\0")
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        h.update(b"\0")
    return h.hexdigest()


def table_digest(table: pd.DataFrame | None) -> str:
    """A table's content: its columns, dtypes and every row (index included)."""
    if table is None:
        return "none"
    h = hashlib.sha256(json.dumps([list(map(str, table.columns)), list(map(str, table.dtypes))]).encode())
    try:
        h.update(pd.util.hash_pandas_object(table, index=True).to_numpy().tobytes())
    except TypeError:  # a cell holding something pandas cannot hash (a list, a dict): its text
        h.update(table.to_csv().encode())
    return h.hexdigest()


def _part(value) -> str:
    if isinstance(value, pd.DataFrame):
        return "table:" + table_digest(value)
    if isinstance(value, Path):
        return "folder:" + folder_digest(value)
    return "value:" + json.dumps(value, sort_keys=True, default=repr)


def key(name: str, *parts) -> str:
    h = hashlib.sha256(f"{name}\0{code_digest()}".encode())
    for part in parts:
        h.update(b"\0" + _part(part).encode())
    return h.hexdigest()


def kept(name: str, parts: tuple) -> bool:
    """Whether `remembered(name, parts, ...)` would read its result back rather than compute it."""
    return enabled() and (MEMO_DIR / name / f"{key(name, *parts)}.pickle").is_file()


def remembered(name: str, parts: tuple, compute):
    """compute(), or what it returned the last time for the same inputs (parts), code and name."""
    if not enabled():
        return compute()
    path = MEMO_DIR / name / f"{key(name, *parts)}.pickle"
    try:
        value, said = pickle.loads(path.read_bytes())
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, ValueError, TypeError):
        pass
    else:
        for message in said:
            errors.warn(message)
        return value
    with errors.recording() as said:
        value = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(pickle.dumps((value, list(said)), protocol=pickle.HIGHEST_PROTOCOL))
    os.replace(temporary, path)
    return value
