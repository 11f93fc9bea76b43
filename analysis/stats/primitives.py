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

_LINE = re.compile(r"^seq=(\d+) end=(\S+) prim=(\d+) attempts=(\d+)$")


def wilson(k: int, n: int, confidence: float = 0.95) -> tuple[float | None, float | None]:
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
    """One row per primitive (and `any`) of one cell: sequences, count, rate and its Wilson interval, the
    median attempts of the sequences that found it, how many were stopped and how many hung."""
    n = len(sequences)
    detected = sum(stopped(s["end"]) for s in sequences)
    hangs = sum(s["end"] == "hang" for s in sequences)
    signals = signal_summary(sequences)
    any_mask = sum(PRIMITIVES[p] for p in ALLOCATOR_PRIMITIVES)
    rows = []
    for name, mask in (*PRIMITIVES.items(), (ANY, any_mask)):
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
