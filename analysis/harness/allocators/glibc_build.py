"""Builds of the system's own glibc, unchanged or with one heap check compiled out (seed 004).

Each variant is the Debian source of the installed glibc, optionally with one of our patches under
patches/glibc/, configured and built in its own cache folder
<cache>/allocators/<variant>-<source version>-<patch sha256 prefix>/ (src/, build/, build.log, stamp.json).
Programs run against a build through that build's dynamic loader with --library-path (see loader_argv).

Layout builds (one build of a library is one sample of its code layout): `<variant>_l<N>` is the
variant built again with every function aligned to 16 << (N - 1) bytes (configure CFLAGS "-g -O2
-falign-functions=..."; layout 1, the plain variant, keeps configure's default "-g -O2"). glibc links libc.so
from hundreds of objects through its own makefiles, so the knob is the alignment, not the link order: it moves
every function but changes no instruction.
"""
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from analysis.harness.allocators import debsrc
from analysis.errors import HeapcostError
from analysis.paths import REPO, cache_dir

SOURCE_PACKAGE = "glibc"
BINARY_PACKAGE = "libc6"  # the installed package whose source version is built
PATCHES_DIR = REPO / "patches" / "glibc"

# variant id -> patch file under PATCHES_DIR (None: the unpatched control)
VARIANTS = {
    "glibc-built": None,
    "glibc-no-tcache-key": "no-tcache-key.patch",
    "glibc-no-safe-linking": "no-safe-linking.patch",
}

# layout builds: id -> (variant, layout); built like the variant with layout_cflags(layout)
LAYOUT_BUILDS = {"glibc-built_l2": ("glibc-built", 2), "glibc-no-tcache-key_l2": ("glibc-no-tcache-key", 2)}

CONFIGURE_OPTIONS = ("--prefix=/usr", "--disable-werror", "--enable-stack-protector=strong", "--disable-profile",
                     "--disable-nscd", "--without-selinux")
MAKE_JOBS = 2
REQUIRED_TOOLS = ("gawk", "bison", "gcc", "make", "patch")  # `make allocators` installs them first
# one variant built with `make -j2` on a 2-core machine: 7 to 12 minutes measured (patches/glibc/README.md)
BUILD_TIME = "about 10 minutes on 2 cores"
NOT_BUILT_YET = "not built yet"
HASH_PREFIX_LENGTH = 12
STAMP_NAME = "stamp.json"
LOG_NAME = "build.log"

# The folders of a glibc build tree holding the shared libraries glibc installs (libc, libm, libmvec, libdl,
# libpthread, librt, libutil, libanl, libresolv, libnsl, the libnss_* modules, libBrokenLocale, libthread_db):
# with all of them on --library-path, none comes from /lib. The build's testrun.sh lists most of these but
# also crypt/, which is left out: Debian's libcrypt.so.1 is libxcrypt's, and the glibc one built here lacks
# its XCRYPT_2.0 symbols (perl then fails to start). malloc/ (libc_malloc_debug, only ever preloaded on
# purpose) and support/ (the test suite's library) are left out too.
BUILD_LIBRARY_DIRS = ("", "math", "mathvec", "elf", "dlfcn", "nptl", "rt", "login", "resolv", "nss", "nis",
                      "hesiod", "locale", "nptl_db")


# ---- keying (pure) ------------------------------------------------------------------------------

def check_variant(variant: str) -> str:
    if variant not in VARIANTS and variant not in LAYOUT_BUILDS:
        raise HeapcostError(f"unknown glibc variant {variant!r}; known: {', '.join([*VARIANTS, *LAYOUT_BUILDS])}")
    return variant


def base_variant(variant: str) -> str:
    """The patch variant a build is of (itself, or the variant of a layout build)."""
    return LAYOUT_BUILDS[variant][0] if variant in LAYOUT_BUILDS else check_variant(variant)


def layout(variant: str) -> int:
    return LAYOUT_BUILDS[variant][1] if variant in LAYOUT_BUILDS else (check_variant(variant) and 1)


def layout_cflags(n: int) -> str | None:
    """CFLAGS of code layout n: None (configure's default) for 1, else functions aligned to 16 << (n - 1)."""
    return None if n <= 1 else f"-g -O2 -falign-functions={16 << (n - 1)}"


def configure_options(variant: str) -> tuple:
    cflags = layout_cflags(layout(variant))
    return CONFIGURE_OPTIONS + ((f"CFLAGS={cflags}",) if cflags else ())


def patch_name(variant: str):
    return VARIANTS[base_variant(variant)]


def patch_path(variant: str):
    name = VARIANTS[base_variant(variant)]
    return PATCHES_DIR / name if name else None


def patch_bytes(variant: str) -> bytes:
    """The patch text of a variant; empty for the control."""
    path = patch_path(variant)
    if path is None:
        return b""
    if not path.is_file():
        raise HeapcostError(f"patch of {variant} missing: {path}")
    return path.read_bytes()


def patch_digest(patch: bytes) -> str:
    return hashlib.sha256(patch).hexdigest()[:HASH_PREFIX_LENGTH]


def folder_name(variant: str, source_version: str, patch: bytes) -> str:
    """'<variant>-<source version>-<patch sha256 prefix>', the version made safe as a path component."""
    return f"{check_variant(variant)}-{debsrc.safe_name(source_version)}-{patch_digest(patch)}"


def installed_source_version() -> str:
    """The Debian source version of the installed glibc (e.g. 2.36-9+deb12u14)."""
    try:
        proc = subprocess.run(["dpkg-query", "-W", "-f=${source:Version}", BINARY_PACKAGE],
                              capture_output=True, text=True)
    except FileNotFoundError:
        raise HeapcostError("dpkg-query not found: the glibc variants are built from the Debian source "
                            "of the installed glibc") from None
    if proc.returncode != 0 or not proc.stdout.strip():
        raise HeapcostError(f"cannot read the version of the installed {BINARY_PACKAGE}: "
                            + (proc.stderr.strip() or f"dpkg-query exit status {proc.returncode}"))
    return proc.stdout.strip()


def variant_dir(variant: str, source_version: str = None) -> Path:
    """The cache folder of a variant: <cache>/allocators/<variant>-<source version>-<patch sha256 prefix>/."""
    version = source_version or installed_source_version()
    return cache_dir() / "allocators" / folder_name(variant, version, patch_bytes(variant))


def build_tree(variant: str, source_version: str = None) -> Path:
    return variant_dir(variant, source_version) / "build"


def library_path(build: Path) -> str:
    return ":".join(str(Path(build) / d) if d else str(build) for d in BUILD_LIBRARY_DIRS)


def loader_argv(variant: str, source_version: str = None) -> list:
    """The argv prefix running a program against the build: [ld.so, --library-path, dirs]; append the program."""
    build = build_tree(variant, source_version)
    return [str(build / "elf" / "ld.so"), "--library-path", library_path(build)]


# ---- availability --------------------------------------------------------------------------------

def read_stamp(folder: Path):
    try:
        return json.loads((Path(folder) / STAMP_NAME).read_text())
    except (OSError, ValueError):
        return None


def stamp_matches(stamp, variant: str, source_version: str, patch: bytes) -> bool:
    return bool(stamp) and stamp.get("variant") == variant and stamp.get("source_version") == source_version \
        and stamp.get("patch_sha256") == hashlib.sha256(patch).hexdigest() \
        and stamp.get("configure_options") == list(configure_options(variant))


def missing_tools() -> list:
    return [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]


def build_running(folder: Path) -> bool:
    """Whether another process holds the folder's build lock."""
    try:
        with open(Path(folder) / ".lock") as lock:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except FileNotFoundError:
        return False
    except BlockingIOError:
        return True
    return False


def availability(variant: str, source_version: str = None):
    """(True, "") when the variant's build is finished; else (False, why not)."""
    try:
        version = source_version or installed_source_version()
        folder = variant_dir(variant, version)
        finished = stamp_matches(read_stamp(folder), variant, version, patch_bytes(variant))
    except HeapcostError as e:
        return False, str(e)
    if finished and (folder / "build" / "elf" / "ld.so").is_file() and (folder / "build" / "libc.so.6").exists():
        return True, ""
    if build_running(folder):
        return False, f"{NOT_BUILT_YET}: a build is running, see {folder / LOG_NAME}"
    if (folder / LOG_NAME).is_file():
        return False, (f"not built: the last build failed or stopped, see {folder / LOG_NAME}; "
                       f"`make allocators` builds it again ({BUILD_TIME})")
    # Tools missing here are no reason to report: provisioning installs them before it builds.
    return False, f"{NOT_BUILT_YET}: `make allocators` builds it ({BUILD_TIME})"

# ---- building ------------------------------------------------------------------------------------

def fetch_pristine_source(version: str) -> Path:
    """The extracted Debian source tree (Debian's patches applied), fetched once into the cache."""
    apt = debsrc.AptSources()
    if not debsrc.cached_tree(SOURCE_PACKAGE, version).is_dir() and not apt.has_lists():
        apt.update()
    return debsrc.fetch_source(SOURCE_PACKAGE, version, apt=apt)


def _run_logged(argv, cwd: Path, log, step: str, log_path: Path):
    log.write(f"$ (cd {cwd}) {' '.join(argv)}\n")
    log.flush()
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD", "MAKEFLAGS", "MFLAGS")}
    proc = subprocess.run(argv, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=env)
    if proc.returncode != 0:
        raise HeapcostError(f"glibc build step '{step}' failed (exit status {proc.returncode}); see {log_path}")


def build(variant: str, source_version: str = None, jobs: int = MAKE_JOBS) -> Path:
    """Build a variant in its cache folder (a finished build is reused); returns the build tree."""
    check_variant(variant)
    version = source_version or installed_source_version()
    patch = patch_bytes(variant)
    folder = variant_dir(variant, version)
    if stamp_matches(read_stamp(folder), variant, version, patch):
        return folder / "build"
    missing = missing_tools()
    if missing:
        raise HeapcostError(f"cannot build {variant}: {', '.join(missing)} missing (apt-get install {' '.join(missing)})")
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp_matches(read_stamp(folder), variant, version, patch):  # built meanwhile by another process
            return folder / "build"
        pristine = fetch_pristine_source(version)
        log_path = folder / LOG_NAME
        (folder / STAMP_NAME).unlink(missing_ok=True)
        src, tree = folder / "src", folder / "build"
        with open(log_path, "w") as log:
            started = time.monotonic()
            for old in (src, tree):
                shutil.rmtree(old, ignore_errors=True)
            _run_logged(["cp", "-a", str(pristine), str(src)], folder, log, "copy source", log_path)
            if patch:
                _run_logged(["patch", "-p1", "--forward", "--batch", "-i", str(patch_path(variant))], src, log,
                            f"patch {patch_path(variant).name}", log_path)
            tree.mkdir()
            _run_logged([str(src / "configure"), *configure_options(variant)], tree, log, "configure", log_path)
            _run_logged(["make", f"-j{jobs}"], tree, log, "make", log_path)
            seconds = time.monotonic() - started
        if not (tree / "elf" / "ld.so").is_file() or not (tree / "libc.so.6").exists():
            raise HeapcostError(f"glibc build of {variant} finished without elf/ld.so and libc.so.6; see {log_path}")
        stamp = {
            "variant": variant,
            "source_package": SOURCE_PACKAGE,
            "source_version": version,
            "patch": patch_name(variant),
            "patch_sha256": hashlib.sha256(patch).hexdigest(),
            "layout": layout(variant),
            "configure_options": list(configure_options(variant)),
            "make_jobs": jobs,
            "build_seconds": round(seconds, 1),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        tmp = folder / (STAMP_NAME + ".tmp")
        tmp.write_text(json.dumps(stamp, indent=2) + "\n")
        os.replace(tmp, folder / STAMP_NAME)
    return tree


def build_all(source_version: str = None) -> dict:
    """Build every variant one after the other; variant -> build tree."""
    return {variant: build(variant, source_version) for variant in VARIANTS}
