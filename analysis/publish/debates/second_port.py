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

from analysis.publish.debates import pool
from analysis.publish.debates.security_side import SECOND_PORTS

COLUMNS = ["seed", "configuration", "port_configuration", "workload", "processor", "machine", "run_id", "ratio",
           "ci_low", "ci_high", "first_ratio", "first_mean90_low", "first_mean90_high", "first_next_one_build_low",
           "first_next_one_build_high", "inside"]
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


def check(per_host: pd.DataFrame, cells: pd.DataFrame | None, runs_dir: Path | None) -> pd.DataFrame:
    """The rows above, from the debates' per-kind answers (results_debate_hosts.csv), the wall-time comparisons
    (to find the runs that measured a second port) and the runs folder (their pairs.csv, read through pool)."""
    if runs_dir is None or cells is None or not len(per_host) or not len(cells):
        return pd.DataFrame(columns=COLUMNS)
    kinds, machines = pool._processors(Path(runs_dir)), pool._machines(Path(runs_dir))
    out = []
    for (seed, configuration, workload), answers in per_host.groupby(["seed", "configuration", "workload"], sort=True):
        ports = _ported(configuration)
        if ports is None:
            continue
        runs = sorted(set(cells.loc[cells["allocator"].astype(str).isin(ports)
                                    & (cells["workload"].astype(str) == str(workload)), "run_id"].astype(str)))
        for run_id in runs:
            d = pool._direct_at(Path(runs_dir) / run_id / "pairs.csv", ports[0], ports[1], str(workload))
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
                        "run_id": run_id, "ratio": ratio, "ci_low": float(np.exp(low)), "ci_high": float(np.exp(high)),
                        "first_ratio": _number(row, "ratio"), "first_mean90_low": _number(row, "mean90_low"),
                        "first_mean90_high": _number(row, "mean90_high"), "first_next_one_build_low": lo1,
                        "first_next_one_build_high": hi1,
                        "inside": bool(lo1 <= ratio <= hi1) if np.isfinite(lo1) and np.isfinite(hi1) else None})
    return pd.DataFrame(out, columns=COLUMNS)
