"""Where things are: the repository, the dataset, the build and cache folders, and every path a run
records written so that it names no folder of the measuring machine."""

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
# (folders whose names a system or a build also uses, build/ in a glibc build, are named with their subfolder)
REPO_TOP_FOLDERS = ("workloads", "probes", "analysis", "notebooks", "data/runs", "data/literature", "paper/generated")
# a path's own start, not the middle of a URL, a word or a placeholder; or right after a terminal colour
# code (a traceback in an executed notebook: "\x1b[32m/home/...")
_START = r"(?:(?<=\[\dm)|(?<=\[\d\dm)|(?<![\w.}:/$-]))"
_ABS_IN_REPO = re.compile(_START + r"/(?:[\w.+@-]+/)+?(?=(?:%s)/)" % "|".join(REPO_TOP_FOLDERS))
# the layouts of another machine's folders, whatever its home or checkout was called: the allocator cache
# at its default place, a virtual environment, a heapcost temporary folder
_FOREIGN = (
    (re.compile(r"\$HEAPCOST_CACHE/"), "{cache}/"),
    (re.compile(r"\$VENV/"), "{venv}/"),
    (re.compile(_START + r"/(?:[\w.+@-]+/)*?\.cache/heapcost/"), "{cache}/"),
    (re.compile(_START + r"/(?:[\w.+@-]+/)*?\.?venv/"), "{venv}/"),
    (re.compile(_START + r"/(?:[\w.+@-]+/)*?tmp/heapcost-[\w-]+/"), "{tmp}/"),
)
# what a published file must never hold: a folder of the machine that measured it
MACHINE_PATH = re.compile(_START + r"/(?:(?:root|home|tmp|work|Users|private|var/tmp|mnt|srv|opt/[\w.-]+/home)/"
                          r"|(?:[\w.+@-]+/)*?(?:\.cache/heapcost|\.?venv|tmp/heapcost-[\w-]+)/)")


# a file of any other folder of the machine (a library a user brought from their home or work folder), up to
# the end of the path: written `{elsewhere}/<file name>` (run.json's `libraries` give its sha256)
_ELSEWHERE = re.compile(MACHINE_PATH.pattern + r"(?:[^\s,;\"'()\[\]{}<>]*/)?(?P<name>[^\s,;\"'()\[\]{}<>/]*)")


def repo_relative(text: str) -> str:
    """`text` (a reason, an error message) with absolute paths of the repository's files written relative
    to the repository: `/home/me/heapcost/workloads/x.pl` -> `workloads/x.pl`. Paths outside a
    checkout (system libraries) stay as they are."""
    if not isinstance(text, str):
        return text
    return _ABS_IN_REPO.sub("", text.replace(f"{REPO}/", ""))


def portable_text(text: str) -> str:
    """`text` with every folder of a measuring machine written portably: the allocator cache as
    `{cache}/...`, the virtual environment as `{venv}/...` (the placeholders allocators.toml uses), a
    heapcost temporary folder as `{tmp}/...`, the repository's files relative to the repository. This
    machine's own roots are recognised wherever they are; another machine's by their default layout.
    System paths (/usr/lib/...) stay as they are."""
    import sys
    import tempfile

    if not isinstance(text, str):
        return text
    own = ((str(cache_dir()), "{cache}/"), (sys.prefix, "{venv}/"), (str(REPO), ""))
    for root, name in own:
        text = _own_root(root).sub(name, text)
    for pattern, name in _FOREIGN:
        text = pattern.sub(name, text)
    text = repo_relative(text)
    text = _own_root(tempfile.gettempdir()).sub("{tmp}/", text)
    return _ELSEWHERE.sub(lambda m: "{elsewhere}/" + m.group("name"), text)


def _own_root(root: str) -> re.Pattern:
    return re.compile(_START + re.escape(root.rstrip("/") + "/"))


def portable_path(path: str) -> str:
    """A library or file path as the dataset records it (see portable_text): no folder of the machine
    that measured the run. A library in some other folder of the machine (one a user brought from their
    home folder) is named `{elsewhere}/<file name>`: run.json's `libraries` give its sha256."""
    text = portable_text(path)
    if machine_paths(text):
        return "{elsewhere}/" + text.rstrip("/").rsplit("/", 1)[-1]
    return text


def machine_paths(text: str) -> list[str]:
    """The absolute paths of a measuring machine's folders in `text` (empty: none)."""
    return [m.group(0) for m in MACHINE_PATH.finditer(text)] if isinstance(text, str) else []


def file_sha256(path) -> str:
    """The sha256 of a file's bytes, read in 1 MiB blocks (dataset files, brought libraries)."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
