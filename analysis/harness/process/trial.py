"""One speed trial: its clean environment, the allocator preloaded with the resolution check, the
launcher run, and the verdict on what it left behind (status, reason, which malloc ran). Shared by the
timed campaign (measure), callgrind mode and, for the environment and resolution check, the probes."""
import shutil
import signal
import struct
import tempfile
from pathlib import Path

from analysis.errors import HeapcostError
from analysis.harness.process import launcher, machine, quiet
from analysis.paths import portable_path, repo_relative

CHECKSUM_PREFIX = "checksum="

ERROR_WORDS = ("error", "abort", "fatal", "fail", "invalid", "corrupt", "cannot", "segmentation")


def first_line(path) -> str:
    """The most telling line of a stderr: the first that reads like an error (allocators print
    banners first), else the last; paths of the repository's files relative to it (a reason must not
    carry the measuring machine's directories)."""
    try:
        lines = [l.strip() for l in Path(path).read_text(errors="replace").splitlines() if l.strip()]
    except OSError:
        return ""
    for line in lines:
        if any(w in line.lower() for w in ERROR_WORDS):
            return repo_relative(line)[:300]
    return repo_relative(lines[-1])[:300] if lines else ""


def preload_env(preload, who: Path) -> dict:
    """LD_PRELOAD of mallocwho (it interposes nothing; it records which object every process bound malloc
    to, in `who`), then the allocator's libraries. mallocwho goes first in every configuration, the
    baseline's included, so that the allocator's library is always loaded right after the same
    instrument: with libc.so.6 preloaded in front of mallocwho, glibc ran dom-churn 1.0% faster than
    glibc itself (lockstep, 40 pairs each: 0.989 [0.987, 0.992]; mallocwho first: 1.001 [0.999, 1.003]),
    a layout effect of the load order, not of the allocator (docs/design.md, "A/A")."""
    libs = [preloadable_path(lib) for lib in [launcher.mallocwho_path(), *preload]]
    return {"LD_PRELOAD": " ".join(libs), "HEAPCOST_WHO": str(who)}


def preloadable_path(lib) -> str:
    """A path LD_PRELOAD can carry. ld.so splits LD_PRELOAD at spaces and colons, so a library in a clone
    whose location has one (`~/my work/heapcost/build/...`) is preloaded through a symbolic link of the same
    file name in the cache (outside the clone), named by a hash of the real path."""
    lib = str(lib)
    if not any(c in lib for c in " :"):
        return lib
    import hashlib
    import os

    from analysis.paths import cache_dir

    link = cache_dir() / "preload" / hashlib.sha256(lib.encode()).hexdigest()[:16] / Path(lib).name
    if any(c in str(link) for c in " :"):
        raise HeapcostError(f"LD_PRELOAD cannot carry {lib} (a space or colon in the path) nor a link in the "
                            f"cache {cache_dir()}: set HEAPCOST_CACHE to a folder without one")
    if not (link.is_symlink() and os.readlink(link) == lib):
        link.parent.mkdir(parents=True, exist_ok=True)
        staged = link.with_name(f".{link.name}.{os.getpid()}")
        staged.unlink(missing_ok=True)
        staged.symlink_to(lib)
        os.replace(staged, link)
    return str(link)


def wrong_malloc(procs: list[tuple[str, str]], expect: str) -> str:
    """'' when every process's malloc came from a library whose path contains `expect`, else why not."""
    if not procs:
        return "no process reported its malloc (preload failed?)"
    wrong = [lib for lib, _ in procs if expect not in lib]
    return f"malloc resolved to {portable_path(wrong[0])}, expected {portable_path(expect)}" if wrong else ""


def read_who(path, final_images_only: bool = False) -> list[tuple[str, str]]:
    """(malloc library, Perl_malloced_size definer) for each process of a trial. With final_images_only,
    a process image that exec'd another in the same process (a wrapper: valgrind's launcher script and
    binary under callgrind) is left out: only the last line of each pid counts."""
    out = {}
    try:
        text = Path(path).read_text()
    except OSError:
        return []
    for i, line in enumerate(text.splitlines()):
        parts = line.split("\t")
        fields = dict(f.split("=", 1) for f in parts[2:] if "=" in f)
        key = parts[0] if final_images_only else i
        out.pop(key, None)
        out[key] = (fields.get("malloc", "?"), fields.get("Perl_malloced_size", "-"))
    return list(out.values())


def is_static_elf(path) -> bool:
    """True for an ELF executable without PT_INTERP, i.e. one that no LD_PRELOAD can reach."""
    with open(path, "rb") as fh:
        head = fh.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:
            return False
        phoff, = struct.unpack_from("<Q", head, 32)
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        fh.seek(phoff)
        table = fh.read(phentsize * phnum)
    return all(struct.unpack_from("<I", table, i * phentsize)[0] != 3 for i in range(phnum))


def clean_env(workdir: Path) -> dict:
    """The environment every workload process starts from: small, fixed, hash seeds pinned."""
    return {"PATH": "/usr/bin:/bin", "LANG": "C", "LC_ALL": "C", "HOME": str(workdir), "TMPDIR": str(workdir),
            "PERL_HASH_SEED": "0", "PYTHONHASHSEED": "0"}


def check_preloadable(resolved) -> None:
    """A user's library must really preload and provide malloc; the loader would only warn otherwise."""
    with tempfile.TemporaryDirectory(prefix="heapcost-check-") as tmp:
        who = Path(tmp) / "who"
        env = {"PATH": "/usr/bin:/bin", **preload_env(resolved.preload, who)}
        err = Path(tmp) / "err"
        result = launcher.run(["/bin/true"], env=env, stderr=err, timeout=30)
        libs = read_who(who)
        alloc = resolved.allocator
        if result.status != "exited" or result.exit_code != 0:
            raise HeapcostError(f"allocator {alloc.id}: /bin/true fails under it: {first_line(err)}")
        if wrong_malloc(libs, resolved.expect_malloc):
            why = first_line(err) or wrong_malloc(libs, resolved.expect_malloc)
            raise HeapcostError(f"allocator {alloc.id}: library cannot be preloaded as malloc ({why})")


def loader_argv(loader, argv: list, workload=None) -> list:
    """The argv of a program run on a built glibc: that build's loader in front (it honours LD_PRELOAD, so
    mallocwho still reports). A workload whose processes start other programs through their own ELF
    interpreter (the compiler's cc1, as, ld) cannot be attributed to the build and is refused."""
    if not loader:
        return list(argv)
    refused = getattr(workload, "loader_refused", "")
    if refused:
        raise HeapcostError(f"workload {workload.id} cannot run on a built glibc: {refused}")
    return [*map(str, loader), *map(str, argv)]


class SpeedTrial:
    """Everything needed to run one (allocator, workload) cell at a scale, and to judge the result."""

    def __init__(self, resolved, workload, scale, env_target, mode="time", timeout_s=None):
        self.timeout_s = timeout_s
        self.resolved = resolved
        self.alloc = resolved.allocator
        self.workload = workload
        self.scale = scale
        self.mode = mode
        self.env_target = env_target
        interps = dict(resolved.interpreters)
        self.argv = workload.argv(scale, self.alloc.variant, interps)
        if self.alloc.variant == "musl" and not is_static_elf(self.argv[0]):
            raise HeapcostError(f"{workload.id}: {self.argv[0]} is not a static musl binary")
        self.argv = loader_argv(getattr(resolved, "loader", ()), self.argv, workload)

    def base_env(self, workdir: Path) -> dict:
        env = clean_env(workdir)
        env.update(self.workload.env(self.scale))
        alloc_env = self.alloc.callgrind_env if self.mode == "callgrind" and self.alloc.callgrind_env else self.alloc.env
        env.update(alloc_env)
        if self.alloc.variant != "musl":
            # a program linked with an allocator of its own (redis-server: jemalloc) gets libc.so.6 preloaded after
            # the allocator's libraries, so that under glibc glibc's malloc is found before the linked one
            after = ["libc.so.6"] if getattr(self.workload, "libc_first", False) else []
            env.update(preload_env([*self.resolved.preload, *after], workdir / "who"))
        return env

    def env_size(self, workdir: Path) -> int:
        return sum(len(k) + len(v) + 2 for k, v in self.base_env(workdir).items())

    def env(self, workdir: Path, offset: int) -> dict:
        env = self.base_env(workdir)
        pad = max(0, self.env_target - self.env_size(workdir)) + offset
        env["HEAPCOST_PAD"] = "x" * pad
        return env

    def judge(self, result, workdir: Path, expected_checksum: str | None) -> tuple[str, str, str]:
        """(status, reason, malloc_lib) from the launcher's result and what the trial left behind."""
        err = first_line(workdir / "stderr")
        if result.status == "spawn-failed":
            return "spawn-failed", repo_relative(result.error or "exec failed"), ""
        if result.status == "timeout":
            return "timeout", f"killed after the {self.timeout_s:g} s timeout", ""
        if self.alloc.variant == "musl":
            malloc_lib = "musl-static"
        else:
            procs = read_who(workdir / "who", final_images_only=self.mode == "callgrind")
            wrong = wrong_malloc(procs, self.resolved.expect_malloc)
            if wrong:
                return "wrong-malloc", (err if not procs and err else wrong), portable_path(procs[0][0]) if procs else ""
            malloc_lib = portable_path(procs[0][0])
            if self.alloc.expect_perl_malloc is not None and "perl" in self.workload.kind:
                has = any(perl != "-" for _, perl in procs)
                if has != self.alloc.expect_perl_malloc:
                    return "wrong-malloc", f"perl's own malloc {'present' if has else 'absent'}, expected the opposite", malloc_lib
                malloc_lib += " + perl malloc" if has else ""
        if result.status == "signaled":
            name = signal.Signals(result.signal).name if result.signal in signal.Signals._value2member_map_ else result.signal
            return "crashed", f"signal {name}" + (f": {err}" if err else ""), malloc_lib
        if result.exit_code != 0:
            return "failed", f"exit {result.exit_code}" + (f": {err}" if err else ""), malloc_lib
        got = last_checksum(workdir / "stdout")
        if got is None and expected_checksum is None and not getattr(self.workload, "checksum_required", True):
            return "ok", "", malloc_lib  # a brought program that prints no checksum, under glibc either
        if got is None:
            return "bad-checksum", "no checksum line in the output", malloc_lib
        if expected_checksum is not None and got != expected_checksum:
            return "bad-checksum", f"checksum {got} != expected {expected_checksum}", malloc_lib
        return "ok", "", malloc_lib


METRIC_PREFIX = "metric "
# trial columns a workload may report on its stdout: a server's throughput and latencies, a build's peak memory
METRICS = ("requests_per_s", "p50_ms", "p99_ms", "tree_peak_rss_kb", "tree_peak_anon_kb")


def reported_metrics(path) -> dict:
    """The `metric <name>=<number>` lines a workload printed (a server's throughput and latencies, a build's
    peak memory), for the trial columns of METRICS; a name not among them, or a value that is not a number, is
    ignored. A whole number is written whole (a peak in KiB), any other to six significant digits."""
    out = {}
    try:
        lines = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return out
    for line in lines:
        name, sep, value = line.strip().removeprefix(METRIC_PREFIX).partition("=")
        if line.startswith(METRIC_PREFIX) and sep and name in METRICS:
            try:
                number = float(value)
            except ValueError:
                continue
            out[name] = str(int(number)) if number.is_integer() and abs(number) < 1e15 else f"{number:.6g}"
    return out


def last_checksum(path) -> str | None:
    try:
        lines = [l.strip() for l in Path(path).read_text(errors="replace").splitlines() if l.strip()]
    except OSError:
        return None
    if lines and lines[-1].startswith(CHECKSUM_PREFIX):
        return lines[-1][len(CHECKSUM_PREFIX):]
    return None


def reference_checksum(workload, scale, variant, timeout) -> str | None:
    """The checksum a workload prints at this scale under plain glibc (musl: its own static build); None for a
    brought program that prints none."""
    with tempfile.TemporaryDirectory(prefix="heapcost-ref-") as tmp:
        tmp = Path(tmp)
        env = {**clean_env(tmp), **workload.env(scale)}
        argv = workload.argv(scale, variant, {})
        result = launcher.run(argv, env=env, stdout=tmp / "stdout", stderr=tmp / "stderr", cwd=tmp, timeout=timeout)
        got = last_checksum(tmp / "stdout")
        if result.status != "exited" or result.exit_code != 0 or (got is None and getattr(workload, "checksum_required", True)):
            raise HeapcostError(f"workload {workload.id} fails under plain glibc at scale {scale:g}: "
                                f"{result.status} {result.exit_code} {first_line(tmp / 'stderr')}")
        return got


def skipped_row(trial: "SpeedTrial", why: str) -> dict:
    from analysis.contract import runstore

    return {"workload": trial.workload.id, "allocator": trial.alloc.id, "scale": f"{trial.scale:.6g}",
            "status": "skipped", "reason": why, "env_pad": 0, "started_utc": runstore.utc_now()}


def run_one(trial: SpeedTrial, expected: str | None, probe_iters: int, pad: int, wrapper=(), cpu=None) -> dict:
    """One trial (pinned to `cpu` when given: one CPU, or a list of CPUs its threads spread over), with what the
    rest of the machine did meanwhile."""
    from analysis.contract import runstore

    workdir = Path(tempfile.mkdtemp(prefix="heapcost-trial-", dir=tempfile.gettempdir()))
    try:
        env = trial.env(workdir, pad)
        started = runstore.utc_now()
        load = machine.loadavg1()
        before = quiet.read_cpu()
        result = launcher.run(trial.argv, env=env, stdout=workdir / "stdout", stderr=workdir / "stderr",
                              cwd=workdir, timeout=trial.timeout_s, probe_iters=probe_iters, wrapper=wrapper,
                              cpu=cpu)
        after = quiet.read_cpu()
        status, reason, malloc_lib = trial.judge(result, workdir, expected)
        # the launcher's clock probes spin on the trial's CPU too: its own work, not interference
        own = result.user_s + result.sys_s + (result.probe_before_s or 0.0) + (result.probe_after_s or 0.0)
        # a trial spread over several CPUs shares them with the harness: judged as an unpinned one
        return {**quiet.interference(before, after, own, result.wall_s, cpu if isinstance(cpu, int) else None),
            "workload": trial.workload.id, "allocator": trial.alloc.id, "scale": f"{trial.scale:.6g}",
            "status": status, "reason": reason, "exit_code": result.exit_code, "signal": result.signal,
            "wall_s": f"{result.wall_s:.6f}", "user_s": f"{result.user_s:.6f}", "sys_s": f"{result.sys_s:.6f}",
            "maxrss_kb": result.maxrss_kb, "minflt": result.minflt, "majflt": result.majflt,
            "nvcsw": result.nvcsw, "nivcsw": result.nivcsw,
            "clock_probe_s": _fmt(result.clock_probe_s), "probe_before_s": _fmt(result.probe_before_s),
            "probe_after_s": _fmt(result.probe_after_s), "malloc_lib": malloc_lib, "env_pad": pad,
            "loadavg1": load, "started_utc": started,
            **(reported_metrics(workdir / "stdout") if status == "ok" else {}),
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _fmt(x):
    return None if x is None else f"{x:.9f}"


def progress_bar(total, initial, mode):
    """mode: True/"auto" (a widget in a notebook, text in a terminal), "text" (papermill logs it), False."""
    if mode in (False, None, "", "none", "0"):
        return NoBar(total)
    if mode == "text":
        from tqdm.std import tqdm
    else:
        from tqdm.auto import tqdm
    return tqdm(total=total, initial=initial, unit="trial", desc="trials", smoothing=0.05, mininterval=2)


class NoBar:
    def __init__(self, total):
        self.total = total

    def update(self, n):
        pass

    def refresh(self):
        pass

    def close(self):
        pass


def side_arguments(side: str, trial: SpeedTrial, workdir: Path, pad: int) -> list[str]:
    """One process's --x-stdout, --x-stderr, --x-cwd and --x-env arguments, as both drivers of a pair take them
    (lockstep.c, alternate.c)."""
    args = [f"--{side}-stdout", str(workdir / "stdout"), f"--{side}-stderr", str(workdir / "stderr"),
            f"--{side}-cwd", str(workdir)]
    for key, value in trial.env(workdir, pad).items():
        if "\0" in f"{key}{value}":
            raise HeapcostError(f"environment variable {key!r} contains a NUL byte")
        args += [f"--{side}-env", f"{key}={value}"]
    return args
