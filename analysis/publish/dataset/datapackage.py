"""data/datapackage.json: every file of the dataset as a resource, tables with their Table Schema and all
with their sha256; each run's machine.json also names the run's machine (`machine`, M-/K-) and its processor
kind (`processor`), as analysis/contract/host.py groups the runs of the whole dataset. Generated, never
hand-edited; `python -m analysis validate data` checks it."""
import csv
import json
from pathlib import Path

from analysis import __version__
from analysis.contract import dataset
from analysis.contract.host import Machine, machine_groups
from analysis.errors import HeapcostError
from analysis.paths import DATA_DIR, file_sha256 as sha256
from analysis.contract.schema import LITERATURE_SCHEMAS, table_schema

DATASET_NAME = "heapcost-dataset"
SKIP = {"datapackage.json"}


def dataset_files(data_dir: Path = DATA_DIR) -> list[Path]:
    """Every file of the dataset. Hidden files and folders (.ipynb_checkpoints, an editor's swap file) are
    not data; only the parts below data_dir count, so a clone under a dotted folder keeps all its files."""
    data_dir = Path(data_dir)
    return sorted(p for p in data_dir.rglob("*")
                  if p.is_file() and p.name not in SKIP
                  and not any(part.startswith(".") for part in p.relative_to(data_dir).parts))


def run_folders(data_dir: Path = DATA_DIR) -> list[str]:
    """The folders of data_dir/runs that hold a file of the dataset (dataset_files), sorted: every run, and a
    folder without its run.json besides (not a run to analysis.contract.dataset; validation names it)."""
    data_dir = Path(data_dir)
    parts = [p.relative_to(data_dir).parts for p in dataset_files(data_dir)]
    held = {part[1] for part in parts if len(part) > 2 and part[0] == "runs"}
    return sorted(held | set(dataset.load(data_dir / "runs").run_ids()))


def described_paths(package: dict) -> list[str]:
    """The files a datapackage.json describes (paths relative to the dataset directory)."""
    return [str(r["path"]) for r in package.get("resources", []) if r.get("path")]


def check_no_loss(data_dir: Path, current: dict | None, new: dict) -> None:
    """Refuse a rewrite of datapackage.json that would describe no file at all, or drop a resource whose
    file is still there: either means the files were not found, and writing would lose the description."""
    data_dir = Path(data_dir)
    if not new.get("resources"):
        raise HeapcostError(f"no data file found under {data_dir}: datapackage.json is left as it is "
                            "(give the dataset directory, e.g. data)")
    kept = set(described_paths(new))
    lost = [p for p in described_paths(current or {}) if p not in kept and (data_dir / p).is_file()]
    if lost:
        raise HeapcostError(f"rewriting {data_dir / 'datapackage.json'} would drop {len(lost)} described file(s) "
                            f"that still exist, first {lost[0]}: nothing was written")


def check_unchanged(current: dict | None, new: dict, generated=("README.md",)) -> None:
    """Refuse to take in a described file whose content changed since it was published: bringing new runs in
    is automatic, rewriting a measurement is not (a deliberate rewrite, such as a tested migration, writes
    the description itself: `python -m analysis validate --write`). Only the sha256 counts: a description
    that gains properties (a machine's name) describes the same files."""
    before = {r["path"]: r.get("hash") for r in (current or {}).get("resources", [])}
    changed = [r["path"] for r in new.get("resources", [])
               if r["path"] in before and before[r["path"]] != r.get("hash") and r["path"] not in generated]
    if changed:
        raise HeapcostError(f"{len(changed)} described file(s) changed after publication, first {changed[0]}: "
                            "datapackage.json is left as it is (a deliberate rewrite: `python -m analysis "
                            "validate --write`)")


def run_machines(data_dir: Path = DATA_DIR) -> dict[str, Machine]:
    """{run id: its Machine} for every run of data_dir whose machine.json reads as an object (validation says
    why one does not), each in its processor kind as the runs of the whole dataset group (machine_groups)."""
    ds = dataset.load(Path(data_dir) / "runs")
    found = {run: ds.json(run, "machine.json") for run in ds.run_ids()}
    return machine_groups({run: machine for run, machine in found.items() if isinstance(machine, dict)})


def machine_properties(data_dir: Path) -> dict[str, dict]:
    """{path of a run's machine.json: its resource's own properties}: `machine`, the machine's name, and
    `processor`, the label of its processor kind."""
    return {f"runs/{run}/machine.json": {"machine": machine.name, "processor": machine.kind}
            for run, machine in run_machines(data_dir).items()}


def _resource_name(rel: Path) -> str:
    name = "".join(c if c.isalnum() or c in "-._" else "-" for c in str(rel).lower())
    return name.replace("/", "-")


def describe_resource(path: Path, data_dir: Path) -> dict:
    rel = path.relative_to(data_dir)
    res = {"name": _resource_name(rel), "path": str(rel), "hash": f"sha256:{sha256(path)}",
           "bytes": path.stat().st_size}
    suffix = path.suffix.lower()
    if suffix == ".csv":
        res.update(format="csv", mediatype="text/csv", encoding="utf-8")
        with open(path, newline="") as fh:
            header = next(csv.reader(fh), [])
        schema = table_schema(path.name, header) or LITERATURE_SCHEMAS.get(path.name)
        if schema is None:
            schema = {"fields": [{"name": h, "type": "any"} for h in header], "missingValues": [""]}
        res["schema"] = schema
        res["profile"] = "tabular-data-resource"
    elif suffix == ".json":
        res.update(format="json", mediatype="application/json")
    elif suffix == ".ipynb":
        res.update(format="ipynb", mediatype="application/x-ipynb+json",
                   description="The executed notebook that ran this measurement.")
    elif suffix == ".md":
        res.update(format="md", mediatype="text/markdown")
    elif suffix == ".txt":
        res.update(format="txt", mediatype="text/plain", encoding="utf-8")
    return res


def build_datapackage(data_dir: Path = DATA_DIR, version: str | None = None) -> dict:
    data_dir = Path(data_dir)
    machines = machine_properties(data_dir)
    resources = [describe_resource(p, data_dir) for p in dataset_files(data_dir)]
    resources = [{**r, **machines.get(r["path"], {})} for r in resources]
    return {
        "profile": "data-package",
        "name": DATASET_NAME,
        "title": "heapcost: the cost and the security of memory-allocator hardening, measured",
        "version": version or __version__,
        "licenses": [{"name": "CC-BY-4.0", "path": "https://creativecommons.org/licenses/by/4.0/",
                      "title": "Creative Commons Attribution 4.0"}],
        "description": "Speed, memory and instruction-count measurements of memory allocators and their "
                       "security configurations, heap-misuse probe outcomes, and the figures of five public "
                       "debates transcribed from their texts. See data/README.md.",
        "resources": resources,
    }


def write_datapackage(data_dir: Path = DATA_DIR, version: str | None = None) -> Path:
    data_dir = Path(data_dir)
    path = data_dir / "datapackage.json"
    new = build_datapackage(data_dir, version)
    check_no_loss(data_dir, current_package(data_dir), new)
    path.write_text(json.dumps(new, indent=2) + "\n")
    return path


def current_package(data_dir: Path) -> dict | None:
    """The datapackage.json a rewrite replaces: None when there is none or it is not JSON (nothing to lose)."""
    try:
        return json.loads((Path(data_dir) / "datapackage.json").read_text())
    except (OSError, ValueError):
        return None


def load(data_dir: Path) -> dict:
    path = Path(data_dir) / "datapackage.json"
    try:
        return json.loads(path.read_text())
    except OSError:
        raise HeapcostError(f"{path} does not exist (write it with `python -m analysis validate --write {data_dir}`)") from None
    except ValueError as exc:
        raise HeapcostError(f"{path} is not valid JSON: {exc}") from None
