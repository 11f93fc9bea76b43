"""Direct lockstep pairing of contested pairs: PAIRS=a:b makes a and b take turns with each
other besides each with the baseline; the readers take rows with neither side the baseline in their stride."""
import csv
import json
from types import SimpleNamespace

import pandas as pd
import pytest

from analysis.contract.schema import oriented_pairs
from analysis.errors import HeapcostError
from analysis.harness.timing import lockstep, measure
from analysis.stats import simulate
from conftest import cli, libc_path

CATALOGUE = {"glibc": None, "jemalloc": None, "jemalloc-junk-free": None, "mimalloc2": None}


def parse(value, selected=("glibc", "jemalloc", "jemalloc-junk-free"), debates=None):
    return lockstep.parse_pairs(value, {s: None for s in selected}, CATALOGUE, "glibc", debates)


def test_pairs_are_parsed_in_order():
    assert parse("jemalloc:jemalloc-junk-free") == [("jemalloc", "jemalloc-junk-free")]
    assert parse(" jemalloc-junk-free : jemalloc ,") == [("jemalloc-junk-free", "jemalloc")]
    assert parse("") == [] and parse(None) == []


@pytest.mark.parametrize("value, message", [
    ("nosuch:jemalloc", "unknown allocator 'nosuch'"),
    ("jemalloc:jemalloc", "with itself"),
    ("jemalloc:mimalloc2", "'mimalloc2', which is not in ALLOCATORS"),
    ("glibc:jemalloc", "already takes turns with the baseline"),
    ("jemalloc", "a:b items"),
    ("jemalloc:jemalloc-junk-free:glibc", "a:b items"),
    ("jemalloc:jemalloc-junk-free,jemalloc-junk-free:jemalloc", "twice"),
])
def test_bad_pairs_are_refused_with_one_line(value, message):
    with pytest.raises(HeapcostError, match=message) as exc:
        parse(value)
    assert "\n" not in str(exc.value)


def test_pairs_debates_reads_the_contested_pairs_of_debates_toml(tmp_path, capsys):
    path = tmp_path / "debates.toml"
    path.write_text('[[debate]]\nseed = "002"\ncontested = [["jemalloc-junk-free", "jemalloc"]]\n'
                    '[[debate]]\nseed = "001"\ncontested = [["mimalloc2", "glibc"], ["mimalloc2", "jemalloc"]]\n')
    # with the defence first in the file; the direct pair's ratio b/a is with/without
    assert lockstep.debate_pairs(path) == [("jemalloc", "jemalloc-junk-free"), ("glibc", "mimalloc2"),
                                           ("jemalloc", "mimalloc2")]
    # pairs with the baseline already run; those not both selected are named and left out
    assert parse("debates", debates=path) == [("jemalloc", "jemalloc-junk-free")]
    assert "jemalloc:mimalloc2 left out" in capsys.readouterr().err
    # the layout builds selected on both sides are paired as well; one side alone is not
    assert parse("debates", selected=("glibc", "jemalloc", "jemalloc-junk-free", "jemalloc_l2",
                                      "jemalloc-junk-free_l2", "mimalloc2_l3", "jemalloc-junk-free_l3"), debates=path) == [
        ("jemalloc", "jemalloc-junk-free"), ("jemalloc_l2", "jemalloc-junk-free_l2")]
    with pytest.raises(HeapcostError, match="no contested pair"):
        parse("debates", selected=("glibc", "jemalloc"), debates=path)
    path.write_text('[[debate]]\nseed = "004"\ncontested = ["glibc-built"]\n')
    with pytest.raises(HeapcostError, match="debate 004 needs contested"):
        lockstep.debate_pairs(path)
    with pytest.raises(HeapcostError, match="does not exist"):
        lockstep.debate_pairs(tmp_path / "none.toml")


def fake_campaign(cells, turns=("small-loop",)):
    workloads = {w: SimpleNamespace(id=w) for _, w, _ in cells}
    return SimpleNamespace(resolved={a: None for a, _, _ in cells}, pairs=list(cells), workloads=workloads,
                           turns=set(turns))


def test_a_direct_pair_adds_one_cell_per_workload_both_run_at_one_scale(monkeypatch):
    monkeypatch.setattr(lockstep, "supports_lockstep", lambda wl: wl.id == "small-loop")
    cells = [(a, w, 1.0) for a in ("glibc", "jemalloc", "jemalloc-junk-free") for w in ("small-loop", "sqlite")]
    cells.append(("jemalloc", "pow2-churn", 0.5))  # only jemalloc runs pow2-churn (at its own scale)
    camp = fake_campaign(cells)
    monkeypatch.setattr(lockstep, "supports_lockstep", lambda wl: wl.id in ("small-loop", "pow2-churn"))
    paired, trials = lockstep.split_cells(camp, "glibc", [("jemalloc", "jemalloc-junk-free")])
    assert ("jemalloc-junk-free", "small-loop", 1.0, "jemalloc") in paired
    assert ("jemalloc", "small-loop", 1.0, "glibc") in paired and ("jemalloc-junk-free", "small-loop", 1.0, "glibc") in paired
    assert [c for c in paired if c[3] == "jemalloc"] == [("jemalloc-junk-free", "small-loop", 1.0, "jemalloc")]
    assert {c[1] for c in trials} == {"sqlite"}
    only_trials = fake_campaign([("glibc", "sqlite", 1.0), ("jemalloc", "sqlite", 1.0),
                                 ("jemalloc-junk-free", "sqlite", 1.0)])
    assert lockstep.split_cells(only_trials, "glibc", [("jemalloc", "jemalloc-junk-free")], strict=False)[0] == []
    with pytest.raises(HeapcostError, match="no selected workload that takes turns"):
        lockstep.split_cells(fake_campaign([("glibc", "sqlite", 1.0), ("jemalloc", "sqlite", 1.0),
                                            ("jemalloc-junk-free", "sqlite", 1.0)]), "glibc",
                             [("jemalloc", "jemalloc-junk-free")])


def direct_rows(ratio, n, seed, a="jemalloc", b="jemalloc-junk-free", workload="small-loop"):
    """Simulated pairs of b against a, the roles alternating as the harness alternates them."""
    df = simulate.simulate_pairs(ratio, n, seed, workload=workload, baseline=a, other=b)
    swap = df.index % 2 == 1
    out = df.copy()
    for x, y in (("allocator_a", "allocator_b"), ("active_a_s", "active_b_s")):
        out.loc[swap, x], out.loc[swap, y] = df.loc[swap, y], df.loc[swap, x]
    return out


def as_rows(df):
    return [{k: ("" if pd.isna(v) else f"{v:.6g}" if k == "scale" else str(v)) for k, v in r.items()}
            for r in df.to_dict("records")]


def test_adaptive_mode_judges_a_direct_cell_by_its_own_two_allocators():
    tight = direct_rows(1.02, 30, seed=1)
    few = direct_rows(1.02, 5, seed=2, b="other")
    cells = [("jemalloc-junk-free", "small-loop", 1.0, "jemalloc"), ("other", "small-loop", 1.0, "jemalloc"),
             ("jemalloc", "small-loop", 1.0, "glibc")]
    wide = lockstep._wider_cells(as_rows(pd.concat([tight, few])), cells, 0.05, lambda f: f)
    # 30 pairs at ±~1%: precise enough; 5 pairs are too few; no pair of jemalloc with glibc at all
    assert wide == cells[1:]
    assert lockstep._wider_cells(as_rows(tight), cells[:1], 0.0001, lambda f: f) == cells[:1]


def test_declared_direct_pairs_keep_their_orientation():
    rows = pd.concat([direct_rows(1.1, 9, seed=3).iloc[1:],
                      direct_rows(1.0, 4, 4, a="glibc", b="jemalloc"),
                      direct_rows(1.0, 4, 5, a="glibc", b="jemalloc-junk-free")],
                     ignore_index=True)
    # the two are in equally many rows: without a declaration the first row decides
    assert rows.iloc[0]["allocator_a"] == "jemalloc-junk-free"
    assert set(oriented_pairs(rows).iloc[:8]["allocator_a"]) == {"jemalloc-junk-free"}
    # with direct pairs the baseline is no longer in the most rows (8 here, the others 12 each)
    assert set(oriented_pairs(rows).iloc[8:]["allocator_a"]) == {"jemalloc", "jemalloc-junk-free"}
    turned = oriented_pairs(rows, order=[("jemalloc", "jemalloc-junk-free"), ("glibc", "jemalloc"),
                                         ("glibc", "jemalloc-junk-free")])
    assert oriented_pairs(turned).equals(turned)  # a table turned once keeps its orientation
    assert set(turned.iloc[:8]["allocator_a"]) == {"jemalloc"}
    assert set(turned.iloc[8:]["allocator_a"]) == {"glibc"}
    assert (turned["active_b_s"] / turned["active_a_s"]).iloc[:8].median() > 1.05


@pytest.mark.slow  # end to end over a simulated dataset, 4-5 s: in make test, not test-fast
def test_the_readers_take_runs_with_direct_pairs(tmp_path):
    """A lockstep run with jemalloc and its junk:free each against glibc and directly against each other:
    the comparisons with the baseline are those of a run without direct pairs, the merge turns the direct
    rows as the run declared them, and compare_pairs answers the direct ratio near its truth."""
    from analysis.publish.results import comparisons
    from analysis.publish.dataset.paper_runs import contributing_runs, has_usable_cell
    from analysis.publish.results.summary import run_summary
    from analysis.stats import paired
    from simulated_dataset import add_lockstep_run, make_dataset

    data = make_dataset(tmp_path)
    run = "20990106T000000Z-time-quick"
    t = add_lockstep_run(data, run, {"jemalloc": 0.9, "jemalloc-junk-free": 0.99}, seed=7, n_pairs=30)
    base = pd.read_csv(t / "pairs.csv")
    # more direct pairs than baseline pairs: the baseline is in fewer rows than either of the two
    direct = direct_rows(1.1, 40, seed=8, workload="dom-churn").iloc[1:].assign(maxrss_a_kb=50_000, maxrss_b_kb=55_000)
    both = pd.concat([base, direct.assign(run_id=run)], ignore_index=True).assign(seq=lambda d: range(len(d)))
    both.to_csv(t / "pairs.csv", index=False)
    info = json.loads((t / "run.json").read_text())
    info["lockstep_roles"] = {"baseline": "glibc", "roles": "alternating",
                              "direct_pairs": [["jemalloc", "jemalloc-junk-free"]]}
    info["params"]["pairs"] = [["jemalloc", "jemalloc-junk-free"]]
    (t / "run.json").write_text(json.dumps(info))

    res = comparisons.compute(data)
    cells = res.cells["wall_s"]
    mine = cells[cells["run_id"] == run]
    assert set(mine["allocator"]) == {"jemalloc", "jemalloc-junk-free"} and set(mine["baseline"]) == {"glibc"}
    _, tables = contributing_runs(data / "runs", "time")
    rt = next(rt for rt in tables if rt.run_id == run)
    assert has_usable_cell(rt)
    assert set(rt.pairs["allocator_a"]) == {"glibc", "jemalloc"}
    assert set(rt.pairs.loc[rt.pairs["allocator_a"] == "jemalloc", "allocator_b"]) == {"jemalloc-junk-free"}
    assert set(oriented_pairs(both)["allocator_a"]) != {"glibc", "jemalloc"}  # what the counts alone would do
    answer = paired.compare_pairs(rt.pairs).set_index(["allocator", "baseline"]).loc[("jemalloc-junk-free",
                                                                                      "jemalloc")]
    assert answer["ci_low"] < 1.1 < answer["ci_high"]
    # the simulated baseline pairs never swap roles: no role effect, and the direct rows add none
    assert paired.role_effects(both, "glibc").empty
    summary = run_summary(t)
    assert set(zip(summary["allocator"], summary["baseline"])) == {
        ("jemalloc", "glibc"), ("jemalloc-junk-free", "glibc"), ("jemalloc-junk-free", "jemalloc")}


def test_pairs_need_the_lockstep_protocol():
    with pytest.raises(HeapcostError, match="PROTOCOL=lockstep"):
        measure.Campaign(profile="smoke", allocators="glibc", workloads="small-loop", protocol="trials",
                         pairs="a:b", progress=False)


def test_bad_pairs_stop_the_cli_before_anything_runs(runs_dir):
    r = cli("measure", "--profile", "smoke", "--allocators", "glibc", "--workloads", "small-loop",
            "--extra-allocators", f"glibc-copy={libc_path()}", "--pairs", "glibc-copy:glibc-copy")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "with itself" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not any(runs_dir.iterdir())


@pytest.mark.slow
def test_a_campaign_with_pairs_runs_the_two_against_each_other(runs_dir):
    lib = libc_path()
    camp = measure.Campaign(profile="smoke", allocators="glibc", workloads="small-loop", blocks=2, seed=5,
                            extra_allocators=f"copy-one={lib},copy-two={lib}", pairs="copy-one:copy-two",
                            runs_dir=runs_dir, progress=False)
    assert ("copy-two", "small-loop", 1.0, "copy-one") in camp.lockstep_cells
    run_dir = camp.run()
    info = json.loads((run_dir / "run.json").read_text())
    assert info["params"]["pairs"] == [["copy-one", "copy-two"]]
    assert info["lockstep_roles"]["direct_pairs"] == [["copy-one", "copy-two"]]
    # every allocator's record names the build it is and its layout beside the library's sha256
    one = info["allocators"]["copy-one"]
    assert (one["build_of"], one["layout"]) == ("copy-one", 1) and len(one["libraries"][0]["sha256"]) == 64
    rows = list(csv.DictReader(open(run_dir / "pairs.csv")))
    direct = [r for r in rows if {r["allocator_a"], r["allocator_b"]} == {"copy-one", "copy-two"}]
    # 2 measured blocks and a warm-up, the roles alternating between blocks
    assert len(direct) == 3 and all(r["status"] == "ok" for r in direct)
    assert {r["allocator_a"] for r in direct} == {"copy-one", "copy-two"}
    assert len(rows) == 9
