"""Simulated trials tables with a known true ratio, to validate the estimators.

The noise model follows what the seeds ran into: a clock that drops into a slow regime for a while
(the clock probe sees it), slow drift over the run and interference from other processes (the
probe does not see them), heavy-tailed run-to-run noise and rare gross outliers (003's 44.20 s among
32 s runs). All allocators share the noise distribution, so the true ratio of typical times is
exactly the multiplicative effect put in.
"""
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis.contract.schema import TRIAL_COLUMNS, usable_trials


@dataclass(frozen=True)
class NoiseModel:
    sigma: float = 0.01  # scale of the run-to-run noise of log(wall)
    tail_df: float | None = 3.0  # Student t degrees of freedom; None: normal
    clock_drop_prob: float = 0.04  # per trial, chance to enter the slow clock regime
    clock_recover_prob: float = 0.2  # per trial, chance to leave it
    clock_drop_factor: float = 1.3  # probe and CPU-bound work slow down by this factor
    clock_sensitivity: float = 1.0  # d log(wall) / d log(probe) for the workload
    probe_sigma: float = 0.003  # the probe's own noise (log scale)
    drift: float = 0.03  # log amplitude of slow drift over the run, unseen by the probe
    interference_prob: float = 0.05  # unseen slowdowns of mean +8%
    interference_mean: float = 0.08
    outlier_prob: float = 0.02  # gross outliers: x1.2 to x1.5
    rss_sigma: float = 0.002


CLEAN = NoiseModel(tail_df=None, clock_drop_prob=0.0, drift=0.0, interference_prob=0.0,
                   outlier_prob=0.0)
NOISY = NoiseModel()


@dataclass(frozen=True)
class Scenario:
    ratios: dict = field(default_factory=lambda: {"base": 1.0, "hardened": 1.05})
    workloads: dict = field(default_factory=lambda: {"w1": 0.5})  # id -> baseline seconds
    n_blocks: int = 15
    warmup_blocks: int = 1
    failure_prob: float = 0.0
    rss_ratios: dict | None = None
    noise: NoiseModel = NOISY
    order: str = "interleaved"  # or "sequential": all runs of one allocator, then the next (hyperfine)
    noise_scale: dict | None = None  # allocator -> multiplier of the run-to-run noise


def simulate_trials(scenario: Scenario, seed: int) -> pd.DataFrame:
    """A trials table (docs/design.md columns): blocks of every (workload, allocator) in random order."""
    rng = np.random.default_rng(seed)
    nm = scenario.noise
    pairs = [(w, a) for w in scenario.workloads for a in scenario.ratios]
    blocks = scenario.warmup_blocks + scenario.n_blocks
    if scenario.order == "sequential":
        order = np.repeat(np.arange(len(pairs)), blocks)
        block = np.tile(np.arange(blocks), len(pairs))
    else:
        order = np.concatenate([rng.permutation(len(pairs)) for _ in range(blocks)])
        block = np.repeat(np.arange(blocks), len(pairs))
    n = order.size
    workload = np.array([pairs[i][0] for i in order], dtype=object)
    allocator = np.array([pairs[i][1] for i in order], dtype=object)

    slow = np.zeros(n, dtype=bool)
    state = False
    u = rng.random(n)
    for i in range(n):
        state = (u[i] >= nm.clock_recover_prob) if state else (u[i] < nm.clock_drop_prob)
        slow[i] = state
    clock = np.where(slow, np.log(nm.clock_drop_factor), 0.0)

    t = np.linspace(0.0, 1.0, n)
    drift = nm.drift * (0.6 * t + 0.4 * np.sin(2 * np.pi * 1.5 * t))
    if nm.tail_df is None:
        core = rng.standard_normal(n) * nm.sigma
    else:
        core = rng.standard_t(nm.tail_df, n) * nm.sigma
    if scenario.noise_scale:
        core = core * np.array([scenario.noise_scale.get(a, 1.0) for a in allocator])
    interference = np.where(rng.random(n) < nm.interference_prob,
                            rng.exponential(nm.interference_mean, n), 0.0)
    outlier = np.where(rng.random(n) < nm.outlier_prob, np.log(rng.uniform(1.2, 1.5, n)), 0.0)
    warm = block < scenario.warmup_blocks
    base = np.array([scenario.workloads[w] for w in workload])
    effect = np.array([scenario.ratios[a] for a in allocator])
    log_wall = (np.log(base * effect) + nm.clock_sensitivity * clock + drift + core + interference
                + outlier + np.where(warm, 0.1, 0.0))
    wall = np.exp(log_wall)

    probe_base = 0.002
    before = probe_base * np.exp(clock + rng.standard_normal(n) * nm.probe_sigma)
    after = probe_base * np.exp(clock + rng.standard_normal(n) * nm.probe_sigma)

    rss_ratios = scenario.rss_ratios or {a: 1.0 for a in scenario.ratios}
    rss = np.array([rss_ratios[a] for a in allocator]) * 50_000 * np.exp(
        rng.standard_normal(n) * nm.rss_sigma)
    status = np.where(rng.random(n) < scenario.failure_prob, "crashed", "ok")
    df = pd.DataFrame({
        "run_id": f"sim-{seed}",
        "seq": np.arange(n),
        "block": block,
        "warmup": warm.astype(int),
        "workload": workload.astype(str),
        "allocator": allocator.astype(str),
        "scale": 1.0,
        "status": status,
        "reason": "",
        "exit_code": np.where(status == "ok", 0, -1),
        "signal": np.where(status == "ok", 0, 11),
        "wall_s": wall,
        "user_s": wall * 0.9,
        "sys_s": wall * 0.08,
        "maxrss_kb": np.round(rss).astype(int),
        "minflt": 1000,
        "majflt": 0,
        "nvcsw": 1,
        "nivcsw": 1,
        "clock_probe_s": (before + after) / 2,
        "probe_before_s": before,
        "probe_after_s": after,
        "malloc_lib": "sim",
        "env_pad": 0,
        "loadavg1": 0.0,
        "started_utc": "",
        "other_cpu_s": 0.0,
        "steal_s": 0.0,
        "interfered": 0,
        "cpu_other_s": 0.0,
    })
    return df.reindex(columns=TRIAL_COLUMNS)  # columns no simulated trial has (a server's metrics) stay empty


def true_ratios(scenario: Scenario, baseline: str) -> dict:
    """(workload, allocator) -> the true ratio of typical wall times against the baseline."""
    return {(w, a): scenario.ratios[a] / scenario.ratios[baseline]
            for w in scenario.workloads for a in scenario.ratios if a != baseline}


def coverage_study(scenario: Scenario, replications: int, seed: int, baseline: str = "base",
                   allocator: str | None = None) -> pd.DataFrame:
    """One row per simulated dataset: the truth and the intervals of our method (compare) and of the
    naive ones (Welch on raw times, hyperfine's propagated spread), all as ratios."""
    from analysis.stats import compare
    from analysis.stats import estimators as stats

    target = allocator or next(a for a in scenario.ratios if a != baseline)
    truth = true_ratios(scenario, baseline)
    rows = []
    for r in range(replications):
        trials = simulate_trials(scenario, seed + r)
        res = compare.compare(trials, baseline).results
        for _, row in res[res["allocator"] == target].iterrows():
            used = usable_trials(trials)
            used = used[used["workload"] == row["workload"]]
            a = used.loc[used["allocator"] == target, "wall_s"].to_numpy()
            b = used.loc[used["allocator"] == baseline, "wall_s"].to_numpy()
            w_ratio, w_lo, w_hi = stats.welch_ratio_interval(a, b)
            h_ratio, h_lo, h_hi = stats.hyperfine_ratio_interval(a, b)
            rows.append({
                "replication": r, "workload": row["workload"], "allocator": target,
                "truth": truth[(row["workload"], target)], "n": row["n"],
                "ratio": row["ratio"], "ci_low": row["ci_low"], "ci_high": row["ci_high"],
                "adjusted": row["adjusted"], "ci_low_unadjusted": row["ci_low_unadjusted"],
                "ci_high_unadjusted": row["ci_high_unadjusted"],
                "welch_ratio": w_ratio, "welch_low": w_lo, "welch_high": w_hi,
                "hyperfine_ratio": h_ratio, "hyperfine_low": h_lo, "hyperfine_high": h_hi,
            })
    out = pd.DataFrame(rows)
    out["covered"] = (out["ci_low"] <= out["truth"]) & (out["truth"] <= out["ci_high"])
    out["covered_unadjusted"] = ((out["ci_low_unadjusted"] <= out["truth"])
                                 & (out["truth"] <= out["ci_high_unadjusted"]))
    out["welch_covered"] = (out["welch_low"] <= out["truth"]) & (out["truth"] <= out["welch_high"])
    out["hyperfine_covered"] = ((out["hyperfine_low"] <= out["truth"])
                                & (out["truth"] <= out["hyperfine_high"]))
    # half-widths on the relative scale, comparable between log-scale and raw-scale intervals
    out["halfwidth"] = (np.log(out["ci_high"]) - np.log(out["ci_low"])) / 2
    out["welch_halfwidth"] = (out["welch_high"] - out["welch_low"]) / 2 / out["welch_ratio"]
    out["hyperfine_halfwidth"] = ((out["hyperfine_high"] - out["hyperfine_low"]) / 2
                                  / out["hyperfine_ratio"])
    return out


SCENARIOS = {
    "noisy, 8 runs per arm": Scenario(n_blocks=8),
    "noisy, 15 runs per arm": Scenario(n_blocks=15),
    "noisy, 30 runs per arm": Scenario(n_blocks=30),
    "clean Gaussian, 15 runs per arm": Scenario(noise=CLEAN),
    "noisy, 15 runs, sequential order": Scenario(order="sequential"),
}
METHODS = {"heapcost (compare)": ("covered", "halfwidth"),
           "Welch t on raw times": ("welch_covered", "welch_halfwidth"),
           "hyperfine +- propagation": ("hyperfine_covered", "hyperfine_halfwidth")}


def coverage_summary(replications: int, seed: int, scenarios: dict | None = None,
                     paired_scenarios: dict | None = None) -> pd.DataFrame:
    """Coverage of the true ratio and mean relative half-width, per scenario and method: the trials
    scenarios (`SCENARIOS`), then this machine's speed regimes under lockstep pairs (`PAIRED_SCENARIOS`)."""
    rows = []
    for i, (name, sc) in enumerate((scenarios or SCENARIOS).items()):
        study = coverage_study(sc, replications, seed + 100_000 * i)
        for method, (cov, hw) in METHODS.items():
            rows.append(_coverage_row(name, method, study[cov], study[hw], study["welch_halfwidth"]))
    paired_scenarios = PAIRED_SCENARIOS if paired_scenarios is None else paired_scenarios
    for i, (name, (ratio, n_pairs)) in enumerate(paired_scenarios.items()):
        study = paired_coverage(ratio, n_pairs, replications, seed + 100_000 * (i + 50))
        for method, (cov, hw) in PAIRED_METHODS.items():
            rows.append(_coverage_row(name, method, study[cov], study[hw], study["welch_halfwidth"]))
    return pd.DataFrame(rows)


def _coverage_row(scenario, method, covered, halfwidth, welch_halfwidth) -> dict:
    p = float(np.mean(covered))
    return {"scenario": scenario, "method": method, "replications": int(len(covered)), "coverage": p,
            "coverage_se": float(np.sqrt(p * (1 - p) / len(covered))), "mean_halfwidth": float(np.mean(halfwidth)),
            "halfwidth_vs_welch": float(np.mean(np.asarray(halfwidth) / np.asarray(welch_halfwidth)))}


# ------------------------------------------------------------------ the speed regimes of this machine's vCPUs
@dataclass(frozen=True)
class RegimeNoise:
    """What was measured on the 2-vCPU machine (docs/design.md, "The timing protocol"): each CPU switches
    between two speed states `factor` apart, staying in each for an exponential time of mean `dwell_s`,
    independently of the other CPU. A lockstep pair shares its CPU's state (turns of `chunk_s`); what a
    switch inside one turn leaves is simulated. Each pair of processes has its own layout effect
    (log-normal, `layout_sd`), and each process a little noise of its own (`jitter_sd`); rarely another
    process preempts one of the two (`interference_prob`, +2..15% to that process)."""
    factor: float = 1.7
    dwell_s: float = 0.5
    chunk_s: float = 0.001
    layout_sd: float = 0.012
    jitter_sd: float = 0.002
    interference_prob: float = 0.02


def regime_slow_fraction(starts, ends, dwell_s: float, rng) -> np.ndarray:
    """Fraction of each interval [start, end) one CPU spends in its slow state (two states, exponential
    dwell times, random initial state): one timeline for all intervals, integrated exactly."""
    horizon = float(np.max(ends)) + dwell_s
    n = int(horizon / dwell_s * 2) + 16
    edges = np.concatenate([[0.0], np.cumsum(rng.exponential(dwell_s, n))])
    while edges[-1] < horizon:
        edges = np.concatenate([edges, edges[-1] + np.cumsum(rng.exponential(dwell_s, n))])
    slow = (np.arange(edges.size - 1) + rng.integers(2)) % 2 == 1
    cum = np.concatenate([[0.0], np.cumsum(np.where(slow, np.diff(edges), 0.0))])  # slow time up to each edge
    starts, ends = np.asarray(starts, dtype=float), np.asarray(ends, dtype=float)
    s0, s1 = np.interp(starts, edges, cum), np.interp(ends, edges, cum)
    return (s1 - s0) / np.maximum(ends - starts, 1e-12)


def simulate_pairs(ratio: float, n_pairs: int, seed: int, *, active_s: float = 0.05,
                   noise: RegimeNoise = RegimeNoise(), workload: str = "w1", baseline: str = "base",
                   other: str = "hardened") -> pd.DataFrame:
    """A pairs table (the columns compare_pairs reads) of lockstep pairs on one CPU, one after another:
    A (baseline) does `active_s` of work at full speed, B `ratio` times that."""
    rng = np.random.default_rng(seed)
    work_a = np.full(n_pairs, active_s)
    work_b = work_a * ratio
    # the pair takes both processes' time (they share one CPU), plus a start-up gap
    wall = (work_a + work_b) * (1 + (noise.factor - 1) * 0.5) + 0.004
    starts = np.concatenate([[0.0], np.cumsum(wall)[:-1]])
    frac = regime_slow_fraction(starts, starts + wall, noise.dwell_s, rng)
    speed = 1 + (noise.factor - 1) * frac  # both see the same slow fraction, turn by turn
    # a state switch inside one turn: that turn alone runs at the other speed for up to one chunk
    switches = rng.poisson(wall / noise.dwell_s)
    leak = switches * rng.uniform(-1, 1, n_pairs) * (noise.factor - 1) * noise.chunk_s / 2
    layout = rng.standard_normal(n_pairs) * noise.layout_sd
    hit = rng.random((2, n_pairs)) < noise.interference_prob
    extra = np.where(hit, np.log(rng.uniform(1.02, 1.15, (2, n_pairs))), 0.0)
    log_a = np.log(work_a * speed) + rng.standard_normal(n_pairs) * noise.jitter_sd + extra[0]
    log_b = (np.log(work_b * speed) + layout + leak / (work_b * speed)
             + rng.standard_normal(n_pairs) * noise.jitter_sd + extra[1])
    return pd.DataFrame({"run_id": f"sim-pairs-{seed}", "seq": np.arange(n_pairs), "block": np.arange(n_pairs),
                         "warmup": 0, "workload": workload, "scale": 1.0, "allocator_a": baseline,
                         "allocator_b": other, "first": np.where(np.arange(n_pairs) % 2, "b", "a"),
                         "status": "ok", "active_a_s": np.exp(log_a), "active_b_s": np.exp(log_b),
                         "interfered": hit.any(axis=0).astype(int)})


# lockstep pairs under this machine's two speed regimes (RegimeNoise): (true ratio, pairs); 2.5% is Mozilla's
# poisoning cost (seed 002)
PAIRED_SCENARIOS = {
    "regimes, 20 lockstep pairs, A/A": (1.0, 20),
    "regimes, 20 lockstep pairs, +2.5%": (1.025, 20),
    "regimes, 40 lockstep pairs, +2.5%": (1.025, 40),
}
PAIRED_METHODS = {"heapcost (paired)": ("covered", "halfwidth"),
                  "Welch t on raw times": ("welch_covered", "welch_halfwidth")}


def paired_coverage(ratio: float, n_pairs: int, replications: int, seed: int,
                    noise: RegimeNoise = RegimeNoise()) -> pd.DataFrame:
    """One row per simulated lockstep campaign: the truth, the paired interval, whether it covers; and, on
    the same processes' times taken unpaired, a Welch interval (what the pairing buys)."""
    from analysis.stats import estimators as stats
    from analysis.stats import paired

    rows = []
    for r in range(replications):
        pairs = simulate_pairs(ratio, n_pairs, seed + r, noise=noise)
        res = paired.compare_pairs(pairs).iloc[0]
        w_ratio, w_lo, w_hi = stats.welch_ratio_interval(pairs["active_b_s"], pairs["active_a_s"])
        rows.append({"replication": r, "truth": ratio, "ratio": res["ratio"], "ci_low": res["ci_low"],
                     "ci_high": res["ci_high"], "halfwidth": res["halfwidth"],
                     "welch_low": w_lo, "welch_high": w_hi, "welch_halfwidth": (w_hi - w_lo) / 2 / w_ratio})
    out = pd.DataFrame(rows)
    out["covered"] = (out["ci_low"] <= ratio) & (ratio <= out["ci_high"])
    out["welch_covered"] = (out["welch_low"] <= ratio) & (ratio <= out["welch_high"])
    return out
