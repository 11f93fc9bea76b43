"""The probes under real allocators (known outcomes), the outcome classification, and the CLI."""
import csv
import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.harness import probes as P
from analysis.harness.catalog import load_catalog
from analysis.paths import REPO

pytestmark = [pytest.mark.allocators, pytest.mark.slow]

JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
SCUDO = "/usr/lib/llvm-19/lib/clang/19/lib/linux/libclang_rt.scudo_standalone-x86_64.so"


def target(alloc_id):
    return P.target_for(load_catalog()[alloc_id])


def row(probe_id, alloc_id, runs=1):
    return P.probe_target(P.PROBES[probe_id], target(alloc_id), runs)


# ------------------------------------------------------------------ known outcomes under real allocators
def test_glibc_aborts_on_a_plain_double_free():
    r = row("double-free", "glibc")
    assert r["outcome"] == "caught"
    assert "SIGABRT" in r["detail"] and "double free" in r["detail"]
    assert r["rate"] == 0


@pytest.mark.skipif(not Path(JEMALLOC).exists(), reason="libjemalloc2 not installed")
def test_jemalloc_by_default_lets_a_double_free_through():
    r = row("double-free", "jemalloc")
    assert r["outcome"] == "missed"
    assert r["rate"] == 1


@pytest.mark.skipif(not Path(SCUDO).exists(), reason="LLVM 19 scudo not installed")
def test_scudo_catches_a_double_free():
    r = row("double-free", "scudo")
    assert r["outcome"] == "caught"
    assert "Scudo ERROR" in r["detail"]


def test_glibc_fastbin_dup_gets_past_the_tcache_check():
    # a, b, a after the tcache is full: glibc checks only the top of the fastbin.
    assert row("double-free-cache-full", "glibc")["outcome"] == "missed"


def test_glibc_safe_linking_stops_a_poisoned_tcache_link():
    r = row("freelist-poison", "glibc", runs=2)
    assert r["outcome"] == "caught" and "unaligned tcache chunk" in r["detail"]


@pytest.mark.skipif(shutil.which("musl-gcc") is None, reason="musl-tools not installed")
def test_musl_probes_are_relinked_and_catch_a_double_free():
    t = target("musl")
    assert t.variant == "musl" and not t.preload
    r = P.probe_target(P.PROBES["double-free"], t, 1)
    assert r["outcome"] == "caught"
    assert P.probe_target(P.PROBES["sized-delete"], t, 1)["outcome"] == "n/a"


def test_fresh_process_rates_come_with_an_interval():
    r = row("reuse-immediate", "glibc", runs=5)
    assert r["trials"] == 5 and r["rate"] == 1
    assert r["rate_ci_low"] == pytest.approx(0.478, abs=1e-3) and r["rate_ci_high"] == 1


def test_address_entropy_is_measured_across_processes():
    r = row("address-entropy", "glibc", runs=8)
    assert r["trials"] == 8
    assert r["bits_ci_low"] <= r["bits"] <= r["bits_ci_high"]
    assert r["bits"] > 5  # ASLR is on in this VM (randomize_va_space=2)


def test_glibc_placement_is_predictable():
    r = row("placement-entropy", "glibc", runs=2)
    assert r["outcome"] == "missed" and r["bits"] < 1 and r["rate"] > 0.9


def test_a_preload_that_did_not_take_is_not_measured_as_glibc():
    t = P.Target("fake", preload=(), expect_malloc="libjemalloc")
    r = P.probe_target(P.PROBES["double-free"], t, 1)
    assert r["outcome"] == "n/a" and "wrong malloc" in r["detail"]


def test_perl_allocators_are_not_applicable_with_a_reason():
    t = target("perl-mymalloc")
    r = P.probe_target(P.PROBES["double-free"], t, 1)
    assert r["outcome"] == "n/a" and "perl" in r["detail"]


# ------------------------------------------------------------------ classification of one process
def err(*lines):
    return "".join(f"{ln}\n" for ln in lines)


def test_killed_at_the_misuse_is_caught_with_the_allocators_message():
    t = P.classify("signaled", None, signal.SIGABRT, "", err("free(): double free detected in tcache 2"))
    assert (t.outcome, t.worked) == ("caught", False)
    assert t.detail == "SIGABRT at the misuse: free(): double free detected in tcache 2"


def test_killed_after_the_misuse_before_use_is_caught():
    t = P.classify("signaled", None, signal.SIGSEGV, "", err("heapcost-probe: misuse-done"))
    assert t.outcome == "caught" and t.detail.startswith("SIGSEGV after the misuse")


def test_crash_after_the_primitive_is_a_late_crash_and_keeps_the_result():
    t = P.classify("signaled", None, signal.SIGSEGV, "result worked=1\n",
                   err("heapcost-probe: misuse-done", "heapcost-probe: used"))
    assert (t.outcome, t.worked, t.late) == ("late-crash", True, True)


def test_a_delayed_report_after_a_failed_primitive_is_caught_a_silent_crash_is_not():
    stderr = err("heapcost-probe: misuse-done", "heapcost-probe: used", "Found a corrupted memory buffer")
    t = P.classify("signaled", None, signal.SIGABRT, "result worked=0\n", stderr)
    assert t.outcome == "caught" and "reported later" in t.detail
    assert P.classify("signaled", None, signal.SIGABRT, "result worked=1\n", stderr).outcome == "late-crash"
    silent = err("heapcost-probe: misuse-done", "heapcost-probe: used")
    assert P.classify("signaled", None, signal.SIGSEGV, "result worked=0\n", silent).outcome == "late-crash"


def test_primitive_worked_or_failed():
    stderr = err("heapcost-probe: misuse-done", "heapcost-probe: used", "heapcost-probe: done")
    assert P.classify("exited", 0, None, "result worked=1 same=1\n", stderr).outcome == "missed"
    assert P.classify("exited", 0, None, "result worked=0\n", stderr).outcome == "mitigated"


def test_a_report_before_use_is_caught_but_routine_chatter_is_not():
    stderr = err("Electric Fence 2.2 Copyright (C) 1987-1999 Bruce Perens", "heapcost-probe: misuse-done",
                 "heapcost-probe: used")
    chatter = frozenset({P.normalize("Electric Fence 2.1 Copyright (C) 1987-1998 Bruce Perens")})
    assert P.classify("exited", 0, None, "result worked=1\n", stderr, chatter).outcome == "missed"
    reported = err("heapcost-probe: misuse-done", "WARNING: double free of 0x1234", "heapcost-probe: used")
    t = P.classify("exited", 0, None, "result worked=0\n", reported)
    assert t.outcome == "caught" and "double free" in t.detail


def test_setup_failure_timeout_and_spawn_failure():
    assert P.classify("exited", 99, None, "", err("heapcost-probe: setup-failed malloc(48) returned NULL")
                      ).outcome == "n/a"
    assert P.classify("timeout", None, None, "", err("heapcost-probe: misuse-done")).outcome == "late-crash"
    assert P.classify("spawn-failed", None, None, "", "", error="ENOENT").outcome == "n/a"


def test_summary_takes_the_majority_and_rates_every_trial():
    trials = [P.ProbeResult("missed", True, "x")] * 3 + [P.ProbeResult("mitigated", False, "y")] * 7
    r = P.summarize(P.PROBES["reuse-immediate"], trials)
    assert r["outcome"] == "mitigated" and r["rate"] == pytest.approx(0.3)
    assert r["rate_ci_low"] < 0.3 < r["rate_ci_high"]
    assert "missed 3" in r["detail"]
    tie = [P.ProbeResult("missed", True)] + [P.ProbeResult("caught", False)]
    assert P.summarize(P.PROBES["double-free"], tie)["outcome"] == "missed"


# ------------------------------------------------------------------ CLI
def cli(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "analysis", "probe", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("args, needle", [
    (["--probes", "double-free,nope"], "unknown probe(s) nope; valid: double-free"),
    (["--allocators", "nosuch"], "unknown allocator(s) nosuch; valid: glibc"),
    (["--runs", "0"], "--runs must be at least 1"),
    (["--extra", "broken"], "not of the form name=/path/to/lib.so"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle, tmp_path):
    proc = cli(*args, "--out", str(tmp_path / "run"))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("heapcost: error:") and needle in lines[0]


@pytest.mark.skipif(not Path(JEMALLOC).exists(), reason="libjemalloc2 not installed")
def test_cli_writes_probes_csv_with_extras_and_na_rows(tmp_path):
    out = tmp_path / "run"
    proc = cli("--allocators", "glibc,perl-mymalloc", "--extra-allocators", f"myjem={JEMALLOC}",
               "--probes", "double-free,reuse-immediate", "--runs", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    with open(out / "probes.csv", newline="") as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames == P.PROBE_COLUMNS
        rows = {(r["allocator"], r["probe"]): r for r in reader}
    assert set(rows) == {(a, p) for a in ("glibc", "perl-mymalloc", "myjem")
                         for p in ("double-free", "reuse-immediate")}
    assert rows[("glibc", "double-free")]["outcome"] == "caught"
    assert rows[("myjem", "double-free")]["outcome"] == "missed"
    assert rows[("perl-mymalloc", "double-free")]["outcome"] == "n/a"
    assert rows[("glibc", "reuse-immediate")]["trials"] == "2"
    assert json.loads((out / "run.json").read_text())["status"] == "complete"
    assert (out / "machine.json").exists()
    # A second call resumes: nothing is measured twice.
    again = cli("--allocators", "glibc,perl-mymalloc", "--extra", f"myjem={JEMALLOC}",
                "--probes", "double-free,reuse-immediate", "--runs", "2", "--out", str(out))
    assert again.returncode == 0
    assert len((out / "probes.csv").read_text().splitlines()) == 1 + 6


def test_every_probe_builds_and_ends_normally_without_a_misuse_under_glibc():
    # The probes that commit no misuse must run to the end; those that do must not fail to build.
    for probe in P.PROBES.values():
        assert P.probe_binary(probe.source).exists()
    for pid in ("reuse-immediate", "fresh-contents", "huge-request", "calloc-overflow"):
        r = row(pid, "glibc")
        assert r["outcome"] in ("missed", "mitigated"), (pid, r)
