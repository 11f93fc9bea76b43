"""`python -m analysis cost PROFILE.csv`: a program's predicted cost under each allocator, before measuring it.

PROFILE.csv is the program's allocation profile (`python -m analysis profile --out PROFILE.csv -- PROGRAM
ARGS`). The per-call costs come from the dataset (publish/results/per_call.py: the calls workloads in lockstep
with the baseline, per host); the model is stats/cost_model.py. One line per allocator and processor kind: the
predicted ratio over the baseline with its 95% prediction interval for a new program, and the time it adds.

The interval carries the model's own error: the misses of the programs it was checked on (cost_predictions/,
each predicted before it was measured), taken as a split-conformal half-width (stats/cost_model.model_error),
besides the per-call intervals and the spread of the profile's timed runs. It also carries the between-machine
spread (stats/cost_model.machine_half_width): the per-call costs and the checked programs were measured on a
kind's machines in the dataset, and the machine the user asks about is another machine of its kind, which the
debates' cells measured on two machines of a kind or more show to differ (the noise model's machine level).
Where the profile lies outside what
those programs span (their calls per millisecond, share of large blocks, share of reallocs, threads, processes),
a line says so: the interval then promises less.

The per-call table and the checked programs' misses are computed once per state of the dataset and remembered
under build/memo/cost_inputs/ (`model_inputs`): keyed by each run's intake hashes (the file sizes and times of a run not merged
through intake), the registrations and the code, so that a prediction answers in about a second once they are
kept (bench/ measures it).

With --startup, each of the program's processes is also charged one process's start-up and exit under the
allocator (the calls-processes workload): for a program that starts many short processes, such as a build; a
host without that cell says so on the allocator's line.
"""
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analysis.contract import dataset
from analysis.errors import HeapcostError
from analysis.paths import DATA_DIR
from analysis.publish.results import cost_prediction as cp
from analysis.publish.results.cost_misses import PLACEMENT_SHARE
from analysis.stats import cost_model
from analysis.stats.cost_terms import ORDER_TERM


# ---- the model's inputs, kept per state of the dataset ----

@dataclass(frozen=True)
class MachineSpread:
    tau: float       # the between-machine SD of a configuration's log ratio (stats/prediction.machine_spread)
    df: float        # its degrees of freedom
    cells: int       # the debates' cells and kinds, measured on two machines or more, it is estimated from
    quantile: float  # the 95% t quantile of its degrees of freedom (cost_model.t_quantile)


@dataclass
class ModelInputs:
    costs: pd.DataFrame          # per_call.COLUMNS
    residuals: pd.DataFrame      # cost_model.RESIDUAL_COLUMNS: the checked programs' misses
    checked: pd.DataFrame        # one row per checked program and processor: its FEATURES
    aa_copies: frozenset         # allocators that are the baseline's own library brought again (A/A trials)
    machine: MachineSpread | None = None  # the between-machine spread a new machine of a kind adds
    premiums: dict = field(default_factory=dict)  # {configuration: stats/cost_terms.Premium}, those taking the term
    residuals_per_call: pd.DataFrame | None = None  # the per-call model's misses alone (the debates' predictions)


def machine_spread(data_dir: Path) -> MachineSpread | None:
    """The between-machine spread as the debates estimate it from the dataset (the machine level of the noise
    model), with the warnings the dataset's reading gives kept quiet: they concern the debates, not the program
    the user asked about. None where the dataset holds no run the debates read."""
    from analysis import errors
    from analysis.contract import debates_spec
    from analysis.publish.debates import pool, questions
    from analysis.publish.results.comparisons import compute
    from analysis.stats.cost_model import t_quantile

    with errors.recording(echo=False):
        try:
            res = compute(data_dir)
        except HeapcostError:
            return None
        spread, _ = questions.spreads(questions.debate_runs(res, debates_spec.load(), pool.grouped_cells(res.cells)))
    return MachineSpread(spread.tau, spread.df, spread.cells, t_quantile(spread.df))


def _run_signature(ds: dataset.Dataset, run_id: str) -> bytes:
    """A run's state: its intake.json (the sha256 of every file as merged), or without one (or one that cannot
    be read), the path, size and modification time of each of its files (Dataset.state)."""
    intake = ds.json(run_id, "intake.json")
    if intake is not None:
        return json.dumps(intake, sort_keys=True).encode()
    return ds.state(run_id)


def inputs_key(runs_dir: Path, baseline: str, registry: Path) -> str:
    """The state of what the model's inputs are computed from: each run's signature, the baseline, the
    registrations and the debates (whose cells give the between-machine spread; memo.remembered adds the code).
    `runs_dir`: the dataset, or its runs folder."""
    from analysis.publish.results import memo

    from analysis.contract import debates_spec

    ds = dataset.load(runs_dir)
    h = hashlib.sha256(f"{baseline}\0".encode())
    h.update(Path(debates_spec.DEBATES_TOML).read_bytes() if Path(debates_spec.DEBATES_TOML).is_file() else b"")
    for run_id in ds.run_ids():
        h.update(run_id.encode() + b"\0" + _run_signature(ds, run_id) + b"\0")
    if Path(registry).is_dir():
        h.update(memo.folder_digest(Path(registry)).encode())
    return h.hexdigest()


def model_inputs(runs_dir: Path, baseline: str = "glibc", registry: Path | None = None) -> ModelInputs:
    """The per-call costs, the checked programs' misses and their range, remembered (publish/results/memo.py,
    HEAPCOST_MEMO=0: always computed) by inputs_key rather than by every byte of the runs, so that a call with
    them kept reads a few small files. `runs_dir`: the dataset, or its runs folder."""
    from analysis.publish.results import cost_check, memo

    registry = Path(cost_check.REGISTRY if registry is None else registry)
    ds = dataset.load(runs_dir)
    parts = (inputs_key(ds, baseline, registry),)
    if memo.enabled() and not memo.kept("cost_inputs", parts):
        print("computing the model's inputs from the dataset: once for this state of the dataset and the code "
              "(a few minutes on two cores; the next answers take about a second)", flush=True)
    return memo.remembered("cost_inputs", parts, lambda: _compute_inputs(ds, baseline, registry))


def _compute_inputs(ds: dataset.Dataset, baseline: str, registry: Path) -> ModelInputs:
    from analysis.publish.dataset import paper_runs
    from analysis.publish.results import cost_check, cost_reprofile, per_call

    costs = per_call.table(ds, baseline)
    copies = frozenset(a for run in ds.runs("time") for a in paper_runs.aa_copies(run))
    done = cost_check.checked(ds, costs, baseline, registry)
    checked = []
    for folder, table in done.tables:
        reg = cost_check.load(folder)
        measured = set(table.loc[table["log_error"].notna(), "program"])
        newer = cost_reprofile.newer_profiles(ds, reg, folder)  # the profile the model reads now, where newer
        for path in sorted((folder / "profiles").glob("*.csv")):
            if path.stem in measured:
                profile = newer[path.stem][0] if path.stem in newer else cp.read_profile(path)
                checked.append({"program": path.stem, "processor": reg["registration"]["processor"],
                                **cp.features(profile, costs)})
    return ModelInputs(costs, done.residuals,
                       pd.DataFrame(checked, columns=["program", "processor", *(f for f, _, _ in cp.FEATURES)]),
                       copies, machine_spread(ds.root.parent), done.premiums, done.residuals_per_call)


# ---- the command ----

def add_arguments(parser):
    parser.add_argument("profile", type=Path, help="the program's allocation profile (python -m analysis profile)")
    parser.add_argument("--allocators", default="",
                        help="comma-separated allocators (default: every one measured, but for A/A copies of the "
                             "baseline and layout builds)")
    parser.add_argument("--processor", default="",
                        help="any unambiguous part of a processor kind's label, e.g. 25/17/1 or Intel (default: "
                             "this machine's kind when the dataset has it, else every kind)")
    parser.add_argument("--data", type=Path, default=DATA_DIR, help="the dataset (default data/)")
    parser.add_argument("--baseline", default="glibc", help="the baseline the costs are measured against")
    parser.add_argument("--startup", action="store_true",
                        help="also charge each of the program's processes one process's start-up and exit")
    parser.add_argument("--explain", action="store_true",
                        help="under each prediction, the size classes and cells that carry its added time")
    parser.add_argument("--csv", type=Path, default=None, help="also write the predictions as a table to this file")


def _this_kind(known) -> str | None:
    from analysis.publish.results.cost_check import this_processor

    try:
        mine = this_processor()
    except (OSError, HeapcostError):
        return None
    return mine if mine in set(known) else None


def run(args) -> int:
    profile = cp.read_profile(args.profile)
    if not (args.data / "runs").is_dir():
        raise HeapcostError(f"{args.data / 'runs'} does not exist; give a dataset directory holding runs/ (--data)")
    inputs = model_inputs(dataset.load(args.data / "runs"), args.baseline)
    processor = args.processor or (_this_kind(inputs.costs["processor"]) if len(inputs.costs) else "")
    if not args.processor:
        print(f"on this machine's kind, {processor}" if processor else
              "this machine's kind has no per-call costs in the dataset: every measured kind is shown")
    out = cp.predictions(profile, inputs.costs, [a for a in args.allocators.split(",") if a], processor or None,
                      startup=args.startup, residuals=inputs.residuals, baseline=args.baseline,
                      aa_copies=inputs.aa_copies,
                      machine_spread=(inputs.machine.tau, inputs.machine.quantile) if inputs.machine else None,
                      premiums=inputs.premiums)
    beyond = cp.outside_checked(profile, inputs.costs, inputs.checked)
    print("95% prediction intervals for a new program: the per-call costs' and the profile's own error, and the "
          "model's, from the misses of the programs it was checked on")
    taken = {a: t for a, t in sorted(inputs.premiums.items()) if a in set(out["allocator"])}
    if taken:
        print("what a program pays beyond the per-call loops, where the checked programs show it (each allocation "
              "call; each MiB of small blocks it holds at its peak; its placement shares): "
              + "; ".join(f"{a} {t.describe()}" for a, t in taken.items()))
        placed = any(ORDER_TERM in t.terms for t in taken.values())
        order, shuffle = cost_model.placement_shares(profile)
        if placed and math.isnan(order):
            print("this profile has no runs under heapcost's placement allocator: predicted without the placement "
                  "terms (profile the program again without --no-placement)")
        elif placed and max(abs(order), abs(shuffle)) >= PLACEMENT_SHARE:
            print(f"where this program's blocks lie moves its time (order share {order:+.2f}, shuffle share "
                  f"{shuffle:+.2f}): the placement parts were fitted on ratios measured in turns of a millisecond, "
                  "which amplify placement, so alone the program may differ from these ratios by more than their "
                  "intervals say (docs/design.md)")
    m = inputs.machine
    print(f"on a new machine of the kind: each interval also carries the between-machine spread "
          f"(SD {100 * m.tau:.2f}% on {m.df:g} degrees of freedom, "
          + (f"from {m.cells} debate cells measured on two machines or more, with the prior)" if m.cells else
             "the prior alone: no debate cell of the dataset is measured on two machines)") if m else
          "for the machines that measured the per-call costs only: the dataset holds no debate run from which "
          "to estimate the between-machine spread")
    if beyond:
        print(f"extrapolating: this profile lies outside the checked programs in {'; '.join(beyond)}")
    for r in out.itertuples():
        if r.ratio is None or pd.isna(r.ratio):
            print(f"{r.processor}  {r.allocator}: not predicted: {r.why}")
            continue
        model = (f"model error +-{r.model_error_percent:.1f}% from {r.model_error_from}"
                 if r.model_error_percent is not None and not pd.isna(r.model_error_percent)
                 else f"model error unknown ({r.model_error_from})")
        machine = ("" if r.machine_spread_percent is None or pd.isna(r.machine_spread_percent)
                   else f"; new machine +-{r.machine_spread_percent:.1f}%")
        print(f"{r.processor}  {r.allocator}: {r.ratio:.3f} [{r.low:.3f}, {r.high:.3f}] "
              f"({r.added_s * 1000:+.1f} ms over the profile's {args.baseline} run; {model}{machine})")
        if args.explain:
            for p in cp.explain(profile, inputs.costs, r.processor, r.allocator, args.startup,
                                premiums=inputs.premiums).itertuples():
                print(f"    {p.pattern:>9s} class {int(p.size_class):>7d}: {p.pairs:12.0f} pairs x "
                      f"{p.added_ns:+8.1f} ns = {p.added_s * 1000:+9.2f} ms ({100 * p.share:.0f}%)")
    if args.csv:
        try:
            out.to_csv(args.csv, index=False)
        except OSError as exc:
            raise HeapcostError(f"{args.csv}: cannot write the table ({exc.strerror})") from None
        print(f"{args.csv}: {len(out)} predictions")
    return 0
