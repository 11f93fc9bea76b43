import csv
import shutil

import pytest

from analysis.harness.mechanisms import callgrind
from analysis.harness.timing import measure
from analysis.harness.workloads.builtin import WORKLOADS

pytestmark = [pytest.mark.valgrind, pytest.mark.allocators, pytest.mark.slow]

SAMPLE = """version: 1
creator: callgrind-3.19.0
cmd: ./x
events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
fn=(1) main
1 10 2 3 0 1 0 0 0 0
summary: 1000 200 300 5 40 6 5 7 8
totals: 1000 200 300 5 40 6 5 7 8
"""


def test_parse_totals_reads_the_events_we_publish():
    assert callgrind.parse_totals(SAMPLE) == {"instructions": 1000, "data_reads": 200, "data_writes": 300,
                                              "d1_read_misses": 40, "d1_write_misses": 6}
    with pytest.raises(ValueError):
        callgrind.parse_totals("version: 1\n")


def test_sum_over_processes(tmp_path):
    (tmp_path / "callgrind.out.1").write_text(SAMPLE)
    (tmp_path / "callgrind.out.2").write_text(SAMPLE)
    assert callgrind.sum_outputs(tmp_path)["instructions"] == 2000


def test_malloc_calls_are_counted_exactly():
    calls = callgrind.count_calls(WORKLOADS["small-loop"], 0.001, timeout=60)
    # small-loop at scale s: rounds x 10 mallocs and 10 frees (see workloads/README.md)
    assert calls["malloc_calls"] >= 10 and calls["free_calls"] >= 10
    assert calls["malloc_calls"] % 10 in (0, 1)  # 10 per round, plus at most one from stdio
    assert calls == callgrind.count_calls(WORKLOADS["small-loop"], 0.001, timeout=60)


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind not installed yet: `make system-deps` installs it")
def test_callgrind_counts_are_exact_and_scudo_is_recorded_missing(tmp_path):
    runs = tmp_path / "runs"

    def once():
        run_dir = measure.run_campaign(profile="smoke", mode="callgrind", allocators="glibc,jemalloc,scudo",
                                       workloads="small-loop", runs_dir=runs, progress=False, seed=1)
        from analysis.publish.results.summary import run_summary

        assert set(run_summary(run_dir)["allocator"]) == {"glibc", "jemalloc", "scudo"}
        with open(run_dir / "counts.csv", newline="") as fh:
            return {r["allocator"]: r for r in csv.DictReader(fh)}

    first, second = once(), once()
    for aid in ("glibc", "jemalloc"):
        assert first[aid]["status"] == "ok", first[aid]
        assert int(first[aid]["instructions"]) > 0
        assert first[aid]["instructions"] == second[aid]["instructions"]  # deterministic
        # small-loop is ten malloc and ten free in a loop: most of its instructions are the allocator's
        assert 0.5 * int(first[aid]["instructions"]) < int(first[aid]["alloc_instructions"]) < int(first[aid]["instructions"])
        assert first[aid]["alloc_instructions"] == second[aid]["alloc_instructions"]
    assert first["scudo"]["status"] == "missing" and "under valgrind" in first["scudo"]["reason"]
