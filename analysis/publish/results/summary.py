"""A first look at one run: what was measured, on which host, what failed and why (no statistics here).
`python -m analysis show RUN` prints it; notebooks/measure.ipynb shows the same table at the end of a campaign."""
from pathlib import Path

import pandas as pd

from analysis.contract import dataset
from analysis.contract.profile_schema import RUN_TABLE as PROFILES
from analysis.contract.schema import OK, declared_orientation, measured_trials
from analysis.errors import HeapcostError
from analysis.paths import RUNS_DIR


def _run(run_dir) -> tuple[dataset.Dataset, str]:
    """A run folder as the dataset it is in (the folder above it) and its id: every file is read through it."""
    run_dir = Path(run_dir)
    return dataset.load(run_dir.parent), run_dir.name


def _table(run_dir, name: str) -> pd.DataFrame:
    ds, run_id = _run(run_dir)
    table = ds.table(run_id, name)
    if table is None:
        raise HeapcostError(f"run {run_id} has no {name}")
    return table


def read_trials(run_dir) -> pd.DataFrame:
    return _table(run_dir, "trials.csv")


def run_summary(run_dir) -> pd.DataFrame:
    """Per workload and allocator: trials by status, and the median wall time and max RSS of ok trials
    (for a callgrind run: status and instruction counts)."""
    ds, run_id = _run(run_dir)
    counts = ds.table(run_id, "counts.csv")
    if counts is not None:
        return counts[["workload", "allocator", "scale", "status", "instructions", "free_calls", "reason"]]
    pairs = ds.table(run_id, "pairs.csv")
    parts = [pairs_summary(declared_orientation(ds.info(run_id), pairs))] if pairs is not None else []
    trials = ds.table(run_id, "trials.csv")
    if trials is None:
        return parts[0] if parts else pd.DataFrame()
    return pd.concat([*parts, trials_summary(trials)], ignore_index=True)


def pairs_summary(pairs: pd.DataFrame) -> pd.DataFrame:
    """A lockstep run: per workload and allocator (B, against A: the baseline, or the other side of a direct
    pair), pairs by status and the median ratio of the processes' active times."""
    measured = measured_trials(pairs)
    ok = measured[measured["status"] == OK]
    keys = ["workload", "allocator_b", "allocator_a"]
    table = measured.pivot_table(index=keys, columns="status", values="seq", aggfunc="count", fill_value=0)
    table["median_active_ratio"] = (ok["active_b_s"] / ok["active_a_s"]).groupby([ok[k] for k in keys]).median()
    return table.reset_index().rename(columns={"allocator_b": "allocator", "allocator_a": "baseline"})


def trials_summary(df: pd.DataFrame) -> pd.DataFrame:
    measured = measured_trials(df)
    ok = measured[measured["status"] == OK]
    table = measured.pivot_table(index=["workload", "allocator"], columns="status", values="seq",
                                 aggfunc="count", fill_value=0)
    table["median_wall_s"] = ok.groupby(["workload", "allocator"])["wall_s"].median()
    table["median_maxrss_kb"] = ok.groupby(["workload", "allocator"])["maxrss_kb"].median()
    return table.reset_index()


def failures(run_dir) -> pd.DataFrame:
    """Every trial that was not ok, with its reason: nothing is dropped silently."""
    df = read_trials(run_dir)
    return df[df["status"] != OK][["seq", "workload", "allocator", "status", "reason"]]


def probes_summary(run_dir) -> pd.DataFrame:
    """A probe run: per allocator, its probe cells by outcome."""
    probes = _table(run_dir, "probes.csv")
    table = probes.pivot_table(index="allocator", columns="outcome", values="probe", aggfunc="count", fill_value=0)
    return table.reset_index()


PROFILE_SHOWN = ("processes", "threads", "malloc_calls", "free_calls", "reuse_share", "peak_live_bytes",
                 "mmap_calls", "user_s", "sys_s", "wall_s")


def profile_summary(run_dir) -> pd.DataFrame:
    """A profile run: per workload, its processes and threads, its malloc and free calls, the share of frees
    reused soon, peak live bytes, mmap calls and the medians of its timed runs (the totals of profiles.csv)."""
    rows = _table(run_dir, PROFILES)
    totals = rows[rows["size_class"].isna() & rows["quantity"].isin(PROFILE_SHOWN)]
    table = totals.pivot_table(index="workload", columns="quantity", values="value", aggfunc="first", sort=False)
    table = table[[q for q in PROFILE_SHOWN if q in table.columns]]
    counts = [q for q in table.columns if q not in ("reuse_share", "user_s", "sys_s", "wall_s")]
    return table.astype({q: "Int64" for q in counts}).reset_index()


def run_dir_of(name: str, runs_dir: Path = RUNS_DIR) -> Path:
    """A run named by its folder, or by its id under the dataset's runs (`runs_dir`: the dataset, or its runs
    folder)."""
    ds = dataset.load(runs_dir)
    for candidate in (Path(name), ds.root / name):
        found, run_id = _run(candidate)
        if found.has(run_id, dataset.RUN_JSON):
            return candidate
    raise HeapcostError(f"{name}: no run.json there or under {ds.root.name}/: give a run folder or a run id")


def header_lines(run_dir: Path) -> list[str]:
    """The run's identity: id, kind and status, when and how long, the host, what it measured."""
    ds, run_id = _run(run_dir)
    info = ds.info(run_id)
    machine = ds.machine(run_id)
    cpu = machine.get("cpu") or {}
    mhz = sorted(set(cpu.get("cpuinfo_mhz") or []))
    params = info.get("params") or {}
    elapsed = info.get("elapsed_s")
    allocators = info.get("allocators") or params.get("allocators") or []
    if info.get("kind") == "profile":
        measured = (f"{len(params.get('workloads') or [])} workloads profiled at scale {params.get('scale', '?')}, "
                    f"{params.get('timed_runs', '?')} timed runs each")
    elif info.get("kind") == "probe":
        measured = (f"{len(allocators)} allocators, {len(params.get('probes') or [])} probes, "
                    f"{len(params.get('sizes') or [])} sizes, {params.get('runs', '?')} processes a cell")
    else:
        measured = (f"{len(allocators)} allocators, {len(info.get('workloads') or [])} workloads, "
                    f"profile {params.get('profile', '?')}, protocol {params.get('protocol') or 'trials'}")
    return [f"run       {info.get('run_id', run_id)} ({info.get('kind', '?')}, {info.get('status', '?')})",
            f"when      {info.get('started_utc', '?')} to {info.get('ended_utc', '?')}"
            + (f" ({float(elapsed) / 60:.1f} min)" if elapsed not in (None, "") else ""),
            f"host      {cpu.get('model', '?')}" + (f" {mhz[0]:g} MHz" if mhz else "")
            + f", kernel {machine.get('kernel', '?')}, {cpu.get('logical_cpus', '?')} CPUs",
            f"measured  {measured}"]


def add_arguments(parser):
    parser.add_argument("run", help="a run folder, or a run id under data/runs/")


def run(args) -> int:
    run_dir = run_dir_of(args.run)
    print("\n".join(header_lines(run_dir)))
    ds, run_id = _run(run_dir)
    if ds.has(run_id, "probes.csv"):
        table = probes_summary(run_dir)
    elif ds.has(run_id, PROFILES):
        table = profile_summary(run_dir)
    else:
        table = run_summary(run_dir)
    print()
    print(table.to_string(index=False) if len(table) else "no trials, pairs, counts, probes or profiles recorded yet")
    return 0
