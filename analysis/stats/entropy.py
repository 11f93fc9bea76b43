"""The entropy estimators of the security probes: how hard it is to guess where a block lies in a
fresh process, where the next block will lie, and which freed block comes back.

- Address entropy across fresh processes (address-entropy): a chain over the address bits. By the
  chain rule the entropy of an address is the sum over bits of H(b_i | all lower bits); each bit here
  is conditioned on the k bits just below it, H(b_i | b_{i-1} .. b_{i-k}), where a G-test (at 1%) shows
  that they predict it, and counted alone, H(b_i), where it does not. Conditioning on fewer bits can
  only raise a term, so the sum is still an upper bound of the true entropy, but bits that a carry
  flips together (a random page count plus a fixed offset) count as the one bit they are. The plain
  sum of per-bit binary entropies (`per_bit_entropy`, the estimate before, kept for comparison)
  counted each of them as random: 19.8 bits for a true 11.6 in tests/stats/test_entropy.py. Each term is
  plug-in with the Miller-Madow correction (per context for the conditional one) and is not capped at
  1 bit (a cap would bias the sum low); k = `context_bits(n)`: 2 below 100 processes, 3 from 100 on.
  The test keeps the sum nearly unbiased: conditioning every bit on 2 bits (each term capped at 1 bit)
  read 0.5 bit low at 8 random bits and 2 bits low at 28 from 20 processes in seeded simulations,
  since a context then holds about five processes. Simulated (tests/stats/test_entropy.py, 100 seeds of 20 processes): mean error -0.09
  to -0.16 bit for 8 to 16 independent random bits, +0.17 for the correlated case; one reading's
  standard deviation 0.2-0.4 bit from 20 processes, about half that from 40. Fixed bits (alignment,
  the kernel's fixed high bits) contribute nothing. Interval: a bootstrap over processes whose
  resamples keep the sample's dependence decisions; resamples repeat processes, which lowers their
  entropy, so their percentiles are taken around their median and placed at the estimate (not
  reflected: the shift of the resamples is not the estimator's bias). Coverage of the truth, simulated
  with 20 processes: 94-96% (tests/stats/test_entropy.py).
- Placement entropy within a process (placement-entropy): the collision (Renyi order-2) entropy of the
  distance from one allocation to the next, estimated by coincidence counting (Ma 1981): of all pairs
  of steps within a process, the share that are equal estimates sum p^2 without bias, pooled over
  processes; bits = -log2 of it. Unlike the plug-in entropy (which cannot exceed log2 of the steps
  seen, 8 bits for 255) it needs only a few coincidences: about 2^(b/2) samples for b bits. It equals
  the Shannon entropy for a uniform choice and is a lower bound otherwise (the quantity that matters to
  an attacker guessing). Resolution: with n processes of 255 steps the standard error at b bits is
  about 1 / (ln 2 sqrt(n 32131 / 2^b)) bit (0.46 bit at 16 bits from 20 processes, 0.21 from 100;
  seeded simulations: 0.11 bit at 12 bits from 20). No coincidence at all reads log2(pairs) (a lower
  bound). Interval: percentile bootstrap over processes (it covered 92% of simulated truths at 12 bits
  from 20 processes, 1000 seeds; reuse-entropy widens the same interval, see below).
- Reuse entropy (reuse-entropy): the collision entropy of which of M freed blocks the next allocation
  of their size returns (probes/reuse_entropy.c: the index in address order, or none of them). The
  same coincidence counting over pairs of picks within a process, pooled over processes, over the
  picks that are freed blocks: the entropy of which freed block comes back when one does. A pick that
  is none of them says nothing about that choice (it may be a never-used slot, or reuse delayed beyond
  the next allocation: reuse-immediate's business, and placement-entropy's for where a new block
  lands); an allocator none of whose picks is a freed block has no reading (n/a, with the count).
  Capped at log2(M): the pick cannot hold more bits than there are
  candidates. Resolution as for placement, with R(R-1)/2 pairs per process of R picks. An attacker
  who has seen the last pick guesses the next from it, so the same counting is also done over pairs of
  picks that follow the same pick (the next pick given the previous one), and the lower of the two
  readings is reported when that conditional one rests on at least MIN_SUCCESSOR_COINCIDENCES and its
  pairs are at least MIN_SUCCESSOR_SHARE of all pairs (predecessors that recur, not a few recurrences): a
  deterministic cycle between two blocks (tbbmalloc: 9, 136, 9, 136, ...) reads 1 bit unconditionally
  and 0 given the previous pick. Interval:
  percentile bootstrap over processes, each end's distance from the estimate widened by
  sqrt(n/(n-1)) t(n-1)/z (1.095 for 20 processes): the plain percentiles covered 92% of simulated
  truths, the widened ones 94% (2000 seeds, 20 processes of 512 picks, 8 and 12 bits).
- Every entropy and bound is capped at TARGET_ADDRESS_BITS, what the kernel's mmap randomisation can
  supply: an estimator's excess above it is noise.
"""
import math
from collections import Counter

import numpy as np
from scipy import stats

TARGET_ADDRESS_BITS = 28.0  # x86-64 Linux mmap randomisation (vm.mmap_rnd_bits default)


# ------------------------------------------------------------------------------------------ address bits
def _binary_entropy(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -(p * np.log2(p) + (1 - p) * np.log2(1 - p))
    return np.nan_to_num(h)


def _bit_matrix(addresses, low_bit: int = 0, high_bit: int = 64) -> np.ndarray:
    """(n, high_bit - low_bit) array of 0/1: bit low_bit + j of address i."""
    a = np.asarray([int(x) for x in addresses], dtype=np.uint64)
    shifts = np.arange(low_bit, high_bit, dtype=np.uint64)
    return ((a[:, None] >> shifts[None, :]) & np.uint64(1)).astype(np.int64)


def per_bit_entropy(addresses, low_bit: int = 0, high_bit: int = 64) -> float:
    """Sum over bit positions of the binary entropy of that bit across the samples, each with the
    Miller-Madow correction (+1/(2n ln 2) for a bit that varied, capped at 1 bit). Exact for independent
    uniform bits; it counts bits that move together as independent (an overestimate there): kept for
    comparison with `chain_entropy`, which address_entropy uses."""
    if len(addresses) < 2:
        return 0.0
    bits = _bit_matrix(addresses, low_bit, high_bit)
    p = bits.mean(axis=0)
    varying = (p > 0) & (p < 1)
    return float(np.minimum(1.0, _binary_entropy(p) + varying / (2 * len(bits) * np.log(2))).sum())


def context_bits(n: int) -> int:
    """How many lower bits may condition each bit in `chain_entropy` for n samples: 2 below 100, then 3
    (about five samples per context or more)."""
    return 2 if n < 100 else 3


DEPENDENCE_ALPHA = 0.01  # a bit is conditioned on the bits below it where the G-test rejects independence


def _chain_terms(bits: np.ndarray, k: int, alpha: float = DEPENDENCE_ALPHA):
    """Per bit: (H(bit), H(bit | the k bits below it), dependent), the entropies plug-in with Miller-Madow
    (per context for the conditional one), `dependent` where the G-test of the bit against its context
    rejects independence at `alpha`. `bits` is (reps, n, B) of 0/1; each result is (reps, B)."""
    reps, n, width = bits.shape
    padded = np.concatenate([np.zeros((reps, n, k), dtype=np.int64), bits], axis=2)
    ctx = np.zeros_like(bits)
    for j in range(1, k + 1):  # bit i - j is bit j - 1 of the context
        ctx += padded[:, :, k - j:k - j + width] << (j - 1)
    contexts = 1 << k
    code = ((np.arange(reps)[:, None, None] * width + np.arange(width)[None, None, :]) * contexts + ctx) * 2 + bits
    counts = np.bincount(code.ravel(), minlength=reps * width * contexts * 2).reshape(reps, width, contexts, 2)
    n_c, ones = counts.sum(axis=3), counts[..., 1]
    h_c = _binary_entropy(np.where(n_c > 0, ones / np.maximum(n_c, 1), 0.0))
    total = ones.sum(axis=2)
    h = _binary_entropy(total / n)
    h_cond = (n_c * h_c).sum(axis=2) / n
    mm = 1 / (2 * n * np.log(2))
    plain = h + ((total > 0) & (total < n)) * mm
    conditional = h_cond + ((ones > 0) & (ones < n_c)).sum(axis=2) * mm
    g = 2 * n * np.log(2) * np.maximum(h - h_cond, 0.0)  # the G statistic of bit against context
    dependent = stats.chi2.sf(g, np.maximum((n_c > 0).sum(axis=2) - 1, 1)) < alpha
    return plain, conditional, dependent


def chain_entropy(addresses, context: int | None = None, low_bit: int = 0, high_bit: int = 64) -> float:
    """Entropy (bits) of addresses across samples: the sum over bits of H(bit | the `context` bits below
    it) (`context_bits(n)` by default) where the sample shows that they predict it, else H(bit). An upper
    bound of the true entropy (up to the small-sample bias), tight for random bases plus fixed offsets."""
    if len(addresses) < 2:
        return 0.0
    k = context_bits(len(addresses)) if context is None else context
    plain, conditional, dependent = _chain_terms(_bit_matrix(addresses, low_bit, high_bit)[None], k)
    return float(np.where(dependent, conditional, plain).sum())


def address_entropy(addresses, *, seed: int = 0, reps: int = 1000,
                    confidence: float = 0.95) -> tuple[float, float, float]:
    """(bits, low, high): `chain_entropy` of addresses across fresh processes, with the percentiles of a
    bootstrap over processes around its median, placed at the estimate (the resamples keep the sample's
    dependence decisions); all three capped at TARGET_ADDRESS_BITS (tests/stats/test_entropy.py checks the
    coverage on simulated data)."""
    addresses = [int(a) for a in addresses]
    if len(addresses) < 2:
        return float("nan"), float("nan"), float("nan")
    bits = _bit_matrix(addresses)
    k = context_bits(len(addresses))
    plain, conditional, dependent = _chain_terms(bits[None], k)
    bits_hat = float(np.where(dependent, conditional, plain).sum())
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(addresses), (reps, len(addresses)))
    draws = []
    for chunk in np.array_split(idx, max(1, reps // 200)):
        p, c, _ = _chain_terms(bits[chunk], k)
        draws.append(np.where(dependent, c, p).sum(axis=1))
    draws = np.concatenate(draws)
    alpha = (1 - confidence) / 2
    q_lo, q_hi = np.quantile(draws - np.median(draws), [alpha, 1 - alpha])
    cap = TARGET_ADDRESS_BITS
    lo, hi = max(0.0, bits_hat + float(min(q_lo, 0.0))), bits_hat + float(max(q_hi, 0.0))
    return min(bits_hat, cap), min(lo, cap), min(hi, cap)


# ------------------------------------------------------------------------------------------ plug-in
def shannon_bits(values) -> float:
    counts = np.array(list(Counter(values).values()), dtype=float)
    if counts.sum() == 0:
        return 0.0
    p = counts / counts.sum()
    return float(-(p * np.log2(p)).sum())


def step_entropy(addresses) -> float:
    """Plug-in entropy (bits) of the distance between consecutive allocations in one process, with the
    Miller-Madow correction. Kept for comparison: it saturates near log2(steps); see placement_entropy."""
    steps = np.diff(np.asarray(addresses, dtype=np.int64)).tolist()
    if not steps:
        return 0.0
    return shannon_bits(steps) + (len(set(steps)) - 1) / (2 * len(steps) * np.log(2))


# ------------------------------------------------------------------------------------------ coincidences
def coincidences(values) -> tuple[int, int]:
    """(equal pairs, pairs) over all pairs of the values (any hashable; None is a value like another)."""
    values = list(values)
    n = len(values)
    return sum(c * (c - 1) // 2 for c in Counter(values).values()), n * (n - 1) // 2


def step_coincidences(sequences) -> tuple[int, int]:
    """(equal pairs, pairs) over all pairs of steps within each process, summed over processes."""
    equal = pairs = 0
    for s in sequences:
        steps = np.diff(np.asarray(s, dtype=np.int64))
        if len(steps) < 2:
            continue
        e, p = coincidences(steps.tolist())
        equal, pairs = equal + e, pairs + p
    return equal, pairs


def collision_bits(equal: int, pairs: int, cap: float = TARGET_ADDRESS_BITS) -> float:
    """-log2 of the coincidence rate, capped at `cap`; log2(pairs) when nothing coincided."""
    if pairs <= 0:
        return float("nan")
    return float(min(cap, -math.log2(equal / pairs) if equal else math.log2(pairs))) + 0.0  # no -0.0


def pooled_collision(per_process, cap: float = TARGET_ADDRESS_BITS, *, seed: int = 0, reps: int = 1000,
                     confidence: float = 0.95, widen: bool = False) -> tuple[float, float, float]:
    """(bits, low, high) from each process's (equal pairs, pairs): the pooled coincidence rate's
    collision entropy, capped at `cap`, with a percentile bootstrap over processes. `widen`: each end's
    distance from the estimate times sqrt(n/(n-1)) t(n-1)/z, the small-sample correction of a bootstrap
    over n processes (1.095 for 20), which the plain percentiles lack (they cover about 92% there)."""
    per_process = [(e, p) for e, p in per_process if p > 0]
    if not per_process:
        return float("nan"), float("nan"), float("nan")
    bits = collision_bits(sum(e for e, _ in per_process), sum(p for _, p in per_process), cap)
    if len(per_process) < 2:
        return bits, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    eq = np.array([e for e, _ in per_process], dtype=float)
    pr = np.array([p for _, p in per_process], dtype=float)
    n = len(per_process)
    idx = rng.integers(0, n, (reps, n))
    draws = [collision_bits(int(e), int(p), cap) for e, p in zip(eq[idx].sum(axis=1), pr[idx].sum(axis=1))]
    alpha = (1 - confidence) / 2
    lo, hi = (float(q) for q in np.quantile(draws, [alpha, 1 - alpha]))
    if widen:
        f = math.sqrt(n / (n - 1)) * stats.t.ppf(1 - alpha, n - 1) / stats.norm.ppf(1 - alpha)
        lo, hi = float(max(0.0, bits - f * max(bits - lo, 0.0))), float(min(cap, bits + f * max(hi - bits, 0.0)))
    return bits, lo, hi


def placement_entropy(sequences, *, seed: int = 0, reps: int = 1000,
                      confidence: float = 0.95) -> tuple[float, float, float]:
    """(bits, low, high): collision entropy of the next-allocation distance within a process, by
    coincidence counting pooled over processes; percentile bootstrap over processes."""
    per_process = [step_coincidences([s]) for s in sequences if len(s) > 2]
    return pooled_collision(per_process, seed=seed, reps=reps, confidence=confidence)


def predictable_steps(sequences) -> tuple[int, int]:
    """(k, n): steps whose distance is the process's most common one, over all steps."""
    return most_common_share(np.diff(np.asarray(s, dtype=np.int64)).tolist() for s in sequences)


def most_common_share(per_process) -> tuple[int, int]:
    """(k, n): values equal to their process's most common value, over all values."""
    k = n = 0
    for values in per_process:
        values = list(values)
        if values:
            k += Counter(values).most_common(1)[0][1]
            n += len(values)
    return k, n


# ------------------------------------------------------------------------------------------ reuse
def parse_picks(text: str) -> list:
    """The probe's `picks=` value: indices among the freed blocks, None for "-" (none of them)."""
    return [None if x == "-" else int(x) for x in text.split(",") if x]


def reuse_entropy(picks_per_process, candidates: int, *, seed: int = 0, reps: int = 1000,
                  confidence: float = 0.95) -> tuple[float, float, float]:
    """(bits, low, high): collision entropy of the freed block the next allocation returns (its index;
    None, none of them, is left out: the choice among freed blocks when one comes back), by coincidence
    counting over pairs of picks within a process pooled over processes; percentile bootstrap over
    processes; capped at log2(candidates). NaN when no process returned two freed blocks."""
    cap = min(TARGET_ADDRESS_BITS, math.log2(candidates)) if candidates > 1 else 0.0
    freed = [[x for x in p if x is not None] for p in picks_per_process]
    per_process = [coincidences(p) for p in freed if len(p) > 1]
    if not per_process:
        return float("nan"), float("nan"), float("nan")
    plain = pooled_collision(per_process, cap, seed=seed, reps=reps, confidence=confidence, widen=True)
    given = [successor_coincidences(p) for p in freed]
    if not _successor_reading_counts(given, per_process):
        return plain
    after = pooled_collision(given, cap, seed=seed, reps=reps, confidence=confidence, widen=True)
    return after if after[0] < plain[0] else plain


# When the successor reading counts: it must rest on at least MIN_SUCCESSOR_COINCIDENCES (with none or few
# it measures only how few pairs there were: no coincidence reads log2 of the pairs, a lower bound), and
# its pairs must be at least MIN_SUCCESSOR_SHARE of all pairs. Pairs that follow the same pick exist only
# where predecessors recur; when that is rare, they describe those few recurrences, not a typical step
# (scudo with its quarantine: 15 of 96 such pairs equal against 97 of 101165 overall, a batch returning
# in order now and then, read as 2.7 bits while the typical pick holds about 10).
MIN_SUCCESSOR_COINCIDENCES = 10
MIN_SUCCESSOR_SHARE = 0.01


def _successor_reading_counts(given, plain) -> bool:
    e, n = sum(x for x, _ in given), sum(x for _, x in given)
    return e >= MIN_SUCCESSOR_COINCIDENCES and n >= MIN_SUCCESSOR_SHARE * sum(x for _, x in plain)


def reuse_given_previous(picks_per_process, candidates: int) -> str:
    """The detail's words when reuse_entropy reports the reading given the previous pick, else ""."""
    cap = min(TARGET_ADDRESS_BITS, math.log2(candidates)) if candidates > 1 else 0.0
    freed = [[x for x in p if x is not None] for p in picks_per_process]
    given = [successor_coincidences(p) for p in freed]
    plain = [coincidences(p) for p in freed if len(p) > 1]
    e, n = sum(x for x, _ in given), sum(x for _, x in given)
    if not plain or not _successor_reading_counts(given, plain):
        return ""
    if collision_bits(e, n, cap) >= collision_bits(sum(x for x, _ in plain), sum(x for _, x in plain), cap):
        return ""
    return f"; given the previous pick ({e} equal pairs in {n} that follow the same pick)"


def successor_coincidences(picks) -> tuple[int, int]:
    """(equal pairs, pairs) over pairs of picks within a process that follow the same pick: the
    coincidence counting of the next pick given the one before. A deterministic cycle (9, 136, 9, 136:
    tbbmalloc) has two values, 1 bit unconditionally, and none given the previous pick."""
    steps = list(zip(picks, picks[1:]))
    equal = sum(c * (c - 1) // 2 for c in Counter(steps).values())  # equal successors of the same pick
    pairs = sum(m * (m - 1) // 2 for m in Counter(prev for prev, _ in steps).values())
    return equal, pairs
