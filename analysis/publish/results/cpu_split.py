"""User and system time apart: seed 001 reported both for hardened_malloc's kernel build (1.35x the user
time, 1.9x the system time of glibc's), so its workloads' trials are compared on each as well as on wall time;
and seed 000's perl cases, whose system time is the Linux kernel's part of OpenBSD's malloc here (the seed's
runs on OpenBSD show none), so that the part that depends on the operating system stands apart."""
import pandas as pd

from analysis.errors import HeapcostError

WORKLOADS = ("compile", "build", "linux-build")
PREFIXES = ("perl-",)  # seed 000's cases: perl-strcat, perl-append-*, perl-preextend, perl-array
METRICS = ("user_s", "sys_s")


def comparisons_by_run(time_runs, baseline: str, against, metrics, rows_of) -> dict:
    """metric -> every run's comparisons with its own baseline (rows with run_id), each made by `against`
    (results.against) over the trials `rows_of(run_table, metric)` keeps (None or empty: the run has none)."""
    out = {}
    for metric in metrics:
        parts = []
        for rt in time_runs:
            table = rows_of(rt, metric)
            if table is None or table.empty or baseline not in set(table["allocator"].astype(str)):
                continue
            try:
                parts.append(against(table, baseline, metric).results.assign(run_id=rt.run_id))
            except HeapcostError:
                continue
        out[metric] = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    return out


def cells(time_runs, baseline: str, against) -> dict:
    """metric -> every run's comparisons with its own baseline on WORKLOADS (rows with run_id)."""
    return comparisons_by_run(time_runs, baseline, against, METRICS,
                              lambda rt, metric: rt.table[split(rt.table["workload"])])


def split(workloads: pd.Series) -> pd.Series:
    """Which workloads are compared on user and system time apart."""
    names = workloads.astype(str)
    return names.isin(WORKLOADS) | names.str.startswith(PREFIXES)
