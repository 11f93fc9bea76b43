"""`python -m analysis cost PROFILE.csv`: a program's predicted cost under each allocator, before measuring it.

PROFILE.csv is the program's allocation profile (`python -m analysis profile --out PROFILE.csv -- PROGRAM
ARGS`). The per-call costs come from the dataset (publish/results/per_call.py: the calls workloads in lockstep
with the baseline, per host); the model is stats/cost_model.py. One line per allocator and host: the predicted
ratio over the baseline with its interval, and the time it adds. With --startup, each of the program's processes
is also charged one process's start-up and exit under the allocator (the calls-processes workload): for a program
that starts many short processes, such as a build; a host without that cell says so on the allocator's line.
"""
from pathlib import Path

import pandas as pd

from analysis.errors import HeapcostError
from analysis.paths import DATA_DIR


def predictions(profile: pd.DataFrame, costs: pd.DataFrame, allocators=None, processor=None,
                startup: bool = False) -> pd.DataFrame:
    from analysis.stats import cost_model

    if costs.empty:
        raise HeapcostError("the dataset has no per-call costs: measure the calls workloads first "
                            "(make measure WORKLOADS=calls ALLOCATORS=glibc,... PROTOCOL=lockstep)")
    chosen = costs
    if allocators:
        unknown = sorted(set(allocators) - set(costs["allocator"]))
        if unknown:
            raise HeapcostError(f"no per-call costs of {', '.join(unknown)}; measured: "
                                f"{', '.join(sorted(set(costs['allocator'])))}")
        chosen = chosen[chosen["allocator"].isin(allocators)]
    if processor:
        chosen = chosen[chosen["processor"] == processor]
        if chosen.empty:
            raise HeapcostError(f"no per-call costs on {processor!r}; hosts: {', '.join(sorted(set(costs['processor'])))}")
    rows = []
    for (host, allocator), cells in chosen.groupby(["processor", "allocator"], sort=True):
        try:
            p = cost_model.predict(profile, cells, startup=startup)
        except HeapcostError as exc:
            rows.append({"processor": host, "allocator": allocator, "ratio": None, "low": None, "high": None,
                         "added_s": None, "why": str(exc)})
            continue
        rows.append({"processor": host, "allocator": allocator, "ratio": p.ratio, "low": p.low, "high": p.high,
                     "added_s": p.added_s, "why": ""})
    return pd.DataFrame(rows, columns=["processor", "allocator", "ratio", "low", "high", "added_s", "why"])


def read_profile(path: Path) -> pd.DataFrame:
    from analysis.contract.profile_schema import PROFILE_COLUMNS

    try:
        profile = pd.read_csv(path, dtype={"quantity": str})
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise HeapcostError(f"{path}: not a readable profile ({exc.__class__.__name__})") from None
    missing = [c for c in PROFILE_COLUMNS if c not in profile.columns]
    if missing:
        raise HeapcostError(f"{path}: not an allocation profile (no column {', '.join(missing)}); "
                            "`python -m analysis profile --out FILE.csv -- PROGRAM ARGS` writes one")
    return profile


def add_arguments(parser):
    parser.add_argument("profile", type=Path, help="the program's allocation profile (python -m analysis profile)")
    parser.add_argument("--allocators", default="", help="comma-separated allocators (default: every one measured)")
    parser.add_argument("--processor", default="", help="one host's per-call costs (default: every host's)")
    parser.add_argument("--data", type=Path, default=DATA_DIR, help="the dataset (default data/)")
    parser.add_argument("--baseline", default="glibc", help="the baseline the costs are measured against")
    parser.add_argument("--startup", action="store_true",
                        help="also charge each of the program's processes one process's start-up and exit")


def run(args) -> int:
    from analysis.publish.results import per_call

    profile = read_profile(args.profile)
    if not (args.data / "runs").is_dir():
        raise HeapcostError(f"{args.data / 'runs'} does not exist; give a dataset directory holding runs/ (--data)")
    costs = per_call.table(args.data / "runs", args.baseline)
    out = predictions(profile, costs, [a for a in args.allocators.split(",") if a], args.processor or None,
                      startup=args.startup)
    for r in out.itertuples():
        if r.ratio is None or pd.isna(r.ratio):
            print(f"{r.processor}  {r.allocator}: not predicted: {r.why}")
        else:
            print(f"{r.processor}  {r.allocator}: {r.ratio:.3f} [{r.low:.3f}, {r.high:.3f}] "
                  f"(+{r.added_s * 1000:.1f} ms over the profile's {args.baseline} run)")
    return 0
