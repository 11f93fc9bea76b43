"""The store-sequence microbenchmark (python -m analysis mechanism): the program's output parsed, its rows written
as a run of kind `mechanism` that the dataset takes in, the program built and run at a tiny repetition count, and
bad input refused in one line. Nothing here depends on how fast this host is."""
import json
import subprocess

import pytest

from analysis.contract.run_check import check_readable
from analysis.contract.schema import STORE_SEQUENCE_COLUMNS, STORE_SEQUENCES, WORKING_SETS, read_table
from analysis.errors import HeapcostError
from analysis.harness.mechanisms import store_sequence as SS
from conftest import cli_here

CANNED = """# heapcost-store-sequence 1 heap_kib=2048 target_us=5000 blocks=1 repetitions=0 cpu=1
block\twarmup\tworking_set\tsequence\tbytes\trepetitions\telapsed_ns
0\t1\thot\trep-stosb\t256\t1000\t22000
0\t1\thot\tmemset-call\t256\t4000\t16000
1\t0\thot\tmemset-call\t256\t4000\t15000
1\t0\thot\trep-stosb\t256\t1000\t21000
# done 4
"""


def test_the_programs_rows_are_read_with_their_numbers():
    rows = SS.parse_output(CANNED, expected_rows=4)
    assert rows[2] == {"block": 1, "warmup": 0, "working_set": "hot", "sequence": "memset-call", "bytes": 256,
                       "repetitions": 4000, "elapsed_ns": 15000}
    table = SS.table_rows(rows, "R")
    assert [r["seq"] for r in table] == [0, 1, 2, 3] and table[2]["ns"] == "3.750" and table[3]["ns"] == "21.000"
    assert set(table[0]) == set(STORE_SEQUENCE_COLUMNS)


@pytest.mark.parametrize("text, message", [
    ("", "no heading line"),
    (CANNED.replace("elapsed_ns\n", "elapsed\n"), "line 2 is not its header"),
    (CANNED.replace("# done 4\n", ""), "no end line"),
    (CANNED.replace("# done 4", "# done 5"), "says 5 rows and holds 4"),
    (CANNED.replace("\t22000", "\t22k"), "line 3: elapsed_ns '22k' is not a whole number"),
    (CANNED.replace("rep-stosb\t256\t1000\t21000", "rep-movsb\t256\t1000\t21000"), "line 6: unknown sequence"),
    (CANNED.replace("\t1000\t22000", "\t0\t22000"), "line 3: repetitions, elapsed_ns or warmup out of range"),
    (CANNED.replace("0\t1\thot\trep-stosb\t256\t1000\t22000", "0\t1\thot\trep-stosb\t256"), "line 3: 5 fields"),
    (CANNED + "1\t0\thot\tnone\t16\t1\t1\n", "goes on after its end"),
])
def test_output_that_is_not_the_programs_is_refused_naming_the_line(text, message):
    with pytest.raises(HeapcostError, match=message):
        SS.parse_output(text)


def test_a_run_with_fewer_cells_than_asked_is_refused():
    with pytest.raises(HeapcostError, match="measured 4 cells, expected 6"):
        SS.parse_output(CANNED, expected_rows=6)


@pytest.mark.parametrize("value, sizes", [("", list(SS.SIZES)), ("4096,16", [16, 4096]), (" 32 , 48", [32, 48])])
def test_sizes_are_multiples_of_sixteen(value, sizes):
    assert SS.parse_sizes(value) == sizes


@pytest.mark.parametrize("args, message", [
    (["--sizes", "17"], "17 is not a multiple of 16"),
    (["--sizes", "16,abc"], "'abc' is not a whole number of bytes"),
    (["--sizes", "16,16"], "names a value twice"),
    (["--sizes", "131072"], "from 16 to 65536"),
    (["--blocks", "0"], "--blocks must be a whole number of at least 1"),
    (["--target-us", "x"], "--target-us must be"),
    (["--sequences", "rep-movsb"], "unknown sequence(s) rep-movsb; valid: none, rep-stosb"),
    (["--working-sets", "cold"], "unknown working set(s) cold"),
    (["--heap-kib", "32", "--sizes", "4096"], "holds fewer than 16 blocks of 4096 bytes"),
    (["--seed", "-1"], "SEED must be a non-negative integer"),
    (["--pin", "x"], "PIN must be auto, none or a CPU number"),
])
def test_bad_input_is_one_line_and_a_non_zero_exit(args, message, runs_dir):
    result = cli_here("mechanism", "--force", *args)
    assert result.returncode == 2, result
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("heapcost: error: ")
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and not any(runs_dir.iterdir())


@pytest.mark.parametrize("args, message", [
    (["--sizes", "17"], "a size must be a multiple of 16 from 16 to 65536 bytes: 17"),
    (["--sizes", "16", "--sequences", "none,bogus"], "unknown sequence: bogus"),
    (["--sizes", "16", "--blocks"], "an option without its value: --blocks"),
    (["--sizes", "16", "--frobnicate", "1"], "unknown option: --frobnicate"),
])
def test_the_program_refuses_bad_arguments_in_one_line(args, message):
    result = subprocess.run([str(SS.binary()), *args], capture_output=True, text=True)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == f"heapcost-store-sequence: {message}"


def test_the_program_measures_every_cell_once_a_block_at_a_tiny_repetition_count():
    argv = SS.command(SS.binary(), [16, 48], blocks=2, target_us=1, heap_kib=64, seed=7, repetitions=3)
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    rows = SS.parse_output(result.stdout, expected_rows=3 * 2 * len(STORE_SEQUENCES) * len(WORKING_SETS))
    cells = {(r["working_set"], r["bytes"], r["sequence"]) for r in rows}
    assert cells == {(ws, n, s) for ws in WORKING_SETS for n in (16, 48) for s in STORE_SEQUENCES}
    for block in (0, 1, 2):
        assert sorted((r["working_set"], r["bytes"], r["sequence"]) for r in rows if r["block"] == block) == sorted(cells)
    assert all(r["repetitions"] == 3 and r["warmup"] == (r["block"] == 0) for r in rows)
    # a group's sequences run back to back: the five rows of one (working set, size) are adjacent in every block
    groups = [(r["block"], r["working_set"], r["bytes"]) for r in rows]
    assert len([g for k, g in enumerate(groups) if k == 0 or groups[k - 1] != g]) == len(set(groups))
    again = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    order = [(r["working_set"], r["bytes"], r["sequence"]) for r in SS.parse_output(again.stdout)]
    assert order == [(r["working_set"], r["bytes"], r["sequence"]) for r in rows]  # the seed fixes the order


def test_a_mechanism_run_is_a_run_the_dataset_takes_in(runs_dir):
    """A real run at a tiny repetition count: run.json of kind mechanism with its parameters, machine.json, the
    table with our columns; the run passes the intake's check and its summary prints."""
    run_dir = SS.measure(sizes="16,256", blocks=5, repetitions=2, heap_kib=64, seed=3, force="1",
                         runs_dir=runs_dir, sequences="none,rep-stosb,memset-call")
    info = json.loads((run_dir / "run.json").read_text())
    assert run_dir.parent == runs_dir and run_dir.name.endswith("-mechanism-store-sequence")
    assert info["kind"] == "mechanism" and info["status"] == "complete" and info["seed"] == 3
    assert info["params"]["sizes"] == [16, 256] and info["params"]["sequences"] == ["none", "rep-stosb", "memset-call"]
    assert (run_dir / "machine.json").is_file() and info["pinning"]
    table = read_table(run_dir / "store_sequence.csv")
    assert list(table.columns) == STORE_SEQUENCE_COLUMNS and len(table) == 6 * 2 * 3 * 2
    assert check_readable(run_dir.name, run_dir)["kind"] == "mechanism"
    lines = SS.summary_lines(run_dir)
    assert any(line.startswith("hot, 256 bytes: rep-stosb - memset-call = ") for line in lines)
    # a dataset holding it validates: the table against its Table Schema, no folder of this machine in any file
    import shutil

    from analysis.publish.dataset.datapackage import write_datapackage
    from analysis.publish.dataset.validate import validate

    data = runs_dir.parent / "data"
    shutil.copytree(run_dir, data / "runs" / run_dir.name)
    write_datapackage(data)
    assert validate(data) == []


def test_a_program_that_fails_leaves_no_run_behind(runs_dir):
    def failing(argv, **kwargs):
        return subprocess.CompletedProcess(argv, 2, "", "heapcost-store-sequence: out of memory\n")

    with pytest.raises(HeapcostError, match="the store-sequence program failed: heapcost-store-sequence: out of memory"):
        SS.measure(sizes="16", blocks=1, force="1", runs_dir=runs_dir, run=failing)
    assert [p.name for p in runs_dir.iterdir() if not p.name.startswith(".")] == []
