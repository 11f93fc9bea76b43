"""The kernel build workload (linux-build): kbuild out of tree from Debian's linux source, every process under the
allocator, the process tree's peak memory sampled by its driver. The real builds run only where the source is
already in the cache: the suite never downloads the package (about 140 MB)."""
import re
import subprocess
from pathlib import Path

import pytest

from analysis.errors import HeapcostError
from analysis.harness.process import launcher
from analysis.harness.workloads import builtin as wl
from analysis.harness.process.build import build_c
from analysis.harness.process.trial import clean_env, last_checksum, preload_env, read_who, reported_metrics, wrong_malloc
from conftest import FIXTURES

W = wl.WORKLOADS["linux-build"]
JEMALLOC = Path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")


def cached_tree():
    """The linux source tree this clone or the cache already holds, or None (then nothing is fetched)."""
    try:
        return W._tree(fetch=False)
    except HeapcostError:
        pass
    from analysis.harness.allocators.debsrc import COMPLETE_MARK, sources_root
    return next((m.parent / "tree" for m in sources_root().glob(f"linux-*/{COMPLETE_MARK}")
                 if m.read_text().split()[:1] == ["linux"]), None)


needs_source = pytest.mark.skipif(cached_tree() is None, reason="Debian's linux source is not in the cache (the "
                                  "suite never fetches it: run a campaign with WORKLOADS=linux-build, or "
                                  "wl.WORKLOADS['linux-build'].prepare())")


@pytest.fixture
def fake_tree(tmp_path, monkeypatch):
    tree = tmp_path / "linux"
    for d in W.targets:
        (tree / d).mkdir(parents=True)
    (tree / "Makefile").write_text("# not a kernel\n")
    monkeypatch.setattr(wl.KernelBuildWorkload, "_tree", lambda self, fetch: tree)
    return tree


@pytest.fixture(scope="module")
def driver():
    return W.driver()


# ---- the registration and the argv ---------------------------------------------------------------

def test_registered_by_name_only_spread_over_the_trial_cpus_and_kept_off_the_seed_group():
    assert not W.default and W.kind == "program" and W.threads
    assert "linux-build" not in wl.DEFAULT_WORKLOADS and "linux-build" not in wl.WORKLOAD_GROUPS["seed-001"]
    assert wl.expand(["linux-build"]) == ["linux-build"]
    assert W.seed.startswith("001_") and "tinyconfig" in W.description and "10 ms" in W.description
    with pytest.raises(HeapcostError, match="cannot run on a built glibc"):
        from analysis.harness.process.trial import loader_argv
        loader_argv(["/some/ld.so"], ["x"], W)


def test_argv_names_the_tree_the_configuration_and_the_targets_and_the_jobs_apart(fake_tree):
    argv = W.argv(0.25, "glibc", {})
    assert argv[1:7] == ["0.25", "2", argv[3], str(fake_tree), "tinyconfig", "--"]
    assert Path(argv[0]).name.startswith("wl-linux-build-driver") and argv[3].endswith("/make")
    assert argv[7:] == ["ARCH=x86_64", "--", "kernel/", "mm/", "fs/", "lib/", "init/"]
    assert not any(a.startswith("-j") for a in argv)  # the driver adds -jJOBS to the build, not to the configuration
    assert W.record()["targets"] == list(W.targets) and W.record()["config"] == "tinyconfig"


def test_a_scale_above_one_build_and_a_missing_source_are_one_line_errors(fake_tree, tmp_path, monkeypatch, driver):
    with pytest.raises(HeapcostError, match="more than one whole build") as exc:
        W.argv(1.5, "glibc", {})
    assert "\n" not in str(exc.value)
    with pytest.raises(HeapcostError, match="variant 'musl'"):
        W.argv(0.5, "musl", {})
    monkeypatch.undo()
    monkeypatch.setattr(wl, "BUILD_DIR", tmp_path / "build")
    monkeypatch.setenv("HEAPCOST_CACHE", str(tmp_path / "cache"))
    with pytest.raises(HeapcostError, match="linux-build is not prepared") as exc:
        W.argv(0.5, "glibc", {})
    assert "\n" not in str(exc.value)
    # the driver alone: exit 2 and one line on stderr, nothing built
    for argv, why in (([str(driver), "2", "2", "/usr/bin/make", str(fake_tree), "tinyconfig", "--", "--", "init/"],
                       "more than one whole build"),
                      ([str(driver), "0.5", "2", "/usr/bin/make", str(tmp_path / "nowhere"), "tinyconfig", "--", "--",
                        "init/"], "no kernel source")):
        proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and proc.stdout == "" and why in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert not (tmp_path / "linux-out").exists()


# ---- the process tree's memory ---------------------------------------------------------------------

def test_the_tree_peak_is_the_sum_of_the_processes_not_the_largest_one(driver, tmp_path):
    """A parent and two children each touching 48 MiB and holding it together: the summed peak is at least three
    times that, while ru_maxrss sees one process."""
    tree = build_c("touch_tree", [FIXTURES / "touch_tree.c"])
    mib = 48
    result = launcher.run([str(driver), "--tree-rss", str(tree), str(mib), "500"], env={"PATH": "/usr/bin:/bin"},
                          stdout=tmp_path / "stdout", stderr=tmp_path / "stderr", timeout=120)
    assert result.status == "exited" and result.exit_code == 0, (tmp_path / "stderr").read_text()
    got = {k: int(v) for k, v in reported_metrics(tmp_path / "stdout").items()}
    assert set(got) == {"tree_peak_rss_kb", "tree_peak_anon_kb"}
    assert got["tree_peak_anon_kb"] >= 3 * mib * 1024 and got["tree_peak_rss_kb"] >= got["tree_peak_anon_kb"]
    assert got["tree_peak_anon_kb"] <= 3 * mib * 1024 + 8 * 1024  # the three programs' own few pages beside
    assert result.maxrss_kb < 2 * mib * 1024 < got["tree_peak_rss_kb"]
    assert re.search(r"\d+ samples of the process tree .* every 10 ms; sampling took [0-9.]+ s CPU",
                     (tmp_path / "stderr").read_text())


def test_the_peaks_are_trial_columns_written_whole(tmp_path):
    from analysis.contract.schema import TRIAL_COLUMNS
    assert {"tree_peak_rss_kb", "tree_peak_anon_kb"} <= set(TRIAL_COLUMNS)
    out = tmp_path / "stdout"
    out.write_text("metric tree_peak_rss_kb=12345678\nmetric tree_peak_anon_kb=7654321\nchecksum=00ff\n")
    assert reported_metrics(out) == {"tree_peak_rss_kb": "12345678", "tree_peak_anon_kb": "7654321"}


# ---- real builds (the source must be in the cache) -----------------------------------------------

def run_build(tmp_path, name, preload, targets=("init/",)):
    """The workload's own argv with a small target list, run as a trial runs it: the clean environment, mallocwho
    and the allocator preloaded, an empty scratch folder."""
    scratch = tmp_path / name
    scratch.mkdir()
    argv = W.argv(1.0, "glibc", {})
    argv = [*argv[:argv.index("--", argv.index("--") + 1) + 1], *targets]
    env = {**clean_env(scratch), **W.env(1.0), **preload_env(preload, scratch / "who")}
    result = launcher.run(argv, env=env, stdout=scratch / "stdout", stderr=scratch / "stderr", cwd=scratch,
                          timeout=600)
    assert result.status == "exited" and result.exit_code == 0, (scratch / "stderr").read_text()[-2000:]
    assert sorted(p.name for p in scratch.iterdir()) == ["stderr", "stdout", "who"]  # linux-out removed
    return result, scratch


@needs_source
@pytest.mark.slow
@pytest.mark.allocators
def test_the_build_checksum_depends_on_the_targets_not_on_the_allocator_and_the_tree_stays_untouched(tmp_path):
    if not JEMALLOC.is_file():
        pytest.fail("libjemalloc2 is not installed (make system-deps)")
    W.prepare()  # the tree is cached: this builds the driver and checks the tools, it fetches nothing
    tree = W._tree(fetch=False)
    before = sorted(p.name for p in tree.iterdir())
    _, glibc = run_build(tmp_path, "glibc", [])
    result, jemalloc = run_build(tmp_path, "jemalloc", [str(JEMALLOC)])
    assert last_checksum(glibc / "stdout") == last_checksum(jemalloc / "stdout") is not None
    # every process of the build started under the allocator: hundreds of them, the compiler's among them
    procs = read_who(jemalloc / "who")
    assert len(procs) >= 300 and wrong_malloc(procs, "libjemalloc") == ""
    programs = {line.split("\t")[1].rsplit("/", 1)[-1] for line in (jemalloc / "who").read_text().splitlines()}
    assert {"make", "cc1", "fixdep", "conf", "objtool"} <= programs and any(p.endswith("-as") for p in programs)
    metrics = {k: int(v) for k, v in reported_metrics(jemalloc / "stdout").items()}
    assert metrics["tree_peak_rss_kb"] >= metrics["tree_peak_anon_kb"] > 0
    assert metrics["tree_peak_rss_kb"] > result.maxrss_kb  # the sum over the tree, not its largest process
    assert sorted(p.name for p in tree.iterdir()) == before
    assert not (tree / ".config").exists() and not (tree / "include" / "generated").exists()
