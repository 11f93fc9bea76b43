"""`python -m analysis profile`: a program's allocation profile, checked on a fixture program whose profile is
known exactly (tests/fixtures/alloc_profile.c), the system-call parser on a trace written by hand, and every
kind of bad input ending in one line and a non-zero exit."""
import csv
import io
import shutil
import subprocess

import pytest

from analysis.contract.profile_schema import PROFILE_COLUMNS, PROFILE_ENTRY_POINTS, PROFILE_QUANTITIES
from analysis.errors import HeapcostError
from analysis.harness.workloads import profile
from analysis.harness.process.build import build_c
from conftest import FIXTURES, cli, cli_here

needs_strace = pytest.mark.skipif(shutil.which("strace") is None,
                                  reason="strace is not installed (apt-get install strace, or make system-deps)")

# What tests/fixtures/alloc_profile.c asks for, by entry point and size class (the upper bound of its power of two)
SMALL, MEDIUM, THREADED = 32, 64, 2048
CONSTRUCTION = {
    "malloc_calls": {SMALL: 1000 + 100 + 10 + 10 + 10, 4096: 10, 128: 1, 16: 1, 1 << 20: 1, MEDIUM: 10 * 8 + 10 * 7,
                     THREADED: 50 + 1},
    "calloc_calls": {1024: 5},
    "realloc_calls": {256: 1, 1024: 1, 8192: 1, 64: 2},
    "posix_memalign_calls": {64: 1},
    "aligned_alloc_calls": {128: 1},
    "memalign_calls": {16: 1},
    # every block is freed once, by the class it was asked for in
    "free_calls": {SMALL: 100 + 10 + 10 + 10 + 1000, MEDIUM: 150 + 1 + 1, 4096: 10, 1024: 5, 128: 1, 16: 2, 1 << 20: 1,
                   THREADED: 51},
    # the first 100 frees of 24 bytes taken at once, 10 at the window's edge (none past it), 10 taken at once by 20
    # bytes; 49 of the second thread's 50 (the main thread's malloc after the join takes none of them)
    "frees_reused": {SMALL: 100 + 10 + 10, THREADED: 49},
    # of those, taken by the size of the class's latest free: all but the 10 taken by 20 bytes
    "frees_reused_same_size": {SMALL: 100 + 10, THREADED: 49},
    # of the growing reallocs (100 -> 200 -> 700 -> 7000 bytes), the one that needs a second page
    "realloc_grown_pages": {8192: 1},
}


@pytest.fixture(scope="module")
def fixture_program():
    return str(build_c("alloc_profile", [FIXTURES / "alloc_profile.c"], ldflags=["-pthread"]))


def per_class(values: dict, quantity: str) -> dict:
    return {c: v for (q, c), v in values.items() if q == quantity and c is not None and v}


def test_counts_by_entry_point_and_size_class_match_the_construction(fixture_program, tmp_path):
    moved = tmp_path / "moved.txt"
    got = profile.count_calls([fixture_program, str(moved)])
    # glibc's own calls for starting and joining a thread (the new thread's TLS vector): the same program
    # doing nothing but that, counted the same way, added to what the construction asks for
    glibc = profile.count_calls([fixture_program, "baseline"])
    for quantity in [f"{e}_calls" for e in PROFILE_ENTRY_POINTS] + ["frees_reused", "frees_reused_same_size",
                                                                     "realloc_grown_pages"]:
        expected = dict(CONSTRUCTION.get(quantity, {}))
        for c, v in per_class(glibc, quantity).items():
            expected[c] = expected.get(c, 0) + v
        assert per_class(got, quantity) == expected, quantity
        assert got[(quantity, None)] == sum(expected.values()) + (got[("free_untracked_calls", None)]
                                                                  if quantity == "free_calls" else 0)
    assert got[("free_untracked_calls", None)] == 0 and got[("alloc_failed", None)] == 0
    assert got[("processes", None)] == 1 and got[("threads", None)] == 2 and got[("reuse_window", None)] == 8
    # live at the peak: the 1 MiB block with everything allocated before it
    assert got[("peak_live_bytes", None)] == 1000 * 24 + 10 * 4000 + 5 * 1000 + 50 + 16 + 48 + 128 + 16 + (1 << 20)
    # the most blocks of each class live at once: the 1,000 small ones; the 150 medium ones with the 48-byte aligned
    # block and the buffer shrunk to 50 bytes; the 5 zeroed blocks with the buffer at 700 bytes; glibc's own
    # thread start-up (the baseline run) adds its one block of 512
    expected = {SMALL: 1000, MEDIUM: 150 + 2, 4096: 10, 1024: 5 + 1, 16: 2, 128: 1, 256: 1, 8192: 1, 1 << 20: 1,
                THREADED: 1}
    for c, v in per_class(glibc, "peak_live_blocks").items():
        expected[c] = max(expected.get(c, 0), v)
    assert per_class(got, "peak_live_blocks") == expected
    assert ("peak_live_blocks", None) not in got  # peaks of different moments have no total
    frees = sum(per_class(got, "free_calls").values())
    assert got[("reuse_share", None)] == pytest.approx((120 + 49 + sum(per_class(glibc, "frees_reused").values()))
                                                       / frees)
    assert got[("reuse_share", SMALL)] == pytest.approx(120 / 1130)
    assert got[("reuse_share", THREADED)] == pytest.approx(49 / 51)
    assert got[("reuse_share", 4096)] == 0


def test_realloc_growth_matches_the_construction(fixture_program, tmp_path):
    moved = tmp_path / "moved.txt"
    got = profile.count_calls([fixture_program, str(moved)])
    expected = {"realloc_grow": 3, "realloc_shrink": 1, "realloc_same": 1, "realloc_from_null": 0,
                "realloc_to_zero": 0, "realloc_untracked": 0, "realloc_failed": 0,
                "realloc_grow_factor_le2": 1, "realloc_grow_factor_le4": 1, "realloc_grow_factor_le8": 0,
                "realloc_grow_factor_gt8": 1}
    assert {q: got[(q, None)] for q in expected} == expected
    # which reallocs moved is glibc's choice: the program saw it and wrote it down (the first one must move,
    # a block sits right after it)
    seen = dict(part.split("=") for part in moved.read_text().split())
    assert got[("realloc_moved", None)] == int(seen["moved"]) >= 1
    assert got[("realloc_moved_bytes", None)] == int(seen["moved_bytes"]) >= 100
    # the growing ones again per class of the new size, and of them those that moved (the first one among them)
    grown = {c: v for (q, c), v in got.items() if q == "realloc_grown" and c is not None}
    assert sum(grown.values()) == got[("realloc_grown", None)] == 3
    moved_growing = sum(v for (q, c), v in got.items() if q == "realloc_grown_moved" and c is not None)
    assert 1 <= moved_growing <= got[("realloc_moved", None)]


FORKS = r"""
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static void *volatile kept;
int main(void)
{
    kept = malloc(10); free(kept);                                    /* the parent: class 16 */
    pid_t c = vfork();
    if (c == 0)
        _exit(0);                                                     /* shares the parent's memory: no report */
    waitpid(c, 0, 0);
    c = fork();
    if (c == 0) { kept = malloc(20); free(kept); _exit(0); }          /* its own report, by _exit: class 32 */
    waitpid(c, 0, 0);
    return 0;
}
"""


def test_each_process_reports_its_own_calls_a_forked_child_by_exit_a_vfork_child_not(tmp_path):
    source = tmp_path / "forks.c"
    source.write_text(FORKS)
    got = profile.count_calls([str(build_c("forks", [source]))])
    assert got[("processes", None)] == 2
    assert per_class(got, "malloc_calls") == {16: 1, 32: 1} and per_class(got, "free_calls") == {16: 1, 32: 1}


def test_the_shim_report_sums_processes_and_keeps_the_largest_peak():
    text = ("processes - 1\nthreads - 2\npeak_live_bytes - 500\nreuse_window - 8\nmalloc_calls 32 3\n"
            "peak_live_blocks 32 3\n"
            "processes - 1\nthreads - 1\npeak_live_bytes - 900\nreuse_window - 8\nmalloc_calls 32 4\n"
            "malloc_calls 0 1\npeak_live_blocks 32 2\n")
    got = profile.parse_shim_report(text)
    assert got == {("processes", None): 2, ("threads", None): 3, ("peak_live_bytes", None): 900,
                   ("reuse_window", None): 8, ("malloc_calls", 32): 7, ("malloc_calls", 0): 1,
                   ("peak_live_blocks", 32): 3}
    with pytest.raises(HeapcostError, match="unreadable line 2"):
        profile.parse_shim_report("processes - 1\nnot a quantity 3\n")


TRACE_MAIN = """\
execve("/usr/bin/prog", ["prog"], 0x7ffd /* 7 vars */) = 0
brk(NULL)                               = 0x1000000
mmap(NULL, 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7f0000000000
mmap(NULL, 39335, PROT_READ, MAP_PRIVATE, 3, 0) = 0x7f0000100000
mmap(0x7f0000200000, 4096, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_FIXED|MAP_ANONYMOUS, -1, 0) = 0x7f0000200000
mprotect(0x7f0000300000, 16384, PROT_READ) = 0
brk(0x1021000)                          = 0x1021000
brk(0x1011000)                          = 0x1011000
mmap(NULL, 1052672, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7f0000400000
mmap(NULL, 1099511627776, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = -1 ENOMEM (Cannot allocate memory)
mremap(0x7f0000400000, 1052672, 2101248, MREMAP_MAYMOVE) = 0x7f0000600000
mremap(0x7f0000600000, 2101248, 1052672, 0) = 0x7f0000600000
munmap(0x7f0000600000, 1052672)         = 0
mmap(NULL, 8392704, PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_STACK, -1, 0) = 0x7f0001000000
mprotect(0x7f0001001000, 8388608, PROT_READ|PROT_WRITE) = 0
execve("/usr/bin/other", ["other"], 0x1 /* 7 vars */) = 0
brk(0x3000000)                          = 0x3000000
brk(0x3001000)                          = 0x3001000
"""
TRACE_THREAD = """\
mmap(NULL, 134217728, PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE, -1, 0) = 0x7e0000000000
munmap(0x7e0000000000, 67108864)        = 0
mprotect(0x7e0004000000, 135168, PROT_READ|PROT_WRITE) = 0
madvise(0x7e0004000000, 65536, MADV_DONTNEED) = 0
madvise(0x7e0004010000, 4096, MADV_WILLNEED) = 0
"""


def test_the_system_call_trace_is_counted_call_by_call():
    got = {q: v for (q, _), v in profile.parse_trace([TRACE_MAIN, TRACE_THREAD]).items()}
    assert got == {
        "syscall_tasks": 2,
        "mmap_calls": 6,  # the failed one left out
        "mmap_anon_bytes": 8192 + 1052672, "mmap_reserve_bytes": 134217728, "mmap_stack_bytes": 8392704,
        "mmap_other_bytes": 39335 + 4096,  # a file, and a fixed address
        "munmap_calls": 2, "munmap_bytes": 1052672 + 67108864,
        # after execve the break is another process's: its first move, never read, is not counted
        "brk_calls": 5, "brk_grow_bytes": 0x21000 + 0x1000, "brk_shrink_bytes": 0x10000,
        "mremap_calls": 2, "mremap_grow_bytes": 2101248 - 1052672, "mremap_shrink_bytes": 2101248 - 1052672,
        "mprotect_calls": 3, "mprotect_rw_bytes": 8388608 + 135168,
        "madvise_calls": 2, "madvise_release_bytes": 65536,
    }
    assert set(got) <= set(PROFILE_QUANTITIES)


@needs_strace
def test_the_system_call_run_sees_the_large_block_and_the_thread(fixture_program):
    got = {q: v for (q, _), v in profile.trace_memory_calls([fixture_program, "baseline"]).items()}
    assert got["syscall_tasks"] == 2 and got["mmap_stack_bytes"] > 0  # the main thread and the one it starts
    full = {q: v for (q, _), v in profile.trace_memory_calls([fixture_program]).items()}
    # the 1 MiB block is past glibc's mmap threshold: mapped and unmapped on its own, beside what the loader
    # and the thread map in the baseline
    assert full["mmap_anon_bytes"] - got["mmap_anon_bytes"] >= 1 << 20
    assert full["munmap_bytes"] - got["munmap_bytes"] >= 1 << 20
    assert full["brk_grow_bytes"] > 0


def read_profile(text: str) -> list[dict]:
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows and list(rows[0]) == PROFILE_COLUMNS
    return rows


def check_schema(rows: list[dict]) -> dict:
    """Every row is a documented quantity, per class only where the schema says so, in a power-of-two class."""
    values = {}
    for row in rows:
        unit, by_class, _ = PROFILE_QUANTITIES[row["quantity"]]
        if row["size_class"]:
            size_class = int(row["size_class"])
            assert by_class and (size_class == 0 or size_class & (size_class - 1) == 0), row
        value = float(row["value"])
        assert value >= 0 and (unit != "share" or value <= 1), row
        values[(row["quantity"], int(row["size_class"]) if row["size_class"] else None)] = value
    return values


def test_the_command_writes_the_documented_table(fixture_program, tmp_path):
    out = tmp_path / "profile.csv"
    done = cli("profile", "--no-syscalls", "--runs", "3", "--out", str(out), "--", fixture_program,
               str(tmp_path / "moved.txt"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{out}: ") and "threads that allocated: 2" in done.stdout
    values = check_schema(read_profile(out.read_text()))
    assert values[("malloc_calls", 4096)] == 10 and values[("calloc_calls", 1024)] == 5
    assert values[("wall_s", None)] > 0 and values[("maxrss_kb", None)] > 0
    assert values[("timed_runs", None)] == 3 and values[("cpu_sd_log", None)] >= 0
    assert not any(q.startswith(("mmap", "brk", "syscall")) for q, _ in values)


@needs_strace
def test_the_command_prints_the_table_with_the_system_calls_by_default(fixture_program):
    done = cli("profile", "--", fixture_program, "baseline")
    assert done.returncode == 0, done.stderr
    values = check_schema(read_profile(done.stdout))
    assert values[("syscall_tasks", None)] == 2 and values[("mmap_calls", None)] > 0


@pytest.mark.parametrize("args, message", [
    ([], "no program to profile"),
    (["--runs", "0", "--", "true"], "--runs must be at least 1"),
    (["--"], "no program to profile"),
    (["--", "/nonexistent/program"], "program /nonexistent/program not found"),
    (["--", "no-such-program-here"], "program 'no-such-program-here' not found on PATH"),
    (["--", "sh", "-c", "echo the program broke >&2; exit 3"], "sh exited with status 3 in the counting run: "
                                                               "the program broke"),
    (["--timeout", "0", "--", "true"], "--timeout must be positive"),
])
def test_bad_input_is_one_line_and_a_non_zero_exit(args, message):
    done = cli_here("profile", *args)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and message in done.stderr and "Traceback" not in done.stderr


def test_the_program_is_found_on_path_and_its_file_arguments_made_absolute(tmp_path, monkeypatch):
    """The runs happen in a scratch folder: a relative path must name the same file from there."""
    (tmp_path / "words.txt").write_text("one\ntwo\n")
    monkeypatch.chdir(tmp_path)
    argv = profile.resolve_command(["--", "wc", "-l", "words.txt", "--files0-from=words.txt", "missing.txt"])
    assert argv == [shutil.which("wc"), "-l", str(tmp_path / "words.txt"),
                    f"--files0-from={tmp_path / 'words.txt'}", "missing.txt"]


def test_a_file_that_is_not_executable_is_refused(tmp_path):
    data = tmp_path / "data.txt"
    data.write_text("not a program\n")
    data.chmod(0o644)
    done = cli_here("profile", "--", str(data))
    assert done.returncode == 2 and "is not an executable file" in done.stderr and done.stderr.count("\n") == 1


def test_a_static_program_is_refused_no_preload_reaches_it(tmp_path):
    source = tmp_path / "static.c"
    source.write_text("int main(void) { return 0; }\n")
    program = tmp_path / "static"
    if subprocess.run(["gcc", "-static", str(source), "-o", str(program)], capture_output=True).returncode:
        pytest.skip("no static C library to link a static program with")
    done = cli_here("profile", "--", str(program))
    assert done.returncode == 2 and "statically linked" in done.stderr and done.stderr.count("\n") == 1


def test_a_heapcost_workload_is_profiled_into_a_run_of_the_dataset(tmp_path):
    import json

    from analysis.contract.profile_schema import PROFILE_RUN_COLUMNS
    from analysis.contract.run_check import check_readable

    scale = 0.01
    run_dir = profile.record_workloads("small-loop", scale=scale, runs=2, syscalls=False, force="1",
                                       runs_dir=tmp_path)
    info = json.loads((run_dir / "run.json").read_text())
    assert info["kind"] == "profile" and info["status"] == "complete"
    assert info["params"]["workloads"] == ["small-loop"] and info["params"]["scale"] == scale
    assert (run_dir / "machine.json").is_file()
    with open(run_dir / "profiles.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == PROFILE_RUN_COLUMNS
    assert {(r["run_id"], r["workload"], r["scale"]) for r in rows} == {(run_dir.name, "small-loop", "0.01")}
    values = check_schema([{k: r[k] for k in PROFILE_COLUMNS} for r in rows])
    # workloads/small_loop.c: 4,000,000 rounds at scale 1 of ten malloc(0x20) then ten free
    pairs = 10 * round(4_000_000 * scale)
    assert values[("malloc_calls", 32)] == pairs and values[("free_calls", 32)] == pairs
    assert values[("timed_runs", None)] == 2 and values[("user_s", None)] >= 0
    # beside each timed run, one under the placement allocator in each mode, as a program's profile has them
    assert info["params"]["placement"] is True and values[("placement_runs", None)] == 2
    assert values[("placement_ordered_cpu_s", None)] >= 0 and values[("placement_shuffled_cpu_s", None)] >= 0
    assert check_readable(run_dir.name, run_dir)["kind"] == "profile"


def test_a_workload_profile_without_placement_says_so_in_its_run(tmp_path):
    import json

    run_dir = profile.record_workloads("small-loop", scale=0.01, runs=1, syscalls=False, force="1",
                                       runs_dir=tmp_path, placement=False)
    assert "placement" not in json.loads((run_dir / "run.json").read_text())["params"]
    with open(run_dir / "profiles.csv", newline="") as fh:
        assert not any(r["quantity"].startswith("placement") for r in csv.DictReader(fh))


def test_workloads_and_a_program_together_are_refused_in_one_line():
    done = cli_here("profile", "--workloads", "small-loop", "--", "true")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "not both" in done.stderr


def test_an_unknown_workload_is_refused_in_one_line():
    done = cli_here("profile", "--workloads", "no-such-workload", "--force")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "unknown workload" in done.stderr


def test_a_program_that_empties_its_folder_keeps_every_processs_report(tmp_path):
    # the build workload's driver removes what it made in its scratch folder: the reports must not lie there
    values = profile.count_calls(["/bin/sh", "-c", "ls >/dev/null; rm -f ./* ./.[!.]*"])
    assert values[("processes", None)] == 3  # sh, ls and rm


def test_a_workload_profile_that_fails_first_leaves_no_run_and_one_that_fails_later_resumes(tmp_path, monkeypatch):
    real = profile.workload_rows
    with monkeypatch.context() as m:
        m.setattr(profile, "workload_rows", lambda *a, **k: (_ for _ in ()).throw(HeapcostError("it broke")))
        with pytest.raises(HeapcostError, match="it broke"):
            profile.record_workloads("small-loop", scale=0.01, runs=1, syscalls=False, force="1", runs_dir=tmp_path)
    assert not list(tmp_path.glob("*-profile-*"))

    calls = []

    def second_fails(wid, *args, **kwargs):
        calls.append(wid)
        if wid == "pow2-churn" and calls.count(wid) == 1:
            raise HeapcostError("it broke")
        return real(wid, *args, **kwargs)

    monkeypatch.setattr(profile, "workload_rows", second_fails)
    with pytest.raises(HeapcostError):
        profile.record_workloads("small-loop,pow2-churn", scale=0.01, runs=1, syscalls=False, force="1",
                                 runs_dir=tmp_path)
    run_dir = profile.record_workloads("small-loop,pow2-churn", scale=0.01, runs=1, syscalls=False, force="1",
                                       runs_dir=tmp_path)
    assert [p.name for p in tmp_path.glob("*-profile-*")] == [run_dir.name]
    assert calls == ["small-loop", "pow2-churn", "pow2-churn"]  # the profiled workload was kept, not run again
    with open(run_dir / "profiles.csv", newline="") as fh:
        assert {r["workload"] for r in csv.DictReader(fh)} == {"small-loop", "pow2-churn"}


def test_a_shell_script_wrapper_is_profiled_with_the_programs_it_starts(fixture_program, tmp_path):
    """A program started through a shell script: the shell's process and each program it forks and execs report
    (the preload goes with the environment), so the calls are the program's twice and the shell's own."""
    script = tmp_path / "wrapper.sh"
    script.write_text(f"#!/bin/sh\n{fixture_program} {tmp_path / 'a.txt'}\n{fixture_program} {tmp_path / 'b.txt'}\n")
    script.chmod(0o755)
    once = profile.count_calls([fixture_program, str(tmp_path / "c.txt")])
    wrapped = profile.count_calls([str(script)])
    assert wrapped[("processes", None)] == 3
    assert wrapped[("calloc_calls", 1024)] == 2 * once[("calloc_calls", 1024)]
    assert wrapped[("malloc_calls", 4096)] >= 2 * once[("malloc_calls", 4096)]  # and the shell's own
    assert wrapped[("threads", None)] >= 2 * once[("threads", None)]


# ---- the timed runs: blocks spread over the profile's run, pinned, and the spread they carry ----

class SimulatedMachine:
    """A machine whose state moves while a profile runs: each step of time (a run; the system-call run takes
    `trace_steps`) may start a new phase with a level drawn from N(0, between); a run's log CPU time is
    log(base_s) + the phase's level + N(0, within). The launcher, counting and tracing are replaced by it."""

    def __init__(self, rng, base_s=0.2, between=0.08, within=0.01, phase_steps=3, trace_steps=6, threads=1):
        self.rng, self.base_s, self.between, self.within = rng, base_s, between, within
        self.phase_steps, self.trace_steps, self.threads = phase_steps, trace_steps, threads
        self.step, self.level, self.log = 0, rng.normal(0, between), []

    def advance(self, steps):
        for _ in range(steps):
            self.step += 1
            if self.step % self.phase_steps == 0:
                self.level = self.rng.normal(0, self.between)

    def install(self, monkeypatch):
        import math
        from types import SimpleNamespace

        def launch(argv, workdir, env, timeout, what, wrapper=(), cpu=None):
            self.log.append((what, cpu))
            cpu_s = self.base_s * math.exp(self.level + self.rng.normal(0, self.within))
            self.advance(1)
            return SimpleNamespace(user_s=cpu_s, sys_s=0.0, wall_s=cpu_s, maxrss_kb=1000, status="exited",
                                   exit_code=0)

        def count(argv, timeout, extra_env=None):
            self.log.append(("counting run", None))
            self.advance(1)
            return {("malloc_calls", 16): 10 ** 6, ("malloc_calls", None): 10 ** 6, ("processes", None): 1,
                    ("threads", None): self.threads}

        def trace(argv, timeout, extra_env=None):
            self.log.append(("system-call run", None))
            self.advance(self.trace_steps)
            return {("mmap_calls", None): 1}

        monkeypatch.setattr(profile, "launch", launch)
        monkeypatch.setattr(profile, "count_calls", count)
        monkeypatch.setattr(profile, "trace_memory_calls", trace)
        monkeypatch.setattr(profile.shutil, "which", lambda name: "/usr/bin/strace")
        monkeypatch.setattr(profile.launcher, "pinned", _no_pinning)


def _no_pinning(cpu):
    import contextlib
    return contextlib.nullcontext({"trial_cpu": cpu})


def _values(rows) -> dict:
    return {(r["quantity"], r["size_class"] if r["size_class"] != "" else None): r["value"] for r in rows}


def test_the_timed_runs_come_in_blocks_around_the_system_call_run_pinned_for_one_thread(monkeypatch):
    import os
    import random

    import numpy as np

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    machine = SimulatedMachine(np.random.default_rng(1))
    machine.install(monkeypatch)
    orders = set()
    for seed in range(12):
        machine.log.clear()
        values = _values(profile.profile_argv(["/bin/true"], rng=random.Random(seed)))
        steps = [what for what, _ in machine.log]
        assert steps[0] == "counting run" and steps.count("system-call run") == 1 and steps.count("timed run") == 6
        assert {cpu for what, cpu in machine.log if what == "timed run"} == {1}
        orders.add(tuple(steps).index("system-call run"))
        assert values[("timed_runs", None)] == 6 and values[("timed_blocks", None)] == 3
        assert values[("timed_pinned", None)] == 1 and values[("cpu_sd_log_blocks", None)] > 0
    assert len(orders) >= 3  # the system-call run falls between the blocks at different places
    threaded = SimulatedMachine(np.random.default_rng(2), threads=4)
    threaded.install(monkeypatch)
    values = _values(profile.profile_argv(["/bin/true"], rng=random.Random(0)))
    assert values[("timed_pinned", None)] == 0 and {c for w, c in threaded.log if w == "timed run"} == {None}
    assert profile.block_sizes(6) == [2, 2, 2] and profile.block_sizes(5) == [2, 2, 1] and profile.block_sizes(1) == [1]


def _predicted(rows):
    import pandas as pd

    from analysis.stats import cost_model

    prof = pd.DataFrame(rows).replace({"size_class": {"": None}})
    costs = pd.DataFrame([{"pattern": p, "size_class": 16, "added_ns": 40.0, "added_ns_low": 40.0,
                           "added_ns_high": 40.0} for p in ("lifo", "random")])
    return cost_model.predict(prof, costs)


@pytest.mark.slow  # 200 simulated profiles and predictions: in make test, not test-fast
def test_two_profiles_of_one_program_on_a_noisy_baseline_give_overlapping_predictions(monkeypatch):
    """A known truth: the baseline's level moves between phases of the machine's state. Two profiles of one
    program, each timed in blocks spread over its run, give predictions whose intervals overlap (the blocks'
    spread is carried); timed in one block, back to back, they miss each other far more often."""
    import random

    import numpy as np

    def overlap_rate(blocks):
        monkeypatch.setattr(profile, "TIMED_BLOCKS", blocks)
        rng = np.random.default_rng(7)
        together = 0
        for i in range(100):
            preds = []
            for j in range(2):
                SimulatedMachine(rng).install(monkeypatch)
                preds.append(_predicted(profile.profile_argv(["/bin/true"], rng=random.Random(2 * i + j))))
            a, b = preds
            together += a.low <= b.high and b.low <= a.high
        return together / 100

    blocked, back_to_back = overlap_rate(3), overlap_rate(1)
    assert blocked >= 0.9
    assert back_to_back <= blocked - 0.15


# ---- the placement allocator and the profile's runs under it ----

def _walk(mode):
    import subprocess

    program = build_c("placement_walk", [FIXTURES / "placement_walk.c"])
    done = subprocess.run([str(program)], env={"LD_PRELOAD": str(profile.placement_path()),
                                               "HEAPCOST_PLACEMENT": mode}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.split("\n")
    adjacent = int(lines[0].split()[1])
    return adjacent, lines[1], lines[2]


def test_the_placement_allocator_lays_blocks_side_by_side_or_scatters_them_and_keeps_malloc_s_promises():
    adjacent, reused, ok = _walk("ordered")
    assert adjacent == 199 and reused == "reused yes" and ok == "ok"  # every block right after the one before
    adjacent, _, ok = _walk("shuffled")
    assert adjacent <= 20 and ok == "ok"  # drawn among 256 free slots: about 1 in 256 follows its predecessor


def test_placement_values_are_the_modes_medians_and_the_turns_paired_spread():
    from types import SimpleNamespace

    def runs(*cpu):
        return [SimpleNamespace(user_s=c, sys_s=0.0) for c in cpu]

    blocks = [{"glibc": runs(1.0, 1.1), "ordered": runs(0.5, 0.55), "shuffled": runs(1.0, 1.1)},
              {"glibc": runs(1.0), "ordered": runs(0.6), "shuffled": runs(1.2)}]
    got = profile.placement_values(blocks)
    assert got[("placement_runs", None)] == 3
    assert got[("placement_ordered_cpu_s", None)] == pytest.approx(0.55)
    assert got[("placement_shuffled_cpu_s", None)] == pytest.approx(1.1)
    assert got[("placement_shuffled_sd_log", None)] == pytest.approx(0.0, abs=1e-12)  # every turn exactly x2
    assert got[("placement_ordered_sd_log", None)] > 0
    assert profile.runs_made(6, True, True) == 20 and profile.runs_made(6, False, False) == 7


def test_the_placement_runs_sit_beside_the_timed_runs_in_their_blocks_in_drawn_orders(monkeypatch):
    import os
    import random

    import numpy as np

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    machine = SimulatedMachine(np.random.default_rng(3))
    machine.install(monkeypatch)
    monkeypatch.setattr(profile, "placement_env", lambda mode: {"HEAPCOST_PLACEMENT": mode})
    firsts = set()
    for seed in range(6):
        machine.log.clear()
        values = _values(profile.profile_argv(["/bin/true"], rng=random.Random(seed), placement=True))
        steps = [what for what, _ in machine.log]
        assert steps.count("timed run") == 6 and values[("placement_runs", None)] == 6
        for mode in profile.PLACEMENT_MODES:
            assert steps.count(f"timed run under the placement allocator ({mode})") == 6
        turns = [s for s in steps if s.startswith("timed run")]
        firsts.update(turns[i] for i in range(0, len(turns), 3))
        assert values[("placement_ordered_cpu_s", None)] > 0
    assert len(firsts) == 3  # each of the three comes first in some turn
    plain = _values(profile.profile_argv(["/bin/true"], rng=random.Random(0)))
    assert ("placement_runs", None) not in plain
