"""The checked programs profiled again: a registration's programs profiled after it was made, by the dataset's
programs profile runs (`python -m analysis cost-check profile`, harness/workloads/profile.record_programs), on the
registration's processor kind and the registered input bytes. The registered predictions stay as they were; the
model as it is now (publish/results/cost_check.py's current_* columns) reads the newest such profile's counts, so
that what the profiler learned to record since (the placement runs, realloc growth per class, reuse by the size
just freed) reaches the programs registered before it, and the times of every profile of the program on the kind,
the registered one included (stats/cost_model.pooled_profile): one profile is one sample of the machine's state.
Among those quantities, the placement shares (stats/cost_model.placement_shares): how much of
each program's time under the baseline laying its blocks side by side gains and scattering them costs.
"""
import math
from pathlib import Path


def newer_profiles(ds, reg: dict, folder: Path | None = None) -> dict:
    """{program: (its profile as the model reads it now, the newest run's id)} for a registration's programs: every
    complete programs profile run on the registration's processor kind that profiled the program on the registered
    input bytes (their sha256 in the run's parameters), pooled with the registered profile (from `folder`, where
    given) by stats/cost_model.pooled_profile: the newest run's counts, the times of all of them. A program no such
    run profiled is left out."""
    from analysis.contract.profile_schema import PROFILE_COLUMNS, RUN_KIND, RUN_TABLE
    from analysis.harness.workloads.profile import PROGRAMS_LABEL
    from analysis.publish.debates import pool
    from analysis.publish.results.cost_prediction import read_profile
    from analysis.stats import cost_model

    runs = [r for r in ds.runs(RUN_KIND) if r.complete and r.run_id.endswith(f"-{RUN_KIND}-{PROGRAMS_LABEL}")
            and ds.has(r, RUN_TABLE)]
    if not runs:
        return {}
    processor = reg["registration"]["processor"]
    sha = {p["name"]: p.get("input_sha256", "") for p in reg["program"]}
    labels = pool._processors(ds)
    found: dict = {}
    for r in sorted(runs, key=lambda r: r.run_id):  # the oldest first
        if labels.get(r.run_id) != processor:
            continue
        shas = (r.info.get("params") or {}).get("input_sha256", {})
        table = ds.table(r, RUN_TABLE)
        for program, rows in table.groupby("workload", sort=True):
            program = str(program)
            if program not in sha or shas.get(program, "") != sha[program]:
                continue
            prof = rows[PROFILE_COLUMNS].reset_index(drop=True)
            prof = prof.assign(size_class=prof["size_class"].where(prof["size_class"].astype(str) != "", None))
            found.setdefault(program, []).append((prof, r.run_id))
    out = {}
    for program, profiles in found.items():
        registered = Path(folder) / "profiles" / f"{program}.csv" if folder is not None else None
        first = [read_profile(registered)] if registered is not None and registered.exists() else []
        out[program] = (cost_model.pooled_profile(first + [p for p, _ in profiles]), profiles[-1][1])
    return out


def placement_shares(folder: Path, newer: dict) -> dict:
    """{program: (order share, shuffle share, where from)} for a registration's programs: from its newer profile
    (`newer`: newer_profiles's, pooled with the registered one where that was given; the newest run's id) where
    that has the placement runs, else from the registered profile ("profile"). A program neither gives is left
    out."""
    from analysis.publish.results.cost_prediction import read_profile
    from analysis.stats import cost_model

    out = {}
    for program, (prof, run_id) in newer.items():
        order, shuffle = cost_model.placement_shares(prof)
        if math.isfinite(order):
            out[program] = (order, shuffle, run_id)
    for path in sorted((Path(folder) / "profiles").glob("*.csv")):
        if path.stem not in out:
            order, shuffle = cost_model.placement_shares(read_profile(path))
            if math.isfinite(order):
                out[path.stem] = (order, shuffle, "profile")
    return out
