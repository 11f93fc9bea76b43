"""Allocators brought under a name the catalogue knows (origin kind `brought`: hardened_malloc, OpenBSD's
malloc): a fixture library of our own, brought as hardened-72fb357, goes through measure, probe and the
paper's results, with its claims, its provenance and its place in seed 001's debate."""
import csv
import json
import subprocess
from pathlib import Path

import pytest

from analysis.errors import HeapcostError
from analysis.harness.allocators import brought, catalog
from conftest import FIXTURES, cli

SEED_COMMIT = "72fb3576f568481a03076c62df37984f96bfdfeb"


@pytest.fixture(scope="module")
def fake_hardened(tmp_path_factory):
    """tests/fixtures/reserve_4tib.c (reserves 4 TiB at start, as hardened_malloc reserves its state, then
    forwards to glibc) under hardened_malloc's file name, with a provenance file naming the seed's commit."""
    lib = tmp_path_factory.mktemp("brought") / "libhardened_malloc.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", str(FIXTURES / "reserve_4tib.c"), "-o", str(lib)],
                   check=True)
    Path(f"{lib}.json").write_text(json.dumps({"upstream": "GrapheneOS/hardened_malloc", "revision": SEED_COMMIT[:12],
                                               "configuration": "test fixture, not hardened_malloc"}))
    return lib


def test_a_known_name_takes_the_catalogue_entry_and_records_the_library(fake_hardened):
    cat = catalog.load_catalog()
    (alloc,) = catalog.parse_extra(f"hardened-72fb357={fake_hardened}", cat)
    assert alloc.user_supplied and alloc.family == "hardened_malloc"
    assert alloc.defences == cat["hardened-72fb357"].defences and alloc.min_max_map_count == 1048576
    assert catalog.resolve(alloc).available and catalog.resolve(alloc).preload == (str(fake_hardened),)
    record = brought.library_records([alloc])["hardened-72fb357"]
    assert record["library"] == "libhardened_malloc.so" and len(record["library_sha256"]) == 64
    assert record["revision"] == SEED_COMMIT and record["provenance"]["revision"] == SEED_COMMIT[:12]
    assert "path" not in json.dumps(record) and str(fake_hardened.parent) not in json.dumps(record)
    assert "path" not in brought.portable_origin(alloc.origin)
    # an unknown name stays an anonymous library without claims
    (anon,) = catalog.parse_extra(f"mine={fake_hardened}", cat)
    assert anon.origin["kind"] == "path" and anon.defences == ()


def test_not_brought_says_how_to_bring_it_and_a_wrong_revision_is_refused(fake_hardened, tmp_path):
    r = catalog.resolve(catalog.load_catalog()["omalloc-1.128"])
    assert not r.available and "EXTRA_ALLOCATORS=omalloc-1.128=" in r.reason and "1.128" in r.reason
    other = tmp_path / "libhardened_malloc.so"
    other.write_bytes(fake_hardened.read_bytes())
    Path(f"{other}.json").write_text(json.dumps({"revision": "cd2315cedff5"}))
    with pytest.raises(HeapcostError, match="says revision 'cd2315cedff5', the catalogue's hardened-72fb357"):
        catalog.parse_extra(f"hardened-72fb357={other}", catalog.load_catalog())
    Path(f"{other}.json").write_text("{not json")
    with pytest.raises(HeapcostError, match="not readable JSON"):
        catalog.parse_extra(f"hardened-72fb357={other}", catalog.load_catalog())
    with pytest.raises(HeapcostError, match="already a catalogue id"):
        catalog.parse_extra(f"jemalloc={other}", catalog.load_catalog())


def test_the_map_count_is_checked_before_a_campaign(fake_hardened, tmp_path):
    (alloc,) = catalog.parse_extra(f"hardened-72fb357={fake_hardened}", catalog.load_catalog())
    setting = tmp_path / "max_map_count"
    setting.write_text("65530\n")
    with pytest.raises(HeapcostError, match=r"vm.max_map_count is 65530; hardened-72fb357 need at least "
                                            r"1048576 .*sysctl -w vm.max_map_count=1048576"):
        brought.check_map_count([alloc], setting)
    setting.write_text("1048576\n")
    brought.check_map_count([alloc], setting)
    brought.check_map_count([catalog.load_catalog()["glibc"]], tmp_path / "absent")


@pytest.mark.slow
def test_a_brought_fixture_goes_through_measure_probe_and_the_debate(fake_hardened, tmp_path, runs_dir):
    from analysis.publish.debates import questions
    from analysis.publish.results import comparisons
    from simulated_dataset import make_dataset

    if int(Path("/proc/sys/vm/max_map_count").read_text()) < 1048576:
        pytest.skip("vm.max_map_count below hardened_malloc's 1048576 (sysctl -w vm.max_map_count=1048576)")
    extra = f"hardened-72fb357={fake_hardened}"
    r = cli("measure", "--profile", "smoke", "--allocators", "glibc", "--workloads", "compile", "--blocks", "5",
            "--protocol", "trials", "--no-progress", "--extra-allocators", extra)
    assert r.returncode == 0, r.stderr
    run_dir = Path(r.stdout.strip().splitlines()[-1])
    info = json.loads((run_dir / "run.json").read_text())
    assert info["params"]["brought_libraries"]["hardened-72fb357"]["revision"] == SEED_COMMIT
    assert info["allocators"]["hardened-72fb357"]["defences"] == list(
        catalog.load_catalog()["hardened-72fb357"].defences)
    rows = [row for row in csv.DictReader(open(run_dir / "trials.csv")) if row["allocator"] == "hardened-72fb357"]
    assert rows and all(row["status"] == "ok" for row in rows)

    probe_dir = tmp_path / "probe"
    r = cli("probe", "--allocators", "glibc", "--extra-allocators", extra, "--probes", "double-free",
            "--sizes", "41", "--runs", "2", "--out", str(probe_dir))
    assert r.returncode == 0, r.stderr
    outcomes = {row["allocator"]: row["outcome"] for row in csv.DictReader(open(probe_dir / "probes.csv"))}
    assert outcomes["hardened-72fb357"] == "caught"  # glibc's check, underneath the fixture
    assert "hardened-72fb357" in json.loads((probe_dir / "run.json").read_text())["params"]["brought_libraries"]

    data = make_dataset(tmp_path / "dataset")
    (data / "runs" / run_dir.name).symlink_to(run_dir)
    res = comparisons.compute(data)
    row = questions.answer(res, res.figures).drop_duplicates("seed").set_index("seed").loc["001"]
    assert row["configuration"] == "hardened-72fb357 / glibc" and row["run_id"] == run_dir.name
    assert "n/a" not in (row["display"], row["memory_display"], row["user_display"])  # system time: too
    # little at the smoke scale to be usable in every trial, so it may read n/a here
