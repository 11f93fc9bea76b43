import pytest

from analysis.harness.allocators import catalog
from analysis.errors import HeapcostError
from analysis.harness.workloads import supports
from conftest import cli

REQUIRED = """glibc glibc-notcache glibc-perturb glibc-debug jemalloc jemalloc-junk-free jemalloc-junk tcmalloc
tcmalloc-debug mimalloc2 mimalloc3 mimalloc-secure scudo scudo-quarantine scudo-zero tbbmalloc musl efence duma
dmalloc perl-mymalloc perl-sysmalloc""".split()


def test_catalogue_has_every_required_configuration():
    cat = catalog.load_catalog()
    assert set(REQUIRED) <= set(cat)
    for alloc in cat.values():
        assert alloc.defences_ref, alloc.id
        assert set(alloc.defences) <= set(catalog.DEFENCES)


@pytest.mark.allocators
def test_debian_allocators_resolve_here():
    cat = catalog.load_catalog()
    for aid in ("glibc", "jemalloc", "tcmalloc", "mimalloc2", "mimalloc3", "scudo", "tbbmalloc", "efence", "duma",
                "dmalloc", "glibc-debug", "musl"):
        r = catalog.resolve(cat[aid])
        assert r.available, (aid, r.reason)


def test_perl_allocators_run_only_perl_workloads_and_musl_only_c():
    cat = catalog.load_catalog()
    assert supports(cat["perl-mymalloc"], "perl-strcat")
    assert not supports(cat["perl-mymalloc"], "small-loop")
    assert supports(cat["musl"], "small-loop") and not supports(cat["musl"], "python")
    assert supports(cat["jemalloc"], "python")


def test_unavailable_allocator_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("HEAPCOST_CACHE", str(tmp_path))
    r = catalog.resolve(catalog.load_catalog()["mimalloc-secure"])
    assert not r.available and "make allocators" in r.reason
    with pytest.raises(HeapcostError, match="not available here: mimalloc-secure"):
        catalog.select("mimalloc-secure")


def test_malformed_catalogue_is_a_clear_error(tmp_path):
    bad = tmp_path / "a.toml"
    bad.write_text('[[allocator]]\nid = "x"\nfamily = "x"\ndescription = ""\norigin = { kind = "ftp" }\n')
    with pytest.raises(HeapcostError, match="origin kind 'ftp'"):
        catalog.load_catalog(bad)
    bad.write_text('[[allocator]]\nid = "x"\nfamily = "x"\ndescription = ""\norigin = { kind = "path" }\n'
                   'defences = ["magic"]\n')
    with pytest.raises(HeapcostError, match="unknown defence"):
        catalog.load_catalog(bad)
    bad.write_text("[[allocator\n")
    with pytest.raises(HeapcostError, match="cannot read the catalogue"):
        catalog.load_catalog(bad)


@pytest.mark.allocators
def test_allocators_command_lists_availability():
    r = cli("allocators")
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert lines[0].split()[:3] == ["id", "family", "here"]
    assert any(l.split()[:3] == ["jemalloc", "jemalloc", "yes"] for l in lines)
    assert len(lines) == len(catalog.load_catalog()) + 1
