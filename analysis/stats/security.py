"""The security axis: interval estimates for the probes, the security score and the claims check.

Estimators
- Rates (how often a primitive worked over fresh processes): Clopper-Pearson exact 95% intervals.
- Entropies (address-entropy, placement-entropy, reuse-entropy): analysis/stats/entropy.py, whose
  docstring says what each estimates and how; its names are importable from here too.

The score (0 = every primitive works, 100 = none does) weighs each probe by what an attacker gains
from its primitive; see DEFAULT_WEIGHTS. All functions take plain rows (dicts as in probes.csv).
"""
import functools
import math

import numpy as np
import pandas as pd
from scipy import stats

from analysis.stats.entropy import (  # noqa: F401 (re-exported: callers import them from here)
    TARGET_ADDRESS_BITS, address_entropy, chain_entropy, coincidences, collision_bits, context_bits,
    most_common_share, parse_picks, per_bit_entropy, placement_entropy, pooled_collision, predictable_steps,
    reuse_entropy, reuse_given_previous, shannon_bits, step_coincidences, step_entropy, successor_coincidences,
)

# What an attacker gains when a probe's primitive works, and what each outcome leaves the attacker, live in
# security_weights.toml (analysis/contract/security_weights.py): every probe and every exploitation-primitive cell is
# mapped to the attacker capability it gives (arbitrary write, allocation at a chosen address, overlapping chunks,
# restricted write, information leak) and weighs what that capability weighs, with a reason per entry. The file
# is read on first use (a malformed one is a one-line error): DEFAULT_WEIGHTS (every entry), PROBE_WEIGHTS (the
# probes alone), CAPABILITY_OF, OUTCOME_LOSS, LATE_CRASH_LOSS and MITIGATED_LOSS are read from it. A reader changes
# the weights in the explore notebook (`weights=`).
@functools.cache
def weights_file():
    """The validated security_weights.toml."""
    from analysis.contract import security_weights

    return security_weights.load()


def _outcome_loss() -> dict[str, float]:
    return {o: weights_file().loss(o) for o in ("missed", "late-crash", "mitigated", "caught")}


def __getattr__(name: str):
    if name == "DEFAULT_WEIGHTS":
        return weights_file().weights()
    if name == "PROBE_WEIGHTS":
        return {e.id: e.weight for e in weights_file().entries if not e.is_primitive}
    if name == "CAPABILITY_OF":
        return weights_file().capability_of()
    if name == "OUTCOME_LOSS":
        return _outcome_loss()
    if name == "LATE_CRASH_LOSS":
        return weights_file().loss("late-crash")
    if name == "MITIGATED_LOSS":
        return weights_file().loss("mitigated")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Exploitation-focused weights: what a heap exploit is assembled from, not what a bug merely breaks.
# ArcHeap (Yun et al., USENIX Security 2020; refs.bib `archeap`) names the end goals of heap exploitation
# "arbitrary chunk" (malloc returns an address the attacker chose) and "overlapping chunks" (two live
# allocations share memory), and the how2heap techniques (refs.bib `how2heap`: tcache poisoning, house of
# spirit, fastbin dup) all aim at one of the two. Probes that hand over either primitive directly weigh 10;
# memory corruption that is the usual way to reach them weighs 5; leaks and predictability, which only
# make an exploit reliable, weigh 2.
EXPLOITATION_WEIGHTS = {
    # allocation at a chosen address
    "freelist-poison": 10, "tcache-poison-safelink": 10, "fake-chunk-free": 10, "wild-free": 10,
    "invalid-free-stack": 10, "invalid-free-far": 10,
    # overlapping chunks
    "double-free": 10, "double-free-interleaved": 10, "double-free-cache-full": 10,
    "overlap-after-double-free": 10, "cross-thread-double-free": 10, "interior-free": 10,
    "invalid-free-unaligned": 10, "size-mismatch": 10, "sized-delete": 10,
    # corruption on the way to those primitives
    "uaf-write": 5, "overflow-16": 5, "overflow-1": 5, "underflow-1": 5, "off-by-one-nul": 5, "large-overflow": 5,
    "realloc-reuse": 5, "realloc-shrink": 5, "malloc-zero": 5, "calloc-overflow": 5, "huge-request": 5,
    # reliability: leaks and predictable placement
    "reuse-immediate": 2, "uaf-read": 2, "uaf-read-reused": 2, "fresh-contents": 2, "placement-entropy": 2,
    "address-entropy": 2,
    "reuse-entropy": 2,
}
# How a probe's sizes are averaged into its loss: each size class present counts equally (small: up to
# 1 KiB, medium: up to 64 KiB, large: above), the sizes within a class equally. The classes, not the
# number of sizes run in each, carry the weight: four small sizes do not outvote the one large size.
SIZE_CLASSES = (("small", 1024), ("medium", 65536), ("large", float("inf")))
# Entropy at which a guess is hopeless enough that the probe counts as fully mitigated.
# TARGET_ADDRESS_BITS (28, x86-64 Linux mmap randomisation) comes from analysis/stats/entropy.py.
TARGET_PLACEMENT_BITS = 4.0  # one in 16 next-block guesses
TARGET_REUSE_BITS = 4.0  # one in 16 guesses of which freed block comes back
ENTROPY_TARGETS = {"address-entropy": TARGET_ADDRESS_BITS, "placement-entropy": TARGET_PLACEMENT_BITS,
                   "reuse-entropy": TARGET_REUSE_BITS}

# Which probes show each claimed defence (catalogue ids), and the outcomes that count as showing it.
DETECTED = frozenset({"caught"})
NOT_MISSED = frozenset({"caught", "mitigated"})
DEFENCE_PROBES = {
    "double-free-detect": (("double-free", "double-free-interleaved", "double-free-cache-full",
                            "overlap-after-double-free", "cross-thread-double-free"), DETECTED),
    "invalid-free-detect": (("interior-free", "wild-free", "fake-chunk-free", "invalid-free-unaligned",
                             "invalid-free-stack", "invalid-free-far"), DETECTED),
    "overflow-detect": (("overflow-1", "overflow-16", "underflow-1", "off-by-one-nul"), DETECTED),
    "guard-pages": (("large-overflow",), DETECTED),
    "free-poison": (("uaf-read",), NOT_MISSED),
    "uaf-write-detect": (("uaf-write", "realloc-reuse"), DETECTED),
    "delayed-reuse": (("reuse-immediate",), NOT_MISSED),
    "freelist-protect": (("freelist-poison",), NOT_MISSED),
    "zero-on-alloc": (("fresh-contents",), NOT_MISSED),
    "randomized-placement": (("placement-entropy",), NOT_MISSED),
    "randomized-reuse": (("reuse-entropy",), NOT_MISSED),
    "size-mismatch-detect": (("size-mismatch", "sized-delete"), DETECTED),
    "huge-request-safe": (("huge-request", "calloc-overflow"), NOT_MISSED),
}


# ------------------------------------------------------------------------------------------ estimators
def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float | None, float | None]:
    if n <= 0:
        return None, None
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


# ------------------------------------------------------------------------------------------ score
UNUSABLE = ("", "n/a", "allocator-failed-to-start")  # outcomes that say nothing about the misuse


def _num(value):
    if value is None or value == "":
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def outcome_counts(row: dict) -> dict[str, int]:
    """The `outcomes` column as {name: count} ({} in runs published before it existed)."""
    out = {}
    for part in str(row.get("outcomes") or "").split():
        name, _, count = part.partition("=")
        if count.isdigit():
            out[name] = int(count)
    return out


def size_of(row: dict) -> int | None:
    size = _num(row.get("size"))
    return None if size is None else int(size)


PRIMITIVE_KIND = "primitive"  # a score row made from a primitive cell (primitive_score_rows), not a probe


def primitive_score_rows(primitive_rows) -> list[dict]:
    """The exploitation-primitive cells (primitives.csv rows) the weights file scores, as score rows: one per
    allocator, entry (bug class and primitive) and attacker (no leak, heap leak), whose loss is the share of
    sequences that gave the primitive. The two attackers of an entry weigh half each."""
    from analysis.contract.security_weights import primitive_id

    scored = {(e.bug_class, e.primitive) for e in weights_file().entries if e.is_primitive}
    out = []
    for r in primitive_rows:
        if (r.get("bug_class"), r.get("primitive")) not in scored:
            continue
        n, k = int(_num(r.get("sequences")) or 0), int(_num(r.get("count")) or 0)
        out.append({"allocator": r["allocator"], "probe": primitive_id(r["bug_class"], r["primitive"]),
                    "kind": PRIMITIVE_KIND, "attacker": r.get("capability", ""), "size": "",
                    "outcome": "sequences" if n else "n/a", "count": k, "sequences": n})
    return out


def _is_primitive(row: dict) -> bool:
    return row.get("kind") == PRIMITIVE_KIND


def probe_loss(row: dict) -> float | None:
    """How much of the capability an attacker gets in one row, 0..1; None when it says nothing (n/a).

    Misuse probes: the mean over usable trials of each outcome's loss (OUTCOME_LOSS, from the weights
    file: missed 1, caught 0, late-crash and mitigated between), from the outcome counts; a row without
    counts (published before them) uses its rate, and a late-crash row at least LATE_CRASH_LOSS. Entropy
    probes: the share of the target bits not reached. Primitive cells: the share of sequences with it."""
    outcome = row.get("outcome")
    if outcome in (None, *UNUSABLE):
        return None
    if _is_primitive(row):
        return row["count"] / row["sequences"]
    probe = row.get("probe")
    bits = _num(row.get("bits"))
    if probe in ENTROPY_TARGETS:
        return None if bits is None else min(1.0, max(0.0, 1 - bits / ENTROPY_TARGETS[probe]))
    loss = _outcome_loss()
    counts = outcome_counts(row)
    n = sum(v for k, v in counts.items() if k in loss)
    if n:
        return sum(loss[k] * v for k, v in counts.items() if k in loss) / n
    rate = _num(row.get("rate"))
    if rate is None:
        rate = 1.0 if outcome == "missed" else 0.0
    if outcome == "late-crash":
        return max(rate, loss["late-crash"])
    if outcome == "mitigated":
        return rate + (1 - rate) * loss["mitigated"]
    return rate


def size_weights(sizes) -> dict:
    """Weight of each size in a probe's loss (SIZE_CLASSES); a lone unsized row (old runs) weighs 1."""
    sizes = list(dict.fromkeys(sizes))
    if not sizes:
        return {}
    classes: dict[str, list] = {}
    for size in sizes:
        name = "unsized" if size is None else next(c for c, top in SIZE_CLASSES if size <= top)
        classes.setdefault(name, []).append(size)
    return {size: 1 / len(classes) / len(members) for members in classes.values() for size in members}


# The score's one estimator is a posterior. A misuse row's outcomes fall into four loss levels (missed,
# late-crash, mitigated, caught: a mitigated bug costs the attacker less than a caught one, the weights file
# says why); their shares get the Jeffreys prior Dirichlet(1/2, ..., 1/2), so 0 misses in 20 processes is
# not certainty. A primitive cell's share of sequences gets the Jeffreys Beta(1/2, 1/2). The point is the
# posterior mean of the score, the interval its 2.5% and 97.5% posterior quantiles: no row, unanimous or
# not, is taken as known exactly.
LEVELS = ("missed", "late-crash", "mitigated", "caught")
JEFFREYS = 0.5


def loss_levels() -> np.ndarray:
    loss = _outcome_loss()
    return np.array([loss[o] for o in LEVELS])


def _level_counts(row: dict) -> np.ndarray | None:
    """Usable trials of a misuse row per loss level (LEVELS); None without an n."""
    counts = outcome_counts(row)
    if any(k in LEVELS for k in counts):
        return np.array([counts.get(o, 0) for o in LEVELS], dtype=float)
    n, rate = int(_num(row.get("trials")) or 0), _num(row.get("rate"))
    if not n or rate is None:
        return None
    hit = round(rate * n)  # rows published before the counts: the rate of the primitive and n
    outcome = row.get("outcome")
    if outcome == "late-crash":
        return np.array([0, n - hit, 0, 0], dtype=float)
    return np.array([hit, 0, n - hit if outcome == "mitigated" else 0,
                     0 if outcome == "mitigated" else n - hit], dtype=float)


def _entropy_loss(row: dict):
    """(mean, sd) of an entropy row's loss 1 - bits/target, bits ~ normal with its interval's spread."""
    lo, hi, bits = _num(row.get("bits_ci_low")), _num(row.get("bits_ci_high")), _num(row.get("bits"))
    target = ENTROPY_TARGETS[row.get("probe")]
    sd = (hi - lo) / 3.92 / target if None not in (lo, hi, bits) and hi > lo else 0.0
    return 1 - bits / target, sd


def posterior_loss(row: dict) -> float | None:
    """The posterior mean of a row's loss (0..1), None when the row says nothing (n/a).

    Misuse rows: the mean of the loss levels under Dirichlet(level counts + 1/2). Entropy rows: the
    mean of 1 - bits/target clipped to [0, 1], bits normal with the spread of its interval. A row
    without an n (hand-made) is its observed loss (probe_loss)."""
    loss = probe_loss(row)
    if loss is None:
        return None
    if _is_primitive(row):
        return (row["count"] + JEFFREYS) / (row["sequences"] + 2 * JEFFREYS)
    if row.get("probe") in ENTROPY_TARGETS:
        mu, sd = _entropy_loss(row)
        if sd == 0:
            return min(1.0, max(0.0, mu))
        a, b = (0 - mu) / sd, (1 - mu) / sd
        inside = mu * (stats.norm.cdf(b) - stats.norm.cdf(a)) - sd * (stats.norm.pdf(b) - stats.norm.pdf(a))
        return float(inside + stats.norm.sf(b))
    counts = _level_counts(row)
    if counts is None or not counts.sum():
        return loss
    alpha = counts + JEFFREYS
    return float(alpha @ loss_levels() / alpha.sum())


def _draw_loss(row: dict, loss: float, rng, draws: int) -> np.ndarray:
    """`draws` losses of one row from its posterior (posterior_loss): misuse rows from the Dirichlet of
    their loss levels, entropy rows from a normal clipped to [0, 1], primitive cells from their Beta; a row
    without an n does not vary."""
    if _is_primitive(row):
        return rng.beta(row["count"] + JEFFREYS, row["sequences"] - row["count"] + JEFFREYS, draws)
    if row.get("probe") in ENTROPY_TARGETS:
        mu, sd = _entropy_loss(row)
        return np.clip(rng.normal(mu, sd, draws) if sd else np.full(draws, mu), 0.0, 1.0)
    counts = _level_counts(row)
    if counts is None or not counts.sum():
        return np.full(draws, loss)
    return rng.dirichlet(counts + JEFFREYS, size=draws) @ loss_levels()


def _probe_loss_cells(rows, losses: list) -> dict[str, dict[str, object]]:
    """{allocator: {probe: L_p}} over the probes with a usable row, L_p the size-weighted mean loss of the
    probe's rows (size_weights; duplicated sizes, from merged runs, share their size's weight); a probe with
    rows but none usable maps to None. `losses[i]` is row i's loss, a float or an array of draws."""
    cells: dict[str, dict[str, list]] = {}
    for row, loss in zip(rows, losses):
        cells.setdefault(row["allocator"], {}).setdefault(row["probe"], []).append((size_of(row), loss))
    out: dict[str, dict[str, object]] = {}
    for alloc, probes in cells.items():
        out[alloc] = {}
        for probe, entries in probes.items():
            usable = [(size, loss) for size, loss in entries if loss is not None]
            if not usable:
                out[alloc][probe] = None
                continue
            ws = size_weights(size for size, _ in usable)
            dup = {s: sum(1 for t, _ in usable if t == s) for s, _ in usable}
            out[alloc][probe] = sum(ws[size] / dup[size] * loss for size, loss in usable)
    return out


def _score_arrays(rows, weights: dict, losses: list) -> dict[str, dict]:
    """The one estimator: per allocator, score = 100 * (1 - sum_p w_p L_p / sum_p w_p) over the entries (probes
    and primitive cells) with data, L_p the size-weighted mean loss of entry p (_probe_loss_cells). `losses[i]`
    is row i's loss, a float or an array of draws (then every result is an array of draws). `primitive_points`:
    the points the primitive cells take off 100, `primitive_share`: their share of the weight."""
    from analysis.contract.security_weights import PRIMITIVE_PREFIX

    total = float(sum(weights.values())) or 1.0
    out = {}
    for alloc, probes in _probe_loss_cells(rows, losses).items():
        lost, weight, not_applicable = 0.0, 0.0, []
        lost_primitive, weight_primitive = 0.0, 0.0
        for probe, probe_loss_ in probes.items():
            if probe_loss_ is None:
                not_applicable.append(probe)
                continue
            w = float(weights.get(probe, 0.0))
            lost = lost + w * probe_loss_
            weight += w
            if probe.startswith(PRIMITIVE_PREFIX):
                lost_primitive = lost_primitive + w * probe_loss_
                weight_primitive += w
        score = 100 * (1 - lost / weight) if weight else float("nan")
        out[alloc] = {"lost": lost, "weight": weight, "score": score, "coverage": weight / total,
                      "not_applicable": not_applicable,
                      "primitive_points": 100 * lost_primitive / weight if weight else float("nan"),
                      "primitive_share": weight_primitive / weight if weight else float("nan")}
    return out


def scores(rows, weights: dict | None = None) -> dict[str, dict]:
    """Per allocator: the posterior mean of the score (0-100; posterior_loss of every row), the weight
    covered by probes with data (coverage, a share of all weights) and the probes left out (no usable
    row at any size). Probes missing from the weights dict count with weight 0. The score is linear in
    the rows' losses, so this is exactly the mean that score_intervals' draws scatter around."""
    weights = weights_file().weights() if weights is None else weights
    rows = list(rows)
    return _score_arrays(rows, weights, [posterior_loss(r) for r in rows])


def score_intervals(rows: list[dict], weights: dict | None = None, *, draws: int = 1000,
                    seed: int = 0) -> pd.DataFrame:
    """Security score per allocator with a 95% interval from the probes' sampling only.

    One estimator for both: the posterior of every row's loss (posterior_loss, _draw_loss), propagated
    through the score (`_score_arrays`). The point is the posterior mean (`scores`), the interval the
    2.5% and 97.5% quantiles of `draws` posterior draws of the score, never widened. A row whose trials
    all agree still varies (20 of 20 caught leaves a 2.3% posterior chance of a miss), so no interval
    ends at its point; tests/stats/test_security.py checks that the interval covers a known score about 95%
    of the time."""
    weights = weights_file().weights() if weights is None else weights
    rows = list(rows)
    rng = np.random.default_rng(seed)
    point_losses = [posterior_loss(r) for r in rows]
    point = _score_arrays(rows, weights, point_losses)
    drawn = [None if loss is None else _draw_loss(r, loss, rng, draws) for r, loss in zip(rows, point_losses)]
    boot = _score_arrays(rows, weights, drawn)
    out = []
    for a in sorted(point):
        s = point[a]["score"]
        v = np.asarray(boot[a]["score"], dtype=float)
        if np.isnan(s) or v.ndim == 0 or np.isnan(v).all():
            low = high = float("nan") if np.isnan(s) else s
        else:
            low, high = (float(x) for x in np.nanquantile(v, [0.025, 0.975]))
        out.append({"allocator": a, "score": s, "score_low": low, "score_high": high,
                    "coverage": point[a]["coverage"]})
    return pd.DataFrame(out, columns=["allocator", "score", "score_low", "score_high", "coverage"])


# ------------------------------------------------------------------------------------------ claims
def _silently_detected(row: dict) -> bool:
    """A missed row in which the allocator printed a message (it saw the misuse, the primitive followed)."""
    return row.get("outcome") == "missed" and outcome_counts(row).get("detected-silently", 0) > 0


def disagreements(rows, claims: dict[str, tuple]) -> list[dict]:
    """Where the catalogue's claimed defences and the probes disagree.

    `claims` maps allocator id -> claimed defence ids. A defence is seen when every row (every size) of
    every probe of it that ran has an outcome in its accepted set. One row per (allocator, defence)
    that disagrees, kind: claimed-not-seen (claimed, and some row shows otherwise), detected-silently
    (claimed, and every failing row is a missed primitive the allocator did print a message about:
    it detected the misuse but did not stop it; not "caught"), or seen-not-claimed."""
    by_alloc: dict[str, dict[str, list]] = {}
    for row in rows:
        by_alloc.setdefault(row["allocator"], {}).setdefault(row["probe"], []).append(row)
    found = []
    for alloc, probes in by_alloc.items():
        claimed = set(claims.get(alloc, ()))
        for defence, (probe_ids, accepted) in DEFENCE_PROBES.items():
            ran = [r for p in probe_ids for r in probes.get(p, ()) if r.get("outcome") not in (None, *UNUSABLE)]
            if not ran:
                continue
            failing = [r for r in ran if r["outcome"] not in accepted]

            def label(r):
                size = size_of(r)
                return f"{r['probe']}{'' if size is None else f'@{size}'}={r['outcome']}"
            if defence in claimed and failing:
                kind = ("detected-silently" if all(_silently_detected(r) for r in failing)
                        else "claimed-not-seen")
                found.append({"allocator": alloc, "defence": defence, "kind": kind,
                              "probes": ", ".join(label(r) for r in failing)})
            elif defence not in claimed and not failing:
                found.append({"allocator": alloc, "defence": defence, "kind": "seen-not-claimed",
                              "probes": ", ".join(label(r) for r in ran)})
    return found


def stop_shares(rows, weights: dict | None = None) -> dict[str, dict[str, float]]:
    """Per allocator, over its misuse probes (weighted as in the score): the share of trials caught (the program
    stopped at the bug) and mitigated (the bug went silently harmless). Primitive cells and entropy probes have
    neither."""
    weights = weights_file().weights() if weights is None else weights
    rows = [r for r in rows if not _is_primitive(r) and r.get("probe") not in ENTROPY_TARGETS]
    out = {}
    for kind in ("caught", "mitigated"):
        shares = []
        for r in rows:
            counts = _level_counts(r) if probe_loss(r) is not None else None
            shares.append(None if counts is None or not counts.sum() else counts[LEVELS.index(kind)] / counts.sum())
        for alloc, probes in _probe_loss_cells(rows, shares).items():
            used = {p: v for p, v in probes.items() if v is not None and weights.get(p, 0) > 0}
            total = sum(weights[p] for p in used)
            out.setdefault(alloc, {})[kind] = sum(weights[p] * v for p, v in used.items()) / total if total else float("nan")
    return out
