"""Runs measured elsewhere join the dataset: `contribute` packs a run, `merge` adds runs to data/runs/.

A contribution is one gzip'd tar: MANIFEST.json (its format, the run id, the host's machine description,
the sha256 of every file) and the run directory. Its bytes depend on the run's files only (fixed mtimes,
owners and gzip header), so packing a run twice gives the same archive.

`merge` takes archives or run directories. Every run is checked before anything is written: a run.json
format or kind this version cannot read, a protocol it does not know, a table whose header is not one of
ours, a checksum that differs from the manifest, a path of the measuring machine, or a table that fails
its Table Schema stops the merge with one line. A run already in the dataset with the same files is left
as it is (merging twice changes nothing); one with other files under the same id is refused, never
overwritten. Each merged run keeps its files byte for byte and gains intake.json (where it came from: the
manifest's checksums and the archive's sha256), written without a clock so the dataset's checksum depends
on the runs alone. datapackage.json and the codebook then describe the new runs.
"""
import gzip
import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

from analysis.contract.runstore import RUN_FORMAT, runs_of_kind
from analysis.contract.schema import TABLE_SCHEMAS, table_schema
from analysis.errors import HeapcostError
from analysis.paths import DATA_DIR

CONTRIBUTION_FORMAT = "heapcost-contribution/1"
READABLE_RUN_FORMATS = (RUN_FORMAT,)
KINDS = ("time", "callgrind", "probe")
PROTOCOLS = ("trials", "lockstep")
INTAKE_FILE = "intake.json"
MANIFEST = "MANIFEST.json"
FIXED_MTIME = 1767225600


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def run_files(run_dir: Path) -> dict[str, bytes]:
    """The run's own files (relative path -> bytes): hidden files and intake.json are not the run's."""
    run_dir = Path(run_dir)
    files = {}
    for path in sorted(run_dir.rglob("*")):
        rel = path.relative_to(run_dir)
        if path.is_file() and not any(p.startswith(".") for p in rel.parts) and rel.as_posix() != INTAKE_FILE:
            files[rel.as_posix()] = path.read_bytes()
    return files


def _json(files: dict[str, bytes], name: str, where: str) -> dict:
    if name not in files:
        raise HeapcostError(f"{where}: {name} missing; not a heapcost run")
    try:
        data = json.loads(files[name])
    except ValueError as exc:
        raise HeapcostError(f"{where}: {name} is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise HeapcostError(f"{where}: {name} is not a JSON object")
    return data


def check_readable(run_id: str, files: dict[str, bytes]) -> dict:
    """run.json of a run this version can read, or a HeapcostError naming what it cannot."""
    info = _json(files, "run.json", run_id)
    _json(files, "machine.json", run_id)
    fmt = info.get("format")
    if fmt not in READABLE_RUN_FORMATS:
        raise HeapcostError(f"{run_id}: run format {fmt!r} cannot be read by this heapcost "
                            f"(it reads {', '.join(READABLE_RUN_FORMATS)}); update heapcost first")
    if info.get("run_id") != run_id:
        raise HeapcostError(f"{run_id}: run.json names run {info.get('run_id')!r}; a renamed run is refused")
    if info.get("kind") not in KINDS:
        raise HeapcostError(f"{run_id}: run kind {info.get('kind')!r} is unknown (known: {', '.join(KINDS)})")
    protocol = (info.get("params") or {}).get("protocol")
    if protocol is not None and protocol not in PROTOCOLS:
        raise HeapcostError(f"{run_id}: timing protocol {protocol!r} is unknown (known: {', '.join(PROTOCOLS)})")
    if info.get("status") != "complete":
        raise HeapcostError(f"{run_id}: the run is {info.get('status')!r}, not complete; finish it first")
    for name in TABLE_SCHEMAS:
        if name in files:
            header = files[name].split(b"\n", 1)[0].decode("utf-8", errors="replace").strip().split(",")
            # ours, or an older version of it (the columns validate reads without: schema.table_schema)
            if header != [f["name"] for f in table_schema(name, header)["fields"]]:
                raise HeapcostError(f"{run_id}: {name} has columns this heapcost does not know ({header[:4]}...)")
    if not any(name in files for name in TABLE_SCHEMAS):
        raise HeapcostError(f"{run_id}: no table ({', '.join(TABLE_SCHEMAS)}); nothing was measured")
    return info


# ---------------------------------------------------------------------------------------------- contribute
def manifest(run_id: str, files: dict[str, bytes]) -> dict:
    machine = json.loads(files["machine.json"])
    return {"format": CONTRIBUTION_FORMAT, "run_id": run_id,
            "machine": machine, "files": {name: sha256_bytes(data) for name, data in sorted(files.items())}}


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), FIXED_MTIME, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    tar.addfile(info, io.BytesIO(data))


def pack(run_dir: Path, out_dir: Path) -> Path:
    """Write <out_dir>/<run id>.heapcost-run.tar.gz from a complete run; returns its path."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise HeapcostError(f"{run_dir} is not a run directory")
    files = run_files(run_dir)
    check_readable(run_dir.name, files)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, MANIFEST, (json.dumps(manifest(run_dir.name, files), indent=2, sort_keys=True) + "\n").encode())
        for name, data in sorted(files.items()):
            _add(tar, f"{run_dir.name}/{name}", data)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{run_dir.name}.heapcost-run.tar.gz"
    packed = io.BytesIO()
    # mtime=0 and no file name in the gzip header: the bytes depend on the run's files only
    with gzip.GzipFile(filename="", mode="wb", fileobj=packed, mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    out.write_bytes(packed.getvalue())
    return out


def unpack(archive: Path) -> tuple[str, dict[str, bytes], dict]:
    """(run id, files, provenance) of a contribution, its checksums verified."""
    archive = Path(archive)
    try:
        with tarfile.open(archive, mode="r:gz") as tar:
            members = {}
            for member in tar.getmembers():
                if not member.isfile():
                    raise HeapcostError(f"{archive.name}: member {member.name!r} is not a plain file; refused")
                members[member.name] = tar.extractfile(member).read()
    except (OSError, tarfile.TarError, EOFError) as exc:
        raise HeapcostError(f"{archive}: not a readable contribution archive ({exc})") from None
    if MANIFEST not in members:
        raise HeapcostError(f"{archive.name}: no {MANIFEST}; not made by `make contribute`")
    man = _json(members, MANIFEST, archive.name)
    if man.get("format") != CONTRIBUTION_FORMAT:
        raise HeapcostError(f"{archive.name}: contribution format {man.get('format')!r} cannot be read "
                            f"(this heapcost reads {CONTRIBUTION_FORMAT})")
    run_id = str(man.get("run_id") or "")
    if not run_id or "/" in run_id or run_id.startswith("."):
        raise HeapcostError(f"{archive.name}: the manifest names no valid run id ({run_id!r})")
    files = {}
    for name, data in members.items():
        if name == MANIFEST:
            continue
        top, _, rel = name.partition("/")
        parts = Path(rel).parts
        if top != run_id or not rel or ".." in parts or rel.startswith("/"):
            raise HeapcostError(f"{archive.name}: member {name!r} lies outside run {run_id}; refused")
        files[rel] = data
    listed = man.get("files") or {}
    if set(listed) != set(files):
        raise HeapcostError(f"{archive.name}: the files differ from the manifest's list "
                            f"({sorted(set(listed) ^ set(files))[:3]})")
    for name, data in files.items():
        if sha256_bytes(data) != listed[name]:
            raise HeapcostError(f"{archive.name}: {name} does not match its sha256 in the manifest (damaged?)")
    provenance = {"source": "contribution", "archive_sha256": sha256_bytes(archive.read_bytes()),
                  "files": listed}
    return run_id, files, provenance


# ------------------------------------------------------------------------------------------------ merge
def read_source(source: Path) -> tuple[str, dict[str, bytes], dict]:
    source = Path(source)
    if source.is_dir():
        files = run_files(source)
        return source.name, files, {"source": "run directory",
                                    "files": {n: sha256_bytes(d) for n, d in sorted(files.items())}}
    if source.is_file():
        return unpack(source)
    raise HeapcostError(f"{source}: no such archive or run directory")


def table_problems(run_id: str, files: dict[str, bytes]) -> list[str]:
    """The run alone as a dataset, validated like data/ is: schemas, seq, machine paths."""
    from analysis.publish.datapackage import write_datapackage
    from analysis.publish.validate import validate

    with tempfile.TemporaryDirectory(prefix="heapcost-intake-") as tmp:
        data = Path(tmp) / "data"
        write_files(data / "runs" / run_id, files)
        write_datapackage(data)
        return validate(data)


def write_files(run_dir: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (run_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / name).write_bytes(data)


def merge(sources, data_dir: Path = DATA_DIR, describe: bool = True) -> list[tuple[str, str]]:
    """Add the runs of `sources` (archives or run directories) to data_dir/runs; returns (run id, what
    happened) for each. Everything is checked before the first run is written."""
    data_dir = Path(data_dir)
    runs_dir = data_dir / "runs"
    if not runs_dir.is_dir():
        raise HeapcostError(f"{data_dir} has no runs/ folder; not a heapcost dataset")
    incoming, outcome = {}, []
    for source in sources:
        run_id, files, provenance = read_source(source)
        check_readable(run_id, files)
        if run_id in incoming and incoming[run_id][0] != files:
            raise HeapcostError(f"{run_id}: given twice with different files")
        present = runs_dir / run_id
        if present.exists():
            if run_files(present) != files:
                raise HeapcostError(f"{run_id}: the dataset already holds a different run under this id; "
                                    f"refused (a run is never overwritten)")
            outcome.append((run_id, "already in the dataset, unchanged"))
            continue
        problems = table_problems(run_id, files)
        if problems:
            raise HeapcostError(f"{run_id}: does not validate ({len(problems)} problem(s)), first: {problems[0]}")
        incoming[run_id] = (files, provenance)
    for run_id, (files, provenance) in sorted(incoming.items()):
        staging = runs_dir / f".intake-{run_id}"
        shutil.rmtree(staging, ignore_errors=True)
        write_files(staging, files)
        (staging / INTAKE_FILE).write_text(json.dumps(provenance, indent=2, sort_keys=True) + "\n")
        try:
            os.rename(staging, runs_dir / run_id)
        except OSError as exc:  # another merge brought the same id in meanwhile
            shutil.rmtree(staging, ignore_errors=True)
            raise HeapcostError(f"{run_id}: cannot be added to {runs_dir} ({exc.strerror}); nothing overwritten") from None
        outcome.append((run_id, "added"))
    if incoming and describe and (data_dir / "datapackage.json").is_file():
        from analysis.publish.dataset import refresh_description
        refresh_description(data_dir, tables=False)
    return outcome


def newest_complete_run(runs_dir: Path) -> Path:
    runs = [r for kind in KINDS for r in runs_of_kind(runs_dir, kind) if r.complete]
    if not runs:
        raise HeapcostError(f"no complete run in {runs_dir}; measure first (`make measure` or `make probe`)")
    return max(runs, key=lambda r: r.run_id).path


# ------------------------------------------------------------------------------------------------- CLI
def add_arguments(parser):
    parser.add_argument("sources", nargs="+", help="contribution archives (make contribute) or run directories")
    parser.add_argument("--data", default=str(DATA_DIR), help="the dataset directory (default data)")


def run(args) -> int:
    for run_id, what in merge([Path(s) for s in args.sources], Path(args.data)):
        print(f"{run_id}: {what}")
    return 0
