"""Exploitation primitives from seeded random heap-action sequences (probes/primitive_sequences.c).

One sequence is one Bernoulli trial per primitive: did the primitive appear (before anything stopped the
sequence, or, for metadata-write, with nothing stopping it)? The sequences of a cell (allocator, bug
class, attacker capability) are independent draws from the sequence generator, so the probability of a
primitive is k/n with a Wilson score interval (95%), which keeps its nominal coverage near 0 and 1 where
most of these rates sit, unlike the Wald interval. Attempts: the spray allocations before the first
primitive, reported as the median over the sequences that found one.
"""
import math
import re
from statistics import median

from scipy import stats

BUG_CLASSES = ("overflow", "write-after-free", "double-free", "invalid-free", "control")
CAPABILITIES = ("none", "heap-leak")
# The driver's bit of each primitive (probes/primitive_sequences.c).
PRIMITIVES = {"overlap": 1, "chosen-address": 2, "neighbour-write": 4, "metadata-write": 8, "allocator-write": 16}
ANY = "any"  # any primitive of the four an allocator could stop (neighbour-write is the program's own data)
ALLOCATOR_PRIMITIVES = ("overlap", "chosen-address", "metadata-write", "allocator-write")
# The allocator itself steered by the attacker: it handed out memory twice or at a chosen address, or wrote
# into chosen memory. A stray write into metadata or free memory is not in it: it is where such steering
# starts, and allocators without inline metadata let it land in free memory.
STRONG = "strong"
STRONG_PRIMITIVES = ("overlap", "chosen-address", "allocator-write")

OVERFLOW_BYTES = (1, 8, 16, 32, 64)  # the overflow class's sizes past the usable end (primitive_sequences.c)
CONFIDENCE = 0.95

_LINE = re.compile(r"^seq=(\d+) end=(\S+) prim=(\d+) attempts=(\d+)$")


def wilson(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float | None, float | None]:
    """Wilson score interval of a binomial proportion k/n; (None, None) without trials."""
    if n <= 0:
        return None, None
    z = stats.norm.ppf(0.5 + confidence / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (0.0 if k == 0 else max(0.0, float(centre - half)), 1.0 if k == n else min(1.0, float(centre + half)))


def parse_sequences(stdout: str) -> list[dict]:
    """The per-sequence lines of the driver's stdout as {seq, end, prim, attempts}; other lines are ignored
    (a batch cut short by a timeout still gives its finished sequences)."""
    out = []
    for line in stdout.splitlines():
        m = _LINE.match(line.strip())
        if m:
            out.append({"seq": int(m[1]), "end": m[2], "prim": int(m[3]), "attempts": int(m[4])})
    return out


def stopped(end: str) -> bool:
    """Did the allocator (or a guard page) stop the sequence? A signal or a non-zero exit; a hang is not."""
    return end.startswith("signal:") or (end.startswith("exit:") and end != "exit:0")


def signal_summary(sequences: list[dict]) -> str:
    """`sig:code:where=count` of the stopped sequences, most frequent first ('' when none)."""
    counts: dict[str, int] = {}
    for s in sequences:
        if stopped(s["end"]):
            key = s["end"].removeprefix("signal:")
            counts[key] = counts.get(key, 0) + 1
    return " ".join(f"{k}={v}" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def cell_rows(sequences: list[dict]) -> list[dict]:
    """One row per primitive (and `any`, `strong`) of one cell: sequences, count, rate and its Wilson interval, the
    median attempts of the sequences that found it, how many were stopped and how many hung."""
    n = len(sequences)
    detected = sum(stopped(s["end"]) for s in sequences)
    hangs = sum(s["end"] == "hang" for s in sequences)
    signals = signal_summary(sequences)
    any_mask = sum(PRIMITIVES[p] for p in ALLOCATOR_PRIMITIVES)
    strong_mask = sum(PRIMITIVES[p] for p in STRONG_PRIMITIVES)
    rows = []
    for name, mask in (*PRIMITIVES.items(), (ANY, any_mask), (STRONG, strong_mask)):
        found = [s for s in sequences if s["prim"] & mask]
        lo, hi = wilson(len(found), n)
        attempts = [s["attempts"] for s in found if s["attempts"] > 0]
        rows.append({"primitive": name, "sequences": n, "count": len(found),
                     "rate": len(found) / n if n else None, "rate_ci_low": lo, "rate_ci_high": hi,
                     "median_attempts": median(attempts) if attempts else None, "detected": detected,
                     "hangs": hangs, "signals": signals})
    return rows


def _num(v):
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def found_anywhere(rows: list[dict], allocator: str, primitive: str = ANY, *, bug_classes=None) -> bool:
    """Was the primitive seen at least once under the allocator (any bug class but the control)?"""
    wanted = set(bug_classes or BUG_CLASSES[:-1])
    return any(r["allocator"] == allocator and r["primitive"] == primitive and r["bug_class"] in wanted
               and (_num(r.get("count")) or 0) > 0 for r in rows)


def false_positives(rows: list[dict]) -> list[dict]:
    """Control rows (no bug injected) with any primitive: the checks themselves are wrong there."""
    return [r for r in rows
            if r["bug_class"] == "control" and r["primitive"] == ANY and (_num(r.get("count")) or 0) > 0]


def capability_gain(rows: list[dict], allocator: str, bug_class: str, primitive: str = ANY) -> float | None:
    """How much a heap leak raises the rate of a primitive: rate(heap-leak) - rate(none), or None."""
    rate = {r["capability"]: _num(r.get("rate")) for r in rows
            if r["allocator"] == allocator and r["bug_class"] == bug_class and r["primitive"] == primitive}
    if rate.get("heap-leak") is None or rate.get("none") is None:
        return None
    return rate["heap-leak"] - rate["none"]


# Knock-out builds (allocators.toml) and what their missing check should give back to an attacker, with the
# unpatched build of the same source as the control: (bug class, capability, primitive).
KNOCKOUTS = {
    "glibc-no-tcache-key": ("glibc-built", "double-free", "none", "overlap"),
    "glibc-no-safe-linking": ("glibc-built", "write-after-free", "none", "chosen-address"),
}
# A claimed defence (allocators.toml `defences`) and the cells in which it should leave no primitive:
# (bug classes, capabilities, primitives). Safe-linking-style protection claims only the blind attacker.
CLAIM_STOPS = {
    "double-free-detect": (("double-free",), CAPABILITIES, ALLOCATOR_PRIMITIVES),
    "invalid-free-detect": (("invalid-free",), CAPABILITIES, ALLOCATOR_PRIMITIVES),
    # a write-after-free check runs when the slot is handed out again: a write into a block that is never
    # reused within the sequence (metadata-write) is outside what it claims
    "uaf-write-detect": (("write-after-free",), CAPABILITIES, STRONG_PRIMITIVES),
    "overflow-detect": (("overflow",), CAPABILITIES, ALLOCATOR_PRIMITIVES),
    "freelist-protect": (("write-after-free", "double-free", "overflow"), ("none",), ("chosen-address",)),
}


def _cell(rows, allocator, bug_class, capability, primitive):
    return next((r for r in rows if r["allocator"] == allocator and r["bug_class"] == bug_class
                 and r["capability"] == capability and r["primitive"] == primitive), None)


def knockout_checks(rows: list[dict], knockouts: dict | None = None) -> list[dict]:
    """For each knock-out build with data: the primitive its missing check should allow, under it and under
    its control build, and whether it was found (count > 0) under the knock-out."""
    out = []
    for build, (control, bug_class, capability, primitive) in (knockouts or KNOCKOUTS).items():
        hit = _cell(rows, build, bug_class, capability, primitive)
        if hit is None or not (_num(hit.get("sequences")) or 0):
            continue
        base = _cell(rows, control, bug_class, capability, primitive)
        out.append({"allocator": build, "control": control, "bug_class": bug_class, "capability": capability,
                    "primitive": primitive, "count": int(_num(hit["count"])), "sequences": int(_num(hit["sequences"])),
                    "rate": _num(hit.get("rate")), "control_rate": _num(base.get("rate")) if base else None,
                    "found": _num(hit["count"]) > 0})
    return out


def claim_disagreements(rows: list[dict], claims: dict[str, tuple]) -> list[dict]:
    """Cells where an allocator that claims a defence (claims: allocator -> defences) still gave the
    primitive that defence should stop: one row per (allocator, defence, bug class, capability, primitive)."""
    out = []
    for r in rows:
        for defence in claims.get(r["allocator"], ()):
            classes, capabilities, prims = CLAIM_STOPS.get(defence, ((), (), ()))
            if (r["bug_class"] in classes and r["capability"] in capabilities and r["primitive"] in prims
                    and (_num(r.get("count")) or 0) > 0):
                out.append({"allocator": r["allocator"], "defence": defence, "bug_class": r["bug_class"],
                            "capability": r["capability"], "primitive": r["primitive"],
                            "count": int(_num(r["count"])), "sequences": int(_num(r["sequences"]))})
    return out


def disagreement_summary(disagreements: list[dict]) -> list[dict]:
    """claim_disagreements grouped by (allocator, defence): how many cells, and the one with most sequences."""
    groups: dict[tuple, list[dict]] = {}
    for d in disagreements:
        groups.setdefault((d["allocator"], d["defence"]), []).append(d)
    out = []
    for (alloc, defence), found in groups.items():
        worst = max(found, key=lambda d: (d["count"] / d["sequences"] if d["sequences"] else 0, d["primitive"]))
        out.append({"allocator": alloc, "defence": defence, "cells": len(found),
                    "worst": f"{worst['primitive']} after {worst['bug_class']} ({worst['capability']}): "
                             f"{worst['count']}/{worst['sequences']}"})
    return out


def leak_gains(rows: list[dict], primitive: str = STRONG) -> list[dict]:
    """Cells where the heap leak clearly helps: the primitive's interval with the leak lies above the one
    without it (same allocator and bug class). What an attacker who undoes pointer mangling gains."""
    cells = {(r["allocator"], r["bug_class"], r["capability"]): r for r in rows if r["primitive"] == primitive}
    out = []
    for (alloc, bug, cap), leak in sorted(cells.items()):
        blind = cells.get((alloc, bug, "none"))
        if cap != "heap-leak" or blind is None:
            continue
        lo, hi = _num(leak.get("rate_ci_low")), _num(blind.get("rate_ci_high"))
        if lo is not None and hi is not None and lo > hi:
            out.append({"allocator": alloc, "bug_class": bug, "primitive": primitive,
                        "rate_none": _num(blind.get("rate")), "rate_heap_leak": _num(leak.get("rate")),
                        "ci_heap_leak": [lo, _num(leak.get("rate_ci_high"))],
                        "ci_none": [_num(blind.get("rate_ci_low")), hi]})
    return out
