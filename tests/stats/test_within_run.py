"""with/without within one run (stats/within_run.py): through the baseline, and a run that measured the
workload at several scales answers at its largest."""
import math

import pandas as pd
import pytest

from analysis.stats.within_run import ratio_within_run


def row(allocator, ratio, scale=1.0):
    return {"allocator": allocator, "baseline": "glibc", "ratio": ratio, "ci_low": ratio * 0.99,
            "ci_high": ratio * 1.01, "df": 10.0, "scale": scale}


def test_two_allocators_compare_through_the_baseline():
    d = ratio_within_run(pd.DataFrame([row("a", 1.5), row("b", 1.2)]), "a", "b")
    assert math.exp(d.estimate) == pytest.approx(1.25)
    assert math.exp(ratio_within_run(pd.DataFrame([row("a", 1.5)]), "glibc", "a").estimate) == pytest.approx(1 / 1.5)


def test_a_run_at_several_scales_answers_at_its_largest():
    rows = pd.DataFrame([row("a", 1.9, 0.25), row("a", 1.6, 0.5), row("a", 1.5, 0.75)])
    assert math.exp(ratio_within_run(rows, "a", "glibc").estimate) == pytest.approx(1.5)
