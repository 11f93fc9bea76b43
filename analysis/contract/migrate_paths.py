"""`python -m analysis.contract.migrate_paths [DATA_DIR]`: rewrite the published runs so that they name no
folder of the machine that measured them.

Runs measured before the harness recorded portable paths hold absolute ones: the `malloc_lib` columns
of trials.csv, pairs.csv and counts.csv (the allocator cache under the home folder, the repository's
.venv), run.json's preload and interpreters, and the executed measure.ipynb (papermill's parameters,
input and output paths, printed run directories). Each file's text is rewritten by
`analysis.paths.portable_text` and nothing else: the paths contain no comma, quote or backslash, so a
text substitution cannot touch a CSV cell or JSON value that is not a path, and every measured column
keeps its bytes (tests/contract/test_migrate_paths.py checks their checksums). Running it twice changes nothing.
Afterwards datapackage.json's sha256s are stale: `python -m analysis validate --write` renews them.
"""
import argparse
import sys
from pathlib import Path

from analysis.errors import HeapcostError
from analysis.paths import DATA_DIR, machine_paths, portable_text

RUN_FILES = ("*.csv", "*.json", "*.ipynb")


def run_files(data_dir: Path) -> list[Path]:
    runs = Path(data_dir) / "runs"
    if not runs.is_dir():
        raise HeapcostError(f"{data_dir}: no runs/ folder (not a heapcost dataset?)")
    return sorted(p for pattern in RUN_FILES for p in runs.glob(f"*/{pattern}") if p.is_file())


def migrate_file(path: Path) -> bool:
    """Rewrite one file's paths portably; True when it changed."""
    text = path.read_bytes().decode("utf-8")  # bytes: line endings stay as written
    migrated = portable_text(text)
    if migrated == text:
        return False
    path.write_bytes(migrated.encode("utf-8"))
    return True


def migrate(data_dir: Path = DATA_DIR) -> tuple[list[Path], list[str]]:
    """(the files rewritten, the machine paths that remain anywhere in the runs afterwards)."""
    data_dir = Path(data_dir)
    changed = [p for p in run_files(data_dir) if migrate_file(p)]
    left = [f"{p.relative_to(data_dir)}: {found}" for p in run_files(data_dir) 
            for found in machine_paths(p.read_bytes().decode("utf-8"))]
    return changed, left


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis.contract.migrate_paths", description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir", nargs="?", default=str(DATA_DIR), help="the dataset directory (default data)")
    args = parser.parse_args(argv)
    try:
        changed, left = migrate(Path(args.data_dir))
    except HeapcostError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for p in changed:
        print(f"rewrote {p}")
    for found in left:
        print(f"still absolute: {found}")
    print(f"{len(changed)} file(s) rewritten; renew the checksums with `python -m analysis validate --write`")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
