"""The known exploitation techniques for the paper: each configuration's cells from the newest techniques.csv of the
dataset that ran it (brought programs, each
asserting its own success: how2heap's glibc_2.36 folder; analysis/harness/security/techniques.py) as a table, a figure and
numbers, the glibc family's place on the security axis checked against them, and what each glibc defence buys
against them. Written by notebooks/security.ipynb, hence the files' prefix:

- security_techniques_table.csv: one row per technique and allocator (outcome, outcomes, runs, the rate it
  worked with its interval); security_techniques_summary.csv: per allocator, how many techniques ended in each
  outcome.
- security_techniques_matrix.svg: the outcome of every technique under every allocator.
- security_techniques_numbers.json: the run, the programs' upstream revision and build flags, the summary, the
  techniques that work under every allocator that ran them, the score check and the defence comparisons, and the
  sets built against another C library than glibc (musl: which configurations ran them, how they were built, the
  techniques that do not build there); or `absent` with the reason when the dataset has no techniques run (the
  paper then says so).

A cell whose technique does not build against the configuration's C library (techniques.csv: not-applicable
without any run, analysis/harness/security/techniques.py) is neither stopped nor working: it is shown as `not-built` and
counted apart from the techniques run, in every "N of M".
"""
import csv
import json
from pathlib import Path

from analysis.contract import dataset
from analysis.errors import HeapcostError
from analysis.paths import RUNS_DIR
from analysis.publish.render.products import json_text
from analysis.publish.security.primitives import number_or_none

TABLE = "techniques.csv"
NOT_BUILT = "not-built"  # shown for a cell whose program does not build against the configuration's C library
OUTCOMES = ("works", "stopped", "not-applicable", "crashes", "hangs", "not-run", NOT_BUILT)
COLOURS = {"works": "#d73027", "stopped": "#1a9850", "not-applicable": "#a6d96a", "crashes": "#fdae61",
           "hangs": "#9e9ac8", "not-run": "#e0e0e0", NOT_BUILT: "#ffffff"}
UNRUN = ("not-run", NOT_BUILT)  # no run of the technique under the configuration
GLIBC_FAMILIES = ("glibc", "glibc-built")  # the system's glibc configurations and the builds from its source
BASELINE = "glibc"


def newest_run(runs_dir=RUNS_DIR):
    """(run id, run.json, rows): every configuration's cells from the newest complete probe run holding a
    techniques.csv that ran it, so that a later run of some configurations alone (musl with its own set, say)
    replaces those and leaves the others' cells as the earlier run measured them. The run id is the newest
    contributing run's; run.json's params are its own, with the brought sets it lacks taken from the other
    contributing runs, newest first (`techniques`, `techniques_<libc>`), and `technique_runs`, the contributing
    runs, oldest first. `runs_dir`: the runs folder or its Dataset."""
    ds = dataset.load(runs_dir)
    runs = [r for r in ds.runs("probe") if r.complete and ds.has(r, TABLE)]
    if not runs:
        raise HeapcostError(f"no probe run of the dataset has a {TABLE}: bring how2heap's glibc_2.36 programs, "
                            "built by hand, and run `make probe TECHNIQUES=/path/to/them`")
    cells, unrun = {}, {}  # allocator -> (run, its rows)
    for run in runs:  # oldest first: a newer run replaces the configurations it ran
        by_allocator = {}
        for r in ds.rows(run, TABLE) or []:
            by_allocator.setdefault(r["allocator"], []).append(r)
        for allocator, rows in by_allocator.items():
            if any(r.get("outcome") != "not-run" for r in rows):
                cells[allocator] = (run, rows)
            else:
                unrun[allocator] = (run, rows)
    chosen = {**{a: v for a, v in unrun.items() if a not in cells}, **cells}
    contributing = sorted({run.run_id: run for run, _ in chosen.values()}.values(), key=lambda r: r.run_id)
    newest = contributing[-1]
    params = dict(newest.info.get("params") or {})
    for run in reversed(contributing):
        for key, value in (run.info.get("params") or {}).items():
            if (key == "techniques" or key.startswith("techniques_")) and key not in params:
                params[key] = value
    params["technique_runs"] = [run.run_id for run in contributing]
    rows = [r for run in runs for allocator, (chosen_run, rows) in sorted(chosen.items())
            if chosen_run is run for r in rows]
    return newest.run_id, {**newest.info, "params": params}, rows


def not_built(row: dict) -> bool:
    """The cell of a technique that does not build against the configuration's C library: not-applicable without
    any run (a not-applicable run is the technique's own failed assertion)."""
    return row.get("outcome") == "not-applicable" and number_or_none(row.get("runs")) == 0


def shown(rows: list[dict]) -> list[dict]:
    """The rows with the outcome the products show: NOT_BUILT for a technique that does not build there."""
    return [dict(r, outcome=NOT_BUILT) if not_built(r) else r for r in rows]


def summary(rows: list[dict]) -> list[dict]:
    """Per allocator (in the order of the rows): techniques run and how many ended in each outcome (rows as
    `shown` gives them: the ones that do not build against its C library are counted apart, not run)."""
    out: dict = {}
    for r in rows:
        s = out.setdefault(r["allocator"], {"allocator": r["allocator"], "ran": 0, **{o: 0 for o in OUTCOMES}})
        outcome = r["outcome"] if r["outcome"] in OUTCOMES else "not-run"
        s[outcome] += 1
        s["ran"] += outcome not in UNRUN
    return list(out.values())


def fold_layouts(rows: list[dict]) -> tuple[list[dict], dict, list[dict]]:
    """A configuration's further layout builds (`<id>_l<N>`, the same source linked in another code order) folded
    into its first: (the rows of first builds and of anything else, {configuration: [its further layouts]}, the
    cells where a further layout ended otherwise than the first). A layout build whose first build did not run
    is kept as a configuration of its own."""
    from analysis.harness.allocators.catalog import layout_of

    first = {(r["technique"], r["allocator"]): r["outcome"] for r in rows if layout_of(r["allocator"])[1] == 1}
    ran_first = {a for (_, a), o in first.items() if o not in UNRUN}
    kept, layouts, differ = [], {}, []
    for r in rows:
        base, layout = layout_of(r["allocator"])
        if layout == 1 or base not in ran_first:
            kept.append(r)
            continue
        if r["outcome"] in UNRUN:
            continue
        layouts.setdefault(base, set()).add(layout)
        ref = first.get((r["technique"], base), "not-run")
        if ref not in UNRUN and r["outcome"] != ref:
            differ.append({"allocator": base, "layout": layout, "technique": r["technique"], "outcome": r["outcome"],
                           "first_layout": ref})
    differ.sort(key=lambda d: (d["technique"], d["allocator"], d["layout"]))
    return kept, {b: sorted(ls) for b, ls in sorted(layouts.items())}, differ


def layout_difference_groups(differ: list[dict]) -> list[dict]:
    """fold_layouts' differing cells grouped by technique and the two outcomes: each group names the
    configurations and their layouts."""
    groups: dict = {}
    for d in differ:
        g = groups.setdefault((d["technique"], d["outcome"], d["first_layout"]), {})
        g.setdefault(d["allocator"], []).append(d["layout"])
    return [{"technique": t, "outcome": o, "first_layout": f,
             "configurations": [{"allocator": a, "layouts": sorted(ls)} for a, ls in sorted(by.items())]}
            for (t, o, f), by in sorted(groups.items())]


def works_everywhere(rows: list[dict]) -> list[str]:
    """Techniques that worked under every allocator that ran them (at least two): their own check cannot tell
    allocators apart (a check that holds whatever the allocator did), or no allocator here stops them."""
    ran: dict = {}
    for r in rows:
        if r["outcome"] not in UNRUN:
            ran.setdefault(r["technique"], []).append(r["outcome"])
    return sorted(t for t, found in ran.items() if len(found) >= 2 and all(o == "works" for o in found))


def score_check(sums: list[dict], scores: dict, families: dict) -> dict:
    """Do the glibc configurations that score higher on the security axis stop more techniques? Over every pair
    of the family's configurations with a score and techniques run: concordant (the higher score stops more),
    discordant (it stops fewer), tied (equal scores or equal counts)."""
    members = [s for s in sums if families.get(s["allocator"]) in GLIBC_FAMILIES and s["ran"]
               and number_or_none(scores.get(s["allocator"])) is not None]
    members.sort(key=lambda s: (-number_or_none(scores[s["allocator"]]), s["allocator"]))
    table = [{"allocator": s["allocator"], "score": number_or_none(scores[s["allocator"]]), "stopped": s["stopped"],
              "works": s["works"], "ran": s["ran"]} for s in members]
    concordant = discordant = tied = 0
    for i, a in enumerate(table):
        for b in table[i + 1:]:
            if a["score"] == b["score"] or a["stopped"] == b["stopped"]:
                tied += 1
            elif a["stopped"] > b["stopped"]:
                concordant += 1
            else:
                discordant += 1
    return {"configurations": table, "pairs": concordant + discordant + tied, "concordant": concordant,
            "discordant": discordant, "tied": tied}


def defence_pairs(catalog: dict) -> list[tuple[str, str, str]]:
    """(configuration with the defence, configuration without it, what differs) for the glibc families: each
    knock-out build against its control, and each configuration of the system's glibc against glibc itself."""
    pairs = []
    for name, entry in sorted(catalog.items()):
        if entry.get("family") not in GLIBC_FAMILIES:
            continue
        if entry.get("knock_out_of"):
            pairs.append((entry["knock_out_of"], name, entry.get("description", "")))
        elif entry.get("family") == BASELINE and name != BASELINE:
            pairs.append((BASELINE, name, entry.get("description", "")))
    return pairs


def defences(rows: list[dict], catalog: dict) -> list[dict]:
    """What the difference between two glibc configurations changes against the techniques both ran: the
    techniques that work under one and not the other, and the ones one stops and the other does not."""
    outcome = {(r["technique"], r["allocator"]): r["outcome"] for r in rows}
    techniques = sorted({r["technique"] for r in rows})
    out = []
    for ref, other, what in defence_pairs(catalog):
        both = [t for t in techniques if outcome.get((t, ref), "not-run") not in UNRUN
                and outcome.get((t, other), "not-run") not in UNRUN]
        if not both:
            continue
        out.append({
            "reference": ref, "configuration": other, "change": what, "techniques": len(both),
            "works_only_configuration": [t for t in both if outcome[(t, other)] == "works" != outcome[(t, ref)]],
            "works_only_reference": [t for t in both if outcome[(t, ref)] == "works" != outcome[(t, other)]],
            "stopped_only_reference": [t for t in both if outcome[(t, ref)] == "stopped" != outcome[(t, other)]],
            "stopped_only_configuration": [t for t in both if outcome[(t, other)] == "stopped" != outcome[(t, ref)]],
            "same": sum(outcome[(t, ref)] == outcome[(t, other)] for t in both),
        })
    return out


def catalogue_entries() -> dict:
    """{id: family, knock_out_of, description} of allocators.toml."""
    from analysis.harness.allocators.catalog import load_catalog

    return {a.id: {"family": a.family, "knock_out_of": a.knock_out_of, "description": a.description}
            for a in load_catalog().values()}


def matrix_figure(rows: list[dict], techniques: list[str], allocators: list[str], path: Path) -> None:
    """Outcome of every technique (columns) under every allocator (rows)."""
    import numpy as np
    from matplotlib.colors import ListedColormap

    from analysis.publish.render.figures import pyplot, save

    plt = pyplot()
    outcome = {(r["allocator"], r["technique"]): r["outcome"] for r in rows}
    names = list(COLOURS)
    grid = np.array([[names.index(outcome.get((a, t), "not-run")) if outcome.get((a, t), "not-run") in names
                      else names.index("not-run") for t in techniques] for a in allocators])
    fig, ax = plt.subplots(figsize=(1.4 + 0.2 * len(techniques), 1.0 + 0.17 * len(allocators)))  # legible on one page
    ax.imshow(grid, cmap=ListedColormap(list(COLOURS.values())), vmin=0, vmax=len(names) - 1, aspect="auto")
    ax.set_xticks(range(len(techniques)), techniques, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(len(allocators)), allocators, fontsize=7)
    ax.grid(False)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLOURS.values()]
    ax.legend(handles, names, ncol=len(names), fontsize=7, loc="lower left", bbox_to_anchor=(0, 1.01), frameon=False)
    save(fig, path)


def _write(path: Path, rows: list[dict], fields: list[str]) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def write_outputs(rows: list[dict], out_dir, *, run_id: str, info: dict, scores: dict | None = None,
                  catalog: dict | None = None, prefix: str = "security_techniques_") -> dict:
    """<prefix>table.csv, <prefix>summary.csv, <prefix>matrix.svg and <prefix>numbers.json; returns the numbers.
    `scores`: the security score per allocator (security_numbers.json's), for the glibc check;
    `catalog`: {id: family, knock_out_of, description} (default: allocators.toml's)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    catalog = catalogue_entries() if catalog is None else catalog
    scores = scores or {}
    families = {name: entry.get("family") for name, entry in catalog.items()}
    every_row = rows = shown(rows)
    rows, layouts, layout_differences = fold_layouts(rows)
    sums = summary(rows)
    # allocators: most techniques stopped first, then fewest working; techniques: most allocators they work under
    order = [s["allocator"] for s in sorted(sums, key=lambda s: (-s["stopped"], s["works"], s["allocator"]))]
    works_under = {}
    for r in rows:
        works_under[r["technique"]] = works_under.get(r["technique"], 0) + (r["outcome"] == "works")
    techniques = sorted(works_under, key=lambda t: (-works_under[t], t))
    table = [{k: r.get(k, "") for k in ("technique", "allocator", "outcome", "outcomes", "runs", "works", "rate",
                                        "rate_ci_low", "rate_ci_high")} for r in rows]
    table.sort(key=lambda r: (r["technique"], order.index(r["allocator"])))
    _write(out_dir / f"{prefix}table.csv", table, list(table[0]) if table else ["technique"])
    sums.sort(key=lambda s: order.index(s["allocator"]))
    _write(out_dir / f"{prefix}summary.csv", [{**s, "family": families.get(s["allocator"], ""),
                                               "score": scores.get(s["allocator"], "")} for s in sums if s["ran"]],
           ["allocator", "family", "score", "ran", *OUTCOMES])
    ran = [a for a in order if any(s["allocator"] == a and s["ran"] for s in sums)]
    if ran:
        matrix_figure(rows, techniques, ran, out_dir / f"{prefix}matrix.svg")
    params = info.get("params") or {}
    brought = params.get("techniques") or {}
    provenance = brought.get("provenance") or {}
    runs = [int(number_or_none(r.get("runs")) or 0) for r in every_row if r["outcome"] not in UNRUN]
    numbers = {
        "run_id": run_id, "runs": params.get("technique_runs") or [run_id],
        "upstream": provenance.get("upstream", ""), "revision": provenance.get("revision", ""),
        "folder": provenance.get("folder", ""), "compiler": provenance.get("compiler", ""),
        "flags": provenance.get("flags", ""),
        "techniques": len(techniques), "allocators": ran,
        "layout_builds": layouts, "layout_build_count": sum(len(ls) for ls in layouts.values()),
        "layout_differences": layout_differences,
        "layout_difference_groups": layout_difference_groups(layout_differences),
        "runs_per_cell": max(runs, default=0), "runs_per_cell_min": min(runs, default=0),
        "timeout_s": params.get("technique_timeout"),
        "summary": sums,
        "works_everywhere": works_everywhere(rows),
        "not_run": sorted(s["allocator"] for s in sums if not s["ran"]),
        "not_built": {s["allocator"]: sorted(r["technique"] for r in rows if r["allocator"] == s["allocator"]
                                             and r["outcome"] == NOT_BUILT) for s in sums if s[NOT_BUILT]},
        "not_built_cells": sum(s[NOT_BUILT] for s in sums),
        "other_libc_sets": other_libc_sets(params, rows),
        "random_cells": sum(len((r.get("outcomes") or "").split()) > 1 for r in every_row),
        "score_check": score_check(sums, scores, families),
        "defences": defences(rows, catalog),
    }
    (out_dir / f"{prefix}numbers.json").write_text(json_text(numbers, indent=2) + "\n")
    return numbers


def other_libc_sets(params: dict, rows: list[dict]) -> list[dict]:
    """The sets of a run built against another C library than glibc (run.json's params `techniques_<libc>`): how
    they were built, the configurations that ran them (their cells' programs are the set's), the techniques that
    do not build there with the compiler's reason, and the programs whose malloc is not the library's main one
    (musl's lite_malloc, which a static program that never calls free gets)."""
    out = []
    for key in sorted(k for k in params if k.startswith("techniques_") and isinstance(params[k], dict)):
        brought = params[key]
        libc = brought.get("libc") or key.removeprefix("techniques_")
        programs = set((brought.get("programs") or {}).values())
        provenance = brought.get("provenance") or {}
        mallocs = brought.get("malloc") or {}
        main = max(set(mallocs.values()), key=list(mallocs.values()).count) if mallocs else ""
        out.append({
            "libc": libc,
            "compiler": provenance.get("compiler", ""), "flags": provenance.get("flags", ""),
            "programs": len(programs),
            "configurations": sorted({r["allocator"] for r in rows if r.get("program_sha256") in programs or (
                r["outcome"] == NOT_BUILT and (r.get("detail") or "").startswith(f"does not build against {libc}"))}),
            "not_built": [{"technique": t, "reason": why} for t, why in sorted((brought.get("not_built") or {}).items())],
            "malloc": main,
            "other_malloc": [{"technique": t, "malloc": m} for t, m in sorted(mallocs.items()) if m != main],
        })
    return out


def write_absent(out_dir, why: str, *, prefix: str = "security_techniques_") -> None:
    """A dataset without a techniques run: <prefix>numbers.json says why, and the paper says the part is absent."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{prefix}numbers.json").write_text(json.dumps({"absent": why}, indent=2) + "\n")


def write_from_dataset(runs_dir, out_dir, *, scores: dict | None = None) -> dict:
    """The products from the dataset's newest techniques run, or security_techniques_numbers.json saying none exists.
    `runs_dir`: the runs folder or its Dataset."""
    try:
        run_id, info, rows = newest_run(runs_dir)
    except HeapcostError as exc:
        write_absent(out_dir, str(exc))
        return {"absent": str(exc)}
    return write_outputs(rows, out_dir, run_id=run_id, info=info, scores=scores)
