"""`make bench`, interference: how much other work moves a lockstep pair, so that the thresholds by which
campaigns flag a trial or pair as measured during interference (quiet.py) come from data.

The bench pair (default glibc against scudo on small-loop, at the smoke profile's scale: tens of ms a pair)
runs as lockstep pairs on the trial CPU under conditions that take turns in randomized blocks, one pair per
condition and block:
- quiet: nothing else runs (the harness waits on the other CPU);
- other CPU at 25, 50 and 100% duty, same CPU at 10 and 25%: a load process (cpu_load.c beside it:
  allocation churn over 16 MiB, in 20 ms periods) pinned there, continued (SIGCONT) for its condition's
  pairs and stopped (SIGSTOP) otherwise;
- two lanes: a second lockstep pair of the same allocators runs on the other CPU at the same time (the
  protocol that would use both CPUs; both lanes' pairs are kept).
Every pair records the other processes' CPU time as campaigns do; stats/interference.py turns the pairs
into each condition's shift of the ratio and the thresholds.
"""
import os
import random
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analysis.errors import HeapcostError
from analysis.stats import interference

TOLERANCE = 0.0025  # a shift worth flagging: a quarter of the ±1% the timing protocol aims for


@dataclass(frozen=True)
class Condition:
    name: str
    placement: str  # "" quiet, "other" or "same" CPU
    duty: float
    two_lanes: bool = False


CONDITIONS = (
    Condition("quiet", "", 0.0),
    Condition("other CPU, 25%", "other", 0.25),
    Condition("other CPU, 50%", "other", 0.50),
    Condition("other CPU, 100%", "other", 1.0),
    Condition("same CPU, 10%", "same", 0.10),
    Condition("same CPU, 25%", "same", 0.25),
    Condition("two lanes", "other", 1.0, two_lanes=True),
)


def load_path() -> Path:
    from analysis.harness.process.build import build_c

    return build_c("heapcost-cpu-load", [Path(__file__).with_name("cpu_load.c")])


def other_cpu(trial_cpu: int) -> int:
    others = sorted(c for c in os.sched_getaffinity(0) if c != trial_cpu)
    if not others:
        raise HeapcostError("the interference bench needs two CPUs: one for the pairs, one for other work")
    return others[0]


class Loads:
    """A stopped load process per loaded condition; `running(condition)` continues it for one pair."""

    def __init__(self, conditions, trial_cpu: int, spare_cpu: int):
        self.procs = {}
        try:
            for c in conditions:
                if c.placement and not c.two_lanes:
                    cpu = trial_cpu if c.placement == "same" else spare_cpu
                    proc = subprocess.Popen([str(load_path()), "--cpu", str(cpu), "--duty", f"{c.duty:g}"],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                    os.kill(proc.pid, signal.SIGSTOP)
                    self.procs[c.name] = proc
        except BaseException:
            self.close()
            raise

    def start(self, c: Condition):
        if c.name in self.procs:
            os.kill(self.procs[c.name].pid, signal.SIGCONT)

    def stop(self, c: Condition):
        if c.name in self.procs:
            os.kill(self.procs[c.name].pid, signal.SIGSTOP)

    def close(self):
        for proc in self.procs.values():
            proc.kill()
            proc.wait()


def run_conditions(camp, baseline: str, other: str, workload: str, budget_s: float, seed: int,
                   conditions=CONDITIONS) -> tuple[pd.DataFrame, float]:
    """Blocks of one pair per condition, in random order, until the budget is spent; (pairs, seconds)."""
    from analysis.harness.timing.lockstep import run_pair

    rng = random.Random(seed)
    factor = camp.resolved[other].allocator.scale
    ta, tb = camp.trial(baseline, workload, factor), camp.trial(other, workload, factor)
    spare = other_cpu(camp.cpu)
    rows, started, block = [], time.perf_counter(), 0

    def pair(cpu, first, lane):
        row = run_pair(ta, tb, expected_a=None, expected_b=None, cpu=cpu, first=first,
                       pads=(rng.randrange(4096), rng.randrange(4096)))
        row["wall_s"] = max(float(row["wall_a_s"]), float(row["wall_b_s"]))
        row["lane"] = lane
        return row

    loads = Loads(conditions, camp.cpu, spare)
    try:
        while time.perf_counter() - started < budget_s:
            order = list(conditions)
            rng.shuffle(order)
            for c in order:
                first = "ab"[block % 2]
                loads.start(c)
                try:
                    if c.two_lanes:
                        second = {}
                        thread = threading.Thread(target=lambda: second.update(pair(spare, first, "second")))
                        thread.start()
                        got = [pair(camp.cpu, first, "first")]
                        thread.join()
                        got += [second] if second else []
                    else:
                        got = [pair(camp.cpu, first, "first")]
                finally:
                    loads.stop(c)
                for row in got:
                    rows.append({**row, "block": block, "condition": c.name, "placement": c.placement,
                                 "duty": c.duty})
            block += 1
    finally:
        loads.close()
    return pd.DataFrame(rows), time.perf_counter() - started


def interference_bench(allocators=("glibc", "scudo"), workload="small-loop", budget_min: float = 5.0,
                       seed: int = 1, force=None, out: Path | None = None) -> dict:
    """The interference part of results.json: every condition's effect and the thresholds."""
    from analysis.harness.process import quiet
    from analysis.harness.bench.campaign import bench_campaign

    baseline, other = allocators
    with bench_campaign(allocators, workload, seed, force, "interference") as camp:
        pairs, elapsed = run_conditions(camp, baseline, other, workload, budget_min * 60, seed)
        scale = camp.scale_of(camp.resolved[other].allocator.scale)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        pairs.to_csv(out / "interference_pairs.csv", index=False)
    effects = interference.effects(pairs)
    return {"allocators": list(allocators), "workload": workload, "scale": scale, "elapsed_s": elapsed,
            "pairs": int(len(pairs)), "effects": effects.to_dict("records"),
            "thresholds": interference.thresholds(effects, pairs, TOLERANCE),
            "in_use": {"same": {"flag_fraction": quiet.SAME_CPU_FRACTION, "min_s": quiet.SAME_CPU_MIN_S},
                       "other": {"flag_fraction": quiet.OTHER_CPUS_FRACTION, "min_s": quiet.OTHER_CPUS_MIN_S}}}


def format_interference(r: dict | None) -> list[str]:
    if not r:
        return []
    t = r["thresholds"]
    lines = ["", f"Interference: {r['allocators'][1]}/{r['allocators'][0]} on {r['workload']} as lockstep pairs "
             f"(scale {r['scale']:g}), conditions in randomized blocks, {r['pairs']} pairs in "
             f"{r['elapsed_s']:.0f} s. Others' CPU time as campaigns record it, as a share of the pairs' wall "
             "time, on the pairs' CPU and on the other CPU:", "",
             "| condition | pairs | others on the pairs' CPU | others on the other CPU | ratio shift against quiet "
             "[95% interval] | spread of the pairs against quiet |", "|---|---|---|---|---|---|"]
    for e in r["effects"]:
        quiet_row = e["condition"] == interference.QUIET
        shift = ("-" if quiet_row or e["shift"] != e["shift"] else
                 f"{e['shift']:+.2%} [{e['shift_low']:+.2%}, {e['shift_high']:+.2%}]")
        spread = "-" if quiet_row else f"{e['spread']:.2f}x"
        lines.append(f"| {e['condition']} | {e['n']} | {e['same_share']:.1%} | {e['other_share']:.1%} | {shift} | "
                     f"{spread} |")
    lines += ["", f"Per placement, the shift per unit of its recorded share beyond the quiet pairs' (a line through "
              f"the origin, weighted by the shifts' precision), and the share at which its 95% bound reaches "
              f"±{t['tolerance']:.2%}:", ""]
    names = {"same": "the pairs' CPU", "other": "the other CPU"}
    from analysis.harness.process import quiet

    now = {"same": (quiet.SAME_CPU_FRACTION, quiet.SAME_CPU_MIN_S),
           "other": (quiet.OTHER_CPUS_FRACTION, quiet.OTHER_CPUS_MIN_S)}
    for placement, p in sorted(t["placements"].items()):
        used = r["in_use"].get(placement, {})
        in_use_now = now.get(placement, (float("nan"), float("nan")))
        lines.append(f"- {names.get(placement, placement)}: {p['slope']:+.1%} per unit share (bound "
                     f"{p['slope_bound']:.1%}), from {p['conditions']} conditions: flag above {p['flag_fraction']:.1%} "
                     f"of the wall time (quiet {p['quiet_share']:.1%} + {p['fraction']:.1%}) and above {p['min_s']:.3f} s "
                     f"(the quiet pairs' 99th percentile); campaigns use {in_use_now[0]:.1%} and "
                     f"{in_use_now[1]:.3f} s (when measured: {used.get('flag_fraction', float('nan')):.1%} and "
                     f"{used.get('min_s', float('nan')):.3f} s)")
    return lines
