"""The known techniques' products (analysis/publish/security/techniques.py) on a simulated techniques.csv with a
known truth: the summary, the techniques that work everywhere, the glibc score check, what each glibc defence
buys, the files written, the newest run chosen, a dataset without a techniques run, and the musl row run from a set
built against musl with a technique that does not build there (counted apart)."""
import csv
import json

from analysis.publish.security import techniques as T

CATALOG = {
    "glibc": {"family": "glibc", "knock_out_of": "", "description": "glibc defaults"},
    "glibc-notcache": {"family": "glibc", "knock_out_of": "", "description": "tcache off"},
    "glibc-built": {"family": "glibc-built", "knock_out_of": "", "description": "built unchanged"},
    "glibc-no-tcache-key": {"family": "glibc-built", "knock_out_of": "glibc-built", "description": "no key"},
    "glibc-no-safe-linking": {"family": "glibc-built", "knock_out_of": "glibc-built", "description": "no SL"},
    "scudo": {"family": "scudo", "knock_out_of": "", "description": "scudo"},
}
# technique -> allocator -> outcome (the truth the products must give back)
TRUTH = {
    "always": {"glibc": "works", "glibc-notcache": "works", "glibc-built": "works", "glibc-no-tcache-key": "works",
               "glibc-no-safe-linking": "not-run", "scudo": "works"},
    "dup": {"glibc": "works", "glibc-notcache": "stopped", "glibc-built": "stopped", "glibc-no-tcache-key": "works",
            "glibc-no-safe-linking": "not-run", "scudo": "stopped"},
    "poison": {"glibc": "stopped", "glibc-notcache": "stopped", "glibc-built": "stopped",
               "glibc-no-tcache-key": "stopped", "glibc-no-safe-linking": "not-run", "scudo": "not-applicable"},
    "spirit": {"glibc": "works", "glibc-notcache": "not-applicable", "glibc-built": "works",
               "glibc-no-tcache-key": "works", "glibc-no-safe-linking": "not-run", "scudo": "crashes"},
}
SCORES = {"glibc": 79.5, "glibc-notcache": 81.5, "glibc-built": 79.4, "glibc-no-tcache-key": 75.6, "scudo": 90.0}


def rows():
    out = []
    for tech, by in TRUTH.items():
        for alloc, outcome in by.items():
            n = 0 if outcome == "not-run" else 20
            out.append({"run_id": "R", "technique": tech, "allocator": alloc, "outcome": outcome,
                        "outcomes": f"{outcome}={n}" if n else "", "runs": str(n),
                        "works": str(n if outcome == "works" else 0) if n else "", "rate": "", "rate_ci_low": "",
                        "rate_ci_high": "", "program_sha256": "0" * 64, "detail": ""})
    return out


def test_summary_counts_each_outcome_per_allocator():
    s = {x["allocator"]: x for x in T.summary(rows())}
    assert (s["glibc"]["works"], s["glibc"]["stopped"], s["glibc"]["ran"]) == (3, 1, 4)
    assert (s["glibc-notcache"]["stopped"], s["glibc-notcache"]["not-applicable"]) == (2, 1)
    assert (s["glibc-no-safe-linking"]["ran"], s["glibc-no-safe-linking"]["not-run"]) == (0, 4)
    assert (s["scudo"]["crashes"], s["scudo"]["not-applicable"], s["scudo"]["stopped"]) == (1, 1, 1)


def test_a_technique_that_works_under_every_allocator_that_ran_it_is_named():
    assert T.works_everywhere(rows()) == ["always"]


def test_the_score_check_counts_the_glibc_pairs_in_and_against_the_order_of_the_scores():
    check = T.score_check(T.summary(rows()), SCORES, {k: v["family"] for k, v in CATALOG.items()})
    # scored and run glibc configurations, best score first; scudo is another family, no-safe-linking ran nothing
    assert [c["allocator"] for c in check["configurations"]] == ["glibc-notcache", "glibc", "glibc-built",
                                                                  "glibc-no-tcache-key"]
    assert [c["stopped"] for c in check["configurations"]] == [2, 1, 2, 1]
    # notcache>glibc +, notcache=built tie, notcache>nokey +, glibc<built -, glibc=nokey tie, built>nokey +
    assert (check["pairs"], check["concordant"], check["discordant"], check["tied"]) == (6, 3, 1, 2)


def test_each_glibc_defence_is_compared_with_its_control_over_the_techniques_both_ran():
    found = {(d["reference"], d["configuration"]): d for d in T.defences(rows(), CATALOG)}
    # no-safe-linking ran nothing: no comparison; scudo is no glibc configuration
    assert set(found) == {("glibc-built", "glibc-no-tcache-key"), ("glibc", "glibc-notcache")}
    key = found[("glibc-built", "glibc-no-tcache-key")]
    assert key["works_only_configuration"] == ["dup"] and key["stopped_only_reference"] == ["dup"]
    assert key["works_only_reference"] == [] and key["same"] == 3 and key["techniques"] == 4
    tcache = found[("glibc", "glibc-notcache")]
    assert tcache["works_only_reference"] == ["dup", "spirit"] and tcache["stopped_only_configuration"] == ["dup"]


def test_the_products_are_written_with_the_runs_provenance(tmp_path):
    info = {"params": {"technique_timeout": 10.0, "techniques": {"provenance": {
        "upstream": "shellphish/how2heap", "revision": "b931ae3b", "folder": "glibc_2.36", "flags": "-std=c99 -g"}}}}
    numbers = T.write_outputs(rows(), tmp_path, run_id="R", info=info, scores=SCORES, catalog=CATALOG)
    assert (numbers["revision"], numbers["folder"], numbers["techniques"]) == ("b931ae3b", "glibc_2.36", 4)
    assert (numbers["runs_per_cell"], numbers["not_run"]) == (20, ["glibc-no-safe-linking"])
    assert json.loads((tmp_path / "security_techniques_numbers.json").read_text())["score_check"]["concordant"] == 3
    table = list(csv.DictReader(open(tmp_path / "security_techniques_table.csv")))
    assert len(table) == 24 and {r["outcome"] for r in table} == {*T.OUTCOMES} - {"hangs", T.NOT_BUILT}
    summary = {r["allocator"]: r for r in csv.DictReader(open(tmp_path / "security_techniques_summary.csv"))}
    assert summary["glibc-notcache"]["score"] == "81.5" and summary["glibc-notcache"]["stopped"] == "2"
    assert (tmp_path / "security_techniques_matrix.svg").read_text().startswith("<?xml")


def _run(runs_dir, name, status, table_rows):
    run = runs_dir / name
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"kind": "probe", "status": status, "params": {}}))
    if table_rows is not None:
        with open(run / "techniques.csv", "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(table_rows[0]))
            w.writeheader()
            w.writerows(table_rows)


def test_the_newest_complete_run_with_a_techniques_table_is_read(tmp_path):
    old = [dict(r, run_id="A") for r in rows()]
    _run(tmp_path, "20260101T000000Z-probe-security", "complete", old)
    _run(tmp_path, "20260102T000000Z-probe-security", "complete", [dict(r, run_id="B") for r in rows()])
    _run(tmp_path, "20260103T000000Z-probe-security", "running", [dict(r, run_id="C") for r in rows()])
    _run(tmp_path, "20260104T000000Z-probe-security", "complete", None)
    run_id, _, found = T.newest_run(tmp_path)
    assert run_id == "20260102T000000Z-probe-security" and {r["run_id"] for r in found} == {"B"}


def test_a_later_run_of_some_configurations_replaces_their_cells_and_keeps_the_others(tmp_path):
    full = [dict(r, run_id="A") for r in rows()]
    _run(tmp_path, "20260101T000000Z-probe-security", "complete", full)
    (tmp_path / "20260101T000000Z-probe-security" / "run.json").write_text(json.dumps(
        {"kind": "probe", "status": "complete", "params": {"techniques": {"provenance": {"revision": "r1"}}}}))
    # the later run measured glibc again and the configuration the first could not run, and listed scudo unrun
    later = [dict(r, run_id="B", outcome="stopped" if r["allocator"] == "glibc-no-safe-linking" else r["outcome"],
                  runs="20" if r["allocator"] == "glibc-no-safe-linking" else r["runs"])
             for r in rows() if r["allocator"] in ("glibc", "glibc-no-safe-linking")]
    later += [dict(r, run_id="B", outcome="not-run", runs="0") for r in rows() if r["allocator"] == "scudo"]
    _run(tmp_path, "20260102T000000Z-probe-security", "complete", later)
    (tmp_path / "20260102T000000Z-probe-security" / "run.json").write_text(json.dumps(
        {"kind": "probe", "status": "complete", "params": {"techniques_musl": {"libc": "musl"}}}))
    run_id, info, found = T.newest_run(tmp_path)
    by = {}
    for r in found:
        by.setdefault(r["allocator"], set()).add(r["run_id"])
    assert run_id == "20260102T000000Z-probe-security"
    assert by["glibc"] == {"B"} and by["glibc-no-safe-linking"] == {"B"}
    assert by["scudo"] == {"A"} and by["glibc-notcache"] == {"A"}  # unrun in the later run: the earlier cells stay
    assert len(found) == len(rows())
    assert info["params"]["technique_runs"] == ["20260101T000000Z-probe-security", "20260102T000000Z-probe-security"]
    assert info["params"]["techniques_musl"] == {"libc": "musl"}
    assert info["params"]["techniques"] == {"provenance": {"revision": "r1"}}  # the glibc set from the earlier run


def test_a_dataset_without_a_techniques_run_says_so_in_the_numbers(tmp_path):
    out = tmp_path / "generated"
    numbers = T.write_from_dataset(tmp_path / "runs", out)
    assert "no probe run of the dataset has a techniques.csv" in numbers["absent"]
    assert json.loads((out / "security_techniques_numbers.json").read_text()) == numbers
    assert not (out / "security_techniques_table.csv").exists()


def test_further_layout_builds_fold_into_their_first_and_a_different_outcome_is_named(tmp_path):
    layouts = []
    for r in rows():
        if r["allocator"] == "glibc-built":
            for n in (2, 3):
                changed = n == 3 and r["technique"] == "spirit"
                layouts.append(dict(r, allocator=f"glibc-built_l{n}", outcome="crashes" if changed else r["outcome"]))
    orphan = dict(rows()[0], allocator="scudo-zero_l2")  # a further layout whose first build is not in the run
    kept, folded, differ = T.fold_layouts(rows() + layouts + [orphan])
    assert {r["allocator"] for r in kept} == {*CATALOG, "scudo-zero_l2"}
    assert folded == {"glibc-built": [2, 3]}
    assert differ == [{"allocator": "glibc-built", "layout": 3, "technique": "spirit", "outcome": "crashes",
                       "first_layout": "works"}]
    numbers = T.write_outputs(rows() + layouts, tmp_path, run_id="R", info={}, scores=SCORES, catalog=CATALOG)
    assert (numbers["layout_build_count"], numbers["layout_differences"]) == (2, differ)
    assert "glibc-built_l2" not in numbers["allocators"] and "glibc-no-safe-linking" not in numbers["allocators"]


def test_layout_differences_are_grouped_by_technique_and_outcomes():
    differ = [{"allocator": a, "layout": n, "technique": "rel", "outcome": "crashes", "first_layout": "works"}
              for a in ("b", "a") for n in (4, 3)] + [
             {"allocator": "a", "layout": 5, "technique": "rel", "outcome": "not-applicable", "first_layout": "works"}]
    assert T.layout_difference_groups(differ) == [
        {"technique": "rel", "outcome": "crashes", "first_layout": "works",
         "configurations": [{"allocator": "a", "layouts": [3, 4]}, {"allocator": "b", "layouts": [3, 4]}]},
        {"technique": "rel", "outcome": "not-applicable", "first_layout": "works",
         "configurations": [{"allocator": "a", "layouts": [5]}]}]


def musl_rows():
    """musl's row: the musl set's programs, with `spirit` not built against musl (not-applicable without a run)."""
    out = []
    for tech, outcome in (("always", "works"), ("dup", "stopped"), ("poison", "not-applicable"), ("spirit", None)):
        n = 0 if outcome is None else 20
        out.append({"run_id": "R", "technique": tech, "allocator": "musl", "outcome": outcome or "not-applicable",
                    "outcomes": f"{outcome}={n}" if n else "", "runs": str(n),
                    "works": str(n if outcome == "works" else 0) if n else "", "rate": "", "rate_ci_low": "",
                    "rate_ci_high": "", "program_sha256": "" if outcome is None else "1" * 64,
                    "detail": "does not build against musl: spirit.c:4:10: fatal error: gnu/libc-version.h: No such "
                              "file or directory" if outcome is None else ""})
    return out


MUSL_INFO = {"params": {"techniques": {"provenance": {"folder": "glibc_2.36"}}, "techniques_musl": {
    "libc": "musl", "provenance": {"compiler": "musl-gcc", "flags": "-static -std=c99", "libc": "musl"},
    "programs": {"always": "1" * 64, "dup": "1" * 64, "poison": "1" * 64},
    "not_built": {"spirit": "spirit.c:4:10: fatal error: gnu/libc-version.h: No such file or directory"},
    "malloc": {"always": "mallocng", "dup": "mallocng", "poison": "lite_malloc"}}}}


def test_a_technique_that_does_not_build_against_musl_is_counted_apart_neither_stopped_nor_working(tmp_path):
    catalog = {**CATALOG, "musl": {"family": "musl", "knock_out_of": "", "description": "musl mallocng"}}
    s = {x["allocator"]: x for x in T.summary(T.shown(rows() + musl_rows()))}
    assert (s["musl"]["ran"], s["musl"][T.NOT_BUILT], s["musl"]["not-applicable"]) == (3, 1, 1)
    assert (s["musl"]["works"], s["musl"]["stopped"], s["musl"]["not-run"]) == (1, 1, 0)
    assert T.works_everywhere(T.shown(rows() + musl_rows())) == ["always"]
    numbers = T.write_outputs(rows() + musl_rows(), tmp_path, run_id="R", info=MUSL_INFO, scores=SCORES,
                              catalog=catalog)
    assert numbers["not_built"] == {"musl": ["spirit"]} and numbers["not_built_cells"] == 1
    assert "musl" in numbers["allocators"] and "musl" not in numbers["not_run"]
    assert numbers["other_libc_sets"] == [{
        "libc": "musl", "compiler": "musl-gcc", "flags": "-static -std=c99", "programs": 1, "configurations": ["musl"],
        "not_built": [{"technique": "spirit", "reason": "spirit.c:4:10: fatal error: gnu/libc-version.h: No such file "
                                                        "or directory"}],
        "malloc": "mallocng", "other_malloc": [{"technique": "poison", "malloc": "lite_malloc"}]}]
    table = {(r["technique"], r["allocator"]): r for r in csv.DictReader(open(tmp_path / "security_techniques_table.csv"))}
    assert table[("spirit", "musl")]["outcome"] == T.NOT_BUILT and table[("poison", "musl")]["outcome"] == "not-applicable"
    summary = {r["allocator"]: r for r in csv.DictReader(open(tmp_path / "security_techniques_summary.csv"))}
    assert (summary["musl"]["ran"], summary["musl"][T.NOT_BUILT]) == ("3", "1")
    assert T.NOT_BUILT in (tmp_path / "security_techniques_matrix.svg").read_text()


def test_a_run_without_a_set_for_another_libc_names_none():
    assert T.other_libc_sets({"techniques": {}}, T.shown(rows())) == []
    assert not any(T.not_built(r) for r in rows())  # not-run and run not-applicable cells are not "not built"
