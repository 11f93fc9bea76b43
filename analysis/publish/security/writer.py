"""The security figures (SVG) and numbers (CSV, JSON) for the paper, from a probes.csv."""
import csv
import math
from collections import Counter
from pathlib import Path

from analysis.contract import dataset
from analysis.errors import HeapcostError
from analysis.paths import RUNS_DIR
from analysis.publish.render import figures
from analysis.publish.render.products import json_text
from analysis.stats.monotonicity import defence_pairs, monotonicity
from analysis.stats import security
from analysis.stats.security import disagreements, scores, size_of

# The matrix shows one cell per (allocator, probe): the worst outcome over the sizes it ran at, worst
# for the defender first; the outcomes that say nothing about the misuse come last. The per-size
# outcomes are in security_numbers.json (outcomes_by_size) and probes.csv.
WORST_FIRST = ("missed", "late-crash", "mitigated", "caught", "allocator-failed-to-start", "n/a")


def worst_outcome(outcomes) -> str:
    """The worst of a probe's outcomes over its sizes (WORST_FIRST); unknown outcomes count as n/a."""
    ranked = [WORST_FIRST.index(o) if o in WORST_FIRST else len(WORST_FIRST) - 1 for o in outcomes]
    return WORST_FIRST[min(ranked)] if ranked else "n/a"


def outcomes_by_size(rows) -> dict:
    """{size: {outcome: rows}} with sizes as strings in increasing order; "unsized" for the entropy
    probes and for runs published before sizes existed."""
    counts: dict = {}
    for r in rows:
        size = size_of(r)
        counts.setdefault((size is None, size or 0), Counter())[r["outcome"]] += 1
    return {("unsized" if none else str(size)): dict(c) for (none, size), c in sorted(counts.items())}


def catalogue_claims() -> dict[str, tuple]:
    """Each catalogue allocator's claimed defences (allocators.toml)."""
    from analysis.harness.allocators.catalog import load_catalog

    return {a.id: a.defences for a in load_catalog().values()}


def catalogue_pairs() -> list[tuple[str, str, tuple]]:
    """The catalogue's knock-out pairs (security.defence_pairs over allocators.toml's claims): two configurations
    of one source, the same family at the same upstream revision or package version (hardened_malloc 72fb357's
    knock-outs pair with 72fb357, never with release 2026062800, whose code differs besides)."""
    from analysis.harness.allocators.catalog import load_catalog

    catalog = load_catalog().values()

    def source(a):
        origin = a.origin or {}
        return f"{a.family}@{origin.get('revision') or origin.get('version') or ''}"
    return defence_pairs({a.id: a.defences for a in catalog}, {a.id: source(a) for a in catalog})


def monotonicity_problems(rows, pairs=None) -> list[str]:
    """What breaks monotonicity in the rows, one line each: a pair whose removal raised the score, and a
    pair differing by one defence whose probes ran on both sides and do not tell the two apart."""
    found = []
    for m in monotonicity(rows, catalogue_pairs() if pairs is None else pairs):
        name = f"{m['with']} vs {m['without']} (without {m['removed']})"
        if m["raised"]:
            found.append(f"{name}: removal raises the score, {m['score_with']:.1f} -> {m['score_without']:.1f} "
                         f"(difference [{m['difference_low']:.1f}, {m['difference_high']:.1f}])")
        if m["blind"] and " " not in m["removed"]:
            found.append(f"{name}: no probe of {m['blind']} tells them apart")
    return found


def reported_probe_rows(runs_dir=RUNS_DIR) -> list[dict]:
    """The probe rows the paper reports: every complete probe run of the reported run's design contributes,
    each allocator's rows from the run that leads for it (analysis.publish.dataset.paper_runs), as the trade-off reads them
    (a run that probed only some allocators adds them, and hides none of the others). `runs_dir`: the runs
    folder or its Dataset."""
    from analysis.publish.dataset import paper_runs

    runs, lead = _probe_runs(runs_dir)
    return paper_runs.merge_probe_rows(runs, lead)


def debate_probe_rows(runs_dir=RUNS_DIR) -> list[dict]:
    """reported_probe_rows and, beside them, the rows of the probes read beside the score
    (paper_runs.extra_probe_rows: the page-sized entropy probes), for the debates' security side. `runs_dir`:
    the runs folder or its Dataset."""
    from analysis.publish.dataset import paper_runs

    runs, lead = _probe_runs(runs_dir)
    return paper_runs.merge_probe_rows(runs, lead) + paper_runs.extra_probe_rows(runs, lead)


def _probe_runs(runs_dir) -> tuple[list, dict[str, str]]:
    """The contributing probe runs and, per allocator, the run that leads for it."""
    from analysis.publish.dataset import paper_runs

    ds = dataset.load(runs_dir)
    main, runs = paper_runs.contributing_runs(ds, "probe")
    if main is None or not runs:
        raise HeapcostError(f"no probe run with a probes.csv under {ds.root.name}/: run `make probe` first")
    return runs, paper_runs.leads("probe", runs, main)


def weights_table(path) -> list[dict]:
    """security_weights.csv: every entry of the weights file with its capability, weight and reason."""
    wf = security.weights_file()
    rows = [{"kind": "primitive cell" if e.is_primitive else "probe",
             "entry": f"{e.bug_class} / {e.primitive}" if e.is_primitive else e.id, "capability": e.capability,
             "weight": f"{e.weight:g}", "reason": e.reason} for e in wf.entries]
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["kind", "entry", "capability", "weight", "reason"])
        w.writeheader()
        w.writerows(rows)
    return rows


def raised_detail(m: dict, scored, weights: dict, primitive_rows) -> dict:
    """A pair whose removal raised the score, with the entry that carries it (monotonicity.driver): its loss on
    each side and, for a primitive cell, how many sequences a detection stopped on each side."""
    from analysis.contract.security_weights import PRIMITIVE_PREFIX
    from analysis.stats.monotonicity import driver

    d = driver(scored, m["with"], m["without"], weights) or {}
    out = {"with": m["with"], "without": m["without"], "removed": m["removed"].split(),
           "entry": d.get("entry", ""), "points": round(d.get("points", 0.0), 1),
           "loss_with": round(d.get("loss_with", 0.0), 3), "loss_without": round(d.get("loss_without", 0.0), 3)}
    if out["entry"].startswith(PRIMITIVE_PREFIX):
        bug, _, primitive = out["entry"][len(PRIMITIVE_PREFIX):].partition("/")
        out.update(bug_class=bug, primitive=primitive)
        for side in ("with", "without"):
            cells = [r for r in primitive_rows if r["allocator"] == m[side] and r["bug_class"] == bug
                     and r["primitive"] == primitive]
            out[f"detected_{side}"] = sum(int(float(r.get("detected") or 0)) for r in cells)
            out[f"sequences_{side}"] = sum(int(float(r.get("sequences") or 0)) for r in cells)
    return out


def write_outputs(rows, out_dir, *, weights: dict | None = None, claims: dict | None = None,
                  prefix: str = "security_", primitive_rows=None) -> dict:
    """The security figures (SVG) and numbers (CSV, JSON) for the paper; returns the numbers. `rows`: the probe
    rows; `primitive_rows`: the primitives.csv rows whose cells the score reads beside them (none: probes only)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    weights = security.weights_file().weights() if weights is None else weights
    claims = catalogue_claims() if claims is None else claims
    probed = {r["allocator"] for r in rows}
    scored = list(rows) + [r for r in security.primitive_score_rows(primitive_rows or [])
                           if r["allocator"] in probed]
    score = scores(scored, weights)
    stops = security.stop_shares(rows, weights)
    order = sorted(score, key=lambda a: (-(score[a]["score"] if not math.isnan(score[a]["score"]) else -1), a))
    probes = list(dict.fromkeys(r["probe"] for r in rows))
    per_cell: dict = {}
    for r in rows:
        per_cell.setdefault((r["allocator"], r["probe"]), []).append(r["outcome"])
    outcome = {cell: worst_outcome(found) for cell, found in per_cell.items()}

    figures.probe_matrix(order, probes, outcome, out_dir / f"{prefix}outcomes.svg")  # worst over sizes
    figures.security_scores(order, score, out_dir / f"{prefix}scores.svg")

    with open(out_dir / f"{prefix}scores.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["allocator", "score", "coverage", "primitive_points", "primitive_share", "caught_share",
                    "mitigated_share", "not_applicable"])
        for a in order:
            s, stop = score[a], stops.get(a, {})
            w.writerow([a, round(s["score"], 2), round(s["coverage"], 3), round(s["primitive_points"], 2),
                        round(s["primitive_share"], 3), round(stop.get("caught", float("nan")), 3),
                        round(stop.get("mitigated", float("nan")), 3), " ".join(s["not_applicable"])])
    weights_table(out_dir / f"{prefix}weights.csv")
    wf = security.weights_file()
    found = disagreements(rows, claims)
    with open(out_dir / f"{prefix}disagreements.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["allocator", "defence", "kind", "probes"])
        w.writeheader()
        w.writerows(found)
    checked = monotonicity(scored, catalogue_pairs())  # the published score: the probes and the primitive cells
    with open(out_dir / f"{prefix}monotonicity.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["with", "without", "removed", "score_with", "score_without", "difference",
                                           "difference_low", "difference_high", "raised", "apart", "blind",
                                           "unmeasured", "driver"])
        w.writeheader()
        w.writerows({k: round(v, 2) if isinstance(v, float) else v for k, v in m.items()} for m in checked)
    counts = Counter(r["outcome"] for r in rows)
    numbers = {
        "allocators": len(order), "probes": len(probes), "rows": len(rows),
        "outcomes": dict(counts), "outcomes_by_size": outcomes_by_size(rows),
        "matrix_cell": "the worst outcome over the sizes a probe ran at (missed, late-crash, mitigated, caught)",
        "weights": weights,
        "capabilities": {c: {"weight": w, "reason": r} for c, (w, r) in wf.capabilities.items()},
        "outcome_losses": {o: {"loss": x, "reason": r} for o, (x, r) in wf.losses.items()},
        "entries": {"probes": sum(not e.is_primitive for e in wf.entries),
                    "primitive_cells": sum(e.is_primitive for e in wf.entries)},
        "primitive_weight_share": round(sum(e.weight for e in wf.entries if e.is_primitive)
                                        / sum(e.weight for e in wf.entries), 3),
        "primitives_scored": bool(primitive_rows),
        "scores": {a: None if math.isnan(score[a]["score"]) else round(score[a]["score"], 2) for a in order},
        "disagreements": {"claimed-not-seen": sum(d["kind"] == "claimed-not-seen" for d in found),
                          "detected-silently": sum(d["kind"] == "detected-silently" for d in found),
                          "seen-not-claimed": sum(d["kind"] == "seen-not-claimed" for d in found)},
        "monotonicity": {"pairs": len(checked),
                         "raised": [f"{m['with']} > {m['without']}" for m in checked if m["raised"]],
                         "raised_detail": [raised_detail(m, scored, weights, primitive_rows or [])
                                           for m in checked if m["raised"]],
                         "blind": [f"{m['with']} > {m['without']}: {m['blind']}" for m in checked if m["blind"]]},
    }
    (out_dir / f"{prefix}numbers.json").write_text(json_text(numbers, indent=2) + "\n")
    return numbers
