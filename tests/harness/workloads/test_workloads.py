"""The speed workloads: each builds, runs at a small scale, and prints a checksum that depends on
the scale only (not on the allocator, its settings, or the libc a C workload was linked with)."""
import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from analysis.harness.workloads import builtin as wl
from analysis.errors import HeapcostError

pytestmark = [pytest.mark.allocators, pytest.mark.slow]

CHECKSUM = re.compile(r"^checksum=[0-9a-f]{8,}$")
SMALL = 0.02
# a second scale whose work differs from SMALL's for every workload (compile counts whole files)
OTHER = {"compile": 0.25}
OTHER_DEFAULT = 0.1

JEMALLOC_CANDIDATES = ["/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
                       "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"]


def other_allocator_env():
    """LD_PRELOAD of an allocator that is not glibc's (the project provisions jemalloc)."""
    for lib in JEMALLOC_CANDIDATES:
        if Path(lib).is_file():
            return {"LD_PRELOAD": lib}
    pytest.fail("neither libjemalloc2 nor libtcmalloc-minimal4 is installed (apt-get install libjemalloc2)")


def run(workload, scale, variant="glibc", extra_env=None, quiet=False):
    """Run as the harness does: a bare environment, an empty scratch directory as cwd and TMPDIR."""
    with tempfile.TemporaryDirectory(prefix="heapcost-wltest-") as tmp:
        env = {"PATH": "/usr/bin:/bin", "LANG": "C", "LC_ALL": "C", "HOME": tmp, "TMPDIR": tmp}
        env.update(workload.env(scale))
        env.update(extra_env or {})
        proc = subprocess.run(workload.argv(scale, variant, {}), env=env, cwd=tmp, capture_output=True,
                              text=True, timeout=120)
        left = os.listdir(tmp)
    assert proc.returncode == 0, f"{workload.id} exited {proc.returncode}: {proc.stderr[-500:]}"
    assert left == [], f"{workload.id} left files behind in its scratch directory: {left}"
    if quiet:
        assert proc.stderr == "", f"{workload.id} wrote to stderr: {proc.stderr[-500:]}"
    lines = proc.stdout.strip().splitlines()
    assert lines, f"{workload.id} printed nothing"
    assert CHECKSUM.match(lines[-1]), f"{workload.id}: last line {lines[-1]!r} is no checksum line"
    return lines[-1]


@pytest.fixture(scope="module")
def prepared():
    done = set()

    def prepare(workload, variant="glibc"):
        if (workload.id, variant) not in done:
            workload.prepare(variant)
            done.add((workload.id, variant))
        return workload
    return prepare


# ---- the registry ----------------------------------------------------------------------------

def test_registry_has_the_designed_workloads():
    assert set(wl.DEFAULT_WORKLOADS) == {"perl-strcat", "compile", "dom-churn", "pow2-churn", "small-loop",
                                         "server", "pareto", "sqlite", "python"}
    assert set(wl.WORKLOADS) == {*wl.DEFAULT_WORKLOADS, "pow2-ladder", "build", "linux-build", "redis",
                                 *(f"perl-{c}" for c in wl.PERL_CASES), *wl.CALL_WORKLOADS,
                                 *wl.HELD_WORKLOADS, *wl.SAME_SIZE_WORKLOADS}
    for wid, w in wl.WORKLOADS.items():
        assert w.id == wid
        assert w.kind in ("c", "perl", "python", "program")
        assert w.description and w.base_scale_note
        if w.seed is not None:
            assert re.fullmatch(r"00[0-4]_[0-9a-f]{16}\.txt", w.seed)
    seeds = sorted(w.seed for w in wl.WORKLOADS.values() if w.seed and w.default)
    assert [s[:3] for s in seeds] == ["000", "001", "002", "003", "004"]


def test_groups_cover_every_workload_once():
    assert wl.WORKLOAD_GROUPS["c"] == ["dom-churn", "pow2-churn", "small-loop", "server", "pareto"]
    assert wl.WORKLOAD_GROUPS["perl"] == ["perl-strcat"]
    assert wl.WORKLOAD_GROUPS["python"] == ["python"]
    kinds = ("c", "perl", "python", "program")
    grouped = [i for g in kinds for i in wl.WORKLOAD_GROUPS[g]]
    assert sorted(grouped) == sorted(wl.DEFAULT_WORKLOADS)
    # the seeds' own cases are selected by name or group, never by "every workload"
    assert wl.WORKLOAD_GROUPS["perl-cases"] == [f"perl-{c}" for c in wl.PERL_CASES]
    assert wl.WORKLOAD_GROUPS["seed-003"] == ["pow2-churn", "pow2-ladder"]
    assert wl.WORKLOAD_GROUPS["seed-001"] == ["compile", "build"]
    assert wl.WORKLOAD_GROUPS["servers"] == ["server", "redis"]
    rest = {w for w in wl.WORKLOADS if w not in wl.DEFAULT_WORKLOADS}
    assert rest == {*wl.WORKLOAD_GROUPS["perl-cases"], "pow2-ladder", "build", "linux-build", "redis",
                    *wl.WORKLOAD_GROUPS["calls"], *wl.HELD_WORKLOADS, *wl.SAME_SIZE_WORKLOADS}
    assert wl.WORKLOAD_GROUPS["held-blocks"] == ["calls-32768-lifo", *wl.HELD_WORKLOADS]
    assert all(wl.WORKLOADS[w].slots == wl.HELD_SLOTS for w in wl.HELD_WORKLOADS)
    # the one-size cells: the LIFO cell of every class and every held cell again, each block the class's upper bound
    assert wl.WORKLOAD_GROUPS["same-size"] == list(wl.SAME_SIZE_WORKLOADS)
    same = {(w.size_class, w.slots) for w in wl.SAME_SIZE_WORKLOADS.values() if w.same_size and w.pattern == "lifo"}
    assert same == {(c, wl.CALL_SLOTS) for c in wl.CALL_CLASSES} | {(c, wl.HELD_SLOTS) for c in wl.HELD_CLASSES}
    assert not any(w.same_size for g in ("calls", "held-blocks") for w in map(wl.get, wl.WORKLOAD_GROUPS[g]))
    assert wl.expand(["*"]) == wl.DEFAULT_WORKLOADS
    for gid in kinds:
        assert all(wl.WORKLOADS[i].kind == gid for i in wl.WORKLOAD_GROUPS[gid])


def test_expand_resolves_ids_groups_and_star():
    assert wl.expand(["*"]) == wl.DEFAULT_WORKLOADS
    assert wl.expand(["perl-cases"])[-1] == "perl-array"
    assert wl.expand(["c"]) == wl.WORKLOAD_GROUPS["c"]
    assert wl.expand(["perl", "sqlite", "perl-strcat"]) == ["perl-strcat", "sqlite"]
    with pytest.raises(HeapcostError, match="unknown workload or group 'nope'.*valid: \\*, c, perl"):
        wl.expand(["nope"])
    with pytest.raises(HeapcostError, match="unknown workload 'x'"):
        wl.get("x")


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "abc", None, 1e9])
def test_bad_scale_is_a_user_error(bad):
    with pytest.raises(HeapcostError, match="scale"):
        wl.WORKLOADS["small-loop"].argv(bad, "glibc", {})


def test_scale_arg_round_trips():
    for s in (0.02, 1.0, 1e-5, 0.3333333333333333):
        assert float(wl.scale_arg(s)) == s


@pytest.mark.parametrize("wid", ["perl-strcat", "python", "sqlite", "compile"])
def test_only_c_workloads_have_a_musl_build(wid):
    with pytest.raises(HeapcostError, match="variant 'musl'.*valid here: glibc"):
        wl.WORKLOADS[wid].argv(SMALL, "musl", {})


def test_unknown_variant_is_a_user_error():
    with pytest.raises(HeapcostError, match="variant 'klibc'.*glibc, musl"):
        wl.WORKLOADS["pareto"].argv(SMALL, "klibc", {})


def test_interpreters_are_taken_from_the_allocator_and_checked(tmp_path):
    perl = wl.WORKLOADS["perl-strcat"]
    assert perl.argv(SMALL, "glibc", {})[0] == "/usr/bin/perl"
    assert perl.argv(SMALL, "glibc", None)[0] == "/usr/bin/perl"
    fake = tmp_path / "perl"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert perl.argv(SMALL, "glibc", {"perl": str(fake)})[0] == str(fake)
    with pytest.raises(HeapcostError, match="perl interpreter /nonexistent/perl"):
        perl.argv(SMALL, "glibc", {"perl": "/nonexistent/perl"})
    py = wl.WORKLOADS["python"]
    argv = py.argv(SMALL, "glibc", {})
    assert argv[0] == "/usr/bin/python3"
    assert "-E" not in argv and "-I" not in argv  # they would make python ignore PYTHONMALLOC
    assert py.env(SMALL)["PYTHONMALLOC"] == "malloc"


def test_sqlite_script_is_deterministic_and_ends_with_the_checksum_select():
    a, b = wl.sqlite_script(0.05), wl.sqlite_script(0.05)
    assert a == b
    assert a != wl.sqlite_script(0.1)
    last = a.strip().splitlines()[-1]
    assert last.startswith("SELECT 'checksum=' ||")


# ---- running them --------------------------------------------------------------------------------

# the calls workloads are one source built 20 ways: one of each pattern stands for the others; linux-build runs in
# test_workloads_linux.py, only where its source is already cached (it is never fetched by the suite)
RUN_HERE = [w for w in wl.WORKLOADS if w != "linux-build" and (w not in wl.CALL_WORKLOADS or w in (
    "calls-16-lifo", "calls-1024-fifo", "calls-32768-random", "calls-262144-pages", "calls-processes"))]


@pytest.mark.parametrize("wid", RUN_HERE)
def test_checksum_depends_on_scale_not_on_allocator(wid, prepared):
    w = prepared(wl.WORKLOADS[wid])
    reference = run(w, SMALL, quiet=True)
    assert run(w, SMALL, extra_env=other_allocator_env()) == reference
    # glibc filling fresh and freed memory with a byte: catches reads of uninitialized memory
    assert run(w, SMALL, extra_env={"MALLOC_PERTURB_": "165"}) == reference
    assert run(w, OTHER.get(wid, OTHER_DEFAULT)) != reference


@pytest.mark.parametrize("wid", [w for w in RUN_HERE if wl.WORKLOADS[w].kind == "c"])
def test_musl_build_is_static_and_agrees_with_glibc(wid, prepared):
    w = prepared(prepared(wl.WORKLOADS[wid], "glibc"), "musl")
    binary = Path(w.argv(SMALL, "musl", {})[0])
    head = subprocess.run(["readelf", "-lW", str(binary)], capture_output=True, text=True).stdout
    assert "INTERP" not in head, f"{binary} is dynamically linked"
    assert run(w, SMALL, "musl") == run(w, SMALL, "glibc")


def test_compile_uses_whole_files_smallest_first(prepared):
    w = prepared(wl.WORKLOADS["compile"])
    argv = w.argv(SMALL, "glibc", {})
    files = argv[argv.index("--", argv.index("--") + 1) + 1:]
    src = Path(argv[4])
    sizes = [(src / f).stat().st_size for f in files]
    assert sizes == sorted(sizes) and len(files) >= w.full_files
    with pytest.raises(HeapcostError, match="asks compile for"):
        w.argv(1000, "glibc", {})


def test_the_build_reads_the_source_and_leaves_it_untouched(prepared):
    """make -j2 over lua5.4's whole source from the scratch folder: the fetched tree gains no file, and a
    scale above one whole build is refused."""
    w = prepared(wl.WORKLOADS["build"])
    argv = w.argv(SMALL, "glibc", {})
    src = Path(next(a for a in argv if a.startswith("SRC=")).split("=", 1)[1])
    before = sorted(p.name for p in src.iterdir())
    assert run(w, 0.1) != run(w, SMALL)
    assert sorted(p.name for p in src.iterdir()) == before
    assert "-j2" not in argv and argv[2] == "2" and argv[4].endswith("lua_build.mk")
    with pytest.raises(HeapcostError, match="more than one whole build"):
        w.argv(2, "glibc", {})


def test_compile_needs_prepare_before_argv(tmp_path, monkeypatch):
    monkeypatch.setattr(wl, "BUILD_DIR", tmp_path)
    with pytest.raises(HeapcostError, match="compile is not prepared.*prepare"):
        wl.WORKLOADS["compile"].argv(SMALL, "glibc", {})


def test_perl_strcat_agrees_under_a_perl_with_its_own_malloc():
    from analysis.paths import cache_dir
    perls = sorted(cache_dir().glob("allocators/perl-mymalloc-*/bin/perl"))
    if not perls:
        pytest.skip("no perl-mymalloc built in the cache yet (python -m analysis provision)")
    w = wl.WORKLOADS["perl-strcat"]
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", **w.env(SMALL)}
    out = subprocess.run(w.argv(SMALL, "glibc", {"perl": str(perls[-1])}), env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-500:]
    assert out.stdout.strip().splitlines()[-1] == run(w, SMALL)


def test_a_perl_case_runs_that_case_alone_and_an_unknown_case_is_refused():
    """The seed's cases one by one: a case's checksum differs from the whole benchmark's and from the
    other cases'; a case perl_strcat.pl does not know ends with a one-line error."""
    sums = {c: run(wl.WORKLOADS[f"perl-{c}"], SMALL) for c in wl.PERL_CASES}
    assert len(set(sums.values())) == len(wl.PERL_CASES)
    assert run(wl.WORKLOADS["perl-strcat"], SMALL) not in sums.values()
    argv = wl.WORKLOADS["perl-array"].argv(SMALL, "glibc", {})
    proc = subprocess.run([*argv[:-1], "nope"], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and proc.stderr.startswith("unknown case 'nope'; valid:")


@pytest.mark.parametrize("wid", ["perl-strcat", "dom-churn"])
def test_below_one_round_the_work_still_shrinks_with_the_scale(wid, prepared):
    """Slow debugging allocators get scales like 0.001: the round must shrink, not stay whole."""
    w = prepared(wl.WORKLOADS[wid])
    tiny = run(w, 0.001)
    assert run(w, 0.001, extra_env=other_allocator_env()) == tiny
    assert run(w, 0.002) != tiny


# ---- the per-call workloads ------------------------------------------------------------------

def test_the_calls_workloads_cover_every_class_and_pattern_the_pages_and_the_processes():
    calls = wl.WORKLOAD_GROUPS["calls"]
    assert len(calls) == len(wl.CALL_CLASSES) * 3 + 7
    assert {(wl.WORKLOADS[i].size_class, wl.WORKLOADS[i].cell_pattern) for i in calls} == \
        {*((c, p) for c in wl.CALL_CLASSES for p in ("lifo", "fifo", "random")), (wl.CALL_PAGES[0], "pages"),
         (0, "processes"), (wl.CALL_GROW[0], "grow"), (wl.CALL_GROW_PAGE[0], "grow-page"),
         *((c[0], "grow-small") for c in (wl.CALL_GROW_SMALL_SLAB, wl.CALL_GROW_SMALL, wl.CALL_GROW_SMALL_LARGE))}
    assert all(not wl.WORKLOADS[i].default for i in calls)
    # each grow cell's description names its block as the cell's size: 128 KiB, 1 MiB, 4 MiB
    assert [f"to {words}," in wl.WORKLOADS[f"calls-{c[0]}-grow-small"].description
            for c, words in ((wl.CALL_GROW_SMALL_SLAB, "128 KiB"), (wl.CALL_GROW_SMALL, "1 MiB"),
                             (wl.CALL_GROW_SMALL_LARGE, "4 MiB"))] == [True] * 3


@pytest.mark.parametrize("name, cell", [(f"calls-{wl.CALL_GROW[0]}-grow", wl.CALL_GROW),
                                        (f"calls-{wl.CALL_GROW_PAGE[0]}-grow-page", wl.CALL_GROW_PAGE),
                                        (f"calls-{wl.CALL_GROW_SMALL[0]}-grow-small", wl.CALL_GROW_SMALL),
                                        (f"calls-{wl.CALL_GROW_SMALL_LARGE[0]}-grow-small", wl.CALL_GROW_SMALL_LARGE),
                                        (f"calls-{wl.CALL_GROW_SMALL_SLAB[0]}-grow-small", wl.CALL_GROW_SMALL_SLAB)])
def test_calls_grow_grows_one_block_by_realloc_a_step_each(tmp_path, name, cell):
    """Counted by the profile's shim: each step one growing realloc of the cell's step more, the block freed when
    it reaches the cell's largest block; in steps of a page or more every grow needs more pages than the block had,
    in smaller steps only the one that crosses into a page (one in 4096 / step); each grow the block did not move
    for added the pages it crossed into."""
    import subprocess

    from analysis.harness.workloads.profile import allocprofile_path, parse_shim_report

    w = wl.WORKLOADS[name]
    scale = {wl.CALL_GROW: 0.1, wl.CALL_GROW_PAGE: 0.02, wl.CALL_GROW_SMALL: 0.5, wl.CALL_GROW_SMALL_LARGE: 0.3,
             wl.CALL_GROW_SMALL_SLAB: 0.1}[cell]
    steps, per_block = w.pairs_at(scale), cell[0] // cell[2]
    report = tmp_path / "profile.txt"
    done = subprocess.run(w.argv(scale, "glibc", {}), capture_output=True, text=True, timeout=60,
                          env={"LD_PRELOAD": str(allocprofile_path()), "HEAPCOST_PROFILE": str(report)})
    assert done.returncode == 0, done.stderr

    def total(quantity):
        return sum(v for (q, c), v in got.items() if q == quantity and c is not None)

    got = parse_shim_report(report.read_text())
    assert got[("realloc_from_null", None)] == -(-steps // per_block)  # each block's first step
    grows = steps - got[("realloc_from_null", None)]
    sizes = [cell[2] * (1 + i % per_block) for i in range(steps)]  # the size each step asks for
    crossing = sum(1 for i, n in enumerate(sizes) if i % per_block and -(-n // 4096) > -(-(n - cell[2]) // 4096))
    assert total("realloc_grown") == grows and total("realloc_grown_pages") == crossing
    assert (crossing == grows) == (cell[2] >= 4096) and 0 < crossing
    in_place, moved = total("realloc_grown_in_place"), total("realloc_grown_moved")
    if crossing == grows:
        assert in_place == crossing - moved
    else:  # a move may come on a grow that crossed no page
        assert crossing - moved <= in_place <= crossing
    assert total("realloc_grown_in_place_pages") == in_place * max(1, cell[2] // 4096)


def test_calls_processes_starts_its_steps_as_processes_each_making_its_pairs(tmp_path):
    """Counted by the profile's shim, which every process reports to when it exits: pairs_at(scale) children
    besides the parent, each making CALL_CHILD_PAIRS malloc+free pairs of 16..1024 bytes; the parent itself two (the children's
    environment, stdout's buffer)."""
    import subprocess

    from analysis.harness.workloads.profile import allocprofile_path

    w = wl.WORKLOADS["calls-processes"]
    scale = 0.005
    report = tmp_path / "profile.txt"
    done = subprocess.run(w.argv(scale, "glibc", {}), capture_output=True, text=True, timeout=60,
                          env={"LD_PRELOAD": str(allocprofile_path()), "HEAPCOST_PROFILE": str(report)})
    assert done.returncode == 0, done.stderr
    counts = {}
    for line in report.read_text().splitlines():
        quantity, size_class, value = line.split()
        counts[(quantity, size_class)] = counts.get((quantity, size_class), 0) + float(value)
    steps = w.pairs_at(scale)
    assert counts[("processes", "-")] == steps + 1
    assert sum(v for (q, _), v in counts.items() if q == "malloc_calls") == wl.CALL_CHILD_PAIRS * steps + 2
    assert sum(v for (q, _), v in counts.items() if q == "free_calls") >= wl.CALL_CHILD_PAIRS * steps


@pytest.mark.parametrize("scale", [1.0, 0.25, 1e-9, 0.3333333333333333])
def test_pairs_at_a_scale_are_what_the_program_does(scale):
    w = wl.WORKLOADS["calls-64-lifo"]
    assert w.pairs_at(scale) == max(1, int(w.pairs_full * scale + 0.5))
    assert wl.WORKLOADS["calls-64-lifo"].pairs_at(1.0) == wl.CALL_CLASSES[64]


@pytest.mark.parametrize("wid", ["calls-16-lifo", "calls-256-fifo", "calls-32768-random", "calls-262144-pages"])
def test_a_calls_program_does_its_pairs_whatever_the_allocator(wid, tmp_path):
    """Counted by the profile's own shim: the program makes pairs_at(scale) allocations of its class (plus the
    working set's first fill), each freed; its checksum does not depend on the allocator (jemalloc, if here)."""
    import subprocess

    from analysis.harness.workloads.profile import allocprofile_path

    w = wl.WORKLOADS[wid]
    scale = 0.0005 if w.pattern != "pages" else 0.01
    argv = w.argv(scale, "glibc", {})
    shim = allocprofile_path()
    report = tmp_path / "profile.txt"
    done = subprocess.run(argv, env={"LD_PRELOAD": str(shim), "HEAPCOST_PROFILE": str(report)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    counts = {}
    for line in report.read_text().splitlines():
        quantity, size_class, value = line.split()
        counts[(quantity, size_class)] = counts.get((quantity, size_class), 0) + float(value)
    first_fill = 0 if w.pattern == "pages" else 256
    expected = w.pairs_at(scale) + first_fill
    assert counts.get(("malloc_calls", str(w.size_class)), 0) == expected
    assert counts.get(("free_calls", str(w.size_class)), 0) == expected
    plain = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert plain.stdout == done.stdout and plain.stdout.startswith("checksum=")
