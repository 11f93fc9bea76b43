"""The cost model checked out of sample: predictions registered before the programs are measured, then the
measured ratios against them.

`python -m analysis cost-check register` profiles each program of harness/workloads/cost_programs.py on this host, predicts
its ratio under each configuration from this host's per-call costs in the dataset (stats/cost_model.py), and
writes the predictions with their profiles into cost_predictions/<processor>/, one folder per processor kind
(never edited by hand; a new registration on a processor replaces its folder, the others stay). Committed
before the measuring campaign, the commit and date it names fix the model that made them.

`python -m analysis cost-check measure` runs the programs against the baseline under the registered
configurations of this host's registration (brought ones given as EXTRA_ALLOCATORS), in turns from outside
where a program allows it (turns of 1 ms unless `--turn-ms` says otherwise), into data/runs/
(publish/results/cost_measure.py; the command: cost_check_command.py). `check` reads those runs in the check's own turns (publish/results/
cost_turns.py sets the others beside them), each registration on its own: a run counts for a program only on
the registration's processor and with the registered input and program bytes (by sha256). The measured ratio is each run's paired estimate over its
windows (stats/paired.py), the runs pooled as the debates pool them (publish/debates/pool.py).

`python -m analysis cost-check profile` profiles a set's programs again into a run of the dataset, with what the
profiler has learned to record since the set was registered (publish/results/cost_reprofile.py); the model as it
is now reads those profiles, the registered predictions never change.

The table: predicted against measured per program and configuration; whether the measured ratio lies inside
the prediction interval (the prediction intervals' coverage) and whether the two intervals overlap; and the
error of the log ratio, whose median absolute value over the cells is the model's typical error.
"""
import datetime
import math
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.contract import dataset
from analysis.errors import HeapcostError, read_toml
from analysis.harness.timing.alternation import SLICE_US
from analysis.paths import DATA_DIR, REPO, file_sha256
from analysis.publish.results import cost_models
from analysis.publish.results.comparisons import REPLACED_BY_A_RUN_ALONE
from analysis.publish.results.cost_models import pct as _pct
from analysis.publish.results.cost_reprofile import newer_profiles, placement_shares
from analysis.publish.results.cost_profiles import BIG_CLASS, block_growth
from analysis.stats import cost_model
from analysis.stats.cost_model import SMALL_PATTERNS
from analysis.stats.cost_terms import ORDER_TERM

REGISTRY = REPO / "cost_predictions"  # a folder per processor kind, each a registration of the first set;
# a later set of programs under its own name: cost_predictions/<set>/<processor kind>/
REGISTERED = "registered.toml"
BASELINE = "glibc"
# the configurations a registration predicts by default: those whose per-call costs the dataset holds
DEFAULT_ALLOCATORS = ("jemalloc", "mimalloc2", "scudo", "mozjemalloc-poison", "hardened-72fb357",
                      "hardened-light-72fb357", "omalloc-1.128")
# the check's cells in three kinds: a prediction resting mostly on large blocks (the pages cell scaled by size);
# a program that allocates less than once per millisecond of its CPU time (what it pays is not per call); the rest
LARGE, SPARSE = 0.5, 1.0
# a configuration whose median signed error over the programs is beyond this is missed systematically
SYSTEMATIC = 0.05
# a miss beyond this factor either way is named, with its measured reason or as unexplained
FAR = 1.25
# what a user needs of a prediction for a program nobody tuned for: the share of measured ratios inside their 95%
# prediction intervals (at least), the median and the 90th percentile of |log error| (at most), in percent
GOALS = {"coverage_percent": 90, "median_percent": 3, "p90_percent": 8}
MIN_BLOCKS = 6  # a cell's paired estimate needs 5 windows after the first, the warm-up
SHORT_WINDOWS = "a side ended no run"  # a cell's `why` when a configuration outlasted the baseline's windows
CHECK_SLICE_US = SLICE_US  # the check's turns (harness/timing/alternation.py): a run naming no other took these
COLUMNS = ["program", "allocator", "processor", "predicted", "low", "high", "measured", "measured_low",
           "measured_high", "runs", "inside", "overlaps", "log_error", "base_cpu_s", "calls_per_ms", "large_share", "why",
           "current_predicted", "current_low", "current_high", "current_log_error", "calls", "per_call_predicted",
           "term_added", "registered_per_call", "registered_per_call_low", "registered_per_call_high",
           "registered_per_call_inside", "registered_per_call_log_error", "big_share", "medium_pairs", "realloc_grow",
           "realloc_moved", "heap_churn_mib", "peak_live_kib", "held_kib", "order_share", "shuffle_share",
           "placement_from", "current_profile", "model_measured", "model_turn_ms"]
# current_*: the model as it is now (stats/cost_model.py) on the registered profiles and today's per-call costs of
# the registration's processor, with the terms of stats/cost_terms.py where a configuration takes one (`checked`):
# in-sample wherever the model changed after the check was measured; per_call_predicted: the per-call model alone,
# and term_added what the terms add to it; registered_per_call*: a registration made with the premium also
# registers the per-call model alone (its interval with that model's own misses), checked the same way;
# big_share: the share of the prediction charged to blocks of BIG_CLASS or more; medium_pairs: the pairs charged to
# the cells of a small class of BIG_CLASS or more (which hold 256 blocks live); realloc_grow, realloc_moved,
# heap_churn_mib, peak_live_kib, held_kib: block_growth's, from the program's profile; order_share, shuffle_share:
# the program's placement shares (cost_model.placement_shares), from its pooled profile
# (cost_reprofile.newer_profiles) where a programs profile run of the dataset on the registration's processor kind
# profiled it on the registered input, else from its registered profile where that has the placement runs
# (placement_from: the newest such run's id, or "profile"; empty: none);
# current_profile: the profile the current_* columns read, "registered" or the newest run's, pooled with the
# registered profile and every other such run (publish/results/cost_reprofile.py), whose base_cpu_s and calls the
# row then carries; model_measured: the ratio the model's terms are fitted on and its own error measured against,
# the cell measured in the longest turns (model_turn_ms) it was measured in (`checked`, `longest`: a user
# runs a program alone, which longer turns come near), else the check's own `measured`


def registered_profiles_predicted(folder: Path, costs: pd.DataFrame, processor: str, newer: dict | None = None) -> dict:
    """{(program, allocator): the model's Prediction as it is now} for every registered profile and each
    configuration with per-call costs on `processor` (one the model cannot predict is left out); a program with a
    newer profile (`newer`: cost_reprofile.newer_profiles's) is predicted from that one."""
    from analysis.publish.results import cost_prediction
    from analysis.stats import cost_model

    out = {}
    mine = costs[costs["processor"] == processor] if len(costs) else costs
    for path in sorted((Path(folder) / "profiles").glob("*.csv")):
        profile = (newer or {}).get(path.stem, (None,))[0]
        profile = cost_prediction.read_profile(path) if profile is None else profile
        for allocator, cells in mine.groupby("allocator", sort=True):
            try:
                out[(path.stem, allocator)] = cost_model.predict(profile, cells)
            except HeapcostError:
                continue
    return out


def current_predictions(folder: Path, costs: pd.DataFrame, processor: str, predicted: dict | None = None) -> dict:
    """{(program, allocator): (ratio, low, high)} of the model as it is now, for every registered profile and each
    configuration with per-call costs on `processor` (`predicted`: registered_profiles_predicted's, when the
    caller has them)."""
    if predicted is None:
        predicted = registered_profiles_predicted(folder, costs, processor)
    return {k: (p.ratio, p.low, p.high) for k, p in predicted.items()}


# ---- the registration ----

def _head() -> tuple[str, bool]:
    """The commit the model is at, and whether analysis/ has changes not committed."""
    def git(*args):
        try:
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout.strip()
        except OSError:
            return ""
    return git("rev-parse", "--short", "HEAD") or "unknown", bool(git("status", "--porcelain", "--", "analysis"))


def this_processor() -> str:
    from analysis.contract.host import host_identity, processor_label
    from analysis.harness.process.machine import describe_machine

    return processor_label(host_identity(describe_machine()))


def folder_of(processor: str, root: Path | None = None, programs: str = "first") -> Path:
    """The registration folder of a processor kind for a set of programs (under `root`, default
    cost_predictions/): the first set's directly under it, a later set's under the set's name."""
    from analysis.contract.host import processor_slug

    root = Path(REGISTRY if root is None else root)
    return (root if programs == "first" else root / programs) / processor_slug(processor)


def programs_of(reg: dict) -> str:
    """Which set of programs a registration predicts (harness/cost_programs.SETS; the first set's never said)."""
    return str(reg["registration"].get("programs", "first"))


def registrations(root: Path | None = None) -> list[Path]:
    """The registration folders under `root` (default cost_predictions/), every set's, the earliest registered
    first: by the day registered, then the set's place (harness/cost_programs.SETS; sets registered on one day
    were registered in that order, and their commits' hashes say nothing of it), then the folder."""
    from analysis.harness.workloads.cost_programs import SETS

    root = Path(REGISTRY if root is None else root)
    found = sorted({f.parent for f in root.glob(f"*/{REGISTERED}")} | {f.parent for f in root.glob(f"*/*/{REGISTERED}")}) \
        if root.is_dir() else []
    order, regs = {name: i for i, name in enumerate(SETS)}, {f: load(f) for f in found}
    return sorted(found, key=lambda f: (str(regs[f]["registration"].get("registered", "")).split(",")[0],
                                        order.get(programs_of(regs[f]), len(order)), f.name))


def _toml(v) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        text = f"{v:.6g}"
        return text if any(c in text for c in ".en") else text + ".0"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    return str(v)


def render(head: dict, programs: list[dict], predictions: list[dict]) -> str:
    lines = ["# Predicted costs of programs nobody tuned for, registered before they were measured",
             "# (`python -m analysis cost-check register`, analysis/publish/results/cost_check.py). Never edited by",
             "# hand: a new registration replaces this folder in a commit of its own.", "", "[registration]"]
    lines += [f"{k} = {_toml(v)}" for k, v in head.items()]
    for block, rows in (("program", programs), ("prediction", predictions)):
        for row in rows:
            lines += ["", f"[[{block}]]", *(f"{k} = {_toml(v)}" for k, v in row.items())]
    return "\n".join(lines) + "\n"


def _per_call_runs(ds: dataset.Dataset, baseline: str, processor: str) -> list[str]:
    """The runs whose calls workloads give this processor's per-call costs."""
    from analysis.contract.host import processor_groups
    from analysis.publish.results import per_call

    runs = sorted(set(per_call.measured_cells(ds, baseline)["run_id"]))
    kinds = processor_groups({r: ds.machine(r) for r in runs if ds.has(r, "machine.json")})
    return [r for r in runs if kinds.get(r) == processor]


def register(allocators=DEFAULT_ALLOCATORS, names=None, data_dir: Path = DATA_DIR, folder: Path | None = None,
             baseline: str = BASELINE, today: str | None = None, runs: int | None = None,
             programs_set: str = "first", residuals: pd.DataFrame | None = None) -> Path:
    """Profile the programs of a set here and write this processor's registration of that set (into `folder`,
    default the set's own folder under cost_predictions/, replacing an earlier registration of that set on this
    processor only). A later set's predictions are the ones `cost` prints: the per-call model with the premium of
    each configuration that takes it (stats/cost_terms.py, chosen on every program already checked), and the
    model's own error, from those programs' misses, joined to the inputs' interval (`residuals`, default those
    the dataset gives). Beside each, the per-call model alone with its own misses (per_call_*), so that the check
    says what the premium bought on programs it never saw."""
    from analysis.harness.workloads import cost_inputs, cost_programs, profile
    from analysis.publish.results import cost_prediction, per_call
    from analysis.stats import cost_model

    programs = cost_programs.chosen(names, programs_set)
    inputs = cost_inputs.write_inputs(cost_inputs.INPUTS_DIR, programs)
    commands = cost_programs.commands(programs, inputs)
    processor = this_processor()
    folder = Path(folder) if folder is not None else folder_of(processor, programs=programs_set)
    ds = dataset.load(Path(data_dir) / "runs")
    costs = per_call.table(ds, baseline)
    premiums, per_call_residuals = {}, None
    if programs_set != "first":  # the premium and the misses of every program checked so far
        done = checked(ds, costs, baseline)
        premiums, per_call_residuals = done.premiums, done.residuals_per_call
        residuals = done.residuals if residuals is None else residuals
    mine = costs[costs["processor"] == processor] if len(costs) else costs
    if mine.empty:
        raise HeapcostError(f"the dataset has no per-call costs on this host's processor ({processor}): measure the "
                            "calls workloads here first (make measure WORKLOADS=calls PROTOCOL=lockstep ...)")
    unknown = sorted(set(allocators) - set(mine["allocator"]))
    if unknown:
        raise HeapcostError(f"no per-call costs of {', '.join(unknown)} on {processor}; measured: "
                            f"{', '.join(sorted(set(mine['allocator'])))}")
    commit, dirty = _head()
    if dirty:
        raise HeapcostError("analysis/ has changes not committed: commit the model before registering what it predicts")
    profiles = folder / "profiles"
    if profiles.is_dir():  # a new registration replaces this processor's folder whole
        for old in profiles.glob("*.csv"):
            old.unlink()
    profiles.mkdir(parents=True, exist_ok=True)
    program_rows, prediction_rows = [], []
    for p in programs:
        rows = profile.profile(shlex.split(commands[p.name]), **({"runs": runs} if runs else {}))
        (profiles / f"{p.name}.csv").write_text(profile.csv_text(rows))
        prof = pd.DataFrame(rows).replace({"size_class": {"": None}})
        program_path = shlex.split(commands[p.name])[0]
        program_rows.append({
            "name": p.name, "command": p.command, "input": p.input,
            "input_sha256": file_sha256(inputs[p.input]) if p.input else "",
            "program_sha256": file_sha256(shutil.which(program_path) or program_path),
            "package": p.package, "what": p.what, "base_cpu_s": round(float(cost_model.base_time(prof)), 6),
            "calls": int(cost_model.class_calls(prof)["calls"].sum())})
        def num(v):
            return None if v is None or pd.isna(v) else round(float(v), 6)

        alone = {} if not premiums else {  # the per-call model without the premium, with its own misses
            r.allocator: r for r in cost_prediction.predictions(prof, mine, list(allocators), processor,
                                                                residuals=per_call_residuals).itertuples()}
        for r in cost_prediction.predictions(prof, mine, list(allocators), processor, residuals=residuals,
                                             premiums=premiums).itertuples():
            row = {"program": p.name, "allocator": r.allocator, "ratio": num(r.ratio), "low": num(r.low),
                   "high": num(r.high), "why": r.why}
            if residuals is not None:  # the inputs' interval alone, and what the model's own error came from
                row.update(inputs_low=num(r.inputs_low), inputs_high=num(r.inputs_high),
                           model_error_percent=num(r.model_error_percent), model_error_from=r.model_error_from or "")
            if premiums:
                a = alone[r.allocator]
                t = premiums.get(r.allocator)
                row.update(premium_ns=num(t.ns) if t else 0.0, held_ns_per_kib=num(t.ns_per_kib) if t else 0.0,
                           **({"order_part": num(t.order), "shuffle_part": num(t.shuffle)}
                              if t and ORDER_TERM in t.terms else {}),
                           per_call_ratio=num(a.ratio), per_call_low=num(a.low), per_call_high=num(a.high))
            prediction_rows.append(row)
    head = {"registered": f"{today or datetime.date.today().isoformat()}, commit {commit}", "processor": processor,
            **({} if programs_set == "first" else {"programs": programs_set,
                                                   "interval": "95% prediction interval for a new program: the inputs' "
                                                               "interval joined with the model's own error"}),
            **({"term": cost_models.term_words(premiums)} if premiums else {}),
            **({"growth": "a growing realloc the baseline did in place is no fresh block, in classes of 16 KiB or "
                          "more (analysis/stats/cost_model.py, fresh_calls), in both"}
               if programs_set not in ("first", "second", "third") else {}),
            "baseline": baseline, "model": "analysis/stats/cost_model.py",
            "per_call_runs": _per_call_runs(ds, baseline, processor),
            "allocators": list(allocators)}
    for row in prediction_rows:  # TOML has no null: a cell the model could not predict keeps only its reason
        for k in ("ratio", "low", "high", "inputs_low", "inputs_high", "model_error_percent", "premium_ns", "held_ns_per_kib",
                  "order_part", "shuffle_part",
                  "per_call_ratio", "per_call_low", "per_call_high"):
            if k in row and row[k] is None:
                del row[k]
    out = folder / REGISTERED
    out.write_text(render(head, program_rows, prediction_rows))
    return out


def load(folder: Path) -> dict:
    path = Path(folder) / REGISTERED
    if not path.is_file():
        raise HeapcostError(f"{path} does not exist: register predictions first (python -m analysis cost-check register)")
    reg = read_toml(path)
    for key in ("registration", "program", "prediction"):
        if key not in reg:
            raise HeapcostError(f"{path} has no [{key}] entries: not a registration of predicted costs")
    return reg


# ---- the measurement ----

# ---- the check ----

def slice_of(ds: dataset.Dataset, run_id: str) -> int:
    """The length of a run's turns in microseconds (its params' `slice_us`; the check's own where it names none)."""
    return int((ds.info(run_id).get("params") or {}).get("slice_us") or CHECK_SLICE_US)


def at_slice(ds: dataset.Dataset, matching: dict, slice_us: int | None = None) -> dict:
    """`matching` ({program: run ids}, matching_runs) kept to the runs whose turns lasted `slice_us` (default the
    check's own: the runs in other turns are set beside the check by cost_turns.py, never pooled into it)."""
    length = CHECK_SLICE_US if slice_us is None else slice_us
    kept = {program: {r for r in runs if slice_of(ds, r) == length} for program, runs in matching.items()}
    return {program: runs for program, runs in kept.items() if runs}


# Runs that a later run of the same cells, measured alone, replaces (comparisons.REPLACED_BY_A_RUN_ALONE): they stay
# in the dataset, as recorded, and enter no table of the longer turns either.
SUPERSEDED = REPLACED_BY_A_RUN_ALONE


def matching_cells(ds: dataset.Dataset, baseline: str, matching: dict) -> pd.DataFrame:
    """The measured cells (per_call.measured_cells) of each program's runs in `matching` ({program: run ids}) only."""
    from analysis.publish.results import per_call

    cells = per_call.measured_cells(ds, baseline, set(matching))
    return cells[[run in matching.get(w, ()) for run, w in zip(cells["run_id"], cells["workload"])]] \
        if len(cells) else cells


def measured_in_turns(ds: dataset.Dataset, folder: Path, superseded=SUPERSEDED) -> dict:
    """{turn length in us: {(program, allocator): (ratio, low, high, runs)}} of a registration's cells measured in
    turns other than the check's own (the runs in each length pooled as `check` pools its own), runs in
    `superseded` left out."""
    reg = load(folder)
    baseline = reg["registration"].get("baseline", BASELINE)
    processor = reg["registration"]["processor"]
    matching = matching_runs(ds, reg)
    out = {}
    for length in sorted({slice_of(ds, r) for runs in matching.values() for r in runs} - {CHECK_SLICE_US}):
        runs = {program: kept for program, found in at_slice(ds, matching, length).items()
                if (kept := set(found) - set(superseded))}
        cells = matching_cells(ds, baseline, runs) if runs else pd.DataFrame()
        if cells.empty:
            continue
        got = {}
        for p in reg["prediction"]:
            if p["program"] in runs:
                m = measured_ratio(cells, ds, p["program"], p["allocator"], baseline, processor)
                if m is not None:
                    got[(p["program"], p["allocator"])] = m
        out[length] = got
    return out


def longest(ds: dataset.Dataset, pairs, superseded=SUPERSEDED) -> list:
    """`pairs` ([(registration folder, its check table)]) with each table's model_measured and model_turn_ms taken
    from the longest turns each cell was measured in (measured_in_turns): the ratio the model's terms are fitted on
    and its own error measured against, since a user runs a program alone and longer turns come near that
    (docs/design.md, "The model is held to the longest turns"). A cell measured only in the check's turns keeps the
    check's ratio; the check's own columns never change."""
    out = []
    for folder, checked_table in pairs:
        table = checked_table.copy()
        for length, got in sorted(measured_in_turns(ds, folder, superseded).items()):  # the longest last
            for i, r in table.iterrows():
                if (r["program"], r["allocator"]) in got:
                    table.loc[i, ["model_measured", "model_turn_ms"]] = (got[(r["program"], r["allocator"])][0],
                                                                         length / 1000)
        out.append((folder, table))
    return out


def matching_runs(runs_dir: Path, reg: dict) -> dict[str, set[str]]:
    """{program: ids of the runs whose brought workload of that name ran the registered program and input
    bytes (their sha256s in run.json)}; `runs_dir`: the dataset, or its runs folder."""
    programs = {p["name"]: p for p in reg["program"]}
    out: dict[str, set[str]] = {}
    for run in dataset.load(runs_dir).runs():
        for name, rec in (run.info.get("workloads") or {}).items():
            if name not in programs:
                continue
            hashes = {f.get("sha256") for f in rec.get("files", []) if isinstance(f, dict)}
            if {programs[name]["program_sha256"], programs[name]["input_sha256"]} - {""} <= hashes:
                out.setdefault(name, set()).add(run.run_id)
    return out


def measured_ratio(cells: pd.DataFrame, runs_dir: Path, program: str, allocator: str, baseline: str,
                   processor: str | None = None):
    """(ratio, low, high, runs) of `allocator` over the baseline on `program`, its runs in `cells`
    (per_call.measured_cells) on `processor` (any, when None: then one processor's runs only) pooled as a
    debate's are; None where no run measured it. `runs_dir`: the dataset, or its runs folder."""
    from analysis.publish.debates import pool
    from analysis.stats import random_effects

    est = pool.run_estimates(cells, runs_dir, "cost-check", allocator, baseline, program)
    est = est[~est["superseded"].astype(bool)]
    if processor is not None:
        est = est[est["processor"] == processor]
    if est.empty:
        return None
    if est["processor"].nunique() > 1:
        raise HeapcostError(f"{program} under {allocator} was measured on several processors: name one")
    pooled = random_effects.pool(est)
    lo, hi = pooled.interval()
    return math.exp(pooled.estimate), math.exp(lo), math.exp(hi), int(pooled.runs)


def short_windows(ds: dataset.Dataset, runs, program: str, allocator: str) -> tuple[int, int]:
    """(windows in which a side ended no run, windows) of `program` under `allocator` in `runs`' pairs: how many
    of a cell's windows were too short for the slower side (harness/timing/alternation.widened)."""
    short = total = 0
    for run_id in sorted(runs):
        for r in ds.rows(run_id, "pairs.csv") or []:
            if r.get("workload") != program or allocator not in (r.get("allocator_a"), r.get("allocator_b")):
                continue
            total += 1
            turns = [r.get("turns_a"), r.get("turns_b")]  # a side's runs ended in the window ("" or absent: unknown)
            short += r.get("status") != "ok" and any(t not in (None, "") and float(t) == 0 for t in turns)
    return short, total


def large_shares(folder: Path, costs: pd.DataFrame, processor: str, predicted: dict | None = None,
                 from_class: int | None = None) -> dict:
    """{(program, allocator): the share of the predicted added time that the model charges to blocks above the
    largest measured small class (the pages cell scaled by size), or with `from_class` to every cell of that size
    class or larger, the pages cell's included}, from the registered profiles and the per-call costs: where a
    prediction rests on large blocks. A description of each prediction, read after the fact. `predicted`:
    registered_profiles_predicted's, when the caller has them."""
    from analysis.stats import cost_model

    if predicted is None:
        predicted = registered_profiles_predicted(folder, costs, processor)
    out = {}
    for key, p in predicted.items():
        total = float(p.parts["added_s"].abs().sum())
        big = p.parts["pattern"] == cost_model.PAGES
        if from_class is not None:
            big |= p.parts["size_class"].astype(int) >= from_class
        out[key] = float(p.parts.loc[big, "added_s"].abs().sum()) / total if total > 0 else 0.0
    return out


def check(runs_dir: Path, folder: Path, costs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Predicted against measured, a row per registered prediction (measured left empty where no run checks
    it yet). The measured ratio pools the matching runs on the registration's processor as the debates pool
    (publish/debates/pool.py: each run's paired estimate over its windows, then the runs and builds). Each row
    also says how densely the program allocates (its calls per millisecond of CPU time under the baseline) and
    what share of its prediction rests on large blocks (`large_shares`; `costs`: the per-call table, computed
    from runs_dir when not given). `runs_dir`: the dataset, or its runs folder."""
    from analysis.publish.results import per_call

    ds = dataset.load(runs_dir)
    reg = load(folder)
    baseline = reg["registration"].get("baseline", BASELINE)
    processor = reg["registration"]["processor"]
    matching = at_slice(ds, matching_runs(ds, reg))  # the check's own turns; cost_turns.py sets the others beside
    cells = matching_cells(ds, baseline, matching)
    baseline_costs = per_call.table(ds, baseline) if costs is None else costs
    newer = newer_profiles(ds, reg, folder)
    predicted = registered_profiles_predicted(folder, baseline_costs, processor, newer)  # once, for every use below
    large = large_shares(folder, baseline_costs, processor, predicted)
    big = large_shares(folder, baseline_costs, processor, predicted, from_class=BIG_CLASS)
    medium = {key: float(pred.parts.loc[pred.parts["pattern"].isin(SMALL_PATTERNS)
                                        & (pred.parts["size_class"].astype(int) >= BIG_CLASS), "pairs"].sum())
              for key, pred in predicted.items()}
    growth = block_growth(folder)
    placed = placement_shares(folder, newer)
    base = {p["name"]: p.get("base_cpu_s") for p in reg["program"]}
    calls = {p["name"]: p.get("calls") for p in reg["program"]}
    for program, (prof, _) in newer.items():  # the model as it is now reads the newer profile whole
        base[program] = cost_model.base_time(prof)
        calls[program] = int(cost_model.class_calls(prof)["calls"].sum())
    density = {p["name"]: p["calls"] / (1000 * p["base_cpu_s"]) if p.get("base_cpu_s") else None
               for p in reg["program"]}
    now = current_predictions(folder, baseline_costs, processor, predicted)
    rows = []
    for p in reg["prediction"]:
        current = now.get((p["program"], p["allocator"]), (None, None, None))
        row = {"program": p["program"], "allocator": p["allocator"], "processor": processor,
               "current_predicted": current[0], "current_low": current[1], "current_high": current[2],
               "current_log_error": None,
               "predicted": p.get("ratio"), "low": p.get("low"), "high": p.get("high"), "measured": None,
               "measured_low": None, "measured_high": None, "runs": 0, "inside": None, "overlaps": None,
               "log_error": None, "base_cpu_s": base.get(p["program"]), "calls_per_ms": density.get(p["program"]),
               "large_share": large.get((p["program"], p["allocator"])), "why": p.get("why", ""),
               "calls": calls.get(p["program"]), "per_call_predicted": current[0], "term_added": 0.0,
               "registered_per_call": p.get("per_call_ratio"), "registered_per_call_low": p.get("per_call_low"),
               "registered_per_call_high": p.get("per_call_high"), "registered_per_call_inside": None,
               "registered_per_call_log_error": None, "big_share": big.get((p["program"], p["allocator"])),
               "medium_pairs": medium.get((p["program"], p["allocator"])),
               **dict(zip(("realloc_grow", "realloc_moved", "heap_churn_mib", "peak_live_kib", "held_kib"),
                         growth.get(p["program"], (None,) * 5))),
               "current_profile": newer[p["program"]][1] if p["program"] in newer else "registered",
               "model_measured": None, "model_turn_ms": None,
               **dict(zip(("order_share", "shuffle_share", "placement_from"),
                          placed.get(p["program"], (None, None, ""))))}
        got = measured_ratio(cells, ds, p["program"], p["allocator"], baseline, processor)
        if got is None:
            tried = not cells.empty and bool(((cells["workload"] == p["program"])
                                              & (cells["allocator"] == p["allocator"])).any())
            short = short_windows(ds, matching.get(p["program"], ()), p["program"], p["allocator"])
            row["why"] = row["why"] or (
                f"in {short[0]} of its {short[1]} windows {SHORT_WINDOWS}: the window the baseline's run sized "
                "was too short for it" if short[0] else
                "too few windows in which both sides ended a run (its runs give no estimate)" if tried
                else "not measured in turns with the baseline on this processor yet")
        else:
            m, mlo, mhi, n = got
            row.update(measured=m, measured_low=mlo, measured_high=mhi, runs=n, model_measured=m,
                       model_turn_ms=CHECK_SLICE_US / 1000)
            if current[0] is not None and current[0] > 0:
                row["current_log_error"] = math.log(m) - math.log(current[0])
            if row["registered_per_call"] is not None:
                row.update(registered_per_call_inside=bool(row["registered_per_call_low"] <= m
                                                           <= row["registered_per_call_high"]),
                           registered_per_call_log_error=math.log(m) - math.log(row["registered_per_call"]))
            if row["predicted"] is not None:
                row.update(inside=bool(row["low"] <= m <= row["high"]),
                           overlaps=bool(row["low"] <= mhi and mlo <= row["high"]),
                           log_error=math.log(m) - math.log(row["predicted"]))
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def residuals_of(tables) -> pd.DataFrame:
    """The checked programs' misses (stats/cost_model.RESIDUAL_COLUMNS) over the check tables of every
    registration: each measured cell's log(measured) - log(current prediction); on `check`'s own tables, the
    per-call model's misses (`checked` gives those of the model with its premium)."""
    from analysis.publish.results.cost_prediction import family_of
    from analysis.stats.cost_model import RESIDUAL_COLUMNS

    rows = [{"program": r.program, "allocator": r.allocator, "family": family_of(r.allocator),
             "processor": r.processor, "log_error": float(r.current_log_error)}
            for t in tables for r in t.itertuples()
            if r.current_log_error is not None and not pd.isna(r.current_log_error)]
    return pd.DataFrame(rows, columns=RESIDUAL_COLUMNS)


@dataclass
class Checked:
    """Every registration checked, with the model's premium (stats/cost_terms.py) chosen on all their programs."""
    tables: list                   # [(registration folder, its check table, current_* with the premium)]
    premiums: dict                 # {configuration: cost_terms.Premium}, those that take the term
    nested: pd.DataFrame           # cost_terms.NESTED_COLUMNS: each program predicted with the term chosen without it
    residuals: pd.DataFrame        # cost_model.RESIDUAL_COLUMNS: the misses of the model with its term (nested)
    residuals_per_call: pd.DataFrame  # the misses of the per-call model alone (what the debates' predictions take)


def checked(runs_dir: Path, costs: pd.DataFrame | None = None, baseline: str = BASELINE,
            registry: Path | None = None) -> Checked:
    """Every registration under `registry` (default cost_predictions/) on `baseline` checked (`check`), the
    premium chosen and fitted over all their measured cells, and the misses a prediction of `cost` would have made:
    each program's under the term as chosen and fitted without it (stats/cost_terms.nested), so that the model's
    own error never counts a program's own miss twice. `runs_dir`: the dataset, or its runs folder."""
    from analysis.publish.results import per_call
    from analysis.publish.results.cost_prediction import family_of
    from analysis.stats import cost_terms
    from analysis.stats.cost_model import RESIDUAL_COLUMNS

    ds = dataset.load(runs_dir)
    costs = per_call.table(ds, baseline) if costs is None else costs
    raw = longest(ds, [(f, check(ds, f, costs)) for f in registrations(registry)
                       if load(f)["registration"].get("baseline", BASELINE) == baseline])
    cells = cost_models.term_cells([t for _, t in raw])
    premiums = cost_terms.premiums(cells) if len(cells) else {}
    nested = cost_terms.nested(cells) if len(cells) else pd.DataFrame(columns=cost_terms.NESTED_COLUMNS)
    residuals = pd.DataFrame([{"program": r.program, "allocator": r.allocator, "family": family_of(r.allocator),
                               "processor": r.processor, "log_error": r.log_error_nested}
                              for r in nested.itertuples()], columns=RESIDUAL_COLUMNS)
    return Checked([(f, cost_models.with_premiums(t, premiums)) for f, t in raw], premiums, nested, residuals,
                   residuals_of([t for _, t in raw]))


LOO_COLUMNS = ["loo_low", "loo_high", "loo_inside", "loo_scope"]


def leave_one_program_out(table: pd.DataFrame, residuals: pd.DataFrame) -> pd.DataFrame:
    """The check of the intervals `cost` prints: each measured cell's prediction by the model as it is now, its
    interval widened by the model's own error as the misses of every other program give it (on every processor
    kind: a program's misses on all kinds are left out with it), and whether the measured ratio lies inside
    (LOO_COLUMNS)."""
    from analysis.publish.results.cost_prediction import family_of
    from analysis.stats import cost_model

    out = []
    for r in table.itertuples():
        if r.current_log_error is None or pd.isna(r.current_log_error):
            out.append({"loo_low": None, "loo_high": None, "loo_inside": None, "loo_scope": ""})
            continue
        err = cost_model.model_error(residuals, r.allocator, family_of(r.allocator), leave_out=r.program)
        low, high = cost_model.with_model_error(float(r.current_predicted), float(r.current_low),
                                                float(r.current_high), err)
        out.append({"loo_low": low, "loo_high": high, "loo_inside": bool(low <= cost_models.model_measured(r) <= high),
                    "loo_scope": f"{err.scope}, {err.residuals} misses of {err.programs} programs"})
    return pd.concat([table.reset_index(drop=True), pd.DataFrame(out, columns=LOO_COLUMNS)], axis=1)


def loo_summary(table: pd.DataFrame) -> dict:
    """How often the intervals with the model's own error held, left out program by program: the cells, those
    inside, the share with its Wilson 95% interval, and the intervals' median half-width (percent, on the log
    scale); per configuration the same counts; and the cells outside."""
    from analysis.stats.primitives import wilson

    done = table[table["loo_inside"].notna()] if "loo_inside" in table and len(table) else table.iloc[0:0]
    if done.empty:
        return {"loo_cells": 0}
    inside = done["loo_inside"].astype(bool)
    half = (np.log(done["loo_high"].astype(float)) - np.log(done["loo_low"].astype(float))) / 2
    lo, hi = wilson(int(inside.sum()), int(len(done)))
    from analysis.stats.cost_model import min_residuals

    return {"loo_cells": int(len(done)), "loo_inside": int(inside.sum()), "loo_min_residuals": min_residuals(),
            "loo_coverage_percent": f"{100 * inside.mean():.0f}",
            "loo_coverage_low_percent": f"{100 * lo:.0f}", "loo_coverage_high_percent": f"{100 * hi:.0f}",
            "loo_median_half_percent": f"{100 * math.expm1(float(half.median())):.1f}",
            "loo_by_allocator": [{"allocator": a, "cells": int(len(sub)), "inside": int(sub["loo_inside"].astype(bool).sum()),
                                  "median_half_percent": f"{100 * math.expm1(float(((np.log(sub['loo_high'].astype(float)) - np.log(sub['loo_low'].astype(float))) / 2).median())):.1f}"}
                                 for a, sub in done.groupby("allocator", sort=True)],
            "loo_outside": [{"program": r.program, "allocator": r.allocator, "measured": f"{r.measured:.3f}",
                             "interval": f"[{r.loo_low:.3f}, {r.loo_high:.3f}]"}
                            for r in done[~inside].sort_values(["program", "allocator"]).itertuples()]}


def summary(table: pd.DataFrame, misses: int = 5) -> dict:
    """The check in numbers: cells measured, the share inside the prediction intervals and overlapping them, the
    median and largest absolute error of the ratio; per configuration the same with the median signed error
    (above zero: measured dearer than predicted); the largest misses; the cells a configuration too slow for the
    baseline's windows left without a ratio (too_slow_for_windows); and the errors in three kinds of cell
    (`groups`: the prediction rests mostly on large blocks; the program allocates sparsely; the rest)."""
    done = table[table["log_error"].notna()] if len(table) else table
    if done.empty:
        return {"cells": 0}
    # the cells whose configuration outlasted the windows the baseline's runs sized: no ratio, however slow
    too_slow = [{"program": r.program, "allocator": r.allocator,
                 "predicted": "" if pd.isna(r.predicted) else f"{r.predicted:.2f}",
                 "current": "" if pd.isna(getattr(r, "current_predicted", None)) else f"{r.current_predicted:.2f}"}
                for r in table.itertuples() if pd.isna(r.measured) and SHORT_WINDOWS in str(r.why)]
    done = done.assign(log_error=done["log_error"].astype(float), abs_error=done["log_error"].astype(float).abs())
    by_allocator = []
    for allocator, sub in done.groupby("allocator", sort=True):
        by_allocator.append({"allocator": allocator, "cells": int(len(sub)), "inside": int(sub["inside"].astype(bool).sum()),
                             "median_abs_error_percent": f"{100 * math.expm1(float(sub['abs_error'].median())):.1f}",
                             "median_error_percent": _pct(float(sub["log_error"].median()))})
    worst = done.sort_values(["abs_error", "program", "allocator"], ascending=[False, True, True]).head(misses)
    groups = {}
    share = pd.to_numeric(done["large_share"], errors="coerce").fillna(0.0)
    density = pd.to_numeric(done["calls_per_ms"], errors="coerce").fillna(0.0)
    for key, mask in (("large_blocks", share >= LARGE), ("small_blocks", (share < LARGE) & (density >= SPARSE)),
                      ("sparse", (share < LARGE) & (density < SPARSE))):
        sub = done[mask]
        groups[key] = {"cells": int(len(sub)), "programs": sorted(set(sub["program"])),
                       "inside": int(sub["inside"].astype(bool).sum()),
                       "median_abs_error_percent": (f"{100 * math.expm1(float(sub['abs_error'].median())):.1f}"
                                                    if len(sub) else ""),
                       "median_error_percent": _pct(float(sub["log_error"].median())) if len(sub) else "",
                       "largest_abs_error_percent": (f"{100 * math.expm1(float(sub['abs_error'].max())):.0f}"
                                                     if len(sub) else "")}
    # what a run of a sparse program pays under each configuration: (measured - 1) x its CPU time, the median
    sparse = done[(share < LARGE) & (density < SPARSE)]
    groups["sparse"]["added_ms"] = [
        {"allocator": a, "ms": f"{1000 * float(((sub['measured'] - 1) * sub['base_cpu_s'].astype(float)).median()):.2f}"}
        for a, sub in sparse.groupby("allocator", sort=True)]
    current = done[done["current_log_error"].notna()] if "current_log_error" in done else done.iloc[0:0]
    now_abs = current["current_log_error"].astype(float).abs() if len(current) else pd.Series(dtype=float)
    worst_now = current.loc[now_abs.idxmax()] if len(current) else None
    return {"cells": int(len(done)), "programs": int(done["program"].nunique()),
            "p90_abs_error_percent": f"{100 * math.expm1(float(done['abs_error'].quantile(0.9))):.1f}",
            "current_cells": int(len(current)),
            "current_median_abs_error_percent": (f"{100 * math.expm1(float(now_abs.median())):.1f}"
                                                 if len(current) else ""),
            "current_p90_abs_error_percent": (f"{100 * math.expm1(float(now_abs.quantile(0.9))):.1f}"
                                              if len(current) else ""),
            "current_worst": ({"program": worst_now["program"], "allocator": worst_now["allocator"],
                               "predicted": f"{worst_now['current_predicted']:.3f}",
                               "measured": f"{worst_now['measured']:.3f}"} if worst_now is not None else {}),
            "configurations": int(done["allocator"].nunique()),
            "inside": int(done["inside"].astype(bool).sum()),
            "coverage_percent": f"{100 * done['inside'].astype(bool).mean():.0f}",
            "overlaps": int(done["overlaps"].astype(bool).sum()),
            "overlap_percent": f"{100 * done['overlaps'].astype(bool).mean():.0f}",
            "median_abs_error_percent": f"{100 * math.expm1(float(done['abs_error'].median())):.1f}",
            "largest_abs_error_percent": f"{100 * math.expm1(float(done['abs_error'].max())):.0f}",
            "median_error_percent": _pct(float(done["log_error"].median())),
            "by_allocator": by_allocator, "groups": groups, "systematic_percent": f"{100 * SYSTEMATIC:g}",
            "dearer_than_predicted": [a["allocator"] for a in by_allocator
                                      if float(a["median_error_percent"]) > 100 * SYSTEMATIC],
            "cheaper_than_predicted": [a["allocator"] for a in by_allocator
                                       if float(a["median_error_percent"]) < -100 * SYSTEMATIC], "large_share_percent": f"{100 * LARGE:g}",
            "sparse_below_calls_per_ms": f"{SPARSE:g}",
            "misses": [{"program": r.program, "allocator": r.allocator, "predicted": f"{r.predicted:.3f}",
                        "measured": f"{r.measured:.3f}", "error_percent": _pct(r.log_error)}
                       for r in worst.itertuples()],
            "far_factor": f"{FAR:g}", "too_slow_for_windows": too_slow,
            "big_class": BIG_CLASS,
            "far_misses": [{"program": r.program, "allocator": r.allocator, "predicted": f"{r.predicted:.3f}",
                            "measured": f"{r.measured:.3f}", "error_percent": _pct(r.log_error),
                            "big_share_percent": "" if pd.isna(r.big_share) else f"{100 * r.big_share:.0f}",
                            "realloc_grow": "" if pd.isna(r.realloc_grow) else int(r.realloc_grow),
                            "realloc_moved": "" if pd.isna(r.realloc_moved) else int(r.realloc_moved),
                            "heap_churn_mib": "" if pd.isna(r.heap_churn_mib) else f"{r.heap_churn_mib:.0f}",
                            "peak_live_kib": "" if pd.isna(r.peak_live_kib) else f"{r.peak_live_kib:,.0f}",
                            "medium_pairs": "" if pd.isna(r.medium_pairs) else int(round(r.medium_pairs))}
                           for r in done[done["abs_error"] > math.log(FAR)].sort_values(
                               ["abs_error", "program", "allocator"], ascending=[False, True, True]).itertuples()]}


# ---- the command ----
