"""`make bench`: the cost and precision of heapcost's measurement protocol against hyperfine's.

Three benchmarks (not timed tests), written to bench/results.json and bench/results.md:
1. precision at equal machine time: heapcost's campaign (randomized blocks, clock probe, robust
   log-ratio interval) against hyperfine's default run of the same two commands, half-widths of the
   95% interval of the ratio compared; hyperfine's own +- and a Welch interval on its times;
2. per-trial overhead on /bin/true: the launcher with and without the clock probe, against
   `hyperfine -N`, all timed from outside as wall-clock per trial;
3. adaptive against fixed designs: trials needed until the widest interval meets a target, on
   simulated data with allocators of unequal noise (seeded, so it needs no machine time).
"""
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.contract.schema import usable_trials
from analysis.stats import compare
from analysis.stats import simulate
from analysis.stats import estimators as stats
from analysis.errors import HeapcostError
from analysis.paths import REPO

BENCH_DIR = REPO / "bench"


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


def overhead_true(runs: int = 200) -> dict:
    """Wall-clock cost per trial of running /bin/true: our launcher (with and without the probe)
    against `hyperfine -N`."""
    from analysis.harness import launcher

    env = {"PATH": "/usr/bin:/bin"}
    launcher.run(["/bin/true"], env=env)  # build and warm the launcher
    iters = launcher.calibrate(0.002)

    def per_trial(probe_iters):
        started = time.perf_counter()
        walls = [launcher.run(["/bin/true"], env=env, probe_iters=probe_iters).wall_s
                 for _ in range(runs)]
        return (time.perf_counter() - started) / runs, float(np.mean(walls))

    started = time.perf_counter()
    for _ in range(runs):
        subprocess.run(["/bin/true"], env=env, capture_output=True)
    python_spawn = (time.perf_counter() - started) / runs
    plain, plain_wall = per_trial(0)
    probed, _ = per_trial(iters)
    hf, hf_elapsed = hyperfine_json(["-N", "--runs", str(runs), "/bin/true"])
    return {
        "runs": runs,
        "heapcost_per_trial_s": plain,
        "heapcost_with_probe_per_trial_s": probed,
        "probe_fixed_s": probed - plain,
        "probe_target_s": 2 * 0.002,
        "hyperfine_per_run_s": hf_elapsed / runs,
        "python_subprocess_true_s": python_spawn,  # the floor for any harness driven from Python
        "heapcost_minus_hyperfine_s": plain - hf_elapsed / runs,
        "true_wall_heapcost_s": plain_wall,
        "true_wall_hyperfine_s": hf["results"][0]["mean"],
    }


def _campaign(allocators, workload, budget_min, runs_dir, seed):
    from analysis.harness import measure

    return measure.Campaign(profile="quick", allocators=",".join(allocators), workloads=workload,
                            budget_min=budget_min, blocks=10_000, seed=seed, runs_dir=runs_dir,
                            progress=False)


def precision_equal_budget(allocators=("glibc", "scudo"), workload="small-loop",
                           seed: int = 1) -> dict:
    """hyperfine's default run of the two commands, then our campaign with the same wall time."""
    baseline, other = allocators
    with tempfile.TemporaryDirectory(prefix="heapcost-bench-") as tmp:
        tmp = Path(tmp)
        camp = _campaign(allocators, workload, None, tmp / "runs", seed)
        commands = []
        factor = camp.resolved[other].allocator.scale  # the baseline runs at its scale too
        for aid in allocators:
            trial = camp.trial(aid, workload, factor)
            workdir = tmp / f"hf-{aid}"
            workdir.mkdir()
            env = trial.env(workdir, 0)
            commands.append(shlex.join(["env", "-i", *(f"{k}={v}" for k, v in env.items()),
                                        *trial.argv]))
        hf, hf_elapsed = hyperfine_json(commands)
        times = {aid: np.asarray(r["times"]) for aid, r in zip(allocators, hf["results"])}
        h_ratio, h_lo, h_hi = stats.hyperfine_ratio_interval(times[other], times[baseline])
        w_ratio, w_lo, w_hi = stats.welch_ratio_interval(times[other], times[baseline])

        started = time.perf_counter()
        camp = _campaign(allocators, workload, hf_elapsed / 60, tmp / "runs", seed)
        run_dir = camp.run()
        our_elapsed = time.perf_counter() - started
        trials = pd.read_csv(run_dir / "trials.csv")
        res = compare.compare(trials, baseline).results.iloc[0]
        trials.to_csv(BENCH_DIR / "precision_trials.csv", index=False)
    # each protocol's data through the other estimator, to tell the protocol from the estimator
    used = usable_trials(trials)
    ours_a = used.loc[used["allocator"] == other, "wall_s"].to_numpy()
    ours_b = used.loc[used["allocator"] == baseline, "wall_s"].to_numpy()
    o_ratio, o_lo, o_hi = stats.welch_ratio_interval(ours_a, ours_b)
    hf_table = pd.DataFrame({"workload": workload,
                             "allocator": np.repeat(list(times), [len(t) for t in times.values()]),
                             "wall_s": np.concatenate(list(times.values()))})
    hf_table["seq"] = np.arange(len(hf_table))  # hyperfine runs all of one command, then the other
    hf_ours = compare.compare(hf_table, baseline).results.iloc[0]
    return {
        "allocators": list(allocators), "workload": workload, "scale": camp.scale_of(factor),
        "hyperfine": {"elapsed_s": hf_elapsed, "runs": {a: int(len(t)) for a, t in times.items()},
                      "ratio": h_ratio, "plusminus_halfwidth": (h_hi - h_lo) / 2 / h_ratio,
                      "welch_halfwidth": (w_hi - w_lo) / 2 / w_ratio,
                      "welch_ci": [w_lo, w_hi], "heapcost_estimator_halfwidth": float(hf_ours["halfwidth"]),
                      "heapcost_estimator_ci": [float(hf_ours["ci_low"]), float(hf_ours["ci_high"])]},
        "heapcost": {"elapsed_s": our_elapsed, "runs": {baseline: int(res["n_baseline"]),
                                                        other: int(res["n"])},
                     "ratio": float(res["ratio"]), "ci": [float(res["ci_low"]), float(res["ci_high"])],
                     "halfwidth": float(res["halfwidth"]), "method": res["method"],
                     "outliers": int(res["n_outliers"] + res["n_outliers_baseline"]),
                     "welch_raw_halfwidth": (o_hi - o_lo) / 2 / o_ratio},
    }


def _halfwidths(trials: pd.DataFrame, counts: dict, baseline: str) -> pd.Series:
    used = trials[trials["block"] < trials["allocator"].map(counts)]
    res = compare.compare(used, baseline).results
    return res.set_index("allocator")["halfwidth"]


def adaptive_vs_fixed(target: float = 0.01, seeds=range(5), start_blocks: int = 5) -> dict:
    """Trials until every allocator's interval against the baseline is within +-target."""
    sc = simulate.Scenario(
        ratios={"base": 1.0, "quiet": 1.02, "typical": 1.05, "noisy": 1.10},
        noise_scale={"base": 1.0, "quiet": 0.5, "typical": 1.0, "noisy": 2.5},
        n_blocks=400, warmup_blocks=0)
    limit = np.log1p(target)
    rows = []
    for seed in seeds:
        trials = simulate.simulate_trials(sc, seed)
        names = list(sc.ratios)
        fixed = start_blocks
        while _halfwidths(trials, dict.fromkeys(names, fixed), "base").max() > limit:
            fixed += 1
        counts = dict.fromkeys(names, start_blocks)
        while True:
            hw = _halfwidths(trials, counts, "base")
            wide = [a for a, h in hw.items() if h > limit]
            if not wide:
                break
            for a in wide + ["base"]:
                counts[a] += 1
        rows.append({"seed": seed, "fixed_trials": fixed * len(names),
                     "adaptive_trials": int(sum(counts.values())), "adaptive_runs": counts})
    fixed = float(np.mean([r["fixed_trials"] for r in rows]))
    adaptive = float(np.mean([r["adaptive_trials"] for r in rows]))
    return {"target": target, "simulated": True, "noise_scale": sc.noise_scale,
            "fixed_trials_mean": fixed, "adaptive_trials_mean": adaptive,
            "saving": 1 - adaptive / fixed, "per_seed": rows}


PROTOCOL_CANDIDATES = {
    # name: Campaign keyword arguments (scale: the smoke profile's, tens of ms per trial here)
    "lockstep pairs": {"protocol": "lockstep", "pin": "auto"},
    "pinned short trials": {"protocol": "trials", "pin": "auto"},
    "unpinned short trials": {"protocol": "trials", "pin": "none"},
}


def protocol_candidates(allocators=("glibc", "scudo"), workload="small-loop", budget_min: float = 3.0,
                        seed: int = 1, force=None, only=None) -> list[dict]:
    """Each candidate protocol given the same machine time on the same pair: its interval half-width and
    precision per machine-second (1 / (half-width^2 x seconds)), for bench/results.md."""
    from analysis.harness import measure
    from analysis.stats import paired

    baseline, other = allocators
    out = []
    for name, kwargs in PROTOCOL_CANDIDATES.items():
        if only and name not in only:
            continue
        with tempfile.TemporaryDirectory(prefix="heapcost-bench-") as tmp:
            started = time.perf_counter()
            run_dir = measure.Campaign(profile="smoke", allocators=",".join(allocators), workloads=workload,
                                       budget_min=budget_min, blocks=10_000, seed=seed, runs_dir=Path(tmp),
                                       progress=False, force=force, **kwargs).run()
            elapsed = time.perf_counter() - started
            if (run_dir / "pairs.csv").is_file():
                res = paired.compare_pairs(pd.read_csv(run_dir / "pairs.csv")).iloc[0]
                n = f"{int(res['n_pairs'])} pairs"
            else:
                res = compare.compare(pd.read_csv(run_dir / "trials.csv"), baseline).results.iloc[0]
                n = f"{int(res['n'])}+{int(res['n_baseline'])} trials"
        hw = float(np.log(res["ci_high"] / res["ci_low"]) / 2)
        out.append({"candidate": name, "allocators": [baseline, other], "workload": workload, "elapsed_s": elapsed,
                    "ratio": float(res["ratio"]), "ci": [float(res["ci_low"]), float(res["ci_high"])],
                    "halfwidth": hw, "n": n, "precision_per_s": 1 / (hw ** 2 * elapsed) if hw > 0 else float("inf")})
    return out


def _runs(runs: dict) -> str:
    return "+".join(str(v) for v in runs.values())


def format_results(r: dict) -> str:
    lines = []
    if "loadavg_before" in r:
        lines.append(f"load average {r['loadavg_before']:.2f} before, {r.get('loadavg_after', 0):.2f} "
                     f"after, on {r['cpus']} CPUs\n")
    lines += ["| benchmark | heapcost | hyperfine | note |", "|---|---|---|---|"]
    p = r.get("precision")
    if p:
        hf, hc = p["hyperfine"], p["heapcost"]
        per_s = lambda hw, t: 1 / (hw ** 2 * t)  # noqa: E731 - precision per machine-second
        lines.append(
            f"| interval half-width, {p['allocators'][1]}/{p['allocators'][0]} on {p['workload']} | "
            f"±{hc['halfwidth']:.2%} ({_runs(hc['runs'])} runs, {hc['elapsed_s']:.0f} s) | "
            f"±{hf['plusminus_halfwidth']:.2%} own ±; ±{hf['welch_halfwidth']:.2%} Welch "
            f"({_runs(hf['runs'])} runs, {hf['elapsed_s']:.0f} s) | precision per machine-second: "
            f"{per_s(hc['halfwidth'], hc['elapsed_s']) / per_s(hf['welch_halfwidth'], hf['elapsed_s']):.2f}x "
            f"hyperfine's Welch; our/their half-width over {len(p.get('halfwidth_ratio_all_rounds', [1]))} "
            f"rounds: {', '.join(f'{k:.2f}' for k in p.get('halfwidth_ratio_all_rounds', []))} |")
        lines.append(
            f"| same data, other estimator | Welch on our runs: ±{hc['welch_raw_halfwidth']:.2%} | "
            f"our estimator on hyperfine's runs: ±{hf['heapcost_estimator_halfwidth']:.2%} | "
            "separates the protocol from the estimator |")
    o = r.get("overhead")
    if o:
        lines.append(f"| per-trial cost on /bin/true | {o['heapcost_per_trial_s'] * 1e3:.2f} ms "
                     f"(+{o['probe_fixed_s'] * 1e3:.2f} ms clock probe) | "
                     f"{o['hyperfine_per_run_s'] * 1e3:.2f} ms (`-N`) | difference "
                     f"{o['heapcost_minus_hyperfine_s'] * 1e3:+.2f} ms (goal: within 2 ms); a bare "
                     f"Python subprocess.run of /bin/true costs "
                     f"{o.get('python_subprocess_true_s', float('nan')) * 1e3:.2f} ms |")
    a = r.get("adaptive")
    if a:
        lines.append(f"| trials to ±{a['target']:.0%} for every pair (simulated) | adaptive: "
                     f"{a['adaptive_trials_mean']:.0f} | fixed design: {a['fixed_trials_mean']:.0f} | "
                     f"adaptive saves {a['saving']:.0%} |")
    cands = r.get("protocols")
    if cands:
        lines += ["", "| protocol candidate | ratio [95% interval] | half-width | units | machine time | "
                  "precision per machine-second |", "|---|---|---|---|---|---|"]
        best = max(c["precision_per_s"] for c in cands)
        for c in cands:
            lines.append(f"| {c['candidate']} ({c['allocators'][1]}/{c['allocators'][0]}, {c['workload']}) | "
                         f"{c['ratio']:.4f} [{c['ci'][0]:.4f}, {c['ci'][1]:.4f}] | ±{c['halfwidth']:.2%} | "
                         f"{c['n']} | {c['elapsed_s']:.0f} s | {c['precision_per_s'] / best:.2f}x the best |")
    return "\n".join(lines)


def add_arguments(parser) -> None:
    parser.add_argument("--allocators", default="glibc,scudo", help="baseline,other (default glibc,scudo)")
    parser.add_argument("--workload", default="small-loop")
    parser.add_argument("--true-runs", type=int, default=200, help="runs of /bin/true per method")
    parser.add_argument("--only", choices=["precision", "overhead", "adaptive", "protocols"], action="append",
                        help="run only these benchmarks (repeatable)")
    parser.add_argument("--out", default=str(BENCH_DIR), help="directory for results.json/.md")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3,
                        help="repeat the equal-budget comparison; the median round is tabulated")
    parser.add_argument("--protocol-budget-min", type=float, default=3.0,
                        help="machine time given to each protocol candidate (default 3 minutes)")
    parser.add_argument("--candidates", default="", help="comma-separated protocol candidates (default: all of "
                        + ", ".join(PROTOCOL_CANDIDATES) + ")")
    parser.add_argument("--force", action="store_true", help="run the campaigns even on a busy machine")


def run(args) -> int:
    pair = [a.strip() for a in args.allocators.split(",") if a.strip()]
    if len(pair) != 2:
        raise HeapcostError(f"--allocators {args.allocators!r}: give two ids, baseline first")
    wanted = set(args.only or ["precision", "overhead", "adaptive", "protocols"])
    # a busy machine makes every number here worse: record how busy it was
    results = {"loadavg_before": os.getloadavg()[0], "cpus": os.cpu_count()}
    if "overhead" in wanted:
        results["overhead"] = overhead_true(args.true_runs)
    if "adaptive" in wanted:
        results["adaptive"] = adaptive_vs_fixed()
    if "precision" in wanted:
        rounds = [precision_equal_budget(tuple(pair), args.workload, args.seed + i)
                  for i in range(args.rounds)]
        results["precision_rounds"] = rounds
        # the round with the median ratio of half-widths represents them in the table
        key = [r["heapcost"]["halfwidth"] / r["hyperfine"]["welch_halfwidth"] for r in rounds]
        results["precision"] = rounds[int(np.argsort(key)[len(key) // 2])]
        results["precision"]["halfwidth_ratio_all_rounds"] = key
    if "protocols" in wanted:
        only = [c.strip() for c in args.candidates.split(",") if c.strip()] or None
        results["protocols"] = protocol_candidates(tuple(pair), args.workload, args.protocol_budget_min,
                                                   args.seed, "1" if args.force else None, only)
    results["loadavg_after"] = os.getloadavg()[0]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2, default=float))
    table = format_results(results)
    (out / "results.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":  # `python -m analysis.bench` until `bench` is registered in cli.py
    import argparse
    import sys

    cli_parser = argparse.ArgumentParser(prog="python -m analysis.bench", description=__doc__)
    add_arguments(cli_parser)
    try:
        sys.exit(run(cli_parser.parse_args()))
    except HeapcostError as exc:
        print(f"heapcost: error: {exc}", file=sys.stderr)
        sys.exit(2)
