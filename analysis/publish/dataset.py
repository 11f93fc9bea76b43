"""`python -m analysis dataset`: the versioned dataset archive for deposit, with its checksum.

dist/heapcost-dataset-<version>.tar.gz holds data/ (runs, literature, README.md codebook,
datapackage.json) and CITATION.cff under one top directory. It is deterministic: members sorted, fixed
mtime, owner and modes, gzip header time 0; the same data gives the same bytes and the same sha256,
which the paper cites. In a git checkout it holds exactly the files of data/ that git tracks: a stray run
someone left in data/runs/ changes neither the archive nor the checksum. Outside a checkout (an unpacked
archive) or when git tracks nothing there, every file counts.
"""
import gzip
import hashlib
import io
import subprocess
import tarfile
from pathlib import Path

from analysis import __version__
from analysis.publish.datapackage import DATASET_NAME, dataset_files
from analysis.errors import HeapcostError
from analysis.paths import DATA_DIR, REPO

# 2026-01-01T00:00:00Z: any fixed time would do; a real date keeps unpackers from warning about 1970.
FIXED_MTIME = 1767225600


def archive_name(version: str = __version__) -> str:
    return f"{DATASET_NAME}-{version}.tar.gz"


def tracked_files(data_dir: Path) -> set[Path] | None:
    """The files under data_dir that git tracks (resolved paths), or None when data_dir is not in a git
    work tree, git is missing, or it tracks nothing there."""
    try:
        out = subprocess.run(["git", "-C", str(data_dir), "ls-files", "-z", "--", "."], capture_output=True,
                             check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    files = {(Path(data_dir) / name).resolve() for name in out.decode().split("\0") if name}
    return files or None


def members(data_dir: Path = DATA_DIR, citation: Path | None = REPO / "CITATION.cff") -> list[tuple[str, Path]]:
    """(name in the archive, file) for every file, sorted by name."""
    data_dir = Path(data_dir)
    top = f"{DATASET_NAME}-{__version__}"
    tracked = tracked_files(data_dir)
    keep = (lambda p: True) if tracked is None else (lambda p: p.resolve() in tracked)
    files = [(f"{top}/data/{p.relative_to(data_dir).as_posix()}", p) for p in dataset_files(data_dir) if keep(p)]
    if (data_dir / "datapackage.json").is_file() and keep(data_dir / "datapackage.json"):
        files.append((f"{top}/data/datapackage.json", data_dir / "datapackage.json"))
    if citation is not None and Path(citation).is_file():
        files.append((f"{top}/CITATION.cff", Path(citation)))
    return sorted(files)


def archive_bytes(data_dir: Path = DATA_DIR, citation: Path | None = REPO / "CITATION.cff") -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, path in members(data_dir, citation):
            info = tarfile.TarInfo(name)
            data = path.read_bytes()
            info.size = len(data)
            info.mtime = FIXED_MTIME
            info.mode = 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    # mtime=0 and no file name in the gzip header: the compressed bytes depend on the content only
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def checksum(data_dir: Path = DATA_DIR, citation: Path | None = REPO / "CITATION.cff") -> str:
    return hashlib.sha256(archive_bytes(data_dir, citation)).hexdigest()


def write_archive(out_dir: Path, data_dir: Path = DATA_DIR, citation: Path | None = REPO / "CITATION.cff") -> tuple[Path, str]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    blob = archive_bytes(data_dir, citation)
    digest = hashlib.sha256(blob).hexdigest()
    path = out_dir / archive_name()
    path.write_bytes(blob)
    (out_dir / f"{path.name}.sha256").write_text(f"{digest}  {path.name}\n")
    return path, digest


def refresh_description(data_dir: Path) -> list[str]:
    """Rewrite the codebook and datapackage.json from the files, then validate; returns what changed."""
    from analysis.publish.codebook import write_codebook
    from analysis.publish.datapackage import build_datapackage, write_datapackage
    from analysis.publish.validate import validate

    changed = []
    path, did = write_codebook(data_dir)
    if did:
        changed.append(str(path))
    pkg = Path(data_dir) / "datapackage.json"
    import json

    current = json.loads(pkg.read_text()) if pkg.is_file() else None
    if current != build_datapackage(data_dir):
        write_datapackage(data_dir)
        changed.append(str(pkg))
    errors = validate(data_dir)
    if errors:
        raise HeapcostError(f"{data_dir} does not validate ({len(errors)} errors), first: {errors[0]}; "
                            f"see `python -m analysis validate {data_dir}`")
    return changed


def add_arguments(parser):
    parser.add_argument("--data", default=str(DATA_DIR), help="the dataset directory (default data)")
    parser.add_argument("--out", default=str(REPO / "dist"), help="where the archive goes (default dist/)")
    parser.add_argument("--no-refresh", action="store_true",
                        help="archive as is, without rewriting README.md and datapackage.json first")


def run(args) -> int:
    data_dir = Path(args.data)
    if not (data_dir / "runs").is_dir():
        raise HeapcostError(f"{data_dir} has no runs/ directory; give the dataset directory (default data)")
    if not args.no_refresh:
        for path in refresh_description(data_dir):
            print(f"rewrote {path}")
    path, digest = write_archive(Path(args.out), data_dir)
    print(f"{path}\nsha256 {digest}")
    return 0
