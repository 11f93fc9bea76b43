"""One allocator against another from one run's comparisons with its own baseline: a direct row when one side is
the baseline, else the ratio of the two rows. The debates' pooling (publish/debates/pool.py) and the ablations
(publish/results/ablations.py) both read a run this way."""
import math

import pandas as pd

from analysis.stats import estimators


def ratio_within_run(rows: pd.DataFrame, with_: str, without: str):
    """with/without on one workload from one run's comparisons with its own baseline (rows of that run and
    workload): a direct row when one side is the baseline, else the ratio of the two rows (log difference;
    the variances add, which is exact for independent process pairs and conservative when both share the
    baseline's trials). A run that measured the workload at several scales (SCALES) answers at its largest.
    Returns an estimators.Difference on the log scale, or None."""
    return WithinRun(rows).ratio(with_, without)


class WithinRun:
    """One workload's comparisons of one run, read once for the ratio of any two of its allocators."""

    def __init__(self, rows: pd.DataFrame):
        if "scale" in rows and len(rows):
            scale = pd.to_numeric(rows["scale"], errors="coerce").fillna(-1)
            rows = rows[scale == scale.max()]
        self.by = rows.set_index("allocator")
        self.base = rows["baseline"].iloc[0] if len(rows) else None
        # allocator -> (ratio, ci_low, ci_high, df) when each allocator has one row (else self.by answers)
        self.values = (dict(zip(self.by.index, zip(*(self.by[c].to_numpy(dtype=object)
                                                      for c in ("ratio", "ci_low", "ci_high", "df")))))
                       if self.by.index.is_unique and len(rows) else None)

    def _diff(self, name):
        ratio, ci_low, ci_high, df = (self.values[name] if self.values is not None else
                                      (lambda r: (r["ratio"], r["ci_low"], r["ci_high"], r["df"]))(self.by.loc[name]))
        q = estimators.Difference(0.0, 1.0, float(df)).interval()[1]  # that row's t quantile
        return estimators.Difference(math.log(ratio), (math.log(ci_high) - math.log(ci_low)) / (2 * q), float(df))

    def ratio(self, with_: str, without: str):
        index = self.by.index
        if with_ in index and without == self.base:
            return self._diff(with_)
        if without in index and with_ == self.base:
            d = self._diff(without)
            return estimators.Difference(-d.estimate, d.se, d.df)
        if with_ in index and without in index:
            a, b = self._diff(with_), self._diff(without)
            se2 = a.se ** 2 + b.se ** 2
            df = se2 ** 2 / (a.se ** 4 / a.df + b.se ** 4 / b.df) if se2 > 0 else 1.0
            return estimators.Difference(a.estimate - b.estimate, math.sqrt(se2), df)
        return None
