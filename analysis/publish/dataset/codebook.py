"""data/README.md, the dataset's codebook: every table and column with its meaning, unit and how it
was measured, generated from the Table Schemas (analysis/contract/schema.py) and
from the files present. Never edit data/README.md by hand: `python -m analysis dataset` rewrites it."""
import re
from collections import defaultdict
from pathlib import Path

import pandas as pd

from analysis import __version__
from analysis.contract import dataset
from analysis.publish.dataset.datapackage import DATASET_NAME, dataset_files, run_folders, run_machines
from analysis.paths import DATA_DIR
from analysis.contract.schema import LITERATURE_SCHEMAS, TABLE_SCHEMAS

HOW_MEASURED = {
    "trials.csv": "Speed runs (`python -m analysis measure`, kind `time`). Each row is one fresh process of a "
                  "workload under one allocator, started by heapcost's launcher, in randomized complete blocks "
                  "after a warm-up block; a calibrated spin loop is timed just before and after every trial.",
    "counts.csv": "Instruction-count runs (`python -m analysis measure --mode callgrind`). One row per workload "
                  "and allocator: valgrind's callgrind over every process of the workload at a reduced scale, with "
                  "a simulated cache; call counts come from a separate counting run under glibc.",
    "probes.csv": "Heap-misuse probes (`python -m analysis probe`). One row per allocator, probe and block "
                  "size: each probe is a small C or C++ program that commits one misuse, run in fresh sandboxed "
                  "processes, its outcome classified from exit status, signal, stderr and what the program "
                  "observed (analysis/harness/security/probe_verdict.py).",
    "techniques.csv": "Known exploitation techniques (`python -m analysis probe --techniques DIR`): programs that "
                      "each carry out one published heap technique and assert its own success (how2heap's "
                      "glibc_2.36 folder), brought by the user and built by hand, never shipped. One row per "
                      "technique and allocator: the program run in fresh sandboxed processes under the allocator "
                      "(malloc checked to come from its library), stdin from /dev/null, with a timeout; each run "
                      "classified from its exit status, signal and stderr (analysis/harness/security/technique_verdict.py).",
    "pairs.csv": "Lockstep pairs (`python -m analysis measure --protocol lockstep`, kind `time`). One row per "
                 "process pair: the baseline's process (A) and another allocator's (B) on the same C workload, "
                 "alive at once, pinned to one CPU and taking turns of about a millisecond of their own work "
                 "under a token, so both run in the same speed regime of that CPU; each reports its own active "
                 "time. Statistics use the ratio active_b_s / active_a_s of each pair (analysis/stats/paired.py).",
    "store_sequence.csv": "The store sequences a poisoning free can execute, timed alone (`python -m analysis "
                          "mechanism`, kind `mechanism`; analysis/harness/mechanisms/store_sequence.c). One row per "
                          "measurement: many repetitions of one sequence back to back on one working set and size, "
                          "pinned to one CPU, timed with CLOCK_MONOTONIC; every cell once per block, a block's "
                          "groups and each group's sequences in a fresh random order, after a warm-up block that "
                          "calibrates the repetitions. Statistics over blocks: analysis/stats/store_sequence.py.",
    "profiles.csv": "Allocation profiles of heapcost's own workloads (`python -m analysis profile --workloads "
                    "...`, kind `profile`; analysis/harness/workloads/profile.py). One row per workload and quantity, and per "
                    "size class for the quantities given by class: each workload run as a time run runs it under "
                    "the system glibc, once with the counting shim preloaded (analysis/harness/workloads/"
                    "allocprofile.c), once under strace -f, then timed with nothing preloaded. The profiles "
                    "predict the debated cells from per-call costs (analysis/publish/debates/"
                    "per_call_prediction.py).",
}

RUN_FILES = {
    "run.json": "The run's parameters (profile, allocators, workloads, seed), heapcost's version and git commit, "
                "start and end time (UTC), status (`complete` or not), each allocator's catalogue entry as used "
                "(libraries, environment, claimed defences) and the workloads' expected checksums.",
    "machine.json": "The machine: kernel, OS, CPU model and count, memory, what is known of the clock (whether "
                    "cpufreq is exposed, boost, virtualization, whether perf counters work), glibc, Python and gcc "
                    "versions, ASLR and transparent-hugepage settings, the load average when the run started. "
                    "Newer runs add the CPU family, model number and stepping, `host` (the host identity and its "
                    "fingerprint: analysis/contract/host.py; older runs' are computed from what they record) and "
                    "`clock_lock` (one entry per session: requested, locked, what it did and the values it held). "
                    "Newer runs also record `machine_id`, the machine that measured, meaning this boot of this "
                    "computer: 12 hex digits of a hash of the kernel's boot id "
                    "(/proc/sys/kernel/random/boot_id), never the boot id itself, so a reboot is a new machine "
                    "(`merge` refuses anything but 12 lowercase hex digits there). Runs without it take "
                    "(processor kind, kernel build) as their machine, which may be several virtual machines "
                    "that booted that kernel on that kind (see Machines).",
    "*.ipynb": "The executed notebook that ran the measurement (papermill), with its parameters and output.",
    "disassembly/*.txt": "Speed and callgrind runs: for each library the run identifies (run.json's allocators' "
                         "`libraries`, whose `disassembly` names its file), the instructions around each `rep "
                         "stos` and each call to memset, from `objdump -d -C` (analysis/harness/mechanisms/code_census.py): "
                         "the library's counts, then windows under their symbol, those filling a constant "
                         "non-zero byte (a poisoning) first; the heading says how many windows were cut.",
}


def _table(fields: list[dict]) -> list[str]:
    lines = ["| column | type | unit | meaning | constraints |", "|---|---|---|---|---|"]
    for f in fields:
        cons = f.get("constraints") or {}
        c = ", ".join(f"{k}: {', '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in sorted(cons.items()))
        desc = f.get("description", "").replace("|", "\\|")
        lines.append(f"| `{f['name']}` | {f['type']} | {f.get('unit', '')} | {desc} | {c} |")
    return lines


def _quiet(ds, run: str) -> tuple[str, str, str]:
    """Of a speed run's trials and pairs: the median 1-minute load, the others' CPU time over the wall time
    (total over total: /proc/stat counts in 10 ms ticks; a pair's wall time is its longer process's) and the
    rows flagged as interfered; '' where not recorded."""
    columns = ["loadavg1", "other_cpu_s", "wall", "interfered"]
    tables = [pd.DataFrame(columns=columns)]
    for name, walls in (("trials.csv", ["wall_s"]), ("pairs.csv", ["wall_a_s", "wall_b_s"])):
        table = ds.table(run, name, columns={*columns, *walls})  # the columns used, not the whole table
        if table is not None:
            tables.append(table.assign(wall=table.reindex(columns=walls).max(axis=1)).reindex(columns=columns))
    rows = pd.concat(tables, ignore_index=True)
    loads = pd.to_numeric(rows["loadavg1"], errors="coerce").dropna()
    timed = rows.dropna(subset=["other_cpu_s", "wall"])
    judged = pd.to_numeric(rows["interfered"], errors="coerce").dropna()
    return (f"{loads.median():.2f}" if len(loads) else "",
            f"{timed['other_cpu_s'].sum() / timed['wall'].sum():.1%}" if timed["wall"].sum() > 0 else "",
            f"{int(judged.sum())} of {len(judged)}" if len(judged) else "")


RUN_START = re.compile(r"(\d{4})(\d{2})(\d{2})T\d{6}Z")
MACHINES_INTRO = (
    "Each run's machine, by processor kind (analysis/contract/host.py). A machine is one boot of one computer: "
    "`M-` names one identified by its machine.json's `machine_id`, a hash of the kernel's boot id. `K-` names "
    "the machine of runs that recorded no boot id: their processor kind and kernel build, which may be several "
    "virtual machines that booted that kernel on that kind. A run that did not record its CPU family, model "
    "number and stepping joins the one kind that did with the same model name and frequency, where the "
    "dataset has exactly one. First and last run: the UTC dates of the machine's earliest and latest run, "
    "from their ids. `datapackage.json` gives each run's machine.json the same `machine` and `processor`.")


def _cell(text) -> str:
    """Text for a Markdown table cell: its pipes escaped."""
    return str(text).replace("|", "\\|")


def run_date(run_id: str) -> str:
    """The UTC date a run started (YYYY-MM-DD), read from its id's prefix; '' for an id without one."""
    start = RUN_START.match(run_id)
    return "-".join(start.groups()) if start else ""


def _machine_row(machine, runs: list[str]) -> str:
    identified = "yes, one boot" if machine.identified else "no: kind and kernel build"
    return (f"| `{machine.name}` | {identified} | {_cell(machine.kernel or 'not recorded')} | {len(runs)} | "
            f"{run_date(runs[0])} | {run_date(runs[-1])} |")


def machine_section(data_dir: Path) -> list[str]:
    """The codebook's Machines section: under each processor kind (sorted), a row per machine with its runs,
    machines in the order of their first run."""
    runs_of = defaultdict(list)
    for run, machine in sorted(run_machines(data_dir).items()):
        runs_of[machine].append(run)
    out = ["", "## Machines", "", MACHINES_INTRO]
    if not runs_of:
        return out + ["", "(no run records its machine)"]
    for kind in sorted({m.kind for m in runs_of}):
        machines = sorted((m for m in runs_of if m.kind == kind), key=lambda m: (runs_of[m][0], m.name))
        runs = sum(len(runs_of[m]) for m in machines)
        out += ["", f"### {kind}", "", f"{len(machines)} machine(s), {runs} run(s).", "",
                "| machine | identified | kernel | runs | first run | last run |", "|---|---|---|---|---|---|"]
        out += [_machine_row(m, runs_of[m]) for m in machines]
    return out


def _run_line(ds, run: str) -> str:
    info = ds.info(run)
    params = info.get("params") or {}
    tables = ", ".join(f"`{name}` ({len(ds.table(run, name, shared=True))} rows)" for name in ds.files(run, "*.csv"))
    kind = info.get("kind", "?")
    profile = params.get("profile") or params.get("mode") or ""
    load, others, flagged = _quiet(ds, run)
    return (f"| `{run}` | {kind} | {profile} | {info.get('status', '?')} | "
            f"{len(params.get('allocators') or [])} | {tables} | {load} | {others} | {flagged} |")


def codebook(data_dir: Path = DATA_DIR, version: str | None = None) -> str:
    data_dir = Path(data_dir)
    version = version or __version__
    out = [
        f"# {DATASET_NAME} {version}: codebook",
        "",
        "<!-- GENERATED by `python -m analysis dataset` (analysis/publish/dataset/codebook.py) from the Table Schemas in "
        "analysis/contract/schema.py. Do not edit by hand. -->",
        "",
        "Speed, memory and instruction-count measurements of memory allocators and their security configurations "
        "on Linux x86-64, heap-misuse probe outcomes under the same allocators, and the figures of five public "
        "debates transcribed from their texts. `datapackage.json` describes every file (Frictionless Data Package, "
        "Table Schema per table) with its sha256; `python -m analysis validate data` checks it. Licence: CC-BY-4.0.",
        "",
        "Missing values are empty fields. Times are seconds, sizes KiB unless a column says otherwise. "
        "Statistics use only trials with `status == ok` and `warmup == 0`; nothing else is dropped or edited.",
        "",
        "## Files",
        "",
        "| path | what it is |",
        "|---|---|",
        "| `runs/<run-id>/` | one measurement run; the id starts with its UTC start time and ends with its kind |",
        "| `literature/` | the seeds' own figures, transcribed with the line they come from |",
        "| `datapackage.json` | the machine-readable description with sha256 of every file |",
        "| `README.md` | this codebook |",
        "",
        "## Runs in this version",
        "",
        "Of the speed runs' trials and pairs: the median 1-minute load average when each started, the CPU time "
        "other processes used meanwhile as a share of their wall time (the harness's own milliseconds included), "
        "and how many were flagged as measured during interference (analysis/harness/process/quiet.py). A campaign's own "
        "processes keep the load near one, a lockstep pair's above it, and the 1-minute average carries that into "
        "the trials that follow: whether others ran is what the other two columns say (docs/design.md, the "
        "timing protocol).",
        "",
        "| run | kind | profile | status | allocators | tables | load (median) | others' CPU | flagged |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    ds = dataset.load(data_dir / "runs")
    out += [_run_line(ds, r) for r in run_folders(data_dir)] or ["| (none) | | | | | | | | |"]
    out += machine_section(data_dir)
    out += ["", "## Files of every run", ""]
    for name, text in RUN_FILES.items():
        out.append(f"- `{name}`: {text}")
    for name, fields in TABLE_SCHEMAS.items():
        out += ["", f"## `{name}`", "", HOW_MEASURED.get(name, ""), ""] + _table(fields)
    lit = LITERATURE_SCHEMAS
    lit_files = sorted(p for p in dataset_files(data_dir) if "literature" in p.relative_to(data_dir).parts)
    if lit_files or lit:
        out += ["", "## `literature/`", "",
                "The seeds' figures, each value with the seed file and line it was read from; `analysis/stats/literature.py` "
                "re-analyses them. `field.csv`: the field's published ratios for mimalloc-bench programs, each with its "
                "source, machine and versions; `analysis/publish/results/field.py` sets ours beside them."]
        for name in sorted(set(lit) | {p.name for p in lit_files if p.suffix == ".csv"}):
            schema = lit.get(name)
            out += ["", f"### `literature/{name}`", ""]
            if schema:
                out += _table(schema["fields"] if isinstance(schema, dict) else schema)
            else:
                out.append("(no Table Schema yet: columns are described only by their header)")
    out += ["", "## Citation", "",
            f"Cite the dataset by name, version and the sha256 of its archive `heapcost-dataset-{version}.tar.gz` "
            "(written with its checksum by `make dataset`); see `CITATION.cff` in the repository. No DOI has been "
            "assigned yet.", ""]
    return "\n".join(out)


def write_codebook(data_dir: Path = DATA_DIR, version: str | None = None) -> tuple[Path, bool]:
    """Write data/README.md; returns (path, whether it changed)."""
    path = Path(data_dir) / "README.md"
    text = codebook(data_dir, version)
    old = path.read_text() if path.is_file() else None
    if old != text:
        path.write_text(text)
    return path, old != text
