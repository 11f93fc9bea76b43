"""Compile the project's small C programs into build/, keyed by a hash of everything that shapes them."""
import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from analysis.errors import HeapcostError
from analysis.paths import BUILD_DIR

VARIANT_CC = {"glibc": "gcc", "musl": "musl-gcc"}
SOURCE_SUFFIXES = (".c", ".cc", ".cpp")  # other files (headers) only enter the hash


def _compiler_version(cc: str) -> str:
    try:
        return subprocess.run([cc, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise HeapcostError(f"compiler {cc!r} is not usable: {exc}") from None


def build_c(name, sources, *, variant="glibc", cflags=(), ldflags=(), shared=False, cc=None) -> Path:
    """Build `name` from C (or, with cc="g++", C++) sources; returns the binary (or shared object)."""
    cc = cc or VARIANT_CC[variant]
    if shutil.which(cc) is None:
        raise HeapcostError(f"compiler {cc!r} not found (variant {variant}); run `make allocators`")
    sources = [Path(s) for s in sources]
    cflags = list(cflags)
    ldflags = list(ldflags)
    if variant == "musl" and not shared:
        ldflags = ["-static", *ldflags]
    h = hashlib.sha256()
    for part in (cc, _compiler_version(cc), variant, str(shared), *cflags, *ldflags):
        h.update(part.encode() + b"\0")
    for src in sources:
        h.update(src.name.encode() + b"\0" + src.read_bytes())
    suffix = ".so" if shared else ""
    out_dir = BUILD_DIR / variant
    out = out_dir / f"{name}-{h.hexdigest()[:12]}{suffix}"
    if out.exists():
        return out
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if out.exists():
            return out
        tmp = out.with_name(out.name + f".tmp{os.getpid()}")
        # a header passed in is found by the sources that include it, wherever it lies (child_io.h sits with the
        # launcher, the campaigns' drivers beside their modules)
        includes = [f"-I{d}" for d in sorted({str(s.parent) for s in sources if s.suffix == ".h"})]
        cmd = [cc, "-O2", "-g", "-Wall", *includes, *cflags]
        if shared:
            cmd += ["-shared", "-fPIC"]
        cmd += [str(s) for s in sources if s.suffix in SOURCE_SUFFIXES] + ["-o", str(tmp), *ldflags]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            first = (proc.stderr.strip().splitlines() or ["(no output)"])[0]
            raise HeapcostError(f"building {name} failed: {first}")
        os.replace(tmp, out)
    return out
