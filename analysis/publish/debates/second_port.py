"""A debated pair timed again as its second Linux port (security_side.SECOND_PORTS: seed 003's pair, whose first
port's compatibility layer could not be rebuilt byte for byte), beside the first port's published answer on the
same kind. The second port stands in for the first in the probes (security_side); this says whether its time
agrees with the answer the probes now stand beside.

One row per debate cell and run that timed the two second ports in turn with each other (direct lockstep pairs):
the run's ratio with its 95% interval, and the first port's answer on the run's kind (results_debate_hosts.csv):
its ratio, the 90% interval of the kind's mean, and the 95% interval for the estimate one build gives on a new
machine of the kind (pool.NEXT_INTERVAL, one build). A second port is one build of each side on one machine, so
that last interval is the promise it is a case of; `inside` says whether it holds."""
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.contract import dataset
from analysis.harness.allocators.catalog import layout_of
from analysis.publish.debates import pool
from analysis.publish.debates.security_side import SECOND_PORTS

COLUMNS = ["seed", "configuration", "port_configuration", "workload", "processor", "machine", "run_id", "layout",
           "ratio", "ci_low", "ci_high", "instructions_ratio", "first_ratio", "first_mean90_low", "first_mean90_high",
           "first_next_one_build_low", "first_next_one_build_high", "inside"]
CONFIDENCE = 0.95


def _ported(configuration: str) -> tuple[str, str] | None:
    """(second port of `with`, of `without`) for a 'with / without' pair whose both sides have one, else None."""
    with_, _, without = (side.strip() for side in str(configuration).partition(" / "))
    if with_ in SECOND_PORTS and without in SECOND_PORTS:
        return SECOND_PORTS[with_], SECOND_PORTS[without]
    return None


def _number(row: pd.Series, key: str) -> float:
    value = pd.to_numeric(row.get(key, np.nan), errors="coerce")
    return float(value) if pd.notna(value) else np.nan


def _instructions(per_free: pd.DataFrame | None, with_: str, without: str, workload: str) -> float:
    """with/without in callgrind's instructions on the workload (exact counts, one run each), or NaN."""
    if per_free is None or not len(per_free):
        return np.nan
    mine = per_free[per_free["workload"].astype(str) == str(workload)].set_index("allocator")["instructions_per_free"]
    if with_ not in mine.index or without not in mine.index:
        return np.nan
    return float(mine.loc[with_]) / float(mine.loc[without])


def check(per_host: pd.DataFrame, cells: pd.DataFrame | None, runs_dir: Path | None,
          per_free: pd.DataFrame | None = None) -> pd.DataFrame:
    """The rows above, from the debates' per-kind answers (results_debate_hosts.csv), the wall-time comparisons
    (to find the runs that measured a second port), the dataset or its runs folder (their pairs.csv, read
    through pool) and callgrind's counts per free (Results.per_free), a row per layout build the run timed
    (`<id>_l<N>`, the same source linked or aligned otherwise: one more sample of where the code lies)."""
    if runs_dir is None or cells is None or not len(per_host) or not len(cells):
        return pd.DataFrame(columns=COLUMNS)
    ds = dataset.load(runs_dir)
    kinds, machines = pool._processors(ds), pool._machines(ds)
    source = cells["allocator"].astype(str).map(layout_of)  # (the allocator it is a build of, its layout)
    built, layout = source.map(lambda s: s[0]), source.map(lambda s: s[1])
    out = []
    for (seed, configuration, workload), answers in per_host.groupby(["seed", "configuration", "workload"], sort=True):
        ports = _ported(configuration)
        if ports is None:
            continue
        mine = cells[built.isin(ports) & (cells["workload"].astype(str) == str(workload))]
        measured = sorted({(str(r), int(n)) for r, n in zip(mine["run_id"], layout.loc[mine.index])})
        for run_id, n in measured:
            suffix = "" if n == 1 else f"_l{n}"
            d = pool._direct_at(ds, run_id, ports[0] + suffix, ports[1] + suffix, str(workload))
            if d is None:
                continue
            low, high = d.interval(CONFIDENCE)
            kind = kinds.get(run_id, "")
            first = answers[answers["processor"] == kind]
            row = first.iloc[0] if len(first) else pd.Series(dtype=object)
            lo1, hi1 = _number(row, "next_one_build_low"), _number(row, "next_one_build_high")
            ratio = float(np.exp(d.estimate))
            out.append({"seed": seed, "configuration": configuration, "port_configuration": " / ".join(ports),
                        "workload": workload, "processor": kind, "machine": machines.get(run_id, ""),
                        "run_id": run_id, "layout": n, "ratio": ratio, "ci_low": float(np.exp(low)),
                        "ci_high": float(np.exp(high)),
                        "instructions_ratio": _instructions(per_free, ports[0] + suffix, ports[1] + suffix, workload),
                        "first_ratio": _number(row, "ratio"), "first_mean90_low": _number(row, "mean90_low"),
                        "first_mean90_high": _number(row, "mean90_high"), "first_next_one_build_low": lo1,
                        "first_next_one_build_high": hi1,
                        "inside": bool(lo1 <= ratio <= hi1) if np.isfinite(lo1) and np.isfinite(hi1) else None})
    return pd.DataFrame(out, columns=COLUMNS)


def summary(table: pd.DataFrame) -> dict:
    """The numbers the paper states: rows checked and held, whether two layout builds of one run and workload
    read intervals that do not overlap (where the code lies moves the ratio beyond each build's own noise), and
    whether a build counted fewer instructions with the defence yet took longer (its interval above 1)."""
    if not len(table):
        return {"checked": 0, "inside": 0, "layouts_apart": False, "fewer_instructions_slower": False}
    apart = False
    for _, g in table.groupby(["run_id", "workload"]):
        if len(g) >= 2 and float(g["ci_low"].max()) > float(g["ci_high"].min()):
            apart = True
    instructions = pd.to_numeric(table["instructions_ratio"], errors="coerce")
    return {"checked": int(len(table)), "inside": int(table["inside"].fillna(False).astype(bool).sum()),
            "layouts_apart": bool(apart),
            "fewer_instructions_slower": bool(((instructions < 1) & (table["ci_low"].astype(float) > 1)).any())}
