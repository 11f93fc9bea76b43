"""The published dataset: a deterministic archive with its checksum, a generated codebook that covers every
column, a data package that validates, and a citation file that names the dataset without inventing a DOI."""
import hashlib
import subprocess
import sys
import tarfile

import pytest
import yaml

from analysis import __version__
from analysis.publish import codebook
from analysis.publish import dataset
from analysis.contract.schema import LITERATURE_SCHEMAS
from analysis.paths import DATA_DIR, REPO
from analysis.contract.schema import TABLE_SCHEMAS
from analysis.publish.validate import validate
from conftest import cli_here
from simulated_dataset import make_dataset


@pytest.fixture
def data(tmp_path):
    return make_dataset(tmp_path, n_blocks=6)


def test_archive_is_deterministic_with_its_checksum(data, tmp_path):
    dataset.refresh_description(data)
    p1, d1 = dataset.write_archive(tmp_path / "one", data)
    p2, d2 = dataset.write_archive(tmp_path / "two", data)
    assert p1.read_bytes() == p2.read_bytes() and d1 == d2 == hashlib.sha256(p1.read_bytes()).hexdigest()
    assert (tmp_path / "one" / f"{p1.name}.sha256").read_text() == f"{d1}  {p1.name}\n"
    assert p1.name == f"heapcost-dataset-{__version__}.tar.gz"
    with tarfile.open(p1) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names)
    assert {m.mtime for m in members} == {dataset.FIXED_MTIME} and {m.uid for m in members} == {0}
    top = f"heapcost-dataset-{__version__}"
    for needed in ("data/README.md", "data/datapackage.json", "CITATION.cff"):
        assert f"{top}/{needed}" in names
    assert any(n.endswith("/trials.csv") for n in names) and any(n.endswith("/probes.csv") for n in names)


def test_a_changed_file_changes_the_checksum(data):
    before = dataset.checksum(data)
    trials = next((data / "runs").glob("*time*")) / "trials.csv"
    trials.write_text(trials.read_text() + "\n")
    assert dataset.checksum(data) != before


def test_refreshed_description_validates_and_is_stable(data):
    changed = dataset.refresh_description(data)
    assert {p.rsplit("/", 1)[-1] for p in changed} == {"README.md", "datapackage.json"}
    assert validate(data) == []
    assert dataset.refresh_description(data) == []  # nothing left to rewrite


def test_codebook_describes_every_column_of_every_table(data):
    text = codebook.codebook(data)
    for name, fields in TABLE_SCHEMAS.items():
        assert f"## `{name}`" in text
        for f in fields:
            assert f"| `{f['name']}` | {f['type']} | {f.get('unit', '')} |" in text, (name, f["name"])
    for name, schema in LITERATURE_SCHEMAS.items():
        fields = schema["fields"] if isinstance(schema, dict) else schema
        for f in fields:
            assert f"| `{f['name']}` |" in text, (name, f["name"])
    for run in (data / "runs").iterdir():
        assert f"`{run.name}`" in text


def test_published_codebook_is_generated_and_current():
    """data/README.md is never hand-written: it must equal what the codebook code makes of data/."""
    assert (DATA_DIR / "README.md").read_text() == codebook.codebook(DATA_DIR), \
        "data/README.md is stale: run `make dataset` (or python -m analysis dataset)"


def test_citation_names_the_dataset_without_a_doi():
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["version"] == __version__
    data_refs = [r for r in cff["references"] if r["type"] == "data"]
    assert len(data_refs) == 1 and data_refs[0]["version"] == __version__
    assert "doi" not in (REPO / "CITATION.cff").read_text().lower().replace("no doi", "")


def test_cli_writes_the_archive_and_reports_errors_on_one_line(data, tmp_path):
    def cli(*args):
        return cli_here("dataset", *args)

    r = cli("--data", str(data), "--out", str(tmp_path / "dist"))
    assert r.returncode == 0, r.stderr
    archive = tmp_path / "dist" / dataset.archive_name()
    assert f"sha256 {hashlib.sha256(archive.read_bytes()).hexdigest()}" in r.stdout
    r = cli("--data", str(tmp_path / "nowhere"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "runs/" in r.stderr


def test_the_checksum_covers_the_tracked_files_only(data, tmp_path):
    """A stray run left in data/runs/ (a user's quick run, never committed) changes neither the archive
    nor the checksum the paper prints; outside a git checkout every file counts."""
    import os
    import shutil

    outside = dataset.checksum(data)
    env = dict(os.environ, GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1")
    git = lambda *a: subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *a],
                                    cwd=data.parent, env=env, check=True, capture_output=True)
    git("init", "-q")
    git("add", "data")
    git("commit", "-qm", "the dataset")
    published = dataset.checksum(data)
    assert published == outside  # the same files
    names = [n for n, _ in dataset.members(data)]
    run = next((data / "runs").glob("*time*"))
    shutil.copytree(run, data / "runs" / "20991231T000000Z-time-quick")
    assert dataset.checksum(data) == published
    assert [n for n, _ in dataset.members(data)] == names
    assert dataset.tracked_files(tmp_path / "elsewhere") is None  # no checkout: every file
    # a tracked file that changes still changes it
    (run / "trials.csv").write_text((run / "trials.csv").read_text() + "\n")
    assert dataset.checksum(data) != published


def test_reasons_name_repository_files_relative_to_it():
    from analysis.paths import repo_relative

    line = 'Out of memory at /home/someone/src/heapcost/workloads/perl_strcat.pl line 21.'
    assert repo_relative(line) == "Out of memory at workloads/perl_strcat.pl line 21."
    assert repo_relative(f"error in {REPO}/probes/x.c") == "error in probes/x.c"
    assert repo_relative("/usr/lib/x86_64-linux-gnu/libc.so.6") == "/usr/lib/x86_64-linux-gnu/libc.so.6"
    assert repo_relative(None) is None


def test_first_line_of_a_stderr_is_repository_relative(tmp_path):
    from analysis.harness.trial import first_line

    err = tmp_path / "stderr"
    err.write_text(f"banner\nfatal: cannot open {REPO}/workloads/data.txt\n")
    assert first_line(err) == "fatal: cannot open workloads/data.txt"


def test_published_callgrind_reasons_carry_no_machine_path():
    from analysis.contract.runstore import runs_of_kind
    from analysis.contract.schema import read_table
    from analysis.publish.results import missing_callgrind

    runs = runs_of_kind(DATA_DIR / "runs", "callgrind")
    if not runs:
        pytest.skip("no callgrind run in the published dataset")
    reasons = " ".join(r for run in runs for r in missing_callgrind(read_table(run.path / "counts.csv"))["reason"])
    assert "workloads/perl_strcat.pl" in reasons and "/workloads/" not in reasons


def test_library_paths_are_recorded_without_the_machines_folders(monkeypatch, tmp_path):
    import sys

    from analysis.paths import portable_path

    monkeypatch.setenv("HEAPCOST_CACHE", str(tmp_path / "cache"))
    assert portable_path(f"{tmp_path}/cache/allocators/glibc-built-2.36/build/libc.so.6") == \
        "$HEAPCOST_CACHE/allocators/glibc-built-2.36/build/libc.so.6"
    assert portable_path(f"{sys.prefix}/lib/libmimalloc.so") == "$VENV/lib/libmimalloc.so"
    assert portable_path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2") == "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"


def test_the_run_table_says_how_alone_each_speed_run_was(tmp_path):
    run = tmp_path / "runs" / "20990101T000000Z-time-quick"
    run.mkdir(parents=True)
    (run / "run.json").write_text('{"kind": "time", "status": "complete", "params": {"profile": "quick"}}')
    (run / "trials.csv").write_text("wall_s,loadavg1,other_cpu_s,interfered\n"
                                    "1.0,0.5,0.10,0\n1.0,1.5,0.00,1\n2.0,2.5,,\n")
    (run / "pairs.csv").write_text("wall_a_s,wall_b_s,loadavg1,other_cpu_s,interfered\n0.5,1.0,1.0,0.02,0\n")
    line = next(x for x in codebook.codebook(tmp_path).splitlines() if run.name in x)
    # loads 0.5, 1.5, 2.5, 1.0: median 1.25; others 0.12 s over 1 + 1 + 1 s of wall (a pair's longer process)
    assert line.endswith("| 1.25 | 4.0% | 1 of 3 |")
    probe = tmp_path / "runs" / "20990101T000001Z-probe-security"
    probe.mkdir()
    (probe / "probes.csv").write_text("probe\nx\n")
    assert next(x for x in codebook.codebook(tmp_path).splitlines() if probe.name in x).endswith("|  |  |  |")
