"""Monotonicity in defences, on the published probe runs: for every knock-out pair the
catalogue knows (two configurations of one family, one claiming defences the other lacks), removing the
defences does not raise the score, and where one defence is removed a probe of it tells the two apart.
A planted run in which a removal raises the score fails the same check."""
import csv
import shutil

import numpy as np
import pytest

from analysis.paths import RUNS_DIR
from analysis.publish.security import writer as W
from analysis.stats import monotonicity as S

PUBLISHED = sorted(RUNS_DIR.glob("*probe-security"))


def test_pairs_come_from_the_catalogue_claims_within_a_family():
    pairs = {(a, b): removed for a, b, removed in W.catalogue_pairs()}
    assert pairs[("glibc-built", "glibc-no-tcache-key")] == ("double-free-detect",)
    assert pairs[("glibc-built", "glibc-no-safe-linking")] == ("freelist-protect",)
    assert pairs[("scudo-quarantine", "scudo")] == ("delayed-reuse",)
    assert set(pairs[("hardened-72fb357", "hardened-light-72fb357")]) >= {"delayed-reuse", "randomized-reuse"}
    assert not any(a.startswith("jemalloc") and b.startswith("scudo") for a, b in pairs)  # families differ
    assert pairs[("hardened-72fb357", "hardened-72fb357-no-quarantine")] == ("delayed-reuse", "randomized-reuse")
    # one family, two upstream revisions: not one source, so no pair
    assert not any("2026062800" in a and "72fb357" in b or "72fb357" in a and "2026062800" in b for a, b in pairs)
    assert S.defence_pairs({"a": ("x",), "b": ()}, {"a": "f", "b": "g"}) == []


@pytest.fixture(scope="module")
def published():
    """The published score's rows (the probes' and the primitive cells') and their monotonicity problems, read and
    checked once for the module."""
    from analysis.publish.security.primitives import primitive_rows_if_any
    from analysis.stats.security import primitive_score_rows

    rows = W.reported_probe_rows()
    rows += [r for r in primitive_score_rows(primitive_rows_if_any()) if r["allocator"] in {x["allocator"] for x in rows}]
    return rows, W.monotonicity_problems(rows)


@pytest.mark.slow  # reads the published dataset or runs a command end to end: in make test, not test-fast
@pytest.mark.skipif(not PUBLISHED, reason="no published probe run")
@pytest.mark.slow  # reads the published dataset or runs a command end to end: in make test, not test-fast
def test_a_removal_that_raises_the_published_score_is_carried_by_one_named_entry(published):
    """Removing defences may raise the score (a quarantine delays the reuse at which a write-after-free check
    fires): each such pair names the entry that carries it, and without that entry the removal no longer
    raises the score. A raise spread over many entries fails here."""
    rows, problems = published
    weights = S.weights_file().weights()
    raised = {(a, b) for a, b, _ in W.catalogue_pairs() for p in problems
              if p.startswith(f"{a} vs {b} (") and "raises the score" in p}
    assert len(raised) == sum("raises the score" in p for p in problems)  # every raise read back to its pair
    for a, b, removed in W.catalogue_pairs():
        if (a, b) not in raised:
            continue
        mine = [r for r in rows if r["allocator"] in (a, b)]  # a pair's scores read only its own rows
        m = S.monotonicity(mine, [(a, b, removed)], weights)[0]
        assert m["raised"] and m["driver"], f"{a} > {b}: no entry carries the raise"
        kept = [r for r in mine if r["probe"] != m["driver"]]
        again = S.monotonicity(kept, [(a, b, removed)], weights)
        assert again and not again[0]["raised"], f"{a} > {b}: more than {m['driver']} raises it"


@pytest.mark.skipif(not PUBLISHED, reason="no published probe run")
@pytest.mark.slow  # reads the published dataset or runs a command end to end: in make test, not test-fast
def test_the_probe_of_a_removed_defence_tells_the_published_pair_apart(published):
    rows, problems = published
    if "uaf-read-reused" not in {r["probe"] for r in rows}:
        pytest.skip("the published probe run predates the uaf-read split: `make probe`")
    blind = [p for p in problems if "tells them apart" in p]
    assert not blind, "\n".join(blind)


def _plant(tmp_path, monkeypatch, without: str, with_: str) -> list[str]:
    """A copy of the published probe runs in which `without` got every row of `with_` and then caught
    every misuse the other still missed: its removal now raises the score."""
    runs = tmp_path / "runs"
    for run in PUBLISHED:
        shutil.copytree(run, runs / run.name)
    for table in runs.glob("*/probes.csv"):
        with open(table, newline="") as fh:
            rows = list(csv.DictReader(fh))
        fields = list(rows[0])
        for r in rows:
            if r["allocator"] == without and r["outcome"] == "missed":
                r.update(outcome="caught", rate="0.0")
                if "outcomes" in r:  # runs published before the outcome counts have none
                    r["outcomes"] = f"caught={r['trials']}"
        with open(table, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=fields)
            w.writeheader()
            w.writerows(rows)
    monkeypatch.setenv("HEAPCOST_RUNS_DIR", str(runs))
    return W.monotonicity_problems(W.reported_probe_rows(runs), [(with_, without, ("delayed-reuse",))])


@pytest.mark.slow  # copies every published probe run, 4-5 s: in make test, not test-fast
@pytest.mark.skipif(not PUBLISHED, reason="no published probe run")
def test_a_planted_run_where_removing_the_quarantine_raises_the_score_fails(tmp_path, monkeypatch):
    problems = _plant(tmp_path, monkeypatch, "scudo", "scudo-quarantine")
    assert any(p.startswith("scudo-quarantine vs scudo") and "raises the score" in p for p in problems), problems


def test_equal_configurations_are_not_raised_a_better_removal_is_and_a_blind_probe_is_reported():
    """Seeded simulated rows with a known truth: two configurations with the same outcomes (the difference is
    0) are not `raised`, one that misses what the other catches is; a probe that misses on both sides is
    `blind` for the defence it should show, a defence whose probes did not run is `unmeasured`."""
    rng = np.random.default_rng(7)
    rows = []
    for probe in ("double-free", "uaf-write", "reuse-immediate"):
        k = int(rng.binomial(20, 0.5))
        rows.append({"allocator": "a", "probe": probe, "size": 64, "outcome": "missed",
                     "outcomes": f"missed={k} caught={20 - k}", "trials": 20})
    same = rows + [dict(r, allocator="b") for r in rows]
    m = S.monotonicity(same, [("a", "b", ("delayed-reuse",))])[0]
    assert m["difference"] == pytest.approx(0) and not m["raised"] and m["difference_low"] < 0 < m["difference_high"]
    better = rows + [dict(r, allocator="b", outcome="caught", outcomes="caught=20") for r in rows]
    assert S.monotonicity(better, [("a", "b", ("delayed-reuse",))])[0]["raised"]
    both_missed = [dict(r, outcomes="missed=20") for r in same]
    m = S.monotonicity(both_missed, [("a", "b", ("delayed-reuse",))])[0]
    assert m["blind"] == "delayed-reuse" and not m["raised"]
    assert S.monotonicity(both_missed, [("a", "b", ("zero-on-alloc",))])[0]["unmeasured"] == "zero-on-alloc"


def test_the_driver_is_the_entry_that_carries_a_raise_and_a_spread_raise_is_not_carried_by_one():
    """Simulated rows: b (without) catches on one probe what a (with) misses: that probe is the driver, and
    without it the pair is not raised. When b catches on every probe, taking the driver out leaves a raise."""
    weights = {"double-free": 1.0, "uaf-write": 1.0, "reuse-immediate": 1.0}

    def row(alloc, probe, missed):
        return {"allocator": alloc, "probe": probe, "size": 64, "outcome": "missed" if missed else "caught",
                "outcomes": f"missed={missed} caught={20 - missed}", "trials": 20}
    one = [row("a", p, 20 if p == "uaf-write" else 0) for p in weights] + [row("b", p, 0) for p in weights]
    m = S.monotonicity(one, [("a", "b", ("delayed-reuse",))], weights)[0]
    assert m["raised"] and m["driver"] == "uaf-write"
    kept = [r for r in one if r["probe"] != "uaf-write"]
    assert not S.monotonicity(kept, [("a", "b", ("delayed-reuse",))], weights)[0]["raised"]
    spread = [row("a", p, 20) for p in weights] + [row("b", p, 0) for p in weights]
    m = S.monotonicity(spread, [("a", "b", ("delayed-reuse",))], weights)[0]
    kept = [r for r in spread if r["probe"] != m["driver"]]
    assert S.monotonicity(kept, [("a", "b", ("delayed-reuse",))], weights)[0]["raised"]
