"""The speed workloads: what each one runs, how it is built, and what scale 1.0 means.

Every workload prints `checksum=<hex>` as its last stdout line; the checksum depends only on the
scale, so the harness can tell a wrong result from a right one under any allocator. Scale 1.0 is
the `full` profile (about 0.3-1 s under glibc on the project's 2-core machine).
"""
import fcntl
import hashlib
import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from analysis.harness.process.build import build_c
from analysis.errors import HeapcostError
from analysis.paths import BUILD_DIR, WORKLOADS_DIR

VARIANTS = ("glibc", "musl")
DEFAULT_INTERPRETERS = {"perl": "/usr/bin/perl", "python": "/usr/bin/python3"}

# Keep the compiler from folding a malloc/free pair away: the allocator is what we measure.
NO_ALLOC_BUILTINS = ("-fno-builtin-malloc", "-fno-builtin-calloc", "-fno-builtin-realloc",
                     "-fno-builtin-free")


def check_scale(scale) -> float:
    try:
        value = float(scale)
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= 1000):
        raise HeapcostError(f"workload scale must be a number in (0, 1000], got {scale!r}")
    return value


def scale_arg(scale) -> str:
    """The scale as the workload programs parse it (shortest round-trip form of the float)."""
    return repr(check_scale(scale))


def _check_variant(variant, allowed):
    if variant not in allowed:
        raise HeapcostError(f"unknown or unsupported build variant {variant!r}; valid here: "
                            + ", ".join(allowed))


def _interpreter(interpreters, name) -> str:
    path = (interpreters or {}).get(name) or DEFAULT_INTERPRETERS[name]
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        hint = " (apt-get install python3)" if path == DEFAULT_INTERPRETERS["python"] else ""
        raise HeapcostError(f"{name} interpreter {path} is not an executable file{hint}")
    return path


def _program(name, package) -> str:
    path = shutil.which(name)
    if path is None:
        raise HeapcostError(f"program {name!r} not found; install it with `apt-get install {package}`")
    return path


@dataclass(frozen=True)
class Workload:
    id: str
    kind: str                 # c | perl | python | program
    description: str
    seed: str                 # the seed file whose profile it re-creates, or None
    base_scale_note: str      # what scale 1.0 does
    default: bool = True      # in "every workload" (False: a seed's own case, selected by name or group)

    variants = ("glibc",)
    loader_refused = ""  # why it cannot run on a built glibc through that build's loader ("" = it can)

    def prepare(self, variant="glibc") -> None:
        """Build or fetch what the workload needs; idempotent."""
        _check_variant(variant, self.variants)

    def argv(self, scale, variant="glibc", interpreters=None) -> list:
        raise NotImplementedError

    def env(self, scale) -> dict:
        return {}


@dataclass(frozen=True)
class CWorkload(Workload):
    source: str = ""
    threads: bool = False

    variants = VARIANTS

    def binary(self, variant) -> Path:
        _check_variant(variant, self.variants)
        flags = ["-pthread"] if self.threads else []
        return build_c(f"wl-{self.id}",
                              [WORKLOADS_DIR / self.source, WORKLOADS_DIR / "wl_common.h"],
                              variant=variant, cflags=[*NO_ALLOC_BUILTINS, *flags], ldflags=flags)

    def prepare(self, variant="glibc") -> None:
        self.binary(variant)

    def argv(self, scale, variant="glibc", interpreters=None) -> list:
        return [str(self.binary(variant)), scale_arg(scale)]


@dataclass(frozen=True)
class CallWorkload(CWorkload):
    """One size class and reuse pattern of workloads/calls.c: a known number of malloc+free pairs, so a
    process's time per pair is its time over pairs_at(scale) (the per-call costs of the cost model)."""
    size_class: int = 64
    pattern: str = "lifo"
    pairs_full: int = 1_000_000
    slots: int = 256  # live blocks of the lifo, fifo and random patterns (CALL_SLOTS)
    same_size: bool = False  # every block of size_class bytes, none drawn (CALL_SAME_SIZE)
    grow_step: int = 65536  # bytes a step of the grow pattern adds (CALL_GROW_STEP)

    def binary(self, variant) -> Path:
        _check_variant(variant, self.variants)
        defines = [f"-DCALL_CLASS={self.size_class}", f"-DCALL_PATTERN={CALL_PATTERNS.index(self.pattern)}",
                   f"-DCALL_PAIRS={self.pairs_full}L", f"-DCALL_SLOTS={self.slots}",
                   *(["-DCALL_SAME_SIZE=1"] if self.same_size else []),
                   *([f"-DCALL_GROW_STEP={self.grow_step}"] if self.pattern == "grow" else []),
                   *([f"-DCALL_CHILD_PAIRS={CALL_CHILD_PAIRS}"] if self.pattern == "processes" else [])]
        return build_c(f"wl-{self.id}", [WORKLOADS_DIR / self.source, WORKLOADS_DIR / "wl_common.h"],
                              variant=variant, cflags=[*NO_ALLOC_BUILTINS, *defines])

    @property
    def cell_pattern(self) -> str:
        """The pattern of its cell in the per-call table: "held" for LIFO pairs with fewer blocks live than the
        cells' CALL_SLOTS (HELD_WORKLOADS), else its pattern; "-same" after it where every block asks for one size
        (SAME_SIZE_WORKLOADS); "grow-page" for the grow pattern a page a step (CALL_GROW_PAGE), "grow-small" for it
        in steps under a page (CALL_GROW_SMALL)."""
        pattern = "held" if self.pattern == "lifo" and self.slots < CALL_SLOTS else self.pattern
        if self.pattern == "grow" and self.grow_step == CALL_GROW_PAGE[2]:
            pattern = "grow-page"
        elif self.pattern == "grow" and self.grow_step == CALL_GROW_SMALL[2]:
            pattern = "grow-small"
        return f"{pattern}-same" if self.same_size else pattern

    def pairs_at(self, scale) -> int:
        """The pairs the program does at `scale`: wl_common.h's wl_scaled (the same double arithmetic)."""
        v = float(self.pairs_full) * float(scale) + 0.5
        return 1 if v < 1.0 else int(v)


@dataclass(frozen=True)
class PerlWorkload(Workload):
    script: str = ""
    case: str = ""  # one case of the script alone (its second argument)

    def prepare(self, variant="glibc") -> None:
        super().prepare(variant)
        _interpreter({}, "perl")

    def argv(self, scale, variant="glibc", interpreters=None) -> list:
        _check_variant(variant, self.variants)
        return [_interpreter(interpreters, "perl"), str(WORKLOADS_DIR / self.script), scale_arg(scale),
                *([self.case] if self.case else [])]

    def env(self, scale) -> dict:
        # a fixed hash seed: the same buckets and key order in every trial
        return {"PERL_HASH_SEED": "0", "PERL_PERTURB_KEYS": "0"}


@dataclass(frozen=True)
class PythonWorkload(Workload):
    script: str = ""

    def prepare(self, variant="glibc") -> None:
        super().prepare(variant)
        _interpreter({}, "python")

    def argv(self, scale, variant="glibc", interpreters=None) -> list:
        _check_variant(variant, self.variants)
        # -S -B: no site packages, no .pyc writes; not -E/-I, which would drop PYTHONMALLOC
        return [_interpreter(interpreters, "python"), "-S", "-B", str(WORKLOADS_DIR / self.script),
                scale_arg(scale)]

    def env(self, scale) -> dict:
        # PYTHONMALLOC=malloc sends every object allocation to malloc (not pymalloc's arenas)
        return {"PYTHONMALLOC": "malloc", "PYTHONHASHSEED": "0"}


# ---- sqlite: a generated SQL script run by Debian's sqlite3 on an in-memory database ----------

SQLITE_FULL_CUSTOMERS = 10000
_CITIES = ("Aarhus", "Bergen", "Cork", "Delft", "Espoo", "Faro", "Graz", "Hull", "Ibiza", "Jena",
           "Kiel", "Lund", "Metz", "Nice", "Oulu", "Pisa", "Riga", "Sion", "Tartu", "Ulm")
_NAME_PARTS = ("an", "bel", "cor", "dan", "el", "fio", "gus", "hal", "ina", "jo", "ka", "lin",
               "mar", "ni", "ola", "per", "qui", "ros", "sam", "tor", "una", "vik", "wen", "yan")


def sqlite_script(scale) -> str:
    """The SQL the sqlite workload runs: deterministic for a scale, ends with one checksum row."""
    customers = max(1, int(SQLITE_FULL_CUSTOMERS * check_scale(scale) + 0.5))
    orders = 8 * customers
    state = 12345
    rows = []
    for i in range(1, customers + 1):
        state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
        name = "".join(_NAME_PARTS[(state >> s) % len(_NAME_PARTS)] for s in (8, 16, 24, 32))
        city = _CITIES[(state >> 40) % len(_CITIES)]
        rows.append(f"({i},'{name.capitalize()} {i}','{city}',{(state >> 48) % 3650})")
    inserts = [f"INSERT INTO customers VALUES {','.join(rows[k:k + 200])};"
               for k in range(0, len(rows), 200)]
    pad = "x" * 60
    return "\n".join([
        "CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT, joined INTEGER);",
        "CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INTEGER, item TEXT, qty INTEGER,"
        " price INTEGER, note TEXT);",
        "BEGIN;",
        *inserts,
        f"WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < {orders})",
        f"INSERT INTO orders SELECT i, 1 + (i * 7919) % {customers}, 'item-' || (i * 31 % 997),"
        f" 1 + i % 9, (i * 104729) % 10000, substr('{pad}', 1, i % 61) FROM seq;",
        "COMMIT;",
        "CREATE INDEX orders_by_customer ON orders(customer);",
        "CREATE INDEX orders_by_item ON orders(item, price);",
        "CREATE INDEX customers_by_city ON customers(city, name);",
        "UPDATE orders SET note = note || '-rush' WHERE qty = 3;",
        "DELETE FROM orders WHERE price % 13 = 0;",
        "CREATE TEMP TABLE per_city AS SELECT c.city AS city, count(*) AS n,"
        " sum(o.qty * o.price) AS revenue, max(length(c.name)) AS longest"
        " FROM orders o JOIN customers c ON c.id = o.customer GROUP BY c.city;",
        "CREATE TEMP TABLE per_item AS SELECT item, count(DISTINCT customer) AS buyers,"
        " length(group_concat(note, ',')) AS notes FROM orders GROUP BY item;",
        "CREATE TEMP TABLE best AS SELECT c.id AS id, c.name AS name, sum(o.price) AS spent"
        " FROM customers c JOIN orders o ON o.customer = c.id"
        " GROUP BY c.id ORDER BY spent DESC, c.id LIMIT 100;",
        "SELECT 'checksum=' || printf('%08x%08x%08x',"
        " (SELECT sum(n * 31 + revenue % 1000003 + longest) FROM per_city) % 4294967296,"
        " (SELECT sum(buyers * 7 + notes) FROM per_item) % 4294967296,"
        " (SELECT sum(spent % 65521 + length(name)) + count(*) FROM best) % 4294967296);",
        "",
    ])


@dataclass(frozen=True)
class SqliteWorkload(Workload):
    def prepare(self, variant="glibc") -> None:
        super().prepare(variant)
        _program("sqlite3", "sqlite3")

    def script_path(self, scale) -> Path:
        text = sqlite_script(scale)
        path = BUILD_DIR / "workloads" / f"sqlite-{hashlib.sha256(text.encode()).hexdigest()[:12]}.sql"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
            tmp.write_text(text)
            os.replace(tmp, path)
        return path

    def argv(self, scale, variant="glibc", interpreters=None) -> list:
        _check_variant(variant, self.variants)
        return [_program("sqlite3", "sqlite3"), "-batch", "-bail", ":memory:",
                f'.read "{self.script_path(scale)}"']


# ---- compile: gcc over real C source from a Debian source package --------------------------------

@dataclass(frozen=True)
class CompileWorkload(Workload):
    package: str = "lua5.4"
    # why it cannot run on a built glibc through that build's loader (trial.loader_argv)
    loader_refused = ("the gcc driver would run on the built glibc, but the cc1, as and ld it starts use their "
                      "own ELF interpreter (the system's glibc), so the compile time cannot be attributed to it")
    subdir: str = "src"
    full_files: int = 8
    # headers Debian's build generates; the tree needs them to compile outside that build
    generated_headers: dict = field(default_factory=dict)

    def _stamp(self) -> Path:
        return BUILD_DIR / "workloads" / f"{self.id}-source.txt"

    def _tree(self, fetch: bool) -> Path:
        """The unpacked source tree, remembered in build/ so runs need no apt call."""
        stamp = self._stamp()
        if stamp.is_file():
            tree = Path(stamp.read_text().strip())
            if (tree / self.subdir).is_dir():
                return tree
        if not fetch:
            raise HeapcostError(f"workload {self.id} is not prepared: its {self.package} source is not "
                                "fetched yet; run its prepare('glibc') first")
        from analysis.harness.allocators.debsrc import fetch_source   # late: only this workload fetches sources
        tree = Path(fetch_source(self.package))
        if not (tree / self.subdir).is_dir():
            raise HeapcostError(f"{self.package} source at {tree} has no {self.subdir}/ folder")
        stamp.parent.mkdir(parents=True, exist_ok=True)
        tmp = stamp.with_name(f"{stamp.name}.tmp{os.getpid()}")
        tmp.write_text(f"{tree}\n")
        os.replace(tmp, stamp)
        return tree

    def _include_dir(self) -> Path:
        inc = BUILD_DIR / "workloads" / f"{self.id}-include"
        for name, text in self.generated_headers.items():
            path = inc / name
            if not path.is_file() or path.read_text() != text:
                inc.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(f"{name}.tmp{os.getpid()}")
                tmp.write_text(text)
                os.replace(tmp, path)
        return inc

    def driver(self) -> Path:
        return build_c("wl-compile-driver",
                              [WORKLOADS_DIR / "compile_driver.c", WORKLOADS_DIR / "wl_common.h"])

    def files(self, tree: Path) -> list:
        """The C files in build order: smallest first, so small scales still compile whole files."""
        src = tree / self.subdir
        return sorted((p.name for p in src.glob("*.c")), key=lambda n: ((src / n).stat().st_size, n))

    def prepare(self, variant="glibc") -> None:
        super().prepare(variant)
        _program("gcc", "gcc")
        self.driver()
        BUILD_DIR.mkdir(parents=True, exist_ok=True)
        with open(BUILD_DIR / ".workloads-fetch.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            tree = self._tree(fetch=True)
        if len(self.files(tree)) < self.full_files:
            raise HeapcostError(f"{self.package} source at {tree} has fewer than {self.full_files} C files")
        self._include_dir()

    def argv(self, scale, variant="glibc", interpreters=None) -> list:
        _check_variant(variant, self.variants)
        value = check_scale(scale)
        tree = self._tree(fetch=False)
        files = self.files(tree)
        wanted = max(1, int(self.full_files * value + 0.5))
        if wanted > len(files):
            raise HeapcostError(f"scale {value} asks {self.id} for {wanted} files; {self.package} has "
                                f"{len(files)}: use a scale up to {len(files) / self.full_files:g}")
        return [str(self.driver()), scale_arg(value), str(self.full_files), _program("gcc", "gcc"),
                str(tree / self.subdir), "--", "-I", str(self._include_dir()), "--", *files]



def at_most_one_build(workload_id: str, scale) -> float:
    """A build workload's scale: a share of one whole build, never more."""
    value = check_scale(scale)
    if value > 1:
        raise HeapcostError(f"scale {value} asks {workload_id} for more than one whole build: use a scale up to 1")
    return value


@dataclass(frozen=True)
class BuildWorkload(CompileWorkload):
    """A whole project built with make -jJOBS by a Makefile of workloads/, from the trial's scratch folder (its
    VPATH reads the fetched source, which stays untouched): every process of the build starts under the
    allocator, as LD_PRELOAD reached every process of the seed's rpmbuild."""
    jobs: int = 2
    makefile: str = ""  # in workloads/
    make_args: tuple = ()
    products: tuple = ()

    def driver(self) -> Path:
        return build_c("wl-build-driver", [WORKLOADS_DIR / "build_driver.c", WORKLOADS_DIR / "wl_common.h"])

    def objects(self, tree: Path) -> list:
        return sorted(f"{Path(name).stem}.o" for name in self.files(tree))

    def argv(self, scale, variant="glibc", interpreters=None) -> list:
        _check_variant(variant, self.variants)
        value = at_most_one_build(self.id, scale)
        tree = self._tree(fetch=False)
        return [str(self.driver()), scale_arg(value), str(self.jobs), _program("make", "make"),
                str(WORKLOADS_DIR / self.makefile), "--", f"SRC={tree / self.subdir}",
                f"EXTRA_CFLAGS=-I{self._include_dir()}", *self.make_args, "--",
                *self.objects(tree), "--", *self.products]

@dataclass(frozen=True)
class KernelBuildWorkload(CompileWorkload):
    """A part of Linux built by the kernel's own build system (kbuild) from Debian's `linux` source package, out of
    tree into the trial's scratch folder (workloads/linux_build_driver.c): the configuration target, then make
    -jJOBS of the directory targets, every process of the build under the allocator. Its jobs run in parallel,
    so its trials spread over the trial CPUs (`threads`), as the seed's rpmbuild -j4 used its machine's."""
    threads = True  # make -jJOBS: pinned to one CPU its jobs would take turns
    jobs: int = 2
    arch: str = "x86_64"
    config: str = "tinyconfig"
    targets: tuple = ()  # directories, largest first: a scale below 1 builds the first share of them
    # (program, Debian package) the configuration and the targets need besides the driver
    tools: tuple = (("make", "make"), ("gcc", "gcc"), ("as", "binutils"), ("flex", "flex"), ("bison", "bison"),
                    ("bc", "bc"))
    # headers the kernel's host tools compile against: objtool reads and writes ELF with libelf
    host_headers: tuple = (("/usr/include/gelf.h", "libelf-dev"),)

    def _tree(self, fetch: bool) -> Path:
        """The source tree this clone used last; else the newest one already in the source cache (the package is
        large: a cached version is used rather than downloading a newer one); else fetched."""
        try:
            return super()._tree(fetch=False)
        except HeapcostError:
            if not fetch:
                raise
        from analysis.harness.allocators.debsrc import COMPLETE_MARK, newest_first, sources_root
        cached = {mark.read_text().split()[1]: mark.parent / "tree"
                  for mark in sources_root().glob(f"{self.package}-*/{COMPLETE_MARK}")
                  if mark.read_text().split()[:1] == [self.package]}
        for version in newest_first(cached):
            if (cached[version] / self.subdir).is_dir():
                stamp = self._stamp()
                stamp.parent.mkdir(parents=True, exist_ok=True)
                tmp = stamp.with_name(f"{stamp.name}.tmp{os.getpid()}")
                tmp.write_text(f"{cached[version]}\n")
                os.replace(tmp, stamp)
                return cached[version]
        return super()._tree(fetch=True)

    def driver(self) -> Path:
        return build_c("wl-linux-build-driver",
                              [WORKLOADS_DIR / "linux_build_driver.c", WORKLOADS_DIR / "wl_common.h"])

    def prepare(self, variant="glibc") -> None:
        _check_variant(variant, self.variants)
        for name, package in self.tools:
            _program(name, package)
        for header, package in self.host_headers:
            if not Path(header).is_file():
                raise HeapcostError(f"workload {self.id} needs {header}; install it with `apt-get install {package}`")
        self.driver()
        BUILD_DIR.mkdir(parents=True, exist_ok=True)
        with open(BUILD_DIR / ".workloads-fetch.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            tree = self._tree(fetch=True)
        missing = [t for t in self.targets if not (tree / t).is_dir()]
        if missing or not (tree / "Makefile").is_file():
            raise HeapcostError(f"{self.package} source at {tree} lacks " + (", ".join(missing) or "its Makefile"))

    def record(self) -> dict:
        """What run.json keeps beside the description: the source package's version and what was built."""
        from analysis.harness.allocators.debsrc import version_of_tree
        try:
            version = version_of_tree(self._tree(fetch=False))
        except (HeapcostError, OSError, IndexError):
            version = ""
        return {"source_package": self.package, "source_version": version, "config": self.config,
                "arch": self.arch, "jobs": self.jobs, "targets": list(self.targets)}

    def argv(self, scale, variant="glibc", interpreters=None) -> list:
        _check_variant(variant, self.variants)
        value = at_most_one_build(self.id, scale)
        tree = self._tree(fetch=False)
        return [str(self.driver()), scale_arg(value), str(self.jobs), _program("make", "make"), str(tree),
                self.config, "--", f"ARCH={self.arch}", "--", *self.targets]


@dataclass(frozen=True)
class RedisWorkload(Workload):
    """Debian's redis-server under load from redis-benchmark over the loopback (workloads/redis_driver.c)."""
    threads = True     # server and client run at once: spread over the trial CPUs
    libc_first = True  # redis-server links jemalloc: libc.so.6 is preloaded after the allocator (trial.py)
    loader_refused = "redis-server starts through its own ELF interpreter (the system's glibc)"

    def driver(self) -> Path:
        return build_c("wl-redis-driver", [WORKLOADS_DIR / "redis_driver.c", WORKLOADS_DIR / "wl_common.h"],
                              ldflags=["-lm"])

    def prepare(self, variant="glibc") -> None:
        super().prepare(variant)
        _program("redis-server", "redis-server")
        _program("redis-benchmark", "redis-tools")
        self.driver()

    def argv(self, scale, variant="glibc", interpreters=None) -> list:
        _check_variant(variant, self.variants)
        return [str(self.driver()), scale_arg(scale), _program("redis-server", "redis-server"),
                _program("redis-benchmark", "redis-tools")]


WORKLOADS = {w.id: w for w in [
    PerlWorkload(
        "perl-strcat", "perl",
        "Perl string appends (1E1..1E5-char chunks onto 1E5..1E7-char strings, a pre-extended "
        "string) and an array of 1E5 100-char strings copied and pushed onto",
        "000_df6142052d7a08fc.txt",
        "16 rounds of every append case and the array copy+push", script="perl_strcat.pl"),
    CompileWorkload(
        "compile", "program",
        "gcc -O2 -c over C files of the lua5.4 Debian source package, one after another, as a "
        "build does (the kernel build of the seed, in small); LD_PRELOAD reaches gcc, cc1 and as",
        "001_380ece32c947093f.txt",
        "the 8 smallest .c files of lua5.4's src/",
        generated_headers={"lua5.4-deb-multiarch.h": '#define DEB_HOST_MULTIARCH "x86_64-linux-gnu"\n'}),
    BuildWorkload(
        "build", "program",
        "make -j2 of lua5.4's whole source as Lua's own Makefile builds it (every .c file, liblua.a, lua and luac), every "
        "process of the build (make, gcc, cc1, as, ar, ld) under the allocator: the kernel rpmbuild of the seed, "
        "in small; pinned like every trial, so its two jobs share one CPU",
        "001_380ece32c947093f.txt",
        "one whole build; below 1, that share of the object files and no link",
        default=False, makefile="lua_build.mk", make_args=("all",), products=("liblua.a", "lua", "luac"),
        generated_headers={"lua5.4-deb-multiarch.h": '#define DEB_HOST_MULTIARCH "x86_64-linux-gnu"\n'}),
    KernelBuildWorkload(
        "linux-build", "program",
        "the kernel build of the seed itself, in part: Debian's linux source package configured and built by its own "
        "build system (kbuild) out of tree into the scratch folder, make tinyconfig (ARCH=x86_64) then make -j2 of "
        "kernel/, mm/, fs/, lib/ and init/, both steps timed, from an empty folder in every trial; every process of "
        "the build (make, sh, gcc, cc1, as, ld and the kernel's host tools: fixdep, conf, objtool, flex, bison, bc) "
        "under the allocator, spread over the trial CPUs; reports the peak of its process tree's summed resident and "
        "anonymous memory, sampled from /proc every 10 ms",
        "001_380ece32c947093f.txt",
        "make tinyconfig, then make -j2 kernel/ mm/ fs/ lib/ init/ (about 280 object files); below 1, "
        "tinyconfig and that share of the five directories in this order (kernel/ alone at 0.25)",
        default=False, package="linux", subdir="kernel",
        targets=("kernel/", "mm/", "fs/", "lib/", "init/")),
    CWorkload(
        "dom-churn", "c",
        "DOM-like trees of small nodes with tag/attribute/text strings and growable child arrays: "
        "built, mutated, serialized and torn down (the browser profile)",
        "002_39eb2b164d22928e.txt",
        "60 trees (depth 7), 3000 mutations each", source="dom_churn.c"),
    CWorkload(
        "pow2-churn", "c",
        "batches of 8192 power-of-two requests of 1..128 bytes, freed in a random odd stride",
        "003_f7c9ca2ca154b322.txt",
        "2000 batches of 8192 allocations", source="pow2_churn.c"),
    CWorkload(
        "pow2-ladder", "c",
        "eight classes of 1..128-byte blocks, 16,384 each, filled in turn; every eighth block of each "
        "class at or below the current one freed after each fill (the test program of seed 003's thread)",
        "003_f7c9ca2ca154b322.txt",
        "128 rounds of the 8-class ladder", source="pow2_ladder.c", default=False),
    CWorkload(
        "small-loop", "c",
        "ten malloc(0x20) then ten free, in a loop: the allocator's fast path",
        "004_d42ed6e97fa9d58a.txt",
        "4,000,000 rounds of 10 malloc + 10 free", source="small_loop.c"),
    CWorkload(
        "server", "c",
        "2 producer threads allocate 16 B..64 KB messages, 2 consumer threads read and free them "
        "(cross-thread frees) through a bounded queue",
        None,
        "2 x 400,000 messages", source="server.c", threads=True),
    CWorkload(
        "pareto", "c",
        "Pareto-distributed sizes (shape 1, 16 B..256 KiB) with random lifetimes in a sliding "
        "window of 8192 live objects",
        None,
        "10,000,000 allocate/free steps", source="pareto.c"),
    SqliteWorkload(
        "sqlite", "program",
        "Debian's sqlite3 on an in-memory database: inserts, indexes, updates, deletes, joins and "
        "aggregates from a generated SQL script",
        None,
        f"{SQLITE_FULL_CUSTOMERS} customers and {8 * SQLITE_FULL_CUSTOMERS} orders"),
    RedisWorkload(
        "redis", "program",
        "Debian's redis-server on a loopback port of its own, no persistence, driven by redis-benchmark (50 clients, "
        "4 pipelined, 128-byte values, random keys; the client under plain glibc): set, get, incr, lpush, rpop, "
        "sadd, hset, lrange_100, mset; throughput and p50/p99 latency beside time. Debian's build links jemalloc: "
        "malloc, free and malloc_usable_size come from the preloaded allocator (mallocwho checks every process), "
        "its statistics calls (mallctl) still reach the linked jemalloc",
        None,
        "10,000 requests per test (9 tests)", default=False),
    PythonWorkload(
        "python", "python",
        "Debian's python3 with PYTHONMALLOC=malloc on an object-heavy script: dicts of records, "
        "string building and splitting, small objects, and reference cycles for the collector",
        None,
        "36,000 records, 36,000 lines, 72,000 cyclic cells", script="py_objects.py"),
]}

# Seed 000's benchmark case by case (perl_strcat.pl CASE): the seed found OpenBSD's malloc as fast as perl's
# own in every case but the array one, so each case is answered on its own.
PERL_CASES = ("append-5-2", "append-6-2", "append-7-2", "append-7-1", "append-7-3", "append-7-4", "append-7-5",
              "preextend", "array")
_CASE_WORDS = {"preextend": "a 1E7-character string pre-extended to 2E7, then 1E4 appends of 1E2 characters",
               "array": "an array of 1E5 strings of 1E2 characters copied, then 1E4 strings pushed onto it"}
for _case in PERL_CASES:
    _b, _c = (_case.split("-")[1:] + ["", ""])[:2]
    WORKLOADS[f"perl-{_case}"] = PerlWorkload(
        f"perl-{_case}", "perl",
        _CASE_WORDS.get(_case) or f"one case of perl-strcat: a 1E{_b}-character string, 1E6 characters "
                                  f"appended in chunks of 1E{_c}",
        "000_df6142052d7a08fc.txt", "the case alone, rounds as perl_strcat.pl's REPEAT says",
        default=False, script="perl_strcat.pl", case=_case)

# The per-call costs (workloads/calls.c): malloc+free pairs of one size class in one reuse pattern, a block of
# fresh pages apart. Pairs at scale 1 are chosen so that glibc spends about 0.8 s on each (0.2 s at the quick
# profile's scale); the pages cell does fewer, since an allocator that maps every such block spends ~0.2 ms on one.
CALL_PATTERNS = ("lifo", "fifo", "random", "pages", "processes", "grow")
CALL_SLOTS = 256  # live blocks of the lifo, fifo and random patterns
# 8 and 16 KiB close the gap between 4 and 32 KiB: a program whose calls fall there (the one true awk's 8 KiB
# buffers) was charged at the 4 KiB cell, under an allocator whose cost grows with a block's bytes
CALL_CLASSES = {16: 32_000_000, 64: 32_000_000, 256: 32_000_000, 1024: 32_000_000, 4096: 8_000_000,
                8192: 4_000_000, 16384: 2_000_000, 32768: 2_000_000}
CALL_PAGES = (262144, 20_000)
_PATTERN_WORDS = {"lifo": f"the block allocated last freed first (a stack of {CALL_SLOTS})",
                  "fifo": f"the oldest of {CALL_SLOTS} live blocks freed (a ring)",
                  "random": f"a random one of {CALL_SLOTS} live blocks freed (a fixed seed)"}
CALL_WORKLOADS = {}
for _class, _pairs in CALL_CLASSES.items():
    for _pattern in CALL_PATTERNS[:3]:
        CALL_WORKLOADS[f"calls-{_class}-{_pattern}"] = CallWorkload(
            f"calls-{_class}-{_pattern}", "c",
            f"malloc+free pairs of {_class // 2 + 1}..{_class} bytes, {_PATTERN_WORDS[_pattern]}: the per-call cost",
            None, f"{_pairs:,} pairs", default=False, source="calls.c", size_class=_class, pattern=_pattern,
            pairs_full=_pairs)
CALL_WORKLOADS[f"calls-{CALL_PAGES[0]}-pages"] = CallWorkload(
    f"calls-{CALL_PAGES[0]}-pages", "c",
    f"one block of {CALL_PAGES[0] // 1024} KiB at a time, every page written, then freed: the cost of fresh pages",
    None, f"{CALL_PAGES[1]:,} blocks", default=False, source="calls.c", size_class=CALL_PAGES[0], pattern="pages",
    pairs_full=CALL_PAGES[1])
# The same LIFO pairs with few blocks live: the cells of 16-32 KiB hold CALL_SLOTS blocks and free them all in turn,
# so an allocator that gives an emptied slab's pages back pays them again every round; a program that holds few such
# blocks at once never empties its slabs. Blocks of 32-128 KiB, which the model charges as the pages cell scaled by
# size (a fresh block each time), are slab or cached blocks under some allocators. Measured as trials (recording
# faults) beside the 32 KiB LIFO cell (per_call.held_split), and in turns with the baseline as the per-call cells of
# pattern "held" (stats/cost_model.py charges them to a class a program holds few blocks of at once).
HELD_SLOTS = 4
HELD_CLASSES = (8192, 16384, 32768, 65536, 131072)  # 8 and 16 KiB: a program's one live buffer (the one true awk)
HELD_WORKLOADS = {f"calls-{_class}-lifo-{HELD_SLOTS}live": CallWorkload(
    f"calls-{_class}-lifo-{HELD_SLOTS}live", "c",
    f"malloc+free pairs of {_class // 2 + 1}..{_class} bytes, the block allocated last freed first (a stack of "
    f"{HELD_SLOTS}): what a pair costs with {HELD_SLOTS} blocks of the class live instead of {CALL_SLOTS}", None,
    f"{CALL_CLASSES[32768]:,} pairs", default=False, source="calls.c", size_class=_class, pattern="lifo",
    pairs_full=CALL_CLASSES[32768], slots=HELD_SLOTS) for _class in HELD_CLASSES}
WORKLOADS.update(HELD_WORKLOADS)
# The LIFO cells again, every block asking for the class's upper bound: a program that asks again and again for one
# size (the one true awk's 8 KiB buffer, a parser's node) is handed back the block it just freed by any free list of
# one size, where the drawn sizes of the cells above send glibc past its tcache through its sorted bins (measured
# before the cells existed, 8 KiB with 4 live: glibc about 50 ns a pair drawn, 15 ns one size). The cost model
# charges a class's reused pairs to them in the share the profile finds taken by the size just freed
# (frees_reused_same_size).
SAME_SIZE_WORKLOADS = {}
for _class, _pairs in CALL_CLASSES.items():
    SAME_SIZE_WORKLOADS[f"calls-{_class}-lifo-same"] = CallWorkload(
        f"calls-{_class}-lifo-same", "c",
        f"malloc+free pairs of {_class} bytes each, {_PATTERN_WORDS['lifo']}: the per-call cost of one size",
        None, f"{_pairs:,} pairs", default=False, source="calls.c", size_class=_class, pattern="lifo",
        pairs_full=_pairs, same_size=True)
for _class in HELD_CLASSES:
    SAME_SIZE_WORKLOADS[f"calls-{_class}-lifo-{HELD_SLOTS}live-same"] = CallWorkload(
        f"calls-{_class}-lifo-{HELD_SLOTS}live-same", "c",
        f"malloc+free pairs of {_class} bytes each, the block allocated last freed first (a stack of {HELD_SLOTS}): "
        "the held cell's cost of one size", None, f"{CALL_CLASSES[32768]:,} pairs", default=False,
        source="calls.c", size_class=_class, pattern="lifo", pairs_full=CALL_CLASSES[32768], slots=HELD_SLOTS,
        same_size=True)
WORKLOADS.update(SAME_SIZE_WORKLOADS)
# A large block grown by realloc, a step each (pattern grow): from CALL_GROW[2] bytes to CALL_GROW[0] in steps of
# CALL_GROW[2], each step's new pages written, then freed. glibc extends or remaps such a block where it lies (after
# the first round its mmap threshold has risen and the block grows at the top of its heap); an allocator that
# moves it pays a copy of the block and its fresh pages on every step (measured before the cell existed: scudo took
# 2.0 million minor faults and 2.6 s of system time for 4,000 steps, glibc 2,208 faults and none). The cost model
# charges it to the reallocs that grew a large block past its pages in place under the baseline, which it charged
# nothing before.
CALL_GROW = (4 * 2**20, 4_000, 65536)  # (largest block, steps at scale 1, bytes a step adds)
# The same block grown a page at a time (cell pattern grow-page): an allocator that moves a large block only across
# its size classes (hardened_malloc's, four to a doubling) moves it here on one step in many, and one that moves it
# whenever it outgrows its pages (scudo) on every step, so the two cells tell a cost that follows the bytes grown
# from one that follows the grows (measured before the cell existed: hardened_malloc about 10 us a step here
# against 140 us in the cell above, scudo about 750 us in both). The cost model splits a program's grows between
# them by the pages its grows added a step.
CALL_GROW_PAGE = (4 * 2**20, 16_000, 4096)
# A block grown in steps well under a page (cell pattern grow-small), as a program appending a line at a time to one
# large buffer grows it (lowdown: 14,569 of its 15,439 grows past 256 KiB stayed within the block's pages): an
# allocator that rounds a large block up to pages keeps it there, and one that places it against the end of its
# mapping (scudo) moves it on every step. Its class is smaller than the other grow cells' so that an allocator that
# moves the block pays for its steps in seconds, not minutes (measured by hand before the cell existed: scudo about
# 130 us a step and 100 minor faults, hardened_malloc 72fb357 about 0.6 us, most of it the one step in sixteen that
# needs a page; glibc, jemalloc and mimalloc well under a microsecond). The cost model charges it to the grows the
# baseline did within a large block's pages, which it charged nothing before. A second cell grows a 4 MiB block
# the same way: a move costs in proportion to the block, and what a step costs beyond the smallest cell's step is that
# part alone (the pages their steps cross, the same in each, cancel), so a cost a step that does not grow with the
# block is never charged per byte of it (stats/cost_model.grown_within_pages).
CALL_GROW_SMALL = (2**20, 16_384, 256)
CALL_GROW_SMALL_LARGE = (4 * 2**20, 65_536, 256)
# And a 128 KiB block: where a slab allocator still keeps a block in a size class with room to grow (scudo's primary
# allocator serves blocks up to 128 KiB; measured by hand: its grows there moved no block, 0.00 s for 65,536 steps,
# against 0.48 s to 256 KiB), so that the cost a step adds with the block is read from where it starts.
CALL_GROW_SMALL_SLAB = (128 * 1024, 65_536, 256)
CALL_WORKLOADS[f"calls-{CALL_GROW[0]}-grow"] = CallWorkload(
    f"calls-{CALL_GROW[0]}-grow", "c",
    f"one block grown by realloc in steps of {CALL_GROW[2] // 1024} KiB to {CALL_GROW[0] // 2**20} MiB, each step's "
    "pages written, then freed: what a growing realloc of a large block costs", None, f"{CALL_GROW[1]:,} steps",
    default=False, source="calls.c", size_class=CALL_GROW[0], pattern="grow", pairs_full=CALL_GROW[1],
    grow_step=CALL_GROW[2])
CALL_WORKLOADS[f"calls-{CALL_GROW_PAGE[0]}-grow-page"] = CallWorkload(
    f"calls-{CALL_GROW_PAGE[0]}-grow-page", "c",
    f"one block grown by realloc a page at a time to {CALL_GROW_PAGE[0] // 2**20} MiB, each step's page written, "
    "then freed: what a growing realloc of a large block costs when it grows little", None,
    f"{CALL_GROW_PAGE[1]:,} steps", default=False, source="calls.c", size_class=CALL_GROW_PAGE[0], pattern="grow",
    pairs_full=CALL_GROW_PAGE[1], grow_step=CALL_GROW_PAGE[2])
for _cell in (CALL_GROW_SMALL_SLAB, CALL_GROW_SMALL, CALL_GROW_SMALL_LARGE):
    CALL_WORKLOADS[f"calls-{_cell[0]}-grow-small"] = CallWorkload(
        f"calls-{_cell[0]}-grow-small", "c",
        f"one block grown by realloc {_cell[2]} bytes at a time to "
        f"{f'{_cell[0] // 2**20} MiB' if _cell[0] % 2**20 == 0 else f'{_cell[0] // 1024} KiB'}, each step's first byte "
        "written, then freed: what a growing realloc of a large block costs when it stays within the block's pages",
        None, f"{_cell[1]:,} steps", default=False, source="calls.c", size_class=_cell[0], pattern="grow",
        pairs_full=_cell[1], grow_step=_cell[2])
# A process's start-up and exit under the allocator: short processes started one at a time (under glibc, each
# well under a millisecond), each a step; the cost model charges it per process a program starts (a build starts thousands).
CALL_PROCESSES = 2_000
CALL_CHILD_PAIRS = 64  # the malloc+free pairs of 16..1024 bytes each started process makes
CALL_WORKLOADS["calls-processes"] = CallWorkload(
    "calls-processes", "c",
    f"short processes started one at a time (posix_spawn, waited for), each making {CALL_CHILD_PAIRS} small "
    "malloc+free pairs: what a process pays for its allocator's start-up and exit",
    None, f"{CALL_PROCESSES:,} processes", default=False, source="calls.c", size_class=0, pattern="processes",
    pairs_full=CALL_PROCESSES)
WORKLOADS.update(CALL_WORKLOADS)

DEFAULT_WORKLOADS = [w.id for w in WORKLOADS.values() if w.default]
WORKLOAD_GROUPS = {
    "c": [w.id for w in WORKLOADS.values() if w.kind == "c" and w.default],
    "perl": [w.id for w in WORKLOADS.values() if w.kind == "perl" and w.default],
    "python": [w.id for w in WORKLOADS.values() if w.kind == "python" and w.default],
    "program": [w.id for w in WORKLOADS.values() if w.kind == "program" and w.default],
    "perl-cases": [f"perl-{c}" for c in PERL_CASES],
    "seed-003": ["pow2-churn", "pow2-ladder"],
    "seed-001": ["compile", "build"],
    "servers": ["server", "redis"],
    "calls": list(CALL_WORKLOADS),
    "held-blocks": ["calls-32768-lifo", *HELD_WORKLOADS],  # the 32 KiB LIFO cell beside few blocks live (as trials)
    "same-size": list(SAME_SIZE_WORKLOADS),
}


def expand(names) -> list:
    """Workload ids for a catalogue `workloads` list: ids, group names, or "*" for all."""
    chosen = []
    for name in names:
        if name == "*":
            ids = DEFAULT_WORKLOADS
        elif name in WORKLOAD_GROUPS:
            ids = WORKLOAD_GROUPS[name]
        elif name in WORKLOADS:
            ids = [name]
        else:
            raise HeapcostError(f"unknown workload or group {name!r}; valid: *, "
                                + ", ".join([*WORKLOAD_GROUPS, *WORKLOADS]))
        chosen += [i for i in ids if i not in chosen]
    return chosen


def get(workload_id) -> Workload:
    try:
        return WORKLOADS[workload_id]
    except KeyError:
        raise HeapcostError(f"unknown workload {workload_id!r}; valid: {', '.join(WORKLOADS)}") from None
