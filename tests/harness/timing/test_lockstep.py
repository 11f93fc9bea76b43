"""The timing protocol's mechanisms (correctness, never speed): lockstep turns in the C workloads and their
driver, pinned trials, the quiet-machine record and check, the pairs table, a lockstep campaign."""
import csv
import json
import os
import subprocess
from pathlib import Path

import pytest

from analysis.contract import runstore
from conftest import libc_path
from analysis.contract.schema import PAIR_COLUMNS, TRIAL_COLUMNS, table_schema
from analysis.errors import HeapcostError
from analysis.harness.timing import lockstep, measure
from analysis.harness.process import launcher, quiet
from analysis.harness.allocators import catalog
from analysis.harness.process.trial import SpeedTrial, reference_checksum
from analysis.harness.workloads.builtin import WORKLOADS

ENV = {"PATH": "/usr/bin:/bin"}
TWO_CPUS = len(os.sched_getaffinity(0)) >= 2




@pytest.mark.parametrize("wid", ["small-loop", "pow2-churn", "dom-churn", "pareto", "calls-processes"])
def test_workloads_take_turns_only_when_asked_and_print_the_same_checksum(wid, tmp_path):
    binary = WORKLOADS[wid].binary("glibc")
    plain = subprocess.run([binary, "0.005"], capture_output=True, text=True, env=ENV, check=True)
    assert plain.stderr == "" and plain.stdout.splitlines()[-1].startswith("checksum=")
    # both pipes of a one-process loop: the process passes the token to itself
    r, w = os.pipe()
    os.write(w, b"t")
    env = {**ENV, "HEAPCOST_LOCKSTEP_IN": str(r), "HEAPCOST_LOCKSTEP_OUT": str(w),
           "HEAPCOST_LOCKSTEP_CHUNK_US": "200"}
    # a child process taking the token would leave the parent waiting for it: a hang, failed by the timeout
    turned = subprocess.run([binary, "0.005"], capture_output=True, text=True, env=env, pass_fds=(r, w),
                            check=True, timeout=60)
    os.close(r)
    os.close(w)
    assert turned.stdout == plain.stdout  # the checksum line stays the last stdout line
    # one process takes turns: the processes calls-processes starts run without the lockstep's variables
    lines = [x for x in turned.stderr.strip().splitlines() if x.startswith("lockstep ")]
    assert len(lines) == 1, turned.stderr
    line = turned.stderr.strip().splitlines()[-1]
    assert line.startswith("lockstep active_s=")
    fields = dict(f.split("=") for f in line.split()[1:])
    assert float(fields["active_s"]) > 0 and int(fields["turns"]) >= 1


def resolved(ids, extra=None):
    return {a.id: catalog.resolve(a) for a in catalog.select(ids, extra)}


@pytest.mark.parametrize("first", ["a", "b"])
def test_a_pair_runs_both_processes_on_one_cpu_and_judges_each(first):
    res = resolved("glibc", f"glibc-copy={libc_path()}")
    wl = WORKLOADS["small-loop"]
    expected = reference_checksum(wl, 0.01, "glibc", 60)
    ta, tb = SpeedTrial(res["glibc"], wl, 0.01, 0, timeout_s=60), SpeedTrial(res["glibc-copy"], wl, 0.01, 0, timeout_s=60)
    cpu = launcher.default_trial_cpu()
    with launcher.pinned(cpu):
        row = lockstep.run_pair(ta, tb, expected_a=expected, expected_b=expected, cpu=cpu, first=first,
                                chunk_us=500, timeout=60)
    assert row["status"] == "ok", row["reason"]
    assert set(row) <= set(PAIR_COLUMNS)
    assert float(row["active_a_s"]) > 0 and float(row["active_b_s"]) > 0
    assert row["first"] == first and row["malloc_lib_b"].endswith("libc.so.6")
    assert row["interfered"] in (0, 1) and float(row["other_cpu_s"]) >= 0


def test_a_wrong_checksum_in_one_process_fails_the_pair():
    res = resolved("glibc")
    wl = WORKLOADS["small-loop"]
    t = SpeedTrial(res["glibc"], wl, 0.01, 0, timeout_s=60)
    row = lockstep.run_pair(t, t, expected_a=None, expected_b="0" * 16, cpu=None, timeout=60)
    assert row["status"] == "bad-checksum" and row["reason"].startswith("b: ")
    assert row["status_a"] == "ok"


def test_only_single_threaded_c_workloads_that_call_wl_turn_do_lockstep():
    can = {w for w, wl in WORKLOADS.items() if lockstep.supports_lockstep(wl)}
    assert {"small-loop", "pow2-churn", "dom-churn"} <= can
    assert not can & {"perl-strcat", "python", "sqlite", "compile", "server"}


def test_the_driver_reports_a_failed_exec_and_still_runs_the_other(tmp_path):
    drv = lockstep.driver_path()
    out = subprocess.run([drv, "--b-stderr", str(tmp_path / "b.err"), "--b-env", "PATH=/usr/bin:/bin", "--",
                          "/nonexistent-program", "--", str(WORKLOADS["small-loop"].binary("glibc")), "0.001"],
                         capture_output=True, text=True, timeout=60)
    data = json.loads(out.stdout)
    assert data["a"]["status"] == "spawn-failed" and data["a"]["error"]
    assert data["b"]["status"] == "exited" and data["b"]["exit_code"] == 0 and data["b"]["active_s"] > 0


@pytest.mark.skipif(not TWO_CPUS, reason="needs two CPUs")
def test_launcher_pins_the_trial_and_the_harness_moves_away(tmp_path):
    before = os.sched_getaffinity(0)
    with launcher.pinned(1) as rec:
        assert os.sched_getaffinity(0) == set(rec["harness_cpus"]) and 1 not in os.sched_getaffinity(0)
        r = launcher.run(["/bin/sh", "-c", "grep Cpus_allowed_list /proc/self/status"], env=ENV,
                         stdout=tmp_path / "out", cpu=1, probe_iters=1000)
        assert r.status == "exited" and (tmp_path / "out").read_text().split()[-1] == "1"
    assert os.sched_getaffinity(0) == before


def test_proc_stat_gives_other_cpu_and_steal():
    tick = quiet._TICK
    a = quiet.read_cpu("cpu  100 0 50 900 0 0 0 7 0 0\ncpu0 1 2 3\n")
    b = quiet.read_cpu(f"cpu  {100 + tick} 0 {50 + tick} 900 0 0 0 {7 + tick} 0 0\n")
    assert a.busy_s == pytest.approx(150 / tick) and a.steal_s == pytest.approx(7 / tick)
    got = quiet.interference(a, b, own_cpu_s=0.5, wall_s=1.0)
    assert float(got["other_cpu_s"]) == pytest.approx(1.5) and float(got["steal_s"]) == pytest.approx(1.0)
    assert got["interfered"] == 1 and got["cpu_other_s"] is None  # unpinned: no CPU of its own
    assert quiet.interference(a, a, 0.0, 1.0)["interfered"] == 0
    assert quiet.interference(None, a, 0.0, 1.0) == {"other_cpu_s": None, "steal_s": None, "interfered": None,
                                                     "cpu_other_s": None}
    assert not quiet.is_interfered(0.01, 0.01)  # one tick over a short trial is no evidence


def _stat(cpu0: int, cpu1: int) -> str:
    """/proc/stat with cpu0 and cpu1 busy (user ticks) as given."""
    return (f"cpu  {cpu0 + cpu1} 0 0 9000 0 0 0 0 0 0\ncpu0 {cpu0} 0 0 4500 0 0 0 0 0 0\n"
            f"cpu1 {cpu1} 0 0 4500 0 0 0 0 0 0\nintr 1 2 3\n")


def test_other_work_is_told_apart_by_the_cpu_it_ran_on():
    tick = quiet._TICK
    before = quiet.read_cpu(_stat(100, 200))
    assert before.per_cpu == pytest.approx((100 / tick, 200 / tick))
    wall = 1.0
    # the trial (0.5 s of its own) ran on cpu1; others took 0.3 s there and 0.1 s on cpu0
    after = quiet.read_cpu(_stat(100 + int(0.1 * tick), 200 + int(0.8 * tick)))
    got = quiet.interference(before, after, own_cpu_s=0.5, wall_s=wall, cpu=1)
    assert float(got["other_cpu_s"]) == pytest.approx(0.4) and float(got["cpu_other_s"]) == pytest.approx(0.3)
    assert got["interfered"] == 1  # 30% of the wall time on the trial's own CPU
    # the same 0.3 s of others' time on the other CPU stays below that threshold
    after = quiet.read_cpu(_stat(100 + int(0.3 * tick), 200 + int(0.5 * tick)))
    got = quiet.interference(before, after, own_cpu_s=0.5, wall_s=wall, cpu=1)
    assert float(got["cpu_other_s"]) == pytest.approx(0.0) and got["interfered"] == int(0.3 > quiet.OTHER_CPUS_FRACTION)
    # the thresholds follow the bench: work on the trial's CPU counts for more than work beside it
    assert quiet.SAME_CPU_FRACTION < quiet.OTHER_CPUS_FRACTION
    just_over_same = max(quiet.SAME_CPU_FRACTION * wall, quiet.SAME_CPU_MIN_S) * 1.01
    assert quiet.is_interfered(just_over_same, wall, just_over_same)
    assert not quiet.is_interfered(just_over_same, wall, 0.0)
    # a CPU the record does not list gives no per-CPU figure, only the whole machine's
    assert quiet.interference(before, after, 0.5, wall, cpu=7)["cpu_other_s"] is None


def test_a_campaign_refuses_a_busy_machine_or_a_second_campaign(tmp_path):
    with pytest.raises(HeapcostError, match="busy .*FORCE=1"):
        with quiet.CampaignLock(tmp_path, force="0", loadavg=lambda: 3.0):
            pass
    with quiet.CampaignLock(tmp_path, force="0", loadavg=lambda: 0.1) as first:
        assert first.record["lock"] == "held" and not first.record["forced"]
        with pytest.raises(HeapcostError, match="another campaign is running"):
            with quiet.CampaignLock(tmp_path, force="0", loadavg=lambda: 0.1):
                pass
        with quiet.CampaignLock(tmp_path, force="1", loadavg=lambda: 9.0) as forced:
            assert forced.record["forced"] and forced.record["lock"].startswith("held by another")
    assert not (tmp_path / quiet.LOCK_NAME).exists()  # the holder leaves no file behind


def test_a_campaign_never_starts_while_the_null_device_is_a_file(tmp_path):
    """A regular file where /dev/null should be (left by a program that replaces its output file) is refused in
    one line that says how to restore it, forced or not, and no lock is taken; the null device itself is not."""
    fake = tmp_path / "null"
    fake.write_text("")
    assert quiet.null_device_ok(Path(os.devnull)) and not quiet.null_device_ok(fake)
    assert not quiet.null_device_ok(tmp_path / "absent")
    for force in ("0", "1"):
        with pytest.raises(HeapcostError, match=r"is not the null device .*mknod -m 666 .* c 1 3\) before measuring"):
            with quiet.CampaignLock(tmp_path, force=force, loadavg=lambda: 0.1, null_device=fake):
                pass
    assert not (tmp_path / quiet.LOCK_NAME).exists()
    with quiet.CampaignLock(tmp_path, force="0", loadavg=lambda: 0.1) as fine:
        assert fine.record["lock"] == "held"


def test_an_old_run_keeps_its_own_header_when_resumed(tmp_path):
    old = TRIAL_COLUMNS[:-4]
    path = tmp_path / "trials.csv"
    path.write_text(",".join(old) + "\n")
    with runstore.AppendTable(path, TRIAL_COLUMNS) as t:
        t.append({"run_id": "r", "seq": 0, "workload": "w", "allocator": "a", "status": "ok", "interfered": 1})
    rows = list(csv.reader(open(path)))
    assert rows[0] == old and len(rows[1]) == len(old)
    assert [f["name"] for f in table_schema("trials.csv", old)["fields"]] == old
    path.write_text("something,else\n")
    with pytest.raises(HeapcostError, match="has columns"):
        runstore.AppendTable(path, TRIAL_COLUMNS)


@pytest.mark.slow
def test_a_lockstep_campaign_writes_pairs_and_falls_back_to_trials(runs_dir):
    camp = measure.Campaign(profile="smoke", allocators="glibc", extra_allocators=f"glibc-copy={libc_path()}",
                            workloads="small-loop,perl-strcat", blocks=5, seed=4, protocol="lockstep",
                            runs_dir=runs_dir, progress=False, target_ci=0.5)
    assert [c[1] for c in camp.lockstep_cells] == ["small-loop"]
    assert {c[1] for c in camp.trial_cells} == {"perl-strcat"}
    run_dir = camp.run()
    info = json.loads((run_dir / "run.json").read_text())
    assert info["protocol_cells"] == {"lockstep": ["small-loop"], "trials": ["perl-strcat"]}
    assert info["pinning"] and info["quiet"][0]["forced"]
    pairs = list(csv.DictReader(open(run_dir / "pairs.csv")))
    assert len(pairs) >= 6 and all(p["status"] == "ok" for p in pairs)
    # the roles alternate between blocks and who goes first every second block: every combination occurs
    assert info["lockstep_roles"] == {"baseline": "glibc", "roles": "alternating"}
    assert {(p["allocator_a"], p["first"]) for p in pairs} == {(a, f) for a in ("glibc", "glibc-copy") for f in "ab"}
    assert all({p["allocator_a"], p["allocator_b"]} == {"glibc", "glibc-copy"} for p in pairs)
    import pandas as pd

    from analysis.contract.schema import oriented_pairs

    table = pd.read_csv(run_dir / "pairs.csv")
    turned = oriented_pairs(table, "glibc")
    assert set(turned["allocator_a"]) == {"glibc"} and set(turned["allocator_b"]) == {"glibc-copy"}
    swapped = table["allocator_a"] == "glibc-copy"
    assert (turned.loc[swapped, "active_a_s"] == table.loc[swapped, "active_b_s"]).all()
    assert (turned.loc[swapped, "malloc_lib_b"] == table.loc[swapped, "malloc_lib_a"]).all()
    trials = list(csv.DictReader(open(run_dir / "trials.csv")))
    assert {t["workload"] for t in trials} == {"perl-strcat"}
    assert not (runs_dir / quiet.LOCK_NAME).exists()


def test_lockstep_adds_the_baseline_it_pairs_with(runs_dir):
    camp = measure.Campaign(profile="smoke", allocators="glibc-copy", extra_allocators=f"glibc-copy={libc_path()}",
                            workloads="small-loop", runs_dir=runs_dir)
    assert camp.protocol == "lockstep"
    assert [a.id for a in camp.allocs] == ["glibc", "glibc-copy"]
    assert [c[:2] for c in camp.lockstep_cells] == [("glibc-copy", "small-loop")]
    trials_only = measure.Campaign(profile="smoke", allocators="glibc-copy", workloads="small-loop",
                                   extra_allocators=f"glibc-copy={libc_path()}", protocol="trials", runs_dir=runs_dir)
    assert [a.id for a in trials_only.allocs] == ["glibc-copy"]
    with pytest.raises(HeapcostError, match="unknown protocol"):
        measure.Campaign(profile="smoke", allocators="glibc", workloads="small-loop", protocol="duet")


def test_the_results_count_interfered_trials_and_accept_old_tables():
    import pandas as pd

    from analysis.publish.results.comparisons import interference_counts

    new = pd.DataFrame({"warmup": [0, 0, 1, 0], "interfered": [1, 0, 1, None]})
    old = pd.DataFrame({"warmup": [0, 0]})
    assert interference_counts(new, old) == {"recorded": 2, "interfered": 1, "not_recorded": 3}


def test_quick_and_full_lockstep_cells_get_twenty_pairs_unless_blocks_is_given(runs_dir):
    from analysis.harness.timing.lockstep import MIN_PAIRS_TO_STOP

    kw = dict(allocators="glibc", extra_allocators=f"glibc-copy={libc_path()}", workloads="small-loop",
              runs_dir=runs_dir)
    assert measure.Campaign(profile="quick", **kw).pair_blocks == MIN_PAIRS_TO_STOP == 20
    assert measure.Campaign(profile="quick", **kw).blocks == 5  # the trials keep the profile's blocks
    assert measure.Campaign(profile="quick", blocks=7, **kw).pair_blocks == 7
    assert measure.Campaign(profile="smoke", **kw).pair_blocks == 2
    assert measure.Campaign(profile="quick", **kw).params()["pair_blocks"] == 20
