"""The debates' per-host answers and their verdict across hosts on simulated debates with a known truth: how
often each host's 95% interval holds that host's own ratio, and how often the intersection-union verdict is
wrong, for 2-5 hosts and 2-5 layout builds per host, with and without a host x configuration interaction.

Each simulated host has its own true ratio; on it, every layout build has its own offset (tau_build), every run
its own (tau_run), and every run's estimate its within-run standard error. The hosts are answered exactly as
the published debates are (pool.per_host, pool.across_hosts), without a variance floor.

Scenarios (truth per host, margin 2%, rule cost_at_most):
- `uniform`: the defence costs 6% on every host. A verdict is wrong when it says "no larger than the margin"
  on every host, or that the answer depends on the host (some host found it no larger); "not decided" is no
  error, only a lack of power. The power is the share saying "larger than 2% on every host".
- `interaction`: 6% on half the hosts (rounded up), nothing on the others. Any "on every host" verdict is
  wrong; the power is the share saying "depends on the host".
"""
import math

import numpy as np
import pandas as pd

from analysis.publish.debates import pool
from analysis.stats import equivalence
from analysis.stats.primitives import wilson
from analysis.stats.random_effects import simulate

MARGIN = 0.02
RULE = "cost_at_most"
COST = 1.06
# the published designs: two runs per layout build on each host
RUNS_PER_BUILD = 2
TAU_BUILD, TAU_RUN, WITHIN_SE = 0.01, 0.005, 0.004
SCENARIOS = ("uniform", "interaction")
COLUMNS = ["scenario", "cost_percent", "margin_percent", "hosts", "builds", "replications", "host_intervals",
           "coverage", "coverage_low",
           "coverage_high", "every_host", "depends", "verdict_error", "error_low", "error_high", "power",
           "power_low", "power_high"]


def truths(scenario: str, hosts: int) -> dict:
    """{host name: its true ratio} of a scenario."""
    if scenario == "uniform":
        return {f"H{i}": COST for i in range(hosts)}
    if scenario == "interaction":
        return {f"H{i}": COST if i < math.ceil(hosts / 2) else 1.0 for i in range(hosts)}
    raise ValueError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")


def simulated_debate(rng: np.random.Generator, truth: dict, builds: int, runs_per_build: int = RUNS_PER_BUILD,
                     tau_build: float = TAU_BUILD, tau_run: float = TAU_RUN, se: float = WITHIN_SE) -> pd.DataFrame:
    """Per-run estimates of one debate cell on every host of `truth`, in the columns pool.per_host reads."""
    frames = []
    for host, ratio in truth.items():
        one = simulate(rng, mu=math.log(ratio), hosts=1, builds=builds, runs_per_cell=runs_per_build, tau_host=0.0,
                       tau_build=tau_build, tau_run=tau_run, se=se)
        frames.append(one.assign(processor=host, host=host, build=host + one["build"], df=1e6, superseded=False,
                                 run_id=[f"{host}-{i}" for i in range(len(one))], seed="sim", configuration="c",
                                 workload="w"))
    return pd.concat(frames, ignore_index=True)


def _wrong(scenario: str, outcome: str) -> bool:
    if scenario == "uniform":
        return outcome.startswith(equivalence.NO_LARGER) or outcome == equivalence.DEPENDS
    return outcome.endswith(equivalence.EVERY_HOST)


def design_coverage(replications: int, seed: int, hosts=(2, 3, 5), builds=(2, 5),
                    scenarios=SCENARIOS) -> pd.DataFrame:
    """One row per scenario, number of hosts and builds per host: the per-host intervals' coverage of their own
    host's truth, the rates of each verdict across hosts and of a wrong one, each with its Wilson 95% interval."""
    rows = []
    for i, scenario in enumerate(scenarios):
        for j, n_hosts in enumerate(hosts):
            for k, n_builds in enumerate(builds):
                rng = np.random.default_rng([seed, i, j, k])
                truth = truths(scenario, n_hosts)
                covered = intervals = every = depends = wrong = 0
                for _ in range(replications):
                    answered = pool.per_host(simulated_debate(rng, truth, n_builds), MARGIN, RULE, {})
                    intervals += len(answered)
                    covered += int(sum(h.ci_low <= truth[h.processor] <= h.ci_high for h in answered.itertuples()))
                    outcome = pool.across_hosts(answered, MARGIN)[0]
                    every += outcome.endswith(equivalence.EVERY_HOST)
                    depends += outcome == equivalence.DEPENDS
                    wrong += _wrong(scenario, outcome)
                right = every if scenario == "uniform" else depends
                rows.append({"scenario": scenario, "cost_percent": f"{100 * (COST - 1):g}",
                             "margin_percent": f"{100 * MARGIN:g}", "hosts": n_hosts, "builds": n_builds,
                             "replications": replications,
                             "host_intervals": intervals, "coverage": covered / intervals,
                             **dict(zip(("coverage_low", "coverage_high"), wilson(covered, intervals))),
                             "every_host": every / replications, "depends": depends / replications,
                             "verdict_error": wrong / replications,
                             **dict(zip(("error_low", "error_high"), wilson(wrong, replications))),
                             "power": right / replications,
                             **dict(zip(("power_low", "power_high"), wilson(right, replications)))})
    return pd.DataFrame(rows, columns=COLUMNS)
