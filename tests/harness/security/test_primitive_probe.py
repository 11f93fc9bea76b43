"""Exploitation primitives from random heap-action sequences: the Wilson interval on simulated data with a
known rate, the parsing and aggregation of the driver's lines, the batching with an injected launcher, and
the driver itself under glibc (control without false positives; safe-linking undone by the heap leak)."""
import subprocess
from types import SimpleNamespace

import numpy as np
import pytest

from analysis.harness.security import primitive_probe
from analysis.stats import primitives as PR


def test_wilson_matches_the_closed_form_at_zero_and_covers_a_known_rate():
    lo, hi = PR.wilson(0, 1000)
    assert lo == 0 and hi == pytest.approx(1.959964 ** 2 / (1000 + 1.959964 ** 2), rel=1e-6)
    assert PR.wilson(0, 0) == (None, None)
    rng = np.random.default_rng(21)
    for p in (0.003, 0.05, 0.4):
        ks = rng.binomial(1000, p, size=2000)
        covered = np.mean([lo <= p <= hi for lo, hi in (PR.wilson(int(k), 1000) for k in ks)])
        assert 0.93 <= covered <= 0.975, (p, covered)


STDOUT = """seq=0 end=exit:0 prim=0 attempts=0
seq=1 end=signal:6:-6:alloc prim=1 attempts=3
seq=2 end=exit:0 prim=10 attempts=5
seq=3 end=hang prim=0 attempts=0
garbage line
seq=4 end=signal:11:1:misuse prim=4 attempts=0
result sequences=5 class=overflow capability=none seed=1 flush=256 spray=128
"""


def test_cell_rows_count_each_primitive_and_the_stopped_sequences():
    seqs = PR.parse_sequences(STDOUT)
    assert [s["seq"] for s in seqs] == [0, 1, 2, 3, 4]
    rows = {r["primitive"]: r for r in PR.cell_rows(seqs)}
    assert rows["overlap"]["count"] == 1 and rows["chosen-address"]["count"] == 1
    assert rows["metadata-write"]["count"] == 1 and rows["neighbour-write"]["count"] == 1
    # any: overlap, chosen-address, metadata-write, allocator-write; the neighbour write is the program's data
    assert rows["any"]["count"] == 2 and rows["any"]["rate"] == pytest.approx(0.4)
    assert rows["any"]["median_attempts"] == 4
    assert rows["any"]["detected"] == 2 and rows["any"]["hangs"] == 1
    assert rows["strong"]["count"] == 2  # sequences 1 and 2: overlap, chosen-address
    assert rows["any"]["signals"] == "11:1:misuse=1 6:-6:alloc=1"


def test_batches_cover_every_sequence_once():
    assert primitive_probe.batches(1000, 250) == [(0, 250), (250, 250), (500, 250), (750, 250)]
    assert primitive_probe.batches(7, 3) == [(0, 3), (3, 3), (6, 1)]


def test_run_cell_keeps_the_sequences_of_a_batch_cut_short():
    calls = []

    def launch(argv, target, timeout):
        calls.append(argv[1:])
        first, count = int(argv[3]), int(argv[4])
        n = count if first == 0 else 1  # the second batch dies after one sequence
        out = "".join(f"seq={i} end=exit:0 prim={8 if i % 2 else 0} attempts=0\n" for i in range(first, first + n))
        status = "exited" if first == 0 else "timeout"
        return SimpleNamespace(status=status, error="", user_s=0.25, sys_s=0.5), out, "", ""

    rows = primitive_probe.run_cell(SimpleNamespace(id="fake"), "/bin/driver", "overflow", "heap-leak",
                                    sequences=8, batch=4, seed=7, launch=launch)
    assert calls == [["overflow", "heap-leak", "0", "4", "7"], ["overflow", "heap-leak", "4", "4", "7"]]
    anyrow = next(r for r in rows if r["primitive"] == "any")
    assert anyrow["sequences"] == 5 and anyrow["count"] == 2 and anyrow["allocator"] == "fake"
    assert anyrow["cpu_s"] == 1.5  # both batches' CPU time


def test_run_cell_reports_a_wrong_malloc_instead_of_counting():
    def launch(argv, target, timeout):
        return (SimpleNamespace(status="exited", error="", user_s=0.1, sys_s=0.0),
                "seq=0 end=exit:0 prim=0 attempts=0\n", "", "libc.so.6")

    rows = primitive_probe.run_cell(SimpleNamespace(id="x"), "/bin/d", "control", "none", sequences=2, launch=launch)
    assert rows == [{"allocator": "x", "bug_class": "control", "capability": "none", "seed": 1, "primitive": "any",
                     "sequences": 0, "count": 0, "detail": "wrong malloc: libc.so.6"}]


@pytest.fixture(scope="module")
def driver():
    from analysis.harness.security.probes import probe_binary

    return probe_binary("primitive_sequences.c")


def run_driver(driver, *args):
    proc = subprocess.run([str(driver), *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-500:]
    return PR.parse_sequences(proc.stdout)


def test_driver_control_finds_nothing_under_glibc(driver):
    seqs = run_driver(driver, "control", "none", "0", "200")
    assert len(seqs) == 200 and not any(s["prim"] for s in seqs)
    assert all(s["end"] == "exit:0" for s in seqs)


def test_driver_heap_leak_undoes_safe_linking_under_glibc(driver):
    leak = run_driver(driver, "write-after-free", "heap-leak", "0", "300")
    blind = run_driver(driver, "write-after-free", "none", "0", "300")
    chosen = PR.PRIMITIVES["chosen-address"]
    assert sum(bool(s["prim"] & chosen) for s in leak) >= 10
    assert not any(s["prim"] & chosen for s in blind)


def test_driver_is_reproducible_for_a_deterministic_allocator(driver):
    a = run_driver(driver, "double-free", "none", "10", "50", "3")
    b = run_driver(driver, "double-free", "none", "10", "50", "3")
    assert [s["seq"] for s in a] == list(range(10, 60))
    assert [(s["end"].split(":")[:2], s["prim"]) for s in a] == [(s["end"].split(":")[:2], s["prim"]) for s in b]


def test_driver_rejects_bad_arguments_in_one_line(driver):
    proc = subprocess.run([str(driver), "overflow", "root", "0", "10"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "usage" in proc.stderr


@pytest.mark.allocators
def test_probe_run_writes_primitives_csv_and_resumes_without_duplicates(tmp_path, monkeypatch, capsys):
    import argparse
    import csv
    import json

    from analysis.contract.schema import PRIMITIVE_COLUMNS
    from analysis.harness.security import probes as P

    monkeypatch.setattr(primitive_probe, "SEQUENCES", 30)
    monkeypatch.setattr(primitive_probe, "BATCH", 20)
    parser = argparse.ArgumentParser()
    P.add_arguments(parser)
    args = parser.parse_args(["--allocators", "glibc", "--probes", "primitive-sequences", "--jobs", "1",
                              "--out", str(tmp_path / "run")])
    assert P.run(args) == 0
    with open(tmp_path / "run" / "primitives.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == PRIMITIVE_COLUMNS
    assert len(rows) == len(primitive_probe.CELLS) * (len(PR.PRIMITIVES) + 2)  # and any, strong
    assert {r["sequences"] for r in rows} == {"30"}
    assert all(float(r["cpu_s"]) > 0 for r in rows)  # the launcher's rusage covers the forked sequences
    assert not PR.false_positives(rows)
    assert not (tmp_path / "run" / "probes.csv").exists()  # no probe rows: no table to be taken as the probe run
    params = json.loads((tmp_path / "run" / "run.json").read_text())["params"]
    assert params["probes"] == []  # the probe design merge compares runs by leaves the primitives out
    assert P.run(args) == 0  # everything is there: nothing runs again
    with open(tmp_path / "run" / "primitives.csv") as fh:
        assert len(list(csv.DictReader(fh))) == len(rows)


def planted(allocator, bug_class, capability, counts, sequences=1000):
    """The rows of one cell with the given primitive counts (any: the sum of the allocator's primitives)."""
    rows = []
    anyc = sum(counts.get(p, 0) for p in PR.ALLOCATOR_PRIMITIVES)
    for p in (*PR.PRIMITIVES, PR.ANY):
        k = anyc if p == PR.ANY else counts.get(p, 0)
        rows.append({"allocator": allocator, "bug_class": bug_class, "capability": capability, "primitive": p,
                     "sequences": str(sequences), "count": str(k), "rate": str(k / sequences), "seed": "1",
                     "detected": "0", "median_attempts": "", "rate_ci_low": "", "rate_ci_high": ""})
    return rows


def test_knockouts_claims_and_false_positives_on_planted_rows(tmp_path):
    from analysis.publish.security import primitives

    rows = (planted("glibc-no-tcache-key", "double-free", "none", {"overlap": 40})
            + planted("glibc-built", "double-free", "none", {})
            + planted("secure", "double-free", "heap-leak", {"overlap": 3})
            + planted("secure", "write-after-free", "heap-leak", {"chosen-address": 9})
            + planted("secure", "write-after-free", "none", {})
            + planted("broken", "control", "none", {"overlap": 1}))
    claims = {"secure": ("double-free-detect", "freelist-protect"), "glibc-built": ("double-free-detect",)}
    ko = PR.knockout_checks(rows)
    assert ko == [{"allocator": "glibc-no-tcache-key", "control": "glibc-built", "bug_class": "double-free",
                   "capability": "none", "primitive": "overlap", "count": 40, "sequences": 1000, "rate": 0.04,
                   "control_rate": 0.0, "found": True}]
    found = PR.claim_disagreements(rows, claims)
    # freelist-protect claims only the blind attacker: the heap leak's chosen address is no disagreement
    assert [(d["allocator"], d["defence"], d["capability"]) for d in found] == [("secure", "double-free-detect",
                                                                                 "heap-leak")]
    assert [r["allocator"] for r in PR.false_positives(rows)] == ["broken"]
    for r in rows:  # intervals and the strong primitives, as the driver's rows have them
        r["rate_ci_low"], r["rate_ci_high"] = map(str, PR.wilson(int(r["count"]), int(r["sequences"])))
    rows += [{**r, "primitive": "strong"} for r in rows if r["primitive"] == "chosen-address"]
    gains = PR.leak_gains(rows)
    assert [(g["allocator"], g["bug_class"], g["rate_heap_leak"]) for g in gains] == [("secure", "write-after-free",
                                                                                       0.009)]
    numbers = primitives.write_outputs(rows, tmp_path, claims=claims)
    assert numbers["disagreeing_allocators"] == ["secure"] and numbers["none_found"] == ["broken", "glibc-built"]
    assert (tmp_path / "primitives_matrix.svg").stat().st_size > 1000
    text = (tmp_path / "primitives_disagreements.csv").read_text()
    assert "secure,double-free-detect,1,overlap after double-free (heap-leak): 3/1000" in text


def test_reported_rows_take_each_allocator_from_its_newest_complete_run(tmp_path):
    import csv
    import json

    from analysis.contract.schema import PRIMITIVE_COLUMNS
    from analysis.errors import HeapcostError
    from analysis.publish.security import primitives

    with pytest.raises(HeapcostError, match="no probe run of the dataset has a primitives.csv"):
        primitives.reported_primitive_rows(tmp_path)
    for run, status, alloc, k in (("20260101T000000Z-probe-security", "complete", "a", 1),
                                  ("20260102T000000Z-probe-security", "complete", "a", 2),
                                  ("20260103T000000Z-probe-security", "running", "a", 3)):
        (tmp_path / run).mkdir()
        (tmp_path / run / "run.json").write_text(json.dumps({"status": status}))
        with open(tmp_path / run / "primitives.csv", "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=PRIMITIVE_COLUMNS, extrasaction="ignore")
            w.writeheader()
            w.writerows({**r, "run_id": run} for r in planted(alloc, "overflow", "none", {"overlap": k}))
    rows = primitives.reported_primitive_rows(tmp_path)
    assert {r["run_id"] for r in rows} == {"20260102T000000Z-probe-security"}


def test_a_dataset_without_primitives_leaves_a_note_not_numbers(tmp_path):
    import json

    from analysis.publish.security import primitives

    primitives.write_absent(tmp_path, "no probe run with a primitives.csv")
    assert json.loads((tmp_path / "primitives_numbers.json").read_text()) == {
        "absent": "no probe run with a primitives.csv"}


def test_the_overflow_sizes_the_paper_states_are_the_drivers():
    import re

    from analysis.paths import PROBES_DIR

    source = (PROBES_DIR / "primitive_sequences.c").read_text()
    sizes = re.search(r"static const size_t ns\[\] = \{([^}]*)\}", source).group(1)
    assert tuple(int(x) for x in sizes.split(",")) == PR.OVERFLOW_BYTES
