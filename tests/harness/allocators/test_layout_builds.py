"""Layout builds: `<id>_l<N>` is a second build of the same source that differs only in
where its code lies, so that a debate's interval can sample the build as well as the run."""
import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from analysis.errors import HeapcostError
from analysis.harness.allocators import catalog, glibc_build, mozjemalloc_build as moz, provision

VERSION = "2.36-9+deb12u14"


def test_layout_of_names_the_build_and_its_layout():
    assert catalog.layout_of("mozjemalloc-poison_l2") == ("mozjemalloc-poison", 2)
    assert catalog.layout_of("glibc-built_l12") == ("glibc-built", 12)
    assert catalog.layout_of("glibc-built") == ("glibc-built", 1)
    assert catalog.layout_of("x_l1") == ("x_l1", 1) and catalog.layout_of("x_lz") == ("x_lz", 1)


def test_every_layout_build_in_the_catalogue_claims_what_its_first_build_claims():
    cat = catalog.load_catalog()
    layouts = {i: catalog.layout_of(i) for i in cat if catalog.layout_of(i)[1] > 1}
    assert set(layouts) >= {"mozjemalloc_l2", "mozjemalloc-poison_l2", "glibc-built_l2", "glibc-no-tcache-key_l2"}
    for lid, (base, n) in layouts.items():
        a, b = cat[lid], cat[base]
        assert (a.family, a.defences, a.workloads, a.callgrind) == (b.family, b.defences, b.workloads, b.callgrind)
        assert {k: v for k, v in a.origin.items() if k != "build"} == {k: v for k, v in b.origin.items() if k != "build"}
        assert a.description.startswith(f"code layout {n}")


# ---------------------------------------------------------------------------------- mozjemalloc
def test_a_mozjemalloc_layout_build_changes_only_its_link_order_and_pad():
    base, other = moz.CONFIGS["mozjemalloc-poison"], moz.CONFIGS["mozjemalloc-poison_l2"]
    assert (other.library, other.defines, other.poison_off, other.expected) == (
        base.library, base.defines, base.poison_off, base.expected)
    assert moz.link_order(1) == moz.SOURCES and moz.pad_bytes(1) == 0
    order = moz.link_order(2)
    assert sorted(order) == sorted(moz.SOURCES) and order != moz.SOURCES and moz.link_order(2) == order
    assert moz.link_order(3) != order and moz.pad_bytes(2) == 32
    opts = moz.options("mozjemalloc-poison_l2")
    assert opts[:len(moz.options("mozjemalloc-poison"))] == moz.options("mozjemalloc-poison")
    assert "layout=2" in opts and "text-pad=32" in opts
    # the catalogue's claim of the layout is checked against the recipe
    assert "layout=2" in provision.RECIPES["mozjemalloc-poison_l2"].options
    assert "layout=2" not in provision.RECIPES["mozjemalloc-poison"].options


def tiny_mozilla_tree(root: Path) -> Path:
    """SOURCES as tiny C++ files, one function each, with the folders the recipe copies headers from."""
    src = root / "src"
    for d in ("mfbt", "mozglue/misc", "memory/build", "third_party/fmt/include", "mfbt/double-conversion"):
        (src / d).mkdir(parents=True, exist_ok=True)
    (src / "mfbt" / "Tiny.h").write_text("#pragma once\n")
    (src / "mozglue" / "misc" / "TinyGlue.h").write_text("#pragma once\n")
    for i, source in enumerate(moz.SOURCES):
        path = src / source
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'#include "mozilla/Tiny.h"\nextern "C" int tiny_{i}(int x) {{ return x * {i + 3} + {i}; }}\n')
    return src


def build_tiny(config_id: str, root: Path) -> Path:
    return build_tiny_from(tiny_mozilla_tree(root / config_id), config_id, root / config_id)


def build_tiny_from(src: Path, config_id: str, root: Path) -> Path:
    build, prefix, stage = root / "build", root / "prefix", root / "stage"
    for argv, cwd, extra in moz.steps(config_id)(src, build, prefix, stage):
        if argv[0] == "gcc" and "free-poison-check" in " ".join(argv):
            continue  # the recipe's check program, not part of the library
        subprocess.run(argv, cwd=cwd, check=True, capture_output=True)
    return stage / prefix.relative_to(prefix.anchor) / "lib" / moz.CONFIGS[config_id].library


def symbols(lib: Path) -> dict:
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True).stdout
    return {f[2]: int(f[0], 16) for f in (ln.split() for ln in out.splitlines()) if len(f) == 3 and f[2].startswith("tiny_")}


def function_bytes(lib: Path, name: str) -> list[str]:
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(lib)], capture_output=True, text=True,
                         check=True).stdout
    body = out.split(f"<{name}>:\n", 1)[1].split("\n\n", 1)[0]
    code = [ln.split("\t", 1)[1].strip() for ln in body.splitlines() if "\t" in ln]
    return code[:code.index("ret") + 1]  # what follows is the fill up to the next function's alignment


@pytest.mark.skipif(not (shutil.which("g++") and shutil.which("nm") and shutil.which("objdump")),
                    reason="needs g++, nm and objdump")
def test_the_layout_knob_moves_every_function_and_changes_no_instruction(tmp_path):
    first = build_tiny("mozjemalloc-poison", tmp_path)
    second = build_tiny("mozjemalloc-poison_l2", tmp_path)
    a, b = symbols(first), symbols(second)
    assert set(a) == set(b) == {f"tiny_{i}" for i in range(len(moz.SOURCES))}
    # the pad comes first: the code starts that many bytes later
    assert min(b.values()) == min(a.values()) + moz.pad_bytes(2)
    # the link order is the recipe's: in the second build the functions lie in link_order's order
    order = [f"tiny_{moz.SOURCES.index(s)}" for s in moz.link_order(2)]
    assert sorted(b, key=b.get) == order and sorted(a, key=a.get) == [f"tiny_{i}" for i in range(len(moz.SOURCES))]
    for name in a:
        assert function_bytes(first, name) == function_bytes(second, name)


@pytest.mark.skipif(not (shutil.which("g++") and shutil.which("nm") and shutil.which("objdump")),
                    reason="needs g++, nm and objdump")
def test_the_recipe_gives_the_same_bytes_in_any_build_folder(tmp_path):
    """The build folder's name must not reach the library: here through __FILE__, as in mozjemalloc's
    release assertions. Two builds of one tree in two folders of different names and lengths are equal."""
    libs = []
    for folder in ("a", "a-much-longer-folder-12345"):
        src = tiny_mozilla_tree(tmp_path / folder)
        first = src / moz.SOURCES[0]
        first.write_text(first.read_text() + 'extern "C" const char *tiny_where() { return __FILE__; }\n')
        libs.append(build_tiny_from(src, "mozjemalloc-poison_l3", tmp_path / folder))
    assert libs[0].read_bytes() == libs[1].read_bytes()
    assert b"a-much-longer-folder" not in libs[1].read_bytes()
    assert len({moz.CONFIGS[i].layout for i in moz.LAYOUT_BUILDS}) >= 4  # five layouts with the plain build


# ---------------------------------------------------------------------------------- glibc
@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HEAPCOST_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_glibc_layout_build_is_its_variant_with_aligned_functions_or_relinked(cache):
    assert glibc_build.base_variant("glibc-no-tcache-key_l2") == "glibc-no-tcache-key"
    assert glibc_build.patch_bytes("glibc-no-tcache-key_l2") == glibc_build.patch_bytes("glibc-no-tcache-key")
    assert glibc_build.configure_options("glibc-built") == glibc_build.CONFIGURE_OPTIONS
    assert glibc_build.configure_options("glibc-built_l2") == (
        *glibc_build.CONFIGURE_OPTIONS, "CFLAGS=-g -O2 -falign-functions=32")
    assert glibc_build.layout_cflags(3) is None  # the relink layouts reuse layout 1's objects
    assert glibc_build.configure_options("glibc-no-tcache-key_l3") == glibc_build.CONFIGURE_OPTIONS
    assert glibc_build.variant_dir("glibc-built_l2", VERSION) != glibc_build.variant_dir("glibc-built", VERSION)
    assert glibc_build.variant_dir("glibc-built_l2", VERSION).name.startswith("glibc-built_l2-")
    with pytest.raises(HeapcostError, match="unknown glibc variant"):
        glibc_build.layout("glibc-built_l9")


def test_a_glibc_layout_build_configures_with_its_cflags_and_stamps_its_layout(cache, tmp_path, monkeypatch):
    tree = tmp_path / "fake-src"
    tree.mkdir()
    (tree / "configure").write_text('#!/bin/sh\nfor a; do echo "$a"; done > configured\n'
                                    "printf 'all:\\n\\tmkdir -p elf && touch elf/ld.so libc.so.6\\n' > Makefile\n")
    (tree / "configure").chmod(0o755)
    monkeypatch.setattr(glibc_build, "fetch_pristine_source", lambda version: tree)
    monkeypatch.setattr(glibc_build, "missing_tools", lambda: [])
    built = glibc_build.build("glibc-built_l2", VERSION)
    assert (built / "configured").read_text().splitlines()[-1] == "CFLAGS=-g -O2 -falign-functions=32"
    stamp = json.loads((built.parent / glibc_build.STAMP_NAME).read_text())
    assert stamp["layout"] == 2 and stamp["patch"] is None and stamp["variant"] == "glibc-built_l2"
    assert glibc_build.availability("glibc-built_l2", VERSION) == (True, "")
    # a stamp of layout 1's options does not count as the layout build
    stamp["configure_options"] = list(glibc_build.CONFIGURE_OPTIONS)
    (built.parent / glibc_build.STAMP_NAME).write_text(json.dumps(stamp))
    assert glibc_build.availability("glibc-built_l2", VERSION)[0] is False
    base = glibc_build.build("glibc-built", VERSION)
    assert "CFLAGS=-g -O2 -falign-functions=32" not in (base / "configured").read_text()


def test_each_glibc_primary_variant_has_five_layouts_in_the_catalogue():
    cat = catalog.load_catalog()
    for variant in glibc_build.LAYOUT_VARIANTS:
        builds = [i for i in cat if catalog.layout_of(i)[0] == variant]
        assert sorted(catalog.layout_of(i)[1] for i in builds) == [1, 2, 3, 4, 5]
        for i in builds:
            assert cat[i].built_glibc and glibc_build.base_variant(i) == variant
    assert "random.Random(4)" in cat["glibc-no-tcache-key_l4"].origin["build"]
    assert cat["glibc-no-tcache-key_l4"].expect_malloc == "glibc-no-tcache-key_l4-"


def test_a_relink_order_is_a_permutation_fixed_by_its_seed():
    members = [f"m{i}.os" for i in range(200)]
    order = glibc_build.member_order(members, 3)
    assert sorted(order) == sorted(members) and order != members
    assert glibc_build.member_order(members, 3) == order and glibc_build.member_order(members, 4) != order
    assert members == [f"m{i}.os" for i in range(200)]  # the caller's list is left as it was


def test_the_link_command_is_read_from_the_build_log_and_refused_when_it_holds_shell_syntax(tmp_path):
    tree = tmp_path / "v" / "build"
    cmd = f"gcc -shared -nostdlib -o {tree}/libc.so -T {tree}/shlib.lds {tree}/libc_pic.os -lgcc"
    log = f"gcc -c x.c -o {tree}/x.os\n{cmd}\ngcc -shared -o {tree}/linkobj/libc.so x\n"
    argv = glibc_build.libc_link_command(tree, log)
    assert argv[:2] == ["gcc", "-shared"] and f"{tree}/libc_pic.os" in argv
    new = glibc_build.relink_argv(argv, tree, tmp_path / "n" / "libc_pic.os", tmp_path / "n" / "libc.so")
    assert str(tmp_path / "n" / "libc_pic.os") in new and new[new.index("-o") + 1] == str(tmp_path / "n" / "libc.so")
    assert f"{tree}/libc_pic.os" not in new
    with pytest.raises(HeapcostError, match="shell syntax"):
        glibc_build.libc_link_command(tree, cmd.replace("-lgcc", "-lgcc; rm -rf x"))
    with pytest.raises(HeapcostError, match="no libc.so link command"):
        glibc_build.libc_link_command(tree, "gcc -c x.c\n")


def _fake_glibc_build(cache: Path, variant: str = "glibc-built") -> Path:
    """A finished layout-1 build of `variant` in the cache made of three tiny objects: libc_pic.a, its
    libc_pic.os and libc.so linked by the command its build.log records, loader and subfolders as files."""
    folder = glibc_build.variant_dir(variant, VERSION)
    tree = folder / "build"
    tree.mkdir(parents=True)
    for name, body in (("a.os", "int fa(void){return 1;}"), ("b.os", "int fb(void){return 2;}\nint pad[64];"),
                       ("c.os", "int fa(void);\nint fb(void);\nint fc(void){return fa()+fb();}")):
        src = tree / (name[0] + ".c")
        src.write_text(body + "\n")
        subprocess.run(["gcc", "-O2", "-fPIC", "-c", str(src), "-o", str(tree / name)], check=True)
    subprocess.run(["ar", "cr", "libc_pic.a", "a.os", "b.os", "c.os"], cwd=tree, check=True)
    subprocess.run(["gcc", "-nostdlib", "-nostartfiles", "-r", "-o", str(tree / "libc_pic.os"),
                    "-Wl,--whole-archive", str(tree / "libc_pic.a")], check=True)
    link = f"gcc -shared -nostdlib -Wl,-soname=libc.so.6 -o {tree}/libc.so {tree}/libc_pic.os"
    subprocess.run(link.split(), check=True)
    (folder / glibc_build.LOG_NAME).write_text(f"make[2]: Entering directory\n{link}\n")
    (tree / "libc.so.6").symlink_to("libc.so")
    for sub in filter(None, glibc_build.BUILD_LIBRARY_DIRS):
        (tree / sub).mkdir()
    (tree / "elf" / "ld.so").write_text("the loader")
    glibc_build._write_stamp(folder, {"variant": variant, "source_version": VERSION, "layout": 1,
                                      "patch_sha256": hashlib.sha256(glibc_build.patch_bytes(variant)).hexdigest(),
                                      "configure_options": list(glibc_build.configure_options(variant))})
    return tree


def test_a_relink_layout_links_layout_1s_objects_in_its_order_and_records_how(cache, monkeypatch):
    base = _fake_glibc_build(cache)
    tree = glibc_build.build("glibc-built_l5", VERSION)
    folder = tree.parent
    order = glibc_build.member_order(["a.os", "b.os", "c.os"], 5)
    assert (folder / glibc_build.ORDER_NAME).read_text().split() == order
    stamp = json.loads((folder / glibc_build.STAMP_NAME).read_text())
    assert (stamp["method"], stamp["seed"], stamp["layout"], stamp["relinked_from"]) == ("relink", 5, 5, "glibc-built")
    assert stamp["libc_sha256"] == hashlib.sha256((tree / "libc.so").read_bytes()).hexdigest()
    assert stamp["relinked_from_sha256"] == hashlib.sha256((base / "libc.so").read_bytes()).hexdigest()
    # the functions lie in the permuted order; the loader and the other libraries are layout 1's
    symbols = subprocess.run(["nm", "-n", "--defined-only", str(tree / "libc.so")], capture_output=True,
                             text=True, check=True).stdout.split()
    assert [f for f in symbols if f in ("fa", "fb", "fc")] == ["f" + m[0] for m in order]
    assert (tree / "elf" / "ld.so").read_text() == "the loader" and (tree / "libc.so.6").resolve() == tree / "libc.so"
    assert not (folder / "objects").exists() and not (tree / "libc_pic.os").exists()
    assert glibc_build.availability("glibc-built_l5", VERSION) == (True, "")
    assert glibc_build.provenance("glibc-built_l5", VERSION)["member_order_sha256"] == stamp["member_order_sha256"]
    assert "built_at" not in glibc_build.provenance("glibc-built_l5", VERSION)
    # layout 1 built again: the relink no longer counts, and is made again from the new objects
    subprocess.run(["gcc", "-shared", "-nostdlib", "-Wl,-soname=libc.so.6", "-Wl,--hash-style=sysv", "-o",
                    str(base / "libc.so"), str(base / "libc_pic.os")], check=True)
    ok, why = glibc_build.availability("glibc-built_l5", VERSION)
    assert not ok and "built again" in why
    glibc_build.build("glibc-built_l5", VERSION)
    assert glibc_build.availability("glibc-built_l5", VERSION) == (True, "")


def test_a_run_identifies_a_glibc_build_by_its_librarys_sha256_and_records_how_it_was_made(cache, monkeypatch):
    from analysis.harness.timing import measure

    _fake_glibc_build(cache)
    tree = glibc_build.build("glibc-built_l4", VERSION)
    monkeypatch.setattr(glibc_build, "installed_source_version", lambda: VERSION)
    alloc = catalog.load_catalog()["glibc-built_l4"]
    record = measure.Campaign.allocator_record(None, catalog.Resolved(alloc, True, ""))
    libc, loader = record["libraries"]
    assert libc["sha256"] == hashlib.sha256((tree / "libc.so").read_bytes()).hexdigest()
    assert libc["path"].startswith("{cache}/allocators/glibc-built_l4-") and str(cache) not in json.dumps(record)
    assert loader["file"] == "ld.so" and loader["path"].startswith("{cache}/allocators/glibc-built-")
    assert (record["build"]["method"], record["build"]["seed"]) == ("relink", 4)
    assert record["build"]["libc_sha256"] == libc["sha256"] and "built_at" not in record["build"]


def test_the_relink_in_layout_1s_own_order_gives_layout_1s_bytes(cache, tmp_path):
    base = _fake_glibc_build(cache)
    out = tmp_path / "again" / "libc.so"
    out.parent.mkdir()
    with open(tmp_path / "log", "w") as log:
        glibc_build.link_in_order(base, glibc_build.libc_pic_members(base), tmp_path / "work", out, log, tmp_path / "log")
    assert out.read_bytes() == (base / "libc.so").read_bytes()


# ---------------------------------------------------------------------------------- brought libraries
def test_a_brought_layout_build_takes_its_entry_claims_and_records_its_layout(tmp_path):
    lib = tmp_path / "libomalloc-nibble-L2.so"
    lib.write_bytes(b"not really a library")
    (tmp_path / "libomalloc-nibble-L2.so.json").write_text(json.dumps(
        {"upstream": "OpenBSD lib/libc/stdlib/malloc.c", "revision": "1.128 (2011/04/30)",
         "layout": "2 (link order: compat/arc4random.c compat/omc_runtime.c compat/glue-1.128.c)"}))
    cat = catalog.load_catalog()
    [a] = catalog.parse_extra(f"omalloc-1.128_l2={lib}", cat)
    base = cat["omalloc-1.128"]
    assert a.id == "omalloc-1.128_l2" and (a.family, a.defences) == (base.family, base.defences)
    assert a.origin["kind"] == "brought" and a.origin["provenance"]["layout"].startswith("2 (link order")
    from analysis.harness.allocators import brought

    assert brought.library_records([a])["omalloc-1.128_l2"]["provenance"]["layout"].startswith("2 ")
    # a layout of a name the catalogue does not know stays an anonymous library
    [anon] = catalog.parse_extra(f"mine_l2={lib}", cat)
    assert anon.origin["kind"] == "path" and anon.defences == ()


# ---------------------------------------------------------------------------------- the real builds
def _malloc_address(lib: Path) -> int:
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True).stdout
    return next(int(f[0], 16) for f in (ln.split() for ln in out.splitlines())
                if len(f) == 3 and f[2].split("@")[0] == "malloc")


@pytest.mark.allocators
@pytest.mark.parametrize("first, second", [("mozjemalloc-poison", "mozjemalloc-poison_l2"),
                                           ("glibc-built", "glibc-built_l2"), ("glibc-built", "glibc-built_l3")])
def test_the_second_build_puts_malloc_elsewhere(first, second):
    libs = []
    for name in (first, second):
        r = catalog.resolve(catalog.load_catalog()[name])
        if not r.available:
            pytest.skip(f"{name}: {r.reason}")
        libs.append(Path(r.preload[0]) if r.preload else Path(r.loader[0]).parent.parent / "libc.so.6")
    a, b = (_malloc_address(lib) for lib in libs)
    assert a % 64 != b % 64  # another alignment within a cache line, not only another address


@pytest.mark.allocators
def test_relinking_the_real_glibc_in_its_own_order_gives_its_bytes(tmp_path):
    """The relink layouts differ from layout 1 by the order alone: the same method in the original order
    reproduces the library glibc's makefiles linked, byte for byte."""
    ok, why = glibc_build.availability("glibc-built")
    if not ok:
        pytest.skip(f"glibc-built: {why}")
    base = glibc_build.build_tree("glibc-built")
    out = tmp_path / "again" / "libc.so"
    out.parent.mkdir()
    with open(tmp_path / "log", "w") as log:
        glibc_build.link_in_order(base, glibc_build.libc_pic_members(base), tmp_path / "work", out, log, tmp_path / "log")
    assert hashlib.sha256(out.read_bytes()).digest() == hashlib.sha256((base / "libc.so").read_bytes()).digest()


def test_the_code_sha256_of_a_library_ignores_the_folder_its_debug_information_names(tmp_path):
    libs = []
    for folder in ("one", "elsewhere/two"):
        d = tmp_path / folder
        d.mkdir(parents=True)
        (d / "f.c").write_text("int f(int x){return x * 3;}\n")
        subprocess.run(["gcc", "-g", "-O2", "-fPIC", "-shared", "-Wl,--build-id=sha1", "-o", "libf.so", "f.c"],
                       cwd=d, check=True)
        libs.append(d / "libf.so")
    assert libs[0].read_bytes() != libs[1].read_bytes()  # the folder is in the debug information
    assert glibc_build.code_sha256(libs[0]) == glibc_build.code_sha256(libs[1]) != ""
    (tmp_path / "other.c").write_text("int f(int x){return x * 5;}\n")
    subprocess.run(["gcc", "-g", "-O2", "-fPIC", "-shared", "-o", str(tmp_path / "other.so"), str(tmp_path / "other.c")],
                   check=True)
    assert glibc_build.code_sha256(tmp_path / "other.so") != glibc_build.code_sha256(libs[0])
    assert glibc_build.code_sha256(tmp_path / "missing.so") == ""
