"""Brought technique programs (analysis/harness/security/techniques.py): a tiny program written here, compiled with gcc at
test time, that succeeds, fails its own assertion, is stopped by glibc, segfaults or sleeps, run under glibc; the
same built statically with musl-gcc, run under the musl configuration beside the glibc-linked set under glibc, with a
technique the musl set lacks (not-applicable, with the reason); and bad input (a missing folder, a folder with no
program, a musl folder of glibc-linked or stripped programs) as one line and a non-zero exit."""
import csv
import io
import json
import shutil
import subprocess
from contextlib import redirect_stderr, redirect_stdout
from types import SimpleNamespace

import pytest

from analysis.errors import HeapcostError
from analysis.harness.security import techniques
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
    /* a live neighbour keeps musl's mallocng group (a is its first slot): the second free fails its check */
    if (!strcmp(name, "double_free")) { char *b = malloc(24); free(a); free(a); return b == NULL; }
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
    from analysis.harness.security.probes import target_for

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


# ------------------------------------------------------------------------------------------ a set linked against musl
def _musl_set(tmp_path, names=NAMES[:4], provenance=None):
    if shutil.which("musl-gcc") is None:
        pytest.skip("musl-gcc not installed")
    folder = tmp_path / "built-musl"
    folder.mkdir()
    src = tmp_path / "technique-musl.c"
    src.write_text(SOURCE)
    binary = tmp_path / "technique-musl"
    subprocess.run(["musl-gcc", "-static", "-O0", "-g", "-o", str(binary), str(src)], check=True)
    for name in names:
        shutil.copy(binary, folder / name)
    if provenance is not False:
        (folder / "provenance.json").write_text(json.dumps(provenance or {
            "upstream": "test/techniques", "revision": "abc123", "compiler": "musl-gcc", "flags": "-static -O0",
            "libc": "musl", "not_built": {"only_glibc": "only_glibc.c:3:10: fatal error: gnu/libc-version.h: "
                                                        "No such file or directory\ncompilation terminated."}}))
    return folder


@pytest.fixture
def brought_musl(tmp_path):
    return _musl_set(tmp_path)


def test_a_musl_set_is_brought_static_with_its_malloc_read_from_its_symbols(brought_musl):
    b = techniques.bring(brought_musl, "musl")
    assert [t.id for t in b.techniques] == sorted(NAMES[:4]) and all(t.static for t in b.techniques)
    assert {t.malloc for t in b.techniques} == {"mallocng"}  # they call free: mallocng, not lite_malloc
    in_malloc = {name for t in b.techniques for _, _, name, mine in t.functions if mine}
    assert {"__libc_free", "get_meta"} <= in_malloc and "main" not in in_malloc
    record = b.record()
    assert not machine_paths(json.dumps(record)) and record["libc"] == "musl"
    assert record["provenance"]["libc"] == "musl" and record["malloc"] == {n: "mallocng" for n in NAMES[:4]}
    assert record["not_built"] == {"only_glibc": "only_glibc.c:3:10: fatal error: gnu/libc-version.h: "
                                                 "No such file or directory"}  # the compiler's first line
    assert "mallocwho cannot run" in record["malloc_check"] and "faulttrace" in record["fault_record"]


def test_the_musl_configuration_runs_the_musl_set_and_a_missing_build_is_not_applicable(brought, brought_musl):
    from analysis.harness.security.probes import Target

    shutil.copy(brought / "succeeds", brought / "only_glibc")
    glibc, musl = techniques.bring(brought), techniques.bring(brought_musl, "musl")
    target = Target("musl", "musl")
    under_musl = {t.id: t for t in techniques.techniques_for(target, glibc, {"musl": musl})}
    assert set(under_musl) == {*NAMES, "only_glibc"}
    assert under_musl["succeeds"].path.startswith(str(brought_musl)) and under_musl["succeeds"].static
    # a technique of the glibc set with no musl build: not-applicable, no run, the compiler's reason
    row = techniques.technique_cell(under_musl["only_glibc"], target, 20)
    assert (row["outcome"], row["runs"], row["program_sha256"]) == ("not-applicable", 0, "")
    assert row["detail"] == ("does not build against musl: only_glibc.c:3:10: fatal error: gnu/libc-version.h: "
                             "No such file or directory")
    # one missing without a reason in provenance.json: said so
    row = techniques.technique_cell(under_musl["sleeps"], target, 20)
    assert row["outcome"] == "not-applicable" and row["detail"] == (
        "does not build against musl: no musl build of it in the brought folder built-musl")
    # the glibc configurations keep the glibc set; without a musl set, musl's cells are not-run, saying what to bring
    assert techniques.techniques_for(Target("glibc"), glibc, {"musl": musl}) == glibc.techniques
    alone = techniques.technique_cell(glibc.techniques[0], target, 1)
    assert alone["outcome"] == "not-run" and "--techniques-musl" in alone["detail"]


def test_a_probe_run_runs_the_musl_set_under_musl_and_the_glibc_set_under_glibc(brought, brought_musl, tmp_path):
    from analysis.harness.allocators.catalog import load_catalog, resolve

    if not resolve(load_catalog()["musl"]).available:
        pytest.skip("the musl configuration is not available here")
    out = tmp_path / "runs" / "trial"
    (brought / "sleeps").unlink()
    shutil.copy(brought / "succeeds", brought / "only_glibc")
    code, stdout, stderr = _run_cli("probe", "--probes", "none", "--techniques", str(brought), "--techniques-musl",
                                    str(brought_musl), "--allocators", "glibc,musl", "--runs", "1", "--jobs", "1",
                                    "--out", str(out))
    assert code == 0, stderr
    rows = {(r["allocator"], r["technique"]): r for r in csv.DictReader(open(out / "techniques.csv"))}
    info = json.loads((out / "run.json").read_text())
    glibc_sha, musl_sha = info["params"]["techniques"]["programs"], info["params"]["techniques_musl"]["programs"]
    outcome = {k: r["outcome"] for k, r in rows.items()}
    assert outcome == {
        ("glibc", "succeeds"): "works", ("glibc", "fails_its_check"): "not-applicable",
        ("glibc", "double_free"): "stopped", ("glibc", "segfaults"): "crashes", ("glibc", "only_glibc"): "works",
        ("musl", "succeeds"): "works", ("musl", "fails_its_check"): "not-applicable",
        ("musl", "double_free"): "stopped", ("musl", "segfaults"): "crashes", ("musl", "only_glibc"): "not-applicable"}
    for (alloc, tech), r in rows.items():
        expected = "" if tech == "only_glibc" and alloc == "musl" else (glibc_sha if alloc == "glibc" else musl_sha)[tech]
        assert r["program_sha256"] == expected, (alloc, tech)
    # musl's assertion message, mallocng's deliberate crash located by faulttrace, a fault in the program's own code
    assert "Assertion failed: a == NULL" in rows[("musl", "fails_its_check")]["detail"]
    assert "in get_meta (the allocator's code): a privileged hlt" in rows[("musl", "double_free")]["detail"]
    assert rows[("musl", "segfaults")]["detail"] == "1/1 crashes: SIGSEGV at 0x8 in main"
    assert rows[("musl", "only_glibc")]["runs"] == "0" and "does not build against musl" in rows[
        ("musl", "only_glibc")]["detail"]
    assert not machine_paths((out / "run.json").read_text())


def _bad_musl(*args):
    code, _, err = _run_cli("probe", "--probes", "none", "--allocators", "musl", *args)
    assert code == 2 and err.count("\n") == 1 and err.startswith("heapcost: error: "), err
    return err


def test_a_musl_folder_without_programs_is_one_line_and_a_non_zero_exit(brought, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "provenance.json").write_text("{}")
    err = _bad_musl("--techniques", str(brought), "--techniques-musl", str(empty))
    assert "(--techniques-musl) holds no executable program" in err and "musl-gcc -static" in err


def test_a_musl_folder_of_programs_linked_against_glibc_is_one_line_and_a_non_zero_exit(brought):
    err = _bad_musl("--techniques", str(brought), "--techniques-musl", str(brought))
    assert "is dynamically linked against glibc (/lib" in err and "build it with musl-gcc -static" in err


def test_a_stripped_static_program_or_a_provenance_naming_another_libc_is_refused(brought, tmp_path):
    folder = _musl_set(tmp_path, names=("succeeds",), provenance={"libc": "glibc"})
    err = _bad_musl("--techniques", str(brought), "--techniques-musl", str(folder))
    assert "is for musl programs, but its provenance.json says they are linked against glibc" in err
    (folder / "provenance.json").unlink()
    subprocess.run(["strip", str(folder / "succeeds")], check=True)
    with pytest.raises(HeapcostError, match="succeeds .* holds no musl malloc in its symbol table"):
        techniques.bring(folder, "musl")
    # and the static set brought as the glibc one
    with pytest.raises(HeapcostError, match="statically linked.*--techniques-musl"):
        techniques.bring(folder)


def test_a_musl_set_without_the_glibc_one_is_refused(tmp_path):
    err = _bad_musl("--techniques-musl", str(tmp_path))
    assert err == "heapcost: error: --techniques-musl DIR completes a glibc-linked set: give --techniques DIR too\n"


def test_where_ptrace_is_refused_the_run_stops_with_one_line_saying_so(tmp_path, monkeypatch):
    fake = tmp_path / "faulttrace"
    fake.write_text("#!/bin/sh\necho 'heapcost-technique: faulttrace: ptrace refused: a fault in a statically "
                    "linked program cannot be located here' >&2\nexit 126\n")
    fake.chmod(0o755)
    monkeypatch.setattr(techniques, "faulttrace_path", lambda: fake)
    with pytest.raises(HeapcostError, match="cannot be located: heapcost-technique: faulttrace: ptrace refused"):
        techniques.check_faulttrace()
