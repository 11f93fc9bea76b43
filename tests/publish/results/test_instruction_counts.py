"""The allocator's share of a workload's instructions, read from callgrind's call graph."""
import pandas as pd
import pytest

from analysis.harness.mechanisms import callgrind
from analysis.publish.debates.questions import claim_share
from analysis.publish.results.comparisons import per_free
from analysis.publish.results.writer import alloc_shares

# main calls malloc (100 inclusive), realloc (200, which calls malloc: 30 inside it), operator new (80, which
# calls malloc: 60 inside it), strdup (which calls malloc: 40) and a recursion of malloc (malloc'2 inside
# malloc: 7); malloc calls _int_malloc (50, inside malloc). Allocator instructions: 100 + 200 + 80 + 40 = 420.
GRAPH = """version: 1
creator: callgrind-3.19.0
positions: {positions}
events: Ir Dr Dw
summary: 1000 300 200
fn=(1) main
{p} 100 10 5
cfn=(2) malloc
calls=1 {p}
{p} 100 20 10
cfn=(3) realloc
calls=2 {p}
{p} 200 40 20
cfn=(4) operator new(unsigned long)
calls=1 {p}
{p} 80 16 8
cfn=(5) strdup
calls=1 {p}
{p} 55 11 6
fn=(2)
{p} 43 9 4
cfn=(6) _int_malloc
calls=1 {p}
{p} 50 10 5
cfn=(7) malloc'2
calls=1 {p}
{p} 7 1 1
fn=(3)
{p} 170 30 15
cfn=(2)
calls=1 {p}
{p} 30 6 3
fn=(4)
{p} 20 4 2
cfn=(2)
calls=1 {p}
{p} 60 12 6
fn=(5)
{p} 15 3 2
cfn=(2)
calls=1 {p}
{p} 40 8 4
totals: 1000 300 200
"""


@pytest.mark.parametrize("positions,p", [("line", "+1"), ("instr line", "0x10 3")])
def test_only_calls_from_outside_the_allocator_count(positions, p):
    got = callgrind.parse_allocator_calls(GRAPH.format(positions=positions, p=p))
    assert got == {"alloc_instructions": 420, "alloc_data_writes": 10 + 20 + 8 + 4}


def test_summed_with_the_totals_over_processes(tmp_path):
    for pid in (1, 2):
        (tmp_path / f"callgrind.out.{pid}").write_text(GRAPH.format(positions="line", p="*"))
    got = callgrind.sum_outputs(tmp_path)
    assert got["alloc_instructions"] == 840 and got["instructions"] == 2000


@pytest.mark.parametrize("name", ["malloc", "free", "__libc_calloc", "h_realloc", "je_sdallocx", "tc_free",
                                  "mi_malloc", "Perl_mfree", "posix_memalign", "free'2", "_ZdlPvm", "_Znwm",
                                  "operator delete[](void*)", "__GI___libc_free"])
def test_entry_points(name):
    assert callgrind.is_allocator_entry(name)


@pytest.mark.parametrize("name", ["__libc_freeres", "xmalloc", "malloc_consolidate", "_int_free", "freeaddrinfo",
                                  "mallopt", "strdup", "operator<<", "_ZNSt6vectorIiSaIiEE9push_backERKi"])
def test_not_entry_points(name):
    assert not callgrind.is_allocator_entry(name)


def test_output_without_events_is_refused():
    with pytest.raises(ValueError):
        callgrind.parse_allocator_calls("version: 1\n")


def _counts(**extra):
    base = {"run_id": "R", "workload": "w", "status": "ok", "scale": 1, "instructions": 1000, "data_reads": 10,
            "data_writes": 10, "d1_read_misses": 1, "d1_write_misses": 1, "free_calls": 10}
    return pd.DataFrame([{**base, "allocator": "glibc", **extra}, {**base, "allocator": "x", "instructions": 2000,
                                                                 **{k: 2 * v for k, v in extra.items()}}])


def test_share_per_allocator_and_left_empty_for_older_runs():
    pf = per_free(_counts(alloc_instructions=250, alloc_data_writes=3), "glibc")
    assert list(pf["alloc_share"]) == [0.25, 0.25]
    assert list(pf["alloc_instructions_per_free"]) == [25.0, 50.0]
    table = alloc_shares(pf.assign(run_id="R"))
    assert table.set_index("allocator").loc["x", "w"] == "25.0%"
    old = per_free(_counts(), "glibc")
    assert old["alloc_share"].isna().all()
    assert alloc_shares(old.assign(run_id="R")).empty


def test_share_at_which_the_allocator_cost_gives_the_claim():
    assert claim_share(1.025, 1.1) == "25.0%"  # 1 + s (k - 1) = 1.025
    assert claim_share(1.31, 3.0) == "15.5%"
    assert claim_share(1.025, 0.98) == "" and claim_share(None, 1.2) == "" and claim_share(1.1, float("nan")) == ""


def test_versioned_entry_points_are_recognised():
    # callgrind names libc_malloc_debug.so's entry points with their symbol version
    for name in ("malloc@GLIBC_2.2.5", "free@GLIBC_2.2.5", "malloc@GLIBC_2.2.5'2", "calloc@@GLIBC_2.2.5"):
        assert callgrind.is_allocator_entry(name), name
    assert not callgrind.is_allocator_entry("malloc_check@GLIBC_2.2.5")


def test_an_allocator_with_no_instruction_inside_its_entry_points_is_unrecognised_not_zero():
    counts = pd.concat([_counts(alloc_instructions=250, alloc_data_writes=3),
                        _counts(alloc_instructions=0, alloc_data_writes=0).assign(allocator="glibc-debug").iloc[:1]])
    pf = per_free(counts, "glibc").set_index("allocator")
    assert pd.isna(pf.loc["glibc-debug", "alloc_share"]) and bool(pf.loc["glibc-debug", "alloc_unrecognised"])
    assert pf.loc["x", "alloc_share"] == 0.25 and not bool(pf.loc["x", "alloc_unrecognised"])
