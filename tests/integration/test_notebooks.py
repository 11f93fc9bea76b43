"""Every notebook in notebooks/ runs top to bottom under papermill with its default parameters.

The tests never touch the published data or the paper: notebooks with an out_dir write, as run by hand,
to the lab's scratch folder (build/lab/generated/), and the measurement notebook writes its run to a
temporary HEAPCOST_RUNS_DIR (the others read the published data/). FAST lists the only other parameters
changed, each to keep the suite quick.
"""
from pathlib import Path

import papermill as pm
import pytest

from analysis.publish.render.notebook import default_parameters
from analysis.paths import REPO

pytestmark = pytest.mark.paper

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
# The notebooks with an out_dir run once, with every default, in the run-by-hand test below (their products
# land in the lab's scratch folder); the defaults test runs the others, so no notebook runs twice.
BY_HAND = [p.stem for p in NOTEBOOKS if "out_dir" in default_parameters(p)]
FAST = {"noise": {"replications": 12, "debate_replications": 3, "machine_replications": 2, "recovery_replications": 20},
        # the coverage studies' defaults (hundreds of data sets) take minutes
        "explore": {"draws": 200}}  # the security intervals' posterior draws: the notebook's steps, not its precision


def test_every_notebook_is_listed():
    assert {p.stem for p in NOTEBOOKS} >= {"explore", "literature", "measure", "noise", "results", "security"}


def test_the_notebooks_with_products_are_the_ones_run_by_hand():
    assert set(BY_HAND) >= {"results", "security", "literature", "noise"}


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.stem not in BY_HAND],
                         ids=[p.stem for p in NOTEBOOKS if p.stem not in BY_HAND])
def test_notebook_runs_with_its_defaults(path: Path, tmp_path, monkeypatch):
    params = dict(FAST.get(path.stem, {}))
    if path.stem == "measure":
        monkeypatch.setenv("HEAPCOST_RUNS_DIR", str(tmp_path / "runs"))
        (tmp_path / "runs").mkdir()
    output = tmp_path / path.name
    pm.execute_notebook(str(path), str(output), parameters=params, cwd=str(REPO / "notebooks"),
                        kernel_name="python3", progress_bar=False)
    if path.stem == "measure":
        made = [*(tmp_path / "runs").glob("*/trials.csv"), *(tmp_path / "runs").glob("*/pairs.csv")]
        assert made, "measure.ipynb made no run"
    if path.stem == "explore":  # no program named by default: each of the last cells says what to set
        shown, predicted, checked = explore_program_cells(output)
        assert shown.startswith("No program named")
        assert predicted.startswith("No profile above")
        assert checked.startswith("No allocators named to measure")


def snapshot(folder: Path) -> dict:
    return {p.relative_to(folder): (p.stat().st_mtime_ns, p.read_bytes()) for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("name", BY_HAND)
def test_run_by_hand_a_notebook_writes_to_scratch_not_to_the_paper(name, tmp_path):
    """Defaults as in the lab (out_dir ""): the products land in build/lab/generated/, paper/generated/
    (the paper's inputs) is left exactly as it was. The paper build passes its own out_dir."""
    from analysis.paths import GENERATED_DIR, SCRATCH_DIR

    path = REPO / "notebooks" / f"{name}.ipynb"
    assert default_parameters(path)["out_dir"] == ""
    params = dict(FAST.get(name, {}))
    if "data_dir" in default_parameters(path):
        # the small simulated dataset: `make paper` (before `make test`) and test_paper_published run
        # results.ipynb on the published one, 22 s of CPU that this test of where products go need not repeat
        # (its probe rows those of the simulated allocators alone: the others' scores are no product checked here)
        from simulated_dataset import TRUE_RATIOS, make_dataset

        params["data_dir"] = str(make_dataset(tmp_path, probed=TRUE_RATIOS))
    before = snapshot(GENERATED_DIR)
    started = {p: p.stat().st_mtime_ns for p in SCRATCH_DIR.glob(f"{name}_*")} if SCRATCH_DIR.is_dir() else {}
    pm.execute_notebook(str(path), str(tmp_path / path.name), parameters=params,
                        cwd=str(REPO / "notebooks"), kernel_name="python3", progress_bar=False)
    assert snapshot(GENERATED_DIR) == before, f"{name}.ipynb wrote into paper/generated/"
    fresh = [p for p in SCRATCH_DIR.glob(f"{name}_*") if started.get(p) != p.stat().st_mtime_ns]
    assert fresh, f"{name}.ipynb wrote nothing to {SCRATCH_DIR.relative_to(REPO)}"
    if name in PRODUCTS:  # what the products hold, read from this run's files
        PRODUCTS[name](SCRATCH_DIR, {p.name for p in fresh})


def noise_products(out: Path, fresh: set) -> None:
    import json

    import pandas as pd

    from analysis.stats import simulate

    assert {"noise_coverage.csv", "noise_coverage.svg", "noise_numbers.json", "noise_debates_coverage.csv"} <= fresh
    summary = pd.read_csv(out / "noise_coverage.csv")
    assert set(summary["method"]) == {"heapcost (compare)", "Welch t on raw times",
                                      "hyperfine +- propagation", "heapcost (paired)"}
    paired_rows = summary[summary["method"] == "heapcost (paired)"]
    assert set(paired_rows["scenario"]) == set(simulate.PAIRED_SCENARIOS)  # this machine's regimes, lockstep
    assert (summary["replications"] == FAST["noise"]["replications"]).all()
    assert (out / "noise_coverage.svg").read_text().lstrip().startswith("<?xml")
    numbers = json.loads((out / "noise_numbers.json").read_text())
    assert numbers["replications"] == FAST["noise"]["replications"] and numbers["halfwidth_vs_welch"]
    designs = pd.read_csv(out / "noise_debates_coverage.csv")  # the debates' designs, simulated
    assert (designs["replications"] == FAST["noise"]["debate_replications"]).all()
    assert set(designs["scenario"]) == {"uniform", "interaction"}


def literature_products(out: Path, fresh: set) -> None:
    import pandas as pd

    assert {"literature_reanalysis.csv", "literature_003.svg", "literature_slips.csv"} <= fresh
    table = pd.read_csv(out / "literature_reanalysis.csv", dtype={"seed": str})
    assert set(table["seed"]) == {"000", "001", "002", "003", "004"}


# the notebooks whose products are checked here (their run by hand is their one papermill run in the suite)
PRODUCTS = {"noise": noise_products, "literature": literature_products}


def explore_program_cells(output: Path) -> tuple[str, str, str]:
    """What explore.ipynb's profile, prediction and measuring cells printed (none of them an error)."""
    import json

    cells = [c for c in json.loads(output.read_text())["cells"] if c["cell_type"] == "code"]
    profiled = next(c for c in cells if "allocation_profile.profile(" in "".join(c["source"]))
    prediction = next(c for c in cells if "cost_prediction.predictions(" in "".join(c["source"]))
    texts = []
    for cell in (profiled, prediction, cells[-1]):
        assert not any(o["output_type"] == "error" for o in cell["outputs"])
        texts.append("".join("".join(o.get("text", "")) for o in cell["outputs"]))
    return tuple(texts)


def test_explore_shows_its_view_once_profiles_the_program_its_parameter_names_and_never_a_traceback(tmp_path):
    """The static cell shows the result for the parameters; the interactive cell adds only the controls.
    The program named is profiled and its cost predicted (the defaults' run above: none named, and it says so)."""
    import json

    from analysis.harness.process.build import build_c
    from conftest import FIXTURES

    program = build_c("alloc_profile", [FIXTURES / "alloc_profile.c"], ldflags=["-pthread"])
    output = tmp_path / "explore.ipynb"
    pm.execute_notebook(str(REPO / "notebooks" / "explore.ipynb"), str(output),
                        parameters={"workloads": "python", "allocators": "musl", "draws": 20,
                                    "profile_command": f"{program} baseline", "predict_startup": True},
                        cwd=str(REPO / "notebooks"), kernel_name="python3", progress_bar=False)
    outputs = [o for c in json.loads(output.read_text())["cells"] for o in c.get("outputs", [])]
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    # the primitives and profile cells after the view add their own tables; the view itself is shown once
    views = [h for h in html if "none of the chosen allocators has usable wall time runs on python" in "".join(h)]
    assert len(views) == 1 and html[0] is views[0]
    assert not any(o["output_type"] == "error" for o in outputs)
    shown, predicted, checked = explore_program_cells(output)
    assert "threads that allocated: 1" in shown and "wall" in shown
    # the prediction cell: musl (the allocator named) has no per-call costs, and it says which ones have
    assert "no per-call costs of musl" in predicted
    # the measuring cell measures nothing unless allocators are named
    assert checked.startswith("No allocators named to measure")
