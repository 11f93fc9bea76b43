"""Where each reported row comes from: the run, host and scale behind a table's row or an extreme the paper
names, and the like-with-like run (publish/dataset/paper_runs.like_with_like_run) that the speed table, the
trade-off and its front read, with what they leave to other runs or cannot weigh."""
import pandas as pd

from analysis.errors import HeapcostError
from analysis.publish.results.comparisons import Results


def labels(res: Results) -> dict:
    return dict(zip(res.runs["run_id"], res.runs["label"]))


def with_host(rows: pd.DataFrame, res: Results) -> pd.DataFrame:
    """Rows with a `host` column: the processor kind and machine of the run each row comes from (run_id), named
    as everywhere in the paper (contract/host.py)."""
    from analysis.contract.host import dataset_machines

    if rows.empty or "run_id" not in rows or res.time_run is None:
        return rows.assign(host="")
    machines = dataset_machines(res.dataset, run_ids=tuple(rows["run_id"].astype(str)))
    return rows.assign(host=[f"{machines[r].kind}, machine {machines[r].name}" if r in machines else ""
                             for r in rows["run_id"].astype(str)])


def like_with_like(res: Results, geo: pd.DataFrame) -> dict:
    """The like-with-like run the speed table, the trade-off and its front read (paper_runs.like_with_like_run):
    its label, host, blocks and the configurations it measured; and the configurations whose rows come from
    other runs (their leading runs, shown apart with their run, host and scale). {} without such a run."""
    from analysis.harness.allocators.catalog import layout_of

    if res.like_run is None or geo.empty:
        return {}
    aa = set(res.aa["allocator"])
    mine = geo[(geo["run_id"] == res.like_run) & ~geo["allocator"].isin(aa)]
    run = res.dataset.run(res.like_run)
    if run is None:
        raise HeapcostError(f"the like-with-like run {res.like_run} has no readable run.json")
    info = run.info
    first_layout = geo["allocator"].map(lambda a: layout_of(a)[1] == 1)
    elsewhere = geo[(geo["run_id"] != res.like_run) & ~geo["allocator"].isin(aa) & first_layout]
    return {"run_id": res.like_run, "run": labels(res).get(res.like_run, ""),
            "host": str(mine["host"].iloc[0]) if len(mine) else "",
            "blocks": int((info.get("params") or {}).get("blocks") or 0),
            "configurations": int(len(mine)), "elsewhere": sorted(str(a) for a in elsewhere["allocator"]),
            "elsewhere_runs": int(elsewhere["run_id"].nunique())}


def unweighed(res: Results, trade: pd.DataFrame) -> dict:
    """The like-with-like run's configurations the trade-off cannot weigh, by reason: {"no probe applies": [...],
    "not probed": [...]} (no probe run of the score's probes and sizes measured them)."""
    from analysis.harness.allocators.catalog import layout_of

    if res.like_run is None or res.speed is None:
        return {}
    geo = res.speed.geomean
    mine = set(geo.loc[geo["run_id"] == res.like_run, "allocator"].astype(str)) - set(res.aa["allocator"])
    missing = sorted(a for a in mine - set(trade["allocator"]) if layout_of(a)[1] == 1)
    scored = set(res.scores["allocator"].astype(str))
    return {"no probe applies": [a for a in missing if a in scored], "not probed": [a for a in missing if a not in scored]}


def attributed(res: Results, extreme: dict) -> dict:
    """An allocator's row with the run it really comes from: its label, profile and the scale it ran at (the
    profile's scale times the allocator's own scale factor, which slow allocators have below 1)."""
    if not extreme or not extreme.get("run_id") or res.time_run is None:
        return extreme
    info = res.dataset.info(extreme["run_id"])
    scale = float((info.get("profile") or {}).get("scale") or 1.0)
    factor = float(((info.get("allocators") or {}).get(extreme["allocator"]) or {}).get("scale_factor") or 1.0)
    return {**extreme, "run": labels(res).get(extreme["run_id"], ""),
            "profile": (info.get("params") or {}).get("profile", ""), "scale": f"{scale * factor:g}",
            "reduced_scale": scale * factor < 1}


def get_reduced(numbers: dict) -> list[str]:
    """The allocators whose results come from a run at a fraction of the full workload scale."""
    return list((numbers.get("speed") or {}).get("reduced_scale") or [])


def dearest_at_full_scale(res: Results, geo: pd.DataFrame) -> dict:
    """The dearest allocator among those whose leading run measured it at the full workload scale: a ratio from
    a run at a fraction of the scale, where start-up weighs more, is not a full-scale cost."""
    for i in sorted(range(len(geo)), key=lambda k: -geo.iloc[k]["geomean_ratio"]):
        row = attributed(res, extreme(geo.iloc[[i]], "geomean_ratio", max))
        if not row.get("reduced_scale", False):
            return row
    return {}


def extreme(geo: pd.DataFrame, col: str, pick) -> dict:
    if geo.empty:
        return {}
    i = pick(range(len(geo)), key=lambda k: geo.iloc[k][col])
    r = geo.iloc[i]
    return {"allocator": str(r["allocator"]), "display": str(r["display"]), "percent": str(r["percent"]),
            "run_id": str(r.get("run_id", ""))}
