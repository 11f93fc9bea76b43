"""Products that do not depend on the host: numbers rounded to stated significant digits, and the same
bytes from the same data whatever numpy's BLAS threads or SIMD path."""
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from analysis.publish.render import products
from conftest import REPO
from simulated_dataset import TRUE_RATIOS, make_dataset

WRITE_PRODUCTS = """
import sys
from pathlib import Path
from analysis.publish.results import comparisons, reanalysis
from analysis.publish.results import writer as results_writer
from analysis.publish.security import writer as security_writer

data, out = Path(sys.argv[1]), Path(sys.argv[2])
results_writer.write_outputs(comparisons.compute(data), out)
security_writer.write_outputs(security_writer.reported_probe_rows(data / "runs"), out)
reanalysis.write_outputs(out, data / "literature" / "figures.csv")
"""

# two hosts in one: the BLAS thread count, the BLAS kernels (OpenBLAS's core type: the processor's own, or the
# SSE3 kernels of a 2004 processor) and numpy's SIMD dispatch differ (X86_V3/V4 are AVX2/AVX-512)
HOSTS = {
    "wide": {"OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "2", "NPY_DISABLE_CPU_FEATURES": ""},
    "narrow": {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_CORETYPE": "Prescott",
               "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR"},
}


def test_round_float_keeps_the_stated_significant_digits():
    assert products.SIGNIFICANT_DIGITS == 10
    assert products.round_float(1.2241162505096002) == products.round_float(1.2241162505096) == 1.224116251
    assert products.round_float(123456.78901234) == 123456.789
    assert products.round_float(-0.000123456789012345) == -0.0001234567890
    assert products.round_float(True) is True and products.round_float(7) == 7 and products.round_float("x") == "x"
    assert np.isnan(products.round_float(float("nan"))) and products.round_float(float("inf")) == float("inf")
    assert type(products.round_float(np.float64(0.1) + np.float64(0.2))) is float


def test_rounded_reaches_into_tables_and_nested_numbers(tmp_path):
    table = pd.DataFrame({"ratio": [0.1 + 0.2, float("nan")], "n": [3, 4], "label": ["a", 1 / 3],
                          "flag": [True, False]})
    products.write_csv(table, tmp_path / "t.csv")
    assert (tmp_path / "t.csv").read_text() == "ratio,n,label,flag\n0.3,3,a,True\n,4,0.3333333333,False\n"
    text = products.json_text({"a": [np.float64(2 / 3), {"b": (1e-20 / 3,)}], "c": np.int64(5), "d": None})
    assert text == '{"a": [0.6666666667, {"b": [3.333333333e-21]}], "c": 5, "d": null}'
    assert products.rounded(np.array([1 / 7])).tolist() == [0.1428571429]


def write_products(data, out, env_change: dict) -> dict:
    # HEAPCOST_MEMO=0: each host computes its products; a remembered result would agree by construction
    env = {**os.environ, "PYTHONPATH": str(REPO), "HEAPCOST_MEMO": "0", **env_change}
    done = subprocess.run([sys.executable, "-c", WRITE_PRODUCTS, str(data), str(out)], env=env, cwd=REPO,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file()}


@pytest.mark.slow  # renders the products twice in fresh interpreters: in make test, not test-fast
def test_products_have_the_same_bytes_under_other_numpy_settings(tmp_path):
    # the probe rows of the simulated allocators alone: the same scoring, drawing and writing, for five
    # allocators instead of every one the committed run probed
    data = make_dataset(tmp_path / "sim", probed=TRUE_RATIOS)
    written = {name: write_products(data, tmp_path / name, env) for name, env in HOSTS.items()}
    wide, narrow = written["wide"], written["narrow"]
    assert sorted(wide) == sorted(narrow)
    assert {n.rsplit(".", 1)[1] for n in wide} == {"csv", "json", "svg"}
    assert [n for n in wide if wide[n] != narrow[n]] == []


@pytest.mark.parametrize("name", ["results_speed.csv", "results_debates.csv", "results_numbers.json",
                                  "noise_numbers.json", "literature_numbers.json"])
def test_committed_products_hold_no_number_beyond_the_stated_digits(name):
    import re

    text = (REPO / "paper" / "generated" / name).read_text()
    mantissas = re.findall(r"(?<![\w.])(\d+)\.(\d+)(?:e-?\d+)?(?![\w.])", text)
    too_long = [f"{i}.{f}" for i, f in mantissas if len((i + f).lstrip("0")) > products.SIGNIFICANT_DIGITS]
    assert too_long == []
