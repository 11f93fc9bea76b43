"""The checked programs' placement shares (stats/cost_model.placement_shares): how much of each program's time
under the baseline laying its blocks side by side gains and scattering them costs, measured by the profile's runs
under heapcost's placement allocator (harness/workloads/profile.py, placement.c). A registration made after the
profile had those runs carries them in its profiles; one made before reads them from the dataset's programs
profile runs (`python -m analysis cost-check profile`), on the registration's processor kind and input bytes.
"""
import math
from pathlib import Path


def placement_shares(ds, folder: Path, reg: dict) -> dict:
    """{program: (order share, shuffle share, where from)} for a registration's programs: from the registered
    profile where it has the placement runs ("profile"), else from the newest complete programs profile run
    (profile.record_programs) on the registration's processor kind that profiled the program on the registered
    input bytes (that run's id). A program neither gives is left out."""
    from analysis.contract.profile_schema import RUN_KIND, RUN_TABLE
    from analysis.harness.workloads.profile import PROGRAMS_LABEL
    from analysis.publish.debates import pool
    from analysis.publish.results.cost_prediction import read_profile
    from analysis.stats import cost_model

    out = {}
    for path in sorted((Path(folder) / "profiles").glob("*.csv")):
        order, shuffle = cost_model.placement_shares(read_profile(path))
        if math.isfinite(order):
            out[path.stem] = (order, shuffle, "profile")
    processor = reg["registration"]["processor"]
    sha = {p["name"]: p.get("input_sha256", "") for p in reg["program"]}
    runs = [r for r in ds.runs(RUN_KIND) if r.complete and r.run_id.endswith(f"-{RUN_KIND}-{PROGRAMS_LABEL}")
            and ds.has(r, RUN_TABLE)]
    if not runs:
        return out
    labels = pool._processors(ds)
    for r in sorted(runs, key=lambda r: r.run_id, reverse=True):  # the newest first
        if labels.get(r.run_id) != processor:
            continue
        shas = (r.info.get("params") or {}).get("input_sha256", {})
        table = ds.table(r, RUN_TABLE)
        for program, rows in table.groupby("workload", sort=True):
            program = str(program)
            if program in out or program not in sha or shas.get(program, "") != sha[program]:
                continue
            order, shuffle = cost_model.placement_shares(rows[["quantity", "size_class", "value"]])
            if math.isfinite(order):
                out[program] = (order, shuffle, r.run_id)
    return out
