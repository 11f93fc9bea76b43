"""Known exploitation techniques a user brings: a folder of programs that each carry out one published heap
technique and assert its own success (how2heap's glibc_2.36 folder, built by hand), run under every selected
allocator by `python -m analysis probe --techniques DIR` into the probe run's techniques.csv.

heapcost never ships, builds or fetches these programs: the user builds them where they like and names the
folder. Every executable ELF file in it is a technique, named by its file name (other files are left alone). A
`provenance.json` in the folder says where they come from and how they were built (PROVENANCE_KEYS: the upstream
repository and its revision, the folder of it, the compiler and the flags, and the C library they are linked
against: `libc`, glibc when absent); the run records it with each program's sha256, and the folder only as
`{elsewhere}/<name>` (analysis.paths.portable_path).

A set is linked against one C library (LIBCS), and runs under the configurations whose programs are built against
that library (the probe Target's variant): `--techniques DIR`, linked dynamically against glibc, under every
configuration that preloads into glibc programs; `--techniques-musl DIR`, the same programs built statically with
musl-gcc, under the configurations whose probes are relinked statically against musl (without it, those
configurations run none: not-run). A technique of the glibc set that the musl set lacks is a cell
`not-applicable` without any run, its detail saying that it does not build against musl and why (provenance.json's
`not_built`: program -> the compiler's one-line reason); its program_sha256 is empty. A technique that cannot be
built against a configuration's C library is neither stopped nor working there.

Each program runs as the probes do (analysis/harness/security/probes.py): in a fresh sandboxed process under the
allocator's LD_PRELOAD and environment (a built glibc's loader in front of the argv: the program cannot be
relinked to that loader as the probes are, so its brk heap lies after the loader's data there, not the
program's), mallocwho checking that malloc came from the allocator's library (in a run of its own before the
cell's: malloc_check), stdin from /dev/null, a timeout; security/faultwhere.c is preloaded last to name the object
a fault or a trap was raised in.
A statically linked (musl) program takes no LD_PRELOAD, so neither mallocwho nor faultwhere reaches it. Its malloc
is the one linked into it, checked once when the folder is brought from its symbol table (MUSL_MALLOCS: mallocng,
or musl's bump allocator lite_malloc, which a static program that never calls free gets instead), and recorded in
run.json with each program's; a fault is located by security/faulttrace.c, which runs it under ptrace, and told to be
in the allocator's own code by the function the program's symbol table puts its pc in (MUSL_MALLOC_FUNCTIONS).
Each (technique, allocator) cell runs `runs` times (randomised allocators differ between runs); one run's outcome
is technique_verdict.verdict's, the cell's the most frequent (ties go to the one better for the attacker).
"""
import json
import os
import struct
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from analysis.errors import HeapcostError
from analysis.harness.process import launcher
from analysis.harness.mechanisms import elf
from analysis.harness.security.technique_verdict import NOT_RUN, verdict
from analysis.harness.process.trial import clean_env, preload_env, read_who, wrong_malloc
from analysis.paths import file_sha256, portable_path, portable_text

HERE = Path(__file__).resolve().parent  # the C sources beside this module: faultwhere.c, faulttrace.c

PROVENANCE_FILE = "provenance.json"
PROVENANCE_KEYS = ("upstream", "revision", "folder", "compiler", "flags", "libc")
LIBCS = ("glibc", "musl")  # the C library a set is linked against: the probe Target's variant that runs it
OPTION = {"glibc": "--techniques", "musl": "--techniques-musl"}
NOT_BUILT_KEY = "not_built"  # provenance.json: {program: the compiler's one-line reason it does not build}
# musl 1.2.3's malloc (src/malloc/*.c, src/malloc/mallocng/*.c, src/malloc/lite_malloc.c): the functions the
# objects of its libc.a define (the rest is inlined into them). A fault whose pc is in one is in the allocator.
MUSL_MALLOC_FUNCTIONS = frozenset((
    "malloc", "free", "calloc", "realloc", "aligned_alloc", "memalign", "posix_memalign", "valloc", "reallocarray",
    "malloc_usable_size", "__libc_malloc", "__libc_malloc_impl", "__libc_free", "__libc_realloc", "__libc_calloc",
    "__malloc_alloc_meta", "__malloc_allzerop", "__malloc_atfork", "__malloc_donate", "__simple_malloc", "alloc_slot",
    "allzerop", "default_malloc", "get_meta", "nontrivial_free"))
# a symbol a static musl program's malloc defines -> which malloc it is (the first found names it)
MUSL_MALLOCS = (("__malloc_alloc_meta", "mallocng"),
                ("__simple_malloc", "lite_malloc: the program never calls free, so musl links its bump allocator, "
                                    "not mallocng"))
MUSL_MALLOC_CHECK = ("a static program takes no LD_PRELOAD (mallocwho cannot run in it): its malloc is the one "
                     "linked into it, read from its symbol table when the folder is brought (malloc)")
DEFAULT_TIMEOUT = 10.0  # seconds; how2heap's programs end in milliseconds
HANG_LIMIT = 3  # a cell stops after this many hung runs: the rest would hang too, each a full timeout
# When runs disagree, the most frequent outcome names the cell; ties go to the one better for the attacker.
TIE_ORDER = ("works", "crashes", "hangs", "not-applicable", "stopped", NOT_RUN)


@dataclass(frozen=True)
class Technique:
    id: str  # the program's file name
    path: str  # '' when there is no program (not_built)
    sha256: str
    # a statically linked program's functions as (start, end, name, the allocator's): technique_verdict.verdict's
    # `functions`; () for a dynamically linked one
    functions: tuple = ()
    malloc: str = ""  # a static program's malloc, read from its symbol table (MUSL_MALLOCS)
    not_built: str = ""  # why there is no program for this C library (a cell not-applicable without runs)

    @property
    def static(self) -> bool:
        return bool(self.malloc)


@dataclass(frozen=True)
class Brought:
    """A folder of technique programs as the user brought it."""
    folder: str
    techniques: tuple
    provenance: dict
    libc: str = "glibc"
    not_built: dict = field(default_factory=dict)  # program -> the compiler's reason, from provenance.json

    def record(self) -> dict:
        """What run.json keeps: the folder's name only, the provenance file's content, each program's sha256; for a
        static set, each program's malloc and how it was checked, and the programs that do not build."""
        out = {"folder": portable_path(self.folder), "provenance": self.provenance,
               "programs": {t.id: t.sha256 for t in self.techniques}}
        if self.libc != "glibc":
            out.update(libc=self.libc, malloc_check=MUSL_MALLOC_CHECK,
                       malloc={t.id: t.malloc.split(":")[0] for t in self.techniques},
                       fault_record="security/faulttrace.c (ptrace): a static program takes no preloaded faultwhere",
                       not_built=self.not_built)
        return out

    def for_glibc_set(self, glibc: "Brought | None") -> tuple:
        """The techniques this set runs: each of the glibc set's, its own program or, when it has none, one that is
        not built (with the reason), then any of its own the glibc set lacks."""
        mine = {t.id: t for t in self.techniques}
        if glibc is None or glibc is self:
            return self.techniques
        out = [mine.pop(t.id, None) or Technique(t.id, "", "", not_built=self.why_not_built(t.id))
               for t in glibc.techniques]
        return tuple(out) + tuple(mine.values())

    def why_not_built(self, technique: str) -> str:
        reason = self.not_built.get(technique)
        return (f"does not build against {self.libc}: " + (reason or f"no {self.libc} build of it in the brought "
                                                                     f"folder {Path(self.folder).name}"))


def read_provenance(folder: Path) -> dict:
    """provenance.json of the folder (only PROVENANCE_KEYS, as text), or {} when there is none."""
    data = _provenance_file(folder)
    return {k: portable_text(str(data[k])) for k in PROVENANCE_KEYS if k in data}


def _provenance_file(folder: Path) -> dict:
    path = folder / PROVENANCE_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise HeapcostError(f"techniques: {PROVENANCE_FILE} is not readable JSON: {exc}") from None
    if not isinstance(data, dict):
        raise HeapcostError(f"techniques: {PROVENANCE_FILE} must hold a JSON object")
    return data


def read_not_built(folder: Path) -> dict:
    """provenance.json's `not_built` ({program: the compiler's one-line reason}, as text), or {}."""
    found = _provenance_file(folder).get(NOT_BUILT_KEY) or {}
    if not isinstance(found, dict) or not all(isinstance(v, str) for v in found.values()):
        raise HeapcostError(f"techniques: {PROVENANCE_FILE}'s {NOT_BUILT_KEY} must map each program to the "
                            "compiler's one-line reason")
    return {str(k): portable_text(v.strip().splitlines()[0] if v.strip() else "") for k, v in sorted(found.items())}


def _is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"\x7fELF"
    except OSError:
        return False


def _linked(path: Path) -> tuple[str, str]:
    """(the interpreter a dynamic program names, '' for a static one; a one-line error when it is no ELF we read)."""
    try:
        return elf.interpreter(path), ""
    except (OSError, ValueError, struct.error) as exc:
        return "", f"technique program {path.name} cannot be read as a 64-bit ELF file: {exc}"


def _static_malloc(path: Path) -> str:
    """Which musl malloc a static program holds (MUSL_MALLOCS), or '' (another libc, or stripped)."""
    names = {name for _, _, name in elf.functions(path)}
    return next((what for symbol, what in MUSL_MALLOCS if symbol in names), "")


def bring(folder, libc: str = "glibc") -> Brought:
    """The technique programs of a folder linked against `libc` (LIBCS), or a one-line error naming what is wrong
    with it."""
    option = OPTION[libc]
    folder = Path(str(folder)).expanduser()
    if not folder.exists():
        raise HeapcostError(f"techniques folder {folder} ({option}) does not exist")
    if not folder.is_dir():
        raise HeapcostError(f"techniques folder {folder} ({option}) is not a folder")
    programs = sorted(p for p in folder.iterdir()
                      if p.is_file() and os.access(p, os.X_OK) and _is_elf(p))
    if not programs:
        build = "glibc_2.36 programs" + (" with musl-gcc -static" if libc == "musl" else "")
        raise HeapcostError(f"techniques folder {folder} ({option}) holds no executable program (build how2heap's "
                            f"{build} into it first)")
    provenance = read_provenance(folder)
    said = provenance.get("libc", libc)
    if said != libc:
        raise HeapcostError(f"techniques folder {folder} ({option}) is for {libc} programs, but its {PROVENANCE_FILE} "
                            f"says they are linked against {said}")
    techniques = []
    for p in programs:
        interp, unreadable = _linked(p)
        if unreadable:
            raise HeapcostError(unreadable)
        if libc == "glibc":
            if not interp:
                raise HeapcostError(f"technique program {p.name} is statically linked, so no LD_PRELOAD can replace "
                                    "its malloc: link it dynamically (a set built statically against musl is "
                                    f"brought with {OPTION['musl']})")
            if elf.libc_of_interpreter(interp) == "musl":
                raise HeapcostError(f"technique program {p.name} ({option}) is linked against musl ({interp}): "
                                    "bring programs linked against glibc")
            techniques.append(Technique(p.name, str(p.absolute()), file_sha256(p)))
            continue
        if interp:
            raise HeapcostError(f"technique program {p.name} ({option}) is dynamically linked against "
                                f"{elf.libc_of_interpreter(interp)} ({interp}): build it with musl-gcc -static")
        malloc = _static_malloc(p)
        if not malloc:
            raise HeapcostError(f"technique program {p.name} ({option}) holds no musl malloc in its symbol table "
                                f"({' or '.join(s for s, _ in MUSL_MALLOCS)}): link it statically against musl and "
                                "do not strip it")
        functions = tuple((lo, hi, name, name in MUSL_MALLOC_FUNCTIONS) for lo, hi, name in elf.functions(p))
        techniques.append(Technique(p.name, str(p.absolute()), file_sha256(p), functions, malloc))
    if not provenance:
        from analysis.errors import warn

        warn(f"techniques folder {folder.name} has no {PROVENANCE_FILE}: the run records each program's sha256 but "
             "not the upstream revision nor the flags it was built with")
    present = {t.id for t in techniques}
    not_built = {k: v for k, v in read_not_built(folder).items() if k not in present}
    return Brought(str(folder.absolute()), tuple(techniques), provenance, libc, not_built)


def faultwhere_path() -> Path:
    from analysis.harness.process.build import build_c

    return build_c("faultwhere", [HERE / "faultwhere.c"], shared=True, ldflags=["-ldl"])


def faulttrace_path() -> Path:
    from analysis.harness.process.build import build_c

    return build_c("faulttrace", [HERE / "faulttrace.c"])


def check_faulttrace() -> None:
    """faulttrace runs here (ptrace is allowed in the launcher's sandbox), or a one-line error: without it a fault
    in a static program could not be located, and a deliberate crash of its allocator would pass for a crash."""
    with tempfile.TemporaryDirectory(prefix="heapcost-technique-") as tmp:
        err = Path(tmp) / "stderr"
        res = launcher.run([str(faulttrace_path()), "/bin/true"], env={"PATH": "/usr/bin:/bin"}, stderr=err,
                           stdin="/dev/null", timeout=30, cwd=tmp)
        said = err.read_text(errors="replace").strip() if err.exists() else ""
    if res.status != "exited" or res.exit_code != 0:
        raise HeapcostError("faulttrace cannot run a program under ptrace here, so a fault in a statically linked "
                            f"technique program cannot be located: {said.splitlines()[-1] if said else res.status}")


def why_not(target, technique: Technique | None = None) -> str:
    """Why a technique program cannot run under a probe target ('' when it can): a glibc-linked program (None: one
    of the glibc set) runs under the targets that preload into glibc programs, a static musl one (or the cell of
    one that does not build against musl) under the others."""
    if target.unavailable:
        return target.unavailable
    if target.variant == "glibc" and technique is not None and (technique.static or technique.not_built):
        return "a statically linked program takes no allocator's preload: it runs under its own C library's configurations"
    if target.variant != "glibc" and not (technique is not None and (technique.static or technique.not_built)):
        return (f"a brought program linked against glibc cannot be relinked against the statically linked "
                f"{target.variant}: bring a set built with {target.variant}-gcc -static ({OPTION.get(target.variant, '')})")
    return ""


def _launch(technique: Technique, target, timeout: float, *, check_malloc: bool):
    """Run the program once under the target: (LaunchResult, stderr, the malloc check's complaint or '')."""
    from analysis.harness.process.trial import preloadable_path

    with tempfile.TemporaryDirectory(prefix="heapcost-technique-") as tmp:
        tmp = Path(tmp)
        work = tmp / "work"
        work.mkdir()
        out, err, who = tmp / "stdout", tmp / "stderr", tmp / "who"
        if technique.static:  # no preload reaches it: faulttrace in front locates a fault
            preload, argv = {}, [str(faulttrace_path()), technique.path]
        else:
            libs = [*target.preload, faultwhere_path()]
            preload = (preload_env(libs, who) if check_malloc
                       else {"LD_PRELOAD": " ".join(preloadable_path(lib) for lib in libs)})
            argv = [*map(str, target.loader), technique.path]
        env = {**clean_env(work), **target.env, **preload,
               "LIBC_FATAL_STDERR_": "1"}  # glibc's messages to stderr, never to a terminal
        res = launcher.run(argv, env=env, stdout=out, stderr=err, stdin="/dev/null", timeout=timeout, cwd=work,
                           cpu_limit=int(timeout) + 1, fsize_limit=16 << 20)
        stderr = err.read_text(errors="replace") if err.exists() else ""
        wrong = ""
        if check_malloc and target.expect_malloc and not technique.static:
            wrong = wrong_malloc(read_who(who), target.expect_malloc)
    if res.status == "spawn-failed":
        wrong = f"spawn failed: {res.error or 'unknown'}"
    return res, stderr, wrong


def malloc_check(technique: Technique, target, *, timeout: float = DEFAULT_TIMEOUT) -> str:
    """'' when the program's malloc comes from the target's library (mallocwho, as the probes check it), else
    why not. A run of its own: mallocwho's look-ups allocate before main, and a technique counts on the heap it
    finds at main (large_bin_attack and house_of_botcake fail under glibc with mallocwho in the process).
    A static program runs no such check: its malloc was read from its symbol table when it was brought
    (Technique.malloc, recorded in run.json: MUSL_MALLOC_CHECK)."""
    if technique.static:
        return ""
    _, _, wrong = _launch(technique, target, timeout, check_malloc=True)
    return f"wrong malloc: {wrong}" if wrong and not wrong.startswith("spawn failed") else wrong


def run_once(technique: Technique, target, *, timeout: float = DEFAULT_TIMEOUT) -> tuple[str, str]:
    """One run of a technique program under a target (malloc_check passed): (outcome, detail)."""
    res, stderr, wrong = _launch(technique, target, timeout, check_malloc=False)
    if wrong:
        return NOT_RUN, wrong
    v = verdict(exit_code=res.exit_code if res.status == "exited" else None,
                signal=res.signal if res.status == "signaled" else None, stderr=stderr,
                timed_out=res.status == "timeout", allocator_objects=target.preload, functions=technique.functions)
    return v.outcome, v.detail


def summarize(results: list[tuple[str, str]]) -> dict:
    """The techniques.csv columns of one cell (without run_id, technique, allocator, program_sha256) from its
    runs' (outcome, detail)."""
    from analysis.stats.security import clopper_pearson

    counts = Counter(o for o, _ in results)
    rank = {o: i for i, o in enumerate(TIE_ORDER)}
    order = sorted(counts, key=lambda o: (-counts[o], rank.get(o, len(rank))))
    row = {"runs": len(results), "outcomes": " ".join(f"{o}={counts[o]}" for o in order)}
    if not results:
        return {**row, "outcome": NOT_RUN, "detail": "no runs"}
    usable = [o for o, _ in results if o != NOT_RUN]
    outcome = next((o for o in order if o != NOT_RUN), NOT_RUN)
    example = next(d for o, d in results if o == outcome)
    row.update(outcome=outcome, detail=f"{counts[outcome]}/{len(results)} {outcome}: {example}")
    if usable:
        k = counts.get("works", 0)
        lo, hi = clopper_pearson(k, len(usable))
        row.update(works=k, rate=k / len(usable), rate_ci_low=lo, rate_ci_high=hi)
    return row


def technique_cell(technique: Technique, target, runs: int, *, timeout: float = DEFAULT_TIMEOUT) -> dict:
    """The techniques.csv row (without run_id) of one technique under one target."""
    base = {"technique": technique.id, "allocator": target.id, "program_sha256": technique.sha256}
    why = why_not(target, technique)
    if why:
        return {**base, "outcome": NOT_RUN, "runs": 0, "outcomes": "", "detail": why}
    if technique.not_built:
        return {**base, "outcome": "not-applicable", "runs": 0, "outcomes": "", "detail": technique.not_built}
    wrong = malloc_check(technique, target, timeout=timeout)
    if wrong:
        return {**base, "outcome": NOT_RUN, "runs": 0, "outcomes": "", "detail": wrong}
    results = []
    for _ in range(runs):
        results.append(run_once(technique, target, timeout=timeout))
        if results[-1][0] == NOT_RUN or sum(o == "hangs" for o, _ in results) >= HANG_LIMIT:
            break  # the wrong malloc or the hang would come back in every run
    row = {**base, **summarize(results)}
    if technique.malloc and technique.malloc != "mallocng":
        row["detail"] += f"; malloc: musl's {technique.malloc}"
    return row


def cell(job) -> dict:
    technique, target, runs, timeout = job
    return technique_cell(technique, target, runs, timeout=timeout)


def techniques_for(target, glibc: Brought, others: dict) -> tuple:
    """The techniques a target runs: the glibc set's under the targets that preload into glibc programs; under
    another C library's (the target's variant), the set linked against it (`others`: {libc: Brought}) completed to
    the glibc set's techniques (Brought.for_glibc_set), or the glibc set's when none was brought (not-run)."""
    if target.variant != "glibc" and target.variant in others:
        return others[target.variant].for_glibc_set(glibc)
    return glibc.techniques


def run_cells(args, run_dir: Path, run_id: str, targets, brought: Brought, results, others: dict | None = None) -> int:
    """Every (technique, target) cell of a probe run into its techniques.csv (cells already there are kept: a
    resumed run goes on where it stopped). `brought`: the glibc set; `others`: {libc: Brought} of the sets linked
    against another C library (musl). `results`: the probe runner's pool (probes._results), passed in so that
    this module does not import it back. Returns the cells run."""
    from analysis.contract import runstore
    from analysis.contract.schema import TECHNIQUE_COLUMNS

    table = runstore.AppendTable(Path(run_dir) / "techniques.csv", TECHNIQUE_COLUMNS)
    done = {(r["technique"], r["allocator"]) for r in table.rows()}
    launcher.launcher_path(), launcher.mallocwho_path(), faultwhere_path()  # built before the workers start
    jobs = [(t, target, args.runs, args.technique_timeout) for target in targets
            for t in techniques_for(target, brought, others or {}) if (t.id, target.id) not in done]
    if any(t.static and not why_not(target, t) for t, target, _, _ in jobs):
        faulttrace_path()
        check_faulttrace()
    started = time.monotonic()
    try:
        for row in results(jobs, args.jobs, cell=cell):
            table.append({"run_id": run_id, **{k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}})
            print(f"{row['allocator']:<20} technique {row['technique']:<30} {row['outcome']:<15} "
                  f"{row.get('outcomes', '')[:40]}", flush=True)
    finally:
        table.close()
    print(f"wrote {Path(run_dir) / 'techniques.csv'}: {len(jobs)} cells in {time.monotonic() - started:.0f} s")
    return len(jobs)
