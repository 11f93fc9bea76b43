"""Brought technique programs (analysis/harness/techniques.py): a tiny program written here, compiled with gcc at
test time, that succeeds, fails its own assertion, is stopped by glibc, segfaults or sleeps, run under glibc; and
bad input (a missing folder, a folder with no program) as one line and a non-zero exit."""
import csv
import io
import json
import shutil
import subprocess
from contextlib import redirect_stderr, redirect_stdout
from types import SimpleNamespace

import pytest

from analysis.errors import HeapcostError
from analysis.harness import techniques
from analysis.paths import machine_paths

SOURCE = r"""
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    const char *name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    char *a = malloc(24);
    if (!strcmp(name, "succeeds")) { free(a); return 0; }
    if (!strcmp(name, "fails_its_check")) assert(a == NULL);
    if (!strcmp(name, "double_free")) { free(a); free(a); return 0; }
    if (!strcmp(name, "segfaults")) { *(volatile int *)8 = 1; }
    if (!strcmp(name, "sleeps")) sleep(60);
    return 0;
}
"""
NAMES = ("succeeds", "fails_its_check", "double_free", "segfaults", "sleeps")


def _run_cli(*args):
    """(exit code, stdout, stderr) of the CLI's main() in this process."""
    from analysis.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def brought(tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    folder = tmp_path / "built"
    folder.mkdir()
    src = tmp_path / "technique.c"
    src.write_text(SOURCE)
    binary = tmp_path / "technique"
    subprocess.run(["gcc", "-O0", "-o", str(binary), str(src)], check=True)
    for name in NAMES:
        shutil.copy(binary, folder / name)
    (folder / "technique.c").write_text(SOURCE)  # not a program: left alone
    (folder / "provenance.json").write_text(json.dumps({"upstream": "test/techniques", "revision": "abc123",
                                                        "flags": "-O0", "compiler": "gcc"}))
    return folder


def test_bring_finds_the_programs_with_their_sha256_and_records_no_folder_of_this_machine(brought):
    b = techniques.bring(brought)
    assert [t.id for t in b.techniques] == sorted(NAMES)
    record = b.record()
    # portable, as brought libraries are: {tmp}/... here, {elsewhere}/built from a home or work folder
    assert record["folder"].startswith("{") and record["folder"].endswith("/built")
    assert not machine_paths(json.dumps(record))
    assert record["provenance"] == {"upstream": "test/techniques", "revision": "abc123", "compiler": "gcc",
                                    "flags": "-O0"}
    assert set(record["programs"]) == set(NAMES) and all(len(h) == 64 for h in record["programs"].values())


@pytest.mark.slow
def test_each_ending_is_classified_under_glibc(brought):
    from analysis.harness.allocators.catalog import load_catalog
    from analysis.harness.probes import target_for

    target = target_for(load_catalog()["glibc"])
    b = {t.id: t for t in techniques.bring(brought).techniques}
    expected = {"succeeds": "works", "fails_its_check": "not-applicable", "double_free": "stopped",
                "segfaults": "crashes"}
    for name, outcome in expected.items():
        row = techniques.technique_cell(b[name], target, 2, timeout=20)
        assert (row["outcome"], row["runs"], row["outcomes"]) == (outcome, 2, f"{outcome}=2"), row
    assert "free(): double free detected in tcache 2" in techniques.technique_cell(
        b["double_free"], target, 1, timeout=20)["detail"]
    hung = techniques.technique_cell(b["sleeps"], target, 5, timeout=1)
    assert hung["outcome"] == "hangs" and hung["runs"] == techniques.HANG_LIMIT


@pytest.mark.slow
def test_a_techniques_only_probe_run_writes_techniques_csv_and_its_provenance(brought, tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    out = runs / "trial"
    (brought / "sleeps").unlink()
    code, stdout, stderr = _run_cli("probe", "--probes", "none", "--techniques", str(brought), "--allocators",
                                    "glibc", "--runs", "2", "--jobs", "1", "--out", str(out))
    assert code == 0, stderr
    assert not (out / "probes.csv").exists()
    rows = list(csv.DictReader(open(out / "techniques.csv")))
    assert {(r["technique"], r["outcome"]) for r in rows} == {
        ("succeeds", "works"), ("fails_its_check", "not-applicable"), ("double_free", "stopped"),
        ("segfaults", "crashes")}
    info = json.loads((out / "run.json").read_text())
    assert info["status"] == "complete" and info["params"]["techniques"]["provenance"]["revision"] == "abc123"
    assert rows[0]["program_sha256"] == info["params"]["techniques"]["programs"][rows[0]["technique"]]


def test_a_missing_folder_is_one_line_and_a_non_zero_exit(tmp_path):
    code, _, err = _run_cli("probe", "--probes", "none", "--techniques", str(tmp_path / "nowhere"))
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("heapcost: error: techniques folder") and "does not exist" in err


def test_a_folder_without_programs_is_one_line_and_a_non_zero_exit(tmp_path):
    (tmp_path / "README").write_text("nothing to run\n")
    code, _, err = _run_cli("probe", "--probes", "none", "--techniques", str(tmp_path))
    assert code == 2 and err.count("\n") == 1 and "holds no executable program" in err


def test_probes_none_without_techniques_runs_nothing_and_says_so():
    code, _, err = _run_cli("probe", "--probes", "none")
    assert code == 2 and err == "heapcost: error: --probes none runs nothing without --techniques DIR\n"


def test_a_provenance_file_that_is_not_json_is_refused(tmp_path):
    (tmp_path / "provenance.json").write_text("{not json")
    with pytest.raises(HeapcostError, match="provenance.json is not readable JSON"):
        techniques.read_provenance(tmp_path)


def test_a_statically_linked_allocator_variant_is_not_run():
    target = SimpleNamespace(unavailable="", variant="musl")
    assert "cannot be relinked" in techniques.why_not(target)
    assert techniques.why_not(SimpleNamespace(unavailable="not built yet", variant="glibc")) == "not built yet"
