"""Running probes/primitive_sequences.c under an allocator: the rows of primitives.csv for one cell
(allocator, bug class, attacker capability).

The driver forks one child per sequence, so one process runs a whole batch; the cell's SEQUENCES are
split into batches of BATCH so that a slow allocator's batch stays well inside the runner's timeout (a
batch cut short still gives its finished sequences, and the row says how many ran). Time per allocator,
measured with the defaults (1,000 sequences a cell, 9 cells; primitives.csv's cpu_s has each cell's CPU time): about
0.2 ms of CPU a sequence under glibc, 2 ms under efence, whose every allocation is a system call.
"""
from analysis.stats import primitives

SEQUENCES = 1000  # per (allocator, bug class, capability): the floor
BATCH = 250
SEED = 1
# The control (no bug) writes nothing an attacker chose, so one capability is enough for it.
CELLS = tuple((c, k) for c in primitives.BUG_CLASSES[:-1] for k in primitives.CAPABILITIES) + (("control", "none"),)


def batches(sequences: int, batch: int = BATCH) -> list[tuple[int, int]]:
    """(first, count) of each batch covering sequences 0..sequences-1."""
    return [(first, min(batch, sequences - first)) for first in range(0, sequences, batch)]


def run_cell(target, binary, bug_class: str, capability: str, *, sequences: int | None = None,
             batch: int | None = None, seed: int = SEED, timeout: float = 30.0, launch) -> list[dict]:
    """The primitives.csv rows (without run_id) of one cell. `launch(argv, target, timeout=)` returns
    (LaunchResult, stdout, stderr, wrong-malloc complaint) as probes._launch does (injected in tests)."""
    sequences, batch = sequences or SEQUENCES, batch or BATCH
    base = {"allocator": target.id, "bug_class": bug_class, "capability": capability, "seed": seed}
    found, complaint, cpu_s = [], "", 0.0
    for first, count in batches(sequences, batch):
        res, stdout, _stderr, wrong = launch([str(binary), bug_class, capability, str(first), str(count), str(seed)],
                                             target, timeout=timeout)
        if wrong:
            complaint = f"wrong malloc: {wrong}"
            break
        if res.status == "spawn-failed":
            complaint = f"spawn failed: {res.error or 'unknown'}"
            break
        cpu_s += (res.user_s or 0.0) + (res.sys_s or 0.0)  # the driver and its waited-for children
        found.extend(primitives.parse_sequences(stdout))
    if complaint or not found:
        return [{**base, "primitive": primitives.ANY, "sequences": 0, "count": 0,
                 "detail": complaint or "no sequence finished (the driver died before its first)"}]
    return [{**base, **row, "cpu_s": cpu_s, "detail": ""} for row in primitives.cell_rows(found)]


def unavailable_rows(target, why: str, seed: int = SEED) -> list[dict]:
    return [{"allocator": target.id, "bug_class": c, "capability": k, "primitive": primitives.ANY, "seed": seed,
             "sequences": 0, "count": 0, "detail": why} for c, k in CELLS]



def cell(job) -> list[dict]:
    """The rows of one job, run in a worker: (target, driver binary, why not runnable ('' if it is), (bug class,
    capability), timeout, the runner's launch function)."""
    target, binary, why, (bug_class, capability), timeout, launch = job
    if why:
        return [r for r in unavailable_rows(target, why)
                if (r["bug_class"], r["capability"]) == (bug_class, capability)]
    return run_cell(target, binary, bug_class, capability, timeout=timeout, launch=launch)


def run_cells(args, run_dir, run_id: str, targets, probes, runner) -> None:
    """The primitive-sequences cells of a probe run into its primitives.csv (cells already there are kept:
    a resumed run goes on where it stopped). `runner`: the probe runner's (skip, build, launch, results)
    functions (analysis/harness/security/probes.py), passed in so that this module does not import it back."""
    from analysis.contract import runstore
    from analysis.contract.schema import PRIMITIVE_COLUMNS

    skip, build, launch, results = runner
    if all(p.kind == "primitives" for p in probes):
        _drop_empty_probes_csv(run_dir)
    probes = [p for p in probes if p.kind == "primitives"]
    if not probes:
        return
    table = runstore.AppendTable(run_dir / "primitives.csv", PRIMITIVE_COLUMNS)
    done = {(r["allocator"], r["bug_class"], r["capability"]) for r in table.rows()}
    jobs = []
    for target in targets:
        for probe in probes:
            why = skip(probe, target)
            binary = None if why else build(probe.source, target)  # built before the workers start (binary_for)
            jobs += [(target, binary, why, c, args.timeout, launch) for c in CELLS if (target.id, *c) not in done]
    try:
        for rows in results(jobs, args.jobs, cell=cell):
            for r in rows:
                table.append({"run_id": run_id, **{k: round(v, 4) if isinstance(v, float) else v
                                                   for k, v in r.items()}})
            r = next(r for r in rows if r["primitive"] == primitives.ANY)
            print(f"{r['allocator']:<20} primitives {r['bug_class'] + '/' + r['capability']:<26} "
                  f"any {r['count']}/{r['sequences']} {r.get('detail', '')[:60]}", flush=True)
    finally:
        table.close()


def _drop_empty_probes_csv(run_dir) -> None:
    """A run of the primitives alone leaves no probes.csv: the paper's security section takes the newest probe
    run holding one as the reported run, and a header without rows would hide every other."""
    path = run_dir / "probes.csv"
    if path.is_file() and len(path.read_text().splitlines()) <= 1:
        path.unlink()
