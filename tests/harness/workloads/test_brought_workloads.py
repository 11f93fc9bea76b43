"""EXTRA_WORKLOADS: a program the user brings, measured under every selected allocator like a built-in workload,
with one-line errors before any trial runs, its checksum checked, and its files recorded by hash."""
import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.errors import HeapcostError
from analysis.harness.workloads.brought import parse_extra_workloads, split_items
from analysis.harness.timing.measure import Campaign
from conftest import FIXTURES, REPO, cli, libc_path


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    out = tmp_path_factory.mktemp("brought") / "brought_workload"
    subprocess.run(["gcc", "-O2", "-o", str(out), str(FIXTURES / "brought_workload.c")], check=True)
    return out


def test_items_split_at_commas_and_spaces_before_a_name_but_not_inside_quotes():
    assert split_items("a=prog 1, b=prog2 {scale}") == [("a", "prog 1"), ("b", "prog2 {scale}")]
    assert split_items("a=prog -Wl,x b=other") == [("a", "prog -Wl,x"), ("b", "other")]
    assert split_items("a=make 'cc=gcc' -j2") == [("a", "make 'cc=gcc' -j2")]
    assert split_items("") == []
    with pytest.raises(HeapcostError, match="not of the form name=command"):
        split_items("prog {scale}")
    with pytest.raises(HeapcostError, match="unclosed ' quote"):
        split_items("a=prog 'x")


def test_the_program_and_the_files_it_names_are_recorded_by_hash_and_made_absolute(program, tmp_path, monkeypatch):
    data = tmp_path / "input.txt"
    data.write_text("hello\n")
    monkeypatch.chdir(tmp_path)
    (w,) = parse_extra_workloads([f"mine={program} {{scale}} input.txt --in=input.txt --n=3"])
    assert w.argv(0.5) == [str(program), "0.5", str(data), f"--in={data}", "--n=3"]
    assert [p for p, _ in w.files] == [str(program), str(data), str(data)]
    assert w.files[1][1] == "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"  # sha256 of hello\n
    record = json.dumps(w.record())
    assert str(tmp_path) not in record and str(program) not in record  # paths made portable
    assert w.record()["command"].endswith("/brought_workload {scale} input.txt --in=input.txt --n=3")


def test_a_response_file_named_as_at_file_is_recorded_and_made_absolute(program, tmp_path, monkeypatch):
    args = tmp_path / "symbols.txt"
    args.write_text("hello\n")
    monkeypatch.chdir(tmp_path)
    (w,) = parse_extra_workloads([f"mine={program} @symbols.txt @missing.txt"])
    assert w.argv(1.0) == [str(program), f"@{args}", "@missing.txt"]
    assert [p for p, _ in w.files] == [str(program), str(args)]


def test_an_argument_longer_than_a_file_name_is_kept_as_it_is(program):
    statement = "SELECT " + " + ".join(["1"] * 200) + ";"  # over 255 bytes: no file could have this name
    (w,) = parse_extra_workloads([f"mine={program} '{statement}'"])
    assert w.argv(1.0) == [str(program), statement] and len(w.files) == 1


def test_bad_commands_are_refused_with_one_line_before_anything_runs(program, tmp_path):
    not_exec = tmp_path / "script.sh"
    not_exec.write_text("#!/bin/sh\n")
    cases = {f"bad!={program}": "may use only letters", f".x={program}": "may use only letters",
             f"small-loop={program}": "already a workload or group",
             "mine=/nonexistent/prog {scale}": "program /nonexistent/prog not found",
             "mine=no-such-program-here {scale}": "not found on PATH",
             f"mine={not_exec}": "is not an executable file",
             "mine=": "has no command",
             f"a={program}, a={program}": "already a workload"}
    for spec, message in cases.items():
        with pytest.raises(HeapcostError, match=message):
            parse_extra_workloads(spec, {"small-loop"})


def test_a_static_program_is_refused(tmp_path):
    static = tmp_path / "static"
    built = subprocess.run(["gcc", "-static", "-O2", "-o", str(static), str(FIXTURES / "brought_workload.c")],
                           capture_output=True)
    if built.returncode != 0:
        pytest.skip("no static libc here")
    with pytest.raises(HeapcostError, match="statically linked"):
        parse_extra_workloads(f"mine={static} {{scale}}")


def test_the_cli_says_what_is_wrong_in_one_line(runs_dir):
    r = cli("measure", "--profile", "smoke", "--allocators", "glibc", "--extra-workloads",
            "mine=/nonexistent/prog {scale}", "--no-progress")
    assert r.returncode != 0
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "program /nonexistent/prog not found" in r.stderr
    assert list(runs_dir.iterdir()) == []


def _campaign(runs_dir, spec, blocks=5):
    """The trials protocol: these programs would otherwise take turns from outside (test_alternation.py)."""
    return Campaign(profile="smoke", allocators="glibc", extra_allocators=f"glibc-copy={libc_path()}",
                    extra_workloads=spec, blocks=blocks, seed=1, runs_dir=runs_dir, progress=False,
                    protocol="trials")


def _trials(run_dir):
    with open(run_dir / "trials.csv") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow
def test_a_program_failing_under_glibc_stops_the_campaign_before_any_trial(program, runs_dir):
    with pytest.raises(HeapcostError, match=r"workload mine fails under plain glibc.*exited 3.*failing as asked"):
        _campaign(runs_dir, f"mine={program} {{scale}} fail").run()
    assert [p for p in runs_dir.iterdir() if p.is_dir()] == []


@pytest.mark.slow
def test_checksums_are_compared_with_glibcs_and_a_program_without_one_is_judged_by_its_exit(program, runs_dir):
    camp = _campaign(runs_dir, f"same={program} {{scale}}, differs={program} {{scale}} preload,"
                               f" silent={program} {{scale}} none", blocks=1)
    assert camp.workload_ids == ["same", "differs", "silent"]  # WORKLOADS empty: the brought ones alone
    rows = [r for r in _trials(camp.run()) if r["warmup"] == "0"]
    status = {(r["workload"], r["allocator"]): (r["status"], r["reason"]) for r in rows}
    assert status[("same", "glibc")] == status[("same", "glibc-copy")] == ("ok", "")
    assert status[("silent", "glibc")] == status[("silent", "glibc-copy")] == ("ok", "")
    # $LD_PRELOAD differs between the allocators and from the reference run: a wrong result, reported
    for alloc in ("glibc", "glibc-copy"):
        assert status[("differs", alloc)][0] == "bad-checksum"
        assert "!= expected" in status[("differs", alloc)][1]
    assert {r["malloc_lib"] for r in rows if r["allocator"] == "glibc-copy"} == {libc_path()}


@pytest.mark.slow
def test_make_measure_with_a_brought_workload_under_two_allocators_reaches_the_results(program, tmp_path):
    """The issue's done-when: make measure ... EXTRA_WORKLOADS=mine="<program> {scale}" into a temporary
    dataset, whose rendered results (speed and memory tables, workload table) include it."""
    if shutil.which("make") is None:
        pytest.skip("make not installed")
    pytest.importorskip("papermill")
    runs = tmp_path / "data" / "runs"
    runs.mkdir(parents=True)
    env = {**os.environ, "HEAPCOST_RUNS_DIR": str(runs), "HEAPCOST_FORCE": "1"}
    r = subprocess.run(["make", "-s", "-C", str(REPO), "measure", f"PY={sys.executable}", "VENV_STAMP=",
                        "PROFILE=smoke", "BLOCKS=5", "SEED=2", "ALLOCATORS=glibc",
                        f"EXTRA_ALLOCATORS=glibc-copy={libc_path()}", f"EXTRA_WORKLOADS=mine={program} {{scale}}"],
                       capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    info = json.loads((run_dir / "run.json").read_text())
    assert info["params"]["workloads"] == ["mine"]
    (recorded,) = info["params"]["extra_workloads"]["mine"]["files"]
    assert recorded["path"].startswith("{tmp}/") and len(recorded["sha256"]) == 64
    # a one-thread program that does not wait takes turns from outside, on the pair's one CPU
    assert info["alternation"]["mine"]["applies"], info["alternation"]["mine"]["why"]
    assert info["protocol_cells"]["alternating"] == ["mine"] and isinstance(info["trial_cpus"]["mine"], int)

    from analysis.publish.results import comparisons, writer

    res = comparisons.compute(tmp_path / "data")
    out = tmp_path / "generated"
    out.mkdir()
    writer.write_outputs(res, out)
    with open(out / "results_speed.csv") as fh:
        speed = [row for row in csv.DictReader(fh) if row["workload"] == "mine"]
    assert [row["allocator"] for row in speed] == ["glibc-copy"]
    assert "mine" in (out / "results_memory.csv").read_text()
    assert "brought by the user" in (out / "results_workloads.csv").read_text()
