"""`make bench`: the cost and precision of heapcost's measurement protocol against hyperfine's.

Benchmarks (not timed tests), written to bench/results.json and bench/results.md (the benchmarks not run
now, --only, are kept from the results.json already there, each with when and under what load it ran):
1. precision at equal machine time (bench/precision.py): heapcost's default protocol (lockstep pairs for
   our C workloads, the paired robust log-ratio interval) against hyperfine's run of the same two commands
   (its default run, or --runs sized to a budget), at each profile's workload scale; half-widths of the
   95% interval of the ratio compared; hyperfine's own +- and a Welch interval on its times; each
   protocol's data through the other's estimator as well;
2. per-trial overhead on /bin/true: the launcher with and without the clock probe, against
   `hyperfine -N`, all timed from outside as wall-clock per trial;
3. adaptive against fixed designs: trials needed until the widest interval meets a target, on
   simulated data with allocators of unequal noise (seeded, so it needs no machine time);
4. the timing-protocol candidates at equal machine time (bench/protocols.py);
5. the A/A cells of the published dataset, as `make paper` tabulated them (no machine time);
6. A/A through hyperfine (bench/aa.py): the baseline against a preloaded copy of its own library in
   hyperfine's default run, per workload and round: how often its Welch interval excludes the true ratio;
7. interference (bench/interference.py): lockstep pairs under other work of known placement and duty,
   and the thresholds by which campaigns flag a trial as measured during interference;
8. layout (bench/layout.py): whether a shared stack offset or disabled address-space randomization lets
   a lockstep pair cancel each process's own layout effect, and what it does to an A/A ratio;
9. alternation (bench/alternation.py): brought programs taking turns from outside, A/A, on this host; the
   same part measured on other hosts is kept beside it, one entry per host;
10. alternation-runs (bench/alternation_runs.py): one brought program's A/A windows taken apart into the
   spread of its runs and what its windows share, under conditions that would move either;
11. cost (bench/cost_answer.py): how long `cost` takes to answer with the model's inputs kept, and what
   profiling a program adds beyond the runs it makes.
Each part measured records when, under what load and on which host it ran.
"""
import json
import math
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.stats import compare
from analysis.stats import simulate
from analysis.errors import HeapcostError, warn
from analysis.harness.bench import aa as bench_aa, interference as bench_interference, layout as bench_layout, precision as bench_precision
from analysis.harness.bench import alternation as bench_alternation
from analysis.harness.bench import alternation_runs as bench_alternation_runs
from analysis.harness.bench import cost_answer as bench_cost
from analysis.harness.bench.precision import BENCH_DIR, hyperfine_json, precision_equal_budget  # noqa: F401
from analysis.harness.bench.protocols import CANDIDATES, protocol_candidates
from analysis.paths import REPO


def overhead_true(runs: int = 200) -> dict:
    """Wall-clock cost per trial of running /bin/true: our launcher (with and without the probe)
    against `hyperfine -N`."""
    from analysis.harness.process import launcher

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


def _halfwidths(trials: pd.DataFrame, counts: dict, baseline: str) -> pd.Series:
    used = trials[trials["block"] < trials["allocator"].map(counts)]
    res = compare.compare(used, baseline).results
    return res.set_index("allocator")["halfwidth"]


def aa_published(path: Path | None = None) -> dict:
    """The A/A cells of the published dataset as the paper build tabulated them (paper/generated/
    results_aa.csv, from `make paper`): per run, how many 95% intervals of the baseline against a
    preloaded copy of its own library exclude 1 (about 5% should)."""
    from analysis.paths import GENERATED_DIR

    path = Path(path or GENERATED_DIR / "results_aa.csv")
    if not path.is_file():
        return {"missing": f"{path.name} not found: run `make paper` first"}
    aa = pd.read_csv(path)
    runs = []
    for run_id, sub in aa.groupby("run_id", sort=True):
        excl = sub[sub["excludes_1"].astype(str).str.lower() == "true"]
        runs.append({"run_id": run_id, "cells": int(len(sub)), "exclude_1": int(len(excl)),
                     "methods": sorted(sub["method"].astype(str).unique()),
                     "designs": sorted(sub["design"].astype(str).unique()) if "design" in sub.columns else [],
                     "median_halfwidth": float(np.median(np.log(sub["ci_high"] / sub["ci_low"]) / 2)),
                     "excluding": [f"{r.allocator} {r.workload} {r.ratio:.4f} [{r.ci_low:.4f}, {r.ci_high:.4f}]"
                                   for r in excl.itertuples()]})
    return {"source": str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path), "runs": runs}


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


def _runs(runs: dict) -> str:
    return "+".join(str(v) for v in runs.values())


def _provenance(r: dict) -> list[str]:
    """A line per part present: when it was measured and the 1-minute load average around it."""
    lines = [f"on {r['cpus']} CPUs; per part, when it ran and the 1-minute load average before and after:"
             if r.get("cpus") else "per part, when it ran and the 1-minute load average before and after:"]
    for part, keys in PARTS.items():
        if not any(k in r for k in keys):
            continue
        m = r["measured"].get(part)
        if not m:
            lines.append(f"- {part}: when and under what load not recorded (kept from an earlier results.json)")
            continue
        on = f" on {m['host']}" if m.get("host") and part not in NO_MACHINE_TIME else ""
        lines.append(f"- {part}: measured {m['utc_start']} to {m['utc_end']}{on}, load {m['loadavg_before']:.2f} "
                     f"before, {m['loadavg_after']:.2f} after{NO_MACHINE_TIME.get(part, '')}")
    return [*lines, ""]


def format_results(r: dict) -> str:
    lines = []
    if isinstance(r.get("measured"), dict):
        lines += _provenance(r)
    elif "loadavg_before" in r:
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
    if r.get("precision_grid"):
        lines += bench_precision.format_grid(r["precision_grid"])
    aa = r.get("aa")
    if aa and aa.get("runs"):
        lines += ["", f"A/A: the baseline against a preloaded copy of its own library ({aa['source']})", "",
                  "| run | A/A cells | intervals excluding 1 | median half-width | design | method | those excluding 1 |",
                  "|---|---|---|---|---|---|---|"]
        for run in aa["runs"]:
            lines.append(f"| {run['run_id']} | {run['cells']} | {run['exclude_1']} "
                         f"({run['exclude_1'] / run['cells']:.0%}) | ±{math.expm1(run['median_halfwidth']):.2%} | "
                         f"{'; '.join(run.get('designs') or []) or '-'} | {', '.join(run['methods'])} | {'; '.join(run['excluding']) or '-'} |")
    lines += bench_aa.format_aa(r.get("hyperfine_aa"))
    lines += bench_aa.calibrated_ratios(r.get("precision_grid"),
                                        bench_aa.resummarized(r.get("hyperfine_aa")).get("widening_for_95"))
    cands = r.get("protocols")
    if cands:
        lines += ["", "| protocol candidate | ratio [95% interval] | half-width | units | machine time | "
                  "precision per machine-second | note |", "|---|---|---|---|---|---|---|"]
        best = max(c["precision_per_s"] for c in cands)
        for c in sorted(cands, key=lambda c: -c["precision_per_s"]):
            lines.append(f"| {c['candidate']} ({c['allocators'][1]}/{c['allocators'][0]}, {c['workload']}) | "
                         f"{c['ratio']:.4f} [{c['ci'][0]:.4f}, {c['ci'][1]:.4f}] | ±{math.expm1(c['halfwidth']):.2%} | "
                         f"{c['n']} | {c['elapsed_s']:.0f} s | {c['precision_per_s'] / best:.2f}x the best | "
                         f"{c.get('note', '')} |")
    lines += bench_interference.format_interference(r.get("interference"))
    lines += bench_layout.format_layout(r.get("layout"))
    if r.get("alternation"):
        lines += bench_alternation.format_alternation(r["alternation"])
    lines += bench_alternation.format_other_hosts(r.get("alternation_other_hosts"))
    lines += bench_alternation_runs.format_runs(r.get("alternation_runs"))
    lines += bench_cost.format_cost(r.get("cost"))
    return "\n".join(lines)


def add_arguments(parser) -> None:
    parser.add_argument("--allocators", default="glibc,scudo", help="baseline,other (default glibc,scudo)")
    parser.add_argument("--workload", default="small-loop",
                        help="workload of the precision, protocols, interference and layout parts (default small-loop)")
    parser.add_argument("--true-runs", type=int, default=200, help="runs of /bin/true per method (default 200)")
    parser.add_argument("--only", choices=list(PARTS), action="append",
                        help="run only these benchmarks (repeatable)")
    parser.add_argument("--out", default=str(BENCH_DIR), help="directory for results.json/.md")
    parser.add_argument("--seed", type=int, default=1, help="seed of the randomized orders (default 1)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="repeat the equal-budget comparison at hyperfine's default budget; the median "
                        "round is tabulated (the other budgets run once)")
    parser.add_argument("--budgets", default="default,60,180",
                        help="machine times of the equal-budget comparison, comma-separated seconds, 'default' "
                        "for hyperfine's default run (default: default,60,180)")
    parser.add_argument("--precision-profiles", default="quick,smoke",
                        help="campaign profiles whose workload scale both tools run in the equal-budget "
                        "comparison (default: quick,smoke)")
    parser.add_argument("--protocol-budget-min", type=float, default=3.0,
                        help="machine time given to each protocol candidate (default 3 minutes)")
    parser.add_argument("--candidates", default="", help="comma-separated protocol candidates (default: all of "
                        + ", ".join(CANDIDATES) + ")")
    parser.add_argument("--aa-rounds", type=int, default=10,
                        help="hyperfine A/A: rounds over the workloads (default 10: 40 cells)")
    parser.add_argument("--aa-libc", default="", help="hyperfine A/A and layout: the libc.so.6 to preload as the copy "
                        "(default: the one this process runs on)")
    parser.add_argument("--interference-budget-min", type=float, default=5.0,
                        help="interference: machine time for all its conditions together (default 5 minutes)")
    parser.add_argument("--layout-budget-min", type=float, default=4.0,
                        help="layout: machine time for all its conditions together (default 4 minutes)")
    parser.add_argument("--alternation-windows", type=int, default=bench_alternation.WINDOWS,
                        help=f"alternation: windows per brought program (default {bench_alternation.WINDOWS})")
    parser.add_argument("--alternation-campaigns", type=int, default=bench_alternation.CAMPAIGNS,
                        help="alternation: campaigns, to check that they agree within their intervals "
                             f"(default {bench_alternation.CAMPAIGNS})")
    parser.add_argument("--force", action="store_true", help="run the campaigns even on a busy machine")


PARTS = {  # the benchmarks (--only) and their keys in results.json
    "overhead": ("overhead",), "adaptive": ("adaptive",), "aa": ("aa",),
    "precision": ("precision", "precision_rounds", "precision_grid"), "protocols": ("protocols",),
    "hyperfine-aa": ("hyperfine_aa",), "interference": ("interference",), "layout": ("layout",),
    "alternation": ("alternation", "alternation_other_hosts"), "alternation-runs": ("alternation_runs",),
    "cost": ("cost",),
}
NO_MACHINE_TIME = {"adaptive": " (simulated: no machine time)", "aa": " (published data: no machine time)"}


def run(args) -> int:
    pair = [a.strip() for a in args.allocators.split(",") if a.strip()]
    if len(pair) != 2:
        raise HeapcostError(f"--allocators {args.allocators!r}: give two ids, baseline first")
    wanted = set(args.only or PARTS)
    bench_precision.grid_plan(args.budgets, args.precision_profiles, args.rounds)  # bad input fails here
    if not args.interference_budget_min > 0:
        raise HeapcostError(f"--interference-budget-min must be positive, got {args.interference_budget_min}")
    if not args.layout_budget_min > 0:
        raise HeapcostError(f"--layout-budget-min must be positive, got {args.layout_budget_min}")
    if args.aa_rounds < 1:
        raise HeapcostError(f"--aa-rounds must be at least 1, got {args.aa_rounds}")
    # a busy machine makes every number here worse: record how busy it was, and refuse to start on a busy
    # machine or beside a campaign (FORCE=1 / --force overrides), as a campaign does
    from analysis.harness.process import quiet
    from analysis.paths import RUNS_DIR

    with quiet.CampaignLock(RUNS_DIR, "1" if args.force else None) as lock:
        results = {"loadavg_before": os.getloadavg()[0], "cpus": os.cpu_count(), "quiet": lock.record}
        return _run_benchmarks(args, pair, wanted, results)


def previous_results(out: Path) -> dict:
    """The results.json already in `out`, or {} (a warning when it cannot be read as a JSON object)."""
    path = out / "results.json"
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        warn(f"{path} is not readable JSON ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
             "the benchmarks not run now are left out")
        return {}
    if not isinstance(data, dict):
        warn(f"{path} does not hold a JSON object; the benchmarks not run now are left out")
        return {}
    return data


def kept_parts(previous: dict, wanted) -> dict:
    """The parts of an earlier results.json that are not run now, with their provenance where recorded."""
    measured = previous.get("measured") if isinstance(previous.get("measured"), dict) else {}
    kept = {"measured": {}}
    for part, keys in PARTS.items():
        if part in wanted or not any(k in previous for k in keys):
            continue
        kept.update({k: previous[k] for k in keys if k in previous})
        if part in measured:
            kept["measured"][part] = measured[part]
    return kept


def measuring_host() -> str:
    """The host a part runs on, as the dataset labels a host kind (processor, CPUs, memory, kernel, VM)."""
    from analysis.contract.host import host_identity, host_label
    from analysis.harness.process.machine import describe_machine

    return host_label(host_identity(describe_machine()))


def _measure_part(results: dict, part: str, compute) -> None:
    from analysis.contract.runstore import utc_now

    start, load_before = utc_now(), os.getloadavg()[0]
    value = compute()
    results.update(value if part == "precision" else {PARTS[part][0]: value})
    results["measured"][part] = {"utc_start": start, "utc_end": utc_now(), "loadavg_before": load_before,
                                 "loadavg_after": os.getloadavg()[0], "host": measuring_host()}


def _run_benchmarks(args, pair, wanted, results) -> int:
    out = Path(args.out)
    previous = previous_results(out)
    results.update(kept_parts(previous, wanted))
    if "overhead" in wanted:
        _measure_part(results, "overhead", lambda: overhead_true(args.true_runs))
    if "adaptive" in wanted:
        _measure_part(results, "adaptive", adaptive_vs_fixed)
    if "aa" in wanted:
        _measure_part(results, "aa", aa_published)
    if "precision" in wanted:
        plan = bench_precision.grid_plan(args.budgets, args.precision_profiles, args.rounds)
        _measure_part(results, "precision", lambda: bench_precision.precision_results(
            bench_precision.precision_grid(tuple(pair), args.workload, plan, args.seed, out)))
    if "protocols" in wanted:
        only = [c.strip() for c in args.candidates.split(",") if c.strip()] or None
        _measure_part(results, "protocols", lambda: protocol_candidates(
            tuple(pair), args.workload, args.protocol_budget_min, args.seed, "1", only))
    if "hyperfine-aa" in wanted:
        _measure_part(results, "hyperfine-aa", lambda: bench_aa.hyperfine_aa(args.aa_rounds, libc=args.aa_libc or None,
                                                                             seed=args.seed))
    if "interference" in wanted:
        _measure_part(results, "interference", lambda: bench_interference.interference_bench(
            tuple(pair), args.workload, args.interference_budget_min, args.seed, "1", out))
    if "layout" in wanted:
        _measure_part(results, "layout", lambda: bench_layout.layout_bench(
            tuple(pair), args.workload, args.layout_budget_min, args.seed, "1", out, libc=args.aa_libc or None))
    if "alternation" in wanted:
        _measure_part(results, "alternation", lambda: bench_alternation.alternation_bench(
            args.alternation_windows, args.seed, "1", campaigns=args.alternation_campaigns))
        results["alternation_other_hosts"] = bench_alternation.other_hosts(
            previous, results["measured"]["alternation"]["host"])
    if "alternation-runs" in wanted:
        _measure_part(results, "alternation-runs", lambda: bench_alternation_runs.runs_bench(seed=args.seed))
    if "cost" in wanted:
        _measure_part(results, "cost", lambda: bench_cost.cost_bench())
    results["loadavg_after"] = os.getloadavg()[0]
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2, default=float))
    table = format_results(results)
    (out / "results.md").write_text(table + "\n")
    print(table)
    return 0

