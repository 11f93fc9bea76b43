"""The fleet: campaigns on many machines through Snakemake (workflow/Snakefile), one job per campaign and host.

A fleet profile (workflow/profiles/<name>.toml) lists campaigns; each names its command (measure, callgrind,
probe or mechanism) and the parameters `make measure` / `make probe` / `python -m analysis mechanism` take. A job (`python -m analysis fleet-job`) runs
one campaign into a private runs folder beside its archive, exactly as `make measure` or `make probe` would
(the measure notebook, the probe command), then packs the run it made with `contribute`'s format: the
archive is the job's output, and the workflow's merge rule merges every archive into the dataset. A value
may name an environment variable of the node ($HM: the libraries a user brought there). A resumed job (Slurm
requeue, a second `make fleet`) resumes its unfinished run.

Every machine contributes what it can: before a campaign runs, what this host lacks is dropped from it
(`available`): a brought library whose variable is unset or whose file is not there, an allocator of the
catalogue not built or installed here. The run records what was dropped (run.json's `params.dropped`). A
campaign that measured a contested pair of debates.toml and is left with none is skipped, whole.
"""
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from analysis.contract.runstore import runs_of_kind
from analysis.errors import HeapcostError, read_toml
from analysis.harness.process.quiet import QUIET_LOAD
from analysis.paths import REPO
from analysis.contract.contribution import pack
from analysis.contract.run_check import KINDS

PROFILES_DIR = REPO / "workflow" / "profiles"
# A campaign refuses to start while the 1-minute load average is above QUIET_LOAD. The job before it ends
# with the load near 1-2, which decays below the threshold within a minute or two: a job waits that long
# (at most QUIET_WAIT_S) rather than fail, then lets the campaign judge.
QUIET_WAIT_S = 600
QUIET_POLL_S = 5
# Starting the campaign (a notebook kernel) itself raises the load by a tenth or two before the campaign's
# check reads it: a job waits for this much below the threshold (0.71 > 0.7 once refused a job that had
# waited for 0.7 exactly).
QUIET_HEADROOM = 0.4
COMMANDS = ("measure", "callgrind", "probe", "mechanism", "profile")
MEASURE_PARAMS = ("PROFILE", "ALLOCATORS", "WORKLOADS", "EXTRA_ALLOCATORS", "TARGET_CI", "BUDGET_MIN", "BLOCKS",
                  "LOCK_CLOCK", "SEED", "SCALES", "PROTOCOL", "PIN", "FORCE", "PAIRS")
PROBE_FLAGS = {"ALLOCATORS": "--allocators", "EXTRA_ALLOCATORS": "--extra-allocators", "PROBES": "--probes",
               "RUNS": "--runs", "SIZES": "--sizes", "JOBS": "--jobs", "ALARM": "--alarm"}
MECHANISM_FLAGS = {"SIZES": "--sizes", "BLOCKS": "--blocks"}
PROFILE_FLAGS = {"WORKLOADS": "--workloads", "SCALE": "--scale", "RUNS": "--runs"}
FLAGS = {"probe": PROBE_FLAGS, "mechanism": MECHANISM_FLAGS, "profile": PROFILE_FLAGS}  # commands without make
NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
LAYOUTS = range(2, 6)  # the layout builds a profile's brought variables hold beside each library: _l2 ... _l5


def _with_layouts(*names: str) -> tuple:
    return tuple(n for base in names for n in (base, *(f"{base}_l{i}" for i in LAYOUTS)))


# The brought libraries each variable of the profiles names (`name=<lib>,...`): what a host without the
# variable lacks, library by library.
VARIABLE_NAMES = {
    "HM": _with_layouts("hardened-72fb357", "hardened-light-72fb357"),
    "HM4": ("hardened-72fb357", "hardened-light-72fb357", "hardened-2026062800", "hardened-light-2026062800"),
    "OM": _with_layouts("omalloc-1.128", "omalloc-1.128-getrbyte"),
    "OM4": ("omalloc-1.128", "omalloc-1.128-getrbyte", "omalloc-1.128-getpid", "omalloc-1.128-getrbyte-getpid"),
    "OM_SPLIT": ("omalloc-1.128", "omalloc-1.128-getrbyte", "omalloc-1.128-wideoffset",
                 "omalloc-1.128-getrbyte-narrowoffset"),
    "OMALLOC_1128": ("omalloc-1.128",),
    "OMALLOC_1299": ("perl-omalloc",),
}


@dataclass
class Campaign:
    name: str
    command: str
    params: dict[str, str] = field(default_factory=dict)
    minutes: int = 60  # the Slurm time limit of its job, and the plan's estimate of its machine time
    about: str = ""    # what it measures, for the plan


def profile_names(profiles_dir: Path = PROFILES_DIR) -> list[str]:
    return sorted(p.stem for p in Path(profiles_dir).glob("*.toml"))


def load_profile(name: str, profiles_dir: Path = PROFILES_DIR) -> list[Campaign]:
    from analysis.stats.compare import MIN_RUNS

    path = Path(profiles_dir) / f"{name}.toml"
    if not path.is_file():
        raise HeapcostError(f"no fleet profile {name!r}; known: {', '.join(profile_names(profiles_dir)) or 'none'}")
    data = read_toml(path)
    campaigns = []
    for entry in data.get("campaign", []):
        name, command = str(entry.get("name", "")), str(entry.get("command", ""))
        if not NAME.match(name):
            raise HeapcostError(f"{path.name}: campaign name {name!r} must be lower-case letters, digits and -")
        if command not in COMMANDS:
            raise HeapcostError(f"{path.name}: campaign {name}: command {command!r} is not one of {', '.join(COMMANDS)}")
        params = {str(k): str(v) for k, v in (entry.get("params") or {}).items()}
        allowed = FLAGS.get(command, MEASURE_PARAMS)
        unknown = sorted(set(params) - set(allowed))
        if unknown:
            raise HeapcostError(f"{path.name}: campaign {name}: unknown parameter(s) {', '.join(unknown)} "
                                f"(a {command} campaign takes {', '.join(allowed)})")
        if command == "measure" and params.get("PROTOCOL") == "trials" and params.get("BLOCKS", "").isdigit() \
                and int(params["BLOCKS"]) < MIN_RUNS:
            raise HeapcostError(f"{path.name}: campaign {name}: BLOCKS {params['BLOCKS']} gives each cell fewer "
                                f"trials than the {MIN_RUNS} the results take a cell from: its run would be left out")
        repeats = entry.get("runs", 1)
        if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
            raise HeapcostError(f"{path.name}: campaign {name}: runs must be a whole number of at least 1")
        # `runs = N` asks for N distinct runs of the same campaign: jobs <name>-1 ... <name>-N
        names = [name] if repeats == 1 else [f"{name}-{i}" for i in range(1, repeats + 1)]
        campaigns += [Campaign(n, command, params, int(entry.get("minutes", 60)), str(entry.get("about", "")))
                      for n in names]
    if not campaigns:
        raise HeapcostError(f"{path.name}: no [[campaign]]")
    if len({c.name for c in campaigns}) != len(campaigns):
        raise HeapcostError(f"{path.name}: two campaigns share a name")
    return campaigns


def campaign(profile: str, name: str, profiles_dir: Path = PROFILES_DIR) -> Campaign:
    for c in load_profile(profile, profiles_dir):
        if c.name == name:
            return c
    raise HeapcostError(f"fleet profile {profile!r} has no campaign {name!r}")


def expand(value: str, environ) -> str:
    """$VAR / ${VAR} from the node's environment; an unset variable is an error, not an empty string."""
    def sub(match):
        var = match.group(1) or match.group(2)
        if var not in environ:
            raise HeapcostError(f"the campaign names ${var}, which is not set on this node")
        return environ[var]
    return re.sub(r"\$(?:\{(\w+)\}|(\w+))", sub, value)


@dataclass(frozen=True)
class Dropped:
    name: str    # the allocator's name
    reason: str  # why this host lacks it

    def record(self) -> dict:
        return {"name": self.name, "reason": self.reason}


def _names(value: str) -> list[str]:
    return [n.strip() for n in value.split(",") if n.strip()]


def _strip_layout(name: str) -> str:
    return re.sub(r"_l[0-9]+$", "", name)


def campaign_allocators(c: Campaign, environ=None) -> list[str]:
    """Every allocator name the campaign's parameters give, brought ones included (an unset variable: the
    names it stands for)."""
    environ = os.environ if environ is None else environ
    names = _names(c.params.get("ALLOCATORS", ""))
    for item in _names(c.params.get("EXTRA_ALLOCATORS", "")):
        unset = _unset(item, environ)
        if unset:
            names += [n for n, _ in unset]
            continue
        names += [i.partition("=")[0].strip() for i in _names(expand(item, environ))]
    return list(dict.fromkeys(names))


def _unset(item: str, environ) -> list[tuple[str, str]]:
    """[(allocator name, the unset variable)] of an EXTRA_ALLOCATORS item that names a variable this host has
    not set: `$VAR` stands for the libraries VARIABLE_NAMES gives, `name=$VAR` for `name`."""
    missing = [m.group(1) or m.group(2) for m in re.finditer(r"\$(?:\{(\w+)\}|(\w+))", item)
               if (m.group(1) or m.group(2)) not in environ]
    if not missing:
        return []
    name = item.partition("=")[0].strip() if "=" in item else ""
    if name:
        return [(name, missing[0])]
    return [(n, v) for v in missing for n in VARIABLE_NAMES.get(v, (f"${v}",))]


def has_contested_pair(names, contested) -> bool:
    """Whether both sides of a contested pair (with, without) are among `names`, in some layout build."""
    bases = {_strip_layout(n) for n in names}
    return any(a in bases and b in bases for a, b in contested)


def _contested() -> set:
    from analysis.contract import debates_spec

    return {tuple(pair) for q in debates_spec.load().values() for pair in q.contested}


def _catalogue_ok(names) -> dict:
    from analysis.harness.allocators import catalog
    from analysis.harness.allocators.provision import status

    cat = catalog.load_catalog()
    out = {n: (False, "not in the catalogue") for n in names if n not in cat}
    out.update({i: (ok, why) for i, ok, why in status([cat[n] for n in names if n in cat])})
    return out


def available(c: Campaign, environ=None, catalogue_ok=_catalogue_ok, contested=None) -> tuple[Campaign | None, list]:
    """(the campaign with what this host lacks dropped, or None when it is left with no contested pair it had;
    the Dropped). A brought library is dropped when its variable is unset or its file is not there, an
    allocator of the catalogue when it is not built or installed here."""
    environ = dict(os.environ if environ is None else environ)
    dropped, extra = [], []
    for item in _names(c.params.get("EXTRA_ALLOCATORS", "")):
        unset = _unset(item, environ)
        if unset:
            dropped += [Dropped(n, f"${v} is not set on this host") for n, v in unset]
            continue
        for sub in _names(expand(item, environ)):
            name, _, lib = (x.strip() for x in sub.partition("="))
            if lib and Path(lib).is_file():
                extra.append(f"{name}={lib}")
            else:
                dropped.append(Dropped(name, "its library is not there" if lib else "no library named"))
    wanted = _names(c.params.get("ALLOCATORS", ""))
    state = catalogue_ok(wanted) if wanted else {}
    kept = [n for n in wanted if state.get(n, (True, ""))[0]]
    dropped += [Dropped(n, state[n][1]) for n in wanted if n not in kept]
    if not dropped:
        return c, []
    params = {**c.params, "ALLOCATORS": ",".join(kept), "EXTRA_ALLOCATORS": ",".join(extra)}
    if not params["EXTRA_ALLOCATORS"]:
        params.pop("EXTRA_ALLOCATORS")
    contested = _contested() if contested is None else contested
    before = campaign_allocators(c, environ)
    had = has_contested_pair(before, contested)
    now = kept + [e.partition("=")[0] for e in extra]
    if (had and not has_contested_pair(now, contested)) or not (kept or extra):
        return None, dropped
    return Campaign(c.name, c.command, params, c.minutes, c.about), dropped


def command_line(c: Campaign, python: str, environ) -> list[str]:
    params = {k: expand(v, environ) for k, v in c.params.items()}
    if c.command in FLAGS:
        flags = FLAGS[c.command]
        argv = [python, "-m", "analysis", c.command]
        for key, value in params.items():
            argv += [flags[key], value]
        return argv
    if c.command == "callgrind":
        params["MODE"] = "callgrind"
    return [python, "-m", "analysis", "notebook", "measure", *(f"{k}={v}" for k, v in params.items())]


def complete_runs(runs_dir: Path) -> list[Path]:
    return sorted(r.path for kind in KINDS for r in runs_of_kind(runs_dir, kind) if r.complete)


def run_job(c: Campaign, archive: Path, python: str = sys.executable, environ=None, runner=subprocess.run,
            wait=None) -> Path:
    """Run the campaign into <archive>.d/runs and pack its run as `archive`."""
    environ = dict(os.environ if environ is None else environ)
    archive = Path(archive).absolute()  # the measure notebook's kernel runs in another folder
    work = archive.with_name(archive.name + ".d")
    runs = work / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    before = set(complete_runs(runs))
    c, dropped = available(c, environ)
    if c is None:
        raise HeapcostError(f"campaign {archive.name}: no contested pair is left on this host once "
                            f"{', '.join(d.name for d in dropped)} are dropped: skipped")
    for d in dropped:
        print(f"fleet job: dropped {d.name}: {d.reason}", flush=True)
    argv = command_line(c, python, environ)
    if dropped:
        from analysis.harness.timing.measure import DROPPED_ENV

        environ[DROPPED_ENV] = json.dumps([d.record() for d in dropped])
    if not environ.get("HEAPCOST_FORCE"):
        (wait or wait_for_quiet)()
    print("fleet job:", " ".join(argv), flush=True)
    result = runner(argv, env={**environ, "HEAPCOST_RUNS_DIR": str(runs)}, cwd=REPO)
    if result.returncode != 0:
        raise HeapcostError(f"campaign {c.name} failed (exit {result.returncode}); its log says why")
    made = [r for r in complete_runs(runs) if r not in before]
    if len(made) != 1:
        raise HeapcostError(f"campaign {c.name} left {len(made)} new complete runs in {runs}, expected one")
    packed = pack(made[0], work)
    os.replace(packed, archive)
    return archive


def wait_for_quiet(loadavg=lambda: os.getloadavg()[0], sleep=time.sleep, limit_s: float = QUIET_WAIT_S) -> float:
    """Wait until the 1-minute load average is at most QUIET_LOAD less QUIET_HEADROOM, or limit_s has passed;
    the seconds waited."""
    waited = 0.0
    target = round(QUIET_LOAD - QUIET_HEADROOM, 3)
    while loadavg() > target and waited < limit_s:
        if waited == 0:
            print(f"fleet job: load average {loadavg():.2f}, waiting for it to fall to {target:.1f}", flush=True)
        sleep(QUIET_POLL_S)
        waited += QUIET_POLL_S
    return waited


def add_arguments(parser):
    parser.add_argument("--profile", required=True, help="a fleet profile (workflow/profiles/NAME.toml)")
    parser.add_argument("--campaign", required=True, help="the campaign's name in that profile")
    parser.add_argument("--archive", required=True, help="the archive to write (the job's output)")


def run(args) -> int:
    out = run_job(campaign(args.profile, args.campaign), Path(args.archive))
    print(f"wrote {out}")
    return 0
