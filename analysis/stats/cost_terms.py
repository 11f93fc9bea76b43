"""Terms the per-call model lacks, estimated from the checked programs' misses and kept only where nested
leave-one-program-out says they predict a program left out better than the model without them.

The per-call cells (stats/cost_model.py) time an allocator's calls in loops that do nothing else, each holding 256
blocks of one class, so each cell's blocks stay in the caches and its heap never grows. Two things a program pays
in them the cells cannot see:

- The premium, per allocation call. An allocator that hands out a block other than the one just freed (a
  quarantine, random slot choice) hands out memory that has left the caches, and the program pays for it in its own
  loads and stores, not in the call. Measured: the checked programs run alone under hardened_malloc's default take
  about twice the added minor faults of the same library without its slab quarantines, and most of the model's
  miss is user time (publish/results/cost_faults.py).
- The held term, per KiB of small blocks the program holds at its peak (cost_model.held_small_kib). An allocator
  that maps each new slab, guards it and gives emptied ones back pays, for a heap of small blocks that grows to
  tens of MiB, new pages and the system calls that map them, which a cell of 256 blocks never does. Measured: over
  the checked programs of mostly small blocks run alone as trials, hardened_malloc's default adds about 1.7 ms of
  system time and 130 minor faults per MiB held (correlation 0.93 and 0.78 across programs), scudo about 0.2 ms
  and 90 faults, jemalloc and mimalloc none (publish/results/cost_faults.py's runs).

- The placement terms, per share of the program's time. Where an allocator puts the blocks a program allocates one
  after another decides how fast the program walks them later: side by side, the hardware prefetcher and the TLB
  follow a walk in allocation order; scattered, every step can miss. heapcost's placement allocator (profile.py,
  placement.c) runs the program with each class's blocks side by side and with them scattered at random, so the
  profile gives both shares of the program's time under the baseline (cost_model.placement_shares): order (side
  by side less the baseline) and shuffle (scattered less side by side). Measured: uncrustify walking its token
  list runs in 0.55 s side by side, 1.05 s scattered and 0.95 s under glibc, with the same instructions and the
  same simulated cache misses under glibc and jemalloc (cachegrind); hardened_malloc's light build, which hands
  slots out in order, takes 0.50 s, and the same build with only its slot randomization turned on 0.93 s.

The model: with y the measured ratio less the model's prediction, z1 the program's calls over its CPU time under
the baseline (calls / T), z2 its KiB held over T and z3, z4 its order and shuffle shares, y = premium * z1 + held *
z2 + order * z3 + shuffle * z4 (the last two a configuration's parts of each share, taken together), fitted by
least squares through
the origin over the configuration's checked cells (a program measured on several processor kinds gives a cell per
kind), each cell's y and z divided by its measured ratio: a run's noise is a share of the ratio, so on that scale
every cell's error is alike. The coefficients' covariance is the fit's, from the cells' scatter about it, widened
to a t on the cells less the coefficients' degrees of freedom.

A cell whose profile has no placement runs (every registration made before them, unless a placement run of the
dataset profiled its program on that processor kind: publish/results/cost_check.py) has z3 = z4 = 0: it adds
nothing to the placement parts' fit and is predicted without them.

Which terms a configuration takes (none, or one of CHOICES: the premium, the held term, the placement pair, in any
combination) is itself estimated: each
program is left out in turn, each choice fitted on the others, and the left-out program's log errors compared by
their mean square; the choice with the least is kept where it is lower than without a term. `nested` checks the
whole procedure on programs it never saw: each program is left out, the choice made and the terms fitted on the
rest, then the program predicted; its errors are what a new program can expect from the model with its terms.
"""
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

# a checked cell: the measured ratio, the model's prediction without the terms, the program's allocation calls, its
# CPU time under the baseline in seconds and the KiB of small blocks it holds at its peak (cost_model.held_small_kib)
# and its placement shares (cost_model.placement_shares; NaN where its profile has none)
CELL_COLUMNS = ["program", "allocator", "processor", "measured", "predicted", "calls", "base_s", "held_kib",
                "order_share", "shuffle_share"]
PREMIUM = "premium"  # the pattern of the premium's part in a prediction's parts
HELD = "held heap"   # the pattern of the held term's part
ORDER, SHUFFLE = "placement order", "placement shuffle"  # the patterns of the placement terms' parts
CALLS_TERM, HELD_TERM, ORDER_TERM, SHUFFLE_TERM = "calls", "held", "order", "shuffle"
PLACEMENT = (ORDER_TERM, SHUFFLE_TERM)  # taken together: a configuration's parts of both placement shares
CHOICES = ((CALLS_TERM,), (HELD_TERM,), (CALLS_TERM, HELD_TERM), PLACEMENT, (CALLS_TERM, *PLACEMENT),
           (HELD_TERM, *PLACEMENT), (CALLS_TERM, HELD_TERM, *PLACEMENT))  # the terms a configuration may take
MIN_PROGRAMS = 5  # fewer programs checked under a configuration: no term (its leave-one-out choice is too thin)
NESTED_COLUMNS = ["program", "allocator", "processor", "measured", "predicted", "log_error_without",
                  "log_error_nested", "term_chosen", "terms"]


@dataclass(frozen=True)
class Premium:
    """A configuration's terms: ns each allocation call adds (the premium) and ns each KiB of small blocks held at
    the program's peak adds (the held term), each 0 where the configuration does not take it (`terms`)."""
    ns: float        # nanoseconds each allocation call adds beyond the cells
    se_ns: float     # its standard error
    programs: int    # from how many programs
    cells: int       # and cells (a program on several processor kinds: a cell each)
    ns_per_kib: float = 0.0     # nanoseconds each KiB held at the peak adds
    se_ns_per_kib: float = 0.0  # its standard error
    cov: float = 0.0            # the premium's and the held term's covariance (ns x ns per KiB)
    terms: tuple = (CALLS_TERM,)
    order: float = 0.0          # the configuration's part of the order share (1: it gains or loses all of it)
    se_order: float = 0.0
    shuffle: float = 0.0        # its part of the shuffle share (1: it scatters blocks as the placement allocator)
    se_shuffle: float = 0.0
    covariance: tuple = ()      # the full covariance of the coefficients taken, in `terms`' order and the fit's
                                # units (s a call, s a KiB, share, share); () where only the standard errors are known

    @property
    def ms_per_mib(self) -> float:
        return self.ns_per_kib * 1024 / 1e6

    def _amounts(self, calls: float, held_kib: float, order_s: float, shuffle_s: float) -> np.ndarray:
        """What each coefficient taken multiplies, in seconds of added time per unit of the fit."""
        amount = {CALLS_TERM: calls, HELD_TERM: held_kib, ORDER_TERM: _finite(order_s), SHUFFLE_TERM: _finite(shuffle_s)}
        return np.array([amount[t] for t in self.terms], dtype=float)

    def _beta(self) -> np.ndarray:
        value = {CALLS_TERM: self.ns * 1e-9, HELD_TERM: self.ns_per_kib * 1e-9, ORDER_TERM: self.order,
                 SHUFFLE_TERM: self.shuffle}
        return np.array([value[t] for t in self.terms], dtype=float)

    def _cov(self) -> np.ndarray:
        if self.covariance:
            return np.array(self.covariance, dtype=float)
        se = {CALLS_TERM: self.se_ns * 1e-9, HELD_TERM: self.se_ns_per_kib * 1e-9, ORDER_TERM: self.se_order,
              SHUFFLE_TERM: self.se_shuffle}
        c = np.diag([se[t] ** 2 for t in self.terms])
        if CALLS_TERM in self.terms and HELD_TERM in self.terms:
            i, j = self.terms.index(CALLS_TERM), self.terms.index(HELD_TERM)
            c[i, j] = c[j, i] = self.cov * 1e-18
        return c

    def added_s(self, calls: float, held_kib: float = 0.0, order_s: float = 0.0, shuffle_s: float = 0.0) -> float:
        """Seconds the terms add: `order_s`, `shuffle_s` are the program's placement shares times its time T."""
        return float(self._amounts(calls, held_kib, order_s, shuffle_s) @ self._beta())

    def sd_s(self, calls: float, held_kib: float = 0.0, order_s: float = 0.0, shuffle_s: float = 0.0) -> float:
        a = self._amounts(calls, held_kib, order_s, shuffle_s)
        return math.sqrt(max(float(a @ self._cov() @ a), 0.0))

    def ratio_added(self, calls: float, base_s: float, held_kib: float = 0.0, order: float = 0.0,
                    shuffle: float = 0.0) -> float:
        """What the terms add to a program's predicted ratio (`order`, `shuffle`: its placement shares)."""
        if base_s <= 0:
            return 0.0
        return self.added_s(calls, held_kib, _finite(order) * base_s, _finite(shuffle) * base_s) / base_s

    def share_sd(self, order_se: float = 0.0, shuffle_se: float = 0.0) -> float:
        """The standard error, in ratio units, that the program's own placement shares' sampling errors give the
        placement parts (each share's error times its coefficient); 0 where the terms take no placement part."""
        if ORDER_TERM not in self.terms:
            return 0.0
        return math.hypot(self.order * _finite(order_se), self.shuffle * _finite(shuffle_se))

    def joined(self, ratio: float, low: float, high: float, calls: float, base_s: float,
               held_kib: float = 0.0, order: float = 0.0, shuffle: float = 0.0, order_se: float = 0.0,
               shuffle_se: float = 0.0) -> tuple:
        """(ratio, low, high) of a per-call prediction with the terms added, their 95% half-width joined to each
        side's in quadrature: the coefficients' errors and (`order_se`, `shuffle_se`) the shares' own."""
        from analysis.stats.cost_model import Z

        o, sh = _finite(order) * base_s, _finite(shuffle) * base_s
        extra = Z * math.hypot(self.sd_s(calls, held_kib, o, sh) / base_s if base_s > 0 else 0.0,
                               self.share_sd(order_se, shuffle_se))
        with_ = ratio + self.ratio_added(calls, base_s, held_kib, order, shuffle)
        return with_, with_ - math.hypot(ratio - low, extra), with_ + math.hypot(high - ratio, extra)

    def describe(self) -> str:
        """The terms taken, in words: "+20 ns a call", "+2.1 ms a MiB of small blocks held", "0.9 of the order
        share and 0.7 of the shuffle share"."""
        words = []
        if CALLS_TERM in self.terms:
            words.append(f"{self.ns:+.0f} ns a call")
        if HELD_TERM in self.terms:
            words.append(f"{self.ms_per_mib:+.2f} ms a MiB of small blocks held")
        if ORDER_TERM in self.terms:
            words.append(f"{self.order:.2f} of the order share and {self.shuffle:.2f} of the shuffle share")
        return " and ".join(words)

    def applied(self, p):
        """A cost_model.Prediction with the terms added: a part each (pattern PREMIUM, every call one pair; pattern
        HELD, every KiB held one pair; ORDER and SHUFFLE, the share's seconds one pair), their standard error
        joined to the per-call costs' in the interval. A profile without placement runs gets no placement part."""
        from analysis.stats.cost_model import Prediction

        held = float(getattr(p, "held_kib", 0.0) or 0.0)
        order_s = _finite(getattr(p, "order_share", math.nan)) * p.base_s
        shuffle_s = _finite(getattr(p, "shuffle_share", math.nan)) * p.base_s
        rows = []
        if CALLS_TERM in self.terms:
            rows.append({"pattern": PREMIUM, "size_class": 0, "pairs": float(p.calls), "added_ns": self.ns,
                         "se_ns": self.se_ns, "added_s": self.ns * 1e-9 * p.calls})
        if HELD_TERM in self.terms:
            rows.append({"pattern": HELD, "size_class": 0, "pairs": held, "added_ns": self.ns_per_kib,
                         "se_ns": self.se_ns_per_kib, "added_s": self.ns_per_kib * 1e-9 * held})
        if ORDER_TERM in self.terms and (order_s or shuffle_s):
            for pattern, seconds, coef, se in ((ORDER, order_s, self.order, self.se_order),
                                               (SHUFFLE, shuffle_s, self.shuffle, self.se_shuffle)):
                rows.append({"pattern": pattern, "size_class": 0, "pairs": seconds * 1e9, "added_ns": coef,
                             "se_ns": se, "added_s": coef * seconds})
        part = pd.DataFrame(rows, columns=["pattern", "size_class", "pairs", "added_ns", "se_ns", "added_s"])
        parts = pd.concat([p.parts, part], ignore_index=True) if len(p.parts) else part
        share_se = (getattr(p, "order_share_se", 0.0), getattr(p, "shuffle_share_se", 0.0))
        if not (order_s or shuffle_s):  # no placement part taken: its shares' errors add nothing
            share_se = (0.0, 0.0)
        ratio, low, high = self.joined(p.ratio, p.low, p.high, p.calls, p.base_s, held,
                                       getattr(p, "order_share", math.nan), getattr(p, "shuffle_share", math.nan),
                                       *share_se)
        sd = math.hypot(p.added_sd_s, self.sd_s(p.calls, held, order_s, shuffle_s),
                        self.share_sd(*share_se) * p.base_s)
        return Prediction(ratio, low, high, p.added_s + self.added_s(p.calls, held, order_s, shuffle_s), p.base_s,
                          p.calls, parts, sd, held, getattr(p, "order_share", math.nan),
                          getattr(p, "shuffle_share", math.nan), *share_se)


def _finite(x) -> float:
    """A placement share, 0 where the profile has none (NaN or None)."""
    try:
        x = float(x)
    except (TypeError, ValueError):
        return 0.0
    return x if math.isfinite(x) else 0.0


def _usable(cells: pd.DataFrame) -> pd.DataFrame:
    ok = (cells["measured"].astype(float) > 0) & (cells["predicted"].astype(float) > 0) \
        & (cells["base_s"].astype(float) > 0) & cells["calls"].notna()
    return cells[ok]


@dataclass(frozen=True)
class _Fit:
    terms: tuple
    beta: np.ndarray  # seconds a call, seconds a KiB held: in the order of `terms`
    cov: np.ndarray
    cells: int


@dataclass(frozen=True)
class _Cells:
    """One configuration's usable cells as arrays: each cell's program (a code), measured ratio, the per-call
    model's prediction, calls / T and KiB held / T (what the terms, in seconds a call and a KiB, multiply)."""
    program: np.ndarray
    measured: np.ndarray
    predicted: np.ndarray
    rate: np.ndarray
    held: np.ndarray
    order: np.ndarray    # the placement shares, 0 where the cell's profile has none
    shuffle: np.ndarray

    @classmethod
    def of(cls, cells: pd.DataFrame) -> "_Cells":
        cells = _usable(cells)
        base = cells["base_s"].astype(float).to_numpy()

        def column(name):
            return (pd.to_numeric(cells[name], errors="coerce").fillna(0.0).to_numpy()
                    if name in cells.columns else np.zeros(len(cells)))

        return cls(pd.factorize(cells["program"])[0], cells["measured"].astype(float).to_numpy(),
                   cells["predicted"].astype(float).to_numpy(), cells["calls"].astype(float).to_numpy() / base,
                   column("held_kib") / base, column("order_share"), column("shuffle_share"))

    def _x(self, terms: tuple, keep: np.ndarray | None) -> np.ndarray:
        columns = {CALLS_TERM: self.rate, HELD_TERM: self.held, ORDER_TERM: self.order, SHUFFLE_TERM: self.shuffle}
        x = np.column_stack([columns[t] for t in terms])
        return x if keep is None else x[keep]

    def fit(self, keep: np.ndarray | None = None, terms: tuple = (CALLS_TERM,)) -> _Fit | None:
        """The terms' coefficients (seconds a call, a KiB) and their covariance over the cells `keep` (default
        all); None where the cells cannot fix them (no cell that allocates or holds, too few cells)."""
        from analysis.stats.cost_model import Z, t_quantile

        m = self.measured if keep is None else self.measured[keep]
        # run noise is multiplicative: on the scale of the measured ratio, every cell's error is alike
        x = self._x(terms, keep) / m[:, None]
        y = (m - (self.predicted if keep is None else self.predicted[keep])) / m
        n, k = x.shape
        # each column scaled to unit length first: calls / T runs to millions a second and a placement share to
        # tenths, so unscaled, a rank test relative to the largest singular value calls the shares' columns zero
        scale = np.sqrt(np.sum(x * x, axis=0))
        if n < k or float(np.min(scale)) <= 0:
            return None
        xs = x / scale
        xx = xs.T @ xs
        if np.linalg.matrix_rank(xx) < k:
            return None
        inv = np.linalg.inv(xx)
        b = inv @ (xs.T @ y)
        cov = np.zeros((k, k))
        if n > k:  # the coefficients' covariance, widened from a t on n - k degrees of freedom to the normal's
            s2 = float(np.sum((y - xs @ b) ** 2)) / (n - k)
            cov = s2 * (inv / np.outer(scale, scale)) * (t_quantile(n - k) / Z) ** 2
        return _Fit(tuple(terms), b / scale, cov, n)

    def errors(self, fit: _Fit | None, keep: np.ndarray | None = None) -> np.ndarray:
        """log(measured) - log(predicted), with the terms of `fit` where given (a prediction the terms take to
        zero or below counts as a ratio of 0.05: a miss that large is what it is)."""
        pred = self.predicted if keep is None else self.predicted[keep]
        if fit is not None:
            pred = pred + self._x(fit.terms, keep) @ fit.beta
        return np.log(self.measured if keep is None else self.measured[keep]) - np.log(np.clip(pred, 0.05, None))

    def choose(self, keep: np.ndarray) -> tuple | None:
        """The terms the cells `keep` take: with MIN_PROGRAMS programs or more, the choice (CHOICES) whose
        left-out programs' log errors, leaving each out in turn, have the least mean square, where that is lower
        than without a term; None otherwise."""
        programs = np.unique(self.program[keep])
        if len(programs) < MIN_PROGRAMS:
            return None
        best, best_ms = None, float(np.mean(self.errors(None, keep) ** 2))
        for terms in CHOICES:
            left = []
            for q in programs:
                out = keep & (self.program == q)
                left.append(self.errors(self.fit(keep & ~out, terms), out))
            ms = float(np.mean(np.concatenate(left) ** 2))
            if ms < best_ms:
                best, best_ms = terms, ms
        return best


def _premium(c: "_Cells", keep: np.ndarray | None = None, terms: tuple = (CALLS_TERM,)) -> Premium | None:
    got = c.fit(keep, terms)
    if got is None:
        return None
    programs = c.program if keep is None else c.program[keep]
    at = {t: i for i, t in enumerate(got.terms)}
    scale = {CALLS_TERM: 1e9, HELD_TERM: 1e9, ORDER_TERM: 1.0, SHUFFLE_TERM: 1.0}  # ns, ns a KiB, shares
    coef = lambda t: float(got.beta[at[t]]) * scale[t] if t in at else 0.0  # noqa: E731
    se = lambda t: math.sqrt(max(float(got.cov[at[t], at[t]]), 0.0)) * scale[t] if t in at else 0.0  # noqa: E731
    cov = float(got.cov[at[CALLS_TERM], at[HELD_TERM]]) * 1e18 if CALLS_TERM in at and HELD_TERM in at else 0.0
    return Premium(coef(CALLS_TERM), se(CALLS_TERM), int(len(np.unique(programs))), got.cells,
                   coef(HELD_TERM), se(HELD_TERM), cov, got.terms, coef(ORDER_TERM), se(ORDER_TERM),
                   coef(SHUFFLE_TERM), se(SHUFFLE_TERM), tuple(map(tuple, got.cov.tolist())))


def fit(cells: pd.DataFrame, terms: tuple = (CALLS_TERM,)) -> Premium | None:
    """The terms `terms` of one configuration's cells (CELL_COLUMNS): least squares through the origin of measured
    less predicted on calls / T and KiB held / T, on the scale of the measured ratio; None where the cells cannot
    fix them."""
    return _premium(_Cells.of(cells), None, tuple(terms))


def _as_fit(premium: Premium | None) -> _Fit | None:
    if premium is None:
        return None
    beta = premium._beta()
    return _Fit(tuple(premium.terms), beta, np.zeros((len(beta), len(beta))), premium.cells)


def log_errors(cells: pd.DataFrame, premium: Premium | None) -> np.ndarray:
    """log(measured) - log(predicted), the prediction with the terms where `premium` is given."""
    return _Cells.of(cells).errors(_as_fit(premium))


def chosen(cells: pd.DataFrame) -> tuple | None:
    """The terms one configuration's model takes (one of CHOICES), or None: see _Cells.choose."""
    c = _Cells.of(cells)
    return c.choose(np.ones(len(c.program), dtype=bool))


def takes_term(cells: pd.DataFrame) -> bool:
    """Whether one configuration's model takes a term: it has MIN_PROGRAMS programs checked or more, and leaving
    each out in turn, a choice of terms lowers the mean square of their log errors."""
    return chosen(cells) is not None


def premiums(cells: pd.DataFrame) -> dict[str, Premium]:
    """{configuration: its terms} for those whose model takes one, fitted on all their checked cells."""
    out = {}
    for allocator, mine in _usable(cells).groupby("allocator", sort=True):
        c = _Cells.of(mine)
        terms = c.choose(np.ones(len(c.program), dtype=bool))
        got = _premium(c, None, terms) if terms is not None else None
        if got is not None:
            out[str(allocator)] = got
    return out


def nested(cells: pd.DataFrame) -> pd.DataFrame:
    """Nested leave-one-program-out (NESTED_COLUMNS): each program left out, the terms chosen and fitted per
    configuration on the rest (the choice by their own leave-one-out), then the program's cells predicted; beside
    each, the model's error without the terms."""
    cells = _usable(cells)
    parts = []
    for allocator, mine in cells.groupby("allocator", sort=True):
        c = _Cells.of(mine)
        nested_e, took = np.empty(len(c.program)), np.full(len(c.program), "", dtype=object)
        for q in np.unique(c.program):
            out = c.program == q
            terms = c.choose(~out)
            got = c.fit(~out, terms) if terms is not None else None
            nested_e[out] = c.errors(got, out)
            took[out] = "+".join(got.terms) if got is not None else ""
        parts.append(pd.DataFrame({"program": mine["program"].to_numpy(), "allocator": allocator,
                                   "processor": mine["processor"].to_numpy(), "measured": c.measured,
                                   "predicted": c.predicted, "log_error_without": c.errors(None),
                                   "log_error_nested": nested_e, "term_chosen": took != "", "terms": took}))
    if not parts:
        return pd.DataFrame(columns=NESTED_COLUMNS)
    return pd.concat(parts, ignore_index=True)[NESTED_COLUMNS]


def summary(nested_table: pd.DataFrame) -> dict:
    """The median and 90th percentile of |log error|, in percent of the ratio, without the terms and with them
    chosen by nested leave-one-program-out, over the cells of `nested_table`."""
    def pct(e, q):
        return 100 * math.expm1(float(np.quantile(np.abs(e), q))) if len(e) else float("nan")

    e0, e = nested_table["log_error_without"].to_numpy(), nested_table["log_error_nested"].to_numpy()
    return {"cells": int(len(nested_table)), "programs": int(nested_table["program"].nunique()),
            "median_without": pct(e0, 0.5), "p90_without": pct(e0, 0.9),
            "median_nested": pct(e, 0.5), "p90_nested": pct(e, 0.9)}
