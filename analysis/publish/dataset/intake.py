"""Runs measured elsewhere join the dataset: `merge` adds contribution archives (analysis/publish/
contribution.py, made by `contribute`) or run directories to data/runs/.

Every run is checked before anything is written: the archive read within its limits (contribution.py),
the run's files within theirs (run_check.py), a run.json format or kind this version cannot read, a
protocol it does not know, a table whose header is not one of ours, a checksum that differs from the
manifest, a machine.json whose `machine_id` is not the short hash of a boot id (a raw boot id would identify
the machine), a path of the measuring machine, or a table that fails its Table Schema stops the merge with one
line. The run is checked in a private temporary folder, never in the dataset. A run already in the dataset
with the same files is left as it is (merging twice changes nothing); one with other files under the same
id is refused, never overwritten. Each merged run keeps its files byte for byte and gains intake.json
(where it came from: the manifest's checksums and the archive's sha256), written without a clock so the
dataset's checksum depends on the runs alone. datapackage.json and the codebook then describe the new runs.
"""
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from analysis.contract import dataset
from analysis.errors import HeapcostError
from analysis.paths import DATA_DIR
from analysis.contract.contribution import LIMITS, Limits, recorded_machine, unpack
from analysis.contract.run_check import INTAKE_FILE, KINDS, MAX_RUN_FILES, check_readable, run_digests, run_paths


def _check_directory(source: Path, limits: Limits) -> dict[str, Path]:
    paths = run_paths(source)
    if len(paths) > MAX_RUN_FILES:
        raise HeapcostError(f"{source}: {len(paths)} files; a run has at most {MAX_RUN_FILES}; refused")
    total = 0
    for name, path in paths.items():
        size = path.stat().st_size
        total += size
        if size > limits.file_bytes:
            raise HeapcostError(f"{source}: {name} is {size} bytes, over the per-file limit of "
                                f"{limits.file_bytes} (--max-file-size); refused")
    if total > limits.archive_bytes:
        raise HeapcostError(f"{source}: its files add up to {total} bytes, over the per-archive limit of "
                            f"{limits.archive_bytes} (--max-archive-size); refused")
    return paths


def read_source(source: Path, into: Path, limits: Limits = LIMITS) -> tuple[str, Path, dict]:
    """(run id, the run's files checked and copied to into/data/runs/<run id>, provenance): `into` becomes
    a dataset holding that run alone, the way table_problems validates it."""
    source = Path(source)
    if source.is_dir():
        run_dir = into / "data" / "runs" / source.name
        for name, path in _check_directory(source, limits).items():
            (run_dir / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, run_dir / name)
        return source.name, run_dir, {"source": "run directory", "files": run_digests(run_dir)}
    if source.is_file():
        staged = into / "unpacked"
        staged.mkdir(parents=True)
        run_id, provenance = unpack(source, staged, limits)
        run_dir = into / "data" / "runs" / run_id
        run_dir.parent.mkdir(parents=True)
        os.rename(staged, run_dir)
        return run_id, run_dir, provenance
    raise HeapcostError(f"{source}: no such archive or run directory")


def table_problems(run_dir: Path) -> list[str]:
    """The run alone as a dataset (run_dir's grandparent), validated like data/ is: schemas, seq, machine
    paths."""
    from analysis.publish.dataset.datapackage import write_datapackage
    from analysis.publish.dataset.validate import validate

    data = Path(run_dir).parent.parent
    write_datapackage(data)
    return validate(data)


def merge(sources, data_dir: Path = DATA_DIR, describe: bool = True, limits: Limits = LIMITS) -> list[tuple[str, str]]:
    """Add the runs of `sources` (archives or run directories) to data_dir/runs; returns (run id, what
    happened) for each. Everything is checked before the first run is written."""
    data_dir = Path(data_dir)
    runs_dir = data_dir / "runs"
    if not runs_dir.is_dir():
        raise HeapcostError(f"{data_dir} has no runs/ folder; not a heapcost dataset")
    incoming, outcome = {}, []
    with tempfile.TemporaryDirectory(prefix="heapcost-intake-") as tmp:
        for n, source in enumerate(sources):
            run_id, run_dir, provenance = read_source(source, Path(tmp) / str(n), limits)
            check_readable(run_id, run_dir)
            recorded_machine(run_id, run_dir)
            digests = run_digests(run_dir)
            if run_id in incoming and run_digests(incoming[run_id][0]) != digests:
                raise HeapcostError(f"{run_id}: given twice with different files")
            present = runs_dir / run_id
            if present.exists():
                if run_digests(present) != digests:
                    raise HeapcostError(f"{run_id}: the dataset already holds a different run under this id; "
                                        f"refused (a run is never overwritten)")
                outcome.append((run_id, "already in the dataset, unchanged"))
                continue
            problems = table_problems(run_dir)
            if problems:
                raise HeapcostError(f"{run_id}: does not validate ({len(problems)} problem(s)), first: {problems[0]}")
            incoming[run_id] = (run_dir, provenance)
        for run_id, (run_dir, provenance) in sorted(incoming.items()):
            staging = runs_dir / f".intake-{run_id}"
            shutil.rmtree(staging, ignore_errors=True)
            for name, path in run_paths(run_dir).items():
                (staging / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, staging / name)
            (staging / INTAKE_FILE).write_text(json.dumps(provenance, indent=2, sort_keys=True) + "\n")
            try:
                os.rename(staging, runs_dir / run_id)
            except OSError as exc:  # another merge brought the same id in meanwhile
                shutil.rmtree(staging, ignore_errors=True)
                raise HeapcostError(f"{run_id}: cannot be added to {runs_dir} ({exc.strerror}); nothing overwritten") from None
            outcome.append((run_id, "added"))
    if incoming and describe and (data_dir / "datapackage.json").is_file():
        from analysis.publish.dataset.archive import refresh_description
        refresh_description(data_dir, tables=False)
    return outcome


def newest_complete_run(runs_dir) -> Path:
    """The folder of the newest complete run (to pack it); `runs_dir`: the runs folder or its Dataset."""
    ds = dataset.load(runs_dir)
    runs = [r for kind in KINDS for r in ds.runs(kind) if r.complete]
    if not runs:
        raise HeapcostError(f"no complete run in {ds.root.name}/; measure first (`make measure` or `make probe`)")
    return ds.path(max(runs, key=lambda r: r.run_id))


# ------------------------------------------------------------------------------------------------- CLI
def byte_size(text: str) -> int:
    """'4GiB', '512MiB', '1G', '1000' -> bytes (binary units)."""
    import argparse

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (bytes, or with K, M, G, T: 4GiB)")
    return int(float(m.group(1)) * 1024 ** " KMGT".index(m.group(2).upper() or " "))


def add_arguments(parser):
    parser.add_argument("sources", nargs="+", help="contribution archives (make contribute) or run directories")
    parser.add_argument("--data", default=str(DATA_DIR), help="the dataset directory (default data)")
    parser.add_argument("--max-file-size", type=byte_size, default=LIMITS.file_bytes, metavar="SIZE",
                        help="refuse a run file larger than this (default 1GiB)")
    parser.add_argument("--max-archive-size", type=byte_size, default=LIMITS.archive_bytes, metavar="SIZE",
                        help="refuse an archive whose files add up to more (default 4GiB)")
    parser.add_argument("--max-ratio", type=float, default=LIMITS.ratio, metavar="R",
                        help="refuse an archive expanding more than R times its compressed size (default 100)")


def run(args) -> int:
    limits = Limits(args.max_file_size, args.max_archive_size, args.max_ratio)
    for run_id, what in merge([Path(s) for s in args.sources], Path(args.data), limits=limits):
        print(f"{run_id}: {what}")
    return 0

