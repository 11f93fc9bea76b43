"""Every complete run contributes: a user's run with a brought allocator reaches the results."""
import csv

import pandas as pd
import pytest

from analysis.publish.results import attribution, comparisons, writer
from simulated_dataset import TRUE_RATIOS, add_time_run, make_dataset

BYO = "20990102T000000Z-time-quick"
BROUGHT = ("hardened-72fb357", "hardened-light-2026062800")
MORE = "20990103T000000Z-time-quick"
SIM = "20990101T000000Z-time-sim"


@pytest.fixture(scope="module")
def merged(tmp_path_factory):
    # probed: the probe rows of the allocators the dataset measures (the others' scores are read by no check)
    data = make_dataset(tmp_path_factory.mktemp("merge"), probed={*TRUE_RATIOS, *BROUGHT})
    add_time_run(data, BYO, {"glibc": 1.0, "hardened-72fb357": 1.25, "hardened-light-2026062800": 1.1}, seed=5, n_blocks=8, profile="quick",
                 workloads={"compile": 0.5, "small-loop": 0.4})
    add_time_run(data, MORE, {"glibc": 1.0, "jemalloc": 0.9}, seed=6, n_blocks=20, profile="quick")
    return data, comparisons.compute(data)


@pytest.fixture(scope="module")
def written(merged, tmp_path_factory):
    """The merged results' tables and figures, written once for the tests that read them."""
    out = tmp_path_factory.mktemp("merged-out")
    return writer.write_outputs(merged[1], out), out


def test_a_brought_allocator_from_its_own_run_is_in_the_results(merged):
    _, res = merged
    geo = res.speed.geomean.set_index("allocator")
    assert geo.loc["hardened-72fb357", "run_id"] == BYO
    assert geo.loc["hardened-72fb357", "ci_low"] < 1.25 < geo.loc["hardened-72fb357", "ci_high"]
    assert set(res.speed.results.loc[res.speed.results["allocator"] == "hardened-72fb357", "run_id"]) == {BYO}
    assert "hardened-72fb357" in set(res.memory.geomean["allocator"])


def test_the_like_with_like_run_leads_and_the_other_replicates(merged):
    _, res = merged
    geo = res.speed.geomean.set_index("allocator")
    # the simulated full-scale run measured the most configurations: it leads jemalloc although MORE ran 20
    # blocks of it against its 12, and MORE's jemalloc is shown beside it
    assert res.like_run == SIM
    assert geo.loc["jemalloc", "run_id"] == SIM and geo.loc["scudo", "run_id"] == SIM
    rep = res.replication.set_index("allocator")
    assert rep.loc["jemalloc", "run_id"] == MORE
    assert "hardened-72fb357" not in rep.index and "scudo" not in rep.index
    for name, ratio in TRUE_RATIOS.items():
        if name != "glibc":
            assert geo.loc[name, "ci_low"] < ratio < geo.loc[name, "ci_high"], name


def test_the_trade_off_weighs_only_the_like_with_like_runs_allocators(merged):
    _, res = merged
    # the brought builds were measured in another run: they are not weighed beside the like-with-like run's
    assert set(res.trade["allocator"]) <= {"glibc", *TRUE_RATIOS}
    assert not set(res.trade["allocator"]) & set(BROUGHT)
    assert set(res.trade.dropna(subset=["run_id"])["run_id"]) == {SIM}


@pytest.mark.slow  # reads the published dataset or runs a command end to end: in make test, not test-fast
def test_the_speed_numbers_name_the_like_with_like_run_and_what_it_did_not_measure(written):
    numbers, _ = written
    like = numbers["speed"]["like_with_like"]
    assert like["run_id"] == SIM and like["run"] == {v["run_id"]: k for k, v in numbers["runs"].items()}[SIM]
    assert like["configurations"] == len(TRUE_RATIOS) - 1  # the baseline is no row of its own
    assert like["elsewhere"] == sorted(BROUGHT) and like["elsewhere_runs"] == 1


@pytest.mark.slow  # reads the published dataset or runs a command end to end: in make test, not test-fast
def test_tables_name_the_run_each_row_comes_from(written):
    numbers, tmp_path = written
    labels = {v["run_id"]: k for k, v in numbers["runs"].items()}
    with open(tmp_path / "results_speed_geomean.csv", newline="") as fh:
        geo = {r["allocator"]: r for r in csv.DictReader(fh)}
    assert geo["hardened-72fb357"]["run"] == labels[BYO]
    assert geo["scudo"]["run"] == labels["20990101T000000Z-time-sim"]
    assert numbers["runs"][labels[BYO]]["leads"] == 2  # its two brought builds; its baseline leads nowhere
    # the dearest allocator names the run it comes from, its profile and scale
    dearest = numbers["speed"]["dearest"]
    assert dearest["run"] == labels[dearest["run_id"]] and dearest["profile"] and dearest["reduced_scale"] is False


@pytest.mark.slow  # reads the published dataset or runs a command end to end: in make test, not test-fast
def test_the_debates_carry_margin_runs_hosts_pooled_interval_and_verdict(written):
    numbers, tmp_path = written
    deb = pd.read_csv(tmp_path / "results_debates.csv", dtype={"seed": str})
    fedora = deb[(deb["seed"] == "001") & (deb["configuration"] == "hardened-72fb357 / glibc")].iloc[0]
    assert fedora["margin"] == "10%" and fedora["rule"] == "cost_at_most" and fedora["n_runs"] == 1
    assert fedora["n_hosts"] == 1 and fedora["n_builds"] == 1
    assert fedora["pooled_low"] < 1.25 < fedora["pooled_high"]
    assert fedora["verdict"] in ("larger than 10% on every host measured", "not decided at this precision")
    # one host: its own answer is the single one, and the table of hosts holds it
    hosts = pd.read_csv(tmp_path / "results_debate_hosts.csv", dtype={"seed": str})
    mine = hosts[(hosts["seed"] == "001") & (hosts["configuration"] == "hardened-72fb357 / glibc")
                 & (hosts["workload"] == fedora["workload"])]
    assert len(mine) == 1 and mine.iloc[0]["ratio"] == pytest.approx(fedora["pooled_ratio"])
    runs = pd.read_csv(tmp_path / "results_debate_runs.csv", dtype={"seed": str})
    assert set(runs.loc[runs["configuration"] == "hardened-72fb357 / glibc", "run_id"]) == {BYO}
    assert (tmp_path / "results_debate_001.svg").is_file() and "001" in numbers["debate_figures"]


# ------------------------------------------------------------------------------------------ the debates
from analysis.publish.debates import questions  # noqa: E402


def test_a_brought_allocator_answers_its_debate_instead_of_the_stand_in(merged):
    _, res = merged
    table = questions.answer(res, res.figures)
    answers = table.drop_duplicates("seed").set_index("seed")
    fedora = answers.loc["001"]
    assert fedora["configuration"] == "hardened-72fb357 / glibc" and fedora["run_id"] == BYO
    assert fedora["not_measured"] == "" and not fedora["verdict"].startswith("no verdict")
    # every build and variant of the debated system brought gets a row of its own, the seed's commit first
    assert list(table.loc[table["seed"] == "001", "configuration"]) == [
        "hardened-72fb357 / glibc", "hardened-light-2026062800 / glibc"]
    assert fedora["user_display"] != "n/a" and fedora["sys_display"] != "n/a"
    # no stand-in of seed 003 exists here: said, not invented
    assert answers.loc["003", "verdict"] == "not measured here" and answers.loc["003", "not_measured"]
    # the claim comes from the transcribed figures, with its line
    assert answers.loc["002", "claimed"] == "1.025" and answers.loc["002", "claim_line"]


def test_a_lockstep_run_answers_its_debate_with_its_narrower_interval(tmp_path):
    from simulated_dataset import add_lockstep_run

    data = make_dataset(tmp_path, probed=TRUE_RATIOS)
    run = "20990104T000000Z-time-quick"
    add_lockstep_run(data, run, {"jemalloc": 0.9, "jemalloc-junk-free": 0.9 * 1.025}, seed=3, n_pairs=60)
    res = comparisons.compute(data)
    assert set(res.cells["wall_s"]["run_id"]) >= {run}
    mozilla = questions.answer(res, res.figures).set_index("seed").loc["002"]
    assert mozilla["run_id"] == run  # the pairs' interval is the narrowest measurement of that pair
    # mozjemalloc is not in this dataset: jemalloc's junk:free stands in with its numbers and no verdict
    assert mozilla["verdict"] == "no verdict: jemalloc-junk-free / jemalloc stands in for the debated system"
    assert mozilla["not_measured"]
    ratio, lo, hi = (float(mozilla[c]) for c in ("ratio", "ci_low", "ci_high"))
    assert lo < 1.025 < hi and hi / lo < 1.05
    # the lockstep run measured only one workload: it does not lead the allocators the full run has
    assert res.speed.geomean.set_index("allocator").loc["jemalloc", "run_id"] != run


@pytest.mark.slow  # end to end, over 2.5 s on a 2-core host: in make test, not test-fast
def test_a_copy_of_the_baseline_library_is_an_aa_control(tmp_path):
    import json

    data = make_dataset(tmp_path, probed=TRUE_RATIOS)
    run = add_time_run(data, "20990105T000000Z-time-quick", {"glibc": 1.0, "glibc-copy": 1.0}, seed=9, n_blocks=10)
    info = json.loads((run / "run.json").read_text())
    info["allocators"]["glibc-copy"]["origin"] = {"kind": "path", "path": "/usr/lib/x86_64-linux-gnu/libc.so.6"}
    (run / "run.json").write_text(json.dumps(info))
    res = comparisons.compute(data)
    aa = res.aa
    assert set(aa["allocator"]) == {"glibc-copy"} and len(aa) == 2  # one cell per workload of that run
    assert not aa["excludes_1"].any()
    assert set(aa["design"]) == {"trials"}
    numbers = writer.write_outputs(res, tmp_path / "out")
    assert numbers["aa_copies"] == 1 and numbers["configurations"] == numbers["allocators"] - 1
    # the A/A control is no comparison of the headline counts
    speed = pd.read_csv(tmp_path / "out" / "results_speed.csv")
    assert numbers["speed"]["aa_rows"] == 2 and numbers["speed"]["rows"] == len(speed) - 2
    assert numbers["speed"]["noninferior"] == int(speed.loc[speed["allocator"] != "glibc-copy", "noninferior"].sum())


def test_the_aa_design_names_the_lockstep_roles_of_the_run(tmp_path):
    from analysis.contract.runstore import Run

    def design(run_id, info, method="yuen-trim20-paired-log"):
        return comparisons.aa_design(Run(tmp_path / run_id, info), method)

    assert design("20990105T000000Z-time-quick", {}) == "lockstep, fixed roles"
    assert design("20990105T000000Z-time-quick", {"lockstep_roles": {"baseline": "glibc", "roles": "alternating"}}) \
        == "lockstep, alternating roles"
    assert design("20261130T134138Z-time-quick", {}) == "lockstep, fixed roles, check loaded after the library"
    assert design("20990105T000000Z-time-quick", {"lockstep_roles": {"roles": "alternating"}},
                  "yuen-trim20-log+drift") == "trials"


def test_the_debates_take_the_measurement_with_most_pairs_not_the_narrowest_interval():
    from types import SimpleNamespace

    def cell(run, alloc, ratio, half, n):
        return {"run_id": run, "workload": "small-loop", "allocator": alloc, "baseline": "glibc", "ratio": ratio,
                "ci_low": ratio * (1 - half), "ci_high": ratio * (1 + half), "df": n - 1, "n": n}

    cells = pd.DataFrame([cell("early", "glibc-built", 0.99, 0.002, 5), cell("early", "glibc-no-tcache-key", 0.96, 0.002, 5),
                          cell("long", "glibc-built", 0.99, 0.01, 40), cell("long", "glibc-no-tcache-key", 0.95, 0.01, 40)])
    empty = pd.DataFrame(columns=["allocator", "base", "workload", "ratio", "ci_low", "ci_high", "n"])
    res = SimpleNamespace(ablation=empty, ablation_memory=empty, speed=None, cells={"wall_s": cells})
    chosen = questions._pair_ratio(res, "glibc-built", "glibc-no-tcache-key", "small-loop")
    assert chosen["run_id"] == "long" and chosen["n"] == 40


def test_probe_runs_of_another_probe_set_are_not_merged(tmp_path):
    import json
    import shutil

    from analysis.contract.runstore import runs_of_kind
    from analysis.publish.dataset import paper_runs

    data = make_dataset(tmp_path)
    probe = runs_of_kind(data / "runs", "probe")[-1]
    other = data / "runs" / "20991231T000000Z-probe-security"
    shutil.copytree(probe.path, other)
    info = json.loads((other / "run.json").read_text())
    info["params"]["probes"] = info["params"]["probes"][:3]  # a smaller probe set: scores not comparable
    info["run_id"] = other.name
    (other / "run.json").write_text(json.dumps(info))
    main, runs = paper_runs.contributing_runs(data / "runs", "probe")
    assert main.run_id == other.name and [rt.run_id for rt in runs] == [other.name]


def test_a_run_with_pairs_and_trials_pools_both_into_one_geometric_mean(tmp_path):
    """The published full run has lockstep pairs for the C workloads and trials for the rest: an
    allocator's geometric mean covers the workloads of both."""
    from analysis.contract.runstore import Run
    from analysis.publish.dataset.paper_runs import RunTable
    from simulated_dataset import add_lockstep_run

    data = tmp_path / "data"
    trials_dir = add_time_run(data, "20990101T000000Z-time-sim", {"glibc": 1.0, "jemalloc": 0.9}, seed=2, n_blocks=12,
                              workloads={"sqlite": 0.5})
    pairs_dir = add_lockstep_run(data, "20990102T000000Z-time-sim", {"jemalloc": 0.9}, seed=3, n_pairs=30)
    rt = RunTable(Run(trials_dir, {}), pd.read_csv(trials_dir / "trials.csv"), pd.read_csv(pairs_dir / "pairs.csv"))
    comp = comparisons.run_comparison(rt, "glibc", "wall_s")
    assert set(comp.results["workload"]) == {"sqlite", "dom-churn"}
    g = comp.geomean.set_index("allocator").loc["jemalloc"]
    assert g["workloads"] == 2 and g["ci_low"] < 0.9 < g["ci_high"]


def test_a_complete_probe_run_of_another_design_is_named_once_and_not_called_incomplete(tmp_path, capsys):
    import json
    import shutil

    from analysis.publish.dataset import paper_runs

    data = make_dataset(tmp_path)
    runs = data / "runs"
    main = next(runs.glob("*-probe-*"))
    other = runs / "20000101T000000Z-probe-security"  # older: the reported run stays the copied one
    shutil.copytree(main, other)
    info = json.loads((other / "run.json").read_text())
    info["run_id"] = other.name
    info.setdefault("params", {})["probes"] = ["double-free"]
    (other / "run.json").write_text(json.dumps(info))
    reported, chosen = paper_runs.contributing_runs(runs, "probe")
    assert [rt.run_id for rt in chosen] == [main.name]
    err = capsys.readouterr().err
    assert f"probe run {other.name} ran other probes" in err and "is not complete" not in err


def test_a_run_too_small_for_any_result_is_left_out_with_a_warning(tmp_path, capsys):
    """A smoke run (2 blocks) is newer than every other run, yet it is neither in the run table nor the run
    the method section reports: it is named in one warning instead of contributing nothing in silence."""
    data = make_dataset(tmp_path, n_blocks=6, probed=TRUE_RATIOS)
    smoke = "20991231T000000Z-time-smoke"
    add_time_run(data, smoke, {"glibc": 1.0, "jemalloc": 0.9}, seed=7, n_blocks=2, profile="smoke")
    res = comparisons.compute(data)
    assert smoke not in set(res.runs["run_id"]) and res.time_run.run_id != smoke
    assert "20990101T000000Z-time-sim" in set(res.runs["run_id"])
    err = capsys.readouterr().err
    assert f"run {smoke} is left out of the results" in err and "a smoke run checks the set-up" in err


def test_the_debates_carry_exact_counts_per_free_that_transfer(merged):
    """Instructions per free as a ratio and as instructions added (simulated: jemalloc 80, junk:free 160, a
    data write per 8 instructions for both), and the ratio of data writes."""
    from simulated_dataset import FREES

    _, res = merged
    workload = next(iter(FREES))
    pf = questions._per_free(res, "jemalloc-junk-free", "jemalloc", workload)
    assert pf["ratio"] == pytest.approx(2.0, rel=1e-3) and pf["added"] == pytest.approx(80, abs=1)
    assert pf["writes"] == pytest.approx(2.0, rel=1e-2)
    assert questions._per_free(res, "jemalloc-junk-free", "nobody", workload) == {}


@pytest.mark.slow  # end to end, over 2.5 s on a 2-core host: in make test, not test-fast
def test_an_ablation_pools_every_workload_both_sides_ran_trials_and_pairs(tmp_path):
    """jemalloc's junk:free over jemalloc in one run: two workloads as trials, one as lockstep pairs against
    glibc. The pooled row covers all three (before, the pairs' workload was dropped once the trials answered
    the pair), each workload keeps its own row, and the truth (1.10) lies in the pooled interval."""
    from simulated_dataset import add_time_run
    from analysis.stats import simulate

    import shutil

    data = make_dataset(tmp_path, probed=TRUE_RATIOS)
    shutil.rmtree(data / "runs" / SIM)  # the run below is the dataset's only time run: it leads its allocators
    run = "20990105T000000Z-time-quick"
    ratios = {"glibc": 1.0, "jemalloc": 0.9, "jemalloc-junk-free": 0.99}
    t = add_time_run(data, run, ratios, seed=21, n_blocks=10, profile="quick")
    pairs = pd.concat([simulate.simulate_pairs(r, 40, 30 + i, workload="dom-churn", baseline="glibc", other=a)
                       .assign(maxrss_a_kb=50_000, maxrss_b_kb=int(50_000 * r))
                       for i, (a, r) in enumerate(sorted(ratios.items())) if a != "glibc"], ignore_index=True)
    pairs.assign(run_id=run, seq=range(len(pairs))).to_csv(t / "pairs.csv", index=False)
    res = comparisons.compute(data)
    abl = res.ablation[(res.ablation["allocator"] == "jemalloc-junk-free") & (res.ablation["run_id"] == run)]
    assert set(abl["workload"]) == {"small-loop", "pow2-churn", "dom-churn", "all"}
    pooled = abl[abl["workload"] == "all"].iloc[0]
    assert int(pooled["n"]) == 3 and pooled["ci_low"] < 0.99 / 0.9 < pooled["ci_high"]


def test_a_knock_out_measured_only_in_a_small_run_keeps_its_ablation():
    """hardened-72fb357 leads in the big run R1, which never ran its knock-out; the small run R2 ran the knock-out
    beside it. The knock-out's ablation comes from R2 (the run leading for its base); the light variant's,
    which R1 measured, still comes from R1 alone, although R2 measured it too."""
    from analysis.publish.dataset import paper_runs

    def rows(*pairs):
        return pd.DataFrame([{"allocator": a, "base": b, "workload": "all", "ratio": r} for a, b, r in pairs])

    per_run = {"R1": rows(("hardened-72fb357", "hardened-light-72fb357", 1.7)),
               "R2": rows(("hardened-72fb357", "hardened-light-72fb357", 1.4),
                          ("hardened-72fb357", "hardened-72fb357-no-wafc", 1.1))}
    lead = {"hardened-72fb357": "R1", "hardened-light-72fb357": "R1", "hardened-72fb357-no-wafc": "R2"}
    merged = paper_runs.merge_pair_rows(per_run, lead)
    got = {(r.base, r.run_id): r.ratio for r in merged.itertuples()}
    assert got == {("hardened-light-72fb357", "R1"): 1.7, ("hardened-72fb357-no-wafc", "R2"): 1.1}
    # per allocator alone (merge_rows), the knock-out's row would be lost: its allocator leads in R1
    assert "hardened-72fb357-no-wafc" not in set(paper_runs.merge_rows(per_run, lead, "glibc")["base"])


def test_a_probe_run_with_probes_read_beside_the_score_stands_beside_the_others(tmp_path):
    """The page-sized entropy probes (scored=False) make no run incomparable: a newer run that ran them too
    still merges, its rows of them kept out of the scored rows and read by extra_probe_rows."""
    import json
    import shutil

    from analysis.contract.runstore import runs_of_kind
    from analysis.publish.dataset import paper_runs

    data = make_dataset(tmp_path)
    probe = runs_of_kind(data / "runs", "probe")[-1]
    newer = data / "runs" / "20991231T000000Z-probe-security"
    shutil.copytree(probe.path, newer)
    info = json.loads((newer / "run.json").read_text())
    info["params"]["probes"] = [*info["params"]["probes"], "reuse-entropy-page"]
    info["run_id"] = newer.name
    (newer / "run.json").write_text(json.dumps(info))
    with open(newer / "probes.csv") as fh:
        rows = list(csv.DictReader(fh))
    first = rows[0]
    extra = {**dict.fromkeys(first, ""), "run_id": newer.name, "allocator": "only-new", "probe": "reuse-entropy-page",
             "outcome": "mitigated", "trials": "20", "bits": "4.9", "bits_ci_low": "4.8", "bits_ci_high": "5.0"}
    scored = {**extra, "probe": rows[0]["probe"], "size": rows[0]["size"], "outcome": "caught", "bits": "",
              "bits_ci_low": "", "bits_ci_high": ""}
    with open(newer / "probes.csv", "a", newline="") as fh:
        csv.DictWriter(fh, fieldnames=list(first)).writerows([extra, scored])
    main, runs = paper_runs.contributing_runs(data / "runs", "probe")
    assert main.run_id == newer.name and {rt.run_id for rt in runs} == {probe.run_id, newer.name}
    lead = paper_runs.leads("probe", runs, main)
    merged = paper_runs.merge_probe_rows(runs, lead)
    beside = paper_runs.extra_probe_rows(runs, lead)
    assert "reuse-entropy-page" not in {r["probe"] for r in merged}
    assert any(r["allocator"] == "only-new" for r in merged)
    assert [(r["allocator"], r["probe"]) for r in beside] == [("only-new", "reuse-entropy-page")]


def test_the_like_with_like_runs_configurations_without_a_score_are_named_with_the_reason():
    from types import SimpleNamespace

    geo = pd.DataFrame({"allocator": ["jemalloc", "perl-mymalloc", "moz-clang", "glibc-copy", "jemalloc_l2", "other"],
                        "run_id": [SIM, SIM, SIM, SIM, SIM, MORE]})
    res = SimpleNamespace(like_run=SIM, speed=SimpleNamespace(geomean=geo),
                          aa=pd.DataFrame({"allocator": ["glibc-copy"]}),
                          scores=pd.DataFrame({"allocator": ["glibc", "jemalloc", "perl-mymalloc", "other"]}))
    trade = pd.DataFrame({"allocator": ["glibc", "jemalloc"]})
    # perl has a score row (no probe applies); the clang build is in no probe run of the score's design; the copy
    # of glibc, the layout build and a configuration of another run are no concern of the trade-off
    assert attribution.unweighed(res, trade) == {"no probe applies": ["perl-mymalloc"], "not probed": ["moz-clang"]}
