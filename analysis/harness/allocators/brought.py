"""Allocators a user brings (EXTRA_ALLOCATORS=name=/path/lib.so): under a name the catalogue knows (origin kind
`brought`: hardened_malloc, OpenBSD's malloc) the library takes that entry's claims; under any other name it is
an anonymous library with no claims (origin kind `path`). Either way the run records the library by file name
and sha256 (never its folder: that is the measuring machine's), with the provenance file beside it when there
is one: `<library>.json` with the upstream revision and the configuration it was built with.

Some brought allocators reserve many mappings (hardened_malloc: guard regions around every slab); the entry's
`min_max_map_count` is checked against vm.max_map_count before a campaign instead of letting trials crash."""
import json
from dataclasses import replace
from pathlib import Path

from analysis.errors import HeapcostError
from analysis.paths import file_sha256

MAP_COUNT_FILE = Path("/proc/sys/vm/max_map_count")
PROVENANCE_KEYS = ("upstream", "revision", "configuration", "compiler", "source_sha256", "variant", "layout")


def read_provenance(library: Path) -> dict:
    """The provenance file beside a library (`<library>.json`), or {} when there is none."""
    sidecar = Path(f"{library}.json")
    if not sidecar.is_file():
        return {}
    try:
        data = json.loads(sidecar.read_text())
    except (OSError, ValueError) as exc:
        raise HeapcostError(f"provenance file {sidecar.name} is not readable JSON: {exc}") from None
    if not isinstance(data, dict):
        raise HeapcostError(f"provenance file {sidecar.name} must hold a JSON object")
    return {k: str(data[k]) for k in PROVENANCE_KEYS if k in data}


def _revision_matches(claimed: str, recorded: str) -> bool:
    """A provenance revision names the catalogue's when either starts with the other (a short commit hash
    names the full one; "1.128" names "1.128")."""
    a, b = claimed.strip().lower(), recorded.strip().lower()
    return bool(a and b) and (a.startswith(b) or b.startswith(a) or a.split()[0] == b.split()[0])


def library_record(name: str, library: Path) -> dict:
    """What is known of a brought library: its path (for this run only), file name, sha256, provenance."""
    library = Path(library).expanduser()
    if not library.is_file():
        raise HeapcostError(f"extra allocator {name}: library {library} does not exist")
    library = library.resolve()
    record = {"path": str(library), "library": library.name, "library_sha256": file_sha256(library)}
    provenance = read_provenance(library)
    return {**record, "provenance": provenance} if provenance else record


def adopt(entry, name: str, record: dict):
    """The catalogue's entry `name` (kind `brought`) with the user's library in place; a provenance file
    naming another upstream revision than the entry's is refused."""
    claimed = str(entry.origin.get("revision", ""))
    said = (record.get("provenance") or {}).get("revision", "")
    if said and claimed and not _revision_matches(claimed, said):
        raise HeapcostError(f"extra allocator {name}: {record['library']}.json says revision {said!r}, the "
                            f"catalogue's {name} is {claimed!r}")
    return replace(entry, id=name, origin={**entry.origin, **record}, preload=(record["path"],))


def unavailable_reason(entry) -> str:
    """Why a brought allocator is not available when nobody brought it."""
    lib = entry.origin.get("library") or "lib.so"
    return (f"not in any package registry: build {entry.origin.get('upstream', 'it')} at "
            f"{entry.origin.get('revision', '?')} yourself and bring it: EXTRA_ALLOCATORS={entry.id}=/path/to/{lib}")


def is_brought(alloc) -> bool:
    return alloc.origin.get("kind") == "brought"


def check_map_count(allocators, path: Path = MAP_COUNT_FILE) -> None:
    """Refuse a campaign whose allocators need more memory mappings than vm.max_map_count allows."""
    needed = [(a.id, int(getattr(a, "min_max_map_count", 0) or 0)) for a in allocators]
    needed = [(i, n) for i, n in needed if n > 0]
    if not needed:
        return
    try:
        current = int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return  # not Linux, or not readable: nothing to check against
    want = max(n for _, n in needed)
    if current < want:
        ids = ", ".join(i for i, n in needed if n > current)
        raise HeapcostError(f"vm.max_map_count is {current}; {ids} need at least {want} (its README: guard "
                            f"regions take many mappings): run `sysctl -w vm.max_map_count={want}` as root")


def library_records(allocators) -> dict:
    """What a run records of each brought library: its file name, sha256, the catalogue's upstream and
    revision, and the provenance file's content. Never its folder: that names the measuring machine."""
    records = {}
    for a in allocators:
        if not a.user_supplied:
            continue
        o = a.origin
        records[a.id] = {k: o[k] for k in ("library", "library_sha256", "upstream", "revision", "variant")
                         if o.get(k)}
        if o.get("provenance"):
            records[a.id]["provenance"] = o["provenance"]
    return records


def portable_origin(origin: dict) -> dict:
    """A catalogue origin as a run records it: a brought library's folder left out."""
    return {k: v for k, v in origin.items() if k != "path"}


def _published_runs(runs_dir: Path):
    """(run id, run.json's content) of every readable run of a dataset, in the order of their ids."""
    for path in sorted(Path(runs_dir).glob("*/run.json")):
        try:
            info = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(info, dict):
            yield path.parent.name, info


def published_builds(runs_dir: Path) -> dict:
    """{allocator name: {sha256 of a library the dataset recorded under that name}} over every run: the
    libraries brought by path, and the allocator's own libraries each run's allocator record identifies
    (the builds of the project's recipes among them)."""
    out: dict = {}
    for _, info in _published_runs(runs_dir):
        for name, rec in ((info.get("params") or {}).get("brought_libraries") or {}).items():
            if isinstance(rec, dict) and rec.get("library_sha256"):
                out.setdefault(name, set()).add(rec["library_sha256"])
        allocators = info.get("allocators") if isinstance(info.get("allocators"), dict) else {}
        for name, rec in allocators.items():
            for lib in (rec.get("libraries") or []) if isinstance(rec, dict) else []:
                if isinstance(lib, dict) and lib.get("allocator") == name and lib.get("sha256"):
                    out.setdefault(name, set()).add(lib["sha256"])
    return out


RECIPE_FIELDS = ("origin", "build", "layout", "build_of")


def _build_of_run(info: dict, name: str) -> tuple[tuple, dict] | None:
    """What one run recorded under `name`, or None: (its libraries as (file, sha256) pairs, how it was built),
    from a brought library's record, else from the build fields of the run's allocator record."""
    rec = ((info.get("params") or {}).get("brought_libraries") or {}).get(name)
    if isinstance(rec, dict):
        sha = rec.get("library_sha256")
        libs = ((rec.get("library", ""), sha),) if sha else ()
        return libs, {k: v for k, v in rec.items() if k != "library_sha256"}
    rec = info.get("allocators").get(name) if isinstance(info.get("allocators"), dict) else None
    if not isinstance(rec, dict):
        return None
    libs = tuple((lib.get("file", ""), lib["sha256"]) for lib in rec.get("libraries") or []
                 if isinstance(lib, dict) and lib.get("allocator") == name and lib.get("sha256"))
    return libs, {k: rec[k] for k in RECIPE_FIELDS if k in rec}


def published_records(runs_dir: Path, name: str) -> dict:
    """{a build the dataset recorded under `name`, as its libraries' (file, sha256) pairs (none when the runs
    identified no library): [(run id, what that run recorded of how it was built), ...] in run order}."""
    out: dict = {}
    for run_id, info in _published_runs(runs_dir):
        found = _build_of_run(info, name)
        if found is not None:
            out.setdefault(found[0], []).append((run_id, found[1]))
    return out


def build_report(name: str, sha256: str, published: dict) -> str:
    """Whether a brought library is a build the dataset already holds under its name: "the published build",
    another build of it (a new layout sample, or a build that does not reproduce), or a name never published."""
    known = published.get(name) or set()
    if sha256 in known:
        return f"{name}: the published build (sha256 {sha256[:12]})"
    if known:
        return (f"{name}: another build than the published one(s) (sha256 {sha256[:12]}; published "
                f"{', '.join(sorted(k[:12] for k in known))})")
    return f"{name}: no run of the dataset has recorded a library under this name (sha256 {sha256[:12]})"


def presence(alloc) -> tuple[bool, str]:
    """(here, what to say) of a brought library: here only when a user named its path (EXTRA_ALLOCATORS) and
    the file exists; otherwise how to bring it."""
    path = next(iter(getattr(alloc, "preload", None) or ()), "") if alloc.origin.get("path") else ""
    if path and Path(path).is_file():
        return True, f"brought by the user: {path}"
    return False, "not here: " + unavailable_reason(alloc)
