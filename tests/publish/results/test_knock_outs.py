"""A defence set option by option, on simulated runs with a known truth: each option's saving, the whole's, and
their interaction, read block by block from trials and from each configuration's pairs with the baseline."""
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis.publish.results import knock_outs

CONTROL, WHOLE = "hardened-72fb357", "hardened-light-72fb357"
KOS = ("hardened-72fb357-guard8", "hardened-72fb357-no-quarantine", "hardened-72fb357-no-slot-random",
       "hardened-72fb357-no-wafc")
CATALOG = {CONTROL: SimpleNamespace(knock_out_of=""), WHOLE: SimpleNamespace(knock_out_of=""),
           **{k: SimpleNamespace(knock_out_of=CONTROL) for k in KOS}, "glibc": SimpleNamespace(knock_out_of="")}
# log savings of each option (control over the knock-out); the whole saves their sum minus the interaction
SAVING = {"hardened-72fb357-guard8": 0.05, "hardened-72fb357-no-quarantine": 0.25,
          "hardened-72fb357-no-slot-random": 0.0, "hardened-72fb357-no-wafc": 0.07}


def trials(interaction: float, blocks: int, seed: int, noise: float = 0.02) -> pd.DataFrame:
    """Each block shifts every configuration alike (a machine's state); each trial adds its own noise."""
    rng = np.random.default_rng(seed)
    control = math.log(2.0)
    level = {"glibc": math.log(1.5), CONTROL: control, WHOLE: control - sum(SAVING.values()) + interaction,
             **{k: control - s for k, s in SAVING.items()}}
    rows = []
    for b in range(blocks + 1):
        shift = rng.normal(0, 0.15)  # large next to the trial noise: a block-paired reading cancels it
        for a, mu in level.items():
            rows.append({"workload": "build", "allocator": a, "block": b, "warmup": int(b == 0), "status": "ok",
                         "wall_s": math.exp(mu + shift + rng.normal(0, noise)),
                         "minflt": 1000 + (500 if a == CONTROL else 0), "maxrss_kb": 40_000})
    return pd.DataFrame(rows)


def test_the_parts_the_whole_and_an_additive_interaction_hold_their_truth():
    parts, summary = knock_outs.parts("R", trials(0.0, 12, 1), None, CATALOG, {})
    by = parts.set_index("configuration")
    for k, s in SAVING.items():  # within four standard errors (the intervals' coverage is checked below)
        se = (math.log(by.loc[k, "ci_high"]) - math.log(by.loc[k, "ci_low"])) / (2 * 2.2)
        assert abs(math.log(by.loc[k, "saving"]) - s) < 4 * se, k
    row = summary.iloc[0]
    assert row["whole_ci_low"] < row["whole"] < row["whole_ci_high"]
    assert math.log(row["parts_sum"]) == pytest.approx(sum(math.log(by.loc[k, "saving"]) for k in SAVING))
    assert row["largest_part"] == "hardened-72fb357-no-quarantine"
    assert row["largest_share"] == pytest.approx(0.25 / 0.37, abs=0.08)
    assert row["design"] == "12 blocks"  # the warm-up block is not read
    assert row["control_minflt"] == 1500 and by.loc[WHOLE, "minflt"] == 1000


def test_a_sub_additive_set_is_found_and_the_block_shift_cancels():
    """Parts that add to 0.15 more than the whole: the interval excludes 1. Read as independent groups, the
    block shifts (0.15) would swamp it."""
    _, summary = knock_outs.parts("R", trials(0.15, 12, 2), None, CATALOG, {})
    row = summary.iloc[0]
    assert row["interaction_ci_low"] > 1
    assert row["interaction_ci_low"] < math.exp(0.15) < row["interaction_ci_high"]


@pytest.mark.slow  # 200 simulated runs, 2.6 s: in make test, not test-fast
def test_coverage_of_the_parts_the_whole_and_the_interaction_over_simulated_runs():
    """Each 95% interval (a part's saving, the whole's, the interaction) holds its truth in about 95% of
    simulated runs of 8 blocks."""
    truth = {**{k: math.exp(s) for k, s in SAVING.items()}, WHOLE: math.exp(sum(SAVING.values()) - 0.1)}
    held = dict.fromkeys([*truth, "interaction"], 0)
    runs = 200
    for seed in range(runs):
        parts, summary = knock_outs.parts("R", trials(0.1, 8, 100 + seed), None, CATALOG, {})
        for r in parts.itertuples():
            held[r.configuration] += r.ci_low < truth[r.configuration] < r.ci_high
        row = summary.iloc[0]
        held["interaction"] += row["interaction_ci_low"] < math.exp(0.1) < row["interaction_ci_high"]
    for name, n in held.items():
        assert 0.90 <= n / runs <= 0.99, (name, n)


def test_pairs_with_the_baseline_combine_as_independent_comparisons():
    """A workload that took turns with the baseline: each configuration's row against it, with its interval;
    the interaction's variance adds (n-1)^2 of the control's, each knock-out's and the whole's."""
    df = 20.0

    def row(a, log_ratio, se):
        q = 2.0859634472658644  # t quantile, 0.975 on 20 df
        return {"workload": "clang-cxx", "allocator": a, "ratio": math.exp(log_ratio),
                "ci_low": math.exp(log_ratio - q * se), "ci_high": math.exp(log_ratio + q * se), "df": df}

    cells = pd.DataFrame([row(CONTROL, 0.4, 0.01), row(WHOLE, 0.4 - 0.30, 0.01),
                          *(row(k, 0.4 - s, 0.01) for k, s in SAVING.items())])
    parts, summary = knock_outs.parts("R", None, cells, CATALOG, {k: "label" for k in KOS})
    s = summary.iloc[0]
    assert s["design"] == "pairs with the baseline"
    assert math.log(s["interaction"]) == pytest.approx(0.37 - 0.30)
    se = (math.log(s["interaction_ci_high"]) - math.log(s["interaction_ci_low"])) / 2
    terms = [9, 1, 1, 1, 1, 1]  # (3 se)^2, each knock-out's and the whole's, in units of se^2
    welch = sum(terms) ** 2 / sum(t ** 2 / df for t in terms)
    assert se == pytest.approx(math.sqrt(sum(terms)) * 0.01 * stats.t.ppf(0.975, welch), rel=1e-6)
    assert set(parts["part"]) == {"label", "all of them"}


def test_a_run_without_every_knock_out_gives_no_rows():
    t = trials(0.0, 6, 3)
    parts, summary = knock_outs.parts("R", t[t["allocator"] != "hardened-72fb357-no-wafc"], None, CATALOG, {})
    assert parts.empty and summary.empty
