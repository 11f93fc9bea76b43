import os
import signal

import pytest

from analysis.harness.process import launcher
from analysis.harness.process.build import build_c
from conftest import FIXTURES

ENV = {"PATH": "/usr/bin:/bin"}


@pytest.fixture(scope="module")
def touch_mb():
    return build_c("touch_mb", [FIXTURES / "touch_mb.c"])


def test_child_rss_is_the_childs_own_even_from_a_big_parent(touch_mb):
    ballast = bytearray(400 << 20)  # the parent touches 400 MiB: a fork from here would carry that
    ballast[::4096] = b"\1" * len(ballast[::4096])
    r = launcher.run([touch_mb, "64"], env=ENV)
    assert r.status == "exited" and r.exit_code == 0
    assert 64 * 1024 <= r.maxrss_kb <= 64 * 1024 + 4 * 1024, r.maxrss_kb
    small = launcher.run([touch_mb, "8"], env=ENV)
    assert 8 * 1024 <= small.maxrss_kb <= 12 * 1024, small.maxrss_kb
    del ballast


def test_python_fork_would_report_the_parents_rss(touch_mb):
    """The trap the launcher exists for: os.wait4 after a fork from this process."""
    ballast = bytearray(300 << 20)
    ballast[::4096] = b"\1" * len(ballast[::4096])
    pid = os.fork()
    if pid == 0:
        os.execv(str(touch_mb), [str(touch_mb), "8"])
    _, _, ru = os.wait4(pid, 0)
    assert ru.ru_maxrss > 250 * 1024
    del ballast


def test_times_exit_codes_signals_and_timeouts():
    r = launcher.run(["/bin/sh", "-c", "exit 3"], env=ENV)
    assert (r.status, r.exit_code) == ("exited", 3)
    r = launcher.run(["/bin/sh", "-c", "kill -SEGV $$"], env=ENV)
    assert (r.status, r.signal) == ("signaled", signal.SIGSEGV)
    # killed at its timeout: long before the program's own end, by a margin no busy host uses up
    r = launcher.run(["/bin/sleep", "60"], env=ENV, timeout=0.3)
    assert r.status == "timeout" and 0.25 < r.wall_s < 30
    r = launcher.run(["/no/such/program"], env=ENV)
    assert r.status == "spawn-failed" and "No such file" in r.error
    r = launcher.run(["/bin/sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"], env=ENV)
    assert r.user_s > 0 and r.wall_s >= r.user_s * 0.5


def test_child_gets_exactly_the_environment_given(tmp_path):
    out = tmp_path / "env"
    launcher.run(["/usr/bin/env"], env={"PATH": "/usr/bin:/bin", "A": "1"}, stdout=out)
    assert sorted(out.read_text().split()) == ["A=1", "PATH=/usr/bin:/bin"]


def test_clock_probe_is_timed_around_the_trial():
    iters = launcher.calibrate(0.002)
    r = launcher.run(["/bin/true"], env=ENV, probe_iters=iters)
    assert 0.0005 < r.probe_before_s < 0.05 and 0.0005 < r.probe_after_s < 0.05
    assert r.clock_probe_s == pytest.approx((r.probe_before_s + r.probe_after_s) / 2)


def test_no_core_files_and_limits(tmp_path):
    r = launcher.run(["/bin/sh", "-c", "ulimit -c"], env=ENV, stdout=tmp_path / "o", cpu_limit=5)
    assert (tmp_path / "o").read_text().strip() == "0"
    r = launcher.run(["/bin/sh", "-c", "while :; do :; done"], env=ENV, cpu_limit=1, timeout=20)
    assert r.status == "signaled" and r.signal in (signal.SIGXCPU, signal.SIGKILL)


def test_the_server_survives_a_malformed_request():
    import subprocess

    proc = subprocess.Popen([str(launcher.launcher_path()), "--serve"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    try:
        proc.stdin.write(b"--no-such-flag\0x\0\0")
        proc.stdin.flush()
        assert b"malformed request" in proc.stdout.readline()
        proc.stdin.write(b"--clear-env\0--env\0PATH=/usr/bin:/bin\0--\0true\0\0")
        proc.stdin.flush()
        assert b'"status": "exited", "exit_code": 0' in proc.stdout.readline()
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)
    assert proc.returncode == 0
