"""The checked programs profiled again: a registration's programs profiled after it was made, by the dataset's
programs profile runs (`python -m analysis cost-check profile`, harness/workloads/profile.record_programs), on the
registration's processor kind and the registered input bytes. The registered predictions stay as they were; the
model as it is now (publish/results/cost_check.py's current_* columns) reads the newest such profile, so that what
the profiler learned to record since (the placement runs, realloc growth per class) reaches the programs
registered before it. Among those quantities, the placement shares (stats/cost_model.placement_shares): how much of
each program's time under the baseline laying its blocks side by side gains and scattering them costs.
"""
import math
from pathlib import Path


def newer_profiles(ds, reg: dict) -> dict:
    """{program: (its newest profile as a profile table, the run's id)} for a registration's programs: from the
    newest complete programs profile run on the registration's processor kind that profiled the program on the
    registered input bytes (their sha256 in the run's parameters). A program no such run profiled is left out."""
    from analysis.contract.profile_schema import PROFILE_COLUMNS, RUN_KIND, RUN_TABLE
    from analysis.harness.workloads.profile import PROGRAMS_LABEL
    from analysis.publish.debates import pool

    runs = [r for r in ds.runs(RUN_KIND) if r.complete and r.run_id.endswith(f"-{RUN_KIND}-{PROGRAMS_LABEL}")
            and ds.has(r, RUN_TABLE)]
    if not runs:
        return {}
    processor = reg["registration"]["processor"]
    sha = {p["name"]: p.get("input_sha256", "") for p in reg["program"]}
    labels = pool._processors(ds)
    out = {}
    for r in sorted(runs, key=lambda r: r.run_id, reverse=True):  # the newest first
        if labels.get(r.run_id) != processor:
            continue
        shas = (r.info.get("params") or {}).get("input_sha256", {})
        table = ds.table(r, RUN_TABLE)
        for program, rows in table.groupby("workload", sort=True):
            program = str(program)
            if program in out or program not in sha or shas.get(program, "") != sha[program]:
                continue
            prof = rows[PROFILE_COLUMNS].reset_index(drop=True)
            prof = prof.assign(size_class=prof["size_class"].where(prof["size_class"].astype(str) != "", None))
            out[program] = (prof, r.run_id)
    return out


def placement_shares(folder: Path, newer: dict) -> dict:
    """{program: (order share, shuffle share, where from)} for a registration's programs: from the registered
    profile where it has the placement runs ("profile"), else from its newer profile (`newer`: newer_profiles's;
    that run's id). A program neither gives is left out."""
    from analysis.publish.results.cost_prediction import read_profile
    from analysis.stats import cost_model

    out = {}
    for path in sorted((Path(folder) / "profiles").glob("*.csv")):
        order, shuffle = cost_model.placement_shares(read_profile(path))
        if math.isfinite(order):
            out[path.stem] = (order, shuffle, "profile")
    for program, (prof, run_id) in newer.items():
        if program not in out:
            order, shuffle = cost_model.placement_shares(prof)
            if math.isfinite(order):
                out[program] = (order, shuffle, run_id)
    return out
