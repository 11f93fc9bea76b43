"""What a fleet profile will do on this machine, said before it starts (`make debates` prints it first).

The plan names this machine and what it is to the dataset, one of four cases: a new processor kind; a new
machine of a known kind (just as valuable: the only way to measure how machines of one kind differ); a
machine the dataset already holds; a known kind whose machine cannot be identified (no boot id to read).
Then each campaign with its estimated machine time and the total, and what this host lacks: every machine
contributes what it can, so a brought library not here or an allocator not built is dropped from its
campaign (one line each: its name, upstream, revision, the published sha256, and the command that prints
its whole build configuration), and a campaign left with no contested pair is skipped. Jobs whose archives
already exist are marked done: Snakemake skips them, so a second `make debates` resumes where the first
stopped.
"""
import json
import os
import re
from pathlib import Path

from analysis.contract.host import machine_groups
from analysis.errors import HeapcostError
from analysis.harness.allocators import brought, catalog
from analysis.harness.allocators.provision import status
from analysis.harness.process.machine import describe_machine
from analysis.paths import REPO, RUNS_DIR, file_sha256
from analysis.harness.fleet.campaigns import Campaign, available, expand, load_profile

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


NEW_KIND, NEW_MACHINE, KNOWN_MACHINE, UNIDENTIFIED = ("new kind", "new machine of a known kind", "known machine",
                                                    "known kind, machine not identified")
CASE_WORDS = {
    NEW_KIND: "the dataset has no run of this processor kind: a new kind, measure it first",
    NEW_MACHINE: "a machine the dataset lacks, of a kind it has: as valuable as a new kind (the only way to "
                 "measure how machines of one kind differ), measure it first",
    KNOWN_MACHINE: "the dataset has runs of this very machine",
    UNIDENTIFIED: "a kind the dataset has, but this machine has no boot id to tell it from the others: its runs "
                  "join the kind with its kernel build as their machine",
}


def this_host(runs_dir: Path = RUNS_DIR, machine: dict = None) -> tuple[str, str]:
    """(this machine's kind and name, which of the four cases it is to the dataset)."""
    machine = machine or describe_machine()
    published = {}
    for path in sorted(Path(runs_dir).glob("*/machine.json")):
        try:
            published[path.parent.name] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    groups = machine_groups({**published, "this machine": machine})
    mine = groups.pop("this machine")
    label = f"{mine.kind}, machine {mine.name} (kernel {mine.kernel})"
    if not any(m.kind == mine.kind for m in groups.values()):
        return label, NEW_KIND
    if not mine.identified:
        return label, UNIDENTIFIED
    known = any(m.id == mine.id for m in groups.values())
    return label, KNOWN_MACHINE if known else NEW_MACHINE


def map_count_lines(c: Campaign, environ) -> list[str]:
    """What the campaign's own check would refuse of the libraries that are here: too few memory mappings for
    hardened_malloc (one line, with the command that raises the limit)."""
    kept, _ = available(c, environ, lambda wanted: {n: (True, "") for n in wanted})
    if kept is None:
        return []
    try:
        extra = expand(kept.params.get("EXTRA_ALLOCATORS", ""), environ)
        brought.check_map_count(catalog.parse_extra(extra, catalog.load_catalog()))
    except HeapcostError as exc:
        return [str(exc)]
    return []


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


def dropped_line(name: str, reason: str, published: dict) -> str:
    """One line for a library this host lacks: its name, upstream and revision, the published build's sha256,
    and the command that prints its whole build configuration."""
    from analysis.harness.allocators.catalog import layout_of

    cat = catalog.load_catalog()
    entry = cat.get(name) or cat.get(layout_of(name)[0])
    origin = entry.origin if entry is not None else {}
    shas = sorted(published.get(name) or ())
    where = f"{origin.get('upstream', '?')} at {origin.get('revision', '?')}" if origin.get("upstream") else \
        (f"Debian source {origin['package']}" if origin.get("package") else "the project's recipe")
    return (f"    dropped {name}: {reason}; {where}; published sha256 "
            f"{', '.join(x[:12] for x in shas) or 'none'}; build configuration: python -m analysis allocators "
            f"--provenance {name}")


def plan(profile: str, environ=None, out_dir: Path = None, runs_dir: Path = RUNS_DIR, machine: dict = None,
         host: str = "local", have=None) -> tuple[list[str], bool]:
    """(the plan's lines, whether any campaign can start). `have`: the catalogue check campaigns.available
    makes (its default: what provisioning says is here)."""
    environ = dict(os.environ if environ is None else environ)
    out_dir = Path(out_dir) if out_dir else REPO / "build" / "fleet" / profile
    campaigns = load_profile(profile)
    label, case = this_host(runs_dir, machine)
    lines = [f"host: {label}: {case}: {CASE_WORDS[case]}"]
    todo = [c for c in campaigns if not (out_dir / host / f"{c.name}.heapcost-run.tar.gz").is_file()]
    kept = {}
    for c in todo:
        kept[c.name] = available(c, environ) if have is None else available(c, environ, have)
    runnable = [c for c in todo if kept[c.name][0] is not None]
    total = sum(c.minutes for c in runnable)
    lines.append(f"profile {profile}: {len(campaigns)} campaigns, {len(campaigns) - len(todo)} done, "
                 f"{len(todo) - len(runnable)} skipped here, about {total} minutes of machine time left, one "
                 f"campaign at a time, alone on the machine")
    published = brought.published_builds(runs_dir)
    seen = set()
    for c in campaigns:
        state = "done" if c not in todo else ("todo" if kept[c.name][0] is not None else "skip")
        lines.append(f"  {state} {c.name:22s} ~{c.minutes:3d} min  {c.about or c.command}")
        if state == "done":
            continue
        if state == "skip":
            lines.append("    skipped: no contested pair is left on this host")
        for d in kept[c.name][1]:
            if d.name not in seen:
                seen.add(d.name)
                lines.append(dropped_line(d.name, d.reason, published))
        for line in map_count_lines(c, environ):
            if line not in seen:
                seen.add(line)
                lines.append(f"    {line}")
    builds = brought_builds(runnable, environ, runs_dir)
    if builds:
        lines += ["brought libraries against the dataset:", *builds]
    ready = bool(runnable) and not any(line.startswith("    vm.max_map_count") for line in lines)
    lines.append("ready: the campaigns marked todo run with what this host has" if ready else
                 "not ready: no campaign can run here as it stands (see above)")
    return lines, ready


def recipe_allocators(profile: str, environ=None) -> list[str]:
    """The allocators of the catalogue a profile's campaigns name that the project's own recipes install or
    build (`make allocators`), in the profile's order: what `make debates` provisions before its plan. A
    campaign that would be skipped here whatever is built (its contested pair needs a library this host was
    not brought) asks for nothing."""
    from analysis.harness.fleet.campaigns import _names

    environ = dict(os.environ if environ is None else environ)
    cat = catalog.load_catalog()
    every = lambda wanted: {n: (True, "") for n in wanted}  # noqa: E731  (as if every recipe built)
    names = [n for c in load_profile(profile) if available(c, environ, every)[0] is not None
             for n in _names(c.params.get("ALLOCATORS", ""))]
    return [n for n in dict.fromkeys(names) if n in cat and cat[n].origin.get("kind") != "brought"]


def add_arguments(parser):
    parser.add_argument("--profile", default="debates", help="a fleet profile (workflow/profiles/NAME.toml)")
    parser.add_argument("--provision", action="store_true",
                        help="first install or build what the project's recipes can of the profile's allocators")


def run(args) -> int:
    if args.provision:
        from types import SimpleNamespace

        from analysis.harness.allocators import provision

        wanted = recipe_allocators(args.profile)
        try:
            if wanted:
                provision.run(SimpleNamespace(only=",".join(wanted), dry_run=False, force=False, no_build=False,
                                              status=False))
        except HeapcostError as exc:  # what could not be built is dropped from its campaign below
            print(f"fleet-plan: {exc}")
    lines, ready = plan(args.profile)
    print("\n".join(lines))
    return 0 if ready else 1
