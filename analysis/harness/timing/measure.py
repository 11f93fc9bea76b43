"""The measurement harness: a campaign of trials, one fresh process each, into data/runs/<run-id>/.

Bias control follows Mytkowicz et al. ("Producing wrong data without doing anything obviously wrong"):
every allocator sees the same environment size (padded) plus a random offset per trial, and
allocators are interleaved in randomized blocks so slow drifts of the machine fall on all of them.
"""
import math
import os
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from analysis.errors import HeapcostError, warn
from analysis.harness.allocators import brought, glibc_build
from analysis.harness.allocators import catalog as catalog_mod
from analysis.harness.process import launcher, machine, quiet
from analysis.harness.process.blocks import parse_seed, run_blocks
from analysis.harness.process.trial import (SpeedTrial, check_preloadable, progress_bar, reference_checksum, run_one,
                                            skipped_row)
from analysis.harness.timing.alternation import SLICE_US
from analysis.harness.timing.lockstep import MIN_PAIRS_TO_STOP
from analysis.harness.workloads import supports
from analysis.paths import RUNS_DIR, portable_path, portable_text

# runstore and the statistics (pandas, scipy: a second to import) are imported where a run is written or
# judged, so that a bad argument is refused in a fraction of that.
PAD_SPREAD = 4096  # bytes of random environment offset per trial (more than a page: all stack alignments)
BASELINE = "glibc"


# what a fleet job dropped from its campaign, as JSON, for the run it starts to record (params `dropped`)
DROPPED_ENV = "HEAPCOST_DROPPED"


def dropped_by_fleet(environ=None) -> list[dict]:
    """What the fleet job that started this run dropped from its campaign because this host lacks it
    (harness/fleet/campaigns.py: [{name, reason}]), or []."""
    import json

    text = (os.environ if environ is None else environ).get(DROPPED_ENV, "")
    try:
        records = json.loads(text) if text else []
    except ValueError:
        raise HeapcostError(f"{DROPPED_ENV} is not the JSON list a fleet job writes") from None
    return [{"name": str(r["name"]), "reason": str(r["reason"])} for r in records
            if isinstance(r, dict) and "name" in r and "reason" in r]


@dataclass(frozen=True)
class Profile:
    name: str
    scale: float
    blocks: int
    warmups: int
    timeout_s: float
    callgrind_scale: float
    description: str


PROFILES = {
    "smoke": Profile("smoke", 0.03, 2, 1, 120, 0.01, "checks the set-up in a few seconds per allocator: too few "
                     "blocks for any result, so the paper leaves a smoke run out"),
    "quick": Profile("quick", 0.25, 5, 1, 300, 0.02, "a first look: under 20 minutes on a 2-core machine"),
    "full": Profile("full", 1.0, 12, 1, 900, 0.05, "the published run: 12 measured blocks after a warm-up"),
}
MODES = ("time", "callgrind")
PROTOCOLS = ("trials", "lockstep")  # lockstep: process pairs for the C workloads that take turns


def _split(names) -> list[str]:
    if names is None:
        return []
    if isinstance(names, str):
        names = names.split(",")
    return [n.strip() for n in names if n and n.strip()]


def select_workloads(names) -> list[str]:
    """Workload ids or groups (perl-cases, seed-003, c, ...); empty: every default workload."""
    from analysis.harness.workloads.builtin import DEFAULT_WORKLOADS, WORKLOAD_GROUPS, WORKLOADS

    wanted = _split(names)
    if not wanted:
        return list(DEFAULT_WORKLOADS)
    unknown = [w for w in wanted if w not in WORKLOADS and w not in WORKLOAD_GROUPS]
    if unknown:
        raise HeapcostError(f"unknown workload(s) {', '.join(unknown)}; valid: {', '.join(WORKLOADS)}; "
                            f"groups: {', '.join(WORKLOAD_GROUPS)}")
    ids = [i for w in wanted for i in (WORKLOAD_GROUPS.get(w) or [w])]
    return list(dict.fromkeys(ids))


def parse_scales(value) -> list[float]:
    """SCALES=1,0.25: multiples of each cell's scale to run (default 1 alone)."""
    items = _split(value) if not isinstance(value, (list, tuple)) else [str(v) for v in value]
    scales = [parse_positive(v, "SCALES") for v in items] or [1.0]
    if len(set(scales)) != len(scales):
        raise HeapcostError(f"SCALES lists a scale twice: {value!r}")
    return scales


def get_profile(name: str) -> Profile:
    if name not in PROFILES:
        raise HeapcostError(f"unknown profile {name!r}; valid: {', '.join(PROFILES)}")
    return PROFILES[name]


def parse_positive(value, name, kind=float):
    if value in (None, ""):
        return None
    try:
        number = kind(value)
    except (TypeError, ValueError):
        raise HeapcostError(f"{name} must be a positive number, not {value!r}") from None
    if not number > 0 or (isinstance(number, float) and not math.isfinite(number)):
        raise HeapcostError(f"{name} must be a positive number, not {value!r}")
    return number


DISASSEMBLY_DIR = "disassembly"  # in the run folder: a library's poison path as text, one file per distinct library


def library_identity(allocator: str, path) -> dict:
    """A library as a run names it on any machine: the allocator's id, the file's name, where it lives
    with the machine's folders written as placeholders, its sha256 (which build it was), the census of its
    code and the file in the run that keeps the instructions around its rep stos and memset calls
    (harness/mechanisms/code_census.py; `disassembly` is absent when objdump cannot read the library)."""
    import hashlib

    from analysis.harness.mechanisms import code_census

    path = Path(path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
    census, text = code_census.examine(path)
    return {"allocator": allocator, "file": path.name, "path": portable_path(str(path)), "sha256": digest,
            "code": census, **({"disassembly": disassembly_name(path.name, digest)} if text else {})}


def library_files(r: catalog_mod.Resolved) -> list:
    """The files run.json identifies for an allocator: its preloaded libraries, its interpreters and a built glibc's
    libraries."""
    a = r.allocator
    return [*r.preload, *r.interpreters.values(), *(glibc_build.library_files(a.id) if a.built_glibc else [])]


def disassembly_name(file: str, sha256: str) -> str:
    """Where a library's excerpt lives in the run: by file name and sha256, so that a library two allocators share
    is kept once and builds of one file name (layout builds) each have their own."""
    return f"{DISASSEMBLY_DIR}/{file}-{sha256[:12]}.txt"


def write_disassemblies(run_dir: Path, libraries) -> list[str]:
    """Each library's excerpt (code_census.examine) into the run folder, unless it is there already (a resumed
    run); the names written. No folder of this machine is in it: it names the library by its file name alone."""
    from analysis.harness.mechanisms import code_census
    from analysis.paths import file_sha256

    written = []
    for path in libraries:
        text = code_census.examine(path)[1]
        if not text:
            continue
        name = disassembly_name(Path(path).name, file_sha256(path))
        target = Path(run_dir) / name
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(portable_text(text))
        os.replace(tmp, target)
        written.append(name)
    return written


class Campaign:
    def __init__(self, profile="quick", allocators=None, workloads=None, extra_allocators=None, mode="time",
                 target_ci=None, budget_min=None, lock_clock=False, seed=None, blocks=None,
                 runs_dir=RUNS_DIR, progress=True, protocol="lockstep", pin="auto", force=None, scales=None,
                 extra_workloads=None, pairs=None, slice_us=None):
        from analysis.harness.workloads.brought import parse_extra_workloads
        from analysis.harness.workloads.builtin import WORKLOAD_GROUPS, WORKLOADS

        self.profile = get_profile(profile)
        if mode not in MODES:
            raise HeapcostError(f"unknown mode {mode!r}; valid: {', '.join(MODES)}")
        self.mode = mode
        self.protocol = protocol or "lockstep"
        if self.protocol not in PROTOCOLS:
            raise HeapcostError(f"unknown protocol {protocol!r}; valid: {', '.join(PROTOCOLS)}")
        self.pin = str(pin if pin not in (None, "") else "auto")
        self.cpu = launcher.parse_pin(self.pin)
        self.all_cpus = sorted(os.sched_getaffinity(0))
        self.force = force
        self.target_ci = parse_positive(target_ci, "TARGET_CI")
        self.budget_min = parse_positive(budget_min, "BUDGET_MIN")
        self.blocks = parse_positive(blocks, "BLOCKS", int) or self.profile.blocks
        # Lockstep cells get at least MIN_PAIRS_TO_STOP pairs unless BLOCKS says otherwise (or the smoke profile, for
        # tests): with 5 pairs the trimmed mean's standard error is too uncertain (run
        # 20261130T160051Z-time-quick, 5 pairs a cell: 2 of its 4 A/A intervals excluded 1)
        self.pair_blocks = (self.blocks if blocks not in (None, "") or self.profile.name == "smoke"
                            else max(self.blocks, MIN_PAIRS_TO_STOP))
        self.lock_clock = str(lock_clock).lower() in ("1", "true", "yes")
        self.seed = None if seed in (None, "") else parse_seed(seed)
        self.runs_dir = Path(runs_dir)
        self.progress = progress
        self.extra_workloads = parse_extra_workloads(extra_workloads, {*WORKLOADS, *WORKLOAD_GROUPS})
        # only extras named: those alone (empty WORKLOADS means every built-in one otherwise)
        self.workload_ids = ([] if self.extra_workloads and not _split(workloads) else select_workloads(workloads))
        self.workload_ids += [w.id for w in self.extra_workloads]
        # every lockstep pair is (baseline, allocator): the baseline joins the selection
        self.resolved = catalog_mod.for_campaign(
            allocators, extra_allocators, check=check_preloadable,
            baseline=BASELINE if self.protocol == "lockstep" and mode == "time" else None)
        self.allocs = [r.allocator for r in self.resolved.values()]
        known = {**WORKLOADS, **{w.id: w for w in self.extra_workloads}}
        self.workloads = {w: known[w] for w in self.workload_ids}
        # A cell is (allocator, workload, scale factor). Allocators run at a reduced scale (slow
        # debugging ones) are compared with the baseline at that same scale, so it runs there too.
        # SCALES runs every cell at several multiples of its scale, so that time = start-up + per-unit cost
        # x scale can be fitted (analysis/stats/scaling.py)
        self.scales = parse_scales(scales)
        self.pairs = [(a.id, w, a.scale * s) for a in self.allocs for w in self.workload_ids for s in self.scales
                      if supports(a, w)]
        if not self.pairs:
            raise HeapcostError("no allocator in the selection can run any selected workload")
        if BASELINE in self.resolved:
            base = self.resolved[BASELINE].allocator
            extra_cells = {(BASELINE, w, f) for a, w, f in self.pairs
                           if f != base.scale and supports(base, w)}
            self.pairs += sorted(extra_cells - set(self.pairs))
        self.extra = extra_allocators or ""
        self.lockstep_cells, self.trial_cells = [], list(self.pairs)
        self.direct_pairs, self.debate_pairs = [], False
        # brought programs that take turns from outside, with each one's window (decided at the first start)
        self.alternation_windows = {}
        # their turns' length (alternation.SLICE_US unless told: `cost-check measure --turn-ms`)
        self.slice_us = (SLICE_US if slice_us in (None, "")
                         else parse_positive(slice_us, "SLICE_US (each turn in microseconds)", int))
        if str(pairs or "").strip() and (self.protocol != "lockstep" or mode != "time"):
            raise HeapcostError("PAIRS pairs allocators in lockstep: it needs PROTOCOL=lockstep and MODE=time")
        if self.protocol == "lockstep" and mode == "time":
            from analysis.harness.timing.lockstep import parse_pairs, split_cells
            self.direct_pairs = parse_pairs(pairs, self.resolved, catalog_mod.load_catalog(), BASELINE)
            self.debate_pairs = str(pairs).strip() == "debates"
            self.lockstep_cells, self.trial_cells = split_cells(self, BASELINE, self.direct_pairs,
                                                                strict=not self.debate_pairs)

    def params(self) -> dict:
        """What makes a run: resuming requires all of it unchanged, the sources of what runs included."""
        p = {"profile": self.profile.name, "mode": self.mode, "allocators": [a.id for a in self.allocs],
             "workloads": self.workload_ids, "extra_allocators": portable_text(self.extra), "blocks": self.blocks,
             **({"extra_workloads": {w.id: w.record() for w in self.extra_workloads}} if self.extra_workloads else {}),
             **({"pair_blocks": self.pair_blocks} if self.pair_blocks != self.blocks else {}),
             "target_ci": self.target_ci, "budget_min": self.budget_min,
             "protocol": self.protocol, "pin": self.pin, "sources_sha256": sources_sha256()}
        if self.seed is not None:
            p["seed"] = self.seed
        if brought.library_records(self.allocs):
            p["brought_libraries"] = brought.library_records(self.allocs)
        if self.scales != [1.0]:
            p["scales"] = self.scales
        if self.direct_pairs:
            p["pairs"] = [list(pair) for pair in self.direct_pairs]
        if self.slice_us != SLICE_US:
            p["slice_us"] = self.slice_us
        dropped = dropped_by_fleet()
        if dropped:
            p["dropped"] = dropped
        return p

    def trial_cpus(self, wid: str):
        """Where a trial of `wid` runs: over every CPU this process may use when its threads or processes run in
        parallel (server, redis, brought programs: pinned to one CPU they would take turns), else on the trial
        CPU; None when trials are not pinned."""
        if self.cpu is None:
            return None
        if getattr(self.workloads[wid], "threads", False) and len(self.all_cpus) > 1:
            return list(self.all_cpus)
        return self.cpu

    def scale_of(self, factor: float) -> float:
        base = self.profile.callgrind_scale if self.mode == "callgrind" else self.profile.scale
        return base * factor

    def allocator_record(self, r: catalog_mod.Resolved) -> dict:
        a = r.allocator
        built = glibc_build.provenance(a.id) if a.built_glibc else {}
        files = library_files(r)
        return {"family": a.family, "description": a.description, "origin": brought.portable_origin(a.origin),
                "preload": [portable_path(p) for p in r.preload],
                "interpreters": {k: portable_path(v) for k, v in r.interpreters.items()},
                "libraries": [library_identity(a.id, p) for p in files],
                **({"build": built} if built else {}),
                "env": a.env, "callgrind_env": a.callgrind_env,
                "expect_malloc": portable_path(r.expect_malloc), "scale_factor": a.scale, "defences": list(a.defences),
                **dict(zip(("build_of", "layout"), catalog_mod.layout_of(a.id))),
                "defences_ref": a.defences_ref}

    def run(self) -> Path:
        from analysis.contract import runstore

        for w in self.workloads.values():
            for variant in sorted({self.resolved[a].allocator.variant for a, ww, _ in self.pairs if ww == w.id}):
                w.prepare(variant)
        packages = [a.origin["package"] for a in self.allocs if a.origin.get("package")]
        packages += ["libc6", "perl", "python3", "sqlite3", "gcc-12", "valgrind", "musl", "redis-server",
                     "redis-tools", "libjemalloc2", "make", "binutils", "flex", "bison", "bc", "libelf-dev"]
        extra = {
            "profile": vars(self.profile),
            "allocators": {aid: self.allocator_record(r) for aid, r in self.resolved.items()},
            "workloads": {w.id: {"kind": w.kind, "description": w.description, "seed": w.seed,
                                 "scale_note": w.base_scale_note, **(w.record() if hasattr(w, "record") else {})}
                          for w in self.workloads.values()},
            # which CPUs each workload's trials ran on: the paper says which ran single-core
            "trial_cpus": {w: self.trial_cpus(w) for w in self.workload_ids},
        }
        with quiet.CampaignLock(self.runs_dir, self.force) as lock:  # refuses on a busy machine
            run_dir, info = runstore.start_run(self.mode, self.profile.name, self.params(), extra, self.runs_dir)
            info.setdefault("quiet", []).append({"utc": runstore.utc_now(), **lock.record})
            with launcher.pinned(self.cpu) as pinning:
                info.setdefault("pinning", []).append({"utc": runstore.utc_now(), **pinning})
                runstore.write_json_atomic(run_dir / "run.json", info)
                return self._run_in(run_dir, info, packages)

    def _run_in(self, run_dir: Path, info: dict, packages) -> Path:
        from analysis.contract import runstore
        from analysis.stats.compare import MIN_RUNS
        from analysis.stats.paired import MIN_PAIRS

        try:
            if not (run_dir / "machine.json").exists():
                runstore.write_json_atomic(run_dir / "machine.json", machine.describe_machine(packages))
            write_disassemblies(run_dir, [f for r in self.resolved.values() for f in library_files(r)])
            info = self._prepare_run(run_dir, info)
            with machine.ClockLock(self.lock_clock) as lock:
                info.setdefault("clock_lock", []).append({"utc": runstore.utc_now(), "outcome": lock.outcome})
                machine.record_clock_lock(run_dir / "machine.json", {"utc": runstore.utc_now(), **lock.record()})
                runstore.write_json_atomic(run_dir / "run.json", info)
                if self.mode == "callgrind":
                    from analysis.harness.mechanisms.callgrind import run_counts
                    notes = run_counts(self, run_dir, info)
                else:
                    notes = self._run_time(run_dir, info)
        except BaseException as exc:
            if not any((run_dir / t).exists() for t in ("trials.csv", "counts.csv", "pairs.csv")):
                runstore.discard_run(run_dir)
            elif isinstance(exc, KeyboardInterrupt):
                runstore.finish_run(run_dir, "interrupted")
            raise
        runstore.finish_run(run_dir, "complete", **notes)
        if self.mode == "time" and max(self.blocks, self.pair_blocks) < min(MIN_RUNS, MIN_PAIRS):
            warn(f"{self.blocks} block(s) a cell check the set-up only: the results need {MIN_RUNS} trials or "
                 f"{MIN_PAIRS} pairs a cell, so the paper leaves run {run_dir.name} out (PROFILE=quick measures)")
        return run_dir

    def _prepare_run(self, run_dir: Path, info: dict) -> dict:
        """Seed, clock-probe calibration, expected checksums: fixed at the first start, reused on resume."""
        from analysis.contract import runstore

        changed = False
        if info.get("seed") is None:
            info["seed"] = self.seed if self.seed is not None else random.SystemRandom().randrange(2**31)
            changed = True
        if not info.get("probe_iters"):
            info["probe_iters"] = launcher.calibrate(0.002)
            info["probe_target_s"] = 0.002
            changed = True
        changed |= self._decide_alternation(info)
        expected = info.setdefault("expected_checksums", {})
        for aid, w, factor in self.pairs:
            variant = self.resolved[aid].allocator.variant
            scale = self.scale_of(factor)
            key = f"{w}|{variant}|{scale:.6g}"
            if key not in expected:
                expected[key] = reference_checksum(self.workloads[w], scale, variant, self.profile.timeout_s)
                changed = True
        if changed:
            runstore.write_json_atomic(run_dir / "run.json", info)
        return info

    def _decide_alternation(self, info: dict) -> bool:
        """Which brought programs take turns from outside (harness/timing/alternation.py): decided by one run of each
        under the baseline at the first start, kept in run.json (`alternation`) and reused on resume; their
        cells move from trials to pairs. True when run.json changed."""
        if self.protocol != "lockstep" or self.mode != "time" or not self.extra_workloads:
            return False
        from analysis.harness.timing import alternation
        from analysis.harness.timing.lockstep import split_cells

        decided = info.setdefault("alternation", {})
        changed = False
        for w in self.extra_workloads:
            cells = [f for a, ww, f in self.pairs if ww == w.id and a == BASELINE]
            if w.id in decided or not cells:
                continue
            if self.cpu is None:
                decided[w.id] = {"applies": False, "why": "trials are not pinned (PIN=none): the two processes "
                                 "of a pair need one CPU", "cpu_s": None, "wall_s": None, "window_s": 0.0}
            else:
                fit = alternation.applies(self.trial(BASELINE, w.id, cells[0]))
                decided[w.id] = {"applies": fit.applies, "why": fit.why, "cpu_s": round(fit.cpu_s, 6),
                                 "wall_s": round(fit.wall_s, 6), "window_s": fit.window_s}
            changed = True
        self.alternation_windows = {w: alternation.window_for_slice(d["window_s"], self.slice_us)
                                    for w, d in decided.items() if d.get("applies")}
        for w in self.alternation_windows:
            info.setdefault("trial_cpus", {})[w] = self.cpu
        self.lockstep_cells, self.trial_cells = split_cells(self, BASELINE, self.direct_pairs,
                                                            strict=not self.debate_pairs)
        return changed

    def trial(self, aid, wid, factor) -> SpeedTrial:
        timeout = min(self.profile.timeout_s, self.resolved[aid].allocator.timeout_s or self.profile.timeout_s)
        return SpeedTrial(self.resolved[aid], self.workloads[wid], self.scale_of(factor), self.env_target, self.mode,
                     timeout)

    @property
    def env_target(self) -> int:
        if not hasattr(self, "_env_target"):
            probe_dir = Path(tempfile.gettempdir()) / "heapcost-trial-XXXXXXXX"
            self._env_target = 0
            sizes = [SpeedTrial(self.resolved[a], self.workloads[w], self.scale_of(f), 0, self.mode).env_size(probe_dir)
                     for a, w, f in self.pairs]
            self._env_target = max(sizes) + 64
        return self._env_target

    def _run_time(self, run_dir: Path, info: dict) -> dict:
        """Timed mode: lockstep pairs for the cells that take turns, trials for the rest (all of them
        under the trials protocol), the budget shared."""
        notes = {}
        if self.lockstep_cells:
            from analysis.harness.timing.lockstep import run_pairs

            notes = run_pairs(self, run_dir, info, baseline=BASELINE, pad_spread=PAD_SPREAD)
        if self.trial_cells and "stopped" not in notes:
            notes = {**notes, **self._run_trials(run_dir, info)}
        return notes

    def _run_trials(self, run_dir: Path, info: dict) -> dict:
        from analysis.contract import runstore
        from analysis.contract.schema import TRIAL_COLUMNS

        trials = runstore.AppendTable(run_dir / "trials.csv", TRIAL_COLUMNS)
        done = trials.rows()
        expected = info["expected_checksums"]
        started = time.monotonic()
        bar = progress_bar(len(self.trial_cells) * (self.blocks + self.profile.warmups), len(done), self.progress)

        def measure(block, warm, cell, pad, done_rows):
            aid, wid, factor = cell
            t = self.trial(aid, wid, factor)
            hopeless = _timed_out_in_warmup(done_rows, aid, wid, t.scale)
            if hopeless is not None and not warm:
                # It cannot finish within the timeout: each further try would cost the timeout.
                row = skipped_row(t, f"timed out in the warm-up block (seq {hopeless})")
            else:
                row = run_one(t, expected.get(f"{wid}|{t.alloc.variant}|{t.scale:.6g}"), info["probe_iters"], pad,
                              cpu=self.trial_cpus(wid))
            return {**row, "run_id": run_dir.name}

        def wider(rows, target):
            live = [(a, w, f) for a, w, f in self.trial_cells
                    if _timed_out_in_warmup(rows, a, w, self.scale_of(f)) is None]
            return pairs_wider_than(rows, target, live, self.scale_of)

        try:
            return run_blocks(self.trial_cells, blocks=self.blocks, warmups=self.profile.warmups, seed=info["seed"],
                              salt=0x5EED, done=done, bar=bar, record=trials.append, measure=measure,
                              draw=lambda rng: rng.randrange(PAD_SPREAD), target=self.target_ci, wider=wider,
                              budget_min=self.budget_min, elapsed_s=float(info.get("elapsed_s", 0)))
        finally:
            bar.close()
            trials.close()
            runstore.add_elapsed(run_dir, info, time.monotonic() - started)


# The harness's C helpers, each beside the module that builds it: the launcher, its resolution check and the child
# I/O they share (process/), the campaigns' drivers (lockstep.c, alternate.c), the poisoning build's check
# (allocators/) and the interference study's load (bench/).
C_HELPERS = ("process/launcher.c", "process/child_io.h", "process/mallocwho.c", "timing/lockstep.c",
             "timing/alternate.c", "allocators/free_poison_check.c", "bench/cpu_load.c")  # under harness/


def sources_sha256() -> str:
    """One hash over the harness's C helpers (C_HELPERS, in name order, as when they lay in one folder), the
    workload sources, the C sources beside their modules in mechanisms/ and workloads/, and the catalogue."""
    import hashlib

    from analysis.paths import CATALOG_PATH, WORKLOADS_DIR

    h = hashlib.sha256()
    here = Path(__file__).resolve().parents[1]  # harness/
    files = sorted((here / p for p in C_HELPERS), key=lambda p: p.name)
    files += sorted(p for p in WORKLOADS_DIR.rglob("*") if p.is_file())
    files += sorted((here / "mechanisms").glob("*.c")) + sorted((here / "workloads").glob("*.c"))
    for path in [*files, CATALOG_PATH, here / "workloads" / "builtin.py"]:
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def pairs_wider_than(rows, target: float, pairs, scale_of) -> list:
    """Cells whose 95% interval for the ratio to the baseline at the same scale is wider than ±target,
    by the published estimator (Yuen's trimmed means of log wall time, without the clock adjustment).
    The baseline's cell gets more runs whenever another cell of its workload and scale does."""
    from analysis.contract.schema import is_usable
    from analysis.stats.estimators import yuen_difference

    logs: dict = {}
    for r in rows:
        if is_usable(r):
            key = (r["allocator"], r["workload"], f"{float(r['scale']):.6g}")
            logs.setdefault(key, []).append(math.log(float(r["wall_s"])))
    wide = set()
    for aid, wid, factor in pairs:
        if aid == BASELINE:
            continue
        scale = f"{scale_of(factor):.6g}"
        x, y = logs.get((aid, wid, scale), []), logs.get((BASELINE, wid, scale), [])
        if len(x) >= 3 and len(y) >= 3:
            lo, hi = yuen_difference(x, y).interval()
            if math.expm1((hi - lo) / 2) <= target:
                continue
        wide.add((aid, wid, factor))
        wide.update((a, w, f) for a, w, f in pairs
                    if a == BASELINE and w == wid and f"{scale_of(f):.6g}" == scale)
    return [p for p in pairs if p in wide]


def _timed_out_in_warmup(rows, aid, wid, scale):
    from analysis.contract.schema import is_warmup

    for r in rows:
        if (r["allocator"] == aid and r["workload"] == wid and is_warmup(r["warmup"])
                and r["status"] == "timeout" and abs(float(r["scale"]) - scale) <= 1e-9 * scale):
            return int(r["seq"])
    return None


def run_campaign(**kwargs) -> Path:
    return Campaign(**kwargs).run()


# ---------------------------------------------------------------------------------------- CLI
def add_arguments(parser):
    parser.add_argument("--profile", default="quick", help=f"one of {', '.join(PROFILES)} (default quick)")
    parser.add_argument("--allocators", default="", help="comma-separated ids (default: all available here)")
    parser.add_argument("--workloads", default="", help="comma-separated ids (default: all)")
    parser.add_argument("--extra-allocators", default="", help="name=/path/lib.so,... (bring your own)")
    parser.add_argument("--extra-workloads", action="append", default=[], help="name=\"command {scale}\" (bring "
                        "your own program; repeatable, or several separated by commas); with --workloads empty, "
                        "these alone")
    parser.add_argument("--mode", default="time", help="time (default) or callgrind")
    parser.add_argument("--target-ci", default=None, help="adaptive: more blocks until every ratio is within ±X")
    parser.add_argument("--budget-min", default=None, help="stop after this many minutes")
    parser.add_argument("--blocks", default=None, help="measured blocks (default: the profile's)")
    parser.add_argument("--lock-clock", default="0", help="1: lock the CPU clock where the machine allows")
    parser.add_argument("--scales", default="", help="multiples of each cell's scale, e.g. 1,0.25 (start-up vs "
                        "per-unit cost); default 1")
    parser.add_argument("--seed", default=None, help="seed of the randomized order (default: random, recorded)")
    parser.add_argument("--protocol", default="lockstep", help="lockstep (default): process pairs on one CPU "
                        "for the C workloads that take turns, pinned trials for the others; or trials: trials only")
    parser.add_argument("--pin", default="auto", help="CPU the trials run on: auto (the last CPU, the "
                        "harness on the others), none, or a number")
    parser.add_argument("--force", action="store_true", help="measure even on a busy machine or beside "
                        "another campaign (recorded in run.json)")
    parser.add_argument("--pairs", default="", help="a:b,c:d: in lockstep, a and b also take turns with each "
                        "other (besides each with the baseline); debates: the contested pairs of debates.toml")
    parser.add_argument("--slice-us", default=None, help="brought programs taking turns from outside: each turn's "
                        "length in microseconds (default 1000, the cost check's)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args) -> int:
    run_dir = run_campaign(profile=args.profile, allocators=args.allocators, workloads=args.workloads,
                           extra_allocators=args.extra_allocators, mode=args.mode, target_ci=args.target_ci,
                           budget_min=args.budget_min, blocks=args.blocks, lock_clock=args.lock_clock,
                           seed=args.seed, progress=not args.no_progress, protocol=args.protocol,
                           pin=args.pin, force="1" if args.force else None, scales=args.scales,
                           extra_workloads=args.extra_workloads, pairs=args.pairs, slice_us=args.slice_us)
    print(run_dir)
    return 0
