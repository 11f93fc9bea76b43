"""`python -m analysis dataset`: the versioned dataset archive for deposit, with its checksum.

dist/heapcost-dataset-<version>.tar.gz holds exactly the files data/datapackage.json describes, that file
itself and CITATION.cff, under one top directory. It is deterministic: members sorted, fixed mtime, owner
and modes, gzip header time 0; the same data gives the same bytes and the same sha256, which the paper
cites. A run measured since the last description is brought in first (`refresh_description`, which
`make paper` runs too), so the paper, the description and the archive cover the same runs. The archive is
unpacked and validated before it is put in place: one that would not validate is never left in dist/.
"""
import gzip
import hashlib
import io
import json
import tarfile
import tempfile
from pathlib import Path

from analysis import __version__
from analysis.publish.dataset.datapackage import DATASET_NAME, dataset_files, described_paths
from analysis.errors import HeapcostError
from analysis.paths import DATA_DIR, REPO

# 2026-01-01T00:00:00Z: any fixed time would do; a real date keeps unpackers from warning about 1970.
FIXED_MTIME = 1767225600


def archive_name(version: str = __version__) -> str:
    return f"{DATASET_NAME}-{version}.tar.gz"


def top_dir(version: str = __version__) -> str:
    return f"{DATASET_NAME}-{version}"


def members(data_dir: Path = DATA_DIR, citation: Path | None = REPO / "CITATION.cff") -> list[tuple[str, Path]]:
    """(name in the archive, file) for every file datapackage.json describes, the description itself and
    the citation, sorted by name. Without a datapackage.json (a directory never described) every file."""
    data_dir = Path(data_dir)
    top = top_dir()
    pkg = data_dir / "datapackage.json"
    if pkg.is_file():
        try:
            described = described_paths(json.loads(pkg.read_text()))
        except ValueError as exc:
            raise HeapcostError(f"{pkg} is not valid JSON: {exc}") from None
        missing = [rel for rel in described if not (data_dir / rel).is_file()]
        if missing:
            raise HeapcostError(f"{pkg} describes {len(missing)} file(s) that do not exist, first {missing[0]}")
        files = [(f"{top}/data/{Path(rel).as_posix()}", data_dir / rel) for rel in described]
        files.append((f"{top}/data/datapackage.json", pkg))
    else:
        files = [(f"{top}/data/{p.relative_to(data_dir).as_posix()}", p) for p in dataset_files(data_dir)]
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


def check_archive(blob: bytes) -> None:
    """Unpack an archive into a temporary folder and validate the dataset in it: HeapcostError if it fails."""
    from analysis.publish.dataset.validate import validate

    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
            tar.extractall(tmp, filter="data")
        unpacked = Path(tmp) / top_dir() / "data"
        if not (unpacked / "datapackage.json").is_file():
            raise HeapcostError("the archive holds no data/datapackage.json: describe the dataset first "
                                "(`python -m analysis validate --write DATA_DIR`)")
        errors = validate(unpacked)
    if errors:
        raise HeapcostError(f"the unpacked archive does not validate ({len(errors)} error(s)), first: {errors[0]}; "
                            "nothing was written")


def write_archive(out_dir: Path, data_dir: Path = DATA_DIR, citation: Path | None = REPO / "CITATION.cff",
                  check: bool = True) -> tuple[Path, str]:
    """Write the archive and its .sha256 into out_dir, after validating the unpacked archive (check)."""
    out_dir = Path(out_dir)
    blob = archive_bytes(data_dir, citation)
    if check:
        check_archive(blob)
    digest = hashlib.sha256(blob).hexdigest()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / archive_name()
    path.write_bytes(blob)
    (out_dir / f"{path.name}.sha256").write_text(f"{digest}  {path.name}\n")
    return path, digest


def refresh_description(data_dir: Path, tables: bool = True) -> list[str]:
    """Bring every file of data_dir (a run measured since) into datapackage.json and the codebook, then
    validate (tables=False: the files and their sha256 only, not every row against its schema); returns
    what changed. Refuses before writing anything when the files would lose described resources."""
    from analysis.publish.dataset.codebook import codebook
    from analysis.publish.dataset.datapackage import build_datapackage, check_no_loss, check_unchanged, current_package, load
    from analysis.publish.dataset.validate import structural_errors, validate

    data_dir = Path(data_dir)
    pkg, readme = data_dir / "datapackage.json", data_dir / "README.md"
    current = current_package(data_dir)
    new_pkg = build_datapackage(data_dir)
    check_no_loss(data_dir, current, new_pkg)
    check_unchanged(current, new_pkg)
    text = codebook(data_dir)
    changed = []
    if not readme.is_file() or readme.read_text() != text:
        readme.write_text(text)
        changed.append(str(readme))
        new_pkg = build_datapackage(data_dir)  # the codebook is itself a described file: its sha256 changed
    if current != new_pkg:
        pkg.write_text(json.dumps(new_pkg, indent=2) + "\n")
        changed.append(str(pkg))
    if data_dir.resolve() == DATA_DIR.resolve():  # the repository's own dataset: its runs' history in docs/
        from analysis.publish.dataset import run_history

        if run_history.write(data_dir):
            changed.append(str(run_history.RUNS_PAGE))
    errors = validate(data_dir) if tables else structural_errors(data_dir, load(data_dir))
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
