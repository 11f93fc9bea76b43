"""`python -m analysis allocators --provenance NAME`: every build the published runs recorded under a name."""
import json
import re
import subprocess
import sys

import pytest

from analysis.errors import HeapcostError
from analysis.harness.allocators import catalog
from analysis.paths import MACHINE_PATH
from conftest import REPO, cli

PUBLISHED_RUNS = REPO / "data" / "runs"
L5_SHA256 = "e7deee74761a29fe298afd5577516e49be2271cedd9530cdaf86e2de9fc106f7"


def assert_portable(text: str) -> None:
    """No folder of this machine (its clone, its home, a temporary folder) in what the command printed."""
    assert str(REPO) not in text
    assert not MACHINE_PATH.search(text), MACHINE_PATH.search(text).group(0)


def write_run(runs_dir, run_id: str, **content) -> None:
    """A run record holding only what the provenance command reads."""
    (runs_dir / run_id).mkdir(parents=True)
    (runs_dir / run_id / "run.json").write_text(json.dumps(content))


def test_a_brought_layout_prints_its_published_build_through_the_cli():
    result = cli("allocators", "--provenance", "hardened-72fb357_l5", timeout=120)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.splitlines()[0].startswith("hardened-72fb357_l5: 1 published build; the catalogue's hardened-72fb357")
    assert "upstream GrapheneOS/hardened_malloc, revision 72fb3576f568481a03076c62df37984f96bfdfeb" in out
    assert f"  sha256 {L5_SHA256} libhardened_malloc-72fb357-L5.so" in out
    assert re.search(r"recorded by \d+ runs, first \S+, last \S+", out)
    for key in ("upstream", "revision", "configuration", "compiler", "variant", "layout"):
        assert re.search(rf"^    {key}: \S", out, re.M), key  # the provenance file's fields
    assert re.search(r"^    layout: 5 \(.*-falign-functions=64", out, re.M)
    assert_portable(out)


def test_a_recipe_build_prints_its_origin_and_build_fields():
    out = "\n".join(catalog.provenance_lines("glibc-no-tcache-key_l2", runs_dir=PUBLISHED_RUNS))
    assert out.startswith("glibc-no-tcache-key_l2: ")
    assert "the catalogue's glibc-no-tcache-key_l2 (glibc-build): package glibc, patch no-tcache-key.patch" in out
    assert re.search(r"^  sha256 [0-9a-f]{64} libc\.so$", out, re.M)
    assert re.search(r"^  sha256 [0-9a-f]{64} ld\.so$", out, re.M)
    assert "  build_of: glibc-no-tcache-key" in out
    assert re.search(r"^  origin:\n    kind: glibc-build\n", out, re.M)
    assert "    patch: no-tcache-key.patch" in out
    assert "    configure_options: --prefix=/usr " in out and "'CFLAGS=-g -O2 -falign-functions=32'" in out
    assert_portable(out)


def test_an_unknown_name_fails_in_one_line_through_the_real_cli():
    result = subprocess.run([sys.executable, "-m", "analysis", "allocators", "--provenance", "nope"], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "'nope'" in result.stderr and "neither the catalogue nor any published run" in result.stderr


def test_a_misspelt_name_is_answered_with_the_closest_known_one():
    with pytest.raises(HeapcostError, match="did you mean hardened-72fb357_l5"):
        catalog.provenance_lines("hardend-72fb357_l5", runs_dir=PUBLISHED_RUNS)


def test_a_catalogued_name_no_run_recorded_says_what_the_catalogue_says(tmp_path):
    lines = catalog.provenance_lines("omalloc-1.128_l9", runs_dir=tmp_path)
    assert lines == ["omalloc-1.128_l9: no published run recorded it; the catalogue's omalloc-1.128 (brought): "
                     "upstream OpenBSD lib/libc/stdlib/malloc.c, revision 1.128"]
    assert catalog.provenance_lines("mimalloc-secure", runs_dir=tmp_path)[0].endswith(
        "(debian-source): package mimalloc, build cmake -DMI_SECURE=ON")


def test_builds_are_told_apart_by_sha256_and_a_field_some_runs_lack_says_who_recorded_it(tmp_path):
    provenance = {"revision": "72fb357", "configuration": "make VARIANT=default"}
    record = {"library": "lib.so", "library_sha256": "a" * 64, "upstream": "up"}
    write_run(tmp_path, "1-run", params={"brought_libraries": {"x_l2": {**record, "provenance": provenance}}})
    write_run(tmp_path, "2-run", params={"brought_libraries": {"x_l2": record}})
    write_run(tmp_path, "3-run", params={"brought_libraries": {"x_l2": {**record, "library_sha256": "b" * 64}}})
    lines = catalog.provenance_lines("x_l2", catalog={}, runs_dir=tmp_path)
    assert lines[0] == "x_l2: 2 published builds; the catalogue has no entry for it (a library brought by path)"
    assert lines[2:] == [
        "build 1 of 2: recorded by 2 runs, first 1-run, last 2-run",
        f"  sha256 {'a' * 64} lib.so",
        "  library: lib.so",
        "  upstream: up",
        "  provenance:  (recorded by 1 of 2 runs: 1-run)",
        "    revision: 72fb357",
        "    configuration: make VARIANT=default",
    ] + ["", "build 2 of 2: recorded by 1 run, 3-run", f"  sha256 {'b' * 64} lib.so",
         "  library: lib.so", "  upstream: up"]
