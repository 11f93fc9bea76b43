"""The entropy estimators of the security probes (moved from analysis/stats/security.py, which
re-exports them).

- Address entropy across fresh processes: the sum over address bits of each bit's binary entropy.
  It needs far fewer samples than a plug-in entropy of whole addresses (which cannot exceed log2 of
  the sample count), is exact for independent uniform bits (up to a small downward bias from the
  finite sample) and 0 for fixed bits; bits that move together (an offset added to a random base) are
  counted as if independent, so it is an upper bound in that case. Processes are resampled
  (bootstrap); resamples repeat processes, which biases their entropy low, so the interval is the
  basic (reflected) one rather than percentiles.
- Placement entropy within a process: the collision (Renyi order-2) entropy of the distance from one
  allocation to the next, estimated by coincidence counting (Ma 1981): of all pairs of steps within a
  process, the share that are equal estimates sum p^2 without bias, pooled over processes; bits =
  -log2 of it. Unlike the plug-in entropy (which cannot exceed log2 of the steps seen, 8 bits for 255)
  it needs only a few coincidences: about 2^(b/2) samples for b bits. It equals the Shannon entropy for
  a uniform choice and is a lower bound otherwise (the quantity that matters to an attacker guessing).
  Resolution: with n processes of 255 steps the standard error at b bits is about
  1 / (ln 2 sqrt(n 32131 / 2^b)) bit (0.46 bit at 16 bits from 20 processes, 0.21 from 100; seeded
  simulations: 0.11 bit at 12 bits from 20). No coincidence at all
  reads log2(pairs) (a lower bound). Interval: percentile bootstrap over processes.
- Every entropy and bound is capped at TARGET_ADDRESS_BITS, what the kernel's mmap randomisation can
  supply: an estimator's excess above it is noise.
"""
import math
from collections import Counter

import numpy as np

TARGET_ADDRESS_BITS = 28.0  # x86-64 Linux mmap randomisation (vm.mmap_rnd_bits default)


# ------------------------------------------------------------------------------------------ estimators
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
    cap = TARGET_ADDRESS_BITS
    return min(plain, cap), min(lo, plain, cap), min(max(hi, plain), cap)


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


def step_coincidences(sequences) -> tuple[int, int]:
    """(equal pairs, pairs) over all pairs of steps within each process, summed over processes."""
    equal = pairs = 0
    for s in sequences:
        steps = np.diff(np.asarray(s, dtype=np.int64))
        n = len(steps)
        if n < 2:
            continue
        counts = np.array(list(Counter(steps.tolist()).values()), dtype=np.int64)
        equal += int((counts * (counts - 1) // 2).sum())
        pairs += n * (n - 1) // 2
    return equal, pairs


def collision_bits(equal: int, pairs: int) -> float:
    """-log2 of the coincidence rate, capped at TARGET_ADDRESS_BITS; log2(pairs) when nothing coincided."""
    if pairs <= 0:
        return float("nan")
    return float(min(TARGET_ADDRESS_BITS, -math.log2(equal / pairs) if equal else math.log2(pairs)))


def placement_entropy(sequences, *, seed: int = 0, reps: int = 1000,
                      confidence: float = 0.95) -> tuple[float, float, float]:
    """(bits, low, high): collision entropy of the next-allocation distance within a process, by
    coincidence counting pooled over processes; percentile bootstrap over processes."""
    per_process = [step_coincidences([s]) for s in sequences if len(s) > 2]
    if not per_process:
        return float("nan"), float("nan"), float("nan")
    bits = collision_bits(sum(e for e, _ in per_process), sum(p for _, p in per_process))
    if len(per_process) < 2:
        return bits, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    eq = np.array([e for e, _ in per_process], dtype=float)
    pr = np.array([p for _, p in per_process], dtype=float)
    idx = rng.integers(0, len(per_process), (reps, len(per_process)))
    draws = [collision_bits(int(e), int(p)) for e, p in zip(eq[idx].sum(axis=1), pr[idx].sum(axis=1))]
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(draws, [alpha, 1 - alpha])
    return bits, float(lo), float(hi)


def predictable_steps(sequences) -> tuple[int, int]:
    """(k, n): steps whose distance is the process's most common one, over all steps."""
    k = n = 0
    for s in sequences:
        d = np.diff(np.asarray(s, dtype=np.int64)).tolist()
        if d:
            k += Counter(d).most_common(1)[0][1]
            n += len(d)
    return k, n
