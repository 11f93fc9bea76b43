"""What a fleet profile will do on this machine, said before it starts (`make debates` prints it first).

The plan names this host and whether the dataset already holds it (a new host is the reason to run the
debates' profile at all), each campaign with its estimated machine time and the total, and whatever is
missing before the first campaign could start: an environment variable a campaign names that is unset, an
allocator of the catalogue not built or installed here, a brought library whose file is not there. Each
missing thing gets one line saying how to bring it. Jobs whose archives already exist are marked done:
Snakemake skips them, so a second `make debates` resumes where the first stopped.
"""
import json
import os
import re
from pathlib import Path

from analysis.contract.host import host_groups, host_label
from analysis.errors import HeapcostError
from analysis.harness.allocators import brought, catalog
from analysis.harness.allocators.provision import status
from analysis.harness.machine import describe_machine
from analysis.paths import REPO, RUNS_DIR, file_sha256
from analysis.harness.fleet.campaigns import Campaign, expand, load_profile

ENV_HELP = {
    "HM": "hardened_malloc 72fb357 builds (hardened-72fb357=<lib>,hardened-72fb357_l2=<lib>,...,"
          "hardened-light-72fb357=<lib>,...): build GrapheneOS/hardened_malloc at 72fb357 by hand",
    "HM4": "the four plain hardened_malloc builds (72fb357 and 2026062800, default and light)",
    "OM": "OpenBSD malloc 1.128 builds, as shipped and with seed 003's diff reversed, in every layout "
          "(omalloc-1.128=<lib>,omalloc-1.128_l2=<lib>,...,omalloc-1.128-getrbyte=<lib>,...)",
    "OM4": "the four OpenBSD malloc 1.128 builds (as shipped, getrbyte, and each with getpid per call)",
    "OM_SPLIT": "the four builds that take seed 003's patch apart (omalloc-1.128, -getrbyte, -wideoffset, -getrbyte-narrowoffset)",
    "OMALLOC_1128": "the library of omalloc-1.128 (OpenBSD lib/libc/stdlib/malloc.c 1.128, built by hand)",
    "OMALLOC_1299": "the library of omalloc-1.299 (OpenBSD lib/libc/stdlib/malloc.c 1.299, built by hand)",
}
VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


def variables(c: Campaign) -> list[str]:
    """The environment variables a campaign's parameters name, in order of first mention."""
    found = [m.group(1) or m.group(2) for v in c.params.values() for m in VARIABLE.finditer(v)]
    return list(dict.fromkeys(found))


def this_host(runs_dir: Path = RUNS_DIR, machine: dict = None) -> tuple[str, bool]:
    """(a label of this machine's host kind, whether a published run comes from the same kind)."""
    machine = machine or describe_machine()
    published = {}
    for path in sorted(Path(runs_dir).glob("*/machine.json")):
        try:
            published[path.parent.name] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    groups, kinds = host_groups({**published, "this machine": machine})
    mine = groups["this machine"]
    known = any(fp == mine for run, fp in groups.items() if run != "this machine")
    return host_label(kinds[mine]), known


def missing_allocators(c: Campaign, environ) -> list[str]:
    """One line per allocator the campaign cannot have here yet, saying how to bring it."""
    try:
        extra = expand(c.params.get("EXTRA_ALLOCATORS", ""), environ)
    except HeapcostError:
        extra = ""  # the unset variable is reported on its own
    lines = []
    cat = catalog.load_catalog()
    for item in filter(None, (p.strip() for p in extra.split(","))):
        name, _, lib = item.partition("=")
        if not Path(lib.strip()).is_file():
            lines.append(f"{name.strip()}: brought library {lib.strip() or '(no path)'} does not exist")
    try:  # what the campaign's own check would refuse: too few memory mappings for hardened_malloc
        brought.check_map_count(catalog.parse_extra(
            ",".join(i for i in extra.split(",") if i.strip() and Path(i.partition("=")[2].strip()).is_file()), cat))
    except HeapcostError as exc:
        lines.append(str(exc))
    wanted = [n.strip() for n in c.params.get("ALLOCATORS", "").split(",") if n.strip()]
    unknown = [n for n in wanted if n not in cat]
    lines += [f"{n}: not in the catalogue" for n in unknown]
    for alloc_id, ok, why in status([cat[n] for n in wanted if n in cat]):
        if not ok:
            lines.append(f"{alloc_id}: {why}")
    return lines


def brought_builds(campaigns, environ, runs_dir: Path) -> list[str]:
    """A line per brought library the campaigns name: the published build, or another."""
    published = brought.published_builds(runs_dir)
    lines, seen = [], set()
    for c in campaigns:
        try:
            extra = expand(c.params.get("EXTRA_ALLOCATORS", ""), environ)
        except HeapcostError:
            continue
        for item in filter(None, (p.strip() for p in extra.split(","))):
            name, _, lib = (x.strip() for x in item.partition("="))
            if name in seen or not Path(lib).is_file():
                continue
            seen.add(name)
            lines.append("  " + brought.build_report(name, file_sha256(Path(lib)), published))
    return lines


def plan(profile: str, environ=None, out_dir: Path = None, runs_dir: Path = RUNS_DIR, machine: dict = None,
         host: str = "local") -> tuple[list[str], bool]:
    """(the plan's lines, whether every campaign can start)."""
    environ = dict(os.environ if environ is None else environ)
    out_dir = Path(out_dir) if out_dir else REPO / "build" / "fleet" / profile
    campaigns = load_profile(profile)
    label, known = this_host(runs_dir, machine)
    lines = [f"host: {label}: " + ("the dataset has runs of this host kind" if known else
                                   "the dataset has no run of this host kind: a new host, measure it first")]
    todo = [c for c in campaigns if not (out_dir / host / f"{c.name}.heapcost-run.tar.gz").is_file()]
    total = sum(c.minutes for c in todo)
    lines.append(f"profile {profile}: {len(campaigns)} campaigns, {len(campaigns) - len(todo)} done, "
                 f"about {total} minutes of machine time left, one campaign at a time, alone on the machine")
    ready = True
    seen = set()
    for c in campaigns:
        done = c not in todo
        lines.append(f"  {'done' if done else 'todo'} {c.name:22s} ~{c.minutes:3d} min  {c.about or c.command}")
        if done:
            continue
        for var in variables(c):
            if var not in environ and var not in seen:
                seen.add(var)
                ready = False
                lines.append(f"    missing ${var}: {ENV_HELP.get(var, 'set it to what the profile says')}")
        for line in missing_allocators(c, environ):
            if line not in seen:
                seen.add(line)
                ready = False
                lines.append(f"    missing {line}")
    builds = brought_builds(todo, environ, runs_dir)
    if builds:
        lines += ["brought libraries against the dataset:", *builds]
    lines.append("ready: every campaign can start" if ready else
                 "not ready: bring what is missing above, then run the same command again")
    return lines, ready


def add_arguments(parser):
    parser.add_argument("--profile", default="debates", help="a fleet profile (workflow/profiles/NAME.toml)")


def run(args) -> int:
    lines, ready = plan(args.profile)
    print("\n".join(lines))
    return 0 if ready else 1
