"""Known exploitation techniques a user brings: a folder of programs that each carry out one published heap
technique and assert its own success (how2heap's glibc_2.36 folder, built by hand), run under every selected
allocator by `python -m analysis probe --techniques DIR` into the probe run's techniques.csv.

heapcost never ships, builds or fetches these programs: the user builds them where they like and names the
folder. Every executable ELF file in it is a technique, named by its file name (other files are left alone). A
`provenance.json` in the folder says where they come from and how they were built (PROVENANCE_KEYS: the upstream
repository and its revision, the folder of it, the compiler and the flags); the run records it with each
program's sha256, and the folder only as `{elsewhere}/<name>` (analysis.paths.portable_path).

Each program runs as the probes do (analysis/harness/probes.py): in a fresh sandboxed process under the
allocator's LD_PRELOAD and environment (a built glibc's loader in front of the argv: the program cannot be
relinked to that loader as the probes are, so its brk heap lies after the loader's data there, not the
program's), mallocwho checking that malloc came from the allocator's library (in a run of its own before the
cell's: malloc_check), stdin from /dev/null, a timeout; native/faultwhere.c is preloaded last to name the object
a fault or a trap was raised in.
Each (technique, allocator) cell runs `runs` times (randomised allocators differ between runs); one run's outcome
is technique_verdict.verdict's, the cell's the most frequent (ties go to the one better for the attacker).
"""
import json
import os
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from analysis.errors import HeapcostError
from analysis.harness import launcher
from analysis.harness.technique_verdict import NOT_RUN, verdict
from analysis.harness.trial import clean_env, is_static_elf, preload_env, read_who, wrong_malloc
from analysis.paths import NATIVE_DIR, file_sha256, portable_path, portable_text

PROVENANCE_FILE = "provenance.json"
PROVENANCE_KEYS = ("upstream", "revision", "folder", "compiler", "flags")
DEFAULT_TIMEOUT = 10.0  # seconds; how2heap's programs end in milliseconds
HANG_LIMIT = 3  # a cell stops after this many hung runs: the rest would hang too, each a full timeout
# When runs disagree, the most frequent outcome names the cell; ties go to the one better for the attacker.
TIE_ORDER = ("works", "crashes", "hangs", "not-applicable", "stopped", NOT_RUN)


@dataclass(frozen=True)
class Technique:
    id: str  # the program's file name
    path: str
    sha256: str


@dataclass(frozen=True)
class Brought:
    """A folder of technique programs as the user brought it."""
    folder: str
    techniques: tuple
    provenance: dict

    def record(self) -> dict:
        """What run.json keeps: the folder's name only, the provenance file's content, each program's sha256."""
        return {"folder": portable_path(self.folder), "provenance": self.provenance,
                "programs": {t.id: t.sha256 for t in self.techniques}}


def read_provenance(folder: Path) -> dict:
    """provenance.json of the folder (only PROVENANCE_KEYS, as text), or {} when there is none."""
    path = folder / PROVENANCE_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise HeapcostError(f"techniques: {PROVENANCE_FILE} is not readable JSON: {exc}") from None
    if not isinstance(data, dict):
        raise HeapcostError(f"techniques: {PROVENANCE_FILE} must hold a JSON object")
    return {k: portable_text(str(data[k])) for k in PROVENANCE_KEYS if k in data}


def _is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"\x7fELF"
    except OSError:
        return False


def bring(folder) -> Brought:
    """The technique programs of a folder, or a one-line error naming what is wrong with it."""
    folder = Path(str(folder)).expanduser()
    if not folder.exists():
        raise HeapcostError(f"techniques folder {folder} does not exist")
    if not folder.is_dir():
        raise HeapcostError(f"techniques folder {folder} is not a folder")
    programs = sorted(p for p in folder.iterdir()
                      if p.is_file() and os.access(p, os.X_OK) and _is_elf(p))
    if not programs:
        raise HeapcostError(f"techniques folder {folder} holds no executable program (build how2heap's "
                            "glibc_2.36 programs into it first)")
    static = [p.name for p in programs if is_static_elf(p)]
    if static:
        raise HeapcostError(f"technique program {static[0]} is statically linked, so no LD_PRELOAD can replace its "
                            "malloc: link it dynamically")
    provenance = read_provenance(folder)
    if not provenance:
        from analysis.errors import warn

        warn(f"techniques folder {folder.name} has no {PROVENANCE_FILE}: the run records each program's sha256 but "
             "not the upstream revision nor the flags it was built with")
    techniques = tuple(Technique(p.name, str(p.absolute()), file_sha256(p)) for p in programs)
    return Brought(str(folder.absolute()), techniques, provenance)


def faultwhere_path() -> Path:
    from analysis.harness.build import build_c

    return build_c("faultwhere", [NATIVE_DIR / "faultwhere.c"], shared=True, ldflags=["-ldl"])


def why_not(target) -> str:
    """Why a technique program cannot run under a probe target ('' when it can)."""
    if target.unavailable:
        return target.unavailable
    if target.variant != "glibc":
        return f"a brought program cannot be relinked against the statically linked {target.variant}"
    return ""


def _launch(technique: Technique, target, timeout: float, *, check_malloc: bool):
    """Run the program once under the target: (LaunchResult, stderr, the malloc check's complaint or '')."""
    from analysis.harness.trial import preloadable_path

    with tempfile.TemporaryDirectory(prefix="heapcost-technique-") as tmp:
        tmp = Path(tmp)
        work = tmp / "work"
        work.mkdir()
        out, err, who = tmp / "stdout", tmp / "stderr", tmp / "who"
        libs = [*target.preload, faultwhere_path()]
        preload = (preload_env(libs, who) if check_malloc
                   else {"LD_PRELOAD": " ".join(preloadable_path(lib) for lib in libs)})
        env = {**clean_env(work), **target.env, **preload,
               "LIBC_FATAL_STDERR_": "1"}  # glibc's messages to stderr, never to a terminal
        res = launcher.run([*map(str, target.loader), technique.path], env=env, stdout=out, stderr=err,
                           stdin="/dev/null", timeout=timeout, cwd=work, cpu_limit=int(timeout) + 1,
                           fsize_limit=16 << 20)
        stderr = err.read_text(errors="replace") if err.exists() else ""
        wrong = ""
        if check_malloc and target.expect_malloc:
            wrong = wrong_malloc(read_who(who), target.expect_malloc)
    if res.status == "spawn-failed":
        wrong = f"spawn failed: {res.error or 'unknown'}"
    return res, stderr, wrong


def malloc_check(technique: Technique, target, *, timeout: float = DEFAULT_TIMEOUT) -> str:
    """'' when the program's malloc comes from the target's library (mallocwho, as the probes check it), else
    why not. A run of its own: mallocwho's look-ups allocate before main, and a technique counts on the heap it
    finds at main (large_bin_attack and house_of_botcake fail under glibc with mallocwho in the process)."""
    _, _, wrong = _launch(technique, target, timeout, check_malloc=True)
    return f"wrong malloc: {wrong}" if wrong and not wrong.startswith("spawn failed") else wrong


def run_once(technique: Technique, target, *, timeout: float = DEFAULT_TIMEOUT) -> tuple[str, str]:
    """One run of a technique program under a target (malloc_check passed): (outcome, detail)."""
    res, stderr, wrong = _launch(technique, target, timeout, check_malloc=False)
    if wrong:
        return NOT_RUN, wrong
    v = verdict(exit_code=res.exit_code if res.status == "exited" else None,
                signal=res.signal if res.status == "signaled" else None, stderr=stderr,
                timed_out=res.status == "timeout", allocator_objects=target.preload)
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
    why = why_not(target)
    if why:
        return {**base, "outcome": NOT_RUN, "runs": 0, "outcomes": "", "detail": why}
    wrong = malloc_check(technique, target, timeout=timeout)
    if wrong:
        return {**base, "outcome": NOT_RUN, "runs": 0, "outcomes": "", "detail": wrong}
    results = []
    for _ in range(runs):
        results.append(run_once(technique, target, timeout=timeout))
        if results[-1][0] == NOT_RUN or sum(o == "hangs" for o, _ in results) >= HANG_LIMIT:
            break  # the wrong malloc or the hang would come back in every run
    return {**base, **summarize(results)}


def cell(job) -> dict:
    technique, target, runs, timeout = job
    return technique_cell(technique, target, runs, timeout=timeout)


def run_cells(args, run_dir: Path, run_id: str, targets, brought: Brought, results) -> int:
    """Every (technique, target) cell of a probe run into its techniques.csv (cells already there are kept: a
    resumed run goes on where it stopped). `results`: the probe runner's pool (probes._results), passed in so that
    this module does not import it back. Returns the cells run."""
    from analysis.contract import runstore
    from analysis.contract.schema import TECHNIQUE_COLUMNS

    table = runstore.AppendTable(Path(run_dir) / "techniques.csv", TECHNIQUE_COLUMNS)
    done = {(r["technique"], r["allocator"]) for r in table.rows()}
    launcher.launcher_path(), launcher.mallocwho_path(), faultwhere_path()  # built before the workers start
    jobs = [(t, target, args.runs, args.technique_timeout) for target in targets for t in brought.techniques
            if (t.id, target.id) not in done]
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
