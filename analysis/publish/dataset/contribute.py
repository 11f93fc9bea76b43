"""`python -m analysis contribute [RUN]`: one run packed with its machine description, the checksum and size of
each file into one archive (analysis.contract.contribution) that `python -m analysis merge ARCHIVE` adds to a
dataset."""
from pathlib import Path

from analysis.paths import REPO, RUNS_DIR, file_sha256
from analysis.contract.contribution import pack
from analysis.publish.dataset.intake import newest_complete_run


def add_arguments(parser):
    parser.add_argument("run", nargs="?", default="",
                        help="the run directory to pack (default: the newest complete run in data/runs/)")
    parser.add_argument("--out", default=str(REPO / "dist"), help="where the archive goes (default dist/)")


def run(args) -> int:
    run_dir = Path(args.run) if args.run else newest_complete_run(RUNS_DIR)
    out = pack(run_dir, Path(args.out))
    print(f"wrote {out} (sha256 {file_sha256(out)}); `make merge ARCHIVE=...` adds it to a dataset")
    return 0
