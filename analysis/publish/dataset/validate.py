"""`python -m analysis validate DATA_DIR`: the dataset against its datapackage.json, with frictionless.

Checks that every file is described and every described file exists with its sha256, that each table
matches its Table Schema (types, constraints), that seq is unique within each run, that every run
has its run.json and machine.json, and that no file names a folder of the machine that measured it (an
absolute path under /root, /home, /tmp, ..., a cache or venv layout; analysis.paths.MACHINE_PATH).
Exits non-zero on any error, listing each on one line.
"""
import csv
from pathlib import Path

from analysis.contract import dataset
from analysis.publish.dataset.datapackage import dataset_files, load, run_folders, sha256, write_datapackage
from analysis.errors import HeapcostError
from analysis.paths import machine_paths

TEXT_SUFFIXES = (".csv", ".json", ".ipynb", ".md", ".txt", ".cff", ".toml", ".yml", ".yaml")


def structural_errors(data_dir: Path, package: dict) -> list[str]:
    errors = []
    described = {r["path"]: r for r in package.get("resources", [])}
    present = {str(p.relative_to(data_dir)) for p in dataset_files(data_dir)}
    for path in sorted(present - set(described)):
        errors.append(f"{path}: not described in datapackage.json")
    for path in sorted(set(described) - present):
        errors.append(f"{path}: described in datapackage.json but missing")
    for path in sorted(present & set(described)):
        want = described[path].get("hash", "")
        if want and want != f"sha256:{sha256(data_dir / path)}":
            errors.append(f"{path}: sha256 differs from datapackage.json (changed after publication?)")
    ds = dataset.load(data_dir / "runs")
    for run in run_folders(data_dir):  # a folder without its run.json too: it is named below
        for needed in ("run.json", "machine.json"):
            if not ds.has(run, needed):
                errors.append(f"runs/{run}: {needed} missing")
        for name in ("trials.csv", "pairs.csv"):
            try:
                rows = ds.rows(run, name)
            except (csv.Error, UnicodeDecodeError) as exc:  # a field over the csv module's limit
                errors.append(f"runs/{run}/{name}: not readable as CSV ({exc})")
                continue
            if rows is None:
                continue
            seqs = [row.get("seq") for row in rows]
            if len(seqs) != len(set(seqs)):
                errors.append(f"runs/{run}/{name}: duplicate seq values")
    return errors


def machine_path_errors(data_dir: Path) -> list[str]:
    """One line per file that holds an absolute path of a measuring machine (the first few it holds)."""
    errors = []
    for path in dataset_files(data_dir):
        if path.suffix not in TEXT_SUFFIXES:
            continue
        with open(path, "rb") as fh:  # line by line: a path never spans a line, and a large table is not held whole
            found = sorted({p for line in fh for p in machine_paths(line.decode("utf-8", errors="replace"))})
        if found:
            errors.append(f"{path.relative_to(data_dir)}: names a folder of the measuring machine "
                          f"({', '.join(found[:3])}); run `python -m analysis.contract.migrate_paths`")
    return errors


def table_errors(data_dir: Path, package: dict) -> list[str]:
    from frictionless import Package

    errors = []
    pkg = Package(package, basepath=str(data_dir))
    for resource in pkg.resources:
        if resource.format != "csv":
            continue
        report = resource.validate()
        for task in report.tasks:
            for err in task.errors[:20]:
                errors.append(f"{resource.path}: {err.message}")
    return errors


def validate(data_dir) -> list[str]:
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise HeapcostError(f"{data_dir} is not a directory")
    package = load(data_dir)
    return structural_errors(data_dir, package) + machine_path_errors(data_dir) + table_errors(data_dir, package)


def add_arguments(parser):
    parser.add_argument("data_dir", nargs="?", default="data", help="the dataset directory (default data)")
    parser.add_argument("--write", action="store_true",
                        help="regenerate datapackage.json from the files first (after a new run is added)")


def run(args) -> int:
    data_dir = Path(args.data_dir)
    if args.write:
        print(f"wrote {write_datapackage(data_dir)}")
    errors = validate(data_dir)
    for e in errors:
        print(f"invalid: {e}")
    n = len(load(data_dir).get("resources", []))
    if errors:
        print(f"{len(errors)} error(s) in {n} resources")
        if any(e.endswith("not described in datapackage.json") for e in errors):
            print(f"a new run? `make paper` or `make dataset` describes it (or: heapcost validate --write {data_dir})")
        return 1
    print(f"valid: {n} resources")
    return 0
