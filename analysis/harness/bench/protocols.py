"""The timing-protocol candidates of `make bench`, each given the same machine time on one pair.

- lockstep pairs: the campaign's default protocol (harness/timing/lockstep.py), estimated by stats/paired.py;
- pinned / unpinned short trials: an ordinary campaign at the smoke profile's scale (tens of ms a trial),
  estimated unpaired (stats/compare.py) and, for the pinned one, paired within blocks as well;
- ABBA quadruples: pinned short trials in the order A B B A (B A A B every other unit), the quadruple as
  the unit;
- ABBA with a reference probe: the same, each trial preceded by the workload at a quarter of its scale
  under the baseline on the same CPU (a probe that resembles the workload sees the speed regime; a spin
  loop barely does). Estimated with the probe as covariate, and with a two-regime classification of the
  probes as covariate.
Precision per machine-second = 1 / (half-width^2 x seconds): equal for two protocols that reach the same
half-width, one in half the time of the other, after four times the runs.
"""
import math
import random
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.contract.schema import usable_trials
from analysis.stats import compare, paired
from analysis.stats.estimators import Difference

REFERENCE_FRACTION = 0.25  # the reference probe: the workload at this share of the trial's scale

CAMPAIGN_CANDIDATES = {
    # name: Campaign keyword arguments (scale: the smoke profile's, tens of ms per trial here)
    "lockstep pairs": {"protocol": "lockstep", "pin": "auto"},
    "pinned short trials": {"protocol": "trials", "pin": "auto"},
    "unpinned short trials": {"protocol": "trials", "pin": "none"},
}
UNIT_CANDIDATES = ("ABBA quadruples", "ABBA with a reference probe")
CANDIDATES = (*CAMPAIGN_CANDIDATES, *UNIT_CANDIDATES)


def _summary(name, pair, workload, elapsed, diff, n: str, note: str = "") -> dict:
    lo, hi = diff.interval()
    hw = (hi - lo) / 2
    return {"candidate": name, "allocators": list(pair), "workload": workload, "elapsed_s": elapsed,
            "ratio": math.exp(diff.estimate), "ci": [math.exp(lo), math.exp(hi)], "halfwidth": hw, "n": n,
            "precision_per_s": 1 / (hw ** 2 * elapsed) if hw > 0 else float("inf"), "note": note}


def block_pairs(trials: pd.DataFrame, baseline: str, other: str) -> np.ndarray:
    """Per randomized block, log(other) - log(baseline): local pairing of an ordinary campaign's trials
    (both ran within one block of two trials, seconds apart at most)."""
    used = usable_trials(trials)
    wide = used.pivot_table(index="block", columns="allocator", values="wall_s", aggfunc="first")
    wide = wide.dropna(subset=[baseline, other])
    return np.log(wide[other].astype(float).to_numpy() / wide[baseline].astype(float).to_numpy())


def quadruple_differences(units: pd.DataFrame) -> pd.DataFrame:
    """Per unit: y = mean log time of B - mean log time of A; x = the same of their reference probes; r = the
    share of B's trials in the fast regime - A's share (regimes: the probes split at the widest gap of
    their sorted logs, when that gap is wider than the spread within either side)."""
    df = units[units["status"] == "ok"].copy()
    df["log_t"] = np.log(df["wall_s"].astype(float))
    has_ref = "ref_s" in df.columns and df["ref_s"].notna().all()
    if has_ref:
        df["log_ref"] = np.log(df["ref_s"].astype(float))
        df["fast"] = regime_of(df["log_ref"].to_numpy())
    out = []
    for unit, sub in df.groupby("unit"):
        a, b = sub[sub["side"] == "a"], sub[sub["side"] == "b"]
        if len(a) != 2 or len(b) != 2:
            continue  # a failed trial: the unit is incomplete
        row = {"unit": unit, "y": b["log_t"].mean() - a["log_t"].mean()}
        if has_ref:
            row["x"] = b["log_ref"].mean() - a["log_ref"].mean()
            row["r"] = b["fast"].mean() - a["fast"].mean()
        out.append(row)
    return pd.DataFrame(out)


def regime_of(log_ref: np.ndarray) -> np.ndarray:
    """1 for a probe in the fast regime, 0 in the slow one; all 0 when the probes show one regime."""
    x = np.asarray(log_ref, dtype=float)
    if x.size < 4:
        return np.zeros(x.size)
    s = np.sort(x)
    gaps = np.diff(s)
    k = int(np.argmax(gaps))
    cut = (s[k] + s[k + 1]) / 2
    low, high = s[: k + 1], s[k + 1:]
    spread = max(np.ptp(low) if low.size > 1 else 0.0, np.ptp(high) if high.size > 1 else 0.0)
    if low.size < 2 or high.size < 2 or gaps[k] <= spread / 2:
        return np.zeros(x.size)
    return (x < cut).astype(float)  # shorter probe time: the fast regime


def run_units(camp, baseline: str, other: str, workload: str, budget_s: float, *, reference: bool,
              seed: int) -> tuple[pd.DataFrame, float]:
    """ABBA quadruples of pinned trials until the budget is spent; (rows, elapsed seconds)."""
    from analysis.harness.process.trial import SpeedTrial, run_one

    rng = random.Random(seed)
    factor = camp.resolved[other].allocator.scale
    trials = {"a": camp.trial(baseline, workload, factor), "b": camp.trial(other, workload, factor)}
    ref = SpeedTrial(camp.resolved[baseline], camp.workloads[workload], trials["a"].scale * REFERENCE_FRACTION,
                     camp.env_target, "time", trials["a"].timeout_s)
    rows, started, unit = [], time.perf_counter(), 0
    while time.perf_counter() - started < budget_s:
        order = "abba" if unit % 2 == 0 else "baab"
        for pos, side in enumerate(order):
            ref_s = None
            if reference:
                ref_row = run_one(ref, None, 0, rng.randrange(4096), cpu=camp.cpu)
                ref_s = float(ref_row["wall_s"]) if ref_row["status"] == "ok" else None
            row = run_one(trials[side], None, 0, rng.randrange(4096), cpu=camp.cpu)
            status = row["status"] if (ref_s is not None or not reference) else "reference-failed"
            rows.append({"unit": unit, "pos": pos, "side": side, "allocator": row["allocator"],
                         "status": status, "wall_s": float(row["wall_s"]), "ref_s": ref_s})
        unit += 1
    return pd.DataFrame(rows), time.perf_counter() - started


def _campaign_candidate(name, kwargs, pair, workload, budget_min, seed, force) -> list[dict]:
    from analysis.harness.timing import measure

    baseline, other = pair
    with tempfile.TemporaryDirectory(prefix="heapcost-bench-") as tmp:
        started = time.perf_counter()
        run_dir = measure.Campaign(profile="smoke", allocators=",".join(pair), workloads=workload,
                                   budget_min=budget_min, blocks=10_000, seed=seed, runs_dir=Path(tmp),
                                   progress=False, force=force, **kwargs).run()
        elapsed = time.perf_counter() - started
        if (run_dir / "pairs.csv").is_file():
            from analysis.contract.schema import oriented_pairs

            table = oriented_pairs(pd.read_csv(run_dir / "pairs.csv"), baseline)
            y = paired.log_ratios(usable_trials(table).reset_index(drop=True)).to_numpy()
            diff, _ = paired.paired_difference(y)
            return [_summary(name, pair, workload, elapsed, diff, f"{y.size} pairs")]
        trials = pd.read_csv(run_dir / "trials.csv")
    res = compare.compare(trials, baseline).results.iloc[0]
    unpaired = _summary(name, pair, workload, elapsed, Difference.of_row(res),
                        f"{int(res['n'])}+{int(res['n_baseline'])} trials", "unpaired (compare.py)")
    out = [unpaired]
    if kwargs.get("pin") != "none":
        y = block_pairs(trials, baseline, other)
        diff, _ = paired.paired_difference(y)
        out.append(_summary(f"{name}, paired within blocks", pair, workload, elapsed, diff,
                            f"{y.size} blocks", "the same trials, the block as the unit"))
    return out


def _unit_candidate(name, pair, workload, budget_min, seed, force) -> list[dict]:
    from analysis.harness.timing import measure
    from analysis.harness.process import quiet

    baseline, other = pair
    reference = name == "ABBA with a reference probe"
    with tempfile.TemporaryDirectory(prefix="heapcost-bench-") as tmp:
        camp = measure.Campaign(profile="smoke", allocators=",".join(pair), workloads=workload, seed=seed,
                                runs_dir=Path(tmp), progress=False, force=force, protocol="trials", pin="auto")
        for wl in camp.workloads.values():
            for variant in sorted({camp.resolved[a].allocator.variant for a in pair}):
                wl.prepare(variant)
        with quiet.CampaignLock(Path(tmp), force):
            from analysis.harness.process import launcher

            with launcher.pinned(camp.cpu):
                units, elapsed = run_units(camp, baseline, other, workload, budget_min * 60,
                                           reference=reference, seed=seed)
    q = quadruple_differences(units)
    out = []
    plain, _ = paired.paired_difference(q["y"].to_numpy())
    if not reference:
        return [_summary(name, pair, workload, elapsed, plain, f"{len(q)} quadruples")]
    out.append(_summary(f"{name}, not used", pair, workload, elapsed, plain, f"{len(q)} quadruples",
                        "the probes' time spent, not used"))
    by_probe, slope = paired.paired_difference(q["y"].to_numpy(), q["x"].to_numpy(), at_zero=True)
    out.append(_summary(f"{name} as covariate", pair, workload, elapsed, by_probe, f"{len(q)} quadruples",
                        f"Huber slope {slope:.2f} on the probes' log difference"))
    by_regime, slope = paired.paired_difference(q["y"].to_numpy(), q["r"].to_numpy(), at_zero=True)
    fast = regime_of(np.log(units.loc[units["status"] == "ok", "ref_s"].astype(float).to_numpy()))
    out.append(_summary(f"{name}, regime classified", pair, workload, elapsed, by_regime,
                        f"{len(q)} quadruples", f"{fast.mean():.0%} of probes in the fast regime; slope "
                        f"{slope:.2f}" if not math.isnan(slope) else "one regime seen: no adjustment"))
    return out


def protocol_candidates(allocators=("glibc", "scudo"), workload="small-loop", budget_min: float = 3.0,
                        seed: int = 1, force=None, only=None) -> list[dict]:
    """Each candidate protocol given the same machine time on the same pair: its interval half-width and
    precision per machine-second, for bench/results.md."""
    out = []
    for name in CANDIDATES:
        if only and name not in only:
            continue
        if name in CAMPAIGN_CANDIDATES:
            out += _campaign_candidate(name, CAMPAIGN_CANDIDATES[name], tuple(allocators), workload,
                                       budget_min, seed, force)
        else:
            out += _unit_candidate(name, tuple(allocators), workload, budget_min, seed, force)
    return out
