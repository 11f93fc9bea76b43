"""The probes under real allocators (known outcomes at given sizes), brought allocators (fixture libraries),
the aggregation of trials and the CLI. The outcome rules themselves: tests/harness/security/test_probe_verdict.py."""
import csv
import json
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from analysis.harness.security import probes as P
from analysis.harness.process import launcher
from analysis.harness.allocators.catalog import load_catalog, parse_extra
from analysis.paths import REPO
from conftest import build_fixture_libs, cli_here

pytestmark = [pytest.mark.allocators, pytest.mark.slow]

JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
SCUDO = "/usr/lib/llvm-19/lib/clang/19/lib/linux/libclang_rt.scudo_standalone-x86_64.so"


def target(alloc_id):
    return P.target_for(load_catalog()[alloc_id])


def row(probe_id, alloc_id, runs=1, size=None):
    return P.probe_target(P.PROBES[probe_id], target(alloc_id), runs, size)


# ------------------------------------------------------------------ known outcomes under real allocators
def test_glibc_aborts_on_a_plain_double_free_with_its_message():
    r = row("double-free", "glibc", size=41)
    assert r["outcome"] == "caught" and r["size"] == 41
    assert "SIGABRT" in r["detail"] and "double free detected in tcache" in r["detail"]
    assert r["rate"] == 0 and r["outcomes"] == "caught=1"


@pytest.mark.skipif(not Path(JEMALLOC).exists(), reason="libjemalloc2 not installed yet: `make system-deps` installs it")
def test_jemalloc_by_default_lets_a_double_free_through():
    r = row("double-free", "jemalloc", size=41)
    assert r["outcome"] == "missed"
    assert r["rate"] == 1


@pytest.mark.skipif(not Path(SCUDO).exists(), reason="LLVM 19 scudo not installed yet: `make system-deps` installs libclang-rt-19-dev")
def test_scudo_catches_a_double_free():
    r = row("double-free", "scudo", size=41)
    assert r["outcome"] == "caught"
    assert "Scudo ERROR" in r["detail"]


def test_mimalloc2_double_free_is_missed_with_the_step():
    r = row("double-free", "mimalloc2", size=41)
    assert r["outcome"] == "missed" and "step=" in r["detail"]


def test_glibc_fastbin_dup_gets_past_the_tcache_check():
    # a, b, a after the tcache is full: glibc checks only the top of the fastbin.
    assert row("double-free-cache-full", "glibc", size=41)["outcome"] == "missed"


def test_glibc_safe_linking_stops_a_poisoned_tcache_link():
    # The raw pointer is revealed as (position >> 12) ^ target: usually unaligned, so glibc reports it;
    # about one time in sixteen aligned, and malloc faults on it. Either way the allocator stopped it.
    r = row("freelist-poison", "glibc", runs=6, size=41)
    assert r["outcome"] == "caught"
    assert "unaligned tcache chunk" in r["detail"] or "during malloc" in r["detail"]
    assert "missed" not in r.get("outcomes", "")


def test_efence_guard_page_catches_a_one_byte_overflow_at_40_bytes_but_not_at_41():
    # efence aligns blocks to 4 bytes: 41 bytes leave 3 bytes of slack before the guard page, so the
    # byte lands in padding (no neighbour to change: mitigated, but not caught).
    caught = row("overflow-1", "efence", size=40)
    assert caught["outcome"] == "caught" and "guard page" in caught["detail"]
    assert row("overflow-1", "efence", size=41)["outcome"] == "mitigated"


def installed(alloc_id):
    t = target(alloc_id)
    if t.unavailable:
        pytest.skip(f"{alloc_id}: {t.unavailable}")
    return t


@pytest.mark.parametrize("alloc_id", ["efence", "duma"])
def test_a_256_kib_overflow_under_a_guard_page_allocator_gets_a_verdict_not_na(alloc_id):
    # Neither defines malloc_usable_size: glibc's read a header before the page-aligned block, on the
    # guard page, and the setup broke (n/a). probe.h now uses the requested size: the byte hits the guard.
    t = installed(alloc_id)
    r = P.probe_target(P.PROBES["overflow-1"], t, 1, 262144)
    assert r["outcome"] == "caught" and "the misusing access itself faulted" in r["detail"], r


def test_allocators_defining_malloc_usable_size_are_still_asked_it():
    # glibc rounds 41 bytes up to 56 usable; efence (no malloc_usable_size of its own) keeps the 41 asked
    assert "usable=56" in row("overflow-1", "glibc", size=41)["detail"]
    installed("efence")
    assert "usable=41" in row("overflow-1", "efence", size=41)["detail"]
    if Path(JEMALLOC).exists():
        assert "usable=48" in row("overflow-1", "jemalloc", size=41)["detail"]


def test_efence_refusing_malloc_zero_is_caught_with_its_diagnostic_not_a_failed_start():
    installed("efence")
    r = row("malloc-zero", "efence", size=16)
    assert r["outcome"] == "caught", r
    assert "refused malloc(0)" in r["detail"] and "Allocating 0 bytes" in r["detail"]
    assert "SIGILL code=0 (SI_USER)" in r["detail"]


@pytest.mark.skipif(shutil.which("musl-gcc") is None, reason="musl-tools not installed yet: `make system-deps` installs it")
def test_musl_probes_are_relinked_and_a_uaf_read_with_live_neighbours_sees_old_bytes():
    t = target("musl")
    assert t.variant == "musl" and not t.preload
    r = P.probe_target(P.PROBES["uaf-read"], t, 1, 41)
    assert r["outcome"] == "missed" and "old_bytes=" in r["detail"]
    assert P.probe_target(P.PROBES["sized-delete"], t, 1, 41)["outcome"] == "n/a"


def test_fresh_process_rates_come_with_an_interval():
    r = row("reuse-immediate", "glibc", runs=5, size=41)
    assert r["trials"] == 5 and r["rate"] == 1
    assert r["rate_ci_low"] == pytest.approx(0.478, abs=1e-3) and r["rate_ci_high"] == 1


def test_address_entropy_is_measured_across_processes():
    r = row("address-entropy", "glibc", runs=8)
    assert r["trials"] == 8 and r["size"] is None
    assert r["bits_ci_low"] <= r["bits"] <= r["bits_ci_high"]
    assert r["bits"] > 5  # ASLR is on in this VM (randomize_va_space=2)


def test_glibc_placement_is_predictable():
    r = row("placement-entropy", "glibc", runs=2)
    assert r["outcome"] == "missed" and r["bits"] < 1 and r["rate"] > 0.9


def test_a_preload_that_did_not_take_is_not_measured_as_glibc():
    t = P.Target("fake", preload=(), expect_malloc="libjemalloc")
    r = P.probe_target(P.PROBES["double-free"], t, 1, 41)
    assert r["outcome"] == "n/a" and "wrong malloc" in r["detail"]


def test_perl_allocators_are_not_applicable_with_a_reason():
    t = target("perl-mymalloc")
    r = P.probe_target(P.PROBES["double-free"], t, 1, 41)
    assert r["outcome"] == "n/a" and "perl" in r["detail"]


@pytest.mark.skipif(not Path(JEMALLOC).exists(), reason="libjemalloc2 not installed yet: `make system-deps` installs it")
def test_a_hang_inside_the_allocator_is_found_by_the_watchdog_long_before_the_deadline():
    # jemalloc loops in malloc after a large block was freed twice 32 frees apart. The detail names who
    # ended it: the stall watchdog (a few ticks without progress), not the deadline, whatever the host's speed.
    r = P.probe_target(P.PROBES["overlap-after-double-free"], target("jemalloc"), 1, 262144)
    assert r["outcome"] == "late-crash"
    assert "hung (one allocator call stopped returning: the probe's watchdog) inside malloc" in r["detail"]
    assert "deadline" not in r["detail"]



@pytest.fixture(scope="module")
def slow_libs(tmp_path_factory):
    return build_fixture_libs(tmp_path_factory.mktemp("slow-libs"), "slow_malloc.c",
                              (("slow", []), ("stuck", ["-DSTUCK_AT=2000"])))


def test_a_slow_allocator_that_keeps_returning_is_not_hung_and_a_stuck_call_is(slow_libs):
    """sized-delete hunts over 100,000 allocations; at 20 us a malloc that takes over 2 s, longer than
    the watchdog's stall window, and the probe ends normally. A plain 1 s deadline calls it hung (the
    failure of the old 3 s alarm under duma); one malloc that never returns is a stall."""
    import time
    from dataclasses import replace

    slow = brought("slow", slow_libs["slow"])
    started = time.monotonic()
    r = P.probe_target(P.PROBES["sized-delete"], slow, 1, 41)
    assert time.monotonic() - started > 1.6
    assert r["outcome"] == "mitigated" and "made=100000" in r["detail"]
    r = P.probe_target(P.PROBES["sized-delete"], replace(slow, alarm=1), 1, 41)
    assert r["outcome"] == "late-crash" and "hung (still running at the probe's deadline)" in r["detail"]
    r = P.probe_target(P.PROBES["sized-delete"], brought("stuck", slow_libs["stuck"]), 1, 41)
    assert r["outcome"] == "late-crash" and "stopped returning" in r["detail"] and "operator-new" in r["detail"]


# ------------------------------------------------------------------ brought allocators (fixtures)
@pytest.fixture(scope="module")
def fixture_libs(tmp_path_factory):
    return build_fixture_libs(tmp_path_factory.mktemp("fixture-libs"), "reserve_4tib.c",
                              (("reserve", []), ("dies", ["-DABORT_AT_START"])))


def brought(name, path):
    return P.target_for(parse_extra(f"{name}={path}")[0])


def test_an_allocator_reserving_4_tib_at_start_is_probed(fixture_libs):
    t = brought("reserve", fixture_libs["reserve"])
    r = P.probe_target(P.PROBES["double-free"], t, 2, 41)
    assert r["outcome"] == "caught" and "double free" in r["detail"]  # glibc underneath, no "wrong malloc"
    assert P.probe_target(P.PROBES["uaf-read"], t, 1, 64)["outcome"] == "missed"
    # Under the old 1 TiB address-space cap the same library could not start: the cap was the problem.
    binary = P.probe_binary("double_free.c")
    with tempfile.TemporaryDirectory() as tmp:
        res = launcher.run([str(binary), "41"], env=P._trial_env(t, Path(tmp), Path(tmp) / "who"),
                           stderr=Path(tmp) / "err", as_limit=1 << 40, timeout=20)
        assert res.signal == signal.SIGABRT and "failed to reserve" in (Path(tmp) / "err").read_text()


def test_an_allocator_that_dies_before_main_failed_to_start(fixture_libs):
    r = P.probe_target(P.PROBES["double-free"], brought("dies", fixture_libs["dies"]), 2, 41)
    assert r["outcome"] == "allocator-failed-to-start"
    assert "refusing to start" in r["detail"] and "rate" not in r


# ------------------------------------------------------------------ aggregation
def test_summary_takes_the_majority_says_when_outcomes_differ_and_rates_every_trial():
    trials = [P.Trial("missed", "x")] * 3 + [P.Trial("mitigated", "y")] * 7
    r = P.summarize(P.PROBES["reuse-immediate"], trials)
    assert r["outcome"] == "mitigated" and r["rate"] == pytest.approx(0.3)
    assert r["rate_ci_low"] < 0.3 < r["rate_ci_high"]
    assert "outcomes differ: mitigated 7, missed 3" in r["detail"]
    assert r["outcomes"] == "mitigated=7 missed=3"
    tie = [P.Trial("missed")] + [P.Trial("caught")]
    assert P.summarize(P.PROBES["double-free"], tie)["outcome"] == "missed"
    silent = P.summarize(P.PROBES["double-free"], [P.Trial("missed", reported=True)] * 2)
    assert silent["outcomes"] == "missed=2 detected-silently=2"


def test_every_probe_file_is_registered_with_a_one_line_what():
    sources = {p.name for p in (REPO / "probes").iterdir() if p.suffix in (".c", ".cc")}
    assert sources == {p.source for p in P.PROBES.values()}
    assert all(p.what and "\n" not in p.what for p in P.PROBES.values())
    assert P.PROBES["overflow-16"].argv(41) == ["41", "16"] and P.PROBES["address-entropy"].argv(None) == []
    assert "-pthread" in P.PROBE_CFLAGS and "-ldl" in P.PROBE_LDFLAGS


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
    proc = cli_here("probe", *args, "--out", str(tmp_path / "run"))  # the end-to-end tests below use `cli`
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("heapcost: error:") and needle in lines[0]


@pytest.mark.skipif(not Path(JEMALLOC).exists(), reason="libjemalloc2 not installed yet: `make system-deps` installs it")
def test_cli_writes_probes_csv_with_extras_and_na_rows(tmp_path):
    out = tmp_path / "run"
    proc = cli("--allocators", "glibc,perl-mymalloc", "--extra-allocators", f"myjem={JEMALLOC}",
               "--probes", "double-free,reuse-immediate", "--sizes", "41,5000", "--runs", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    with open(out / "probes.csv", newline="") as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames == P.PROBE_COLUMNS
        rows = {(r["allocator"], r["probe"], r["size"]): r for r in reader}
    assert set(rows) == {(a, p, s) for a in ("glibc", "perl-mymalloc", "myjem")
                         for p in ("double-free", "reuse-immediate") for s in ("41", "5000")}
    assert rows[("glibc", "double-free", "41")]["outcome"] == "caught"
    assert "prev" in rows[("glibc", "double-free", "5000")]["detail"]  # another path at 5000 bytes
    assert rows[("myjem", "double-free", "41")]["outcome"] == "missed"
    assert rows[("perl-mymalloc", "double-free", "41")]["outcome"] == "n/a"
    assert rows[("glibc", "reuse-immediate", "41")]["trials"] == "2"
    assert json.loads((out / "run.json").read_text())["status"] == "complete"
    assert (out / "machine.json").exists()
    # A second call resumes: nothing is measured twice.
    again = cli("--allocators", "glibc,perl-mymalloc", "--extra", f"myjem={JEMALLOC}",
                "--probes", "double-free,reuse-immediate", "--sizes", "41,5000", "--runs", "2", "--out", str(out))
    assert again.returncode == 0
    assert len((out / "probes.csv").read_text().splitlines()) == 1 + 12


def test_every_probe_builds_and_ends_normally_without_a_misuse_under_glibc():
    # The probes that commit no misuse must run to the end; those that do must not fail to build.
    for probe in P.PROBES.values():
        assert P.probe_binary(probe.source).exists()
    for pid in ("reuse-immediate", "fresh-contents", "huge-request", "calloc-overflow"):
        r = row(pid, "glibc", size=41)
        assert r["outcome"] in ("missed", "mitigated"), (pid, r)


def test_the_sized_delete_hunt_is_bounded_by_bytes_at_large_sizes_only():
    large = P.probe_target(P.PROBES["sized-delete"], target("glibc"), 1, 262144)
    small = P.probe_target(P.PROBES["sized-delete"], target("glibc"), 1, 41)
    assert "claimed=1052672" in large["detail"] and "made=4096" in large["detail"]  # 4 GiB / 1 MiB
    assert "made=100000" in small["detail"]
