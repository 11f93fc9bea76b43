"""The one migration that writes the published runs' paths portably: it changes the paths and nothing
else, and afterwards no folder of a measuring machine is left."""
import csv
import hashlib
import shutil
import subprocess
import sys

import pytest

from analysis.contract import migrate_paths
from analysis.paths import DATA_DIR, machine_paths, portable_text
from conftest import REPO

# another machine's folders, as the runs measured before the migration recorded them
ELSEWHERE = {"{cache}/": "/home/alice/.cache/heapcost/", "{venv}/": "/srv/alice/heapcost/.venv/",
             "{tmp}/": "/tmp/heapcost-nb-k2j4x9/"}
RUN_WITH_PAIRS = "20261130T134138Z-time-quick"
RUN_WITH_COUNTS = "20261130T030730Z-callgrind-full"


def as_measured_elsewhere(run_dir):
    """The published run as it looked before the migration, on a machine with a checkout in /srv/alice."""
    for path in run_dir.iterdir():
        text = path.read_bytes().decode()  # bytes: the CSVs' CRLF line ends stay
        for placeholder, folder in ELSEWHERE.items():
            text = text.replace(placeholder, folder)
        text = text.replace('"data/runs/', '"/srv/alice/heapcost/data/runs/')
        text = text.replace('"notebooks/measure.ipynb"', '"/srv/alice/heapcost/notebooks/measure.ipynb"')
        path.write_bytes(text.encode())


def column_digests(path) -> dict:
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return {col: hashlib.sha256("\x1f".join(r[col] for r in rows).encode()).hexdigest() for col in rows[0]}


@pytest.fixture
def old_runs(tmp_path):
    data = tmp_path / "data"
    for run in (RUN_WITH_PAIRS, RUN_WITH_COUNTS):
        shutil.copytree(DATA_DIR / "runs" / run, data / "runs" / run)
        as_measured_elsewhere(data / "runs" / run)
    return data


def test_the_copies_hold_absolute_paths_as_the_old_runs_did(old_runs):
    pairs = old_runs / "runs" / RUN_WITH_PAIRS / "pairs.csv"
    counts = old_runs / "runs" / RUN_WITH_COUNTS / "counts.csv"
    assert "/home/alice/.cache/heapcost/allocators/" in pairs.read_text() + counts.read_text()
    assert machine_paths((old_runs / "runs" / RUN_WITH_COUNTS / "run.json").read_text())


def test_migration_changes_paths_and_no_measured_column(old_runs):
    tables = sorted((old_runs / "runs").glob("*/*.csv"))
    before = {p: column_digests(p) for p in tables}
    with open(tables[0], newline="") as fh:
        old_rows = list(csv.DictReader(fh))
    changed, left = migrate_paths.migrate(old_runs)
    assert left == [] and len(changed) >= 4
    for p in tables:
        after = column_digests(p)
        assert after.keys() == before[p].keys()
        moved = [c for c in after if after[c] != before[p][c]]
        assert moved and all(c.startswith("malloc_lib") for c in moved), (p.name, moved)
    with open(tables[0], newline="") as fh:
        new_rows = list(csv.DictReader(fh))
    libs = [c for c in new_rows[0] if c.startswith("malloc_lib")]
    assert [[portable_text(r[c]) for c in libs] for r in old_rows] == [[r[c] for c in libs] for r in new_rows]
    assert any(r[c].startswith("{cache}/allocators/") for r in new_rows for c in libs)


def test_migrating_the_old_copies_gives_back_the_published_bytes(old_runs):
    migrate_paths.migrate(old_runs)
    for run in (RUN_WITH_PAIRS, RUN_WITH_COUNTS):
        for path in sorted((DATA_DIR / "runs" / run).iterdir()):
            assert (old_runs / "runs" / run / path.name).read_bytes() == path.read_bytes(), path.name


def test_migration_is_idempotent_and_keeps_line_endings(tmp_path):
    run = tmp_path / "data" / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "trials.csv").write_bytes(b"seq,malloc_lib,wall_s\r\n0,/root/.cache/heapcost/allocators/a/lib.so,0.1\r\n"
                                     b"1,/lib/x86_64-linux-gnu/libc.so.6,0.2\r\n")
    assert migrate_paths.migrate(tmp_path / "data") == ([run / "trials.csv"], [])
    want = b"seq,malloc_lib,wall_s\r\n0,{cache}/allocators/a/lib.so,0.1\r\n1,/lib/x86_64-linux-gnu/libc.so.6,0.2\r\n"
    assert (run / "trials.csv").read_bytes() == want
    assert migrate_paths.migrate(tmp_path / "data") == ([], [])


def test_migration_names_a_file_of_another_folder_by_its_name(tmp_path):
    run = tmp_path / "data" / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "run.json").write_text('{"note": "/home/bob/elsewhere/lib.so"}')
    changed, left = migrate_paths.migrate(tmp_path / "data")
    assert [p.name for p in changed] == ["run.json"] and left == []
    assert (run / "run.json").read_text() == '{"note": "{elsewhere}/lib.so"}'


def test_cli_bad_input_is_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "analysis.contract.migrate_paths", str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no runs/ folder" in done.stderr


@pytest.mark.slow  # reads the published dataset or runs a command end to end: in make test, not test-fast
def test_published_files_name_no_folder_of_a_measuring_machine():
    found = [f"{p.relative_to(REPO)}: {m}"
             for top in (REPO / "data", REPO / "paper" / "generated")
             for p in sorted(top.rglob("*")) if p.is_file() and p.suffix in (".csv", ".json", ".ipynb", ".svg", ".md")
             for m in machine_paths(p.read_text(errors="replace"))]
    assert found == []


@pytest.mark.slow  # end to end, over 2.5 s on a 2-core host: in make test, not test-fast
def test_validate_refuses_an_absolute_path_of_the_measuring_machine(tmp_path):
    from analysis.publish.dataset.datapackage import write_datapackage
    from conftest import cli, cli_here

    data = tmp_path / "data"
    shutil.copytree(DATA_DIR / "runs" / RUN_WITH_COUNTS, data / "runs" / RUN_WITH_COUNTS)
    write_datapackage(data)
    assert cli_here("validate", str(data)).returncode == 0  # in this process; the refusal below is the real CLI
    as_measured_elsewhere(data / "runs" / RUN_WITH_COUNTS)
    write_datapackage(data)  # the checksums agree: only the paths are wrong
    r = cli("validate", str(data))
    assert r.returncode == 1
    refused = [line for line in r.stdout.splitlines() if "folder of the measuring machine" in line]
    assert {line.split(": names")[0] for line in refused} == {f"invalid: runs/{RUN_WITH_COUNTS}/{name}"
                                                        for name in ("counts.csv", "run.json")}
    assert "/home/" in refused[0] and "migrate_paths" in refused[0]


@pytest.mark.parametrize("text, want", [
    ("/home/alice/.cache/heapcost/allocators/x/build/libc.so.6", "{cache}/allocators/x/build/libc.so.6"),
    ("/srv/alice/heapcost/.venv/lib/python3.11/libmimalloc.so.3", "{venv}/lib/python3.11/libmimalloc.so.3"),
    ("$HEAPCOST_CACHE/allocators/a/lib.so,$VENV/lib/b.so", "{cache}/allocators/a/lib.so,{venv}/lib/b.so"),
    ('"/tmp/heapcost-nb-k2j4x9/run_dir.txt"', '"{tmp}/run_dir.txt"'),
    ('"/home/alice/heapcost-2/data/runs/r1\\n"', '"data/runs/r1\\n"'),  # a clone named heapcost-*: not a temp folder
    ("\x1b[32m/home/alice/src/heapcost/analysis/publish/results/summary.py:17", "\x1b[32manalysis/publish/results/summary.py:17"),
    ("/usr/lib/x86_64-linux-gnu/libc.so.6 + perl malloc", "/usr/lib/x86_64-linux-gnu/libc.so.6 + perl malloc"),
    ("see https://example.org/home/tmp/x and musl-static", "see https://example.org/home/tmp/x and musl-static"),
])
def test_portable_text_places_another_machines_folders(text, want):
    assert portable_text(text) == want
    assert machine_paths(want) == []


def test_portable_text_places_this_machines_own_roots(monkeypatch, tmp_path):
    monkeypatch.setenv("HEAPCOST_CACHE", str(tmp_path / "store"))
    assert portable_text(f"{tmp_path}/store/allocators/a/lib.so") == "{cache}/allocators/a/lib.so"
    assert portable_text(f"{sys.prefix}/lib/x.so") == "{venv}/lib/x.so"
    assert portable_text(f"{REPO}/notebooks/measure.ipynb") == "notebooks/measure.ipynb"


def json_leaves(value, at=()):
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in json_leaves(item, at + (key,)).items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in json_leaves(item, at + (i,)).items()}
    return {at: value}


def test_migration_changes_only_the_absolute_paths_of_run_json(old_runs):
    import json

    files = sorted((old_runs / "runs").glob("*/run.json"))
    before = {p: json_leaves(json.loads(p.read_text())) for p in files}
    migrate_paths.migrate(old_runs)
    changed = {}
    for p in files:
        after = json_leaves(json.loads(p.read_text()))
        assert after.keys() == before[p].keys()
        changed.update({(p.parent.name, *k): (before[p][k], v) for k, v in after.items() if v != before[p][k]})
    assert changed and all(machine_paths(old) and not machine_paths(new) for old, new in changed.values()), changed
    # a library's own folder as a substring of its path is not a machine path: it stays
    assert '"expect_malloc": "/glibc-built-' in (old_runs / "runs" / RUN_WITH_PAIRS / "run.json").read_text()


def test_a_library_brought_from_a_home_folder_is_named_by_its_file():
    from analysis.paths import portable_path

    assert portable_path("/home/bob/src/hardened_malloc/out/libhardened_malloc.so") == \
        "{elsewhere}/libhardened_malloc.so"
    assert portable_path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2") == "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"


def test_a_brought_library_outside_every_known_folder_is_named_by_its_file():
    """EXTRA_ALLOCATORS as papermill and run.json record it: a library built by hand in some folder of the
    machine keeps its name and loses its folder; system libraries and the known roots keep their form."""
    from analysis.paths import machine_paths, portable_text

    raw = ("hardened-72fb357=/work/ext/lib/libhardened_malloc-72fb357.so,"
           "omalloc-1.299=/home/someone/build/omalloc/lib/libomalloc-1.299.so,glibc-copy=/lib/x86_64-linux-gnu/libc.so.6")
    text = portable_text(raw)
    assert text == ("hardened-72fb357={elsewhere}/libhardened_malloc-72fb357.so,"
                    "omalloc-1.299={elsewhere}/libomalloc-1.299.so,glibc-copy=/lib/x86_64-linux-gnu/libc.so.6")
    assert machine_paths(text) == [] and portable_text(text) == text
    assert portable_text('"/root/x/lib.so"') == '"{elsewhere}/lib.so"'
