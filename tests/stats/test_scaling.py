"""Cost as the work grows, on simulated trials with a known start-up and per-unit cost."""
import numpy as np
import pandas as pd
import pytest

from analysis.stats import scaling

TRUTH = {"glibc": (0.002, 0.40), "efence": (0.006, 40.0)}  # (start-up s, per-unit s)
SCALES = (0.001, 0.005)


def simulated(seed: int, n: int = 12) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for alloc, (startup, unit) in TRUTH.items():
        for scale in SCALES:
            t = (startup + unit * scale) * np.exp(rng.normal(0, 0.05, n))
            rows += [{"workload": "w", "allocator": alloc, "scale": scale, "status": "ok", "warmup": 0,
                      "wall_s": v} for v in t]
    return pd.DataFrame(rows)


def test_start_up_and_per_unit_cost_are_recovered():
    model = scaling.cost_model(simulated(1)).set_index("allocator")
    for alloc, (startup, unit) in TRUTH.items():
        assert model.loc[alloc, "startup_s"] == pytest.approx(startup, rel=0.3)
        assert model.loc[alloc, "per_unit_s"] == pytest.approx(unit, rel=0.1)


@pytest.mark.slow  # 200 seeded fits: 1 s of CPU on a fast host
def test_the_per_unit_ratio_interval_covers_the_truth_about_95_percent():
    truth = TRUTH["efence"][1] / TRUTH["glibc"][1]
    covered = []
    for seed in range(200):
        r = scaling.per_unit_ratios(scaling.cost_model(simulated(seed)), "glibc").iloc[0]
        covered.append(r["ci_low"] <= truth <= r["ci_high"])
    assert 0.90 <= np.mean(covered) <= 0.99


def test_the_plain_ratio_at_small_scale_is_biased_toward_one_and_the_per_unit_ratio_is_not():
    t = simulated(3)
    small = t[t["scale"] == SCALES[0]].groupby("allocator")["wall_s"].median()
    plain = small["efence"] / small["glibc"]
    per_unit = scaling.per_unit_ratios(scaling.cost_model(t), "glibc").iloc[0]["per_unit_ratio"]
    assert plain < 0.5 * per_unit  # start-up dilutes the plain ratio
    assert per_unit == pytest.approx(100, rel=0.15)


def test_one_scale_gives_no_fit():
    t = simulated(4)
    assert scaling.cost_model(t[t["scale"] == SCALES[0]]).empty
