"""Callgrind's exact counts as the paper reads them: instructions, data accesses and D1 misses per free with the
ratio to the baseline, the allocator's own share of the instructions, and the allocators callgrind could not count."""
import numpy as np
import pandas as pd

from analysis.paths import repo_relative


def per_free(counts: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Instructions, data accesses and simulated D1 misses per free (seed 002's unit of useful work:
    the workload's own count of frees, the same under every allocator), with the ratio to the baseline
    on the same workload, and the allocator's share of the instructions (alloc_share: inside its entry
    points). Callgrind counts are exact for one deterministic run: no interval."""
    ok = counts[counts["status"] == "ok"].copy()
    for c in ("instructions", "data_reads", "data_writes", "d1_read_misses", "d1_write_misses", "free_calls"):
        ok[c] = pd.to_numeric(ok[c], errors="coerce")
    ok = ok[ok["free_calls"] > 0]
    ok["instructions_per_free"] = ok["instructions"] / ok["free_calls"]
    ok["accesses_per_free"] = (ok["data_reads"] + ok["data_writes"]) / ok["free_calls"]
    ok["d1_misses_per_free"] = (ok["d1_read_misses"] + ok["d1_write_misses"]) / ok["free_calls"]
    # slow allocators run at a smaller scale; the baseline is counted at each of those scales too, and
    # every ratio is taken at the same scale
    ok["scale"] = pd.to_numeric(ok["scale"], errors="coerce").round(8)
    base = ok[ok["allocator"] == baseline].set_index(["workload", "scale"])
    for col in ("instructions_per_free", "accesses_per_free", "d1_misses_per_free"):
        ok[col.replace("_per_free", "_ratio")] = [
            r[col] / base.loc[(r["workload"], r["scale"]), col] if (r["workload"], r["scale"]) in base.index
            else np.nan for _, r in ok.iterrows()]
    # the allocator's own share (runs published before it was counted leave it empty); an allocator with no
    # instruction inside its entry points on a workload that frees memory (every row here does) had entry points
    # the run did not recognise by name: its shares in that run are left empty
    for c in ("alloc_instructions", "alloc_data_writes"):
        ok[c] = pd.to_numeric(ok[c], errors="coerce") if c in ok else np.nan
    unrecognised = set(ok.loc[ok["alloc_instructions"] == 0, "allocator"])
    ok["alloc_unrecognised"] = ok["allocator"].isin(unrecognised)
    ok.loc[ok["alloc_unrecognised"], ["alloc_instructions", "alloc_data_writes"]] = np.nan
    ok["alloc_share"] = ok["alloc_instructions"] / ok["instructions"]
    ok["alloc_instructions_per_free"] = ok["alloc_instructions"] / ok["free_calls"]
    cols = ["workload", "allocator", "scale", "instructions", "data_writes", "free_calls", "instructions_per_free",
            "accesses_per_free", "d1_misses_per_free", "instructions_ratio", "accesses_ratio", "d1_misses_ratio",
            "alloc_instructions", "alloc_data_writes", "alloc_share", "alloc_instructions_per_free", "alloc_unrecognised"]
    return ok[cols].sort_values(["workload", "allocator", "scale"]).reset_index(drop=True)


def main_scale(table: pd.DataFrame) -> pd.DataFrame:
    """Each (workload, allocator) at the largest scale it was counted at (the baseline's extra
    reduced-scale counts serve only as references for the slow allocators)."""
    idx = table.groupby(["workload", "allocator"])["scale"].idxmax()
    return table.loc[sorted(idx)].reset_index(drop=True)


def per_free_geomean(table: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for alloc, sub in main_scale(table).groupby("allocator", sort=True):
        r = sub["instructions_ratio"].dropna()
        if len(r):
            rows.append({"allocator": alloc, "workloads": len(r),
                         "instructions_ratio": float(np.exp(np.log(r).mean()))})
    return pd.DataFrame(rows, columns=["allocator", "workloads", "instructions_ratio"])


def missing_callgrind(counts: pd.DataFrame) -> pd.DataFrame:
    """Per allocator: the workloads callgrind could not count, and the first reason (paths of the
    repository's files relative to it: runs measured before the harness wrote them so carry the
    measuring machine's directories)."""
    bad = counts[counts["status"] != "ok"]
    if bad.empty:
        return pd.DataFrame(columns=["allocator", "workloads", "reason"])
    g = bad.groupby("allocator", sort=True)
    return pd.DataFrame({"allocator": list(g.groups), "workloads": g["workload"].nunique().to_list(),
                         "reason": [repo_relative(r) for r in g["reason"].first().to_list()]})
