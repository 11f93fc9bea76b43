"""The published dataset: a deterministic archive with its checksum, a generated codebook that covers every
column, a data package that validates, and a citation file that names the dataset without inventing a DOI."""
import hashlib
import subprocess
import sys
import tarfile

import pytest
import yaml

from analysis import __version__
from analysis.publish.dataset import codebook
from analysis.publish.dataset import archive, datapackage
from analysis.errors import HeapcostError
from analysis.contract.schema import LITERATURE_SCHEMAS
from analysis.paths import DATA_DIR, REPO
from analysis.contract.schema import TABLE_SCHEMAS
from analysis.publish.dataset.validate import validate
from conftest import cli_here
from simulated_dataset import make_dataset


@pytest.fixture
def data(tmp_path):
    return make_dataset(tmp_path, n_blocks=6)


@pytest.mark.slow  # end to end, over 2.5 s on a 2-core host: in make test, not test-fast
def test_archive_is_deterministic_with_its_checksum(data, tmp_path):
    archive.refresh_description(data)
    p1, d1 = archive.write_archive(tmp_path / "one", data)
    p2, d2 = archive.write_archive(tmp_path / "two", data)
    assert p1.read_bytes() == p2.read_bytes() and d1 == d2 == hashlib.sha256(p1.read_bytes()).hexdigest()
    assert (tmp_path / "one" / f"{p1.name}.sha256").read_text() == f"{d1}  {p1.name}\n"
    assert p1.name == f"heapcost-dataset-{__version__}.tar.gz"
    with tarfile.open(p1) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names)
    assert {m.mtime for m in members} == {archive.FIXED_MTIME} and {m.uid for m in members} == {0}
    top = f"heapcost-dataset-{__version__}"
    for needed in ("data/README.md", "data/datapackage.json", "CITATION.cff"):
        assert f"{top}/{needed}" in names
    assert any(n.endswith("/trials.csv") for n in names) and any(n.endswith("/probes.csv") for n in names)


def test_a_changed_file_changes_the_checksum(data):
    before = archive.checksum(data)
    trials = next((data / "runs").glob("*time*")) / "trials.csv"
    trials.write_text(trials.read_text() + "\n")
    assert archive.checksum(data) != before


def test_refreshed_description_validates_and_is_stable(data):
    changed = archive.refresh_description(data)
    assert {p.rsplit("/", 1)[-1] for p in changed} == {"README.md", "datapackage.json"}
    assert validate(data) == []
    assert archive.refresh_description(data) == []  # nothing left to rewrite


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
    written = tmp_path / "dist" / archive.archive_name()
    assert f"sha256 {hashlib.sha256(written.read_bytes()).hexdigest()}" in r.stdout
    r = cli("--data", str(tmp_path / "nowhere"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "runs/" in r.stderr


@pytest.mark.slow  # end to end, over 2.5 s on a 2-core host: in make test, not test-fast
def test_the_archive_holds_what_datapackage_json_describes(data, tmp_path):
    """A run measured after the description is not in the archive until it is described; `dataset`
    (refresh, then archive) brings it in, and the unpacked archive validates."""
    import shutil

    archive.refresh_description(data)
    described = [n for n, _ in archive.members(data)]
    published = archive.checksum(data)
    run = next((data / "runs").glob("*time*"))
    shutil.copytree(run, data / "runs" / "20991231T000000Z-time-quick")
    assert [n for n, _ in archive.members(data)] == described and archive.checksum(data) == published
    assert archive.write_archive(tmp_path / "before", data)[1] == published
    assert any("datapackage.json" in p for p in archive.refresh_description(data))
    names = [n for n, _ in archive.members(data)]
    assert len(names) > len(described) and any("/20991231T000000Z-time-quick/" in n for n in names)
    path, digest = archive.write_archive(tmp_path / "dist", data)
    assert digest == archive.checksum(data) != published and path.is_file()
    # a described file changed after its description: the unpacked archive fails, nothing is written
    (run / "trials.csv").write_text((run / "trials.csv").read_text() + "\n")
    with pytest.raises(HeapcostError, match="sha256 differs"):
        archive.write_archive(tmp_path / "bad", data)
    assert not (tmp_path / "bad").exists()


def test_a_dotted_folder_with_a_space_keeps_every_file(tmp_path):
    """Only the parts below the dataset directory decide what is hidden: a clone under `.hidden dir/`."""
    data = make_dataset(tmp_path / ".hidden dir" / "clone", n_blocks=6)
    archive.refresh_description(data)
    files = datapackage.dataset_files(data)
    assert files and any(p.name == "trials.csv" for p in files)
    (data / "runs" / ".ipynb_checkpoints").mkdir()
    (data / "runs" / ".ipynb_checkpoints" / "x.json").write_text("{}")
    assert datapackage.dataset_files(data) == files
    roundabout = data.parent / ".." / "clone" / "data"  # `..` in the location
    assert [p.relative_to(roundabout) for p in datapackage.dataset_files(roundabout)] == \
        [p.relative_to(data) for p in files]
    assert archive.checksum(roundabout) == archive.checksum(data)
    (data / "datapackage.json").write_text("{not json")  # a broken description is rewritten, not a dead end
    assert any(p.endswith("datapackage.json") for p in archive.refresh_description(data))


def test_a_step_that_would_lose_the_description_writes_nothing(data, tmp_path, monkeypatch):
    archive.refresh_description(data)
    before = {p: p.read_bytes() for p in (data / "datapackage.json", data / "README.md")}
    empty = tmp_path / "empty"
    (empty / "runs").mkdir(parents=True)
    (empty / "datapackage.json").write_bytes(before[data / "datapackage.json"])
    with pytest.raises(HeapcostError, match="no data file found"):
        archive.refresh_description(empty)
    with pytest.raises(HeapcostError, match="no data file found"):
        datapackage.write_datapackage(empty)
    assert (empty / "datapackage.json").read_bytes() == before[data / "datapackage.json"]
    assert not (empty / "README.md").exists()
    # described files that are still there but were not found (as under a dotted folder before)
    run = next((data / "runs").glob("*time*"))
    found = datapackage.dataset_files
    monkeypatch.setattr(datapackage, "dataset_files", lambda d: [p for p in found(d) if run not in p.parents])
    with pytest.raises(HeapcostError, match="would drop"):
        archive.refresh_description(data)
    assert {p: p.read_bytes() for p in before} == before




def test_a_measurement_changed_after_publication_is_not_taken_in(data):
    """New runs come in by themselves; an edited measurement does not: the description keeps its sha256
    and says how a deliberate rewrite is made."""
    archive.refresh_description(data)
    before = (data / "datapackage.json").read_bytes()
    trials = next((data / "runs").glob("*time*")) / "trials.csv"
    trials.write_text(trials.read_text() + "\n")
    with pytest.raises(HeapcostError, match=r"1 described file\(s\) changed after publication, first runs/.*"
                                            r"trials.csv.*validate --write"):
        archive.refresh_description(data)
    assert (data / "datapackage.json").read_bytes() == before


def test_library_paths_are_recorded_without_the_machines_folders(monkeypatch, tmp_path):
    import sys

    from analysis.paths import portable_path

    monkeypatch.setenv("HEAPCOST_CACHE", str(tmp_path / "cache"))
    assert portable_path(f"{tmp_path}/cache/allocators/glibc-built-2.36/build/libc.so.6") == \
        "{cache}/allocators/glibc-built-2.36/build/libc.so.6"
    assert portable_path(f"{sys.prefix}/lib/libmimalloc.so") == "{venv}/lib/libmimalloc.so"
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
