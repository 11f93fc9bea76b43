"""The protocol candidates' estimators on simulated trials with a known truth (no machine time)."""
import numpy as np
import pandas as pd
import pytest

from analysis.harness.bench import protocols as bp
from analysis.stats import paired


def test_block_pairs_pair_the_two_allocators_within_each_block_and_skip_unusable_rows():
    trials = pd.DataFrame({
        "block": [0, 0, 1, 1, 2, 2, 3],
        "allocator": ["glibc", "scudo"] * 3 + ["glibc"],
        "wall_s": [1.0, 1.2, 2.0, 2.4, 1.0, 9.0, 1.0],
        "status": ["ok", "ok", "ok", "ok", "ok", "crashed", "ok"],
        "warmup": [0] * 7,
    })
    y = bp.block_pairs(trials, "glibc", "scudo")
    assert np.allclose(y, np.log([1.2, 1.2]))


def test_regimes_are_split_at_the_widest_gap_only_when_there_are_two():
    rng = np.random.default_rng(1)
    fast, slow = np.log(rng.normal(30, 0.5, 20)), np.log(rng.normal(51, 0.8, 20))
    labels = bp.regime_of(np.concatenate([fast, slow]))
    assert labels.tolist() == [1.0] * 20 + [0.0] * 20
    assert not bp.regime_of(np.log(rng.normal(30, 0.5, 40))).any()


def simulated_units(n_units, ratio, seed, regime_ratio=1.7, dwell=3):
    """ABBA units of one CPU that switches between two speed regimes (each run a regime drawn per
    trial with persistence `dwell` trials); the reference probe runs in the trial's regime."""
    rng = np.random.default_rng(seed)
    rows, slow = [], False
    for unit in range(n_units):
        for pos, side in enumerate("abba" if unit % 2 == 0 else "baab"):
            if rng.random() < 1 / dwell:
                slow = not slow
            speed = regime_ratio if slow else 1.0
            base = 0.05 * speed * rng.lognormal(0, 0.03)
            rows.append({"unit": unit, "pos": pos, "side": side, "allocator": side, "status": "ok",
                         "wall_s": base * (ratio if side == "b" else 1.0),
                         "ref_s": 0.0125 * speed * rng.lognormal(0, 0.03)})
    return pd.DataFrame(rows)


@pytest.mark.slow  # 40 seeded studies of three intervals each: 0.9 s of CPU on a fast host
def test_the_reference_probe_narrows_the_abba_interval_and_keeps_the_truth():
    covered = covered_regime = 0
    widths = {"plain": [], "probe": [], "regime": []}
    for seed in range(40):
        q = bp.quadruple_differences(simulated_units(30, 1.05, seed))
        plain, _ = paired.paired_difference(q["y"].to_numpy())
        probe, slope = paired.paired_difference(q["y"].to_numpy(), q["x"].to_numpy(), at_zero=True)
        regime, _ = paired.paired_difference(q["y"].to_numpy(), q["r"].to_numpy(), at_zero=True)
        lo, hi = probe.interval()
        covered += lo <= np.log(1.05) <= hi
        lo, hi = regime.interval()
        covered_regime += lo <= np.log(1.05) <= hi
        for key, d in (("plain", plain), ("probe", probe), ("regime", regime)):
            lo_, hi_ = d.interval()
            widths[key].append(hi_ - lo_)
        assert 0.5 < slope < 1.5
    assert covered >= 34 and covered_regime >= 34  # about 95% of 40 (300 seeds: 93% each)
    assert np.median(widths["probe"]) < 0.5 * np.median(widths["plain"])
    assert np.median(widths["regime"]) < 0.5 * np.median(widths["plain"])


def test_an_incomplete_unit_is_left_out():
    units = simulated_units(3, 1.0, 0)
    units.loc[(units["unit"] == 1) & (units["pos"] == 2), "status"] = "crashed"
    q = bp.quadruple_differences(units)
    assert q["unit"].tolist() == [0, 2]
