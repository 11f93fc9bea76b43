"""contribute and merge (analysis/publish/intake.py): a run travels as one archive and joins a dataset
validated, never overwriting, idempotently; runs it cannot read are refused with one line."""
import io
import json
import shutil
import tarfile

import pytest

from conftest import REPO, cli, cli_here
from analysis.errors import HeapcostError
from analysis.publish import dataset, intake
from analysis.publish.datapackage import write_datapackage

PUBLISHED = REPO / "data" / "runs"
TWO_RUNS = ("20261130T125006Z-callgrind-full", "20261130T135001Z-time-quick")  # small runs, one host


def empty_dataset(root):
    data = root / "data"
    (data / "runs").mkdir(parents=True)
    shutil.copytree(REPO / "data" / "literature", data / "literature")
    write_datapackage(data)
    return data


def copy_run(run_id, where):
    return shutil.copytree(PUBLISHED / run_id, where / run_id)


def edit_run_json(run_dir, **changes):
    info = json.loads((run_dir / "run.json").read_text())
    info.update(changes)
    (run_dir / "run.json").write_text(json.dumps(info, indent=2) + "\n")


def test_every_published_run_is_one_merge_can_read():
    for run in sorted(p for p in PUBLISHED.iterdir() if p.is_dir()):
        intake.check_readable(run.name, intake.run_files(run))


def test_a_run_packed_twice_gives_the_same_bytes_and_unpacks_to_its_files(tmp_path):
    run = copy_run(TWO_RUNS[1], tmp_path)
    first = intake.pack(run, tmp_path / "a").read_bytes()
    second = intake.pack(run, tmp_path / "b").read_bytes()
    assert first == second
    run_id, files, provenance = intake.unpack(tmp_path / "a" / f"{run.name}.heapcost-run.tar.gz")
    assert run_id == run.name and files == intake.run_files(run)
    assert provenance["files"]["machine.json"] == intake.sha256_bytes((run / "machine.json").read_bytes())


def test_merging_two_runs_twice_gives_the_same_dataset_checksum(tmp_path):
    archives = [intake.pack(copy_run(r, tmp_path / "src"), tmp_path / "out") for r in TWO_RUNS]
    data = empty_dataset(tmp_path / "one")
    assert intake.merge(archives, data) == [(r, "added") for r in TWO_RUNS]
    once = dataset.checksum(data, citation=None)
    assert intake.merge(archives, data) == [(r, "already in the dataset, unchanged") for r in TWO_RUNS]
    assert dataset.checksum(data, citation=None) == once
    other = empty_dataset(tmp_path / "two")  # the same runs merged elsewhere, in the other order
    intake.merge(list(reversed(archives)), other)
    assert dataset.checksum(other, citation=None) == once
    for run_id in TWO_RUNS:  # byte for byte, with where it came from beside it
        assert intake.run_files(data / "runs" / run_id) == intake.run_files(PUBLISHED / run_id)
        provenance = json.loads((data / "runs" / run_id / "intake.json").read_text())
        assert provenance["source"] == "contribution" and len(provenance["archive_sha256"]) == 64
    described = {r["path"] for r in json.loads((data / "datapackage.json").read_text())["resources"]}
    assert f"runs/{TWO_RUNS[1]}/trials.csv" in described


def test_a_different_run_under_an_existing_id_is_refused_and_nothing_is_overwritten(tmp_path):
    data = empty_dataset(tmp_path)
    run = copy_run(TWO_RUNS[1], tmp_path / "src")
    intake.merge([run], data)
    before = intake.run_files(data / "runs" / run.name)
    edit_run_json(run, elapsed_s=1.0)
    with pytest.raises(HeapcostError, match="already holds a different run"):
        intake.merge([run], data)
    assert intake.run_files(data / "runs" / run.name) == before


@pytest.mark.parametrize("change, message", [
    ({"format": "heapcost-run/2"}, "run format 'heapcost-run/2' cannot be read"),
    ({"kind": "energy"}, "run kind 'energy' is unknown"),
    ({"status": "running"}, "not complete"),
])
def test_a_run_this_version_cannot_read_is_refused_before_anything_is_written(tmp_path, change, message):
    data = empty_dataset(tmp_path)
    good = copy_run(TWO_RUNS[0], tmp_path / "src")
    bad = copy_run(TWO_RUNS[1], tmp_path / "src")
    edit_run_json(bad, **change)
    with pytest.raises(HeapcostError, match=message):
        intake.merge([good, bad], data)
    assert not any((data / "runs").iterdir())


def test_an_unknown_protocol_or_table_header_is_refused(tmp_path):
    run = copy_run(TWO_RUNS[1], tmp_path)
    info = json.loads((run / "run.json").read_text())
    edit_run_json(run, params={**info["params"], "protocol": "interleaved"})
    with pytest.raises(HeapcostError, match="timing protocol 'interleaved' is unknown"):
        intake.check_readable(run.name, intake.run_files(run))
    edit_run_json(run, params=info["params"])
    text = (run / "trials.csv").read_text()
    (run / "trials.csv").write_text("when," + text)
    with pytest.raises(HeapcostError, match="trials.csv has columns this heapcost does not know"):
        intake.check_readable(run.name, intake.run_files(run))


def test_a_table_that_breaks_its_schema_is_refused(tmp_path):
    data = empty_dataset(tmp_path)
    run = copy_run(TWO_RUNS[1], tmp_path / "src")
    lines = (run / "trials.csv").read_text().splitlines(keepends=True)
    lines.append(lines[-1])  # a second row with the same seq
    (run / "trials.csv").write_text("".join(lines))
    with pytest.raises(HeapcostError, match="does not validate"):
        intake.merge([run], data)
    assert not any((data / "runs").iterdir())


def test_a_damaged_archive_is_refused(tmp_path):
    archive = intake.pack(copy_run(TWO_RUNS[1], tmp_path), tmp_path / "out")
    with tarfile.open(archive) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    name = f"{TWO_RUNS[1]}/trials.csv"
    members[name] = members[name].replace(b"ok", b"ko", 1)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for member, data in members.items():
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    archive.write_bytes(raw.getvalue())
    with pytest.raises(HeapcostError, match="trials.csv does not match its sha256"):
        intake.unpack(archive)


@pytest.mark.slow  # end to end, over 2.5 s on a 2-core host: in make test, not test-fast
def test_the_cli_contributes_and_merges_and_answers_bad_input_with_one_line(tmp_path):
    data = empty_dataset(tmp_path)
    run = copy_run(TWO_RUNS[1], tmp_path / "src")
    r = cli("contribute", str(run), "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    archive = tmp_path / "out" / f"{run.name}.heapcost-run.tar.gz"
    r = cli("merge", "--data", str(data), str(archive))
    assert r.returncode == 0 and f"{run.name}: added" in r.stdout, r.stderr
    # the bad inputs through main() in this process: the same exit code and one-line message, no second start-up
    edit_run_json(run, format="heapcost-run/9")
    r = cli_here("merge", "--data", str(data), str(run))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "cannot be read" in r.stderr
    r = cli_here("merge", "--data", str(data), str(tmp_path / "no-such.tar.gz"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1
