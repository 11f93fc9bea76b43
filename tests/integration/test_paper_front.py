"""The paper's first page and what it describes: the run chosen by what it measured, degenerate numbers named
as such, notes said once, and the debates' answers read from their products."""
import csv
from pathlib import Path

import pandas as pd
import pytest

from analysis.contract.runstore import Run
from analysis.publish.render import front_page
from analysis.publish.dataset import paper_runs
from analysis.publish.render.formats import fmt_resolved_interval, fmt_startup_ms
from analysis.publish.render.formats import shared_notes

STANDARD = frozenset({"a", "b", "c", "d"})


def _run(run_id: str, allocators, workloads, profile="full", scale=None, blocks=5,
         brought: dict | None = None) -> paper_runs.RunTable:
    rows = [{"workload": w, "allocator": a, "status": "ok", "warmup": False, "wall_s": 1.0}
            for a in allocators for w in workloads for _ in range(blocks)]
    info = {"status": "complete", "params": {"profile": profile}, "allocators": brought or {}}
    if scale is not None:
        info["profile"] = {"scale": scale}
    return paper_runs.RunTable(Run(Path("/runs") / run_id, info), pd.DataFrame(rows))


def test_the_like_with_like_run_leads_every_allocator_it_measured():
    # a full-scale run of four configurations leads them all, even against a quick run with more workloads and
    # more blocks of two of them; an allocator it did not measure leads where it was measured most
    like = _run("20260101T000000Z-time-full", ["glibc", "x", "y", "z"], ["a", "b"], scale=1.0)
    quick = _run("20260301T000000Z-time-quick", ["glibc", "x", "y", "w"], ["a", "b", "c", "d"], scale=0.25,
                 blocks=12)
    small = _run("20260201T000000Z-time-quick", ["glibc", "w"], ["a"], scale=0.25)
    assert paper_runs.like_with_like_run([like, quick, small], STANDARD) is like
    lead = paper_runs.leads("time", [like, quick, small], None, STANDARD)
    assert lead == {"glibc": like.run_id, "x": like.run_id, "y": like.run_id, "z": like.run_id,
                    "w": quick.run_id}
    # without a full-scale run the lead is as before: the most workloads, then the most measurements
    assert paper_runs.leads("time", [quick, small], None, STANDARD)["x"] == quick.run_id


def test_the_like_with_like_run_is_the_full_scale_one_with_the_most_configurations():
    # layout builds and copies of the baseline's library repeat a configuration: they do not count
    copy = {"glibc-copy": {"origin": {"kind": "path", "path": "/lib/x86_64-linux-gnu/libc.so.6"}}}
    repeats = _run("20260301T000000Z-time-full", ["glibc", "x", "x_l2", "x_l3", "glibc-copy"], ["a"], scale=1.0,
                   brought=copy)
    three = _run("20260101T000000Z-time-full", ["glibc", "x", "y"], ["a"], scale=1.0)
    assert paper_runs.configurations(repeats, STANDARD) == {"glibc", "x"}
    assert paper_runs.like_with_like_run([repeats, three], STANDARD) is three
    # a reduced-scale run is never it, however many it measured; two configurations compare nothing like with like
    wide_quick = _run("20260401T000000Z-time-quick", ["glibc", "x", "y", "z", "w"], ["a"], scale=0.25)
    assert paper_runs.like_with_like_run([wide_quick, three], STANDARD) is three
    assert paper_runs.like_with_like_run([wide_quick, repeats], STANDARD) is None
    # among runs of as many configurations, the newest
    newer = _run("20260501T000000Z-time-full", ["glibc", "x", "z"], ["a"], scale=1.0)
    assert paper_runs.like_with_like_run([three, newer], STANDARD) is newer
    # as many configurations on more standard cells beats a newer run of workloads outside the standard set
    servers = _run("20260601T000000Z-time-full", ["glibc", "x", "z"], ["a", "server", "redis"], scale=1.0)
    wider = _run("20260101T000000Z-time-full", ["glibc", "x", "z"], ["a", "b"], scale=1.0)
    assert paper_runs.like_with_like_run([wider, servers], STANDARD) is wider


def test_a_newer_two_workload_server_run_does_not_displace_the_run_that_leads_the_allocators():
    leading = _run("20260101T000000Z-time-full", ["glibc", "x", "y", "z"], ["a", "b", "c", "d"])
    servers = _run("20260201T000000Z-time-full", ["glibc", "x", "y", "z", "w"], ["server", "redis"])
    assert paper_runs.leading_run([leading, servers], STANDARD).run_id == leading.run_id
    counts = paper_runs.led_cells([leading, servers], STANDARD)
    assert counts[leading.run_id] == 16 and counts[servers.run_id] == 0


def test_the_run_leading_more_standard_cells_wins_whatever_its_date():
    old = _run("20260101T000000Z-time-full", ["glibc", "x"], ["a", "b"])
    new = _run("20260301T000000Z-time-full", ["glibc", "y", "z"], ["a", "b", "c"])
    assert paper_runs.leading_run([old, new], STANDARD).run_id == new.run_id
    assert paper_runs.leading_run([new, old], STANDARD).run_id == new.run_id


def test_an_interval_spanning_more_than_a_factor_of_a_hundred_is_not_estimable():
    assert fmt_resolved_interval(30.2, 0.002, 428693.574).startswith("not estimable: the interval spans a factor")
    assert fmt_resolved_interval(2.0, 1.5, 2.5) == "2.000 [1.500, 2.500]"
    assert fmt_resolved_interval(2.0, float("nan"), 2.5).startswith("not estimable")


def test_a_start_up_time_is_never_printed_below_zero():
    assert fmt_startup_ms(-12.1, -12.6, -11.6) == "not estimable: time grows faster than the work"
    assert fmt_startup_ms(-1.5, -6.3, 3.3) == "at most 3.3"
    assert fmt_startup_ms(0.4, -0.4, 1.1) == "0.4 [0.0, 1.1]"
    assert fmt_startup_ms(20.6, 15.4, 25.9) == "20.6 [15.4, 25.9]"


def test_a_long_clause_repeated_across_rows_is_said_once_as_a_note():
    long = "own compat layer (compat/, force-included compat.h; malloc.c unchanged) with a long tail of words"
    shown, notes = shared_notes(pd.Series([f"{long}; tag 1", f"{long}; tag 2", "short", ""]))
    assert notes == [("N1", long)]
    assert shown == ["see N1; tag 1", "see N1; tag 2", "short", ""]


def test_the_front_rows_come_from_each_debates_primary_cell():
    debates = pd.DataFrame([
        {"seed": "001", "topic": "hardened_malloc in Fedora: costs", "cell": "primary", "configuration": "h / glibc",
         "workload": "build", "margin": "10%", "verdict": "larger than 10% on every host measured", "not_measured": ""},
        {"seed": "001", "topic": "hardened_malloc in Fedora: costs", "cell": "secondary", "configuration": "h / glibc",
         "workload": "compile", "margin": "10%", "verdict": "x", "not_measured": ""}])
    hosts = pd.DataFrame([
        {"seed": "001", "configuration": "h / glibc", "workload": "build", "processor": "Intel(R) Xeon(R) Processor 2600 MHz (6/167/1)",
         "machines": "K-99747d; M-0a1b2c", "display": "1.471 [1.442, 1.501]", "decision_words": "larger than 10%"},
        {"seed": "001", "configuration": "h / glibc", "workload": "compile", "processor": "AMD EPYC 2600 MHz (26/2/1)",
         "machines": "K-aabbd7", "display": "9.9 [9.0, 10.0]", "decision_words": "y"}])
    rows = front_page.front_rows(debates, hosts)
    assert list(rows["workload"]) == ["build"]
    row = rows.iloc[0]
    assert row["per_host"] == "Intel(R) Xeon(R) Processor 2600 MHz (6/167/1): 1.471 [1.442, 1.501] (larger than 10%)"
    assert row["where"] == "Intel(R) Xeon(R) Processor 2600 MHz (6/167/1): K-99747d, M-0a1b2c"
    assert row["sentence"].startswith("hardened_malloc in Fedora (claimed: no figure): h took")
    assert row["sentence"].endswith("(larger than 10% on 1 of 1 kind); security not measured.")
    # the first page's list of machines: the primary cells' kinds only, each once
    assert front_page.front_machines(debates, hosts) == row["where"]


def test_kinds_that_share_a_model_name_and_frequency_read_apart_on_the_first_page():
    """Two processors sold as 'AMD EPYC 2600 MHz' are two kinds: each keeps its family/model/stepping, and a
    kind that recorded none reads as such."""
    kinds = ["AMD EPYC 2600 MHz (25/17/1)", "AMD EPYC 2600 MHz (26/2/1)", "AMD EPYC 2600 MHz, family not recorded"]
    debates = pd.DataFrame([{"seed": "002", "topic": "t", "cell": "primary", "configuration": "a / b", "workload": "w",
                             "margin": "2%", "verdict": "v", "not_measured": ""}])
    hosts = pd.DataFrame([{"seed": "002", "configuration": "a / b", "workload": "w", "processor": k,
                           "machines": f"K-00000{i}", "display": "1.0 [0.9, 1.1]", "decision_words": "d"}
                          for i, k in enumerate(kinds)])
    row = front_page.front_rows(debates, hosts).iloc[0]
    assert [h.split(": ")[0] for h in row["per_host"].split("; ")] == kinds
    assert row["where"] == "; ".join(f"{k}: K-00000{i}" for i, k in enumerate(kinds))


# ------------------------------------------------------------------------------------------ rendered
SIM_RUN = "20990101T000000Z-time-sim"
SERVER_RUN = "20990301T000000Z-time-full"


@pytest.mark.paper
def test_a_paper_whose_newest_full_run_measured_two_server_workloads_describes_the_leading_run(tmp_path):
    """The newest full run measured redis and server alone: the abstract, the method section and the
    workload table describe the run that leads the allocators, not it."""
    import json
    import shutil

    from paper_checks import with_supplement_text, pdf_text, squash
    from simulated_dataset import TRUE_RATIOS, add_time_run, make_dataset
    from analysis.paths import REPO
    from analysis.publish.render import paper

    data = make_dataset(tmp_path / "dataset", probed=TRUE_RATIOS)  # probe rows of the measured allocators
    # fewer blocks than the simulated run: every allocator leads in the simulated run, as in the published data
    add_time_run(data, SERVER_RUN, TRUE_RATIOS, 5, 6, profile="full", workloads={"server": 0.5, "redis": 0.7})
    out = tmp_path / "paper"
    (out / "generated").mkdir(parents=True)
    for f in (REPO / "paper" / "generated").glob("literature_*"):
        shutil.copyfile(f, out / "generated" / f.name)
    pdf, _ = paper.build(data, out, notebooks=["security", "results"], log=lambda *_: None)
    numbers = json.loads((out / "generated" / "results_numbers.json").read_text())
    assert numbers["time_run"]["run_id"] == SIM_RUN
    text = squash(with_supplement_text(pdf))
    method = text[text.index(squash("Harness, clock and noise")):text.index(squash("3.3 Statistics"))]
    assert squash(f"standard workloads, is {SIM_RUN}") in method and SERVER_RUN not in method
    abstract = text[:text.index(squash("1 Five debates"))]
    assert SERVER_RUN not in abstract and "2workloads" not in abstract
    with open(out / "generated" / "results_workloads.csv", newline="") as fh:
        described = {r["workload"] for r in csv.DictReader(fh)}
    assert {"small-loop", "pow2-churn"} <= described
    assert squash("small-loop (simulated)") in text



def test_each_answer_is_printed_as_the_decision_reads_it_with_the_next_machine_beside_it():
    h = {"ratio": "1.1169", "mean90_low": "1.1151", "mean90_high": "1.1188", "next_low": "1.058", "next_high": "1.165"}
    assert front_page.decision_display(h) == "1.117 [1.115, 1.119]; next machine [1.058, 1.165]"
    assert front_page.decision_display({"ratio": "1.2"}) == "1.200"
    assert front_page.decision_display({}) == ""


def test_the_verdict_is_counted_over_kinds_and_the_ratios_given_as_a_range():
    mine = pd.DataFrame({"decision_words": ["larger than 1%", "not decided at this precision", "not decided at this precision"],
                         "ratio": ["1.065", "1.025", "0.996"]})
    assert front_page.short_verdict(mine) == "larger than 1% on 1 of 3 kinds, not decided on 2"
    assert front_page.short_verdict(mine.iloc[[0, 0]]) == "larger than 1% on all 2 kinds"
    assert front_page.short_verdict(mine.iloc[[1]]) == "not decided at this precision on 1 of 1 kind"
    assert front_page.ratio_range(mine) == "1.00-1.06"
    assert front_page.short_verdict(mine.iloc[0:0]) == "not measured"


def test_what_the_defence_buys_is_read_from_the_probes_or_said_unmeasured():
    security = pd.DataFrame([
        {"seed": "002", "better": "8", "worse": "0", "cases": "207", "unmeasured": "", "words": "safer in 8 of 207"},
        {"seed": "000", "better": "0", "worse": "0", "cases": "0", "words": "perl-omalloc alone: 105 caught",
         "unmeasured": "perl's own malloc lives inside the interpreter: unreachable"}])
    table, short = front_page.security_words(security, "002")
    assert table == "safer in 8 of 207" and short == "safer in 8 of 207 misuse cases"
    table, short = front_page.security_words(security, "000")
    assert table.startswith("perl-omalloc alone: 105 caught; unmeasured: perl's own malloc")
    assert short == "security not measured (perl's own malloc lives inside the interpreter)"
    assert front_page.security_words(security, "004")[0] == "not measured"
    entropy = pd.DataFrame([{"seed": "003", "better": "0", "worse": "0", "cases": "94", "unmeasured": "",
                             "words": "no probe case of 94 tells the two apart",
                             "entropy_moved": "reuse-entropy-page 7.0 -> 4.9 bits"}])
    # misuse cases that barely differ: the randomness is what the defence changes, and the abstract says it
    assert front_page.security_words(entropy, "003")[1] == ("0 safer, 0 less safe of 94 misuse cases; page reuse "
                                                            "randomness 7.0 -> 4.9 bits")
    many = entropy.assign(better="8")  # the misuse cases say it: the abstract keeps to them
    assert front_page.security_words(many, "003")[1] == "safer in 8 of 94 misuse cases"
