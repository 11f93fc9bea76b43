"""The debates' pre-registered questions, equivalence tests, random-effects pooling across runs,
builds and hosts."""
import math

import numpy as np
import pandas as pd
import pytest

from analysis.contract import debates_spec
from analysis.errors import HeapcostError
from analysis.stats import equivalence
from analysis.stats import random_effects as re

# ------------------------------------------------------------------------------ the pre-registered questions


def test_the_repository_registers_every_seed_with_a_margin_and_its_reason():
    spec = debates_spec.load()
    assert sorted(spec) == ["000", "001", "002", "003", "004"]
    assert spec["002"].margin == 0.025 and "2.5%" in spec["002"].margin_reason
    assert "very low cost" in spec["004"].margin_reason
    assert spec["003"].rule == "equivalent" and spec["003"].every_pair
    assert spec["004"].contested[0] == ("glibc-built", "glibc-no-tcache-key")
    # every debate has one primary cell among its pairs and workloads, and says when it was registered
    for q in spec.values():
        (pair, workload) = q.primary
        assert pair in q.contested and workload in q.workloads and "commit" in q.registered
    assert spec["002"].is_primary("mozjemalloc-poison", "mozjemalloc", "dom-churn")
    assert not spec["001"].is_primary("hardened-light-72fb357", "glibc", "build")


GOOD = """[[debate]]
seed = "002"
question = "q"
contested = [["a", "b"]]
workloads = ["w"]
quantity = "wall_s"
margin = 0.025
margin_reason = "r"
rule = "cost_at_most"
primary = { pair = ["a", "b"], workload = "w" }
registered = "2026-12-01, commit 9b395ec"
"""


def test_a_good_file_loads_with_its_amendments(tmp_path):
    path = tmp_path / "debates.toml"
    path.write_text(GOOD + 'amendments = ["2026-12-02, commit 845b1c7: the margin was 3%"]\n')
    q = debates_spec.load(path)["002"]
    assert q.primary == (("a", "b"), "w") and q.amendments == ("2026-12-02, commit 845b1c7: the margin was 3%",)


@pytest.mark.parametrize("broken, words", [
    (GOOD.replace('workload = "w"', 'workload = "v"'), "primary must be"),
    (GOOD.replace('pair = ["a", "b"]', 'pair = ["b", "a"]'), "primary must be"),
    (GOOD.replace('registered = "2026-12-01, commit 9b395ec"', 'registered = "yesterday"'), "registered must say"),
    (GOOD + 'amendments = "changed"\n', "amendments must be"),
    (GOOD + 'amendments = ["2026-12-02: the margin was 3%"]\n', "amendments must be"),
    (GOOD.replace('commit 9b395ec', 'commit soon'), "registered must say"),
    (GOOD.replace('margin = 0.025', 'margin = 2.5'), "margin must be a fraction"),
    (GOOD.replace('rule = "cost_at_most"', 'rule = "vibes"'), "rule 'vibes'"),
    (GOOD.replace('margin_reason = "r"\n', ''), "missing margin_reason"),
    (GOOD.replace('[["a", "b"]]', '[["a", "a"]]'), "contested must be"),
    (GOOD.replace('[["a", "b"]]', '["a", "b"]'), "contested must be"),
    (GOOD + GOOD, "registered twice"),
    (GOOD.replace('seed = "002"', 'seed = "002'), "not valid TOML"),
    (GOOD + 'colour = "red"\n', "unknown key colour"),
    ("title = 'x'\n", "no [[debate]] tables"),
])
def test_a_malformed_file_is_a_one_line_error(tmp_path, broken, words):
    path = tmp_path / "debates.toml"
    path.write_text(broken)
    with pytest.raises(HeapcostError) as err:
        debates_spec.load(path)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(HeapcostError, match="not found"):
        debates_spec.load(tmp_path / "debates.toml")


# ----------------------------------------------------------------------------------------- equivalence


@pytest.mark.parametrize("ratio, se, rule, expected", [
    (1.00, 0.005, "cost_at_most", equivalence.NO_LARGER),   # upper one-sided bound about 1.009 < 1.025
    (1.10, 0.005, "cost_at_most", equivalence.LARGER),      # lower bound about 1.09 > 1.025
    (1.02, 0.020, "cost_at_most", equivalence.UNDECIDED),   # the interval straddles 1.025
    (0.90, 0.005, "cost_at_most", equivalence.NO_LARGER),   # faster is no cost
    (0.90, 0.005, "equivalent", equivalence.LARGER),        # but a 10% change either way is not equivalence
    (1.00, 0.005, "equivalent", equivalence.NO_LARGER),
    (0.99, 0.020, "equivalent", equivalence.UNDECIDED),
])
def test_tost_decides_by_the_margin(ratio, se, rule, expected):
    d = equivalence.tost(math.log(ratio), se, 30, 0.025, rule)
    assert d.outcome == expected
    assert d.low <= ratio <= d.high


def test_the_decision_says_its_margin():
    assert equivalence.tost(0.0, 0.001, 30, 0.025).words() == "no larger than 2.5%"
    assert equivalence.tost(0.2, 0.001, 30, 0.01).words() == "larger than 1%"


def test_a_claim_is_compared_with_its_own_interval_not_as_a_point():
    # the claim 1.025 with a wide interval of its own: ours 1.03 +- 0.5% cannot be told apart from it ...
    assert equivalence.against_claim(math.log(1.03), 0.0025, 30, 1.025, 0.96, 1.10, 2, 0.025).startswith("not decided")
    # ... and as a point it would have been "outside the interval"; with a tight claim both agree
    assert equivalence.against_claim(math.log(1.03), 0.0025, 30, 1.025, 1.02, 1.03, 30, 0.025).startswith("agrees")
    assert equivalence.against_claim(math.log(1.30), 0.0025, 30, 1.025, 1.02, 1.03, 30, 0.025).startswith("differs")
    assert "not compared" in equivalence.against_claim(0.0, 0.01, 30, 1.3, None, None, None, 0.1)


# ------------------------------------------------------------------------------------ random effects


def test_one_run_gives_its_own_interval_back():
    p = re.pool(pd.DataFrame([{"estimate": 0.1, "se": 0.01, "df": 20, "host": "h", "build": "b"}]))
    assert p.estimate == 0.1 and p.se == 0.01 and p.df == 20 and p.runs == 1


def test_runs_that_agree_pool_to_the_inverse_variance_mean():
    frame = pd.DataFrame({"estimate": [0.010, 0.012, 0.011, 0.009], "se": [0.01, 0.01, 0.02, 0.02],
                          "host": ["a", "a", "b", "b"], "build": "x"})
    p = re.pool(frame)
    w = 1 / frame["se"] ** 2
    assert p.estimate == pytest.approx((w * frame["estimate"]).sum() / w.sum(), abs=1e-6)
    assert p.se == pytest.approx(1 / math.sqrt(w.sum()), rel=1e-3)  # the spread is below the SEs: HK scale 1
    assert p.tau2["run"] < 1e-6 and p.tau2["host"] < 1e-6 and p.df == 3


def test_a_host_effect_widens_the_interval_to_the_hosts_degrees_of_freedom():
    rng = np.random.default_rng(4)
    frame = re.simulate(rng, mu=0.02, hosts=3, builds=1, runs_per_cell=4, tau_host=0.05, tau_build=0.0,
                        tau_run=0.002, se=0.002)
    p = re.pool(frame)
    assert p.tau2["host"] > 0.0004 and p.df == 2 and (p.hosts, p.builds, p.runs) == (3, 1, 12)
    within = 1 / math.sqrt((1 / frame["se"] ** 2).sum())
    assert p.se > 5 * within  # three hosts are three samples, not twelve runs


@pytest.mark.slow
@pytest.mark.parametrize("design", [
    dict(mu=0.02, hosts=3, builds=2, runs_per_cell=2, tau_host=0.01, tau_build=0.005, tau_run=0.01, se=0.005),
    dict(mu=0.0, hosts=3, builds=1, runs_per_cell=3, tau_host=0.0, tau_build=0.0, tau_run=0.02, se=0.005),
    dict(mu=0.0, hosts=4, builds=2, runs_per_cell=2, tau_host=0.02, tau_build=0.0, tau_run=0.005, se=0.005),
])
def test_pooled_intervals_cover_the_truth_93_to_97_percent(design):
    share = re.coverage(np.random.default_rng(20), 400, **design)
    assert 0.93 <= share <= 0.97, share
