"""`python -m analysis provision` (behind `make allocators`): install or build every allocator we can have.

By origin kind: `debian` and `musl` are apt packages; `pypi` is cmeel-mimalloc from the venv;
`debian-source` allocators are built from Debian source packages into
<cache>/allocators/<id>-<source-version>/, which a new clone reuses. A build counts as finished only once
its BUILD.json says the verification passed; it is written last, after everything else is in place.
`glibc-build` allocators are the system's glibc source built unchanged or with one of our patches
(harness/allocators/glibc_build.py: its own cache folders and stamp.json).
"""
import datetime
import fcntl
import glob
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from analysis.harness.allocators import brought, catalog, debsrc, debsrc_paths, glibc_build, mozjemalloc_build
from analysis.harness.allocators.cache import allocators_root, built_prefix, read_build_record
from analysis.errors import HeapcostError
from analysis.paths import REPO, RUNS_DIR, cache_dir, file_sha256

JOBS = "2"
KINDS = ("system", "debian", "pypi", "debian-source", "musl", "path", "glibc-build", "brought")
SLOW_KINDS = ("debian-source", "glibc-build")  # built from source: provisioned last
# what configure and make of glibc need besides the compiler (glibc_build.REQUIRED_TOOLS)
GLIBC_BUILD_DEPS = ("build-essential", "dpkg-dev", "gawk", "bison", "patch")
BUILD_TOOLS = ("build-essential", "cmake", "dpkg-dev")
# perl's own Build-Depends for its bundled extensions: installed always, so every machine builds the same set
PERL_EXTENSION_LIBS = ("libdb-dev", "libgdbm-dev", "libgdbm-compat-dev", "zlib1g-dev", "libbz2-dev")
MUSL_PACKAGE = "musl-tools"
# what the workloads, the probes, callgrind mode, debsrc, `make bench` and `profile` (strace) run besides the allocators
TOOL_PACKAGES = ("gcc", "g++", "make", "dpkg-dev", "perl", "python3", "sqlite3", "valgrind", "hyperfine", "strace",
                 "gawk",  # the alternation bench's word count, beside perl, python3, sqlite3, gzip and sort
                 "redis-server", "redis-tools", "chromium",  # chromium: tests/integration/test_browser.py opens paper.html headless
                 "flex", "bison", "bc", "libelf-dev",  # the linux-build workload: kconfig's parser, timeconst, objtool
                 "slurm-wlm", "munge")  # the fleet's test starts a one-node Slurm cluster on the loopback interface
PYPI_LIB_GLOB = "lib/python3*/site-packages/cmeel.prefix/lib/libmimalloc.so*"


# ---- build recipes for the debian-source allocators -----------------------------------------------

@dataclass(frozen=True)
class Recipe:
    """How one allocator is built from a Debian source package.

    `steps(src, build, prefix, destdir)` gives the commands as (argv, cwd, extra_env); the install step
    must honour DESTDIR so the build is staged and moved into place only when complete.
    `verify(prefix)` gives (argv, extra_env) and `verified(output)` judges what it printed.
    """
    package: str
    options: tuple
    outputs: tuple                      # paths under the prefix that must exist afterwards
    steps: object
    verify: object
    verified: object
    build_deps: tuple = BUILD_TOOLS
    notes: str = ""
    version: str = None                 # a pinned source version; None: the newest that downloads
    source_paths: tuple = ()            # only these paths of the source (debsrc_paths); () the whole package


def _cmake_steps(options):
    def steps(src, build, prefix, destdir):
        return [
            (["cmake", "-S", str(src), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
              f"-DCMAKE_INSTALL_PREFIX={prefix}", "-DCMAKE_INSTALL_LIBDIR=lib", *options], src, {}),
            (["cmake", "--build", str(build), "-j", JOBS], src, {}),
            (["cmake", "--install", str(build)], src, {"DESTDIR": str(destdir)}),
        ]
    return steps


def _perl_steps(options):
    def steps(src, build, prefix, destdir):
        # perl builds in its source tree: `src` is already a private copy
        return [
            (["sh", "./Configure", "-des", f"-Dprefix={prefix}", *options], src, {}),
            (["make", f"-j{JOBS}"], src, {}),
            (["make", "install", f"DESTDIR={destdir}"], src, {}),
        ]
    return steps


MIMALLOC_SECURE_OPTIONS = ("-DMI_SECURE=ON", "-DMI_BUILD_TESTS=OFF", "-DMI_BUILD_STATIC=OFF",
                           "-DMI_BUILD_OBJECT=OFF", "-DMI_INSTALL_TOPLEVEL=ON")
# identical except the malloc; no man pages (they only slow the install)
PERL_COMMON_OPTIONS = ("-Dcc=gcc", "-Doptimize=-O2", "-Dman1dir=none", "-Dman3dir=none", "-Uusethreads")


def _perl_recipe(mymalloc: bool) -> Recipe:
    flag = "y" if mymalloc else "n"
    options = (f"-Dusemymalloc={flag}",) + PERL_COMMON_OPTIONS
    return Recipe(
        package="perl", options=options, outputs=("bin/perl",), steps=_perl_steps(options),
        verify=lambda prefix: ([str(prefix / "bin" / "perl"), "-V:usemymalloc"], {}),
        verified=lambda out: f"usemymalloc='{flag}';" in out,
        build_deps=BUILD_TOOLS + PERL_EXTENSION_LIBS,
        notes="perl's own malloc (malloc.c)" if mymalloc else "perl calling the C library's malloc")


RECIPES = {
    "mimalloc-secure": Recipe(
        package="mimalloc", options=MIMALLOC_SECURE_OPTIONS, outputs=("lib/libmimalloc-secure.so",),
        steps=_cmake_steps(MIMALLOC_SECURE_OPTIONS),
        # mimalloc reports its compiled-in secure level when verbose
        verify=lambda prefix: (["/bin/true"], {"LD_PRELOAD": str(prefix / "lib" / "libmimalloc-secure.so"),
                                               "MIMALLOC_VERBOSE": "1"}),
        verified=lambda out: "secure level: 4" in out),
    "perl-mymalloc": _perl_recipe(True),
    "perl-sysmalloc": _perl_recipe(False),
    **{cid: Recipe(package=mozjemalloc_build.PACKAGE, version=mozjemalloc_build.VERSION,
                   source_paths=mozjemalloc_build.SOURCE_PATHS, options=mozjemalloc_build.options(cid),
                   outputs=mozjemalloc_build.outputs(cid), steps=mozjemalloc_build.steps(cid),
                   verify=mozjemalloc_build.verify(cid), verified=mozjemalloc_build.verified(cid),
                   build_deps=mozjemalloc_build.COMPILER_PACKAGES[c.compiler], notes=c.notes)
       for cid, c in mozjemalloc_build.CONFIGS.items()},
}


# ---- the cache of finished builds -------------------------------------------------------------------

class Log:
    """Commands and their output go to a file in the cache; the terminal gets one line per action."""

    def __init__(self, path: Path = None, quiet=False):
        if path is None:
            stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            path = cache_dir() / "logs" / f"provision-{stamp}-{os.getpid()}.log"
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(self.path, "a")
        self.name = str(self.path)
        self.quiet = quiet

    def write(self, text):
        self.file.write(text)

    def flush(self):
        self.file.flush()

    def say(self, text):
        self.file.write(f"## {text}\n")
        self.file.flush()
        if not self.quiet:
            print(text, flush=True)


def _run_logged(argv, cwd, env_extra, log):
    env = dict(os.environ, LC_ALL="C", **env_extra)
    log.write(f"$ (cd {cwd}; {' '.join(f'{k}={v}' for k, v in env_extra.items())} {' '.join(map(str, argv))})\n")
    log.flush()
    proc = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, stdout=log.file, stderr=subprocess.STDOUT)
    log.flush()
    return proc.returncode


def _tool_version(argv):
    try:
        out = subprocess.run(argv, capture_output=True, text=True).stdout
    except OSError:
        return None
    return out.splitlines()[0].strip() if out else None


def build(allocator_id: str, recipe: Recipe = None, *, log: Log, source_tree: Path = None, root: Path = None,
          force=False) -> Path:
    """Build one debian-source allocator (or reuse the finished build of the same source version)."""
    recipe = recipe or RECIPES[allocator_id]
    root = Path(root) if root else allocators_root()
    src = Path(source_tree) if source_tree else _source_tree(recipe, log)
    version = debsrc.version_of_tree(src)
    final = root / f"{allocator_id}-{debsrc.safe_name(version)}"
    record = read_build_record(final)
    if record and record.get("allocator") == allocator_id and not force:
        log.say(f"{allocator_id}: reusing {final} (built {record.get('built_utc')})")
        return final
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".lock-{allocator_id}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = read_build_record(final)
        if record and record.get("allocator") == allocator_id and not force:
            return final
        return _build_locked(allocator_id, recipe, src, version, final, root, log)


def _source_tree(recipe: Recipe, log) -> Path:
    apt = debsrc.AptSources(log=log)
    if recipe.source_paths:
        if not (debsrc_paths.cached_paths_tree(recipe.package, recipe.version, recipe.source_paths).parent
                / debsrc.COMPLETE_MARK).is_file():
            log.say(f"{recipe.package} {recipe.version}: downloading the source, extracting "
                    f"{', '.join(recipe.source_paths)} only")
        return debsrc_paths.fetch_source_paths(recipe.package, recipe.version, recipe.source_paths, apt=apt)
    return debsrc.fetch_source(recipe.package, recipe.version, apt=apt)


def _build_locked(allocator_id, recipe, src, version, final, root, log):
    tag = f"{allocator_id}-{os.getpid()}"
    work = cache_dir() / "build" / tag
    stage = root / f".stage-{tag}"
    for d in (work, stage):
        shutil.rmtree(d, ignore_errors=True)
    if final.exists():
        shutil.rmtree(final)  # unfinished (no verified BUILD.json) or forced
    log.say(f"{allocator_id}: building from Debian source {recipe.package} {version} into {final}")
    try:
        shutil.copytree(src, work / "src", symlinks=True)
        started = time.monotonic()
        commands = recipe.steps(work / "src", work / "build", final, stage)
        for argv, cwd, extra in commands:
            if _run_logged(argv, cwd, extra, log) != 0:
                raise HeapcostError(f"building {allocator_id} failed at `{' '.join(map(str, argv[:3]))}`; "
                                    f"see {log.path}")
        staged = stage / final.relative_to(final.anchor)
        missing = [o for o in recipe.outputs if not (staged / o).exists()]
        if missing:
            raise HeapcostError(f"building {allocator_id} produced no {', '.join(missing)}; see {log.path}")
        os.rename(staged, final)
        build_seconds = round(time.monotonic() - started, 1)
        argv, extra = recipe.verify(final)
        env = dict(os.environ, **extra)
        proc = subprocess.run(argv, capture_output=True, text=True, env=env)
        output = (proc.stdout + proc.stderr).strip()
        ok = proc.returncode == 0 and bool(recipe.verified(output))
        record = {
            "allocator": allocator_id,
            "source_package": recipe.package,
            "source_version": version,
            "options": list(recipe.options),
            "commands": [[str(a) for a in argv_] for argv_, _, _ in commands],
            "outputs": list(recipe.outputs),
            "notes": recipe.notes,
            "build_seconds": build_seconds,
            "built_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": {"arch": platform.machine(), "kernel": platform.release(), "cpus": os.cpu_count(),
                        "cc": _tool_version(["gcc", "--version"]), "cmake": _tool_version(["cmake", "--version"])},
            "verification": {"command": [str(a) for a in argv], "env": extra, "exit_code": proc.returncode,
                             "output": output[-2000:], "ok": ok},
        }
        tmp = final / "BUILD.json.tmp"
        tmp.write_text(json.dumps(record, indent=2) + "\n")
        if not ok:
            failed = root / f".failed-{final.name}-{int(time.time())}"
            os.rename(final, failed)  # keep it for diagnosis, out of every glob that looks for builds
            raise HeapcostError(f"{allocator_id} built but failed its check `{' '.join(map(str, argv))}` "
                                f"(printed {output[-200:]!r}); kept in {failed}")
        os.replace(tmp, final / "BUILD.json")
        evidence = next((ln for ln in output.splitlines() if recipe.verified(ln)), output[-80:])
        log.say(f"{allocator_id}: built in {build_seconds:.0f} s, verified: {evidence.strip()}")
        return final
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(stage, ignore_errors=True)


# ---- apt packages ---------------------------------------------------------------------------------------

def is_root() -> bool:
    return os.geteuid() == 0


def installed_packages(names) -> set:
    if not names:
        return set()
    proc = subprocess.run(["dpkg-query", "-W", "-f=${Package} ${db:Status-Status}\n", *names],
                          capture_output=True, text=True)
    return {line.split()[0] for line in proc.stdout.splitlines() if line.endswith(" installed")}


def _has_candidate(name) -> bool:
    out = subprocess.run(["apt-cache", "policy", name], capture_output=True, text=True).stdout
    return "Candidate:" in out and "Candidate: (none)" not in out


class Apt:
    """Installs missing apt packages when root; otherwise tells the exact command to run."""

    def __init__(self, log: Log, dry_run=False):
        self.log, self.dry_run, self.updated = log, dry_run, False

    def ensure(self, names, why) -> tuple:
        """(ok, message) after making sure every package in `names` is installed."""
        names = list(dict.fromkeys(names))
        missing = [n for n in names if n not in installed_packages(names)]
        if not missing:
            return True, f"{' '.join(names)} installed"
        command = "apt-get install -y --no-install-recommends " + " ".join(missing)
        if self.dry_run:
            return True, f"would run: {command}"
        if not is_root():
            return False, f"not root: run `sudo {command}` ({why})"
        if not self.updated and not all(_has_candidate(n) for n in missing):
            self.log.say("apt-get update (a package is unknown to apt)")
            _run_logged(["apt-get", "-q", "update"], "/", {}, self.log)
            self.updated = True
        env = {"DEBIAN_FRONTEND": "noninteractive"}
        if _run_logged(command.split(), "/", env, self.log) != 0:
            return False, f"`{command}` failed; see {self.log.path}"
        return True, f"installed {' '.join(missing)}"


# ---- per-kind provisioning --------------------------------------------------------------------------------

def venv_dir() -> Path:
    if sys.prefix != sys.base_prefix:
        return Path(sys.prefix)
    return REPO / ".venv"


def pypi_library(venv: Path = None):
    """(path of cmeel-mimalloc's libmimalloc.so, version) or (None, None)."""
    venv = Path(venv) if venv else venv_dir()
    libs = sorted(glob.glob(str(venv / PYPI_LIB_GLOB)), key=len)
    version = None
    for dist in glob.glob(str(venv / "lib/python3*/site-packages/cmeel_mimalloc-*.dist-info")):
        version = Path(dist).name[len("cmeel_mimalloc-"):-len(".dist-info")]
    return (Path(libs[0]) if libs else None), version


def not_built_yet(source_package) -> str:
    """What a debian-source allocator that is simply not built yet says: a step still to take, not a fault."""
    return f"{glibc_build.NOT_BUILT_YET}: `make allocators` builds it from the Debian source of {source_package}"


def not_installed_yet(package) -> str:
    return f"not installed yet: `make allocators` installs the Debian package {package}"


def outcome(ok: bool, why: str) -> str:
    """The word a provisioning line starts with: a build left to `make allocators` is skipped, not failed."""
    if not ok:
        return "FAILED"
    return "skipped" if why.startswith("not built") else "ok"  # not built yet, or the last build failed


def _origin(alloc) -> dict:
    return dict(getattr(alloc, "origin", None) or {})


def provision_one(alloc, apt: Apt, log: Log, dry_run=False, force=False, no_build=False) -> tuple:
    """(ok, message) for one allocator; with no_build a debian-source one is only reported."""
    origin = _origin(alloc)
    kind = origin.get("kind")
    if kind == "system":
        return True, "part of the system"
    if kind == "path":
        return True, "user-supplied path: nothing to install"
    if kind == "brought":
        return True, "brought by the user, never built here: " + brought.unavailable_reason(alloc)
    if kind == "debian":
        package = origin.get("package")
        if not package:
            return False, "catalogue origin has no package"
        return apt.ensure([package], f"for {alloc.id}")
    if kind == "musl":
        return apt.ensure([origin.get("package") or MUSL_PACKAGE], f"musl-gcc for {alloc.id}")
    if kind == "pypi":
        lib, version = pypi_library()
        if lib is None:
            return False, f"no libmimalloc.so under {venv_dir()}; run `make venv` (requirements.txt pins cmeel-mimalloc)"
        return True, f"cmeel-mimalloc {version}: {lib}"
    if kind == "debian-source":
        recipe = RECIPES.get(alloc.id)
        if recipe is None:
            return False, f"no build recipe for {alloc.id}; recipes exist for {', '.join(sorted(RECIPES))}"
        if origin.get("package") and origin["package"] != recipe.package:
            return False, f"catalogue says source package {origin['package']}, the recipe builds {recipe.package}"
        if origin.get("version", recipe.version) != recipe.version:
            return False, f"catalogue says source version {origin['version']}, the recipe builds {recipe.version}"
        claimed = [w for w in str(origin.get("build", "")).split() if w.startswith(("-D", "-U", "layout="))]
        if any(w not in recipe.options for w in claimed):
            return False, f"catalogue says build {origin['build']!r}, the recipe uses {' '.join(recipe.options)}"
        existing = built_prefix(alloc.id)
        if no_build:
            return True, (f"built: {existing}" if existing else not_built_yet(recipe.package))
        if dry_run:
            if existing and not force:
                return True, f"built: {existing}"
            return True, f"would build from Debian source {recipe.package} with {' '.join(recipe.options)}"
        ok, why = apt.ensure(recipe.build_deps, f"build dependencies of {alloc.id}")
        if not ok:
            return False, why
        prefix = build(alloc.id, recipe, log=log, force=force)
        return True, f"{prefix}"
    if kind == "glibc-build":
        return provision_glibc(alloc, apt, dry_run=dry_run, no_build=no_build)
    return False, f"unknown origin kind {kind!r}; kinds are {', '.join(KINDS)}"


def _built_note(variant: str) -> str:
    stamp = glibc_build.read_stamp(glibc_build.variant_dir(variant)) or {}
    return f"built in {stamp.get('build_seconds', '?')} s on {stamp.get('built_at', '?')}"


def provision_glibc(alloc, apt, dry_run=False, no_build=False) -> tuple:
    """(ok, message) for a glibc variant: reported when built (with its build time), else built (about
    10 minutes each on 2 cores), or with no_build reported as not built yet, as the debian-source builds are."""
    built, why = glibc_build.availability(alloc.id)
    if built:
        return True, f"built: {glibc_build.variant_dir(alloc.id).name} ({_built_note(alloc.id)})"
    if no_build:
        return True, why
    if dry_run:
        return True, f"would build {alloc.id} from the Debian source of the installed glibc ({glibc_build.BUILD_TIME})"
    ok, message = apt.ensure(GLIBC_BUILD_DEPS, f"build dependencies of {alloc.id}")
    if not ok:
        return False, message
    tree = glibc_build.build(alloc.id)
    return True, f"built {tree.parent.name} ({_built_note(alloc.id)})"


def built_library(alloc):
    """The library a recipe built for an allocator (a glibc build's libc.so), or None (installed or unbuilt)."""
    kind = _origin(alloc).get("kind")
    if kind == "glibc-build":
        return glibc_build.library_files(alloc.id)[0] if glibc_build.availability(alloc.id)[0] else None
    if kind == "debian-source":
        resolved = catalog.resolve(alloc)
        return Path(resolved.preload[0]) if resolved.available and resolved.preload else None
    return None


def status(allocators=None) -> list:
    """[(id, ok, why)] for what provisioning is responsible for, without installing anything."""
    allocators = list(catalog.load_catalog().values()) if allocators is None else allocators
    rows = []
    for alloc in allocators:
        origin = _origin(alloc)
        kind = origin.get("kind")
        if kind in ("debian", "musl"):
            package = origin.get("package") or MUSL_PACKAGE
            ok = package in installed_packages([package])
            rows.append((alloc.id, ok, f"{package} installed" if ok else not_installed_yet(package)))
        elif kind == "pypi":
            lib, version = pypi_library()
            rows.append((alloc.id, lib is not None, f"cmeel-mimalloc {version}: {lib}" if lib
                         else "not in the venv yet: `make venv` installs cmeel-mimalloc (requirements.txt)"))
        elif kind == "debian-source":
            prefix = built_prefix(alloc.id)
            rows.append((alloc.id, prefix is not None, str(prefix) if prefix else not_built_yet(origin.get("package"))))
        elif kind == "glibc-build":
            ok, why = glibc_build.availability(alloc.id)
            rows.append((alloc.id, ok, why or f"built: {glibc_build.variant_dir(alloc.id).name}"))
        elif kind in ("system", "path"):
            rows.append((alloc.id, True, "nothing to install"))
        elif kind == "brought":
            rows.append((alloc.id, *brought.presence(alloc)))
        else:
            rows.append((alloc.id, False, f"unknown origin kind {kind!r}"))
    return rows


# ---- the command ----------------------------------------------------------------------------------------

def add_arguments(parser):
    parser.add_argument("--only", metavar="ID,ID", help="provision only these allocators")
    parser.add_argument("--dry-run", action="store_true", help="say what would be installed or built, change nothing")
    parser.add_argument("--force", action="store_true", help="rebuild debian-source allocators even if built")
    parser.add_argument("--no-build", action="store_true",
                        help="install the Debian packages only; build nothing from source (`make system-deps`)")
    parser.add_argument("--status", action="store_true", help="show what is provisioned and exit")


def run(args) -> int:
    allocators = catalog.select(args.only, require_available=False)
    if args.status:
        for alloc_id, ok, why in status(allocators):
            print(f"{'ok' if ok else 'no':4s} {alloc_id:24s} {why}")
        return 0
    if args.no_build and args.force:
        raise HeapcostError("--no-build and --force contradict each other; give one of them")
    log = Log()
    apt = Apt(log, dry_run=args.dry_run)
    failures = 0
    if not args.only:
        ok, why = apt.ensure(TOOL_PACKAGES, "programs the workloads, probes and benchmarks run")
        failures += not ok
        log.say(f"{outcome(ok, why):7s} tools: {why}")
    # the slow builds last, so a failure among the quick ones shows early
    order = sorted(allocators, key=lambda a: _origin(a).get("kind") in SLOW_KINDS)
    published = brought.published_builds(RUNS_DIR)
    for alloc in order:
        try:
            ok, why = provision_one(alloc, apt, log, dry_run=args.dry_run, force=args.force, no_build=args.no_build)
        except HeapcostError as exc:
            ok, why = False, str(exc)
        failures += not ok
        log.say(f"{outcome(ok, why):7s} {alloc.id}: {why}")
        library = built_library(alloc) if ok and not (args.dry_run or args.no_build) else None
        if library is not None:
            log.say(f"{'':7s} {brought.build_report(alloc.id, file_sha256(library), published)}")
    print(f"log: {log.path}")
    if failures:
        raise HeapcostError(f"{failures} of {len(order)} allocators (or the tools) could not be provisioned "
                            f"(see above and {log.path})")
    return 0
