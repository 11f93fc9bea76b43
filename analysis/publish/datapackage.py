"""data/datapackage.json: every file of the dataset as a resource, tables with their Table Schema and all
with their sha256. Generated, never hand-edited; `python -m analysis validate data` checks it."""
import csv
import hashlib
import json
from pathlib import Path

from analysis import __version__
from analysis.errors import HeapcostError
from analysis.paths import DATA_DIR
from analysis.contract.schema import LITERATURE_SCHEMAS, table_schema

DATASET_NAME = "heapcost-dataset"
SKIP = {"datapackage.json"}


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def dataset_files(data_dir: Path = DATA_DIR) -> list[Path]:
    return sorted(p for p in Path(data_dir).rglob("*")
                  if p.is_file() and p.name not in SKIP and not any(part.startswith(".") for part in p.parts))


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
    return res


def build_datapackage(data_dir: Path = DATA_DIR, version: str | None = None) -> dict:
    data_dir = Path(data_dir)
    resources = [describe_resource(p, data_dir) for p in dataset_files(data_dir)]
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
    path.write_text(json.dumps(build_datapackage(data_dir, version), indent=2) + "\n")
    return path


def load(data_dir: Path) -> dict:
    path = Path(data_dir) / "datapackage.json"
    try:
        return json.loads(path.read_text())
    except OSError:
        raise HeapcostError(f"{path} does not exist (write it with `python -m analysis validate --write {data_dir}`)") from None
    except ValueError as exc:
        raise HeapcostError(f"{path} is not valid JSON: {exc}") from None
