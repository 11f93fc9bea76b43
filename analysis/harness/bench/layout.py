"""`make bench`, layout: can a lockstep pair cancel the part of each process's time that comes from its own
address-space layout, and at what price?

On this machine in one speed regime, the two processes of a pair hardly vary together (bench/README.md): each
process's time carries its own effect, which pairing cannot cancel. Two ways to make the pair share it,
each tried against the campaigns' way, as conditions taking turns in randomized blocks (one pair per
condition, compared allocator and block; the roles alternate between blocks as in campaigns):
- "independent offsets" (campaigns): address-space randomization on, each process its own random
  environment padding (0-4095 bytes, which moves its stack);
- "one offset per pair": randomization on, both processes the same padding;
- "ASLR off": both processes started without address-space randomization (the driver's --no-aslr),
  each its own padding;
- "ASLR off, one offset per pair": without randomization and the same padding: the two processes' stacks
  and mappings as alike as two allocators allow, the layout still sampled over pairs by the padding.
Two comparisons run in every block: the bench pair (default glibc against scudo on small-loop, smoke scale)
and an A/A pair, the baseline against a preloaded copy of its own libc.so.6 (bench/aa.py), whose true
ratio is 1: a condition that narrows the intervals but moves the A/A ratio off 1 trades noise for bias.
"""
import math
import random
import time
from pathlib import Path

import pandas as pd

from analysis.errors import HeapcostError
from analysis.stats import layout

COPY = "glibc-copy"
PAD_SPREAD = 4096
CONDITIONS = (  # name, address-space randomization, one padding for both processes
    ("independent offsets", True, False),
    ("one offset per pair", True, True),
    ("ASLR off", False, False),
    ("ASLR off, one offset per pair", False, True),
)


def run_conditions(camp, baseline: str, others, workload: str, budget_s: float, seed: int) -> tuple[pd.DataFrame, float]:
    """Blocks of one pair per (condition, other allocator), in random order, until the budget is spent."""
    from analysis.harness.timing.lockstep import run_pair

    rng = random.Random(seed)
    factor = camp.resolved[others[0]].allocator.scale
    trials = {a: camp.trial(a, workload, factor) for a in (baseline, *others)}
    cells = [(c, o) for c in CONDITIONS for o in others]
    rows, started, block = [], time.perf_counter(), 0
    while time.perf_counter() - started < budget_s:
        order = list(cells)
        rng.shuffle(order)
        for (name, aslr, shared), other in order:
            pad = rng.randrange(PAD_SPREAD)
            pads = (pad, pad) if shared else (pad, rng.randrange(PAD_SPREAD))
            ta, tb = trials[baseline], trials[other]
            if block % 2:
                ta, tb = tb, ta
            row = run_pair(ta, tb, expected_a=None, expected_b=None, cpu=camp.cpu, first="ab"[(block // 2) % 2],
                           pads=pads, aslr=aslr)
            rows.append({**row, "condition": name, "block": block})
        block += 1
    return pd.DataFrame(rows), time.perf_counter() - started


def layout_bench(allocators=("glibc", "scudo"), workload="small-loop", budget_min: float = 4.0, seed: int = 1,
                 force=None, out: Path | None = None, libc: str | None = None) -> dict:
    """The layout part of results.json: every condition's interval, spread and correlation, per comparison."""
    from analysis.harness.bench.aa import running_libc
    from analysis.harness.bench.campaign import bench_campaign

    baseline, other = allocators
    if baseline != "glibc":
        raise HeapcostError("the layout bench's A/A pair preloads a copy of glibc: the baseline must be glibc")
    others = (other, COPY)
    with bench_campaign((baseline, *others), workload, seed, force, "layout",
                        extra_allocators=f"{COPY}={libc or running_libc()}") as camp:
        pairs, elapsed = run_conditions(camp, baseline, others, workload, budget_min * 60, seed)
        scale = camp.scale_of(camp.resolved[other].allocator.scale)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        pairs.to_csv(out / "layout_pairs.csv", index=False)
    rows = layout.conditions(pairs, baseline, order=[c[0] for c in CONDITIONS])
    return {"allocators": [baseline, other], "copy": COPY, "workload": workload, "scale": scale,
            "elapsed_s": elapsed, "pairs": int(len(pairs)), "unusable": int((pairs["status"] != "ok").sum()),
            "conditions": rows.to_dict("records")}


def format_layout(r: dict | None) -> list[str]:
    if not r:
        return []
    lines = ["", f"Layout: {r['allocators'][1]}/{r['allocators'][0]} and the A/A pair {r['copy']}/{r['allocators'][0]} "
             f"on {r['workload']} as lockstep pairs (scale {r['scale']:g}), layout conditions in randomized blocks, "
             f"{r['pairs']} pairs in {r['elapsed_s']:.0f} s ({r['unusable']} unusable):", "",
             "| comparison | layout condition | pairs | ratio [95% interval] | half-width | spread of log ratios | "
             "correlation of the two processes | A/A contains 1 |", "|---|---|---|---|---|---|---|---|"]
    for c in r["conditions"]:
        aa = c["allocator_b"] == r["copy"]
        if c["ratio"] != c["ratio"]:
            lines.append(f"| {c['allocator_b']} | {c['condition']} | {c['n']} | too few pairs | | | | |")
            continue
        lines.append(f"| {c['allocator_b']}/{r['allocators'][0]} | {c['condition']} | {c['n']} | {c['ratio']:.4f} "
                     f"[{c['ci_low']:.4f}, {c['ci_high']:.4f}] | ±{math.expm1(c['halfwidth']):.2%} | "
                     f"{c['spread']:.2%} | {c['corr']:.2f} | {('yes' if c['contains_1'] else 'no') if aa else '-'} |")
    return lines
