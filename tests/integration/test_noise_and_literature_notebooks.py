"""notebooks/noise.ipynb and literature.ipynb run under papermill and write their paper/generated files."""
import json

import pandas as pd
import papermill as pm
import pytest

from analysis.paths import REPO
from analysis.stats import simulate

pytestmark = pytest.mark.paper


def _run(name, tmp_path, **parameters):
    pm.execute_notebook(str(REPO / "notebooks" / f"{name}.ipynb"), str(tmp_path / f"{name}.ipynb"),
                        parameters=parameters, cwd=str(REPO), kernel_name="python3",
                        progress_bar=False)


def test_noise_notebook(tmp_path):
    out = tmp_path / "generated"
    _run("noise", tmp_path, replications=12, debate_replications=3, seed=3, out_dir=str(out))
    summary = pd.read_csv(out / "noise_coverage.csv")
    assert set(summary["method"]) == {"heapcost (compare)", "Welch t on raw times",
                                      "hyperfine +- propagation", "heapcost (paired)"}
    paired_rows = summary[summary["method"] == "heapcost (paired)"]
    assert set(paired_rows["scenario"]) == set(simulate.PAIRED_SCENARIOS)  # this machine's regimes, lockstep
    assert (summary["replications"] == 12).all()
    assert (out / "noise_coverage.svg").read_text().lstrip().startswith("<?xml")
    numbers = json.loads((out / "noise_numbers.json").read_text())
    assert numbers["replications"] == 12 and numbers["halfwidth_vs_welch"]
    designs = pd.read_csv(out / "noise_debates_coverage.csv")  # the debates' designs, simulated
    assert (designs["replications"] == 3).all() and set(designs["scenario"]) == {"uniform", "interaction"}


def test_literature_notebook(tmp_path):
    out = tmp_path / "generated"
    _run("literature", tmp_path, out_dir=str(out))
    table = pd.read_csv(out / "literature_reanalysis.csv", dtype={"seed": str})
    assert set(table["seed"]) == {"000", "001", "002", "003", "004"}
    assert (out / "literature_003.svg").exists() and (out / "literature_slips.csv").exists()
