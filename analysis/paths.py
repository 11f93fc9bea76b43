import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BUILD_DIR = REPO / "build"
DATA_DIR = REPO / "data"
# Tests point HEAPCOST_RUNS_DIR elsewhere so they never touch the published dataset.
RUNS_DIR = Path(os.environ.get("HEAPCOST_RUNS_DIR") or DATA_DIR / "runs")
WORKLOADS_DIR = REPO / "workloads"
PROBES_DIR = REPO / "probes"
NATIVE_DIR = Path(__file__).resolve().parent / "harness" / "native"
CATALOG_PATH = REPO / "allocators.toml"


def cache_dir() -> Path:
    """Built allocators live outside the clone so a new clone reuses them."""
    return Path(os.environ.get("HEAPCOST_CACHE") or Path.home() / ".cache" / "heapcost")
GENERATED_DIR = REPO / "paper" / "generated"
# What a notebook writes when run by hand with its default out_dir: a scratch folder (ignored by git), so
# trying a parameter in the lab never overwrites the paper's inputs; the paper build passes its own out_dir.
SCRATCH_DIR = BUILD_DIR / "lab" / "generated"


def in_repo(value, default: Path) -> Path:
    """A notebook or CLI path parameter: empty means `default`; a relative path is taken from the
    repository root, never from the folder a kernel happens to run in."""
    if value in (None, ""):
        return Path(default)
    path = Path(value)
    return path if path.is_absolute() else REPO / path


# an absolute path whose tail is a file of a heapcost checkout (any checkout: the machine that measured a
# run had its own); what precedes the checkout's top-level folder is machine-specific
_ABS_IN_REPO = re.compile(r"(?<![\w./-])/(?:[\w.+@-]+/)+?(?=(?:workloads|probes|analysis|notebooks)/)")


def repo_relative(text: str) -> str:
    """`text` (a reason, an error message) with absolute paths of the repository's files written relative
    to the repository: `/home/me/heapcost/workloads/x.pl` -> `workloads/x.pl`. Paths outside a
    checkout (system libraries) stay as they are."""
    if not isinstance(text, str):
        return text
    return _ABS_IN_REPO.sub("", text.replace(f"{REPO}/", ""))


def portable_path(path: str) -> str:
    """A library path as the dataset records it: inside the allocator cache `$HEAPCOST_CACHE/...`, inside
    the venv `$VENV/...`, inside the repository relative to it; system paths as they are. A run then names
    no folder of the machine that measured it."""
    import sys

    if not isinstance(path, str):
        return path
    for root, name in ((str(cache_dir()), "$HEAPCOST_CACHE"), (sys.prefix, "$VENV")):
        if path.startswith(root.rstrip("/") + "/"):
            return name + path[len(root.rstrip("/")):]
    return repo_relative(path)
