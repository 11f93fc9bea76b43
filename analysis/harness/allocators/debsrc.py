"""Fetch Debian source packages through a project-local apt configuration.

The deb-src entries are derived from the machine's own apt sources (same URIs, suites, components and
keyring) and written under the cache, so /etc is never touched and the system's package lists and
caches stay as they were.
"""
import fcntl
import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from analysis.errors import HeapcostError
from analysis.paths import cache_dir

SYSTEM_APT_ETC = Path("/etc/apt")
COMPLETE_MARK = ".heapcost-complete"
APT_HELPER = "/usr/lib/apt/apt-helper"


@dataclass(frozen=True)
class SourceEntry:
    """One apt repository: what a deb-src stanza needs to reach its source indices."""
    uris: tuple
    suites: tuple
    components: tuple
    signed_by: str = ""
    options: tuple = field(default_factory=tuple)  # other deb822 fields, e.g. (("Trusted", "yes"),)


# ---- reading apt sources ------------------------------------------------------------------------

_ONE_LINE_OPTION_NAMES = {"signed-by": "Signed-By", "trusted": "Trusted", "check-valid-until": "Check-Valid-Until",
                          "allow-insecure": "Allow-Insecure", "arch": "Architectures", "lang": "Languages"}


def parse_one_line(text: str) -> list:
    """Parse the one-line format (sources.list): `deb [opt=val ...] URI SUITE [COMPONENT...]`."""
    entries = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        kind, _, rest = line.partition(" ")
        if kind not in ("deb", "deb-src"):
            continue
        rest = rest.strip()
        opts = {}
        if rest.startswith("["):
            inside, _, rest = rest[1:].partition("]")
            for item in inside.split():
                key, _, value = item.partition("=")
                opts[key.lower()] = value
        words = rest.split()
        if len(words) < 2:
            continue
        signed_by = opts.pop("signed-by", "")
        extra = tuple((_ONE_LINE_OPTION_NAMES.get(k, k), v.replace(",", " ")) for k, v in sorted(opts.items())
                      if k not in ("arch", "lang"))  # binary architectures and languages mean nothing for sources
        entries.append(SourceEntry((words[0],), (words[1],), tuple(words[2:]), signed_by, extra))
    return entries


def _deb822_paragraphs(text: str):
    para, key = {}, None
    for raw in text.splitlines() + [""]:
        if raw.startswith("#"):
            continue
        if not raw.strip():
            if para:
                yield para
            para, key = {}, None
        elif raw[0] in " \t" and key:
            para[key] += "\n" + raw.strip()
        else:
            key, _, value = raw.partition(":")
            key = key.strip()
            para[key] = value.strip()


def parse_deb822(text: str) -> list:
    """Parse the deb822 format (*.sources); paragraphs with `Enabled: no` or no `deb` type are skipped."""
    entries = []
    for para in _deb822_paragraphs(text):
        fields = {k.lower(): (k, v) for k, v in para.items()}
        get = lambda name: fields.get(name, ("", ""))[1]  # noqa: E731
        if get("enabled").lower() == "no" or "deb" not in get("types").split() and "deb-src" not in get("types").split():
            continue
        uris, suites = tuple(get("uris").split()), tuple(get("suites").split())
        if not uris or not suites:
            continue
        signed_by = get("signed-by").strip()
        extra = tuple((k, v) for low, (k, v) in sorted(fields.items())
                      if low in ("trusted", "check-valid-until", "allow-insecure"))
        entries.append(SourceEntry(uris, suites, tuple(get("components").split()), signed_by, extra))
    return entries


def system_entries(etc: Path = SYSTEM_APT_ETC) -> list:
    """The repositories the machine's apt uses, in apt's own reading order, duplicates removed."""
    etc = Path(etc)
    entries = []
    main = etc / "sources.list"
    if main.is_file():
        entries += parse_one_line(main.read_text(errors="replace"))
    parts = etc / "sources.list.d"
    if parts.is_dir():
        # apt reads only these two suffixes; anything else (e.g. *.disabled) is ignored, as here
        for path in sorted(parts.iterdir()):
            if path.suffix == ".list":
                entries += parse_one_line(path.read_text(errors="replace"))
            elif path.suffix == ".sources":
                entries += parse_deb822(path.read_text(errors="replace"))
    seen, unique = set(), []
    for e in entries:
        if e not in seen:
            seen.add(e)
            unique.append(e)
    return unique


def render_deb_src(entries) -> str:
    """deb822 text with `Types: deb-src` for each entry."""
    paragraphs = []
    for e in entries:
        lines = ["Types: deb-src", "URIs: " + " ".join(e.uris), "Suites: " + " ".join(e.suites)]
        if e.components:
            lines.append("Components: " + " ".join(e.components))
        if e.signed_by:
            value = e.signed_by
            if "\n" in value:  # an inline key block keeps its continuation lines indented
                value = "\n ".join(value.split("\n"))
            lines.append("Signed-By: " + value)
        lines += [f"{k}: {v}" for k, v in e.options]
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs) + "\n"


# ---- Debian version ordering ----------------------------------------------------------------------

def _order(c: str) -> int:
    if c == "~":
        return -1
    if c.isdigit():
        return 0
    if c.isalpha():
        return ord(c)
    return ord(c) + 256


def _compare_part(a: str, b: str) -> int:
    i = j = 0
    while i < len(a) or j < len(b):
        first_diff = 0
        while (i < len(a) and not a[i].isdigit()) or (j < len(b) and not b[j].isdigit()):
            ac = _order(a[i]) if i < len(a) and not a[i].isdigit() else 0
            bc = _order(b[j]) if j < len(b) and not b[j].isdigit() else 0
            if ac != bc:
                return -1 if ac < bc else 1
            i += 1
            j += 1
        while i < len(a) and a[i] == "0":
            i += 1
        while j < len(b) and b[j] == "0":
            j += 1
        while i < len(a) and a[i].isdigit() and j < len(b) and b[j].isdigit():
            if not first_diff:
                first_diff = ord(a[i]) - ord(b[j])
            i += 1
            j += 1
        if i < len(a) and a[i].isdigit():
            return 1
        if j < len(b) and b[j].isdigit():
            return -1
        if first_diff:
            return -1 if first_diff < 0 else 1
    return 0


def _split_version(v: str):
    epoch, _, rest = v.partition(":") if ":" in v else ("0", "", v)
    upstream, _, revision = rest.rpartition("-") if "-" in rest else (rest, "", "")
    return int(epoch or 0), upstream, revision


def compare_versions(a: str, b: str) -> int:
    """Debian policy ordering (as `dpkg --compare-versions`): -1, 0 or 1."""
    ea, ua, ra = _split_version(a)
    eb, ub, rb = _split_version(b)
    if ea != eb:
        return -1 if ea < eb else 1
    return _compare_part(ua, ub) or _compare_part(ra, rb)


def newest_first(versions) -> list:
    return sorted(set(versions), key=functools.cmp_to_key(compare_versions), reverse=True)


def parse_showsrc(text: str, package: str) -> list:
    """Versions of source `package` in `apt-cache showsrc` output."""
    versions = []
    for para in _deb822_paragraphs(text):
        if para.get("Package") == package and para.get("Version"):
            versions.append(para["Version"])
    return versions


@dataclass(frozen=True)
class SourceFile:
    """One file of a source package as `apt-get source --print-uris` lists it."""
    uri: str
    name: str
    size: int
    hash: str  # e.g. "SHA256:<hex>", as apt-helper download-file takes it


_PRINT_URI = re.compile(r"^'([^']+)' (\S+) (\d+) (\S+)$")


def parse_print_uris(text: str) -> list:
    """[SourceFile] from `apt-get source --print-uris` output (other lines, e.g. notices, are skipped)."""
    files = [SourceFile(m[1], m[2], int(m[3]), m[4]) for m in map(_PRINT_URI.match, text.splitlines()) if m]
    return sorted(files, key=lambda f: not f.name.endswith(".dsc"))


# ---- the private apt configuration ---------------------------------------------------------------

def safe_name(text: str) -> str:
    """A version as a path component: '1:2.0+ds-1~x' -> '1_2.0+ds-1~x' (only ':' and '/' are replaced)."""
    return re.sub(r"[:/]", "_", text)


class AptSources:
    """apt-get and apt-cache run against deb-src lists kept under `root` (default: <cache>/apt)."""

    def __init__(self, root: Path = None, etc: Path = SYSTEM_APT_ETC, runner=subprocess.run, log=None):
        self.root = Path(root) if root else cache_dir() / "apt"
        self.etc = Path(etc)
        self.runner = runner
        self.log = log  # an open text file receiving the commands' output; by default <cache>/logs/debsrc.log

    @property
    def parts_dir(self) -> Path:
        return self.root / "sources.list.d"

    def options(self) -> list:
        opts = {
            "Dir::Etc::SourceList": "/dev/null",
            "Dir::Etc::SourceParts": str(self.parts_dir),
            "Dir::State::Lists": str(self.root / "lists"),
            # the binary caches too: otherwise apt would rebuild the system's pkgcache from our source-only lists
            "Dir::Cache": str(self.root / "cache"),
            "Dir::Cache::Archives": str(self.root / "cache" / "archives"),
        }
        if os.geteuid() == 0:
            # the cache usually lies under /root, which the _apt sandbox user cannot enter
            opts["APT::Sandbox::User"] = "root"
        return [arg for k, v in opts.items() for arg in ("-o", f"{k}={v}")]

    def write_sources(self) -> Path:
        entries = system_entries(self.etc)
        if not entries:
            raise HeapcostError(f"no apt repositories found in {self.etc}/sources.list or {self.etc}/sources.list.d/; "
                                "heapcost derives its deb-src entries from them")
        self.parts_dir.mkdir(parents=True, exist_ok=True)
        for d in (self.root / "lists" / "partial", self.root / "cache" / "archives" / "partial"):
            d.mkdir(parents=True, exist_ok=True)
        target = self.parts_dir / "heapcost-deb-src.sources"
        text = render_deb_src(entries)
        if not target.is_file() or target.read_text() != text:
            target.write_text(text)
            for stale in (self.root / "lists").glob("*_Sources*"):
                stale.unlink()  # the repositories changed: the old indices must not be trusted
        return target

    def _run(self, argv, cwd=None):
        if self.log is None:
            path = cache_dir() / "logs" / "debsrc.log"
            path.parent.mkdir(parents=True, exist_ok=True)
            self.log = open(path, "a")
        self.log.write("$ " + " ".join(argv) + "\n")
        self.log.flush()
        proc = self.runner(argv, cwd=cwd, capture_output=True, text=True)
        self.log.write(proc.stdout + proc.stderr)
        self.log.flush()
        return proc

    def has_lists(self) -> bool:
        return any((self.root / "lists").glob("*_Sources*"))

    def update(self, force=False):
        self.write_sources()
        if self.has_lists() and not force:
            return
        proc = self._run(["apt-get", "-q", *self.options(), "update"])
        if proc.returncode != 0 or not self.has_lists():
            raise HeapcostError("apt-get update of the deb-src lists failed: " + _last_error(proc)
                                + f" (config in {self.parts_dir})")

    def source_versions(self, package: str) -> list:
        self.update()
        proc = self._run(["apt-cache", *self.options(), "showsrc", "--only-source", package])
        versions = newest_first(parse_showsrc(proc.stdout, package))
        if not versions:
            # lists may be stale (a repository dropped the package); refresh once before giving up
            self.update(force=True)
            proc = self._run(["apt-cache", *self.options(), "showsrc", "--only-source", package])
            versions = newest_first(parse_showsrc(proc.stdout, package))
        if not versions:
            raise HeapcostError(f"no Debian source package named {package!r} in the configured repositories")
        return versions

    def download(self, package: str, version: str, dest: Path) -> bool:
        """Download the source files (.dsc and tarballs) of one version into dest; False if that fails."""
        proc = self._run(["apt-get", "-q", *self.options(), "source", "--download-only", f"{package}={version}"],
                         cwd=dest)
        return proc.returncode == 0 and any(dest.glob("*.dsc"))

    def source_files(self, package: str, version: str) -> list:
        """The files of one source version as apt would download them: [SourceFile], .dsc first."""
        self.update()
        proc = self._run(["apt-get", "-q", *self.options(), "source", "--print-uris", f"{package}={version}"])
        files = parse_print_uris(proc.stdout)
        if proc.returncode != 0 or not files:
            raise HeapcostError(f"no source files for {package}={version} in the configured repositories: "
                                + _last_error(proc))
        return files

    def download_file(self, source_file, dest: Path) -> Path:
        """One file of a source package into dest, checked against the hash apt listed for it."""
        target = Path(dest) / source_file.name
        proc = self._run([APT_HELPER, *self.options(), "download-file", source_file.uri, str(target),
                          source_file.hash])
        if proc.returncode != 0 or not target.is_file():
            raise HeapcostError(f"downloading {source_file.name} failed: " + _last_error(proc))
        return target

    def extract(self, dsc: Path, dest: Path):
        proc = self._run(["dpkg-source", "-x", str(dsc), str(dest)], cwd=dsc.parent)
        if proc.returncode != 0:
            raise HeapcostError(f"dpkg-source -x {dsc.name} failed: " + _last_error(proc))


def _last_error(proc) -> str:
    lines = [ln for ln in (proc.stderr or "").splitlines() + (proc.stdout or "").splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("E:")] or lines
    return errors[-1].strip() if errors else f"exit status {proc.returncode}"


# ---- the public functions ---------------------------------------------------------------------------

def sources_root() -> Path:
    return cache_dir() / "sources"


def cached_tree(package: str, version: str, root: Path = None) -> Path:
    return (Path(root) if root else sources_root()) / f"{package}-{safe_name(version)}" / "tree"


def source_versions(package: str, apt: AptSources = None) -> list:
    """Versions of the source package in the configured repositories, newest first."""
    return (apt or AptSources()).source_versions(package)


def fetch_source(package: str, version: str = None, apt: AptSources = None, root: Path = None) -> Path:
    """The extracted source tree of `package` (newest version that downloads, or exactly `version`).

    Trees are cached under <cache>/sources/<package>-<version>/tree and reused. A repository may list a
    version whose files are gone (bookworm-security has done so for perl); then the next newest is tried.
    """
    apt = apt or AptSources()
    root = Path(root) if root else sources_root()
    if version is not None:
        tree = cached_tree(package, version, root)
        if (tree.parent / COMPLETE_MARK).is_file():
            return tree
        candidates = [version]
    else:
        candidates = apt.source_versions(package)
    failed = []
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for v in candidates:
            tree = cached_tree(package, v, root)
            if (tree.parent / COMPLETE_MARK).is_file():
                return tree
            tmp = root / f".tmp-{package}-{safe_name(v)}-{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            try:
                if not apt.download(package, v, tmp):
                    failed.append(v)
                    continue
                dsc = sorted(tmp.glob("*.dsc"))[0]
                apt.extract(dsc, tmp / "tree")
                (tmp / COMPLETE_MARK).write_text(f"{package} {v}\n")
                shutil.rmtree(tree.parent, ignore_errors=True)
                os.rename(tmp, tree.parent)
                return tree
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    raise HeapcostError(f"could not download source package {package} (tried {', '.join(failed)}); "
                        f"see {getattr(apt.log, 'name', 'the apt-get output')}")


def version_of_tree(tree: Path) -> str:
    """The version a cached tree was fetched as (read back from its completion mark)."""
    return (Path(tree).parent / COMPLETE_MARK).read_text().split()[1]
