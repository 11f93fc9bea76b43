"""Runs of one debate cell on one machine of a kind, with a known ratio, layout offsets and run noise: the
synthetic data the machine level of the pool is tested on."""
import math

import pandas as pd


def machine_runs(kind: str, machine: str, ratio: float, rng, builds=5, runs_per_build=2, se=0.003,
                 tau_build=0.003, cell="w") -> pd.DataFrame:
    offsets = rng.normal(0, tau_build, builds)
    rows = [{"seed": "002", "configuration": "x / y", "workload": cell, "run_id": f"{machine}-{cell}-{b}-{r}",
             "host": kind, "processor": kind, "machine": machine, "build": f"b{b}",
             "estimate": math.log(ratio) + offsets[b] + rng.normal(0, se), "se": se, "df": 60.0, "superseded": False}
            for b in range(builds) for r in range(runs_per_build)]
    return pd.DataFrame(rows)
