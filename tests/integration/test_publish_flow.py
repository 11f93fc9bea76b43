"""Measure, then publish, in a clone whose location has a dotted folder and a space: a new run joins
datapackage.json when the paper is rendered, the paper cites the checksum of the archive `dataset` then
writes, and that archive unpacks into a dataset that validates, the new run included."""
import contextlib
import io
import json
import os
import subprocess
import sys
import tarfile

import pytest

from conftest import REPO, SMALL_PUBLISHED_RUNS, copy_checkout, keep_only_runs, libc_path

pytestmark = pytest.mark.slow


def heapcost(clone, *args):
    env = {k: v for k, v in os.environ.items() if k not in ("HEAPCOST_RUNS_DIR", "PYTHONPATH")}
    env.update(PYTHONPATH=str(clone), HEAPCOST_RUNS_DIR=str(clone / "data" / "runs"), HEAPCOST_FORCE="1")
    return subprocess.run([sys.executable, "-m", "analysis", *args], cwd=clone, capture_output=True, text=True,
                          env=env, timeout=900)


def validate(data_dir):
    """`validate DATA_DIR` through the command line's own entry, in this process: (exit code, stdout). It reads
    only the folder it is given, so it needs no process of its own in the clone (a new process would spend
    seconds importing the validator)."""
    from analysis.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["validate", str(data_dir)])
    return code, out.getvalue()


def test_measure_then_paper_then_dataset_in_a_dotted_folder_with_a_space(tmp_path):
    clone = copy_checkout(tmp_path / ".hidden dir" / "clone")
    keep_only_runs(clone, SMALL_PUBLISHED_RUNS)
    runs_before = {p.name for p in (clone / "data" / "runs").iterdir()}
    described_before = {res["path"] for res in json.loads((clone / "data" / "datapackage.json").read_text())["resources"]}

    r = heapcost(clone, "measure", "--profile", "smoke", "--allocators", "glibc", "--workloads", "small-loop",
                 "--extra-allocators", f"glibc-copy={libc_path()}", "--blocks", "5", "--seed", "3", "--no-progress")
    assert r.returncode == 0, r.stderr
    (new_run,) = {p.name for p in (clone / "data" / "runs").iterdir()} - runs_before
    code, stdout = validate(clone / "data")
    assert code == 1 and f"runs/{new_run}/pairs.csv: not described in datapackage.json" in stdout

    # the paper's own step (its notebooks left out: they are tested elsewhere) brings the run in
    r = heapcost(clone, "paper", "--notebooks", "")
    assert r.returncode == 0, r.stderr
    assert "datapackage.json" in r.stdout
    package = json.loads((clone / "data" / "datapackage.json").read_text())
    assert f"runs/{new_run}/pairs.csv" in {res["path"] for res in package["resources"]}
    assert described_before < {res["path"] for res in package["resources"]}  # nothing published was lost
    cited = json.loads((clone / "paper" / "generated" / "paper_numbers.json").read_text())["dataset"]["sha256"]

    r = heapcost(clone, "dataset")  # it validates data/ and then the unpacked archive before writing it
    assert r.returncode == 0, r.stderr
    archive = next((clone / "dist").glob("*.tar.gz"))
    assert f"sha256 {cited}" in r.stdout  # the paper cites the archive that was written
    unpacked = tmp_path / "unpacked"
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        tar.extractall(unpacked, filter="data")
    top = names[0].split("/")[0]
    assert f"{top}/data/runs/{new_run}/pairs.csv" in names
    described = {res["path"] for res in package["resources"]}
    assert {n.split("/data/", 1)[1] for n in names if "/data/" in n} == described | {"datapackage.json"}
    code, stdout = validate(unpacked / top / "data")
    assert code == 0, stdout
