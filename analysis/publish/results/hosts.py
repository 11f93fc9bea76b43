"""The host panel and the clock-lock comparison for the paper, from the comparisons each time run made.

Which host kind measured a run is its machine.json's fingerprint (analysis/contract/host.py). A group of runs
is named as everywhere else in the paper: its processor kind's label and its machines' names ("AMD EPYC 2600
MHz (25/17/1), machine K-1a2b3c"), the machines named over every run of the dataset as the debates name them.
Groups whose names would read the same are one group. With runs from more than one host kind, the paper shows each allocator's geometric-mean speed ratio per host and pooled with
the host as a random effect (analysis/stats/hosts.py); with one, it says nothing about hosts. Likewise runs
with the clock locked are compared with runs without only where the dataset has both.
"""
from pathlib import Path

import pandas as pd

from analysis.contract import dataset
from analysis.contract.host import dataset_machines, host_groups
from analysis.publish.render.products import write_csv
from analysis.publish.results.comparisons import Results
from analysis.publish.render.formats import fmt_interval
from analysis.stats import hosts

LOCKED, NOT_LOCKED = "locked", "not locked"


def clock_state(run_dir: Path) -> str:
    """LOCKED when every session of the run held the clock lock (machine.json's `clock_lock`; older runs:
    run.json's outcomes), else NOT_LOCKED. `run_dir`: the run's folder."""
    run_dir = Path(run_dir)
    return _clock_state(dataset.load(run_dir.parent), run_dir.name)


def _clock_state(ds: dataset.Dataset, run_id: str) -> str:
    sessions = ds.machine(run_id).get("clock_lock")
    if sessions:
        return LOCKED if all(s.get("locked") for s in sessions) else NOT_LOCKED
    outcomes = [s.get("outcome", "") for s in ds.info(run_id).get("clock_lock", [])]
    return LOCKED if outcomes and all(o.startswith("locked") for o in outcomes) else NOT_LOCKED


def group_label(machines) -> str:
    """A host group's name from its runs' Machines: each processor kind with its machines' names,
    'AMD EPYC 2600 MHz (25/17/1), machine K-1a2b3c' (several: 'machines K-1a2b3c, M-4d5e6f')."""
    by_kind: dict[str, set] = {}
    for m in machines:
        by_kind.setdefault(m.kind, set()).add(m.name)
    return "; ".join(f"{kind}, machine{'s' if len(names) > 1 else ''} {', '.join(sorted(names))}"
                     for kind, names in sorted(by_kind.items()))


def labelled_groups(host_of: dict, machine_of: dict) -> tuple[dict, dict]:
    """({run: group}, {group: label}): the host fingerprints' groups named by group_label; groups that would
    share a label are joined into the first (by fingerprint) of them, so no two groups read the same."""
    members: dict[str, list] = {}
    for run, fp in host_of.items():
        members.setdefault(fp, []).append(machine_of[run])
    label_of = {fp: group_label(ms) for fp, ms in sorted(members.items())}
    first = {}
    for fp, label in label_of.items():
        first.setdefault(label, fp)
    return ({run: first[label_of[fp]] for run, fp in host_of.items()},
            {fp: label for label, fp in first.items()})


def run_groups(runs_dir: Path, run_ids) -> tuple[dict, dict, dict]:
    """({run: host group, a fingerprint}, {group: label}, {run: clock state}) of the given runs (`runs_dir`: the
    dataset, or its runs folder)."""
    ds = dataset.load(runs_dir)
    runs = sorted(set(run_ids))
    host_of, _ = host_groups({run_id: ds.machine(run_id) for run_id in runs})
    machines = dataset_machines(ds, runs)
    host_of, labels = labelled_groups(host_of, {run: machines[run] for run in runs})
    clock_of = {run_id: _clock_state(ds, run_id) for run_id in runs}
    return host_of, labels, clock_of


def _displayed(df: pd.DataFrame, ratio="ratio", lo="ci_low", hi="ci_high") -> pd.Series:
    return pd.Series([fmt_interval(r[ratio], r[lo], r[hi]) for _, r in df.iterrows()], index=df.index, dtype=object)


def host_outputs(res: Results, p, pool: hosts.Pool = hosts.random_effects_pool) -> dict:
    """Writes results_hosts.csv, results_hosts_pooled.csv and results_clock_lock.csv; returns the numbers
    (`hosts`, its `leading` the name of the leading speed run's host, and `clock_lock`) the paper reads."""
    cells = res.cells.get("wall_s") if res.cells else None
    if res.time_run is None or cells is None or not len(cells):
        return {"hosts": {"count": 0}, "clock_lock": {"both": False}}
    host_of, labels, clock_of = run_groups(res.dataset, cells["run_id"])
    reported = set(res.speed.geomean["allocator"]) if res.speed is not None else None
    per_host, pooled = hosts.group_panel(cells, host_of, pool, allocators=reported)
    per_host = per_host.assign(host=per_host["group"].map(labels), display=_displayed(per_host))
    pooled = pooled.assign(display=_displayed(pooled), tau_percent=[f"{100 * t:.1f}" for t in pooled["tau"]])
    write_csv(per_host, p("hosts.csv"))
    write_csv(pooled, p("hosts_pooled.csv"))
    used = sorted(set(host_of.values()))
    leading = host_of.get(res.time_run.path.name)
    numbers = {"hosts": {"count": len(used), "labels": [labels[h] for h in used], "fingerprints": used,
                         "leading": labels[leading] if leading else "",
                         "runs": [sum(1 for v in host_of.values() if v == h) for h in used],
                         "allocators": sorted(set(pooled["allocator"]))}}
    _, by_clock = hosts.group_panel(cells, clock_of, pool, allocators=reported)
    by_clock = by_clock.assign(display=_displayed(by_clock),
                               contrast_display=_displayed(by_clock, "contrast_ratio", "contrast_low",
                                                           "contrast_high"))
    write_csv(by_clock, p("clock_lock.csv"))
    states = sorted(set(clock_of.values()))
    numbers["clock_lock"] = {"both": len(states) == 2, "runs_locked": sum(v == LOCKED for v in clock_of.values()),
                             "runs_not_locked": sum(v == NOT_LOCKED for v in clock_of.values()),
                             "allocators": sorted(set(by_clock["allocator"])),
                             "excluding_1": sorted(by_clock.loc[(by_clock["contrast_low"] > 1)
                                                                | (by_clock["contrast_high"] < 1), "allocator"])}
    return numbers
