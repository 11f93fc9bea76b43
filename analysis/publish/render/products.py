"""Numbers as the products record them: every float written to paper/generated (CSV, JSON, the data a
figure draws) goes through `rounded`, which keeps SIGNIFICANT_DIGITS significant digits.

Why: the statistics are exact only to the last bit of a double, and that bit depends on the host (the
BLAS thread count, the SIMD path numpy takes): `1.2241162505096002` on one machine is `1.2241162505096`
on another. Rounded, both write the same bytes, so a fresh clone stays clean after `make paper`.
Ten digits are far more than any number the paper prints (at most four significant digits), and a
last-bit difference changes a ten-digit rounding only when the value sits within 1e-16 of a rounding
boundary.
"""
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

SIGNIFICANT_DIGITS = 10


def round_float(x):
    """`x` to SIGNIFICANT_DIGITS significant digits as a plain float; anything not a float as it is."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (float, np.floating)):
        return x
    x = float(x)
    if not math.isfinite(x) or x == 0.0:
        return x
    return float(f"{x:.{SIGNIFICANT_DIGITS - 1}e}")


def _round_series(s: pd.Series) -> pd.Series:
    if pd.api.types.is_float_dtype(s.dtype):
        return s.map(round_float).astype(s.dtype)
    if s.dtype == object:
        return s.map(rounded)
    return s


def rounded(obj):
    """A copy of `obj` (DataFrame, Series, array, dict, list, tuple or scalar) with every float rounded."""
    if isinstance(obj, pd.DataFrame):
        out = obj.copy()
        for col in out.columns:
            out[col] = _round_series(out[col])
        return out
    if isinstance(obj, pd.Series):
        return _round_series(obj)
    if isinstance(obj, np.ndarray):
        if np.issubdtype(obj.dtype, np.floating):
            return np.vectorize(round_float, otypes=[obj.dtype])(obj) if obj.size else obj.copy()
        if obj.dtype == object:
            return np.array([rounded(v) for v in obj.ravel()], dtype=object).reshape(obj.shape)
        return obj
    if isinstance(obj, dict):
        return {k: rounded(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(rounded(v) for v in obj)
    return round_float(obj)


def write_csv(table: pd.DataFrame, path: Path) -> None:
    """`table` as CSV without its index, floats rounded."""
    rounded(table).to_csv(path, index=False)


def json_text(obj, **dumps_options) -> str:
    """JSON of `obj` with floats rounded (numpy scalars written as plain numbers)."""
    return json.dumps(rounded(obj), default=_plain, **dumps_options)


def _plain(value):
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.floating):
        return round_float(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
