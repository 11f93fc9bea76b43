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


# ---- the machine level ---------------------------------------------------------------------------------------
#
# Simulated datasets in which machines of one kind differ by a known spread: the target kind measured on 1, 2,
# 3 or 5 machines, beside OTHER_KINDS kinds measured on two machines each (the cells the between-machine spread
# is estimated from jointly, as in the dataset), every machine running the same LAYOUT_BUILDS layout builds
# (their offsets shared by the kind's machines: one build is one library, whichever machine runs it) twice.
# Each kind is answered as the published debates are (pool.per_host with the joint Spread). Coverage of (a) the
# 90% interval of the kind's mean, which should hold the kind's true mean in at least 90% of datasets, and (b) the
# 95% next-machine interval, which should hold the estimate a further machine of the kind gives under the same
# design in at least 95%. And recovery: over datasets of 10 kinds x 3 machines, how often the 95% Q-profile
# interval of the between-machine variance holds the true one (recovered when at least 90%).
OTHER_KINDS = 3
LAYOUT_BUILDS = 5
MACHINE_COUNTS = (1, 2, 3, 5)
MACHINE_TAUS = (0.0, 0.005, 0.01, 0.02)
MACHINE_COLUMNS = ["machines", "tau_machine_percent", "replications", "mean_coverage", "mean_low", "mean_high",
                   "next_coverage", "next_low", "next_high", "median_next_halfwidth_percent"]
RECOVERY_COLUMNS = ["kinds", "machines", "tau_machine_percent", "replications", "held", "percent", "low", "high"]


def _kind_runs(rng: np.random.Generator, kind: str, mu: float, machines: int, tau_machine: float,
               builds: int = LAYOUT_BUILDS, runs_per_build: int = RUNS_PER_BUILD, extra: int = 0):
    """Runs of one kind on `machines` machines (and `extra` more, returned apart: machines not yet measured)."""
    build_offsets = rng.normal(0, TAU_BUILD, builds)
    frames = []
    for m in range(machines + extra):
        u = rng.normal(0, tau_machine)
        rows = []
        for b in range(builds):
            for r in range(runs_per_build):
                se = WITHIN_SE * rng.uniform(0.5, 1.5)
                rows.append({"estimate": mu + u + build_offsets[b] + rng.normal(0, TAU_RUN) + rng.normal(0, se),
                             "se": se, "df": 1e6, "build": f"{kind}b{b}", "machine": f"{kind}m{m}",
                             "run_id": f"{kind}m{m}b{b}r{r}"})
        frames.append(pd.DataFrame(rows))
    runs = pd.concat(frames, ignore_index=True).assign(processor=kind, host=kind, superseded=False, seed="sim",
                                                        configuration="c", workload="w")
    measured = runs[runs["machine"].isin({f"{kind}m{m}" for m in range(machines)})]
    return measured, runs[~runs.index.isin(measured.index)]


def machine_level_coverage(replications: int, seed: int, machine_counts=MACHINE_COUNTS,
                           taus=MACHINE_TAUS) -> pd.DataFrame:
    """One row per number of machines of the target kind and true between-machine spread: the coverage of the
    kind's 90% mean interval and of its 95% next-machine interval, each with its Wilson 95% interval."""
    from analysis.stats import prediction

    rows = []
    for i, n_machines in enumerate(machine_counts):
        for j, tau in enumerate(taus):
            rng = np.random.default_rng([seed, 7, i, j])
            mean_held = next_held = 0
            halfwidths = []
            for _ in range(replications):
                mu = math.log(COST)
                target, later = _kind_runs(rng, "T", mu, n_machines, tau, extra=1)
                others = [_kind_runs(rng, f"O{k}", math.log(rng.uniform(1.0, 1.2)), 2, tau)[0]
                          for k in range(OTHER_KINDS)]
                every = pd.concat([target, *others], ignore_index=True)
                spread = prediction.machine_spread(pool.machine_cells(pool.machine_estimates(every)))
                h = pool.per_host(target, MARGIN, RULE, {}, spread).iloc[0]
                mean_held += h["mean90_low"] <= math.exp(mu) <= h["mean90_high"]
                new = pool.machine_estimates(later).iloc[0]
                next_held += h["next_low"] <= new["ratio"] <= h["next_high"]
                halfwidths.append((math.log(h["next_high"]) - math.log(h["next_low"])) / 2)
            rows.append({"machines": n_machines, "tau_machine_percent": f"{100 * tau:g}", "replications": replications,
                         "mean_coverage": mean_held / replications,
                         **dict(zip(("mean_low", "mean_high"), wilson(mean_held, replications))),
                         "next_coverage": next_held / replications,
                         **dict(zip(("next_low", "next_high"), wilson(next_held, replications))),
                         "median_next_halfwidth_percent": f"{100 * math.expm1(float(np.median(halfwidths))):.2f}"})
    return pd.DataFrame(rows, columns=MACHINE_COLUMNS)


def spread_recovery(replications: int, seed: int, kinds: int = 10, machines: int = 3,
                    taus=MACHINE_TAUS[1:]) -> pd.DataFrame:
    """How often the 95% interval of the jointly estimated between-machine variance holds the truth, over
    datasets of `kinds` kinds x `machines` machines (each machine's estimate with a within-machine error of the
    published designs' size)."""
    from analysis.stats import prediction

    rows = []
    for j, tau in enumerate(taus):
        rng = np.random.default_rng([seed, 11, j])
        held = 0
        for _ in range(replications):
            cells = {}
            for k in range(kinds):
                u = rng.normal(0, tau, machines)
                se = WITHIN_SE * rng.uniform(0.5, 1.5, machines)
                cells[("sim", k)] = [(float(u[m] + rng.normal(0, se[m])), float(se[m])) for m in range(machines)]
            s = prediction.machine_spread(cells)
            held += s.low <= tau * tau <= s.high
        lo, hi = wilson(held, replications)
        rows.append({"kinds": kinds, "machines": machines, "tau_machine_percent": f"{100 * tau:g}",
                     "replications": replications, "held": held, "percent": f"{100 * held / replications:.0f}",
                     "low": f"{100 * lo:.0f}", "high": f"{100 * hi:.0f}"})
    return pd.DataFrame(rows, columns=RECOVERY_COLUMNS)
