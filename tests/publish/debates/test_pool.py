"""Each debate's runs (direct pairs of the contested pair where a run has them, superseded runs shown
but never pooled), their hosts and builds, and A/A across runs."""
import json

import pandas as pd
import pytest

from analysis.paths import REPO
from analysis.stats.simulate import simulate_pairs

# ------------------------------------------------------------------------------ runs, hosts and builds


def test_each_published_machine_kind_is_one_host_kind_and_each_processor_one_processor():
    """A machine kind is a CPU model, its nominal frequency and a kernel (the published runs record no more
    that differs between them); a processor kind leaves the kernel out."""
    from analysis.publish.debates.pool import _host_kinds, _processors

    runs = REPO / "data" / "runs"
    machines = {p.parent.name: json.loads(p.read_text()) for p in runs.glob("*time*/machine.json")}
    expected = {(m["cpu"]["model"], round(float(m["cpu"]["cpuinfo_mhz"][0]), -1), m["kernel"]) for m in machines.values()}
    kinds, processors = _host_kinds(runs), _processors(runs)
    assert len({kinds[r] for r in machines}) == len(expected) >= 3, kinds
    # a processor kind: model name and frequency, and family/model number/stepping where a run recorded them;
    # a run that did not joins the one kind of its name and frequency, and keeps its own label where there
    # are several (the published AMD EPYC 2600 MHz runs of the v657 kernel, beside 26/2/1 and 25/17/1)
    def name(m):
        return m["cpu"]["model"], round(float(m["cpu"]["cpuinfo_mhz"][0]), -1)
    ids = {r: tuple(m["cpu"].get(k) for k in ("family", "model_number", "stepping")) for r, m in machines.items()}
    full = {(name(machines[r]), i) for r, i in ids.items() if None not in i}
    partial = {name(machines[r]) for r, i in ids.items() if None in i}
    kept_apart = {n for n in partial if sum(f == n for f, _ in full) != 1}
    assert len({processors[r] for r in machines}) == len(full) + len(kept_apart), processors
    assert kept_apart == {("AMD EPYC", 2600.0)}
    assert {processors[r] for r in machines if name(machines[r]) == ("AMD EPYC", 2450.0)} == {
        "AMD EPYC 2450 MHz (25/1/1)"}  # the v595 runs joined the one 2450 MHz kind recorded in full


def test_a_build_is_named_by_its_library_not_by_its_allocator():
    from analysis.publish.debates.pool import build_of

    info = {"allocators": {"x": {"libraries": [{"sha256": "ab" * 32}]}, "sys": {"origin": {"package": "libc6"}}},
            "params": {"brought_libraries": {"y": {"library_sha256": "cd" * 32}}}}
    assert build_of(info, "x") == "ab" * 6 and build_of(info, "y") == "cd" * 6 and build_of(info, "sys") == "libc6"


def _lockstep(data, run_id, truth_with, truth_without, direct=None, seed=1):
    """A lockstep run: both sides paired with glibc, and (direct) with each other."""
    from simulated_dataset import add_lockstep_run

    run = add_lockstep_run(data, run_id, {"jemalloc-junk-free": truth_with, "jemalloc": truth_without},
                           seed=seed, n_pairs=40)
    if direct is not None:
        pairs = pd.read_csv(run / "pairs.csv")
        more = simulate_pairs(direct, 40, seed + 50, workload="dom-churn", baseline="jemalloc",
                              other="jemalloc-junk-free").assign(run_id=run_id)
        more["maxrss_a_kb"] = more["maxrss_b_kb"] = 50_000
        pd.concat([pairs, more], ignore_index=True).to_csv(run / "pairs.csv", index=False)
    return run


@pytest.mark.slow  # end to end, over 2.5 s on a 2-core host: in make test, not test-fast
def test_direct_pairs_answer_a_run_that_has_them_and_superseded_runs_are_never_pooled(tmp_path):
    from analysis.publish.debates import pool
    from analysis.publish.results import comparisons
    from simulated_dataset import TRUE_RATIOS, make_dataset

    data = make_dataset(tmp_path, probed=TRUE_RATIOS)  # probe rows of the measured allocators
    # through the baseline the pair reads 1.10; its direct pairs say 1.02: the direct ones must answer
    _lockstep(data, "20990106T000000Z-time-quick", 0.99, 0.90, direct=1.02, seed=2)
    _lockstep(data, "20990107T000000Z-time-quick", 0.99, 0.90, seed=3)
    _lockstep(data, "20261130T134138Z-time-quick", 1.50, 0.90, seed=4)  # a discarded design's run
    res = comparisons.compute(data)
    runs = pool.run_estimates(res.cells["wall_s"], data / "runs", "002", "jemalloc-junk-free", "jemalloc",
                                     "dom-churn").set_index("run_id")
    assert runs.loc["20990106T000000Z-time-quick", "method"] == "direct pairs"
    assert runs.loc["20990106T000000Z-time-quick", "ci_low"] < 1.02 < runs.loc["20990106T000000Z-time-quick", "ci_high"]
    assert runs.loc["20990107T000000Z-time-quick", "method"] == "through the baseline"
    assert runs.loc["20990107T000000Z-time-quick", "ci_low"] < 1.1 < runs.loc["20990107T000000Z-time-quick", "ci_high"]
    assert runs.loc["20261130T134138Z-time-quick", "superseded"]
    pooled = pool.pooled(runs.reset_index(), 0.025, "cost_at_most")
    assert pooled["n_runs"] == 2  # the superseded run is shown, not pooled
    assert 1.01 < pooled["pooled_ratio"] < 1.11  # between the two current runs, untouched by the 1.67


@pytest.mark.slow  # end to end, over 2.5 s on a 2-core host: in make test, not test-fast
def test_aa_copies_pool_across_runs_and_a_biased_copy_is_caught(tmp_path):
    from analysis.publish.debates import pool
    from analysis.publish.results import comparisons
    from simulated_dataset import TRUE_RATIOS, add_time_run, make_dataset

    data = make_dataset(tmp_path, probed=TRUE_RATIOS)  # probe rows of the measured allocators
    for i in range(3):
        run = add_time_run(data, f"2099011{i}T000000Z-time-quick", {"glibc": 1.0, "glibc-copy": 1.0, "glibc-bias": 1.08},
                           seed=30 + i, n_blocks=10)
        info = json.loads((run / "run.json").read_text())
        for copy in ("glibc-copy", "glibc-bias"):
            info["allocators"][copy]["origin"] = {"kind": "path", "path": "/usr/lib/x86_64-linux-gnu/libc.so.6"}
        (run / "run.json").write_text(json.dumps(info))
    res = comparisons.compute(data)
    aa = pool.aa_across_runs(res.cells["wall_s"], data / "runs", "glibc").set_index(["allocator", "workload"])
    assert set(aa["n_runs"]) == {3}
    assert not aa.loc["glibc-copy", "excludes_1"].any()
    assert aa.loc["glibc-bias", "excludes_1"].all()


def test_the_row_shows_a_current_run_before_a_superseded_one_with_more_pairs():
    from types import SimpleNamespace

    from analysis.publish.debates import questions

    def cell(run, alloc, ratio, n):
        return {"run_id": run, "workload": "small-loop", "allocator": alloc, "baseline": "glibc", "ratio": ratio,
                "ci_low": ratio * 0.99, "ci_high": ratio * 1.01, "df": n - 1, "n": n}

    old = "20261130T134457Z-time-quick"  # R6: A/A copies loaded after the library, a discarded design
    cells = pd.DataFrame([cell(old, "glibc-built", 0.99, 80), cell(old, "glibc-no-tcache-key", 0.96, 80),
                          cell("current", "glibc-built", 0.99, 20), cell("current", "glibc-no-tcache-key", 0.95, 20)])
    empty = pd.DataFrame(columns=["allocator", "base", "workload", "ratio", "ci_low", "ci_high", "n"])
    res = SimpleNamespace(ablation=empty, ablation_memory=empty, speed=None, cells={"wall_s": cells})
    assert questions._pair_ratio(res, "glibc-built", "glibc-no-tcache-key", "small-loop")["run_id"] == "current"
    only_old = SimpleNamespace(ablation=empty, ablation_memory=empty, speed=None, cells={"wall_s": cells.iloc[:2]})
    assert questions._pair_ratio(only_old, "glibc-built", "glibc-no-tcache-key", "small-loop")["run_id"] == old


def test_layout_builds_of_a_contested_pair_pool_as_a_second_build(tmp_path):
    from analysis.publish.debates import pool
    from analysis.publish.results import comparisons
    from simulated_dataset import TRUE_RATIOS, add_lockstep_run, make_dataset

    data = make_dataset(tmp_path, probed=TRUE_RATIOS)  # probe rows of the measured allocators
    for i in range(2):
        add_lockstep_run(data, f"2099012{i}T000000Z-time-quick",
                         {"jemalloc-junk-free": 1.0, "jemalloc": 0.96, "jemalloc-junk-free_l2": 1.02,
                          "jemalloc_l2": 0.96}, seed=40 + i, n_pairs=40)
    res = comparisons.compute(data)
    cells = res.cells["wall_s"]
    assert pool.layout_pairs(cells, "jemalloc-junk-free", "jemalloc") == [
        ("jemalloc-junk-free", "jemalloc"), ("jemalloc-junk-free_l2", "jemalloc_l2")]
    # a side without layout builds (the system's library) stands against each layout of the other
    assert pool.layout_pairs(cells, "jemalloc-junk-free", "glibc") == [
        ("jemalloc-junk-free", "glibc"), ("jemalloc-junk-free_l2", "glibc")]
    assert pool.layout_pairs(cells, "glibc", "jemalloc") == [("glibc", "jemalloc"), ("glibc", "jemalloc_l2")]
    assert pool.layout_pairs(cells, "tcmalloc", "glibc") == [("tcmalloc", "glibc")]
    runs = pool.pair_estimates(cells, data / "runs", "002", "jemalloc-junk-free", "jemalloc", "dom-churn")
    assert sorted(runs["layout"]) == [1, 1, 2, 2]
    assert set(runs["configuration"]) == {"jemalloc-junk-free / jemalloc"}
    pooled = pool.pooled(runs, 0.025, "cost_at_most")
    # two runs, each with both builds: four estimates
    assert (pooled["n_runs"], pooled["n_estimates"], pooled["n_builds"]) == (2, 4, 2)
    # the two builds read 1.042 and 1.063: the pool lies between them, its interval wide enough to hold both
    assert pooled["pooled_low"] < 1.042 < 1.0625 < pooled["pooled_high"]


def test_the_kernel_part_gives_each_sides_medians_and_share_per_host(tmp_path):
    import pandas as pd

    from analysis.publish.debates import pool

    trials = []
    for i in range(4):
        for alloc, user, sys_s, flt in (("a", 0.1, 0.3, 600000), ("b", 0.05, 0.01, 5000)):
            trials += [{"allocator": alloc, "workload": "w", "scale": 0.25, "status": "ok", "warmup": 0,
                        "wall_s": user + sys_s, "user_s": user, "sys_s": sys_s, "minflt": flt},
                       {"allocator": alloc, "workload": "w", "scale": 0.1, "status": "ok", "warmup": 0,
                        "wall_s": 9, "user_s": 9, "sys_s": 9, "minflt": 9},  # a smaller scale: not counted
                       {"allocator": alloc, "workload": "w", "scale": 0.25, "status": "ok", "warmup": 1,
                        "wall_s": 9, "user_s": 9, "sys_s": 9, "minflt": 9},  # warm-up: not counted
                       {"allocator": alloc, "workload": "w", "scale": 0.25, "status": "crash", "warmup": 0,
                        "wall_s": 9, "user_s": 9, "sys_s": 9, "minflt": 9}]  # failed: not counted
    for run in ("R1", "R2"):
        (tmp_path / run).mkdir()
        pd.DataFrame(trials).to_csv(tmp_path / run / "trials.csv", index=False)
    runs = pd.DataFrame([{"seed": "000", "configuration": "a / b", "workload": "w", "run_id": r, "processor": "P",
                          "superseded": s} for r, s in (("R1", False), ("R2", False), ("R3", True))])
    long = pool.kernel_part(runs, tmp_path)
    assert list(long["side"]) == ["with", "without"] and list(long["n_runs"]) == [2, 2]
    assert list(long["n_trials"]) == [8, 8]
    a = long.iloc[0]
    assert (a["user_s"], a["sys_s"], a["minflt"]) == (0.1, 0.3, 600000) and a["kernel_share"] == pytest.approx(0.75)
    wide = pool.kernel_part_wide(long)
    assert len(wide) == 1 and wide.loc[0, "user_s_ratio"] == pytest.approx(2.0)
    assert wide.loc[0, "minflt_ratio"] == pytest.approx(120.0)
    assert wide.loc[0, "without_kernel_share"] == pytest.approx(0.01 / 0.06)


def test_user_and_system_time_are_compared_apart_on_the_build_workloads_and_perls_cases():
    import pandas as pd

    from analysis.publish.results import cpu_split

    names = pd.Series(["compile", "build", "perl-strcat", "perl-append-7-3", "dom-churn", "sqlite"])
    assert list(cpu_split.split(names)) == [True, True, True, True, False, False]


def test_a_glibc_build_is_one_build_in_runs_with_and_without_its_recorded_sha256():
    from analysis.publish.debates import pool

    old = {"allocators": {"glibc-built_l2": {"origin": {"kind": "glibc-build"}, "libraries": [],
                                              "expect_malloc": "/glibc-built_l2-2.36-e3b0/build/"}}}
    new = {"allocators": {"glibc-built_l2": {"origin": {"kind": "glibc-build"},
                                              "libraries": [{"allocator": "glibc-built_l2", "sha256": "ab" * 32}],
                                              "expect_malloc": "/glibc-built_l2-2.36-e3b0/build/"}}}
    assert pool.build_of(old, "glibc-built_l2") == pool.build_of(new, "glibc-built_l2") == \
        "glibc-built_l2-2.36-e3b0"
    moz = {"allocators": {"m": {"origin": {"kind": "debian-source"}, "libraries": [{"sha256": "cd" * 32}]}}}
    assert pool.build_of(moz, "m") == "cd" * 6


def test_the_code_census_of_each_debated_library_comes_from_the_newest_run_that_recorded_it(tmp_path):
    import json

    from analysis.publish.debates import pool

    def run(name, census):
        (tmp_path / name).mkdir()
        lib = {"allocator": "m", "file": "libm.so", "sha256": "ab" * 32, "code": census}
        (tmp_path / name / "run.json").write_text(json.dumps({"allocators": {
            "m": {"libraries": [lib]}, "other": {"libraries": [{**lib, "allocator": "other"}]}}}))

    run("R1", {"instructions": 10, "rep_stos": 1, "memset_calls": 0, "memcpy_calls": 0})
    run("R2", {"instructions": 12, "rep_stos": 0, "memset_calls": 3, "memcpy_calls": 1})
    (tmp_path / "R3").mkdir()
    (tmp_path / "R3" / "run.json").write_text(json.dumps({"allocators": {"m": {"libraries": [{"file": "libm.so"}]}}}))
    table = pool.code_census(tmp_path, {"m"})
    assert table.to_dict("records") == [{"allocator": "m", "file": "libm.so", "sha256": "ab" * 6, "instructions": 12,
                                         "rep_stos": 0, "memset_calls": 3, "memcpy_calls": 1, "run_id": "R2"}]
