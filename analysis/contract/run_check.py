"""What a run must be for a dataset to take it in (analysis/publish/dataset/intake.py) and for `contribute` to pack it:
a format, kind and protocol this version reads, our table headers, and files that read within bounds. A
run's files come from another machine, so nothing is read whole that is not small: every JSON file is
parsed (16 MiB at most, UTF-8, no key twice in one object, nested no deeper than the parser goes), every
table is read row by row (UTF-8, no row over 1 MiB, no field over 128 KiB characters)."""
import csv
import hashlib
import json
from pathlib import Path

from analysis.contract.runstore import RUN_FORMAT
from analysis.contract.schema import TABLE_SCHEMAS, table_schema
from analysis.errors import HeapcostError
from analysis.paths import file_sha256

READABLE_RUN_FORMATS = (RUN_FORMAT,)
KINDS = ("time", "callgrind", "probe", "mechanism", "profile")
PROTOCOLS = ("trials", "lockstep")
INTAKE_FILE = "intake.json"

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
MAX_RUN_FILES = 1000  # a run has a handful: run.json, machine.json, a table or two, the notebook
MAX_JSON_BYTES = 16 * MiB  # a JSON file of a run is parsed whole (the published ones: under 100 KiB)
MAX_CSV_RECORD = 1 * MiB  # one row of a table, its quoted line breaks included
MAX_CSV_FIELD = 128 * KiB  # one field (the csv module's own default limit)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def run_paths(run_dir: Path) -> dict[str, Path]:
    """The run's own files (relative path -> path): hidden files and intake.json are not the run's."""
    run_dir = Path(run_dir)
    return {path.relative_to(run_dir).as_posix(): path for path in sorted(run_dir.rglob("*"))
            if path.is_file() and not any(p.startswith(".") for p in path.relative_to(run_dir).parts)
            and path.relative_to(run_dir).as_posix() != INTAKE_FILE}


def run_files(run_dir: Path) -> dict[str, bytes]:
    """The run's own files (relative path -> bytes)."""
    return {name: path.read_bytes() for name, path in run_paths(run_dir).items()}


def run_digests(run_dir: Path) -> dict[str, str]:
    """The run's own files (relative path -> sha256), read in blocks."""
    return {name: file_sha256(path) for name, path in run_paths(run_dir).items()}



class _RepeatedKey(ValueError):
    pass


def _unique_keys(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise _RepeatedKey(key)
        obj[key] = value
    return obj


def parse_json(data: bytes, what: str):
    """A JSON document of untrusted origin: UTF-8, no key twice in one object, nested no deeper than the
    parser's recursion allows (a run's JSON nests a few levels); anything else is one line."""
    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=_unique_keys)
    except _RepeatedKey as exc:
        raise HeapcostError(f"{what} names {exc.args[0]!r} twice; refused") from None
    except RecursionError:
        raise HeapcostError(f"{what} nests deeper than any heapcost JSON; refused") from None
    except ValueError as exc:  # UnicodeDecodeError included
        raise HeapcostError(f"{what} is not valid JSON ({exc})") from None


def _read_bounded(path: Path, limit: int, what: str) -> bytes:
    with open(path, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise HeapcostError(f"{what} is over {limit // KiB} KiB, more than heapcost reads whole; refused")
    return data


def _json(run_dir: Path, name: str, where: str):
    path = Path(run_dir) / name
    if not path.is_file():
        raise HeapcostError(f"{where}: {name} missing; not a heapcost run")
    data = parse_json(_read_bounded(path, MAX_JSON_BYTES, f"{where}: {name}"), f"{where}: {name}")
    if not isinstance(data, dict):
        raise HeapcostError(f"{where}: {name} is not a JSON object")
    return data


def check_csv(path: Path, what: str) -> None:
    """Every row of a table read with bounded memory: UTF-8, no row over MAX_CSV_RECORD bytes, no field
    over MAX_CSV_FIELD characters (the csv module's own limit is global, and frictionless raises it at
    import: the field is measured here, the same whatever was imported before)."""
    class Lines:
        def __init__(self, fh):
            self.fh, self.record, self.number = fh, 0, 0

        def __iter__(self):
            return self

        def __next__(self):
            line = self.fh.readline(MAX_CSV_RECORD + 1)
            if not line:
                raise StopIteration
            self.number += 1
            self.record += len(line)
            if self.record > MAX_CSV_RECORD:
                raise HeapcostError(f"{what} line {self.number}: a row over {MAX_CSV_RECORD // MiB} MiB; refused")
            try:
                return line.decode("utf-8")
            except UnicodeDecodeError:
                raise HeapcostError(f"{what} line {self.number}: not UTF-8; refused") from None

    global_limit = csv.field_size_limit(MAX_CSV_RECORD + 1)  # a row's bound is the only one: fields checked below
    try:
        with open(path, "rb") as fh:
            lines = Lines(fh)
            for row in csv.reader(lines):
                lines.record = 0
                longest = max(map(len, row), default=0)
                if longest > MAX_CSV_FIELD:
                    raise HeapcostError(f"{what} line {lines.number}: a field of {longest} characters "
                                        f"(at most {MAX_CSV_FIELD}); refused")
    except csv.Error as exc:
        raise HeapcostError(f"{what} line {lines.number}: not a CSV heapcost reads ({exc}); refused") from None
    finally:
        csv.field_size_limit(global_limit)


def _header(path: Path) -> list[str]:
    with open(path, "rb") as fh:
        line = fh.readline(MAX_CSV_RECORD)
    return line.decode("utf-8", errors="replace").strip().split(",")


def check_readable(run_id: str, run_dir: Path) -> dict:
    """run.json of a run this version can read, or a HeapcostError naming what it cannot. Every JSON file
    of the run parses and every table reads within the bounds above."""
    run_dir = Path(run_dir)
    paths = run_paths(run_dir)
    info = _json(run_dir, "run.json", run_id)
    _json(run_dir, "machine.json", run_id)
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
        if name in paths:
            header = _header(paths[name])
            # ours, or an older version of it (the columns validate reads without: schema.table_schema)
            if header != [f["name"] for f in table_schema(name, header)["fields"]]:
                raise HeapcostError(f"{run_id}: {name} has columns this heapcost does not know ({header[:4]}...)")
    if not any(name in paths for name in TABLE_SCHEMAS):
        raise HeapcostError(f"{run_id}: no table ({', '.join(TABLE_SCHEMAS)}); nothing was measured")
    for name, path in paths.items():
        if path.suffix in (".json", ".ipynb") and name not in ("run.json", "machine.json"):
            _json(run_dir, name, run_id)
        elif path.suffix == ".csv":
            check_csv(path, f"{run_id}: {name}")
    return info

