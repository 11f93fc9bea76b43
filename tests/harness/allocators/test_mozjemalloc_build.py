"""mozjemalloc built from firefox-esr's source: the recipe's command lines (without building Firefox), the
poison switch, the check's verdicts, and (marked) the libraries in the cache when they are built."""
import subprocess
from pathlib import Path

import pytest

from analysis.harness.allocators import catalog, debsrc, debsrc_paths, mozjemalloc_build as mb, provision
from analysis.harness.allocators.cache import built_prefix

IDS = ("mozjemalloc", "mozjemalloc-poison", "mozjemalloc-poison-full")


def _steps(cid, tmp_path):
    return mb.steps(cid)(tmp_path / "src", tmp_path / "build", Path("/opt/prefix"), tmp_path / "stage")


def test_every_build_compiles_the_same_sources_and_links_one_library_into_the_staged_prefix(tmp_path):
    for cid in IDS:
        steps = _steps(cid, tmp_path)
        compiles = [argv for argv, _, _ in steps if argv[0] == "g++" and "-c" in argv]
        assert [argv[argv.index("-c") + 1] for argv in compiles] == [str(tmp_path / "src" / s) for s in mb.SOURCES]
        assert all(set(mb.COMMON_FLAGS) <= set(argv) for argv in compiles)
        assert all(("-DEARLY_BETA_OR_EARLIER" in argv) == (cid == "mozjemalloc-poison-full") for argv in compiles)
        link = next(argv for argv, _, _ in steps if "-shared" in argv)
        assert link[link.index("-o") + 1] == str(tmp_path / "stage" / "opt" / "prefix" / "lib" / mb.CONFIGS[cid].library)
        assert "-Wl,--no-undefined" in link and all(str(tmp_path / "build") in o for o in link if o.endswith(".o"))
        assert len([o for o in link if o.endswith(".o")]) == len(mb.SOURCES)
        edits = [argv for argv, _, _ in steps if argv[0] in ("sed", "grep")]
        assert bool(edits) == (cid == "mozjemalloc")
    # the three differ in the poisoning and nothing else
    plain, ships, full = (set(mb.options(c)) for c in IDS)
    assert plain ^ ships == {"opt_poison=NONE"} and full ^ ships == {"-DEARLY_BETA_OR_EARLIER"}


def test_each_build_also_comes_compiled_by_clang_with_the_same_sources_defines_and_flags(tmp_path):
    for cid in IDS:
        clang, gcc = f"{cid}-clang", _steps(cid, tmp_path)
        steps = _steps(clang, tmp_path)
        assert mb.CONFIGS[clang].library == mb.CONFIGS[cid].library.replace(".so", "-clang.so")
        assert set(mb.options(clang)) ^ set(mb.options(cid)) == {"cxx=clang++"}
        assert mb.CONFIGS[clang].expected == mb.CONFIGS[cid].expected
        # every g++ command of the gcc build is the clang++ one's, and nothing else differs but the library name
        swapped = [(["g++" if a == "clang++" else a for a in argv], cwd, env) for argv, cwd, env in steps]
        rename = mb.CONFIGS[cid].library, mb.CONFIGS[clang].library
        assert [([a.replace(rename[1], rename[0]) for a in argv], cwd, env) for argv, cwd, env in swapped] == gcc
        assert any(argv[0] == "clang++" and "-shared" in argv for argv, _, _ in steps)
    assert provision.RECIPES["mozjemalloc-poison-clang"].build_deps == ("clang", "gcc")


def _run(steps, names):
    for argv, cwd, extra in steps:
        if argv[0] in names:
            proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
            if proc.returncode:
                return proc.returncode
    return 0


def test_the_poison_switch_changes_exactly_the_release_line_or_fails_the_build(tmp_path):
    source = tmp_path / "src" / "memory" / "build" / "mozjemalloc.cpp"
    source.parent.mkdir(parents=True)
    text = ("#ifdef EARLY_BETA_OR_EARLIER\nMALLOC_RUNTIME_VAR PoisonType opt_poison = ALL;\n#else\n"
            f"{mb.POISON_LINE}\n#endif\n")
    source.write_text(text)
    assert _run(_steps("mozjemalloc", tmp_path), {"sed", "grep"}) == 0
    assert source.read_text() == text.replace("= SOME;", "= NONE;")
    source.write_text(text.replace(mb.POISON_LINE, "static PoisonType opt_poison = SOME;"))  # another release
    assert _run(_steps("mozjemalloc", tmp_path), {"sed", "grep"}) != 0


def test_the_generated_config_header_defines_what_the_build_system_would(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "build").mkdir()
    steps = _steps("mozjemalloc-poison", tmp_path)
    header_step = next(s for s in steps if s[0][0] == "sh" and "#define" in s[0][2])
    assert _run([header_step], {"sh"}) == 0
    assert (tmp_path / "build" / "mozilla-config.h").read_text().splitlines() == \
        [f"#define {d}" for d in mb.CONFIG_DEFINES]


def test_the_check_must_see_this_library_and_this_amount_of_poison():
    ships = mb.verified("mozjemalloc-poison")
    good = "poison head 192/192 tail 0/512, malloc from /c/allocators/mozjemalloc-poison-1/lib/libmozjemalloc-poison.so"
    assert ships(good)
    assert not ships(good.replace("tail 0/512", "tail 512/512"))  # full poisoning is another build
    assert not ships(good.replace("libmozjemalloc-poison.so", "libc.so.6"))  # not preloaded
    assert not mb.verified("mozjemalloc")(good) and not mb.verified("mozjemalloc-poison-full")(good)
    assert mb.verified("mozjemalloc")("poison head 0/192 tail 0/512, malloc from /x/lib/libmozjemalloc.so")
    assert not mb.verified("mozjemalloc")("poison head 0/192 tail 0/512, malloc from /x/lib/libmozjemalloc.so.old")


def test_catalogue_entries_match_their_recipes_and_a_version_mismatch_is_refused(tmp_path, monkeypatch):
    entries = catalog.load_catalog()
    for cid in IDS:
        recipe = provision.RECIPES[cid]
        assert entries[cid].origin["version"] == recipe.version == mb.VERSION
        assert recipe.source_paths == mb.SOURCE_PATHS and recipe.package == "firefox-esr"
        assert mb.CONFIGS[cid].library.startswith(entries[cid].expect_malloc.split(".so")[0])
        assert Path(entries[cid].preload[0]).name == mb.CONFIGS[cid].library
    monkeypatch.setenv("HEAPCOST_CACHE", str(tmp_path / "cache"))
    alloc = catalog.Allocator(id="mozjemalloc", family="mozjemalloc", description="x",
                              origin={"kind": "debian-source", "package": "firefox-esr", "version": "139.0esr-1"})
    ok, why = provision.provision_one(alloc, apt=None, log=None, dry_run=True)
    assert not ok and "139.0esr-1" in why and mb.VERSION in why


def test_a_recipe_with_source_paths_fetches_only_those_of_its_pinned_version(tmp_path, monkeypatch):
    asked = []

    def fake_fetch(package, version, paths, apt=None):
        asked.append((package, version, paths))
        raise debsrc_paths.HeapcostError("stop here")

    monkeypatch.setenv("HEAPCOST_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(debsrc_paths, "fetch_source_paths", fake_fetch)
    monkeypatch.setattr(debsrc, "fetch_source", lambda *a, **k: pytest.fail("whole package fetched"))
    log = provision.Log(tmp_path / "log", quiet=True)
    with pytest.raises(debsrc_paths.HeapcostError, match="stop here"):
        provision.build("mozjemalloc", log=log, root=tmp_path / "allocators")
    assert asked == [("firefox-esr", mb.VERSION, mb.SOURCE_PATHS)]


@pytest.mark.allocators
@pytest.mark.parametrize("cid", [*IDS, *(f"{c}-clang" for c in IDS)])
def test_a_built_library_serves_malloc_and_poisons_as_its_entry_says(cid, tmp_path):
    prefix = built_prefix(cid)
    if prefix is None:
        pytest.skip(f"{cid} is not built here (python -m analysis provision --only {cid})")
    check = tmp_path / "check"
    subprocess.run(["gcc", "-O0", "-Wno-use-after-free", "-o", str(check), str(mb.CHECK_SOURCE), "-ldl"], check=True)
    library = prefix / "lib" / mb.CONFIGS[cid].library
    out = subprocess.run([str(check)], env={"LD_PRELOAD": str(library)}, capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == [f"{mb.CONFIGS[cid].expected}, malloc from {library}"]
    plain = subprocess.run([str(check)], capture_output=True, text=True, check=True).stdout
    assert plain.startswith("poison head 0/192 tail 0/512, ")  # without the preload nothing reads as 0xe5
    # calloc, realloc and the aligned forms come from the same library and work
    probe = subprocess.run(["sh", "-c", "seq 20000 | sort -R | sort -n | tail -n 1"],
                           env={"LD_PRELOAD": str(library), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    assert probe.stdout.strip() == "20000" and probe.stderr == ""
