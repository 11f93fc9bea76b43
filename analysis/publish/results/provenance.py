"""Where a brought allocator came from (EXTRA_ALLOCATORS): the library's file name and sha256, the upstream
revision and the configuration it was built with, as each run recorded them (run.json params.brought_libraries).
heapcost never builds these; the paper's method section prints this table so that a reader can rebuild them."""
import pandas as pd

COLUMNS = ["allocator", "run_id", "library", "library_sha256", "upstream", "revision", "configuration", "compiler"]


def brought_libraries(runs) -> pd.DataFrame:
    """One row per brought allocator and distinct library (sha256), with the first run that measured it."""
    rows, seen = [], set()
    for run in sorted(runs, key=lambda r: r.run_id):
        for aid, rec in ((run.info.get("params") or {}).get("brought_libraries") or {}).items():
            key = (aid, rec.get("library_sha256", ""))
            if key in seen:
                continue
            seen.add(key)
            made = rec.get("provenance") or {}
            rows.append({"allocator": aid, "run_id": run.run_id, "library": rec.get("library", ""),
                         "library_sha256": rec.get("library_sha256", ""),
                         "upstream": rec.get("upstream") or made.get("upstream", ""),
                         "revision": rec.get("revision") or made.get("revision", ""),
                         "configuration": made.get("configuration", ""), "compiler": made.get("compiler", "")})
    return pd.DataFrame(sorted(rows, key=lambda r: (r["allocator"], r["run_id"])), columns=COLUMNS)
