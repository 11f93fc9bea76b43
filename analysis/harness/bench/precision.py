"""`make bench`, precision at equal machine time: hyperfine's run of two commands against a heapcost campaign
given the same wall time, over a grid of budgets and workload scales.

A grid cell is (profile, budget). The profile is the campaign profile whose scale both tools run (hyperfine's
commands are built from the same campaign's trials); the budget is either hyperfine's default run ("default",
None here) or a machine time in seconds that hyperfine's `--runs N` is sized to. In both cases our campaign is
then given the wall time hyperfine's run actually took.
"""
import json
import math
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.contract.schema import usable_trials
from analysis.errors import HeapcostError
from analysis.paths import REPO
from analysis.stats import compare
from analysis.stats import estimators as stats

BENCH_DIR = REPO / "bench"
CALIBRATION_RUNS = 3  # hyperfine runs per command to estimate their times before a sized run
MIN_RUNS = 10  # hyperfine's own minimum of runs per command


def _hyperfine() -> str:
    path = shutil.which("hyperfine")
    if not path:
        raise HeapcostError("hyperfine is not installed; `apt-get install hyperfine` (Debian) provides it")
    return path


def hyperfine_json(args: list[str]) -> tuple[dict, float]:
    """Run hyperfine with --export-json; return its results and the wall time it took."""
    with tempfile.TemporaryDirectory(prefix="heapcost-bench-") as tmp:
        out = Path(tmp) / "hf.json"
        started = time.perf_counter()
        proc = subprocess.run([_hyperfine(), "--style", "none", "--export-json", str(out), *args],
                              capture_output=True, text=True)
        elapsed = time.perf_counter() - started
        if proc.returncode != 0:
            raise HeapcostError(f"hyperfine failed: {proc.stderr.strip().splitlines()[-1:]}")
        return json.loads(out.read_text()), elapsed


# ------------------------------------------------------------------------------- the grid's plan
def parse_budgets(text: str) -> list[float | None]:
    """--budgets: comma-separated seconds, or "default" for hyperfine's default run (None)."""
    budgets = []
    for item in (t.strip() for t in str(text).split(",")):
        if item.lower() == "default":
            budgets.append(None)
            continue
        try:
            value = float(item)
        except ValueError:
            value = -1.0
        if not (value > 0 and math.isfinite(value)):
            raise HeapcostError(f"--budgets {text!r}: each budget is a positive number of seconds or "
                                f"'default', not {item!r}")
        budgets.append(value)
    if len(set(budgets)) != len(budgets):
        raise HeapcostError(f"--budgets {text!r} lists a budget twice")
    return budgets


def parse_profiles(text: str) -> list[str]:
    """--precision-profiles: comma-separated campaign profiles (their scale is the workload's scale)."""
    from analysis.harness.timing.measure import PROFILES

    profiles = [p.strip() for p in str(text).split(",")]
    unknown = [p for p in profiles if p not in PROFILES]
    if unknown:
        raise HeapcostError(f"--precision-profiles {text!r}: unknown profile {unknown[0]!r}; valid: "
                            f"{', '.join(PROFILES)}")
    if len(set(profiles)) != len(profiles):
        raise HeapcostError(f"--precision-profiles {text!r} lists a profile twice")
    return profiles


def grid_plan(budgets: str, profiles: str, rounds: int) -> list[tuple[str, float | None, int]]:
    """(profile, budget_s, rounds) per grid cell: rounds for the default budget, one run of each other."""
    if not isinstance(rounds, int) or rounds < 1:
        raise HeapcostError(f"--rounds must be a positive integer, not {rounds!r}")
    return [(profile, budget, rounds if budget is None else 1)
            for profile in parse_profiles(profiles) for budget in parse_budgets(budgets)]


def runs_for_budget(budget_s: float, mean_times_s) -> int:
    """hyperfine's --runs N for both commands, so that N runs of each take about budget_s in all."""
    return max(MIN_RUNS, round(budget_s / sum(mean_times_s)))


def budget_label(budget_s: float | None) -> str:
    return "default" if budget_s is None else f"{budget_s:g}s"


# ------------------------------------------------------------------------------- one comparison
def hyperfine_commands(camp, allocators, workload: str, factor: float, tmp: Path) -> list[str]:
    """The campaign's own trial of each allocator (same scale, preloads and environment, the resolution
    check included) as a command line for hyperfine, each in its own working directory under tmp."""
    commands = []
    for aid in allocators:
        trial = camp.trial(aid, workload, factor)
        workdir = tmp / f"hf-{aid}"
        workdir.mkdir()
        env = trial.env(workdir, 0)
        commands.append(shlex.join(["env", "-i", *(f"{k}={v}" for k, v in env.items()), *trial.argv]))
    return commands


def _campaign(allocators, workload, budget_min, runs_dir, seed, profile="quick"):
    """The default protocol (lockstep pairs for our C workloads) at the profile's scale. The machine was
    checked once when the bench started (bench.run): the bench's own earlier campaigns raise the load
    average, which must not stop the next one."""
    from analysis.harness.timing import measure

    return measure.Campaign(profile=profile, allocators=",".join(allocators), workloads=workload,
                            budget_min=budget_min, blocks=10_000, seed=seed, runs_dir=runs_dir,
                            progress=False, force="1")


def _our_result(run_dir: Path, baseline: str, out_dir: Path = BENCH_DIR, suffix: str = ""):
    """(baseline's times, the other's times, the result row, "pairs" or "trials") of a bench campaign; the
    table is kept in out_dir (precision_pairs<suffix>.csv or precision_trials<suffix>.csv, the other one
    removed)."""
    from analysis.stats import paired

    pairs = run_dir / "pairs.csv"
    unit = "pairs" if pairs.is_file() else "trials"
    table = pd.read_csv(run_dir / f"{unit}.csv")
    out_dir.mkdir(parents=True, exist_ok=True)
    table.to_csv(out_dir / f"precision_{unit}{suffix}.csv", index=False)
    (out_dir / f"precision_{'trials' if unit == 'pairs' else 'pairs'}{suffix}.csv").unlink(missing_ok=True)
    if unit == "pairs":
        from analysis.contract.schema import oriented_pairs

        table = oriented_pairs(table, baseline)
    used = usable_trials(table)
    if unit == "pairs":
        res = paired.compare_pairs(table).iloc[0]
        return used["active_a_s"].to_numpy(), used["active_b_s"].to_numpy(), res, unit
    res = compare.compare(table, baseline).results.iloc[0]
    return (used.loc[used["allocator"] == baseline, "wall_s"].to_numpy(),
            used.loc[used["allocator"] != baseline, "wall_s"].to_numpy(), res, unit)


def precision_equal_budget(allocators=("glibc", "scudo"), workload="small-loop", seed: int = 1,
                           out_dir: Path = BENCH_DIR, budget_s: float | None = None,
                           profile: str = "quick") -> dict:
    """hyperfine's run of the two commands at the profile's scale (its default run, or --runs N sized to
    budget_s), then our campaign at the same scale with the wall time hyperfine's run took."""
    baseline, other = allocators
    calibration = None
    with tempfile.TemporaryDirectory(prefix="heapcost-bench-") as tmp:
        tmp = Path(tmp)
        camp = _campaign(allocators, workload, None, tmp / "runs", seed, profile)
        # the campaign's lockstep cell is (other, workload, other's scale factor) and runs the baseline at
        # that factor too (measure.Campaign.pairs, lockstep.run_pairs): hyperfine gets the same two trials
        factor = camp.resolved[other].allocator.scale
        scale = camp.scale_of(factor)
        commands = hyperfine_commands(camp, allocators, workload, factor, tmp)
        if budget_s is None:
            hf, hf_elapsed = hyperfine_json(commands)
        else:
            cal, cal_elapsed = hyperfine_json(["--runs", str(CALIBRATION_RUNS), *commands])
            means = [float(r["mean"]) for r in cal["results"]]
            runs = runs_for_budget(budget_s, means)
            calibration = {"runs": CALIBRATION_RUNS, "elapsed_s": cal_elapsed,
                           "mean_s": dict(zip(allocators, means)), "runs_chosen": runs}
            hf, hf_elapsed = hyperfine_json(["--runs", str(runs), *commands])
        times = {aid: np.asarray(r["times"]) for aid, r in zip(allocators, hf["results"])}
        h_ratio, h_lo, h_hi = stats.hyperfine_ratio_interval(times[other], times[baseline])
        w_ratio, w_lo, w_hi = stats.welch_ratio_interval(times[other], times[baseline])

        started = time.perf_counter()
        camp = _campaign(allocators, workload, hf_elapsed / 60, tmp / "runs", seed, profile)
        run_dir = camp.run()
        our_elapsed = time.perf_counter() - started
        suffix = "" if (profile, budget_s) == ("quick", None) else f"-{profile}-{budget_label(budget_s)}"
        ours_b, ours_a, res, unit = _our_result(run_dir, baseline, out_dir, suffix)
    # each protocol's data through the other estimator, to tell the protocol from the estimator
    o_ratio, o_lo, o_hi = stats.welch_ratio_interval(ours_a, ours_b)
    hf_table = pd.DataFrame({"workload": workload,
                             "allocator": np.repeat(list(times), [len(t) for t in times.values()]),
                             "wall_s": np.concatenate(list(times.values()))})
    hf_table["seq"] = np.arange(len(hf_table))  # hyperfine runs all of one command, then the other
    hf_ours = compare.compare(hf_table, baseline).results.iloc[0]
    return {
        "allocators": list(allocators), "workload": workload, "profile": profile, "budget_s": budget_s,
        "scale": scale,
        "hyperfine": {"elapsed_s": hf_elapsed, "runs": {a: len(t) for a, t in times.items()},
                      "calibration": calibration,
                      "ratio": h_ratio, "plusminus_halfwidth": (h_hi - h_lo) / 2 / h_ratio,
                      "welch_halfwidth": (w_hi - w_lo) / 2 / w_ratio,
                      "welch_ci": [w_lo, w_hi], "heapcost_estimator_halfwidth": float(hf_ours["halfwidth"]),
                      "heapcost_estimator_ci": [float(hf_ours["ci_low"]), float(hf_ours["ci_high"])]},
        "heapcost": {"elapsed_s": our_elapsed, "protocol": camp.protocol, "unit": unit,
                     "runs": {baseline: int(ours_b.size), other: int(ours_a.size)},
                     "ratio": float(res["ratio"]), "ci": [float(res["ci_low"]), float(res["ci_high"])],
                     "halfwidth": float(res["halfwidth"]), "method": res["method"],
                     "welch_raw_halfwidth": (o_hi - o_lo) / 2 / o_ratio},
    }


# ------------------------------------------------------------------------------- the grid
def halfwidth_ratio(round_: dict) -> float:
    """heapcost's half-width over the Welch half-width on hyperfine's times, of one round."""
    return round_["heapcost"]["halfwidth"] / round_["hyperfine"]["welch_halfwidth"]


def median_round(rounds: list[dict]) -> dict:
    """The round with the median ratio of half-widths (the upper middle one of an even count)."""
    key = [halfwidth_ratio(r) for r in rounds]
    return rounds[int(np.argsort(key, kind="stable")[len(key) // 2])]


def grid_entry(profile: str, budget_s: float | None, rounds: list[dict]) -> dict:
    ratio = float(np.median([halfwidth_ratio(r) for r in rounds]))
    return {"profile": profile, "budget_s": budget_s, "scale": rounds[0]["scale"], "rounds": rounds,
            "halfwidth_ratio": ratio, "meets_half": bool(ratio <= 0.5)}


def precision_grid(allocators, workload, plan, seed: int = 1, out_dir: Path = BENCH_DIR) -> list[dict]:
    """Every cell of the plan (grid_plan), its rounds one after the other."""
    return [grid_entry(profile, budget, [precision_equal_budget(tuple(allocators), workload, seed + i,
                                                                out_dir, budget, profile)
                                         for i in range(rounds)])
            for profile, budget, rounds in plan]


def precision_results(grid: list[dict]) -> dict:
    """The precision part of results.json: the grid, and (when the grid has it) the quick profile at
    hyperfine's default budget as before, its median round under "precision" and all rounds under
    "precision_rounds"."""
    out = {"precision_grid": grid}
    for entry in grid:
        if (entry["profile"], entry["budget_s"]) == ("quick", None):
            out["precision_rounds"] = entry["rounds"]
            out["precision"] = {**median_round(entry["rounds"]),
                                "halfwidth_ratio_all_rounds": [halfwidth_ratio(r) for r in entry["rounds"]]}
    return out


def _count(runs: dict, unit: str | None) -> str:
    values = list(runs.values())
    if unit == "pairs" and len(set(values)) == 1:
        return str(values[0])
    return "+".join(map(str, values)) + (" trials" if unit == "trials" else "")


def format_grid(grid: list[dict]) -> list[str]:
    """The grid's table, a row per cell whatever its outcome; the runs and half-widths are the median
    round's, the budget's parenthesis the machine time hyperfine's run took (our campaign's budget)."""
    lines = ["", "precision at equal machine time, by budget and scale", "",
             ("| profile | scale | budget | hyperfine runs | heapcost pairs | hyperfine Welch half-width | "
              "heapcost half-width | ratio (ours/Welch) | at most half of Welch's |"),
             "|---|---|---|---|---|---|---|---|---|"]
    for entry in grid:
        rounds = entry["rounds"]
        shown = median_round(rounds)
        hf, hc = shown["hyperfine"], shown["heapcost"]
        budget = ("hyperfine default" if entry["budget_s"] is None else f"{entry['budget_s']:g} s")
        ratio = f"{entry['halfwidth_ratio']:.2f}"
        if len(rounds) > 1:
            ratio += f" (median of {len(rounds)} rounds: {', '.join(f'{halfwidth_ratio(r):.2f}' for r in rounds)})"
        lines.append(f"| {entry['profile']} | {entry['scale']:g} | {budget} ({hf['elapsed_s']:.0f} s) | "
                     f"{_count(hf['runs'], None)} | {_count(hc['runs'], hc.get('unit'))} | "
                     f"±{hf['welch_halfwidth']:.2%} | ±{hc['halfwidth']:.2%} | {ratio} | "
                     f"{'yes' if entry['meets_half'] else 'no'} |")
    return lines
