"""The pooled answer is a property of the runs, not of the machine that renders it: the REML fit is plain IEEE
arithmetic with correctly rounded sums (no linear-algebra library, whose rounding differs between processors),
its optimiser converges tightly enough that its starting point cannot move a published digit, and it agrees
with a fit through numpy's linear algebra to well below what is published."""
import math

import numpy as np
import pandas as pd
import pytest

from analysis.publish.render.formats import fmt_interval
from analysis.stats import random_effects as re


def designs():
    rng = np.random.default_rng(2026)
    yield re.simulate(rng, mu=0.05, hosts=2, builds=3, runs_per_cell=2, tau_host=0.02, tau_build=0.01, tau_run=0.005, se=0.01)
    yield re.simulate(rng, mu=0.0, hosts=1, builds=5, runs_per_cell=2, tau_host=0.0, tau_build=0.01, tau_run=0.0, se=0.004)
    yield re.simulate(rng, mu=0.2, hosts=3, builds=2, runs_per_cell=3, tau_host=0.0, tau_build=0.0, tau_run=0.0, se=0.02)


def published(p: re.Pooled) -> tuple:
    lo, hi = p.interval()
    return fmt_interval(math.exp(p.estimate), math.exp(lo), math.exp(hi)), f"{p.estimate:.8f}", f"{p.se:.6g}", p.df


@pytest.mark.parametrize("shift", [-1.0, -0.3, 0.4, 1.5])
def test_the_optimisers_starting_point_moves_no_published_digit(shift):
    for frame in designs():
        y = frame["estimate"]
        default = math.log(max(float(np.var(y, ddof=1)), 1e-12) / 3)
        assert published(re.pool(frame, start=default + shift)) == published(re.pool(frame))


def test_the_fit_agrees_with_numpys_linear_algebra():
    """The same restricted likelihood through numpy (dense covariance, slogdet, inverse), at the optimum found:
    the same value, and the optimum is a minimum of it."""
    for frame in designs():
        p = re.pool(frame)
        codes, names = re._design(frame)
        y, s2 = frame["estimate"].to_numpy(float), frame["se"].to_numpy(float) ** 2
        theta = [math.log(p.tau2["run"]) if p.tau2["run"] > 0 else re._FLOOR] + [
            math.log(p.tau2[n]) if p.tau2[n] > 0 else re._FLOOR for n in names]

        def dense(t):
            v = np.diag(s2 + math.exp(t[0]))
            for tj, c in zip(t[1:], codes):
                z = np.eye(max(c) + 1)[c]
                v = v + math.exp(tj) * z @ z.T
            vi = np.linalg.inv(v)
            one = np.ones_like(y)
            w = one @ vi @ one
            r = y - (one @ vi @ y) / w
            return 0.5 * (np.linalg.slogdet(v)[1] + math.log(w) + r @ vi @ r)
        assert re._restricted_nll(theta, list(y), list(s2), codes) == pytest.approx(dense(theta), rel=1e-9, abs=1e-9)
        for j in range(len(theta)):
            for step in (-0.05, 0.05):
                moved = list(theta)
                moved[j] = min(5.0, max(re._FLOOR, moved[j] + step))
                assert dense(moved) >= dense(theta) - 1e-9


def test_the_order_of_the_rows_moves_no_published_digit():
    """The groups are numbered as they come, so another order factors the same matrix in another order: the
    optimiser's path moves in the last bits, far below a published digit (the pipeline sorts its rows, so a
    rendering never sees another order)."""
    frame = next(designs())
    a, b = re.pool(frame), re.pool(frame.iloc[::-1])
    assert (a.estimate, a.se, a.df) == pytest.approx((b.estimate, b.se, b.df), rel=1e-6)
    assert published(a)[0] == published(b)[0]


@pytest.mark.parametrize("ulps", [1, -1, 3])
def test_inputs_that_differ_in_their_last_bits_give_the_same_fit_to_the_bit(ulps):
    """Per-run estimates from numpy may differ in their last bits between processors (SIMD sums, BLAS kernels):
    the fit, every variance component included, is the same to the bit."""
    for frame in designs():
        nudged = frame.assign(estimate=[math.ldexp(math.frexp(v)[0] + ulps * 2 ** -53, math.frexp(v)[1])
                                        for v in frame["estimate"]],
                              se=[float(np.nextafter(v, np.inf if ulps > 0 else 0.0)) for v in frame["se"]])
        assert list(nudged["estimate"]) != list(frame["estimate"])
        a, b = re.pool(frame), re.pool(nudged)
        assert (a.estimate, a.se, a.df, a.tau2) == (b.estimate, b.se, b.df, b.tau2)
