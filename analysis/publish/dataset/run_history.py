"""docs/runs.md: the history of the published runs, generated from each run's own record (data/runs/*/run.json
and machine.json): when it ran, the command that makes such a run, the host and the time it took. Never
written by hand; `make dataset` (and `python -m analysis dataset`) writes it again when the runs change."""
import datetime
from pathlib import Path

from analysis.contract import dataset
from analysis.paths import DATA_DIR, REPO

RUNS_PAGE = REPO / "docs" / "runs.md"

# run.json's params -> the make variable that sets it (the measure, probe and campaign parameters)
MAKE_VARIABLES = (("profile", "PROFILE"), ("mode", "MODE"), ("protocol", "PROTOCOL"), ("blocks", "BLOCKS"),
                  ("target_ci", "TARGET_CI"), ("budget_min", "BUDGET_MIN"), ("scales", "SCALES"),
                  ("pairs", "PAIRS"), ("slice_us", "SLICE_US"))


def command(info: dict) -> str:
    """The make command that makes a run like this one, from its recorded parameters."""
    params = info.get("params") or {}
    if info.get("kind") == "mechanism":
        return mechanism_command(params)
    if info.get("kind") == "profile":
        return profile_command(params)
    target = "probe" if info.get("kind") == "probe" else "measure"
    parts = [f"make {target}"]
    for key, var in MAKE_VARIABLES:
        value = params.get(key)
        if value not in (None, "", [], "auto"):
            parts.append(f"{var}={_make_value(value)}")
    extra = params.get("extra_allocators")
    brought = {item.partition("=")[0].strip() for item in str(extra or "").split(",") if item.strip()}
    for key, var in (("allocators", "ALLOCATORS"), ("workloads", "WORKLOADS")):
        names = [n for n in params.get(key) or [] if key != "allocators" or n not in brought]
        if names:
            parts.append(f"{var}=" + ",".join(map(str, names)))
    if extra:
        parts.append(f"EXTRA_ALLOCATORS={extra}")
    return " ".join(parts)


def _make_value(value) -> str:
    """A recorded parameter as its make variable takes it: a list comma-separated, a pair (PAIRS) as a:b."""
    if isinstance(value, list):
        return ",".join(":".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v) for v in value)
    return str(value)


# a mechanism run's params -> the option of `python -m analysis mechanism` that sets it
MECHANISM_OPTIONS = (("sizes", "--sizes"), ("blocks", "--blocks"), ("target_us", "--target-us"),
                     ("heap_kib", "--heap-kib"), ("repetitions", "--repetitions"), ("sequences", "--sequences"),
                     ("working_sets", "--working-sets"), ("seed", "--seed"))


def mechanism_command(params: dict) -> str:
    """The command that makes a mechanism run like this one (it has no make variables of its own)."""
    parts = ["python -m analysis mechanism"]
    for key, option in MECHANISM_OPTIONS:
        value = params.get(key)
        if value not in (None, "", []):
            parts.append(f"{option} {','.join(map(str, value)) if isinstance(value, list) else value}")
    return " ".join(parts)


def profile_command(params: dict) -> str:
    """The command that makes a profile run like this one."""
    parts = ["python -m analysis profile", f"--workloads {','.join(params.get('workloads') or [])}"]
    if params.get("scale") is not None:
        parts.append(f"--scale {params['scale']:g}")
    if params.get("timed_runs") is not None:
        parts.append(f"--runs {params['timed_runs']}")
    if params.get("syscalls") is False:
        parts.append("--no-syscalls")
    return " ".join(parts)


def host(machine: dict) -> str:
    ident = ((machine.get("host") or {}).get("identity")) or {}
    cpu = ident.get("cpu_model") or (machine.get("cpu") or {}).get("model") or ""
    mhz = ident.get("nominal_mhz")
    kernel = ident.get("kernel") or machine.get("kernel") or ""
    return ", ".join(x for x in (cpu + (f" {mhz} MHz" if mhz else ""), f"kernel {kernel}" if kernel else "") if x)


def rows(data_dir: Path = DATA_DIR) -> list[dict]:
    ds = dataset.load(Path(data_dir) / "runs")
    out = []
    for run in ds.run_ids():
        info, machine = ds.info(run), ds.machine(run)
        elapsed = info.get("elapsed_s")
        if elapsed in (None, "") and info.get("started_utc") and info.get("ended_utc"):
            start, end = (datetime.datetime.fromisoformat(info[k].replace("Z", "+00:00"))
                          for k in ("started_utc", "ended_utc"))
            elapsed = (end - start).total_seconds()
        out.append({"run": run, "kind": info.get("kind", ""), "status": info.get("status", ""),
                    "started": info.get("started_utc", ""), "host": host(machine),
                    "minutes": f"{float(elapsed) / 60:.1f}" if elapsed not in (None, "") else "",
                    "command": command(info)})
    return out


def markdown(data_dir: Path = DATA_DIR) -> str:
    lines = ["# The published runs", "",
             "Generated from each run's `run.json` and `machine.json` in `data/runs/` (`make dataset` writes it",
             "again); never edited by hand. The command is the one that makes such a run, from the run's recorded",
             "parameters; brought libraries are named by the placeholder the run recorded.", "",
             "| run | kind | status | started (UTC) | host | minutes | command |", "|---|---|---|---|---|---|---|"]
    for r in rows(data_dir):
        cells = [r["run"], r["kind"], r["status"], r["started"], r["host"], r["minutes"], f"`{r['command']}`"]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def write(data_dir: Path = DATA_DIR, path: Path = RUNS_PAGE) -> bool:
    """Writes the page when it differs; returns whether it changed."""
    text = markdown(data_dir)
    if path.is_file() and path.read_text() == text:
        return False
    path.write_text(text)
    return True
