"""A term the per-call model lacks, estimated from the checked programs' misses and kept only where nested
leave-one-program-out says it predicts a program left out better than the model without it.

The per-call cells (stats/cost_model.py) time an allocator's calls in loops that do nothing else, so each cell's
blocks stay in the caches. In a program, an allocator that hands out a block other than the one just freed (a
quarantine, random slot choice) hands out memory that has left the caches, and the program pays for it in its own
loads and stores, not in the call. Measured: the checked programs run alone under hardened_malloc's default take
about twice the added minor faults of the same library without its slab quarantines, and most of the model's miss
is user time (publish/results/cost_faults.py). The loops cannot see this; the checked programs can.

The premium: the time each allocation call adds in a program beyond what the cells charge, one number per
configuration, in nanoseconds. With y the measured ratio less the model's prediction and z the program's calls over
its CPU time under the baseline (calls / T), the model says y = premium * z; the premium is the least-squares slope
through the origin over the configuration's checked cells (a program measured on several processor kinds gives a
cell per kind), each cell's y and z divided by its measured ratio: a run's noise is a share of the ratio, so on
that scale every cell's error is alike. Its standard error is the slope's, from the cells' scatter about it,
widened to a t on the cells less one degrees of freedom.

Whether a configuration takes the term is itself estimated: each program is left out in turn, the premium fitted
on the others, and the left-out program's log errors with and without the term compared by their mean square.
The term is kept where it lowers that mean square. `nested` checks the whole procedure on programs it never saw:
each program is left out, the choice made and the premium fitted on the rest, then the program predicted; its
errors are what a new program can expect from the model with its term.
"""
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

# a checked cell: the measured ratio, the model's prediction without the term, the program's allocation calls and
# its CPU time under the baseline in seconds
CELL_COLUMNS = ["program", "allocator", "processor", "measured", "predicted", "calls", "base_s"]
PREMIUM = "premium"  # the pattern of the premium's part in a prediction's parts
MIN_PROGRAMS = 5  # fewer programs checked under a configuration: no term (its leave-one-out choice is too thin)
NESTED_COLUMNS = ["program", "allocator", "processor", "measured", "predicted", "log_error_without",
                  "log_error_nested", "term_chosen"]


@dataclass(frozen=True)
class Premium:
    ns: float        # nanoseconds each allocation call adds beyond the cells
    se_ns: float     # its standard error
    programs: int    # from how many programs
    cells: int       # and cells (a program on several processor kinds: a cell each)

    def ratio_added(self, calls: float, base_s: float) -> float:
        """What the term adds to a program's predicted ratio."""
        return self.ns * 1e-9 * calls / base_s if base_s > 0 else 0.0

    def joined(self, ratio: float, low: float, high: float, calls: float, base_s: float) -> tuple:
        """(ratio, low, high) of a per-call prediction with the premium added, its 95% half-width joined to each
        side's in quadrature."""
        from analysis.stats.cost_model import Z

        extra = Z * self.se_ns * 1e-9 * calls / base_s if base_s > 0 else 0.0
        with_ = ratio + self.ratio_added(calls, base_s)
        return with_, with_ - math.hypot(ratio - low, extra), with_ + math.hypot(high - ratio, extra)

    def applied(self, p):
        """A cost_model.Prediction with the premium added: a part of its own (pattern PREMIUM, every call one
        pair), its standard error joined to the per-call costs' in the interval."""
        from analysis.stats.cost_model import Prediction

        added = self.ns * 1e-9 * p.calls
        part = pd.DataFrame([{"pattern": PREMIUM, "size_class": 0, "pairs": float(p.calls), "added_ns": self.ns,
                              "se_ns": self.se_ns, "added_s": added}])
        parts = pd.concat([p.parts, part], ignore_index=True) if len(p.parts) else part
        ratio, low, high = self.joined(p.ratio, p.low, p.high, p.calls, p.base_s)
        return Prediction(ratio, low, high, p.added_s + added, p.base_s, p.calls, parts,
                          math.hypot(p.added_sd_s, self.se_ns * 1e-9 * p.calls))


def _usable(cells: pd.DataFrame) -> pd.DataFrame:
    ok = (cells["measured"].astype(float) > 0) & (cells["predicted"].astype(float) > 0) \
        & (cells["base_s"].astype(float) > 0) & cells["calls"].notna()
    return cells[ok]


@dataclass(frozen=True)
class _Cells:
    """One configuration's usable cells as arrays: each cell's program (a code), measured ratio, the per-call
    model's prediction and calls / T (what the premium, in seconds a call, multiplies)."""
    program: np.ndarray
    measured: np.ndarray
    predicted: np.ndarray
    rate: np.ndarray

    @classmethod
    def of(cls, cells: pd.DataFrame) -> "_Cells":
        cells = _usable(cells)
        return cls(pd.factorize(cells["program"])[0], cells["measured"].astype(float).to_numpy(),
                   cells["predicted"].astype(float).to_numpy(),
                   cells["calls"].astype(float).to_numpy() / cells["base_s"].astype(float).to_numpy())

    def fit(self, keep: np.ndarray | None = None) -> tuple[float, float, int] | None:
        """(slope in seconds a call, its standard error, cells) over the cells `keep` (default all)."""
        from analysis.stats.cost_model import Z, t_quantile

        m = self.measured if keep is None else self.measured[keep]
        # run noise is multiplicative: on the scale of the measured ratio, every cell's error is alike
        z = (self.rate if keep is None else self.rate[keep]) / m
        y = (m - (self.predicted if keep is None else self.predicted[keep])) / m
        zz = float(np.dot(z, z))
        if not len(z) or zz <= 0:
            return None
        slope = float(np.dot(y, z)) / zz
        se = 0.0
        if len(z) > 1:  # the slope's standard error, widened from a t on n - 1 degrees of freedom to the normal's
            se = math.sqrt(float(np.sum((y - slope * z) ** 2)) / (len(z) - 1) / zz) * t_quantile(len(z) - 1) / Z
        return slope, se, len(z)

    def errors(self, slope: float | None, keep: np.ndarray | None = None) -> np.ndarray:
        """log(measured) - log(predicted), with the premium `slope` where given (a prediction the term takes to
        zero or below counts as a ratio of 0.05: a miss that large is what it is)."""
        pred = self.predicted if keep is None else self.predicted[keep]
        if slope is not None:
            pred = pred + slope * (self.rate if keep is None else self.rate[keep])
        return np.log(self.measured if keep is None else self.measured[keep]) - np.log(np.clip(pred, 0.05, None))

    def takes_term(self, keep: np.ndarray) -> bool:
        """Whether the cells `keep` take the premium: MIN_PROGRAMS programs or more, and leaving each out in turn,
        the term lowers the mean square of their log errors."""
        programs = np.unique(self.program[keep])
        if len(programs) < MIN_PROGRAMS:
            return False
        with_ = []
        for q in programs:
            out = keep & (self.program == q)
            got = self.fit(keep & ~out)
            with_.append(self.errors(got[0] if got else None, out))
        return bool(np.mean(np.concatenate(with_) ** 2) < np.mean(self.errors(None, keep) ** 2))


def fit(cells: pd.DataFrame) -> Premium | None:
    """The premium of one configuration's cells (CELL_COLUMNS): the slope through the origin of measured less
    predicted on calls / T, on the scale of the measured ratio; None without a cell that allocates."""
    return _premium(_Cells.of(cells))


def _premium(c: "_Cells", keep: np.ndarray | None = None) -> Premium | None:
    got = c.fit(keep)
    programs = c.program if keep is None else c.program[keep]
    return None if got is None else Premium(got[0] * 1e9, got[1] * 1e9, int(len(np.unique(programs))), got[2])


def log_errors(cells: pd.DataFrame, premium: Premium | None) -> np.ndarray:
    """log(measured) - log(predicted), the prediction with the term where `premium` is given."""
    return _Cells.of(cells).errors(None if premium is None else premium.ns * 1e-9)


def takes_term(cells: pd.DataFrame) -> bool:
    """Whether one configuration's model takes the premium: it has MIN_PROGRAMS programs checked or more, and
    leaving each out in turn, the term lowers the mean square of their log errors."""
    c = _Cells.of(cells)
    return c.takes_term(np.ones(len(c.program), dtype=bool))


def premiums(cells: pd.DataFrame) -> dict[str, Premium]:
    """{configuration: its premium} for those whose model takes the term, fitted on all their checked cells."""
    out = {}
    for allocator, mine in _usable(cells).groupby("allocator", sort=True):
        c = _Cells.of(mine)
        got = _premium(c) if c.takes_term(np.ones(len(c.program), dtype=bool)) else None
        if got is not None:
            out[str(allocator)] = got
    return out


def nested(cells: pd.DataFrame) -> pd.DataFrame:
    """Nested leave-one-program-out (NESTED_COLUMNS): each program left out, the term chosen and fitted per
    configuration on the rest (the choice by their own leave-one-out), then the program's cells predicted; beside
    each, the model's error without the term."""
    cells = _usable(cells)
    parts = []
    for allocator, mine in cells.groupby("allocator", sort=True):
        c = _Cells.of(mine)
        nested_e, chosen = np.empty(len(c.program)), np.zeros(len(c.program), dtype=bool)
        for q in np.unique(c.program):
            out = c.program == q
            got = c.fit(~out) if c.takes_term(~out) else None
            nested_e[out] = c.errors(got[0] if got else None, out)
            chosen[out] = got is not None
        parts.append(pd.DataFrame({"program": mine["program"].to_numpy(), "allocator": allocator,
                                   "processor": mine["processor"].to_numpy(), "measured": c.measured,
                                   "predicted": c.predicted, "log_error_without": c.errors(None),
                                   "log_error_nested": nested_e, "term_chosen": chosen}))
    if not parts:
        return pd.DataFrame(columns=NESTED_COLUMNS)
    return pd.concat(parts, ignore_index=True)[NESTED_COLUMNS]


def summary(nested_table: pd.DataFrame) -> dict:
    """The median and 90th percentile of |log error|, in percent of the ratio, without the term and with it
    chosen by nested leave-one-program-out, over the cells of `nested_table`."""
    def pct(e, q):
        return 100 * math.expm1(float(np.quantile(np.abs(e), q))) if len(e) else float("nan")

    e0, e = nested_table["log_error_without"].to_numpy(), nested_table["log_error_nested"].to_numpy()
    return {"cells": int(len(nested_table)), "programs": int(nested_table["program"].nunique()),
            "median_without": pct(e0, 0.5), "p90_without": pct(e0, 0.9),
            "median_nested": pct(e, 0.5), "p90_nested": pct(e, 0.9)}
