"""`python -m analysis cost-check register | measure | faults | profile | check`: the cost model checked out of
sample from the command line (publish/results/cost_check.py registers and checks, cost_measure.py measures)."""
import argparse
from pathlib import Path

import pandas as pd

from analysis.contract import dataset
from analysis.errors import HeapcostError
from analysis.paths import DATA_DIR, REPO
from analysis.publish.results import cost_check, cost_measure
from analysis.publish.results.cost_check import DEFAULT_ALLOCATORS, MIN_BLOCKS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from analysis.harness.workloads.cost_programs import SETS

    sub = parser.add_subparsers(dest="action", required=True)
    reg = sub.add_parser("register", help="profile the programs here and register their predicted costs")
    reg.add_argument("--allocators", default=",".join(DEFAULT_ALLOCATORS), help="the configurations to predict")
    reg.add_argument("--programs", default="", help="comma-separated programs (default: every one)")
    reg.add_argument("--data", type=Path, default=DATA_DIR, help="the dataset whose per-call costs predict")
    reg.add_argument("--programs-set", default="first", choices=tuple(SETS),
                     help="which set of programs (harness/cost_programs.SETS; default the first)")
    mea = sub.add_parser("measure", help="measure the registered programs against the baseline into data/runs/")
    mea.add_argument("--extra-allocators", default="", help="name=/path/lib.so,... for the brought configurations")
    mea.add_argument("--blocks", type=int, default=8, help="windows per program and configuration (default 8)")
    mea.add_argument("--force", default=None, help="1: measure on a busy machine (recorded)")
    mea.add_argument("--programs-set", default="first", choices=tuple(SETS),
                     help="which registration of this host's processor to measure (default the first set's)")
    mea.add_argument("--turn-ms", type=float, default=None, help="each turn's length (default 1 ms, the check's)")
    flt = sub.add_parser("faults", help="run the registered programs alone, as trials, recording each run's page "
                                        "faults and system time: what the check's misses come from")
    flt.add_argument("--allocators", default="", help="the configurations besides the baseline (default the "
                                                       "registration's; knock-outs may be named)")
    flt.add_argument("--extra-allocators", default="", help="name=/path/lib.so,... for the brought configurations")
    flt.add_argument("--blocks", type=int, default=4, help="trials per program and configuration (default 4)")
    flt.add_argument("--force", default=None, help="1: measure on a busy machine (recorded)")
    flt.add_argument("--programs-set", default="first", choices=tuple(SETS),
                     help="which registration of this host's processor to run (default the first set's)")
    pro = sub.add_parser("profile", help="profile a set's programs here, the placement allocator's runs included, "
                                         "into data/runs/ (kind profile, label programs): the placement shares the "
                                         "check of a registration made without them reads")
    pro.add_argument("--programs-set", default="first", choices=tuple(SETS), help="which set of programs")
    pro.add_argument("--force", default=None, help="1: profile on a busy machine (recorded)")
    chk = sub.add_parser("check", help="print predicted against measured")
    chk.add_argument("--data", type=Path, default=DATA_DIR, help="the dataset holding the measuring runs")


def run(args) -> int:
    if args.action in ("register", "check") and not (args.data / "runs").is_dir():
        raise HeapcostError(f"{args.data / 'runs'} does not exist; give a dataset directory holding runs/ (--data)")
    if args.action == "register":
        out = cost_check.register([a for a in args.allocators.split(",") if a],
                                  [n for n in args.programs.split(",") if n] or None, args.data,
                                  programs_set=args.programs_set)
        print(f"{out.relative_to(REPO) if out.is_relative_to(REPO) else out}: registered; commit it before measuring")
        return 0
    if args.action == "measure":
        if args.blocks < MIN_BLOCKS:
            raise HeapcostError(f"--blocks must be at least {MIN_BLOCKS} (a cell's estimate needs 5 windows), not {args.blocks}")
        if args.turn_ms is not None and not 0.1 <= args.turn_ms <= 10000:
            raise HeapcostError(f"--turn-ms must lie between 0.1 and 10000 (ms), not {args.turn_ms:g}")
        print(cost_measure.measure(args.extra_allocators, args.blocks, force=args.force, programs_set=args.programs_set,
                                   slice_us=None if args.turn_ms is None else round(args.turn_ms * 1000)))
        return 0
    if args.action == "profile":
        from analysis.harness.workloads import profile

        print(profile.record_programs(args.programs_set, force=args.force))
        return 0
    if args.action == "faults":
        if args.blocks < 1:
            raise HeapcostError(f"--blocks must be at least 1, not {args.blocks}")
        print(cost_measure.measure(args.extra_allocators, args.blocks, force=args.force, programs_set=args.programs_set,
                                   protocol="trials", allocators=[a for a in args.allocators.split(",") if a] or None))
        return 0
    folders = cost_check.registrations()
    if not folders:
        raise HeapcostError("cost_predictions/ holds no registration: register predictions first (python -m analysis cost-check register)")
    ds = dataset.load(args.data / "runs")
    for folder in folders:
        _print_check(cost_check.check(ds, folder), cost_check.load(folder)["registration"])
    return 0


def _print_check(table: pd.DataFrame, head: dict) -> None:
    print(f"registered {head.get('registered', '')} on {head.get('processor', '')}")
    for r in table.itertuples():
        measured = "not measured" if r.measured is None or pd.isna(r.measured) else \
            f"{r.measured:.3f} [{r.measured_low:.3f}, {r.measured_high:.3f}]"
        predicted = "not predicted" if r.predicted is None or pd.isna(r.predicted) else \
            f"{r.predicted:.3f} [{r.low:.3f}, {r.high:.3f}]"
        print(f"{r.program:16s} {r.allocator:24s} predicted {predicted}  measured {measured}")
    s = cost_check.summary(table)
    if s["cells"]:
        print(f"{s['inside']} of {s['cells']} measured ratios inside their prediction interval; median absolute "
              f"error {s['median_abs_error_percent']}%")
