"""Same source, same score: a probe on a built glibc must see the process layout a
program on the system's glibc sees. The system's own ld.so and libc stand in for a build here, so the
test runs on every machine: started as `ld.so --library-path dir probe` (how built glibcs were run) the
brk heap sits below the probe's static data and glibc's "double free or corruption (out)" check catches
the forged chunk that the same glibc hands back when the kernel loads the probe itself."""
import os
from pathlib import Path

import pytest

from analysis.errors import HeapcostError
from analysis.harness.security import probes as P
from analysis.harness.security.probe_build import interpreter_ldflags
from conftest import libc_path


def system_loader() -> tuple:
    """The system's ld.so and libc folder in the shape of a built glibc's loader argv."""
    ld_so = Path("/lib64/ld-linux-x86-64.so.2")
    if not ld_so.exists():
        pytest.skip("no x86-64 system loader")
    return (os.path.realpath(ld_so), "--library-path", str(Path(libc_path()).parent))


def test_the_loader_becomes_the_interpreter_and_a_malformed_one_is_refused():
    flags = interpreter_ldflags(("/b/elf/ld.so", "--library-path", "/b:/b/nptl"))
    assert "-Wl,--dynamic-linker=/b/elf/ld.so" in flags and "-Wl,-rpath,/b:/b/nptl" in flags
    assert interpreter_ldflags(()) == ()
    with pytest.raises(HeapcostError, match="loader argv"):
        interpreter_ldflags(("/b/elf/ld.so", "--preload", "/x.so"))


def test_a_forged_chunk_meets_the_same_checks_as_on_the_system_glibc():
    probe = P.PROBES["fake-chunk-free"]
    system = P.Target("glibc", expect_malloc="libc.so.6")
    as_built = P.Target("glibc-as-built", expect_malloc="libc.so.6", loader=system_loader())
    binary = P.binary_for(probe.source, as_built)
    assert binary != P.binary_for(probe.source, system)
    on_system = P.run_once(probe, system, P.binary_for(probe.source, system), 4000)
    on_build = P.run_once(probe, as_built, binary, 4000)
    assert on_system.outcome == "missed" and on_system.values.get("forged_returned") == "1"
    assert (on_build.outcome, on_build.values.get("forged_returned")) == (on_system.outcome, "1"), on_build.detail


def test_the_heap_of_a_built_glibc_is_as_random_as_the_systems():
    """The loader run as the program put brk after ld.so: 18 bits of small-block entropy, not 28."""
    probe = P.PROBES["address-entropy"]
    as_built = P.Target("glibc-as-built", expect_malloc="libc.so.6", loader=system_loader())
    row = P.probe_target(probe, as_built, 20)
    assert float(row["bits"]) > 24, row["detail"]


@pytest.mark.allocators
def test_glibc_built_probes_as_the_system_glibc_where_the_source_is_the_same():
    """The R18 difference itself: on glibc-built, fake-chunk-free was caught at 4000 and 5000 bytes and the heap
    had 18 bits of entropy; on the system's glibc, built from the same source, missed and 28 bits."""
    from analysis.harness.allocators import glibc_build
    from analysis.harness.allocators.catalog import load_catalog

    ok, why = glibc_build.availability("glibc-built")
    if not ok:
        pytest.skip(f"glibc-built: {why}")
    cat = load_catalog()
    system, built = P.target_for(cat["glibc"]), P.target_for(cat["glibc-built"])
    fake = P.PROBES["fake-chunk-free"]
    for size in (4000, 5000):
        on_build = P.run_once(fake, built, P.binary_for(fake.source, built), size)
        on_system = P.run_once(fake, system, P.binary_for(fake.source, system), size)
        assert on_build.outcome == on_system.outcome == "missed", (on_build.detail, on_system.detail)
    row = P.probe_target(P.PROBES["address-entropy"], built, 20)
    assert float(row["bits"]) > 24, row["detail"]
