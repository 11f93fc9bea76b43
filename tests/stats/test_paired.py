"""The paired (lockstep) statistics: per-pair log ratios, Yuen's trimmed mean across pairs, the CLI, and a
seeded simulation with this machine's speed regimes whose intervals must cover the truth 93-97% of the time."""
import math

import numpy as np
import pandas as pd
import pytest

from analysis.errors import HeapcostError
from analysis.stats import paired, simulate
from conftest import cli, cli_here


def table(ratios, workload="w", a="glibc", b="x"):
    n = len(ratios)
    return pd.DataFrame({"workload": workload, "allocator_a": a, "allocator_b": b,
                         "active_a_s": np.full(n, 0.05), "active_b_s": 0.05 * np.asarray(ratios)})


def test_a_constant_ratio_is_recovered_exactly():
    res = paired.compare_pairs(table([1.1] * 8)).iloc[0]
    assert res["ratio"] == pytest.approx(1.1)
    assert res["ci_low"] == pytest.approx(1.1) and res["ci_high"] == pytest.approx(1.1)
    assert res["n_pairs"] == 8 and res["allocator"] == "x" and res["baseline"] == "glibc"


def test_one_wild_pair_barely_moves_the_trimmed_mean():
    rng = np.random.default_rng(1)
    ratios = np.exp(np.log(1.03) + rng.normal(0, 0.01, 30))
    wild = ratios.copy()
    wild[0] = 3.0
    a, b = paired.compare_pairs(table(ratios)).iloc[0], paired.compare_pairs(table(wild)).iloc[0]
    assert abs(math.log(b["ratio"] / a["ratio"])) < 0.005


def test_groups_unusable_rows_and_few_pairs():
    t = pd.concat([table([1.0, 1.01, 0.99, 1.0, 1.02], "w1"), table([1.2] * 6, "w2")], ignore_index=True)
    t["status"] = "ok"
    t.loc[0, "status"] = "crashed"  # not counted: w1 is left with 4 pairs
    with pytest.raises(HeapcostError, match="at least 5"):
        paired.compare_pairs(t)
    t.loc[0, "status"] = "ok"
    res = paired.compare_pairs(t).set_index("workload")
    assert list(res.index) == ["w1", "w2"] and res.loc["w2", "ratio"] == pytest.approx(1.2)


def test_errors_are_one_line():
    with pytest.raises(HeapcostError, match="lacks column"):
        paired.compare_pairs(pd.DataFrame({"workload": ["w"]}))
    bad = table([1.0] * 6)
    bad.loc[2, "active_b_s"] = 0
    with pytest.raises(HeapcostError, match="non-positive"):
        paired.compare_pairs(bad)


def test_a_covariate_is_regressed_out():
    rng = np.random.default_rng(3)
    x = rng.normal(0, 0.05, 40)
    ratios = np.exp(np.log(1.05) + 0.8 * x + rng.normal(0, 0.002, 40))
    t = table(ratios)
    t["probe"] = x
    plain, adj = paired.compare_pairs(t).iloc[0], paired.compare_pairs(t, covariate="probe").iloc[0]
    assert adj["adjusted"] and adj["covariate_slope"] == pytest.approx(0.8, abs=0.05)
    assert adj["halfwidth"] < plain["halfwidth"] / 5
    assert adj["ci_low"] < 1.05 * math.exp(0.8 * x.mean()) < adj["ci_high"]


def test_the_cli_takes_a_pairs_csv(tmp_path):
    path = tmp_path / "pairs.csv"
    simulate.simulate_pairs(1.05, 20, 1).to_csv(path, index=False)
    r = cli("compare-pairs", str(path), "--out", str(tmp_path / "out.csv"))
    assert r.returncode == 0, r.stderr
    assert "hardened / base" in r.stdout
    out = pd.read_csv(tmp_path / "out.csv")
    assert out.loc[0, "ci_low"] < 1.05 < out.loc[0, "ci_high"]
    r = cli_here("compare-pairs", str(tmp_path / "nope.csv"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1


def test_simulated_regimes_are_shared_within_a_pair_only():
    rng = np.random.default_rng(0)
    starts = np.arange(200) * 0.1
    frac = simulate.regime_slow_fraction(starts, starts + 0.1, 0.5, rng)
    assert 0.3 < frac.mean() < 0.7 and ((frac == 0) | (frac == 1)).mean() > 0.5  # long dwell: mostly pure
    pairs = simulate.simulate_pairs(1.0, 200, 2)
    spread_a = np.log(pairs["active_a_s"]).std()
    spread_ratio = np.log(pairs["active_b_s"] / pairs["active_a_s"]).std()
    assert spread_a > 0.15 and spread_ratio < 0.03  # the regimes cancel in the ratio


def test_paired_coverage_quick():
    cov = simulate.paired_coverage(1.03, 30, 300, seed=11)
    assert 0.92 <= cov["covered"].mean() <= 0.98


@pytest.mark.slow
@pytest.mark.parametrize("ratio", [1.0, 1.025])  # 1.0: the A/A study, intervals should contain 1
def test_paired_coverage_93_to_97_percent(ratio):
    cov = simulate.paired_coverage(ratio, 30, 2000, seed=101)
    assert 0.93 <= cov["covered"].mean() <= 0.97
    assert cov["halfwidth"].median() < math.log1p(0.01)  # +-1% with 30 pairs under this noise


def test_a_difference_covariate_is_read_at_zero_when_asked():
    """y = 0.05 + x + noise with x centred away from 0: at the mean the ratio carries the mean x; at zero it
    is the truth (what a reference probe's B-minus-A log ratio asks for)."""
    rng = np.random.default_rng(5)
    x = rng.normal(0.2, 0.1, 60)
    y = 0.05 + x + rng.normal(0, 0.002, 60)
    pairs = pd.DataFrame({"workload": "w", "allocator_a": "a", "allocator_b": "b", "status": "ok", "warmup": 0,
                          "active_a_s": 1.0, "active_b_s": np.exp(y), "probe": x})
    at_mean = paired.compare_pairs(pairs, covariate="probe").iloc[0]
    at_zero = paired.compare_pairs(pairs, covariate="probe", at_zero=True).iloc[0]
    assert at_zero["ci_low"] < math.exp(0.05) < at_zero["ci_high"]
    assert at_mean["ci_low"] > math.exp(0.05 + 0.15)
    assert at_zero["halfwidth"] > at_mean["halfwidth"]  # the slope's uncertainty is carried to zero


def _role_pairs(seed: int, n: int, true_ratio: float, role_effect: float, alternate: bool) -> pd.DataFrame:
    """Pairs of glibc against x where the process in role b runs `role_effect` slower, whoever it is."""
    rng = np.random.default_rng(seed)
    swap = (np.arange(n) % 2 == 1) if alternate else np.zeros(n, bool)
    base = rng.lognormal(np.log(0.05), 0.03, n)
    other = base * true_ratio * np.exp(rng.normal(0, 0.03, n))
    a_time = np.where(swap, other, base)
    b_time = np.where(swap, base, other) * (1 + role_effect)
    return pd.DataFrame({"workload": "small-loop", "scale": 0.25, "status": "ok", "warmup": 0,
                         "allocator_a": np.where(swap, "x", "glibc"), "allocator_b": np.where(swap, "glibc", "x"),
                         "first": np.where(np.arange(n) % 4 < 2, "a", "b"), "active_a_s": a_time, "active_b_s": b_time,
                         "malloc_lib_a": np.where(swap, "libx", "libc"), "malloc_lib_b": np.where(swap, "libc", "libx")})


@pytest.mark.slow  # 400 seeded comparisons: 2.4 s of CPU on a fast host
def test_alternating_roles_cancel_a_role_effect_that_fixed_roles_keep():
    from analysis.contract.schema import oriented_pairs

    covered = {True: 0, False: 0}
    for seed in range(200):
        for alternate in (True, False):
            res = paired.compare_pairs(_role_pairs(seed, 200, 1.03, 0.01, alternate)).iloc[0]
            assert res["allocator"] == "x" and res["baseline"] == "glibc"  # turned: x over glibc either way
            covered[alternate] += res["ci_low"] <= 1.03 <= res["ci_high"]
    assert covered[True] >= 180  # about 95% of 200
    assert covered[False] < 100  # a 1% role effect against a ±0.6% interval: mostly missed
    mixed = _role_pairs(1, 40, 1.03, 0.0, True)
    turned = oriented_pairs(mixed, "glibc")
    assert set(turned["allocator_a"]) == {"glibc"} and set(turned["malloc_lib_a"]) == {"libc"}
    assert list(turned.loc[1, ["first"]]) == ["b"] and mixed.loc[1, "first"] == "a"
    assert oriented_pairs(mixed).equals(turned)  # glibc is in every row: it is side a without being named


def test_a_covariate_cannot_follow_pairs_in_both_roles():
    mixed = _role_pairs(2, 40, 1.0, 0.0, True).assign(probe=0.1)
    with pytest.raises(HeapcostError, match="cannot be turned"):
        paired.compare_pairs(mixed, covariate="probe")


@pytest.mark.slow  # 200 seeded estimates: 1.4 s of CPU on a fast host
def test_the_role_effect_is_estimated_apart_from_the_allocators_difference():
    covered = 0
    for seed in range(200):
        cells = pd.concat([_role_pairs(1000 + 2 * seed + i, 40, 1.03, 0.006, True).replace({"x": k})
                           for i, k in enumerate(("x", "y"))], ignore_index=True)
        row = paired.role_effects(cells, "glibc").iloc[0]
        assert row["cells"] == 2 and row["pairs"] == 80
        covered += row["ci_low"] <= 1.006 <= row["ci_high"]
    assert 180 <= covered <= 198  # about 95% of 200
    fixed = _role_pairs(3, 40, 1.03, 0.006, False)  # the baseline always a: role and allocator are confounded
    assert paired.role_effects(fixed, "glibc").empty
