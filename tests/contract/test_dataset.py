"""The dataset read once per process: each file read the first time it is asked for, again only when it
changes on disk, and shared tables that a reader cannot spoil for the next one."""
import json
import os

import pandas as pd
import pytest

from analysis.contract import dataset
from analysis.contract.runstore import pick_run, runs_of_kind


def make_run(root, run_id, kind="time", status="complete", profile="full", tables=None, machine=None):
    folder = root / run_id
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"kind": kind, "status": status, "params": {"profile": profile}}))
    (folder / "machine.json").write_text(json.dumps(machine or {"cpu": {"model_name": "x"}}))
    for name, text in (tables or {}).items():
        (folder / name).write_text(text)
    return folder


@pytest.fixture
def counted(monkeypatch):
    """How often each file was read from disk."""
    reads = {}
    readers = dict(dataset._READERS)

    def counting(how):
        def read(path):
            reads[(path.parent.name, path.name)] = reads.get((path.parent.name, path.name), 0) + 1
            return readers[how](path)
        return read

    monkeypatch.setattr(dataset, "_READERS", {how: counting(how) for how in readers})
    return reads


def test_one_folder_is_one_dataset_for_the_process(tmp_path):
    make_run(tmp_path, "20260101T000000Z-time-full")
    first = dataset.load(tmp_path)
    assert dataset.load(str(tmp_path)) is first
    assert dataset.load(tmp_path / "." ) is first
    assert dataset.load(first) is first
    assert dataset.load(tmp_path / "other") is not first
    assert first.runs()[0].dataset is first  # a run knows the dataset it is in


def test_each_file_is_read_once_however_often_it_is_asked(tmp_path, counted):
    make_run(tmp_path, "20260101T000000Z-time-full", tables={"pairs.csv": "a,b\n1,2\n"})
    ds = dataset.Dataset(tmp_path)
    for _ in range(5):
        ds.runs("time")
        ds.info("20260101T000000Z-time-full")
        ds.machine("20260101T000000Z-time-full")
        ds.table("20260101T000000Z-time-full", "pairs.csv")
    assert counted == {("20260101T000000Z-time-full", "run.json"): 1,
                       ("20260101T000000Z-time-full", "machine.json"): 1,
                       ("20260101T000000Z-time-full", "pairs.csv"): 1}


def test_a_file_that_changes_on_disk_is_read_again(tmp_path, counted):
    folder = make_run(tmp_path, "20260101T000000Z-time-full", tables={"pairs.csv": "a,b\n1,2\n"})
    ds = dataset.Dataset(tmp_path)
    assert len(ds.table(folder.name, "pairs.csv")) == 1
    with open(folder / "pairs.csv", "a") as fh:  # a campaign appending a row
        fh.write("3,4\n")
    assert len(ds.table(folder.name, "pairs.csv")) == 2
    assert counted[(folder.name, "pairs.csv")] == 2


def test_a_run_added_or_removed_is_seen(tmp_path):
    make_run(tmp_path, "20260101T000000Z-time-full")
    ds = dataset.Dataset(tmp_path)
    assert ds.run_ids() == ["20260101T000000Z-time-full"]
    make_run(tmp_path, "20260102T000000Z-probe-security", kind="probe")
    assert [r.run_id for r in ds.runs()] == ["20260101T000000Z-time-full", "20260102T000000Z-probe-security"]
    assert [r.run_id for r in ds.runs("probe")] == ["20260102T000000Z-probe-security"]
    for f in (tmp_path / "20260101T000000Z-time-full").iterdir():
        f.unlink()
    (tmp_path / "20260101T000000Z-time-full").rmdir()
    assert ds.run_ids() == ["20260102T000000Z-probe-security"]


def test_a_reader_cannot_change_the_table_the_next_one_gets(tmp_path):
    make_run(tmp_path, "r1", tables={"trials.csv": "x\n1\n2\n"})
    ds = dataset.Dataset(tmp_path)
    mine = ds.table("r1", "trials.csv")
    mine["x"] = 0
    mine.loc[0, "x"] = 5
    assert ds.table("r1", "trials.csv")["x"].tolist() == [1, 2]
    assert ds.table("r1", "trials.csv", shared=True) is ds.table("r1", "trials.csv", shared=True)
    rows = ds.rows("r1", "trials.csv")
    rows[0]["x"] = "changed"
    assert ds.rows("r1", "trials.csv")[0]["x"] == "1"


def test_tables_read_as_written_an_empty_cell_is_missing_and_nothing_else(tmp_path):
    make_run(tmp_path, "r1", tables={"probes.csv": "outcome,rate,note\nn/a,,NA\nok,0.5,None\n", "empty.csv": ""})
    ds = dataset.Dataset(tmp_path)
    t = ds.table("r1", "probes.csv")
    assert t["outcome"].tolist() == ["n/a", "ok"]
    assert t["note"].tolist() == ["NA", "None"]
    assert pd.isna(t["rate"][0]) and t["rate"][1] == 0.5
    assert ds.table("r1", "probes.csv", columns=["rate", "absent"]).columns.tolist() == ["rate"]
    assert ds.table("r1", "empty.csv").empty
    assert ds.table("r1", "absent.csv") is None and ds.rows("r1", "absent.csv") is None
    assert ds.files("r1", "*.csv") == ["empty.csv", "probes.csv"]


def test_the_reported_run_is_the_newest_complete_full_one(tmp_path):
    make_run(tmp_path, "20260101T000000Z-time-full", tables={"trials.csv": "x\n"})
    make_run(tmp_path, "20260102T000000Z-time-full", tables={"trials.csv": "x\n"})
    make_run(tmp_path, "20260103T000000Z-time-quick", profile="quick", tables={"trials.csv": "x\n"})
    make_run(tmp_path, "20260104T000000Z-time-full", status="running", tables={"trials.csv": "x\n"})
    make_run(tmp_path, "20260105T000000Z-time-full")  # no trials.csv
    ds = dataset.Dataset(tmp_path)
    assert ds.pick("time", "trials.csv").run_id == "20260102T000000Z-time-full"
    assert ds.pick("probe", "probes.csv") is None
    assert pick_run(tmp_path, "time", "trials.csv").run_id == "20260102T000000Z-time-full"
    assert [r.run_id for r in runs_of_kind(tmp_path, "time")][0] == "20260101T000000Z-time-full"


def test_a_run_json_that_cannot_be_read_leaves_that_run_out_with_a_warning(tmp_path, capsys):
    make_run(tmp_path, "20260101T000000Z-time-full")
    broken = make_run(tmp_path, "20260102T000000Z-time-full")
    (broken / "run.json").write_text("{not json")
    ds = dataset.Dataset(tmp_path)
    assert [r.run_id for r in ds.runs("time")] == ["20260101T000000Z-time-full"]
    assert ds.info(broken.name) == {}
    said = capsys.readouterr().err
    assert "20260102T000000Z-time-full/run.json cannot be read" in said
    assert str(tmp_path) not in said  # names the run, not the folder of the machine that reads it


def test_a_missing_folder_is_an_empty_dataset(tmp_path):
    ds = dataset.Dataset(tmp_path / "nowhere")
    assert ds.run_ids() == [] and ds.runs() == [] and ds.pick("time", "trials.csv") is None
    assert ds.info("r1") == {} and ds.machine("r1") == {}


def test_a_runs_state_moves_when_a_file_changes_and_reads_none(tmp_path, counted):
    folder = make_run(tmp_path, "r1", tables={"pairs.csv": "a\n1\n"})
    ds = dataset.Dataset(tmp_path)
    before = ds.state("r1")
    assert b"pairs.csv" in before and b"run.json" in before
    assert ds.state("r1") == before and counted == {}  # stat only: no file read
    with open(folder / "pairs.csv", "a") as fh:
        fh.write("2\n")
    assert ds.state("r1") != before
    assert ds.state("absent") == b""
