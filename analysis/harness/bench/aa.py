"""`make bench`, A/A through hyperfine: is the Welch interval on hyperfine's runs as honest as it is narrow?

The precision grid (bench/precision.py) compares half-widths; a narrow interval is worth something only if it
covers the truth. Here the truth is known: the baseline against a preloaded copy of its own library (the
ratio is one), each as the campaign's own trial at the quick profile's scale, in hyperfine's default run,
for every workload and round. About 5% of 95% intervals should exclude one. heapcost's own A/A cells
(lockstep pairs) are in the dataset and tabulated by the `aa` part.
"""
import math
import tempfile
from pathlib import Path

import numpy as np

from analysis.errors import HeapcostError
from analysis.harness.bench.precision import hyperfine_commands, hyperfine_json
from analysis.stats import estimators as stats

BASELINE, COPY = "glibc", "glibc-copy"
WORKLOADS = ("small-loop", "pow2-churn", "dom-churn", "pareto")


def running_libc() -> str:
    """The path of the libc.so.6 this process runs on (the baseline's library), from /proc/self/maps."""
    try:
        for line in Path("/proc/self/maps").read_text().splitlines():
            path = line.split()[-1]
            if path.startswith("/") and Path(path).name == "libc.so.6":
                return path
    except OSError:
        pass
    raise HeapcostError("cannot find the libc.so.6 this process runs on; give --aa-libc <path>")


def _campaign(workload: str, libc: str, runs_dir: Path, seed: int):
    from analysis.harness.timing import measure

    return measure.Campaign(profile="quick", allocators=f"{BASELINE},{COPY}", extra_allocators=f"{COPY}={libc}",
                            workloads=workload, blocks=1, seed=seed, runs_dir=runs_dir, progress=False, force="1")


def aa_cell(workload: str, libc: str, seed: int) -> dict:
    """One hyperfine default run of the baseline and its copy on a workload, with the Welch interval."""
    with tempfile.TemporaryDirectory(prefix="heapcost-bench-") as tmp:
        camp = _campaign(workload, libc, Path(tmp) / "runs", seed)
        factor = camp.resolved[COPY].allocator.scale
        hf, elapsed = hyperfine_json(hyperfine_commands(camp, (BASELINE, COPY), workload, factor, Path(tmp)))
        scale = camp.scale_of(factor)
    times = {aid: np.asarray(r["times"]) for aid, r in zip((BASELINE, COPY), hf["results"])}
    ratio, low, high = stats.welch_ratio_interval(times[COPY], times[BASELINE])
    return {"workload": workload, "scale": scale, "seed": seed, "runs": {a: int(len(t)) for a, t in times.items()},
            "elapsed_s": elapsed, "ratio": ratio, "ci": [low, high], "halfwidth": (high - low) / 2 / ratio,
            "excludes_1": bool(low > 1 or high < 1)}


def widening_for_coverage(cells: list[dict], coverage: float = 0.95) -> float:
    """How many times wider the cells' intervals (on the log scale) would have to be for `coverage` of them
    to contain the true ratio 1: the `coverage` quantile of |log ratio| / log half-width. About 1 for
    honest 95% intervals; a post-hoc calibration from these cells, itself uncertain with few of them."""
    z = [abs(math.log(c["ratio"])) / (math.log(c["ci"][1] / c["ci"][0]) / 2) for c in cells
         if c["ci"][1] > c["ci"][0] > 0]
    return float(np.quantile(z, coverage)) if z else float("nan")


def summarize(cells: list[dict]) -> dict:
    """How many of the cells' intervals exclude one, overall and per workload."""
    excl = [c for c in cells if c["excludes_1"]]
    by_workload = {}
    for c in cells:
        w = by_workload.setdefault(c["workload"], {"cells": 0, "exclude_1": 0, "ratios": [], "halfwidths": []})
        w["cells"] += 1
        w["exclude_1"] += int(c["excludes_1"])
        w["ratios"].append(c["ratio"])
        w["halfwidths"].append(c["halfwidth"])
    return {"cells": len(cells), "exclude_1": len(excl), "widening_for_95": widening_for_coverage(cells),
            "share_excluding_1": len(excl) / len(cells) if cells else float("nan"),
            "median_halfwidth": float(np.median([c["halfwidth"] for c in cells])) if cells else float("nan"),
            "by_workload": {w: {"cells": v["cells"], "exclude_1": v["exclude_1"],
                                "median_ratio": float(np.median(v["ratios"])),
                                "median_halfwidth": float(np.median(v["halfwidths"]))}
                            for w, v in by_workload.items()}}


def hyperfine_aa(rounds: int = 10, workloads=WORKLOADS, libc: str | None = None, seed: int = 1) -> dict:
    """`rounds` A/A cells per workload, the workloads taking turns within each round."""
    if rounds < 1:
        raise HeapcostError(f"--aa-rounds must be at least 1, got {rounds}")
    libc = libc or running_libc()
    if not Path(libc).is_file():
        raise HeapcostError(f"--aa-libc {libc}: no such file")
    cells = [aa_cell(w, libc, seed + r) for r in range(rounds) for w in workloads]
    return {"baseline": BASELINE, "copy": f"{COPY}={libc}", "tool": "hyperfine default run, Welch interval",
            **summarize(cells), "rows": cells}


def resummarized(result: dict | None) -> dict:
    """A stored part with its summary computed again from its rows (the rows are what was measured)."""
    if not result or not result.get("rows"):
        return result or {}
    return {**result, **summarize(result["rows"])}


def format_aa(result: dict) -> list[str]:
    """results.md lines: the hyperfine A/A summary beside heapcost's own A/A table."""
    result = resummarized(result)
    if not result.get("cells"):
        return []
    lines = ["", f"A/A through hyperfine: {result['baseline']} against {result['copy']} ({result['tool']}, "
                 f"quick scale)", "",
             "| workload | cells | intervals excluding 1 | median ratio | median half-width |", "|---|---|---|---|---|"]
    for w, v in result["by_workload"].items():
        lines.append(f"| {w} | {v['cells']} | {v['exclude_1']} | {v['median_ratio']:.4f} | "
                     f"±{v['median_halfwidth']:.2%} |")
    lines.append(f"| all | {result['cells']} | {result['exclude_1']} ({result['share_excluding_1']:.0%}; about 5% "
                 f"expected) | | ±{result['median_halfwidth']:.2%} |")
    k = result.get("widening_for_95")
    if k == k and k is not None:
        lines += ["", f"For 95% of these intervals to contain 1 they would have to be {k:.2f} times as wide (the 95th "
                      "percentile of |log ratio| / log half-width over the cells: a calibration after the fact, "
                      "uncertain with this many cells)."]
    return lines


def calibrated_ratios(grid: list[dict], widening: float) -> list[str]:
    """The precision grid's ratios against Welch half-widths widened by the A/A calibration."""
    if not grid or not widening or widening != widening:
        return []
    lines = ["", f"The precision grid against hyperfine's Welch half-widths widened {widening:.2f}-fold (the A/A "
                 "calibration above):", "", "| profile | budget | ratio (ours / widened Welch) |", "|---|---|---|"]
    for e in grid:
        budget = "hyperfine default" if e["budget_s"] is None else f"{e['budget_s']:g} s"
        lines.append(f"| {e['profile']} | {budget} | {e['halfwidth_ratio'] / widening:.2f} |")
    return lines
