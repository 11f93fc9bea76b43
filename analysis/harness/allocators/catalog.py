"""The allocator catalogue (allocators.toml) and how each entry is selected on this machine."""
import difflib
import glob
import os
import re
import shlex
import shutil
import sys
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from analysis.errors import HeapcostError
from analysis.harness.allocators import brought, glibc_build, mozjemalloc_build
from analysis.harness.allocators.cache import built_prefix
from analysis.paths import CATALOG_PATH, REPO, RUNS_DIR, cache_dir

DEFENCES = (
    "double-free-detect", "invalid-free-detect", "overflow-detect", "guard-pages", "free-poison",
    "uaf-write-detect", "delayed-reuse", "freelist-protect", "zero-on-alloc", "randomized-placement",
    "randomized-reuse", "size-mismatch-detect", "huge-request-safe",
)
ORIGIN_KINDS = ("system", "debian", "pypi", "debian-source", "musl", "path", "glibc-build", "brought")


@dataclass(frozen=True)
class Allocator:
    id: str
    family: str
    description: str
    origin: dict
    preload: tuple = ()
    env: dict = field(default_factory=dict)
    callgrind_env: dict | None = None
    expect_malloc: str = "libc.so.6"
    expect_perl_malloc: bool | None = None
    defences: tuple = ()
    defences_ref: str = ""
    workloads: tuple = ("*",)
    scale: float = 1.0
    interpreters: dict = field(default_factory=dict)
    callgrind: bool | str = True  # True, or the reason it cannot run under callgrind
    timeout_s: float | None = None  # a tighter per-trial timeout than the profile's (slow debuggers)
    min_max_map_count: int = 0  # vm.max_map_count it needs (checked before a campaign: harness/allocators/brought.py)
    # A build with one defence removed from another configuration (its control): an ablation, not a configuration
    # anyone ships or deploys; the security front shows it against its control, never on the front.
    knock_out_of: str = ""
    not_shipped: str = ""  # why a configuration is no project's shipped one (a control built here)
    settings_reason: str = ""  # why its settings differ from those its project ships
    # why a configuration is a debugging aid, not a default anyone deploys (its project documents it for finding
    # bugs); one run at a reduced scale (scale < 1) is a debugging allocator too
    debugging: str = ""

    @property
    def variant(self) -> str:
        """How programs are built for it: musl relinks our C workloads, the rest preload into glibc ones."""
        return "musl" if self.origin.get("kind") == "musl" else "glibc"

    @property
    def user_supplied(self) -> bool:
        """A library a user brought (EXTRA_ALLOCATORS), anonymous or under a name the catalogue knows."""
        return self.origin.get("kind") == "path" or (brought.is_brought(self) and bool(self.preload))

    @property
    def built_glibc(self) -> bool:
        """A build of the system's glibc source (harness/allocators/glibc_build.py), run through that build's loader."""
        return self.origin.get("kind") == "glibc-build"


@dataclass(frozen=True)
class Resolved:
    allocator: Allocator
    available: bool
    reason: str  # why it is not available ("" when it is)
    preload: tuple = ()  # concrete library paths, in LD_PRELOAD order
    interpreters: dict = field(default_factory=dict)
    loader: tuple = ()  # argv prefix running a program on a built glibc: (ld.so, --library-path, dirs)
    expect: str = ""  # a narrower expect_malloc found here (a glibc build's own cache folder)

    @property
    def expect_malloc(self) -> str:
        """The substring the path of every process's malloc library must contain."""
        return self.expect or self.allocator.expect_malloc


def _allocator_from_table(entry: dict, where: str) -> Allocator:
    known = set(Allocator.__dataclass_fields__)
    unknown = set(entry) - known
    if unknown:
        raise HeapcostError(f"{where}: unknown key(s) {sorted(unknown)}; known: {sorted(known)}")
    for key in ("id", "family", "description", "origin"):
        if key not in entry:
            raise HeapcostError(f"{where}: missing key {key!r}")
    kind = entry["origin"].get("kind")
    if kind not in ORIGIN_KINDS:
        raise HeapcostError(f"{where}: origin kind {kind!r} is not one of {', '.join(ORIGIN_KINDS)}")
    if kind == "glibc-build":
        _check_glibc_build(entry, where)
    bad = [d for d in entry.get("defences", []) if d not in DEFENCES]
    if bad:
        raise HeapcostError(f"{where}: unknown defence(s) {bad}; known: {', '.join(DEFENCES)}")
    values = dict(entry)
    for key in ("preload", "defences", "workloads"):
        if key in values:
            values[key] = tuple(values[key])
    return Allocator(**values)


def _check_glibc_build(entry: dict, where: str) -> None:
    """A glibc-build entry names one of glibc_build.VARIANTS by its id and that variant's patch."""
    ident = entry.get("id")
    known = [*glibc_build.VARIANTS, *glibc_build.LAYOUT_BUILDS]
    if ident not in known:
        raise HeapcostError(f"{where}: glibc-build allocator {ident!r} is not a glibc variant; known: "
                            f"{', '.join(known)}")
    patch = entry["origin"].get("patch", "")
    if (patch or None) != glibc_build.patch_name(ident):
        raise HeapcostError(f"{where}: {ident} is built with patch {glibc_build.patch_name(ident)!r}, "
                            f"the catalogue says {patch!r}")
    if entry.get("preload"):
        raise HeapcostError(f"{where}: {ident} runs through its build's loader: it preloads nothing")


def load_catalog(path: Path = CATALOG_PATH) -> dict[str, Allocator]:
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise HeapcostError(f"cannot read the catalogue {path}: {exc}") from None
    catalog: dict[str, Allocator] = {}
    for i, entry in enumerate(data.get("allocator", [])):
        alloc = _allocator_from_table(entry, f"{Path(path).name} allocator #{i + 1}")
        if alloc.id in catalog:
            raise HeapcostError(f"{Path(path).name}: allocator id {alloc.id!r} appears twice")
        catalog[alloc.id] = alloc
    for alloc in catalog.values():
        if alloc.knock_out_of and alloc.knock_out_of not in catalog:
            raise HeapcostError(f"{Path(path).name}: {alloc.id}'s knock_out_of {alloc.knock_out_of!r} is no "
                                f"allocator of the catalogue")
    recipes = {**mozjemalloc_build.LAYOUT_BUILDS, **glibc_build.LAYOUT_BUILDS}
    derived = [layout_entry(catalog[base], n) for lid, (base, n) in recipes.items()
               if lid not in catalog and base in catalog]
    return _after_their_family(catalog, derived)


def _after_their_family(catalog: dict, derived: list) -> dict:
    """The catalogue with each derived entry placed after the last entry of its family, in the order given."""
    last = {a.family: a.id for a in catalog.values()}
    out = {}
    for ident, alloc in catalog.items():
        out[ident] = alloc
        if last.get(alloc.family) == ident:
            out.update((d.id, d) for d in derived if d.family == alloc.family)
    return out


def layout_entry(base: Allocator, n: int) -> Allocator:
    """The catalogue's entry for layout n of a built allocator: the base's claims, its build string with the
    layout the recipe gives it, and the preload of the layout's own build in the cache."""
    lid = f"{base.id}_l{n}"
    if base.built_glibc:
        how = glibc_build.layout_description(n)
        return replace(base, id=lid, description=f"code layout {n} ({how}) of {base.description}",
                       origin={**base.origin, "build": f"layout={n} ({how})"}, expect_malloc=f"{lid}-")
    how = (f"layout={n} (link order permuted by seed {n}, {mozjemalloc_build.pad_bytes(n)} bytes of .text "
           f"first)")
    return replace(base, id=lid, description=f"code layout {n} of {base.description}",
                   origin={**base.origin, "build": f"{base.origin.get('build', '')} {how}".strip()},
                   preload=tuple(p.replace(f"/allocators/{base.id}-*", f"/allocators/{lid}-*")
                                 for p in base.preload))


def parse_extra(spec: str | None, catalog: dict | None = None) -> list[Allocator]:
    """Bring-your-own allocators: "name=/path/lib.so,other=/path2.so". A name the catalogue knows as `brought`
    (hardened_malloc, OpenBSD's malloc) takes that entry's claims; any other name is an anonymous library."""
    extras = []
    for item in filter(None, (part.strip() for part in (spec or "").split(","))):
        name, sep, lib = item.partition("=")
        name, lib = name.strip(), lib.strip()
        if not sep or not name or not lib:
            raise HeapcostError(f"extra allocator {item!r} is not of the form name=/path/to/lib.so")
        if not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
            raise HeapcostError(f"extra allocator name {name!r} may use only letters, digits, - _ .")
        entry = (catalog or {}).get(name)
        if entry is not None and not brought.is_brought(entry):
            raise HeapcostError(f"extra allocator name {name!r} is already a catalogue id; choose another")
        base, layout = layout_of(name)
        if entry is None and layout > 1 and base in (catalog or {}) and brought.is_brought(catalog[base]):
            entry = (catalog or {})[base]  # <id>_l<N>: another build of that entry, layout N
        record = brought.library_record(name, Path(lib))
        if entry is not None:
            extras.append(brought.adopt(entry, name, record))
            continue
        extras.append(Allocator(
            id=name, family=name, description=f"user-supplied library {record['library']}",
            origin={"kind": "path", **record}, preload=(record["path"],), expect_malloc=record["path"],
            defences=(), defences_ref="user-supplied: no claims recorded"))
    return extras


_LAYOUT = re.compile(r"^(.+)_l([0-9]+)$")


def layout_of(allocator_id: str) -> tuple[str, int]:
    """(the allocator it is a build of, its code layout): `<id>_l<N>` is layout N of `<id>` (a second build
    of the same source differing only in where the code lies); any other id is layout 1."""
    m = _LAYOUT.match(allocator_id)
    return (m.group(1), int(m.group(2))) if m and int(m.group(2)) > 1 else (allocator_id, 1)


_BUILT = re.compile(r"\{cache\}/allocators/([\w.+-]+?)-\*")


def _placeholders_filled(pattern: str) -> str:
    return pattern.replace("{cache}", str(cache_dir())).replace("{venv}", sys.prefix)


def _expand(pattern: str, alloc: Allocator) -> list[str]:
    # A build in the cache ("{cache}/allocators/<id>-*": this entry's own, or another's, as perl-omalloc runs
    # perl-sysmalloc's perl) counts only when finished and verified: a half-built folder matches the glob too.
    built = _BUILT.search(pattern)
    if built:
        prefix = built_prefix(built.group(1))
        if prefix is None:
            return []
        pattern = pattern.replace(built.group(0), glob.escape(str(prefix)))
    pattern = _placeholders_filled(pattern)
    return sorted(glob.glob(pattern, recursive=True), key=lambda p: (os.path.getmtime(p), p))


def _shown(pattern: str) -> str:
    """A catalogue pattern as a reader can look for it, without this machine's home or clone in it (probe runs
    record the reason): the cache as ~/..., the venv relative to the clone."""
    home, cache, venv = Path.home(), cache_dir(), Path(sys.prefix)
    cache_text = f"~/{cache.relative_to(home)}" if cache.is_relative_to(home) else str(cache)
    venv_text = str(venv.relative_to(REPO)) if venv.is_relative_to(REPO) else str(venv)
    return pattern.replace("{cache}", cache_text).replace("{venv}", venv_text)


def _why_absent(alloc: Allocator, pattern: str) -> str:
    """Why a library or interpreter of the catalogue is not here, said as the step that brings it."""
    kind, package = alloc.origin.get("kind"), alloc.origin.get("package", "")
    if kind == "debian-source" and built_prefix(alloc.id) is None:
        return f"{glibc_build.NOT_BUILT_YET}: `make allocators` builds it from the Debian source of {package}"
    where = _shown(pattern)
    if kind in ("debian", "musl"):
        return f"not installed yet: `make allocators` installs the Debian package {package} ({where})"
    if kind == "pypi":
        return f"not installed yet: `make venv` installs {package} from requirements.txt ({where})"
    if kind == "debian-source":
        return f"not found: {where} (the build lacks it: `python -m analysis provision --only {alloc.id} --force`)"
    return f"not found: {where}" + (f" (Debian package {package})" if package else "")


def resolve_glibc_build(alloc: Allocator) -> Resolved:
    """A glibc build is available once built; its programs start through its loader, and their malloc must
    come from the libc.so.6 of its own cache folder (so the system's libc fails the check)."""
    try:
        version = glibc_build.installed_source_version()
    except HeapcostError as exc:
        return Resolved(alloc, False, str(exc))
    ok, why = glibc_build.availability(alloc.id, version)
    if not ok:
        return Resolved(alloc, False, why)
    folder = glibc_build.variant_dir(alloc.id, version)
    return Resolved(alloc, True, "", loader=tuple(glibc_build.loader_argv(alloc.id, version)),
                    expect=f"/{folder.name}/build/")


def resolve(alloc: Allocator) -> Resolved:
    """Find the concrete libraries and interpreters of an allocator here, or say why it is unavailable."""
    if alloc.built_glibc:
        return resolve_glibc_build(alloc)
    if brought.is_brought(alloc) and not alloc.preload:
        return Resolved(alloc, False, brought.unavailable_reason(alloc))
    libs = []
    for pattern in ([] if alloc.user_supplied else alloc.preload):
        found = _expand(pattern, alloc)
        if not found:
            return Resolved(alloc, False, _why_absent(alloc, pattern))
        libs.append(found[-1])  # the newest build
    if alloc.user_supplied:
        libs = list(alloc.preload)
    interpreters = {}
    for name, pattern in alloc.interpreters.items():
        found = [p for p in _expand(pattern, alloc) if os.access(p, os.X_OK)]
        if not found:
            return Resolved(alloc, False, _why_absent(alloc, pattern))
        interpreters[name] = found[-1]
    if alloc.variant == "musl" and shutil.which("musl-gcc") is None:
        return Resolved(alloc, False, "not installed yet: `make allocators` installs the Debian package "
                        f"{alloc.origin.get('package') or 'musl-tools'} (musl-gcc)")
    return Resolved(alloc, True, "", tuple(libs), interpreters)


def select(names: str | None, extra: str | None = None, *, catalog=None,
           require_available: bool = True) -> list[Allocator]:
    """The allocators a command names ("a,b,c"), plus bring-your-own extras ("name=/path.so,...").

    With require_available (measuring), empty names mean every allocator available here and a named one
    that is not available is an error. Without it (probing records n/a, provisioning makes them
    available), empty names mean the whole catalogue."""
    catalog = dict(catalog or load_catalog())
    extras = parse_extra(extra, catalog)
    for e in extras:
        catalog[e.id] = e
    wanted = [n.strip() for n in (names or "").split(",") if n.strip()]
    if not wanted:
        chosen = [a for a in catalog.values()
                  if not require_available or a.user_supplied or resolve(a).available]
    elif not require_available:
        unknown = [n for n in wanted if n not in catalog]
        if unknown:
            raise HeapcostError(f"unknown allocator(s) {', '.join(unknown)}; valid: {', '.join(catalog)}")
        chosen = [catalog[n] for n in dict.fromkeys(wanted)] + [e for e in extras if e.id not in wanted]
    else:
        unknown = [n for n in wanted if n not in catalog]
        if unknown:
            raise HeapcostError(f"unknown allocator(s) {', '.join(unknown)}; valid: {', '.join(catalog)}")
        chosen = [catalog[n] for n in dict.fromkeys(wanted)]
        chosen += [e for e in extras if e.id not in wanted]
        missing = [(a.id, r.reason) for a in chosen if not (r := resolve(a)).available]
        if missing:
            raise HeapcostError("not available here: " + "; ".join(f"{i}: {why}" for i, why in missing))
    return chosen


def for_campaign(names: str | None, extra: str | None, *, baseline: str | None = None, check=None) -> dict:
    """The allocators a campaign measures, resolved once: those `names` and `extra` select (`select`), with
    `baseline` joined when given, each resolved here; every brought library passed to `check` (the harness's
    test that it preloads and serves malloc) and vm.max_map_count held against what they need."""
    allocs = select(names, extra)
    if baseline and baseline not in {a.id for a in allocs}:
        allocs = select(f"{baseline},{names or ''}", extra)
    resolved = {a.id: resolve(a) for a in allocs}
    for r in resolved.values():
        if check is not None and r.allocator.user_supplied:
            check(r)
    brought.check_map_count(allocs)
    return resolved


# ----------------------------------------------------------------------------- published provenance
def _entry_for(name: str, catalog: dict) -> Allocator | None:
    """The catalogue entry a name belongs to: its own, or for a layout name `<id>_l<N>` that of `<id>`."""
    return catalog.get(name) or catalog.get(layout_of(name)[0])


def _catalogue_says(entry: Allocator) -> str:
    """What the catalogue says an entry is built from, on one line: its origin's fields (upstream, revision or
    package, version, patch, build, ...)."""
    fields = ", ".join(f"{k} {v}" for k, v in entry.origin.items() if k != "kind" and v not in (None, ""))
    return f"the catalogue's {entry.id} ({entry.origin.get('kind')}): {fields or 'no origin fields'}"


def _value_text(value) -> str:
    """A recorded value on one line: a list as a shell takes it (an item quoted when it holds a space)."""
    return shlex.join(str(v) for v in value) if isinstance(value, (list, tuple)) else str(value)


def _fields(record: dict, section: tuple = ()) -> list:
    """A run's record of a build as ((section, key), value text) pairs: nested tables opened into sections,
    empty values left out."""
    pairs = []
    for key, value in record.items():
        if isinstance(value, dict):
            pairs += _fields(value, (*section, key))
        elif value not in (None, "", []):
            pairs.append(((section, key), _value_text(value)))
    return pairs


def _runs_said(run_ids: list, total: int) -> str:
    """How many of a build's runs recorded something, with the first and last of them."""
    if len(run_ids) == 1:
        return f"1 of {total} runs: {run_ids[0]}"
    return f"{len(run_ids)} of {total} runs: first {run_ids[0]}, last {run_ids[-1]}"


def _section_runs(fields: dict) -> list | None:
    """The runs that recorded a section when every field of it was recorded by the same runs, else None."""
    held = {tuple(sorted(i for ids in values.values() for i in ids)) for values in fields.values()}
    return list(held.pop()) if len(held) == 1 else None


def _field_lines(runs: list) -> list[str]:
    """Every field the runs recorded of one build as `key: value` lines under their sections, each value once;
    a section, or a value, that not every run recorded says which runs did."""
    seen: dict = {}
    for run_id, record in runs:
        for (section, key), text in _fields(record):
            seen.setdefault(section, {}).setdefault(key, {}).setdefault(text, []).append(run_id)
    every = [run_id for run_id, _ in runs]
    lines = []
    for section in sorted(seen, key=len):  # the top level first, then the sections in the order recorded
        fields = seen[section]
        base = (_section_runs(fields) if section else None) or every
        if section:
            said = f"  (recorded by {_runs_said(base, len(runs))})" if base != every else ""
            lines.append(f"{'  ' * len(section)}{'.'.join(section)}:{said}")
        indent = "  " * (len(section) + 1)
        for key, values in fields.items():
            for text, ids in values.items():
                lines.append(f"{indent}{key}: {text}" + ("" if ids == base else f"  ({_runs_said(ids, len(runs))})"))
    return lines


def _build_lines(number: int, total: int, libraries: tuple, runs: list) -> list[str]:
    """One published build: its libraries' sha256, the runs that recorded it, and how they say it was built."""
    ids = [run_id for run_id, _ in runs]
    said = f"1 run, {ids[0]}" if len(ids) == 1 else f"{len(ids)} runs, first {ids[0]}, last {ids[-1]}"
    lines = [f"build {number} of {total}: recorded by {said}"]
    lines += [f"  sha256 {sha} {file}" for file, sha in libraries]
    if not libraries:
        lines.append("  sha256: not recorded (these runs identified no library of it)")
    return lines + _field_lines(runs)


def _unknown(name: str, catalog: dict, runs_dir: Path) -> HeapcostError:
    """The error for a name neither the catalogue nor the dataset knows, with the closest name they do know."""
    names = sorted({*catalog, *brought.published_builds(runs_dir)})
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"; did you mean {close[0]}?" if close else "; `python -m analysis allocators` lists the catalogue"
    return HeapcostError(f"unknown allocator {name!r}: neither the catalogue nor any published run names it{hint}")


def provenance_lines(name: str, catalog: dict | None = None, runs_dir: Path | None = None) -> list[str]:
    """The whole published build configuration of allocator `name`: each distinct build the dataset's runs
    recorded under it, with what the catalogue says it is built from. What the runs recorded is printed as
    stored (their paths are already portable: {cache}, {elsewhere})."""
    catalog = load_catalog() if catalog is None else catalog
    runs_dir = RUNS_DIR if runs_dir is None else Path(runs_dir)
    entry, builds = _entry_for(name, catalog), brought.published_records(runs_dir, name)
    if not builds:
        if entry is None:
            raise _unknown(name, catalog, runs_dir)
        return [f"{name}: no published run recorded it; {_catalogue_says(entry)}"]
    said = _catalogue_says(entry) if entry else "the catalogue has no entry for it (a library brought by path)"
    lines = [f"{name}: {len(builds)} published build{'s' if len(builds) > 1 else ''}; {said}"]
    for number, (libraries, runs) in enumerate(builds.items(), 1):
        lines += ["", *_build_lines(number, len(builds), libraries, runs)]
    return lines


# ---------------------------------------------------------------------------------------- CLI
def add_arguments(parser):
    parser.add_argument("--extra", default="", help="bring-your-own allocators: name=/path/lib.so,...")
    parser.add_argument("--available", action="store_true", help="list only those available here")
    parser.add_argument("--provenance", metavar="NAME", default="",
                        help="print how every published run recorded allocator NAME's build (sha256, upstream, "
                             "revision, configuration, compiler, ...), to rebuild it by hand")


def run(args) -> int:
    if getattr(args, "provenance", ""):  # callers other than the CLI may pass only the listing's options
        print("\n".join(provenance_lines(args.provenance)))
        return 0
    catalog = load_catalog()
    for e in parse_extra(args.extra, catalog):
        catalog[e.id] = e
    rows = []
    for alloc in catalog.values():
        r = resolve(alloc)
        if args.available and not r.available:
            continue
        where = (" ".join(r.preload) or " ".join(r.interpreters.values())
                 or (f"loader {r.loader[0]}" if r.loader else alloc.origin.get("kind")))
        rows.append((alloc.id, alloc.family, "yes" if r.available else "no", r.reason or where))
    widths = [max(len(row[i]) for row in rows + [("id", "family", "here", "")]) for i in range(3)]
    print(f"{'id':<{widths[0]}}  {'family':<{widths[1]}}  {'here':<{widths[2]}}  library / why not")
    for row in rows:
        print(f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:<{widths[2]}}  {row[3]}")
    return 0
