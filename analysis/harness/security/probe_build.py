"""Building the probe programs (probes/*.c, *.cc) for a variant and, on a built glibc, for that build's loader."""
import shutil
from functools import lru_cache
from pathlib import Path

from analysis.errors import HeapcostError
from analysis.paths import PROBES_DIR

# Only the misuse may be undefined behaviour: no optimisation may fold, move or drop it.
PROBE_CFLAGS = ("-O0", "-fno-builtin", "-U_FORTIFY_SOURCE", "-pthread", "-Wno-use-after-free",
                "-Wno-free-nonheap-object", "-Wno-alloc-size-larger-than", "-Wno-unused-function")
PROBE_LDFLAGS = ("-pthread", "-ldl")


def interpreter_ldflags(loader: tuple) -> tuple:
    """Link flags making a built glibc's ld.so the program's interpreter (its libraries on the run path),
    so the kernel lays the process out as on the system's glibc. Run as `ld.so --library-path dirs prog`,
    ld.so is the executable and the brk heap sits below the program's static data: fake-chunk-free was
    caught only on the build and the heap had 18 bits of entropy, not 28 (tests/harness/security/test_probe_build.py)."""
    if not loader:
        return ()
    ld_so, flag, dirs = (str(part) for part in loader)
    if flag != "--library-path":
        raise HeapcostError(f"a built glibc's loader argv must be [ld.so, --library-path, dirs], not {list(loader)}")
    return (f"-Wl,--dynamic-linker={ld_so}", f"-Wl,-rpath,{dirs}", "-Wl,--enable-new-dtags")


@lru_cache(maxsize=None)
def probe_binary(source: str, variant: str = "glibc", loader: tuple = ()) -> Path:
    """The probe program of a source in probes/ for a variant (glibc, or musl: static) and a loader."""
    from analysis.harness.process.build import build_c

    src = PROBES_DIR / source
    header = PROBES_DIR / "probe.h"
    name = "probe-" + src.stem.replace("_", "-")
    ldflags = (*PROBE_LDFLAGS, *interpreter_ldflags(tuple(loader)))
    if src.suffix == ".cc":
        if variant != "glibc":
            raise HeapcostError(f"{source} is C++: no C++ runtime for the {variant} variant")
        if shutil.which("g++") is None:
            raise HeapcostError("compiler 'g++' not found: apt-get install g++")
        return build_c(name, [src, header], cflags=PROBE_CFLAGS, ldflags=ldflags, cc="g++")
    return build_c(name, [src, header], variant=variant, cflags=PROBE_CFLAGS, ldflags=ldflags)


def binary_for(source: str, target) -> Path:
    """The probe program for a source as `target` runs it (its variant; a built glibc's own interpreter)."""
    return probe_binary(source, target.variant, tuple(target.loader))
