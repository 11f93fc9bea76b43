"""A small dataset with a known truth for the paper and dataset tests (no tests here).

Speed trials are SIMULATED (analysis/simulate.py, seeded) with known ratios; the callgrind counts are
SIMULATED with known per-free costs; the probe run and the seeds' figures are the real committed ones.
It lives in a temporary directory: nothing of it enters data/.
"""
import json
import shutil
from pathlib import Path

import pandas as pd

from analysis.stats import simulate
from analysis.paths import DATA_DIR

TRUE_RATIOS = {"glibc": 1.0, "jemalloc": 0.9, "jemalloc-junk-free": 0.99, "scudo": 1.3,
               "scudo-quarantine": 1.43}  # junk-free / jemalloc = 1.10, quarantine / scudo = 1.10
FAMILY = {"glibc": "glibc", "jemalloc": "jemalloc", "jemalloc-junk-free": "jemalloc", "scudo": "scudo",
          "scudo-quarantine": "scudo"}
WORKLOADS = {"small-loop": 0.4, "pow2-churn": 0.6}
# instructions per free, exact: the ratio of each allocator to glibc is known
PER_FREE = {"glibc": 100.0, "jemalloc": 80.0, "jemalloc-junk-free": 160.0, "scudo": 150.0, "scudo-quarantine": 300.0}
FREES = {"small-loop": 400_000, "pow2-churn": 131_073}


def real_probe_run() -> Path:
    """The newest committed probe run that probed every simulated allocator (a run of brought allocators
    alone would leave the simulated ones without a security score)."""
    import csv

    runs = sorted(p.parent for p in (DATA_DIR / "runs").glob("*/probes.csv"))
    covering = [r for r in runs
                if set(TRUE_RATIOS) <= {row["allocator"] for row in csv.DictReader(open(r / "probes.csv"))}]
    assert covering, "no committed probe run in data/runs probed every simulated allocator"
    return covering[-1]


def make_dataset(root: Path, seed: int = 11, n_blocks: int = 12, probed=None) -> Path:
    """probed: keep the probe run's rows (probes.csv, primitives.csv) of these allocators alone; None keeps
    every allocator it probed. Scoring each probed allocator costs about a quarter of a second per
    computation, and a test that reads no other allocator's score need not pay for the rest."""
    data = Path(root) / "data"
    runs = data / "runs"
    probe = real_probe_run()
    shutil.copytree(probe, runs / probe.name)
    if probed is not None:
        keep_probed(runs / probe.name, set(probed))
    machine = json.loads((probe / "machine.json").read_text())
    if (DATA_DIR / "literature").is_dir():
        shutil.copytree(DATA_DIR / "literature", data / "literature")

    add_time_run(data, "20990101T000000Z-time-sim", TRUE_RATIOS, seed, n_blocks, machine)
    allocators = {a: {"family": FAMILY[a], "description": f"{a} (simulated)", "origin": {"kind": "simulated"},
                      "defences": []} for a in TRUE_RATIOS}
    workloads = {w: {"kind": "c", "description": f"{w} (simulated)", "seed": "004_x.txt", "scale_note": "sim"}
                 for w in WORKLOADS}

    cg_id = "20990101T010000Z-callgrind-sim"
    c = runs / cg_id
    c.mkdir()
    rows = []
    for w, frees in FREES.items():
        for a, cost in PER_FREE.items():
            ins = int(cost * frees)
            rows.append({"run_id": cg_id, "workload": w, "allocator": a, "scale": 0.01, "status": "ok",
                         "reason": "", "instructions": ins, "data_reads": ins // 4, "data_writes": ins // 8,
                         "d1_read_misses": ins // 1000, "d1_write_misses": ins // 2000, "malloc_calls": frees + 1,
                         "free_calls": frees, "calloc_calls": 0, "realloc_calls": 0, "malloc_lib": "sim"})
    # a slow allocator counted at a smaller scale, with the baseline at that scale beside it
    for a, cost in (("glibc", 200.0), ("tcmalloc-debug", 2000.0)):
        rows.append({"run_id": cg_id, "workload": "small-loop", "allocator": a, "scale": 0.0001, "status": "ok",
                     "reason": "", "instructions": int(cost * 4000), "data_reads": 1, "data_writes": 1,
                     "d1_read_misses": 1, "d1_write_misses": 1, "malloc_calls": 4001, "free_calls": 4000,
                     "calloc_calls": 0, "realloc_calls": 0, "malloc_lib": "sim"})
    rows.append({"run_id": cg_id, "workload": "small-loop", "allocator": "efence", "scale": 0.01,
                 "status": "missing", "reason": "crashed under valgrind (simulated)", "free_calls": 400_000})
    counts = pd.DataFrame(rows)
    for col in ("instructions", "data_reads", "data_writes", "d1_read_misses", "d1_write_misses", "malloc_calls",
                "free_calls", "calloc_calls", "realloc_calls"):
        counts[col] = counts[col].astype("Int64")
    counts.to_csv(c / "counts.csv", index=False)
    (c / "machine.json").write_text(json.dumps(machine))
    (c / "run.json").write_text(json.dumps({"format": "heapcost-run/1", "run_id": cg_id, "kind": "callgrind",
                                            "status": "complete", "params": {"profile": "sim"},
                                            "allocators": allocators, "workloads": workloads}))
    return data


def keep_probed(run: Path, allocators: set) -> None:
    """A probe run's tables reduced to the rows of `allocators` (each line kept byte for byte)."""
    import csv

    for name in ("probes.csv", "primitives.csv"):
        path = run / name
        if not path.is_file():
            continue
        lines = path.read_text().splitlines(keepends=True)
        assert len(list(csv.reader(lines))) == len(lines), f"{name} has a field over several lines"
        column = next(csv.reader(lines[:1])).index("allocator")
        path.write_text("".join([lines[0]] + [line for line in lines[1:]
                                             if next(csv.reader([line]))[column] in allocators]))


def add_time_run(data: Path, run_id: str, ratios: dict, seed: int, n_blocks: int, machine: dict | None = None,
                 profile: str = "sim", workloads: dict | None = None) -> Path:
    """A complete simulated time run in data/runs/<run_id>/ with the given true ratios (glibc = 1)."""
    workloads = workloads or WORKLOADS
    sc = simulate.Scenario(ratios=ratios, workloads=workloads, n_blocks=n_blocks)
    trials = simulate.simulate_trials(sc, seed)
    trials["run_id"] = run_id
    trials["loadavg1"] = 1.5
    allocators = {a: {"family": FAMILY.get(a, a), "description": f"{a} (simulated)", "origin": {"kind": "simulated"},
                      "defences": []} for a in ratios}
    described = {w: {"kind": "c", "description": f"{w} (simulated)", "seed": "004_x.txt", "scale_note": "sim"}
                 for w in workloads}
    t = data / "runs" / run_id
    t.mkdir(parents=True)
    trials.to_csv(t / "trials.csv", index=False)
    (t / "machine.json").write_text(json.dumps(machine or {}))
    (t / "run.json").write_text(json.dumps({
        "format": "heapcost-run/1", "run_id": run_id, "kind": "time", "status": "complete",
        "params": {"profile": profile, "allocators": list(ratios), "workloads": list(workloads)},
        "started_utc": "2099-01-01T00:00:00Z", "ended_utc": "2099-01-01T00:10:00Z", "seed": seed,
        "probe_iters": 1000, "profile": {"scale": 1.0, "warmups": 1},
        "allocators": allocators, "workloads": described}))
    return t


def add_lockstep_run(data: Path, run_id: str, ratios: dict, seed: int, n_pairs: int = 40,
                     workload: str = "dom-churn") -> Path:
    """A complete simulated lockstep run: pairs.csv of each allocator against glibc on one workload."""
    frames = []
    for i, (alloc, ratio) in enumerate(sorted(ratios.items())):
        pairs = simulate.simulate_pairs(ratio, n_pairs, seed + i, workload=workload, baseline="glibc", other=alloc)
        pairs["maxrss_a_kb"], pairs["maxrss_b_kb"] = 50_000, int(50_000 * ratio)
        frames.append(pairs)
    pairs = pd.concat(frames, ignore_index=True).assign(run_id=run_id)
    pairs["seq"] = range(len(pairs))
    t = data / "runs" / run_id
    t.mkdir(parents=True)
    pairs.to_csv(t / "pairs.csv", index=False)
    (t / "run.json").write_text(json.dumps({
        "format": "heapcost-run/1", "run_id": run_id, "kind": "time", "status": "complete",
        "params": {"profile": "quick", "protocol": "lockstep", "allocators": ["glibc", *ratios]},
        "started_utc": "2099-01-04T00:00:00Z", "ended_utc": "2099-01-04T00:10:00Z"}))
    return t


def probe_rows_for(alloc, losses: dict, n=20):
    """One row per probe at size 64: `missed` in round(loss * n) of n processes, caught in the rest."""
    out = []
    for probe, loss in losses.items():
        k = round(loss * n)
        out.append({"allocator": alloc, "probe": probe, "size": 64, "outcome": "missed" if k else "caught",
                    "outcomes": f"missed={k} caught={n - k}", "trials": n})
    return out
