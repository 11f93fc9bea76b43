"""Selected paths of a Debian source package, for packages too big to unpack whole.

`debsrc.fetch_source` unpacks a whole package with dpkg-source; firefox-esr's upstream tarball is 683 MB of
xz in one block and several GB unpacked. Here only the .dsc, the main upstream tarball and the Debian
tarball are downloaded (component tarballs such as firefox-esr's 100 translation ones are skipped), each
checked against the hash apt lists for it; the selected paths are extracted from the upstream tarball in
one pass (one read of the compressed stream) and the Debian tarball is unpacked beside them as debian/.
Debian's patches are not applied: a recipe that needs them applies them itself.
The downloads are deleted once extracted; the tree is cached under
<cache>/sources/<package>-<version>-paths-<digest of the paths>/tree, keyed by version and paths.
"""
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from analysis.errors import HeapcostError
from analysis.harness.allocators import debsrc

_COMPONENT_TARBALL = re.compile(r"\.orig-[^/]+\.tar\.[a-z0-9]+$")
_TARBALL = re.compile(r"\.tar\.[a-z0-9]+$")


def wanted_files(files) -> tuple:
    """(dsc, upstream tarball, Debian tarball or None) among a version's files; component tarballs and
    signatures are left out. A native package's single tarball is its upstream tarball."""
    dsc = [f for f in files if f.name.endswith(".dsc")]
    tarballs = [f for f in files if _TARBALL.search(f.name) and not _COMPONENT_TARBALL.search(f.name)]
    debian = [f for f in tarballs if ".debian.tar." in f.name]
    upstream = [f for f in tarballs if f not in debian]
    if len(dsc) != 1 or len(upstream) != 1 or len(debian) > 1:
        names = ", ".join(f.name for f in files) or "none"
        raise HeapcostError(f"expected one .dsc, one upstream tarball and at most one Debian tarball; got {names}")
    return dsc[0], upstream[0], (debian[0] if debian else None)


def check_paths(paths) -> tuple:
    """The selected paths, relative to the source's top directory, without '..', duplicates or wildcards."""
    cleaned = []
    for p in paths:
        p = str(p).strip().strip("/")
        if not p or p.startswith(".") or ".." in p.split("/") or any(c in p for c in "*?[\\"):
            raise HeapcostError(f"not a plain relative path inside a source tree: {p!r}")
        if p not in cleaned:
            cleaned.append(p)
    if not cleaned:
        raise HeapcostError("no paths selected for extraction")
    return tuple(cleaned)


def paths_digest(paths) -> str:
    return hashlib.sha256("\n".join(sorted(check_paths(paths))).encode()).hexdigest()[:10]


def cached_paths_tree(package: str, version: str, paths, root: Path = None) -> Path:
    root = Path(root) if root else debsrc.sources_root()
    return root / f"{package}-{debsrc.safe_name(version)}-paths-{paths_digest(paths)}" / "tree"


def top_prefix(tarball: Path) -> str:
    """The leading directory of a tarball's members as tar writes them ('pkg-1.0' or './pkg-1.0').

    Only the start of the stream is decompressed: tar is stopped at the first member below the top."""
    proc = subprocess.Popen(["tar", "-tf", str(tarball)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    try:
        for line in proc.stdout:
            name = line.rstrip("\n")
            parts = [p for p in name.split("/") if p]
            if name in ("./", ".") or not parts:
                continue
            if parts[0] == ".":
                return "./" + parts[1] if len(parts) > 1 else "."
            return parts[0]
    finally:
        proc.kill()
        proc.wait()
    raise HeapcostError(f"{Path(tarball).name} lists no member under a top directory")


def extract_command(tarball: Path, dest: Path, paths, prefix: str) -> list:
    """tar reading the tarball once and writing only the selected paths, top directory stripped."""
    strip = len([p for p in prefix.split("/") if p])
    return ["tar", "-xf", str(tarball), "-C", str(dest), "--no-wildcards", f"--strip-components={strip}",
            *[f"{prefix}/{p}" for p in check_paths(paths)]]


def extract_paths(tarball: Path, dest: Path, paths, log=None):
    """Extract only `paths` of the tarball into dest; a path the tarball lacks is an error naming it."""
    Path(dest).mkdir(parents=True, exist_ok=True)
    argv = extract_command(tarball, dest, paths, top_prefix(tarball))
    if log is not None:
        log.write("$ " + " ".join(argv) + "\n")
        log.flush()
    proc = subprocess.run(argv, capture_output=True, text=True)
    if log is not None:
        log.write(proc.stdout + proc.stderr)
        log.flush()
    if proc.returncode != 0:
        missing = [ln.split(": ")[1] for ln in proc.stderr.splitlines() if ln.endswith("Not found in archive")]
        what = f"no {', '.join(missing)} in it" if missing else (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise HeapcostError(f"extracting from {Path(tarball).name} failed: {what}")


def fetch_source_paths(package: str, version: str, paths, apt=None, root: Path = None) -> Path:
    """The tree holding only `paths` (and debian/) of one source version, downloaded and extracted once."""
    paths = check_paths(paths)
    if not version:
        raise HeapcostError(f"extracting selected paths of {package} needs an explicit source version")
    root = Path(root) if root else debsrc.sources_root()
    tree = cached_paths_tree(package, version, paths, root)
    if (tree.parent / debsrc.COMPLETE_MARK).is_file():
        return tree
    apt = apt or debsrc.AptSources()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (tree.parent / debsrc.COMPLETE_MARK).is_file():
            return tree
        tmp = root / f".tmp-{tree.parent.name}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        (tmp / "files").mkdir(parents=True)
        try:
            dsc, upstream, debian = wanted_files(apt.source_files(package, version))
            for f in (dsc, upstream, debian):
                if f is not None:
                    apt.download_file(f, tmp / "files")
            extract_paths(tmp / "files" / upstream.name, tmp / "tree", paths, log=getattr(apt, "log", None))
            if debian is not None:
                proc = subprocess.run(["tar", "-xf", str(tmp / "files" / debian.name), "-C", str(tmp / "tree")],
                                      capture_output=True, text=True)
                if proc.returncode != 0:
                    raise HeapcostError(f"unpacking {debian.name} failed: {proc.stderr.strip()[-200:]}")
            shutil.rmtree(tmp / "files")
            # the first line is what debsrc.version_of_tree reads
            (tmp / debsrc.COMPLETE_MARK).write_text(f"{package} {version}\n" + "\n".join(paths) + "\n")
            shutil.rmtree(tree.parent, ignore_errors=True)
            os.rename(tmp, tree.parent)
            return tree
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
