import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analysis.harness.allocators import catalog
from analysis.harness.process import blocks
from analysis.harness.timing import measure
from analysis.harness.process import trial
from analysis.contract import runstore
from analysis.errors import HeapcostError
from analysis.harness.workloads.builtin import WORKLOADS
from conftest import REPO, cli

pytestmark = [pytest.mark.allocators, pytest.mark.slow]

JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"


def read_rows(run_dir):
    with open(Path(run_dir) / "trials.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def one_trial(alloc, workload="small-loop", scale=0.01, expected=None):
    resolved = catalog.resolve(alloc)
    t = trial.SpeedTrial(resolved, WORKLOADS[workload], scale, env_target=2000, timeout_s=60)
    return trial.run_one(t, expected, probe_iters=0, pad=0)


def test_trial_records_the_library_malloc_resolved_to():
    row = one_trial(catalog.load_catalog()["jemalloc"])
    assert row["status"] == "ok", row
    assert row["malloc_lib"] == JEMALLOC


def test_a_library_that_did_not_preload_is_caught(tmp_path):
    """ld.so only warns about a preload it cannot load, and the program runs on glibc's malloc."""
    broken = tmp_path / "libbroken.so"
    broken.write_text("not an ELF file\n")
    alloc = catalog.Allocator(id="broken", family="x", description="", origin={"kind": "path"},
                              preload=(str(broken),), expect_malloc=str(broken))
    row = one_trial(alloc)
    assert row["status"] == "wrong-malloc"
    assert "cannot be preloaded" in row["reason"] or "libc.so.6" in row["reason"]


def test_a_library_without_malloc_is_caught():
    alloc = catalog.Allocator(id="libm", family="x", description="", origin={"kind": "path"},
                              preload=("/lib/x86_64-linux-gnu/libm.so.6",), expect_malloc="libm.so.6")
    row = one_trial(alloc)
    assert row["status"] == "wrong-malloc" and "libc.so.6" in row["reason"]
    with pytest.raises(HeapcostError, match="cannot be preloaded"):
        trial.check_preloadable(catalog.resolve(alloc))


def test_a_wrong_checksum_is_a_failed_trial_not_ok():
    row = one_trial(catalog.load_catalog()["glibc"], expected="0000")
    assert row["status"] == "bad-checksum"


def test_crash_is_recorded_with_its_signal():
    alloc = catalog.load_catalog()["glibc"]
    t = trial.SpeedTrial(catalog.resolve(alloc), WORKLOADS["small-loop"], 0.01, env_target=2000, timeout_s=10)
    t.argv = ["/bin/sh", "-c", "kill -SEGV $$"]
    row = trial.run_one(t, None, 0, 0)
    assert row["status"] == "crashed" and "SIGSEGV" in row["reason"]


def test_environment_is_padded_to_one_size_for_every_allocator(tmp_path):
    cat = catalog.load_catalog()
    trials = [trial.SpeedTrial(catalog.resolve(cat[a]), WORKLOADS["small-loop"], 0.01, env_target=3000)
              for a in ("glibc", "jemalloc-junk-free", "scudo-quarantine", "glibc-perturb")]
    sizes = {sum(len(k) + len(v) + 2 for k, v in t.env(tmp_path, 0).items()) for t in trials}
    assert len(sizes) == 1
    offset = {sum(len(k) + len(v) + 2 for k, v in t.env(tmp_path, 123).items()) for t in trials}
    assert offset == {sizes.pop() + 123}


def test_plan_is_randomized_complete_blocks():
    pairs = [(a, w, 1.0) for a in "abc" for w in "xy"]
    p = blocks.plan(pairs, 4, 1, seed=7)
    assert len(p) == 24
    for b in range(4):
        block = [(a, w, f) for bb, _, a, w, f in p if bb == b]
        assert sorted(block) == sorted(pairs)
    assert [x for x in p if x[1]] == [x for x in p if x[0] == 0]
    assert p == blocks.plan(pairs, 4, 1, seed=7) and p != blocks.plan(pairs, 4, 1, seed=8)


def test_static_musl_binaries_are_recognised():
    WORKLOADS["small-loop"].prepare("musl")
    musl_bin = WORKLOADS["small-loop"].argv(0.01, "musl", {})[0]
    assert trial.is_static_elf(musl_bin)
    assert not trial.is_static_elf("/bin/true")


def test_campaign_resumes_after_sigkill_without_duplicating_a_seq(runs_dir):
    args = ["measure", "--profile", "smoke", "--allocators", "glibc,jemalloc", "--workloads",
            "small-loop,pow2-churn", "--blocks", "8", "--seed", "11", "--no-progress", "--protocol", "trials"]
    proc = subprocess.Popen([sys.executable, "-m", "analysis", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    trials = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = list(runs_dir.glob("*/trials.csv"))
        if found and len(found[0].read_text().splitlines()) > 8:
            trials = found[0]
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert trials is not None, "the campaign never wrote trials"
    killed_at = len(read_rows(trials.parent))
    info = json.loads((trials.parent / "run.json").read_text())
    assert info["status"] == "running" and killed_at < 36

    done = cli(*args)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip().splitlines()[-1]) == trials.parent  # the same run, resumed
    rows = read_rows(trials.parent)
    seqs = [int(r["seq"]) for r in rows]
    assert sorted(seqs) == list(range(36))  # (1 warm-up + 8 blocks) x 4 pairs, each seq once
    assert all(r["status"] == "ok" for r in rows)
    info = json.loads((trials.parent / "run.json").read_text())
    assert info["status"] == "complete" and info["resumed_utc"]
    assert len(list(runs_dir.iterdir())) == 1


def test_a_partial_last_line_is_cut_on_reopen(tmp_path):
    path = tmp_path / "t.csv"
    with runstore.AppendTable(path, ["a", "b"]) as t:
        t.append({"a": 1, "b": 2})
    with open(path, "a") as fh:
        fh.write("3,")  # killed mid-write
    with runstore.AppendTable(path, ["a", "b"]) as t:
        assert t.rows() == [{"a": "1", "b": "2"}]
        t.append({"a": 5, "b": 6})
    assert path.read_text().splitlines() == ["a,b", "1,2", "5,6"]


@pytest.mark.parametrize("args, message", [
    (["--allocators", "glibc,nosuch"], "unknown allocator(s) nosuch; valid: glibc"),
    (["--workloads", "nosuch"], "unknown workload(s) nosuch; valid:"),
    (["--profile", "huge"], "unknown profile 'huge'; valid: smoke, quick, full"),
    (["--mode", "perf"], "unknown mode 'perf'"),
    (["--target-ci", "-1"], "TARGET_CI must be a positive number"),
    (["--budget-min", "soon"], "BUDGET_MIN must be a positive number"),
    (["--extra-allocators", "mine=/no/such/lib.so"], "library /no/such/lib.so does not exist"),
    (["--extra-allocators", "justapath.so"], "is not of the form name=/path/to/lib.so"),
    (["--extra-allocators", "m=/lib/x86_64-linux-gnu/libm.so.6"], "cannot be preloaded as malloc"),
])
def test_bad_input_is_one_line_and_leaves_no_run(runs_dir, args, message):
    r = cli("measure", "--profile", "smoke", "--workloads", "small-loop", "--no-progress", *args)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert message in r.stderr
    assert list(runs_dir.iterdir()) == []


def test_bad_notebook_parameters_are_one_line(runs_dir):
    r = cli("notebook", "measure", "PROFILE=huge")
    assert r.returncode == 2 and "unknown profile" in r.stderr and "Traceback" not in r.stderr
    r = cli("notebook", "measure", "NOPE=1")
    assert r.returncode == 2 and "unknown parameter 'NOPE'" in r.stderr
    assert list(runs_dir.iterdir()) == []


def test_bring_your_own_allocator_is_measured(runs_dir):
    """A user's library given by path (how hardened_malloc or omalloc would come in)."""
    r = cli("measure", "--profile", "smoke", "--allocators", "glibc", "--workloads", "small-loop",
            "--blocks", "1", "--no-progress", "--extra-allocators", f"mine={JEMALLOC}")
    assert r.returncode == 0, r.stderr
    run_dir = Path(r.stdout.strip().splitlines()[-1])
    pairs = list(csv.DictReader(open(run_dir / "pairs.csv")))  # the default protocol: lockstep pairs
    mine = [p for p in pairs if p["allocator_b"] == "mine"]
    assert mine and all(p["status"] == "ok" and p["malloc_lib_b"] == JEMALLOC for p in mine)
    r = cli("measure", "--profile", "smoke", "--allocators", "glibc", "--workloads", "small-loop",
            "--blocks", "1", "--no-progress", "--extra-allocators", f"mine={JEMALLOC}", "--protocol", "trials")
    assert r.returncode == 0, r.stderr
    rows = read_rows(r.stdout.strip().splitlines()[-1])
    mine = [row for row in rows if row["allocator"] == "mine"]
    assert mine and all(row["status"] == "ok" and row["malloc_lib"] == JEMALLOC for row in mine)


def test_python_binary_with_a_canonical_plt_entry_reports_the_preloaded_malloc():
    """/usr/bin/python3 takes malloc's address: plain dlsym would name the executable itself."""
    row = one_trial(catalog.load_catalog()["jemalloc"], workload="python", scale=0.01)
    assert row["status"] == "ok", row
    assert row["malloc_lib"] == JEMALLOC


def test_perl_builds_are_told_apart_by_their_own_malloc():
    cat = catalog.load_catalog()
    for aid, marker in (("perl-mymalloc", True), ("perl-sysmalloc", False)):
        if not catalog.resolve(cat[aid]).available:
            pytest.skip(f"{aid} is not built on this machine (make allocators builds it)")
        row = one_trial(cat[aid], workload="perl-strcat", scale=0.005)
        assert row["status"] == "ok", row
        assert row["malloc_lib"].endswith("+ perl malloc") is marker


def test_a_pair_that_timed_out_in_the_warmup_is_skipped_afterwards():
    rows = [{"allocator": "a", "workload": "w", "warmup": "1", "status": "timeout", "seq": "4", "scale": "0.5"},
            {"allocator": "a", "workload": "v", "warmup": "1", "status": "ok", "seq": "5", "scale": "0.5"},
            {"allocator": "b", "workload": "w", "warmup": "0", "status": "timeout", "seq": "9", "scale": "0.5"}]
    assert measure._timed_out_in_warmup(rows, "a", "w", 0.5) == 4
    assert measure._timed_out_in_warmup(rows, "a", "w", 1.0) is None  # another scale is another cell
    assert measure._timed_out_in_warmup(rows, "a", "v", 0.5) is None
    assert measure._timed_out_in_warmup(rows, "b", "w", 0.5) is None  # a measured timeout does not condemn a pair


def test_reduced_scale_allocators_get_a_baseline_at_their_scale():
    c = measure.Campaign(profile="smoke", allocators="glibc,efence,jemalloc", workloads="small-loop",
                         progress=False)
    efence = catalog.load_catalog()["efence"].scale
    assert ("glibc", "small-loop", efence) in c.pairs and ("glibc", "small-loop", 1.0) in c.pairs
    assert ("jemalloc", "small-loop", efence) not in c.pairs


def test_adaptive_mode_extends_only_wide_cells_and_their_baseline():
    import random as rnd

    rng = rnd.Random(3)
    rows = []
    for alloc, spread, n in (("glibc", 0.001, 12), ("tight", 0.001, 12), ("noisy", 0.3, 12), ("few", 0.001, 2)):
        for _ in range(n):
            rows.append({"allocator": alloc, "workload": "w", "scale": "1", "status": "ok", "warmup": "0",
                         "wall_s": str(1.0 * (1 + rng.uniform(-spread, spread)))})
    cells = [(a, "w", 1.0) for a in ("glibc", "tight", "noisy", "few")]
    wide = measure.pairs_wider_than(rows, 0.01, cells, lambda f: f)
    assert wide == [("glibc", "w", 1.0), ("noisy", "w", 1.0), ("few", "w", 1.0)]
    assert measure.pairs_wider_than(rows, 0.01, cells[:2], lambda f: f) == []
