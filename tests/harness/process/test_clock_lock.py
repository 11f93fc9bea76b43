"""ClockLock (analysis/harness/process/clock_lock.py) against fake sysfs trees: what it locks, and that every way out
(normal, exception, SIGINT, SIGTERM, SIGHUP, a hard crash followed by the next run) puts the tree back byte
for byte. Signals go to child processes, so the test process keeps its own handlers."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import REPO

from analysis.harness.process.clock_lock import ClockLock, Terminated

CPU = "devices/system/cpu"


def fake_sysfs(root, cpus=2, amd_boost=False, intel_pstate=False):
    """A sysfs tree as the kernel lays it out; values end in a newline, as the kernel's do."""
    files = {}
    for n in range(cpus):
        d = f"{CPU}/cpu{n}/cpufreq"
        files.update({f"{d}/scaling_governor": "powersave\n", f"{d}/scaling_min_freq": "800000\n",
                      f"{d}/scaling_max_freq": "3500000\n", f"{d}/cpuinfo_min_freq": "800000\n",
                      f"{d}/cpuinfo_max_freq": "3500000\n", f"{d}/scaling_driver": "acpi-cpufreq\n"})
    if amd_boost:
        files[f"{CPU}/cpufreq/boost"] = "1\n"
    if intel_pstate:
        files.update({f"{CPU}/intel_pstate/no_turbo": "0\n", f"{CPU}/intel_pstate/min_perf_pct": "22\n",
                      f"{CPU}/intel_pstate/max_perf_pct": "100\n", f"{CPU}/intel_pstate/status": "active\n"})
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return snapshot(root)


def snapshot(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def read(root, rel):
    return (root / rel).read_text().strip()


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "sys"
    root.mkdir()
    return root


def test_amd_boost_governor_and_frequencies_are_locked_and_restored(tree, tmp_path):
    before = fake_sysfs(tree, amd_boost=True)
    state = tmp_path / "state.json"
    with ClockLock(True, tree, state) as lock:
        assert lock.record()["locked"], lock.outcome
        assert read(tree, f"{CPU}/cpufreq/boost") == "0"
        for n in (0, 1):
            assert read(tree, f"{CPU}/cpu{n}/cpufreq/scaling_governor") == "performance"
            assert read(tree, f"{CPU}/cpu{n}/cpufreq/scaling_min_freq") == "3500000"
            assert read(tree, f"{CPU}/cpu{n}/cpufreq/scaling_max_freq") == "3500000"
        assert state.exists()  # saved before the first write, for a crash
        assert "boost off" in lock.outcome and "2 CPU(s)" in lock.outcome
    assert snapshot(tree) == before
    assert not state.exists()
    assert lock.record()["settings"][f"{CPU}/cpu1/cpufreq/scaling_min_freq"] == "3500000"


def test_intel_pstate_turbo_and_performance_percent_are_locked_and_restored(tree, tmp_path):
    before = fake_sysfs(tree, intel_pstate=True)
    with ClockLock(True, tree, tmp_path / "state.json") as lock:
        assert read(tree, f"{CPU}/intel_pstate/no_turbo") == "1"
        assert read(tree, f"{CPU}/intel_pstate/min_perf_pct") == "100"
        assert read(tree, f"{CPU}/intel_pstate/max_perf_pct") == "100"
        assert "no_turbo=1" in lock.outcome
    assert snapshot(tree) == before


def test_an_exception_in_the_harness_restores_the_tree(tree, tmp_path):
    before = fake_sysfs(tree, amd_boost=True, intel_pstate=True)
    with pytest.raises(RuntimeError):
        with ClockLock(True, tree, tmp_path / "state.json"):
            assert read(tree, f"{CPU}/cpu0/cpufreq/scaling_governor") == "performance"
            raise RuntimeError("the harness failed")
    assert snapshot(tree) == before


def test_a_failure_half_way_undoes_what_was_written(tree, tmp_path):
    before = fake_sysfs(tree, amd_boost=True)
    (tree / f"{CPU}/cpu1/cpufreq/scaling_min_freq").unlink()
    (tree / f"{CPU}/cpu1/cpufreq/scaling_min_freq").mkdir()   # unreadable as a file
    before = snapshot(tree)
    with ClockLock(True, tree, tmp_path / "state.json") as lock:
        assert lock.outcome.startswith("could not lock") and "cpu1/cpufreq/scaling_min_freq" in lock.outcome
        assert not lock.record()["locked"] and lock.record()["settings"] == {}
        assert snapshot(tree) == before
    assert not (tmp_path / "state.json").exists()


def test_a_machine_without_cpufreq_says_why_and_touches_nothing(tree, tmp_path):
    (tree / CPU).mkdir(parents=True)
    with ClockLock(True, tree, tmp_path / "state.json") as lock:
        assert lock.outcome == "could not lock: cpufreq is not exposed on this machine (e.g. a VM)"
    assert snapshot(tree) == {} and not (tmp_path / "state.json").exists()
    with ClockLock(False, tree, tmp_path / "state.json") as lock:
        assert lock.record() == {"requested": False, "locked": False, "outcome": "not requested",
                                 "settings": {}, "crash_recovery": None}


CHILD = textwrap.dedent("""
    import sys, time
    from analysis.harness.process.clock_lock import ClockLock
    with ClockLock(True, sys.argv[1], sys.argv[2]) as lock:
        print(lock.outcome, flush=True)
        if sys.argv[3] == "crash":
            import os, signal
            os.kill(os.getpid(), signal.SIGKILL)
        # short sleeps: a signal that lands between the interpreter's last check and the start of a sleep's
        # system call is handled only when that sleep ends
        for _ in range(1200):
            time.sleep(0.1)
""")


def _plain_signals():
    """The child starts as from a terminal: no signal blocked or ignored, whatever the test runner inherited
    (a runner started detached, under nohup or from a background job, can pass SIGHUP or SIGINT on ignored)."""
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def locked_child(tree, state, how="wait"):
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tree), str(state), how], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO)), preexec_fn=_plain_signals)
    line = proc.stdout.readline()
    return proc, line


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_restores_the_tree_byte_for_byte(tree, tmp_path, sig):
    before = fake_sysfs(tree, amd_boost=True, intel_pstate=True)
    state = tmp_path / "state.json"
    proc, line = locked_child(tree, state)
    assert line.startswith("locked"), line + proc.stderr.read()
    assert read(tree, f"{CPU}/cpu0/cpufreq/scaling_governor") == "performance"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert ("KeyboardInterrupt" in err) if sig == signal.SIGINT else (f"terminated by signal {sig.name}" in err)
    assert snapshot(tree) == before
    assert not state.exists()


def test_after_a_hard_crash_the_next_run_restores_from_the_state_file(tree, tmp_path):
    before = fake_sysfs(tree, amd_boost=True, intel_pstate=True)
    state = tmp_path / "state.json"
    proc, line = locked_child(tree, state, "crash")
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL and line.startswith("locked")
    assert snapshot(tree) != before and state.exists()
    with ClockLock(False, tree, state) as lock:   # the next run, even one that does not lock
        assert lock.crash_recovery.startswith("restored 10 setting(s) a crashed run")
        assert snapshot(tree) == before
    assert not state.exists()


def test_a_lock_held_by_a_live_process_is_left_alone(tree, tmp_path):
    fake_sysfs(tree, amd_boost=True)
    state = tmp_path / "state.json"
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        state.write_text(json.dumps({"pid": holder.pid, "sysfs_root": str(tree),
                                     "saved": [[f"{CPU}/cpufreq/boost", "1\n"]]}))
        (tree / f"{CPU}/cpufreq/boost").write_text("0")
        held = snapshot(tree)
        with ClockLock(True, tree, state) as lock:
            assert lock.outcome == f"could not lock: another process (pid {holder.pid}) holds the clock lock"
        assert snapshot(tree) == held and state.exists()
    finally:
        holder.kill()
        holder.wait()


def test_terminated_unwinds_like_ctrl_c():
    assert issubclass(Terminated, KeyboardInterrupt)
    assert str(Terminated(signal.SIGTERM)) == "terminated by signal SIGTERM"


def test_an_interrupted_campaign_leaves_the_tree_as_it_found_it(tree, tmp_path, runs_dir):
    before = fake_sysfs(tree, amd_boost=True, intel_pstate=True)
    state = tmp_path / "state.json"
    env = dict(os.environ, HEAPCOST_SYSFS_ROOT=str(tree), HEAPCOST_CLOCK_STATE=str(state))
    args = ["measure", "--profile", "smoke", "--allocators", "glibc", "--workloads", "small-loop", "--blocks",
            "400", "--seed", "3", "--no-progress", "--protocol", "trials", "--lock-clock", "1"]
    proc = subprocess.Popen([sys.executable, "-m", "analysis", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    trials = []
    while time.monotonic() < deadline and proc.poll() is None:
        trials = list(runs_dir.glob("*/trials.csv"))
        if trials and len(trials[0].read_text().splitlines()) > 3:
            break
        time.sleep(0.05)
    assert trials and proc.poll() is None, "the campaign never wrote trials"
    assert read(tree, f"{CPU}/cpu0/cpufreq/scaling_governor") == "performance"
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert snapshot(tree) == before and not state.exists()
    run_dir = trials[0].parent
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"
    described = json.loads((run_dir / "machine.json").read_text())
    [session] = described["clock_lock"]
    assert session["locked"] and session["settings"][f"{CPU}/intel_pstate/no_turbo"] == "1"
    assert described["host"]["fingerprint"] and described["cpu"]["nominal_mhz"] == 3500.0


def test_an_interruption_while_locking_undoes_what_was_written(tree, tmp_path, monkeypatch):
    before = fake_sysfs(tree, amd_boost=True, intel_pstate=True)
    state = tmp_path / "state.json"
    lock = ClockLock(True, tree, state)
    real_set = lock._set
    calls = []

    def interrupted_set(rel, value):
        calls.append(rel)
        if len(calls) == 4:
            raise Terminated(signal.SIGTERM)
        real_set(rel, value)

    monkeypatch.setattr(lock, "_set", interrupted_set)
    with pytest.raises(Terminated):
        with lock:
            pass
    assert snapshot(tree) == before and not state.exists()
    assert signal.getsignal(signal.SIGTERM) != lock._on_signal
