"""The alternation bench's pure parts: the programs' command line as EXTRA_WORKLOADS splits it, its input text,
and the summary of an A/A campaign's windows."""
import math

import numpy as np
import pandas as pd

from analysis.harness.bench import alternation as B
from analysis.harness.workloads.brought import split_items


def test_the_programs_split_into_their_own_workloads(tmp_path):
    text = B.write_input(tmp_path / "words.txt", lines=50)
    assert len(text.read_text().splitlines()) == 50 and text.read_text() == B.write_input(tmp_path / "again.txt", 50).read_text()
    items = split_items(B.extra_workloads(text))
    assert [name for name, _ in items] == list(B.PROGRAMS)
    assert dict(items)["gzip-text"] == f"gzip -6 -c {text}"


def fake_pairs(name: str, ratios, window_s=2.0, runs=6) -> pd.DataFrame:
    rows = []
    for i, r in enumerate(ratios):
        base, other = ("glibc", "glibc-copy") if i % 2 == 0 else ("glibc-copy", "glibc")
        a, b = (0.1, 0.1 * r) if base == "glibc" else (0.1 * r, 0.1)
        rows.append({"run_id": "x", "seq": i, "block": i, "warmup": 0, "workload": name, "scale": "0.25",
                     "allocator_a": base, "allocator_b": other, "status": "ok", "active_a_s": a, "active_b_s": b,
                     "wall_a_s": window_s, "turns_a": runs})
    return pd.DataFrame(rows)


def test_the_summary_gives_each_programs_interval_machine_time_and_why_not():
    rng = np.random.default_rng(5)
    pairs = fake_pairs("perl-words", np.exp(rng.normal(0, 0.004, 12)))
    rows = B.summarize(pairs, {"perl-words": {"applies": True, "why": "one thread", "window_s": 2.0},
                               "sleepy": {"applies": False, "why": "it waits for 60% of its wall time"}})
    perl, sleepy = rows
    assert perl["pairs"] == 12 and perl["ci_low"] < 1 < perl["ci_high"] and perl["halfwidth"] < 0.01
    assert perl["machine_s"] == 24.0 and perl["runs_per_window"] == 6
    assert sleepy["ratio"] is None and not sleepy["alternates"]
    lines = B.format_alternation({"blocks": 12, "programs": rows})
    assert any(line.startswith("| perl-words | 1 | yes | 2 | 12 | 6 |") for line in lines)
    assert any("no: it waits for 60%" in line for line in lines)
    assert math.isclose(perl["ratio"], math.exp(np.log(pairs["active_b_s"] / pairs["active_a_s"]).mean()), rel_tol=0.01)


def campaign_rows(name: str, shifts, rng, sd=0.006, windows=40) -> list[dict]:
    """The summaries of one program's campaigns, each of `windows` A/A windows moved by its own shift."""
    rows = []
    for k, shift in enumerate(shifts):
        pairs = fake_pairs(name, np.exp(shift + rng.normal(0, sd, windows)), window_s=0.5, runs=2)
        row, = B.summarize(pairs, {name: {"applies": True, "why": "one thread", "window_s": 0.5}})
        rows.append({**row, "campaign": k + 1})
    return rows


def test_campaigns_that_agree_pass_the_check_and_a_part_fixed_per_campaign_is_caught():
    rng = np.random.default_rng(11)
    rows = campaign_rows("same", [0.0, 0.0, 0.0], rng) + campaign_rows("moved", [-0.012, 0.010, 0.0], rng)
    same, moved = B.between_campaigns(rows)
    assert (same["program"], same["campaigns"], moved["campaigns"]) == ("same", 3, 3)
    assert same["p"] > 0.05 and same["between_percent"] < 0.2 and same["ci_low"] < 1 < same["ci_high"]
    assert moved["p"] < 0.001 and 0.6 < moved["between_percent"] < 2.0
    # pooled with the campaign as a random effect, the moved program's interval widens to hold its campaigns
    assert moved["ci_high"] - moved["ci_low"] > 3 * (same["ci_high"] - same["ci_low"])
    lines = B.format_alternation({"blocks": 40, "campaigns": 3, "programs": rows, "between": [same, moved]})
    assert any(line.startswith("| moved | 3 | ") and "| 0.000 |" in line for line in lines)
    assert sum(line.startswith("| same | ") for line in lines) == 4  # three campaigns and the check


def test_a_program_in_one_campaign_or_never_alternating_has_no_check():
    rng = np.random.default_rng(3)
    rows = campaign_rows("once", [0.0], rng) + [{"program": "sleepy", "ratio": None, "alternates": False,
                                                 "why": "it waits", "campaign": k} for k in (1, 2)]
    assert B.between_campaigns(rows) == []


def alternation_result(rng, shifts=(0.0, 0.0, 0.0)) -> dict:
    rows = campaign_rows("perl-words", list(shifts), rng)
    return {"blocks": 40, "campaigns": len(shifts), "target_halfwidth": 0.01, "programs": rows,
            "between": B.between_campaigns(rows)}


def test_the_earlier_hosts_results_are_kept_one_entry_per_host_and_this_hosts_own_are_replaced():
    rng = np.random.default_rng(7)
    old, older, unrecorded = (alternation_result(rng) for _ in range(3))
    previous = {"alternation": old, "measured": {"alternation": {"utc_start": "t2", "host": "AMD A"}},
                "alternation_other_hosts": [{"host": "Intel B", "measured": {"utc_start": "t1"}, "alternation": older},
                                            {"host": "AMD A", "measured": {"utc_start": "t0"}, "alternation": older},
                                            {"host": None, "measured": None, "alternation": unrecorded}]}
    kept = B.other_hosts(previous, "AMD C")
    assert [(e["host"], (e["measured"] or {}).get("utc_start")) for e in kept] == [
        ("AMD A", "t2"), ("Intel B", "t1"), (None, None)]  # the newest of each host, and the one not recorded
    assert kept[0]["alternation"] is old
    # run again on a host already kept: its earlier entries go, this run's part stands for it
    assert [e["host"] for e in B.other_hosts(previous, "Intel B")] == ["AMD A", None]
    assert B.other_hosts({}, "AMD C") == [] and B.format_other_hosts([]) == []


def test_the_other_hosts_table_counts_campaigns_within_the_target_and_containing_one():
    rng = np.random.default_rng(13)
    result = alternation_result(rng, shifts=(0.0, 0.03, 0.0))  # one campaign moved 3%: its interval misses 1
    lines = B.format_other_hosts([{"host": "AMD A", "measured": {"utc_start": "t2"}, "alternation": result}])
    row, = [line for line in lines if line.startswith("| AMD A |")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:6] == ["AMD A", "t2", "perl-words", "3", "3 (±1%)", "2"] and cells[7] == "20"
    b, = result["between"]
    assert cells[6] == f"{b['ratio']:.4f} [{b['ci_low']:.4f}, {b['ci_high']:.4f}]"
