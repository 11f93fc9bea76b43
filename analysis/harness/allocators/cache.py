"""Finished allocator builds in the cache outside the clone (cache_dir()/allocators/<id>-<source version>/),
each with the BUILD.json record provisioning writes once the build is verified. Read by the catalogue (to
resolve an allocator) and written by provisioning."""
import glob
import json
from pathlib import Path

from analysis.harness.allocators import debsrc
from analysis.paths import cache_dir


def allocators_root() -> Path:
    return cache_dir() / "allocators"


def read_build_record(prefix: Path):
    """BUILD.json of a finished, verified build, or None."""
    try:
        record = json.loads((Path(prefix) / "BUILD.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not record.get("verification", {}).get("ok"):
        return None
    return record


def built_prefix(allocator_id: str, root: Path = None):
    """The newest finished build of an allocator in the cache (by source version), or None."""
    root = Path(root) if root else allocators_root()
    best = None
    for candidate in root.glob(glob.escape(allocator_id) + "-*"):
        record = read_build_record(candidate)
        if not record or record.get("allocator") != allocator_id:
            continue  # a half-built directory, or another allocator whose id merely starts the same
        key = (record.get("source_version", ""), record.get("built_utc", ""))
        if best is None or debsrc.compare_versions(key[0], best[0][0]) > 0 or \
                (key[0] == best[0][0] and key[1] > best[0][1]):
            best = (key, candidate)
    return best[1] if best else None
