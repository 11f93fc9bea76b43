"""The entropy estimators (analysis/stats/entropy.py) against simulated allocators with a known truth
(seeded)."""
import math

import numpy as np
import pytest

from analysis.stats import entropy as E
from analysis.stats import security as S

PROCESSES = 20  # fresh processes per row (probes.DEFAULT_RUNS)


# ------------------------------------------------------------------ simulated allocators
def independent_addresses(rng, n, bits, base=0x7F0000000000, shift=12):
    return [base | (int(rng.integers(0, 2 ** bits)) << shift) for _ in range(n)]


# A random page count in a range that is not a power of two, times 4096, plus a fixed offset whose
# page part has runs of ones just above the random bits: carries flip those runs all at once.
PAGES = 3000  # log2(3000) = 11.55 bits
OFFSET = 0x7FF0FFA249A0  # page number 0x7FF0FFA24: a carry out of 0xA24 + r (half the time) flips bits 24-32


def correlated_addresses(rng, n, pages=PAGES, offset=OFFSET):
    return [offset + int(rng.integers(0, pages)) * 4096 for _ in range(n)]


# ------------------------------------------------------------------ address entropy
ADDRESS_CASES = {"independent-8": (8, lambda rng, n: independent_addresses(rng, n, 8)),
                 "independent-12": (12, lambda rng, n: independent_addresses(rng, n, 12)),
                 "independent-16": (16, lambda rng, n: independent_addresses(rng, n, 16)),
                 "correlated": (math.log2(PAGES), correlated_addresses)}


@pytest.mark.parametrize("case", sorted(ADDRESS_CASES))
def test_address_entropy_reads_known_bits_within_half_a_bit_from_40_processes(case):
    truth, draw = ADDRESS_CASES[case]
    for seed in range(5):
        bits, lo, hi = E.address_entropy(draw(np.random.default_rng(seed), 40), reps=200, seed=seed)
        assert bits == pytest.approx(truth, abs=0.5)
        assert lo <= bits <= hi


@pytest.mark.parametrize("case", sorted(ADDRESS_CASES))
def test_address_entropy_from_the_default_20_processes_is_nearly_unbiased(case):
    # one reading from 20 processes spreads more (simulated standard deviation 0.2-0.4 bit over these
    # cases), so the check here is on the mean of many
    truth, draw = ADDRESS_CASES[case]
    errors = [E.chain_entropy(draw(np.random.default_rng(seed), PROCESSES)) - truth for seed in range(100)]
    assert abs(np.mean(errors)) < 0.3
    assert np.median(np.abs(errors)) < 0.4


def test_the_per_bit_sum_overestimated_the_correlated_case():
    truth = math.log2(PAGES)
    addrs = correlated_addresses(np.random.default_rng(300), PROCESSES)
    assert E.per_bit_entropy(addrs) > truth + 3  # the old estimate: every bit a carry flips counted as random
    assert E.chain_entropy(addrs) == pytest.approx(truth, abs=0.6)


def test_chain_entropy_sees_a_carry_run_as_one_bit():
    # one random bit at bit 12 added to ...0111 1000 0000 0000 (bits 11..14): the carry flips four bits
    addrs = [0x7800 + 0x1000 * b for b in [0, 1] * 10]
    assert E.per_bit_entropy(addrs) > 3
    assert E.chain_entropy(addrs) == pytest.approx(1.0, abs=0.1)


def test_entropy_bounds_never_exceed_the_caps():
    rng = np.random.default_rng(11)
    wide = [int(rng.integers(0, 2 ** 40)) << 12 for _ in range(PROCESSES)]  # 40 independent random bits
    assert max(E.address_entropy(wide, reps=200)) <= E.TARGET_ADDRESS_BITS
    lone = [np.cumsum(rng.integers(1, 2 ** 40, 255)).tolist() for _ in range(3)]
    assert max(E.placement_entropy(lone, reps=50)) <= E.TARGET_ADDRESS_BITS


def test_security_still_exports_the_estimators():
    assert S.address_entropy is E.address_entropy and S.placement_entropy is E.placement_entropy
    assert S.TARGET_ADDRESS_BITS == E.TARGET_ADDRESS_BITS


# ------------------------------------------------------------------ interval coverage
# Each interval must cover the truth in 90-99% of seeded samples: an interval too narrow (halved
# around the estimate) or too wide (anything near [0, cap]) fails the band, and each test shows that its
# own halved intervals fail it, so the band cannot be met by accident.
SEEDS = 400


def coverage(estimate, truth, seeds=SEEDS):
    """(share of intervals covering the truth, the same for intervals halved around the estimate); the
    data and the bootstrap draw from separate streams."""
    full = half = 0
    for seed in range(seeds):
        bits, lo, hi = estimate(np.random.default_rng(seed), 10**6 + seed)
        full += lo <= truth <= hi
        half += bits - (bits - lo) / 2 <= truth <= bits + (hi - bits) / 2
    return full / seeds, half / seeds


@pytest.mark.slow
@pytest.mark.parametrize("case", ["independent-12", "correlated"])
def test_address_entropy_intervals_cover_the_truth(case):
    truth, draw = ADDRESS_CASES[case]
    full, half = coverage(lambda rng, seed: E.address_entropy(draw(rng, PROCESSES), reps=300, seed=seed), truth)
    assert 0.90 <= full <= 0.99, full
    assert half < 0.90, half
