"""The security axis: interval estimates for the probes, the security score and the claims check.

Estimators
- Rates (how often a primitive worked over fresh processes): Clopper-Pearson exact 95% intervals.
- Address entropy across fresh processes: the sum over address bits of each bit's binary entropy.
  It needs far fewer samples than a plug-in entropy of whole addresses (which cannot exceed log2 of
  the sample count), is exact for independent uniform bits (up to a small downward bias from the
  finite sample) and 0 for fixed bits; bits that move together (an offset added to a random base) are
  counted as if independent, so it is an upper bound in that case. Processes are resampled
  (bootstrap); resamples repeat processes, which biases their entropy low, so the interval is the
  basic (reflected) one rather than percentiles.
- Placement entropy within a process: the Shannon entropy (plug-in, Miller-Madow) of the distance from one
  allocation to the next, per process, averaged over processes; interval: bootstrap over processes.
  With 255 steps a process it cannot exceed log2(255) ~ 8 bits.

The score (0 = every primitive works, 100 = none does) weighs each probe by what an attacker gains
from its primitive; see DEFAULT_WEIGHTS. All functions take plain rows (dicts as in probes.csv).
"""
import math
from collections import Counter

import numpy as np
import pandas as pd
from scipy import stats

# What an attacker gains when the primitive works, on a 1-10 scale; the reasons:
DEFAULT_WEIGHTS = {
    # Allocation at an address the attacker chose: a write-what-where, the strongest heap primitive.
    "freelist-poison": 10,
    "fake-chunk-free": 9,  # the same, but it needs a writable area the attacker already controls
    # Two live objects sharing memory: type confusion, usually to a write-what-where.
    "double-free": 8,
    "overlap-after-double-free": 8,
    "double-free-interleaved": 7,  # the same primitive through a common bypass of simple checks
    "double-free-cache-full": 7,
    "uaf-write": 8,  # dangling writes reaching a new owner: the core of use-after-free exploits
    "overflow-16": 8,  # rewriting a neighbour's fields (pointers, lengths)
    "wild-free": 7,  # a chosen non-heap address enters the free lists
    "interior-free": 7,  # a block overlapping a live one
    "overflow-1": 6,  # off-by-one: one byte of a size field or pointer is enough in classic exploits
    "large-overflow": 6,  # a linear overflow of a large buffer into whatever is mapped next
    "calloc-overflow": 6,  # an undersized buffer the caller believes is huge: a later overflow
    "underflow-1": 5,
    "reuse-immediate": 5,  # makes use-after-free exploitation reliable (heap feng shui)
    "size-mismatch": 5,  # C++ only; the same overlap as interior-free when it works
    "sized-delete": 5,
    "uaf-read": 4,  # information leak (pointers defeat ASLR, secrets)
    "fresh-contents": 4,  # information leak through uninitialised memory
    "placement-entropy": 4,  # predictable neighbours make overflows aim
    "address-entropy": 3,  # mostly the kernel's ASLR: the allocator adds little
    "huge-request": 3,  # a non-NULL impossible block is rare but fatal
}
# Exploitation-focused weights: what a heap exploit is assembled from, not what a bug merely breaks.
# ArcHeap (Yun et al., USENIX Security 2020; refs.bib `archeap`) names the end goals of heap exploitation
# "arbitrary chunk" (malloc returns an address the attacker chose) and "overlapping chunks" (two live
# allocations share memory), and the how2heap techniques (refs.bib `how2heap`: tcache poisoning, house of
# spirit, fastbin dup) all aim at one of the two. Probes that hand over either primitive directly weigh 10;
# memory corruption that is the usual way to reach them weighs 5; leaks and predictability, which only
# make an exploit reliable, weigh 2.
EXPLOITATION_WEIGHTS = {
    # allocation at a chosen address
    "freelist-poison": 10, "fake-chunk-free": 10, "wild-free": 10,
    # overlapping chunks
    "double-free": 10, "double-free-interleaved": 10, "double-free-cache-full": 10,
    "overlap-after-double-free": 10, "interior-free": 10, "size-mismatch": 10, "sized-delete": 10,
    # corruption on the way to those primitives
    "uaf-write": 5, "overflow-16": 5, "overflow-1": 5, "underflow-1": 5, "large-overflow": 5,
    "calloc-overflow": 5, "huge-request": 5,
    # reliability: leaks and predictable placement
    "reuse-immediate": 2, "uaf-read": 2, "fresh-contents": 2, "placement-entropy": 2, "address-entropy": 2,
}
# Entropy at which a guess is hopeless enough that the probe counts as fully mitigated.
TARGET_ADDRESS_BITS = 28.0  # x86-64 Linux mmap randomisation (vm.mmap_rnd_bits default)
TARGET_PLACEMENT_BITS = 4.0  # one in 16 next-block guesses
LATE_CRASH_LOSS = 0.5  # the misuse went unnoticed; the corruption surfaced somewhere unrelated

# Which probes show each claimed defence (catalogue ids), and the outcomes that count as showing it.
DETECTED = frozenset({"caught"})
NOT_MISSED = frozenset({"caught", "mitigated"})
DEFENCE_PROBES = {
    "double-free-detect": (("double-free", "double-free-interleaved", "double-free-cache-full",
                            "overlap-after-double-free"), DETECTED),
    "invalid-free-detect": (("interior-free", "wild-free", "fake-chunk-free"), DETECTED),
    "overflow-detect": (("overflow-1", "overflow-16", "underflow-1"), DETECTED),
    "guard-pages": (("large-overflow",), DETECTED),
    "free-poison": (("uaf-read",), NOT_MISSED),
    "uaf-write-detect": (("uaf-write",), DETECTED),
    "delayed-reuse": (("reuse-immediate",), NOT_MISSED),
    "freelist-protect": (("freelist-poison",), NOT_MISSED),
    "zero-on-alloc": (("fresh-contents",), NOT_MISSED),
    "randomized-placement": (("placement-entropy",), NOT_MISSED),
    "size-mismatch-detect": (("size-mismatch", "sized-delete"), DETECTED),
    "huge-request-safe": (("huge-request", "calloc-overflow"), NOT_MISSED),
}


# ------------------------------------------------------------------------------------------ estimators
def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float | None, float | None]:
    if n <= 0:
        return None, None
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


def _binary_entropy(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -(p * np.log2(p) + (1 - p) * np.log2(1 - p))
    return np.nan_to_num(h)


def per_bit_entropy(addresses, low_bit: int = 0, high_bit: int = 64) -> float:
    """Sum over bit positions of the binary entropy of that bit across the samples, each with the
    Miller-Madow correction (+1/(2n ln 2) for a bit that varied, capped at 1 bit): the plug-in value
    alone is biased low by about that much per random bit (about 1 bit in 28 from 20 processes)."""
    a = np.asarray([int(x) for x in addresses], dtype=np.uint64)
    if a.size < 2:
        return 0.0
    shifts = np.arange(low_bit, high_bit, dtype=np.uint64)
    bits = (a[:, None] >> shifts[None, :]) & np.uint64(1)
    p = bits.mean(axis=0)
    varying = (p > 0) & (p < 1)
    return float(np.minimum(1.0, _binary_entropy(p) + varying / (2 * a.size * np.log(2))).sum())


def _resample(values, statistic, *, seed: int, reps: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = len(values)
    return np.array([statistic([values[i] for i in rng.integers(0, n, n)]) for _ in range(reps)])


def address_entropy(addresses, *, seed: int = 0, reps: int = 1000,
                    confidence: float = 0.95) -> tuple[float, float, float]:
    """(bits, low, high): entropy of addresses across fresh processes with a basic (reflected) bootstrap
    interval, widened to contain the estimate (tests/test_security.py checks coverage on simulated data)."""
    addresses = [int(a) for a in addresses]
    if len(addresses) < 2:
        return float("nan"), float("nan"), float("nan")
    plain = per_bit_entropy(addresses)
    draws = _resample(addresses, per_bit_entropy, seed=seed, reps=reps)
    alpha = (1 - confidence) / 2
    q_lo, q_hi = np.quantile(draws, [alpha, 1 - alpha])
    lo, hi = max(0.0, float(2 * plain - q_hi)), float(2 * plain - q_lo)
    return plain, min(lo, plain), max(hi, plain)


def shannon_bits(values) -> float:
    counts = np.array(list(Counter(values).values()), dtype=float)
    if counts.sum() == 0:
        return 0.0
    p = counts / counts.sum()
    return float(-(p * np.log2(p)).sum())


def step_entropy(addresses) -> float:
    """Entropy (bits) of the distance between consecutive allocations in one process, plug-in with
    the Miller-Madow correction ((distinct values - 1) / (2 n ln 2))."""
    steps = np.diff(np.asarray(addresses, dtype=np.int64)).tolist()
    if not steps:
        return 0.0
    return shannon_bits(steps) + (len(set(steps)) - 1) / (2 * len(steps) * np.log(2))


def placement_entropy(sequences, *, seed: int = 0, reps: int = 1000,
                      confidence: float = 0.95) -> tuple[float, float, float]:
    """(bits, low, high): mean next-address entropy over processes, percentile bootstrap over processes."""
    per_process = [step_entropy(s) for s in sequences if len(s) > 1]
    if not per_process:
        return float("nan"), float("nan"), float("nan")
    mean = float(np.mean(per_process))
    if len(per_process) < 2:
        return mean, float("nan"), float("nan")
    draws = _resample(per_process, np.mean, seed=seed, reps=reps)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(draws, [alpha, 1 - alpha])
    return mean, float(lo), float(hi)


def predictable_steps(sequences) -> tuple[int, int]:
    """(k, n): steps whose distance is the process's most common one, over all steps."""
    k = n = 0
    for s in sequences:
        d = np.diff(np.asarray(s, dtype=np.int64)).tolist()
        if d:
            k += Counter(d).most_common(1)[0][1]
            n += len(d)
    return k, n


# ------------------------------------------------------------------------------------------ score
def _num(value):
    if value is None or value == "":
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def probe_loss(row: dict) -> float | None:
    """How much of the primitive an attacker gets, 0..1; None when the probe says nothing (n/a)."""
    outcome = row.get("outcome")
    if outcome in (None, "", "n/a"):
        return None
    probe = row.get("probe")
    bits = _num(row.get("bits"))
    if probe == "address-entropy":
        return None if bits is None else min(1.0, max(0.0, 1 - bits / TARGET_ADDRESS_BITS))
    if probe == "placement-entropy":
        return None if bits is None else min(1.0, max(0.0, 1 - bits / TARGET_PLACEMENT_BITS))
    rate = _num(row.get("rate"))
    if rate is None:
        rate = 1.0 if outcome == "missed" else 0.0
    if outcome == "late-crash":
        return max(rate, LATE_CRASH_LOSS)
    return rate


def scores(rows, weights: dict | None = None) -> dict[str, dict]:
    """Per allocator: score (0-100), the weight covered by probes with data, and the probes left out.

    score = 100 * (1 - sum(w * loss) / sum(w)) over the probes that ran; probes missing from the
    weights dict count with weight 0.
    """
    weights = DEFAULT_WEIGHTS if weights is None else weights
    out: dict[str, dict] = {}
    for row in rows:
        entry = out.setdefault(row["allocator"], {"lost": 0.0, "weight": 0.0, "not_applicable": []})
        loss = probe_loss(row)
        w = float(weights.get(row["probe"], 0.0))
        if loss is None:
            entry["not_applicable"].append(row["probe"])
            continue
        entry["lost"] += w * loss
        entry["weight"] += w
    total = float(sum(weights.values())) or 1.0
    for entry in out.values():
        entry["score"] = 100 * (1 - entry["lost"] / entry["weight"]) if entry["weight"] else float("nan")
        entry["coverage"] = entry["weight"] / total
    return out


# ------------------------------------------------------------------------------------------ claims
def disagreements(rows, claims: dict[str, tuple]) -> list[dict]:
    """Where the catalogue's claimed defences and the probes disagree.

    `claims` maps allocator id -> claimed defence ids. A defence is seen when every probe of it that ran
    has an outcome in its accepted set. Returns one row per (allocator, defence) that disagrees:
    kind = claimed-not-seen (claimed, and some probe shows otherwise) or seen-not-claimed.
    """
    by_alloc: dict[str, dict[str, dict]] = {}
    for row in rows:
        by_alloc.setdefault(row["allocator"], {})[row["probe"]] = row
    found = []
    for alloc, probes in by_alloc.items():
        claimed = set(claims.get(alloc, ()))
        for defence, (probe_ids, accepted) in DEFENCE_PROBES.items():
            ran = [probes[p] for p in probe_ids if p in probes and probes[p].get("outcome") not in ("n/a", "", None)]
            if not ran:
                continue
            failing = [r for r in ran if r["outcome"] not in accepted]
            if defence in claimed and failing:
                found.append({"allocator": alloc, "defence": defence, "kind": "claimed-not-seen",
                              "probes": ", ".join(f"{r['probe']}={r['outcome']}" for r in failing)})
            elif defence not in claimed and not failing:
                found.append({"allocator": alloc, "defence": defence, "kind": "seen-not-claimed",
                              "probes": ", ".join(f"{r['probe']}={r['outcome']}" for r in ran)})
    return found


def score_intervals(rows: list[dict], weights: dict | None = None, *, draws: int = 1000,
                    seed: int = 0) -> pd.DataFrame:
    """Security score per allocator with a 95% interval from the probes' own sampling uncertainty.

    Each draw replaces every rate by a draw from its Jeffreys posterior Beta(k + 1/2, n - k + 1/2)
    (k of n fresh processes in which the primitive worked) and every entropy by a normal draw with
    the spread of its bootstrap interval, then recomputes the score; the interval is the 2.5% and
    97.5% quantiles of the draws, widened to contain the point score. Probes that ran only a few
    times (deterministic ones) therefore carry a wide posterior, honestly."""
    rng = np.random.default_rng(seed)
    point = scores(rows, weights)
    samples: dict[str, list[float]] = {a: [] for a in point}
    prepared = []
    for row in rows:
        r = dict(row)
        n = _num(r.get("trials")) or 0
        rate = _num(r.get("rate"))
        lo, hi = _num(r.get("bits_ci_low")), _num(r.get("bits_ci_high"))
        prepared.append((r, n, rate, lo, hi))
    for _ in range(draws):
        drawn = []
        for r, n, rate, lo, hi in prepared:
            d = dict(r)
            if r.get("probe") in ("address-entropy", "placement-entropy"):
                bits = _num(r.get("bits"))
                if bits is not None and lo is not None and hi is not None and hi > lo:
                    d["bits"] = max(0.0, rng.normal(bits, (hi - lo) / 3.92))
            elif rate is not None and n > 0:
                k = round(rate * n)
                d["rate"] = rng.beta(k + 0.5, n - k + 0.5)
            drawn.append(d)
        for a, entry in scores(drawn, weights).items():
            samples[a].append(entry["score"])
    out = []
    for a in sorted(point):
        s = point[a]["score"]
        v = np.array(samples[a], dtype=float)
        if np.isnan(s) or np.isnan(v).all():
            low = high = float("nan")
        else:
            low, high = np.nanquantile(v, [0.025, 0.975])
            low, high = min(float(low), s), max(float(high), s)
        out.append({"allocator": a, "score": s, "score_low": low, "score_high": high,
                    "coverage": point[a]["coverage"]})
    return pd.DataFrame(out, columns=["allocator", "score", "score_low", "score_high", "coverage"])
