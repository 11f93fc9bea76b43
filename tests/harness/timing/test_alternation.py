"""Brought programs taking turns from outside (harness/timing/alternation.py, harness/timing/alternate.c): the
driver alternates two processes on one CPU, starts each again when it ends and keeps the last finished run's
output; a program is judged from the kernel's accounts (other threads, waits), whatever else the machine does;
and a campaign measures a one-thread program in pairs and keeps the others on trials, saying why."""
import csv
import json
import shutil
import subprocess

import pytest

from analysis.errors import HeapcostError
from analysis.harness.timing import alternation as A
from analysis.harness.timing.measure import Campaign
from conftest import FIXTURES, libc_path

PATH_ENV = "PATH=/usr/bin:/bin"


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    out = tmp_path_factory.mktemp("alternate") / "brought_workload"
    subprocess.run(["gcc", "-O2", "-o", str(out), str(FIXTURES / "brought_workload.c")], check=True)
    return out


def drive(tmp_path, a, b, *options):
    out = subprocess.run([str(A.driver_path()), "--cpu", "0", *options, "--a-stdout", str(tmp_path / "a.out"),
                          "--b-stdout", str(tmp_path / "b.out"), "--a-env", PATH_ENV, "--b-env", PATH_ENV,
                          "--", *a, "--", *b], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


# ------------------------------------------------------------------------------------------- the rules
def test_a_program_with_one_thread_that_keeps_the_cpu_busy_applies_and_gets_a_window_for_two_runs_a_side():
    fit = A.fit_from(cpu_s=0.4, main_run_s=0.4, main_queued_s=0.3, wall_s=0.75)
    assert fit.applies and fit.window_s == pytest.approx(1.6)  # 2 sides x 2 runs x 0.4 s
    assert A.fit_from(0.01, 0.01, 0.0, 0.011).window_s == A.MIN_WINDOW_S
    assert A.fit_from(5.0, 5.0, 0.0, 5.1).window_s == A.MAX_WINDOW_S


def test_queueing_for_the_cpu_is_not_waiting_but_sleeping_is_and_other_threads_are_refused():
    busy_machine = A.fit_from(cpu_s=0.2, main_run_s=0.2, main_queued_s=0.8, wall_s=1.02)
    assert busy_machine.applies  # a loaded machine queues it: the kernel says so, and it still applies
    sleeper = A.fit_from(cpu_s=0.2, main_run_s=0.2, main_queued_s=0.0, wall_s=0.6)
    assert not sleeper.applies and "waits for 67%" in sleeper.why
    assert A.fit_from(cpu_s=0.01, main_run_s=0.01, main_queued_s=0.0, wall_s=0.02).applies  # 10 ms: too little
    threaded = A.fit_from(cpu_s=0.5, main_run_s=0.01, main_queued_s=0.0, wall_s=0.3)
    assert not threaded.applies and "other threads (98%" in threaded.why
    failed = A.fit_from(0.1, 0.1, 0.0, 0.1, status="exited", exit_code=3)
    assert not failed.applies and "exit 3" in failed.why


@pytest.mark.parametrize("mode,applies,why", [("", True, "one thread"), ("sleep", False, "waits"),
                                              ("threads", False, "other threads")])
def test_the_kernels_accounts_tell_the_three_programs_apart(program, tmp_path, mode, applies, why):
    r = A.reference_run([program, "1", *([mode] if mode else [])], {"PATH": "/usr/bin:/bin"}, tmp_path, 60)
    assert r["status"] == "exited" and r["exit_code"] == 0 and r["main_run_s"] is not None
    fit = A.fit_from(r["cpu_s"], r["main_run_s"], r["main_queued_s"], r["wall_s"])
    assert (fit.applies, why in fit.why) == (applies, True), fit.why


# ------------------------------------------------------------------------------------------ the driver
def test_both_sides_run_in_turns_are_started_again_and_keep_their_last_finished_output(program, tmp_path):
    d = drive(tmp_path, [str(program), "0.2"], [str(program), "0.2"], "--window-s", "1.5")
    for side in "ab":
        s = d[side]
        assert s["failed"] is None and s["error"] is None and s["runs"] >= 2 and len(s["each"]) == s["runs"]
        assert s["cpu_all_s"] >= s["cpu_s"] > 0 and s["stops"] > 10 and s["conts"] > 10
        assert (tmp_path / f"{side}.out").read_text().startswith("checksum=")
        assert not (tmp_path / f"{side}.out.running").exists()  # the run the window cut short left nothing
    assert d["slices"] > 10 and d["driver_cpu_s"] >= 0
    # the same program on both sides: its CPU time per run is the same, whatever the machine's speed
    ratio = (d["b"]["cpu_s"] / d["b"]["runs"]) / (d["a"]["cpu_s"] / d["a"]["runs"])
    assert 0.5 < ratio < 2.0


def test_max_runs_closes_the_window_early(program, tmp_path):
    d = drive(tmp_path, [str(program), "0.05"], [str(program), "0.05"], "--window-s", "60", "--max-runs", "3")
    assert d["a"]["runs"] >= 3 and d["b"]["runs"] >= 3 and d["wall_s"] < 60


def test_a_failing_run_ends_the_window_and_a_missing_program_is_an_error(program, tmp_path):
    d = drive(tmp_path, [str(program), "0.05"], [str(program), "0.05", "fail"], "--window-s", "10")
    assert d["b"]["failed"] == {"exit_code": 3, "signal": None} and d["wall_s"] < 10
    d = drive(tmp_path, ["/nonexistent/program"], [str(program), "0.05"], "--window-s", "10")
    assert d["a"]["error"] == "No such file or directory" and d["a"]["runs"] == 0


def test_fit_reads_the_run_from_the_kernel_and_reports_a_missing_program(program, tmp_path):
    r = A.reference_run([program, "0.5"], {"PATH": "/usr/bin:/bin"}, tmp_path, 60)
    assert r["status"] == "exited" and r["exit_code"] == 0 and r["cpu_s"] > 0
    assert 0 < r["main_run_s"] <= r["cpu_s"] + 0.001 and r["main_run_s"] + r["main_queued_s"] <= r["wall_s"] + 0.005
    assert (tmp_path / "stdout").read_text().startswith("checksum=")
    assert A.reference_run(["/nonexistent/program"], {}, tmp_path, 60) == {
        "status": "spawn-failed", "error": "No such file or directory"}


def test_the_driver_refuses_bad_arguments(tmp_path):
    r = subprocess.run([str(A.driver_path()), "--slice-us", "5", "--", "true", "--", "true"], capture_output=True,
                       text=True)
    assert r.returncode == 64 and r.stderr.startswith("usage: heapcost-alternate")


# ---------------------------------------------------------------------------------------- a campaign
@pytest.mark.slow
def test_a_campaign_measures_a_one_thread_program_in_pairs_and_keeps_a_sleeper_on_trials(program, runs_dir):
    camp = Campaign(profile="smoke", allocators="glibc", extra_allocators=f"glibc-copy={libc_path()}",
                    extra_workloads=f"busy={program} 1, sleeper={program} 1 sleep, differs={program} 1 preload",
                    blocks=2,  # each alternating cell: a warm-up and two windows of at least 1.5 s
                    seed=3, runs_dir=runs_dir, progress=False)
    run_dir = camp.run()
    info = json.loads((run_dir / "run.json").read_text())
    assert info["alternation"]["busy"]["applies"] and not info["alternation"]["sleeper"]["applies"]
    assert "waits" in info["alternation"]["sleeper"]["why"]
    assert info["protocol_cells"]["alternating"] == ["busy", "differs"]
    assert info["protocol_cells"]["trials"] == ["sleeper"]
    with open(run_dir / "pairs.csv") as fh:
        every = [r for r in csv.DictReader(fh) if r["warmup"] == "0"]
    pairs = [r for r in every if r["workload"] == "busy"]
    assert len(pairs) == 2
    assert all(r["status"] == "ok" and int(r["turns_a"]) >= 1 and float(r["active_b_s"]) > 0 for r in pairs)
    # a checksum that depends on what is preloaded: each side's last finished run is checked, and differs
    assert {r["status"] for r in every if r["workload"] == "differs"} == {"bad-checksum"}
    assert {r["malloc_lib_a"] for r in pairs} | {r["malloc_lib_b"] for r in pairs} >= {libc_path()}
    with open(run_dir / "trials.csv") as fh:
        assert {r["workload"] for r in csv.DictReader(fh)} == {"sleeper"}


def test_the_run_of_median_cpu_time_judges_and_a_failed_run_decides_at_once():
    def run(cpu, status="exited", code=0, main=True):
        return {"status": status, "exit_code": code, "cpu_s": cpu, "wall_s": cpu, "main_run_s": cpu if main else None,
                "main_queued_s": 0.0}
    slow_spell = [run(0.13), run(0.21), run(0.12)]
    assert A.median_run(slow_spell)["cpu_s"] == 0.13
    assert A.median_run([run(0.1), run(0.2)])["cpu_s"] == 0.1
    assert A.median_run([run(0.1), run(0.2, "signaled", None)])["status"] == "signaled"
    assert A.median_run([run(0.1, main=False), run(0.2)])["main_run_s"] is None


def test_a_window_no_side_ended_a_run_in_doubles_and_one_that_did_is_kept():
    failed = {"status": "failed", "reason": "a: no run ended within the 0.5 s window: a longer window is needed",
              "turns_a": 0, "turns_b": 3}
    assert A.widened(0.5, failed) == 1.0
    assert A.widened(A.MAX_WINDOW_S * 0.75, failed) == A.MAX_WINDOW_S
    assert A.widened(A.MAX_WINDOW_S, failed) is None
    # a side with no run ended fails its checksum too (it printed none): still too short a window
    assert A.widened(0.5, {"status": "bad-checksum", "reason": "b: no checksum line", "turns_a": 4, "turns_b": ""}) == 1.0
    assert A.widened(0.5, {"status": "ok", "reason": "", "turns_a": 2, "turns_b": 2}) is None
    assert A.widened(0.5, {"status": "bad-checksum", "reason": "a: checksum differs", "turns_a": 2, "turns_b": 2}) is None


@pytest.mark.slow
def test_a_configuration_too_slow_for_the_baselines_window_gets_a_longer_one_and_is_measured(program, runs_dir,
                                                                                            tmp_path):
    # a malloc that spins 2 us: on this program the slow side takes many times the baseline's time, longer than
    # the window the baseline's run sizes
    slow = tmp_path / "libslow.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-DSPIN_US=2", f"-I{FIXTURES}", "-o", str(slow),
                    str(FIXTURES / "slow_malloc.c")], check=True)
    camp = Campaign(profile="smoke", allocators="glibc", extra_allocators=f"slow={slow}",
                    extra_workloads=f"busy={program} 0.5", blocks=4, seed=5, runs_dir=runs_dir, progress=False)
    run_dir = camp.run()
    info = json.loads((run_dir / "run.json").read_text())
    first = info["alternation"]["busy"]["window_s"]
    assert info["alternation_widened"]["busy slow:glibc"] >= 2 * first
    with open(run_dir / "pairs.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert any(r["status"] != "ok" for r in rows)  # the short window's pair stays recorded
    assert any(r["status"] == "ok" and r["warmup"] == "0" for r in rows)  # and a longer one measures the cell


def test_a_window_in_longer_turns_lasts_at_least_ten_turns_of_each_side(tmp_path):
    assert A.window_for_slice(1.2, A.SLICE_US) == 1.2 and A.window_for_slice(1.2, 500) == 1.2
    assert A.window_for_slice(1.2, 100_000) == pytest.approx(2 * A.MIN_TURNS_PER_SIDE * 0.1)
    assert A.window_for_slice(8.0, 100_000) == 8.0
    default = Campaign(profile="smoke", allocators="glibc", workloads="small-loop", runs_dir=tmp_path, progress=False)
    longer = Campaign(profile="smoke", allocators="glibc", workloads="small-loop", runs_dir=tmp_path, progress=False,
                      slice_us=100_000)
    assert default.slice_us == A.SLICE_US and "slice_us" not in default.params()
    assert longer.params()["slice_us"] == 100_000
    with pytest.raises(HeapcostError, match=r"SLICE_US \(each turn in microseconds\) must be a positive number"):
        Campaign(profile="smoke", allocators="glibc", workloads="small-loop", runs_dir=tmp_path, slice_us="x")
