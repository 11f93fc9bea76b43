import hashlib
import json
import shutil
import subprocess

import pytest

from analysis.harness.allocators import debsrc
from analysis.harness.allocators import glibc_build as gb
from analysis.errors import HeapcostError

VERSION = "2.36-9+deb12u14"

# ---- keying, paths, stamps: no build needed ----------------------------------------------------------


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HEAPCOST_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_three_variants_control_unpatched():
    assert list(gb.VARIANTS) == ["glibc-built", "glibc-no-tcache-key", "glibc-no-safe-linking"]
    assert gb.patch_path("glibc-built") is None and gb.patch_bytes("glibc-built") == b""
    for variant in ("glibc-no-tcache-key", "glibc-no-safe-linking"):
        assert gb.patch_path(variant).is_file()


def test_unknown_variant_is_a_heapcost_error():
    with pytest.raises(HeapcostError, match="unknown glibc variant"):
        gb.variant_dir("glibc-nope", VERSION)


def test_folder_is_keyed_by_variant_version_and_patch(cache):
    for variant in gb.VARIANTS:
        digest = hashlib.sha256(gb.patch_bytes(variant)).hexdigest()[:12]
        assert gb.variant_dir(variant, VERSION) == cache / "allocators" / f"{variant}-{VERSION}-{digest}"
    assert gb.folder_name("glibc-built", VERSION, b"") == f"glibc-built-{VERSION}-e3b0c44298fc"
    assert gb.folder_name("glibc-built", "1:2.0-1", b"") == "glibc-built-1_2.0-1-e3b0c44298fc"
    # another patch text or another source version is another folder
    assert gb.folder_name("glibc-no-tcache-key", VERSION, b"x") != gb.folder_name("glibc-no-tcache-key", VERSION, b"y")
    assert gb.variant_dir("glibc-built", VERSION) != gb.variant_dir("glibc-built", "2.36-9+deb12u15")
    assert len({gb.variant_dir(v, VERSION) for v in gb.VARIANTS}) == 3


def test_loader_argv_mirrors_testrun(cache):
    build = gb.variant_dir("glibc-no-safe-linking", VERSION) / "build"
    argv = gb.loader_argv("glibc-no-safe-linking", VERSION)
    assert argv[0] == str(build / "elf" / "ld.so") and argv[1] == "--library-path" and len(argv) == 3
    dirs = argv[2].split(":")
    assert dirs[0] == str(build)  # libc.so.6 itself
    for sub in ("math", "elf", "dlfcn", "nptl", "rt", "nss", "resolv", "mathvec", "login"):
        assert str(build / sub) in dirs
    assert str(build / "crypt") not in dirs  # Debian's libcrypt.so.1 is libxcrypt's, which perl needs


def test_patches_open_with_a_comment_and_touch_only_malloc_c():
    for variant in ("glibc-no-tcache-key", "glibc-no-safe-linking"):
        text = gb.patch_bytes(variant).decode()
        head, _, diff = text.partition("\n--- a/")
        assert head.startswith("heapcost patch: " + variant) and "What it removes" in head and "Why" in head
        files = [ln.split()[1] for ln in ("--- a/" + diff).splitlines() if ln.startswith("+++ ")]
        assert files == ["b/malloc/malloc.c"]


def fake_source(tmp_path, make_body):
    """A tiny tree whose configure and make stand in for glibc's (fast)."""
    tree = tmp_path / "fake-src"
    tree.mkdir()
    (tree / "configure").write_text("#!/bin/sh\necho configured > configured\n"
                                    f"printf 'all:\\n\\t{make_body}\\n' > Makefile\n")
    (tree / "configure").chmod(0o755)
    return tree


def test_build_writes_stamp_and_reuses_a_finished_build(cache, tmp_path, monkeypatch):
    body = "mkdir -p elf && touch elf/ld.so libc.so.6 && echo run >> ../runs"
    monkeypatch.setattr(gb, "fetch_pristine_source", lambda version: fake_source(tmp_path, body))
    monkeypatch.setattr(gb, "missing_tools", lambda: [])
    assert gb.availability("glibc-built", VERSION) == (
        False, "not built yet: `make allocators` builds it (about 10 minutes on 2 cores)")
    tree = gb.build("glibc-built", VERSION)
    folder = gb.variant_dir("glibc-built", VERSION)
    assert tree == folder / "build" and (tree / "configured").is_file()
    stamp = json.loads((folder / "stamp.json").read_text())
    assert stamp["source_version"] == VERSION and stamp["variant"] == "glibc-built"
    assert stamp["configure_options"][0] == "--prefix=/usr" and stamp["build_seconds"] >= 0
    assert gb.availability("glibc-built", VERSION) == (True, "")
    gb.build("glibc-built", VERSION)
    assert (folder / "runs").read_text() == "run\n"  # the second call did not build again
    # a stamp from other configure options does not count as finished
    stamp["configure_options"] = ["--prefix=/opt"]
    (folder / "stamp.json").write_text(json.dumps(stamp))
    assert gb.availability("glibc-built", VERSION)[0] is False


def test_failed_build_names_its_log(cache, tmp_path, monkeypatch):
    monkeypatch.setattr(gb, "fetch_pristine_source", lambda version: fake_source(tmp_path, "echo boom && exit 3"))
    monkeypatch.setattr(gb, "missing_tools", lambda: [])
    log = gb.variant_dir("glibc-built", VERSION) / "build.log"
    with pytest.raises(HeapcostError, match="'make' failed") as err:
        gb.build("glibc-built", VERSION)
    assert str(log) in str(err.value) and "\n" not in str(err.value)
    assert "boom" in log.read_text()
    ok, reason = gb.availability("glibc-built", VERSION)
    assert not ok and str(log) in reason


def test_missing_tools_are_no_reason_to_report_but_stop_a_direct_build(cache, monkeypatch):
    # `make allocators` installs gawk and bison before it builds: naming them would read as a fault
    monkeypatch.setattr(gb, "missing_tools", lambda: ["gawk", "bison"])
    assert gb.availability("glibc-no-tcache-key", VERSION) == (
        False, "not built yet: `make allocators` builds it (about 10 minutes on 2 cores)")
    with pytest.raises(HeapcostError, match="gawk, bison missing"):
        gb.build("glibc-no-tcache-key", VERSION)


def test_patches_apply_to_the_pristine_source(tmp_path):
    tree = debsrc.cached_tree(gb.SOURCE_PACKAGE, VERSION)
    if not (tree / "malloc" / "malloc.c").is_file():
        pytest.skip(f"glibc {VERSION} source not fetched (make allocators fetches it)")
    for variant in ("glibc-no-tcache-key", "glibc-no-safe-linking"):
        proc = subprocess.run(["patch", "-p1", "--dry-run", "--batch", "-i", str(gb.patch_path(variant))],
                              cwd=tree, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr


# ---- the real builds ---------------------------------------------------------------------------------

RESOLVE_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
int main(void) {
    Dl_info info;
    void *malloc_address = dlsym(RTLD_DEFAULT, "malloc");
    if (!malloc_address || !dladdr(malloc_address, &info)) return 2;
    free(malloc(40));
    printf("%s\n", info.dli_fname);
    return 0;
}
"""

DOUBLE_FREE_C = r"""
#include <stdio.h>
#include <stdlib.h>
int main(void) {
    void *volatile a = malloc(40);
    free(a);
    free(a);
    void *x = malloc(40), *y = malloc(40);
    printf("%s %p %p\n", x == y ? "same" : "different", x, y);
    return 0;
}
"""

SAFE_LINKING_C = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {
    char *volatile a = malloc(40);
    char *volatile b = malloc(40);
    uintptr_t next;
    free(a);
    free(b);
    memcpy(&next, b, sizeof next);  /* the tcache entry's next pointer */
    uintptr_t protected_next = ((uintptr_t) b >> 12) ^ (uintptr_t) a;
    printf("%s\n", next == protected_next ? "protected" : next == (uintptr_t) a ? "raw" : "other");
    return 0;
}
"""


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("gcc missing")
    folder = tmp_path_factory.mktemp("glibc-programs")
    built = {}
    for name, source in (("resolve", RESOLVE_C), ("double_free", DOUBLE_FREE_C), ("safe_linking", SAFE_LINKING_C)):
        (folder / f"{name}.c").write_text(source)
        subprocess.run(["gcc", "-O0", "-o", str(folder / name), str(folder / f"{name}.c")], check=True)
        built[name] = str(folder / name)
    return built


def run_under(variant, program):
    if variant == "system":
        return subprocess.run([program], capture_output=True, text=True, timeout=60)
    ok, reason = gb.availability(variant)
    if not ok:
        pytest.skip(f"{variant}: {reason}")
    return subprocess.run(gb.loader_argv(variant) + [program], capture_output=True, text=True, timeout=60)


def test_system_glibc_stops_the_double_free(programs):
    proc = run_under("system", programs["double_free"])
    assert proc.returncode != 0 and "free(): double free detected in tcache 2" in proc.stderr


@pytest.mark.allocators
@pytest.mark.parametrize("variant", list(gb.VARIANTS))
def test_malloc_resolves_from_the_built_libc(variant, programs):
    proc = run_under(variant, programs["resolve"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(gb.build_tree(variant) / "libc.so.6")


@pytest.mark.allocators
@pytest.mark.parametrize("variant", ["glibc-built", "glibc-no-safe-linking"])
def test_key_check_stops_the_double_free(variant, programs):
    proc = run_under(variant, programs["double_free"])
    assert proc.returncode != 0 and "free(): double free detected in tcache 2" in proc.stderr


@pytest.mark.allocators
def test_no_tcache_key_lets_the_double_free_through(programs):
    proc = run_under("glibc-no-tcache-key", programs["double_free"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("same ")  # the block was handed out twice


@pytest.mark.allocators
@pytest.mark.parametrize("variant, expected", [("glibc-built", "protected"), ("glibc-no-tcache-key", "protected"),
                                               ("glibc-no-safe-linking", "raw")])
def test_safe_linking_masks_the_tcache_next_pointer(variant, expected, programs):
    proc = run_under(variant, programs["safe_linking"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == expected


@pytest.mark.allocators
@pytest.mark.parametrize("variant", list(gb.VARIANTS))
def test_library_path_covers_every_library_glibc_built(variant):
    ok, reason = gb.availability(variant)
    if not ok:
        pytest.skip(f"{variant}: {reason}")
    build = gb.build_tree(variant)
    on_path = set(gb.loader_argv(variant)[2].split(":"))
    left_out = {"crypt", "malloc", "support", "iconvdata"}  # see BUILD_LIBRARY_DIRS
    libraries = [p for p in build.rglob("*.so.[0-9]*") if p.relative_to(build).parts[0] not in left_out]
    assert any(p.name == "libm.so.6" for p in libraries)
    for library in libraries:
        assert str(library.parent) in on_path, library


@pytest.mark.allocators
@pytest.mark.parametrize("argv", [["/usr/bin/perl", "-e", "print crypt('a', 'ab')"],
                                  ["/usr/bin/python3", "-c", "import ssl, sqlite3"],
                                  ["/usr/bin/sqlite3", ":memory:", "select 1"]])
def test_system_programs_run_on_the_built_libc(argv):
    if not shutil.which(argv[0]):
        pytest.skip(f"{argv[0]} not installed")
    ok, reason = gb.availability("glibc-built")
    if not ok:
        pytest.skip(f"glibc-built: {reason}")
    proc = subprocess.run(gb.loader_argv("glibc-built") + argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    listing = subprocess.run(gb.loader_argv("glibc-built") + ["--list", argv[0]], capture_output=True, text=True)
    libc_line = [ln for ln in listing.stdout.splitlines() if "libc.so.6 =>" in ln]
    assert libc_line and str(gb.build_tree("glibc-built")) in libc_line[0]
