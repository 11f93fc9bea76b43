"""The registered programs run: `python -m analysis cost-check measure` runs a registration's programs against the
baseline under its configurations into data/runs/ (in turns from outside where a program allows it, of 1 ms
unless told otherwise: publish/results/cost_turns.py), and `measure_program` one program of a user's in a scratch
folder, nothing published. publish/results/cost_check.py reads the runs against the registered predictions."""
from pathlib import Path

import pandas as pd

from analysis.contract import dataset
from analysis.errors import HeapcostError
from analysis.paths import file_sha256
from analysis.publish.results import cost_check
from analysis.publish.results.cost_check import BASELINE, MIN_BLOCKS, REGISTERED


def measure(extra_allocators: str = "", blocks: int = 8, folder: Path | None = None, runs_dir: Path | None = None,
            force=None, names=None, programs_set: str = "first", protocol: str = "lockstep",
            allocators=None, slice_us: int | None = None) -> Path:
    """Run the programs of a registration (default this host's processor's of the set `programs_set`) against the
    baseline; a configuration it predicts that is neither in the catalogue nor brought is left out and named.
    `protocol` "trials" runs each program alone in randomized blocks instead of in turns, so that each run's
    minor faults, system time and peak memory are recorded (trials.csv): what a miss comes from; `allocators`
    then names the configurations (default the registration's), knock-outs included; `slice_us` each turn's length
    (default alternation.SLICE_US, the check's: cost_turns.py reads the others); `runs_dir` where the runs go."""
    from analysis.harness.workloads import cost_inputs, cost_programs
    from analysis.harness.allocators import catalog
    from analysis.harness.timing.measure import Campaign, RUNS_DIR

    if folder is None:
        processor = cost_check.this_processor()
        folder = cost_check.folder_of(processor, programs=programs_set)
        if not (folder / REGISTERED).is_file():
            raise HeapcostError(f"no predicted costs are registered on this host's processor ({processor}) for the "
                                f"{programs_set} set of programs: register them here first (python -m analysis cost-check register "
                                f"--programs-set {programs_set}), commit, then measure")
    reg = cost_check.load(folder)
    wanted = list(allocators or reg["registration"]["allocators"])
    if protocol == "trials" and BASELINE not in wanted:
        wanted = [BASELINE, *wanted]
    brought = {item.partition("=")[0] for item in extra_allocators.split(",") if item.strip()}
    # the catalogue's own configurations, but for those it only knows of (origin brought: built by hand elsewhere)
    known = {a for a, entry in catalog.load_catalog().items() if (entry.origin or {}).get("kind") != "brought"}
    missing = [a for a in wanted if a not in known and a not in brought]
    if missing:
        if len(missing) == len(wanted):
            raise HeapcostError(f"the registration predicts {', '.join(missing)}, which the catalogue does not build: "
                                "bring each as EXTRA_ALLOCATORS=name=/path/lib.so (the library the per-call runs used)")
        print(f"not measured (neither in the catalogue nor brought; bring each as EXTRA_ALLOCATORS=name=/path/lib.so, "
              f"the library the per-call runs used): {', '.join(missing)}")
    registered = {p["name"]: p for p in reg["program"]}
    programs = cost_programs.chosen(names or list(registered))
    inputs = cost_inputs.write_inputs(cost_inputs.INPUTS_DIR, programs)
    for p in programs:
        if p.input and file_sha256(inputs[p.input]) != registered[p.name]["input_sha256"]:
            raise HeapcostError(f"{p.name}'s input differs from the registered one (its sha256): this host makes "
                                "other bytes, so its runs would not check the registered predictions")
    extra = ",".join(x for x in extra_allocators.split(",") if x.strip() and x.partition("=")[0] in wanted)
    camp = Campaign(profile="quick", allocators=",".join(a for a in wanted if a in known and a not in brought),
                    extra_allocators=extra, extra_workloads=cost_programs.extra_workloads(programs, inputs),
                    blocks=blocks, runs_dir=runs_dir or RUNS_DIR, force=force, protocol=protocol, slice_us=slice_us)
    return camp.run()


def measure_program(command: str, allocators, extra_allocators: str = "", blocks: int = 6,
                    baseline: str = BASELINE, force=None) -> pd.DataFrame:
    """One program measured against the baseline under `allocators`, in a scratch runs folder (nothing is
    published): a row per allocator with the measured ratio, or why it has none (the program cannot take
    turns from outside: threads, waits)."""
    import tempfile

    from analysis.harness.timing.measure import Campaign
    from analysis.publish.results import per_call

    if blocks < MIN_BLOCKS:
        raise HeapcostError(f"blocks must be at least {MIN_BLOCKS} (a cell's estimate needs 5 windows), not {blocks}")
    name = "your-program"
    with tempfile.TemporaryDirectory(prefix="heapcost-check-") as tmp:
        runs_dir = Path(tmp) / "runs"
        camp = Campaign(profile="quick", allocators=",".join(allocators), extra_allocators=extra_allocators,
                        extra_workloads=f"{name}={command}", blocks=blocks, runs_dir=runs_dir, force=force,
                        progress=False)
        run_dir = camp.run()
        ds = dataset.Dataset(runs_dir)  # a scratch folder: read here only, not kept for the process
        fit = (ds.info(Path(run_dir).name).get("alternation") or {}).get(name, {})
        cells = per_call.measured_cells(ds, baseline, {name})
        rows = []
        for allocator in [a.id for a in camp.allocs if a.id != baseline]:
            got = cost_check.measured_ratio(cells, ds, name, allocator, baseline)
            rows.append({"allocator": allocator, "measured": got[0] if got else None,
                         "low": got[1] if got else None, "high": got[2] if got else None,
                         "why": "" if got else (fit.get("why") or "no window measured it")})
    return pd.DataFrame(rows, columns=["allocator", "measured", "low", "high", "why"])
