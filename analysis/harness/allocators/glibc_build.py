"""Builds of the system's own glibc, unchanged or with one heap check compiled out (seed 004).

Each variant is the Debian source of the installed glibc, optionally with one of our patches under
patches/glibc/, configured and built in its own cache folder
<cache>/allocators/<variant>-<source version>-<patch sha256 prefix>/ (src/, build/, build.log, stamp.json).
Programs run against a build through that build's dynamic loader with --library-path (see loader_argv).

Layout builds (one build of a library is one sample of its code layout), `<variant>_l<N>`:
- layout 2 is the variant built again with every function aligned to 32 bytes (configure CFLAGS "-g -O2
  -falign-functions=32"; layout 1, the plain variant, keeps configure's default "-g -O2"): it moves every
  function but changes no instruction;
- layouts 3 to 5 relink layout 1's own objects in another order: the members of its libc_pic.a (the objects
  libc.so is made of) are shuffled by random.Random(N), combined with `ld -r` into a new libc_pic.os, and
  libc.so is linked again with the very command glibc's makefiles ran (read from the build's log). No source
  is compiled again; the relink in the original order gives layout 1's libc.so byte for byte (tested), so the
  order is the only thing that differs. The other libraries and the loader are layout 1's.
"""
import fcntl
import hashlib
import json
import os
import random
import shlex
import shutil
import subprocess
import tempfile
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

# layout builds: id -> (variant, layout). Layout 2 is compiled again with layout_cflags(2); the relink layouts
# are layout 1's objects linked in the order permuted by seed N (relink).
LAYOUT_VARIANTS = ("glibc-built", "glibc-no-tcache-key")  # the pair of seed 004's primary cell
ALIGN_LAYOUT = 2
RELINK_LAYOUTS = (3, 4, 5)
LAYOUT_BUILDS = {f"{variant}_l{n}": (variant, n) for variant in LAYOUT_VARIANTS for n in (ALIGN_LAYOUT, *RELINK_LAYOUTS)}
RELINK_BUILD_TIME = "a few seconds (relinked from layout 1's objects)"
ORDER_NAME = "link-order.txt"  # a relink layout's member order, one name a line, kept beside its stamp

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


def is_relink(variant: str) -> bool:
    """Whether a build is one of the relink layouts (layout 1's objects in another order)."""
    return layout(variant) in RELINK_LAYOUTS


def layout_cflags(n: int) -> str | None:
    """CFLAGS of code layout n's compile: the alignment layout's "-g -O2 -falign-functions=32"; None
    (configure's default) for layout 1 and for the relink layouts, which reuse layout 1's objects."""
    return f"-g -O2 -falign-functions={16 << (n - 1)}" if n == ALIGN_LAYOUT else None


def layout_description(n: int) -> str:
    """How layout n differs from layout 1, as the catalogue and a run's provenance say it."""
    if n == ALIGN_LAYOUT:
        return f"functions aligned to {16 << (n - 1)} bytes"
    if n in RELINK_LAYOUTS:
        return f"libc_pic.a's members relinked in the order random.Random({n}) shuffles them to"
    return "as built"


def member_order(members: list, seed: int) -> list:
    """The members of libc_pic.a in the order a relink layout links them: shuffled by random.Random(seed),
    which gives the same order in every Python 3 on every machine."""
    order = list(members)
    random.Random(seed).shuffle(order)
    return order


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
        if is_relink(variant) and not relink_current(variant, version):
            return False, (f"{NOT_BUILT_YET}: layout 1 of {base_variant(variant)} was built again after this relink; "
                           f"`make allocators` relinks it ({RELINK_BUILD_TIME})")
        return True, ""
    if build_running(folder):
        return False, f"{NOT_BUILT_YET}: a build is running, see {folder / LOG_NAME}"
    if (folder / LOG_NAME).is_file():
        return False, (f"not built: the last build failed or stopped, see {folder / LOG_NAME}; "
                       f"`make allocators` builds it again ({BUILD_TIME})")
    # Tools missing here are no reason to report: provisioning installs them before it builds.
    return False, f"{NOT_BUILT_YET}: `make allocators` builds it ({RELINK_BUILD_TIME if is_relink(variant) else BUILD_TIME})"


def relink_current(variant: str, source_version: str) -> bool:
    """Whether a relink layout was made from the layout 1 build there is now (its libc.so's sha256)."""
    stamp = read_stamp(variant_dir(variant, source_version)) or {}
    base = build_tree(base_variant(variant), source_version) / "libc.so"
    return base.is_file() and stamp.get("relinked_from_sha256") == _sha256(base)


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# what a run records of a build's stamp: how it was made, never where or when
PROVENANCE_KEYS = ("source_package", "source_version", "patch", "patch_sha256", "layout", "method", "relinked_from",
                   "relinked_from_sha256", "seed", "members", "member_order_sha256", "configure_options", "compiler",
                   "linker", "libc_sha256")


def provenance(variant: str, source_version: str = None) -> dict:
    """How a finished build was made, from its stamp, as a run's allocator record keeps it ({} if unbuilt),
    with the sha256 of its libc.so's code (code_sha256)."""
    try:
        folder = variant_dir(variant, source_version)
    except HeapcostError:
        return {}
    stamp = read_stamp(folder) or {}
    out = {k: stamp[k] for k in PROVENANCE_KEYS if k in stamp}
    code = code_sha256(folder / "build" / "libc.so") if stamp else ""
    return {**out, "libc_code_sha256": code} if code else out


def code_sha256(library: Path) -> str:
    """The sha256 of a library without its debug information and build-id note ("" when objcopy cannot
    read it). glibc's debug information keeps the absolute path of the folder it was built in, and the
    build-id hashes it; without them, two builds of one variant in different folders are the same bytes
    (checked by hand: a second build of glibc-built under another cache folder differed in its sha256, and
    not in this one)."""
    library = Path(library).resolve()
    if not library.is_file():
        return ""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "code"
        proc = subprocess.run(["objcopy", "--strip-debug", "--remove-section", ".note.gnu.build-id", str(library),
                               str(out)], capture_output=True)
        return _sha256(out) if proc.returncode == 0 and out.is_file() else ""


def library_files(variant: str, source_version: str = None) -> list:
    """The files a run's provenance identifies a build by: its libc.so.6 and its loader, symbolic links resolved."""
    tree = build_tree(variant, source_version)
    return [(tree / "libc.so.6").resolve(), (tree / "elf" / "ld.so").resolve()]

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
    if is_relink(variant):
        return relink(variant, version, jobs)
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
            **_stamp_head(variant, version, patch),
            "configure_options": list(configure_options(variant)),
            "make_jobs": jobs,
            "compiler": _tool_version("gcc"),
            "build_seconds": round(seconds, 1),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        _write_stamp(folder, stamp)
    return tree


def _stamp_head(variant: str, version: str, patch: bytes) -> dict:
    """What every build's stamp.json says first: which variant of which source with which patch, and its layout."""
    return {"variant": variant, "source_package": SOURCE_PACKAGE, "source_version": version,
            "patch": patch_name(variant), "patch_sha256": hashlib.sha256(patch).hexdigest(), "layout": layout(variant)}


def _write_stamp(folder: Path, stamp: dict) -> None:
    tmp = folder / (STAMP_NAME + ".tmp")
    tmp.write_text(json.dumps(stamp, indent=2) + "\n")
    os.replace(tmp, folder / STAMP_NAME)


# ---- relink layouts ------------------------------------------------------------------------------

def libc_link_command(base_tree: Path, log_text: str) -> list:
    """The command glibc's makefiles linked <base_tree>/libc.so with, read from the build's log."""
    out = f"-o {base_tree}/libc.so "
    for line in log_text.splitlines():
        if line.startswith("gcc ") and " -shared " in line and out in line and f"{base_tree}/libc_pic.os" in line:
            if any(c in line for c in "'\"$`\\;|&<>"):
                raise HeapcostError(f"the libc.so link command in the build log of {base_tree.parent.name} "
                                    "holds shell syntax; relink it by hand")
            return shlex.split(line)
    raise HeapcostError(f"no libc.so link command in the build log of {base_tree.parent.name}; "
                        "build that variant again (`python -m analysis provision --only ... --force`)")


def relink_argv(command: list, base_tree: Path, pic_object: Path, output: Path) -> list:
    """The link command of layout 1 with its libc_pic.os and its output replaced."""
    argv = [str(pic_object) if a == f"{base_tree}/libc_pic.os" else a for a in command]
    if argv.count("-o") != 1 or str(pic_object) not in argv:
        raise HeapcostError(f"unexpected libc.so link command in the build log of {base_tree.parent.name}")
    argv[argv.index("-o") + 1] = str(output)
    return argv


def libc_pic_members(base_tree: Path) -> list:
    """The members of a build's libc_pic.a in their archive order (the order layout 1 links them in)."""
    proc = subprocess.run(["ar", "t", str(Path(base_tree) / "libc_pic.a")], capture_output=True, text=True)
    if proc.returncode != 0:
        raise HeapcostError(f"cannot list libc_pic.a of {Path(base_tree).parent.name}: {proc.stderr.strip()}")
    members = proc.stdout.split()
    if len(set(members)) != len(members):
        raise HeapcostError(f"libc_pic.a of {Path(base_tree).parent.name} names a member twice; "
                            "its order cannot be permuted by name")
    return members


def link_in_order(base_tree: Path, order: list, work: Path, output: Path, log, log_path: Path) -> Path:
    """libc.so linked as the base build linked it, from its libc_pic.a's members combined in `order`:
    the members extracted into `work` (removed afterwards), combined by `ld -r` into <output's folder>/
    libc_pic.os (removed afterwards), and linked by the build log's command."""
    base_tree, work, output = Path(base_tree), Path(work), Path(output)
    command = libc_link_command(base_tree, (base_tree.parent / LOG_NAME).read_text(errors="replace"))
    pic = output.parent / "libc_pic.os"
    work.mkdir(parents=True, exist_ok=True)
    try:
        _run_logged(["ar", "x", str(base_tree / "libc_pic.a")], work, log, "extract libc_pic.a", log_path)
        _run_logged(["gcc", "-nostdlib", "-nostartfiles", "-r", "-o", str(pic), *order], work, log,
                    "combine the objects in the given order", log_path)
        _run_logged(relink_argv(command, base_tree, pic, output), output.parent, log, "link libc.so", log_path)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        pic.unlink(missing_ok=True)
    return output


def _tool_version(tool: str) -> str:
    try:
        proc = subprocess.run([tool, "--version"], capture_output=True, text=True)
    except FileNotFoundError:
        return ""
    return proc.stdout.splitlines()[0] if proc.stdout else ""


def relink(variant: str, version: str, jobs: int = MAKE_JOBS) -> Path:
    """Make a relink layout: layout 1 built first if need be, its libc_pic.a's members combined in the order
    member_order gives, libc.so linked again by the build log's command, and a build tree whose other
    libraries and loader are layout 1's (symbolic links). Reused while layout 1 stays the same build."""
    base = base_variant(variant)
    patch = patch_bytes(variant)
    folder = variant_dir(variant, version)
    if stamp_matches(read_stamp(folder), variant, version, patch) and relink_current(variant, version):
        return folder / "build"
    base_tree = build(base, version, jobs)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp_matches(read_stamp(folder), variant, version, patch) and relink_current(variant, version):
            return folder / "build"
        (folder / STAMP_NAME).unlink(missing_ok=True)
        log_path = folder / LOG_NAME
        objects, tree = folder / "objects", folder / "build"
        with open(log_path, "w") as log:
            started = time.monotonic()
            for old in (objects, tree):
                shutil.rmtree(old, ignore_errors=True)
            tree.mkdir()
            order = member_order(libc_pic_members(base_tree), layout(variant))
            (folder / ORDER_NAME).write_text("\n".join(order) + "\n")
            link_in_order(base_tree, order, objects, tree / "libc.so", log, log_path)
            (tree / "libc.so.6").symlink_to("libc.so")
            for sub in filter(None, BUILD_LIBRARY_DIRS):
                (tree / sub).symlink_to(base_tree / sub, target_is_directory=True)
            seconds = time.monotonic() - started
        base_stamp = read_stamp(base_tree.parent) or {}
        _write_stamp(folder, {
            **_stamp_head(variant, version, patch),
            "method": "relink",
            "relinked_from": base,
            "relinked_from_sha256": _sha256(base_tree / "libc.so"),
            "seed": layout(variant),
            "members": len(order),
            "member_order_sha256": hashlib.sha256(("\n".join(order) + "\n").encode()).hexdigest(),
            "configure_options": list(configure_options(variant)),
            "compiler": base_stamp.get("compiler") or _tool_version("gcc"),
            "linker": _tool_version("ld"),
            "libc_sha256": _sha256(tree / "libc.so"),
            "build_seconds": round(seconds, 1),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        })
    return tree


def build_all(source_version: str = None) -> dict:
    """Build every patch variant one after the other; variant -> build tree."""
    return {variant: build(variant, source_version) for variant in VARIANTS}
