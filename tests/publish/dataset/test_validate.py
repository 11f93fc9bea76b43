import csv
import shutil

import pytest

from analysis.harness.timing import measure
from analysis.publish.dataset.datapackage import write_datapackage
from conftest import REPO, cli_here


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """A small real dataset: one smoke run measured here (lockstep pairs, the default protocol)."""
    data = tmp_path_factory.mktemp("data")
    measure.run_campaign(profile="smoke", allocators="glibc,glibc-notcache", workloads="small-loop", blocks=2,
                         runs_dir=data / "runs", progress=False)
    write_datapackage(data)
    return data


def copy(dataset, tmp_path):
    target = tmp_path / "data"
    shutil.copytree(dataset, target)
    return target, next((target / "runs").iterdir())


def test_a_fresh_dataset_validates(dataset):
    r = cli_here("validate", str(dataset))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("valid: ")


def test_a_changed_measurement_is_caught(dataset, tmp_path):
    data, run = copy(dataset, tmp_path)
    pairs = run / "pairs.csv"
    text = pairs.read_text().splitlines()
    assert ",ok," in text[1]
    text[1] = text[1].replace(",ok,", ",okay,", 1)
    pairs.write_text("\n".join(text) + "\n")
    r = cli_here("validate", str(data))
    assert r.returncode == 1
    assert "sha256 differs" in r.stdout and 'constraint "enum"' in r.stdout


def test_undescribed_missing_and_duplicate_rows_are_caught(dataset, tmp_path):
    data, run = copy(dataset, tmp_path)
    (data / "stray.csv").write_text("a\n1\n")
    (run / "machine.json").unlink()
    rows = (run / "pairs.csv").read_text().splitlines()
    (run / "pairs.csv").write_text("\n".join(rows + rows[-1:]) + "\n")
    r = cli_here("validate", str(data))
    assert r.returncode == 1
    assert "stray.csv: not described" in r.stdout
    assert "machine.json: described in datapackage.json but missing" in r.stdout
    assert "duplicate seq values" in r.stdout


def test_no_datapackage_is_a_one_line_error(tmp_path):
    r = cli_here("validate", str(tmp_path))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "does not exist" in r.stderr


@pytest.mark.slow  # frictionless reads all ~61,000 published rows cell by cell: 4-6 s
def test_the_published_dataset_validates():
    if not (REPO / "data" / "datapackage.json").exists():
        pytest.fail("data/datapackage.json is missing: the dataset is unpublished")
    r = cli_here("validate", str(REPO / "data"))
    assert r.returncode == 0, r.stdout


def test_a_probes_table_published_before_size_existed_keeps_a_schema_that_fits_it():
    from analysis.contract.schema import PROBE_COLUMNS, table_schema

    old = [c for c in PROBE_COLUMNS if c not in ("size", "outcomes")]
    assert [f["name"] for f in table_schema("probes.csv", old)["fields"]] == old
    assert [f["name"] for f in table_schema("probes.csv", PROBE_COLUMNS)["fields"]] == PROBE_COLUMNS
    assert PROBE_COLUMNS.index("size") == PROBE_COLUMNS.index("probe") + 1


def test_a_table_the_csv_module_cannot_read_is_an_error_line_not_a_crash(tmp_path):
    data = tmp_path / "data"
    run = shutil.copytree(REPO / "data" / "runs" / "20261130T135001Z-time-quick", data / "runs" / "r")
    lines = (run / "trials.csv").read_text().split("\n")
    lines[1] = lines[1].replace(",pow2-churn,", "," + "w" * 200_000 + ",", 1)
    (run / "trials.csv").write_text("\n".join(lines))
    write_datapackage(data)
    # the csv module's default limit, as in a fresh `validate` (frictionless raises it for the process at import)
    raised = csv.field_size_limit(131072)
    try:
        r = cli_here("validate", str(data))
    finally:
        csv.field_size_limit(raised)
    assert r.returncode == 1 and "runs/r/trials.csv: not readable as CSV (field larger than field limit" in r.stdout
