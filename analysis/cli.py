"""heapcost: what memory-allocator hardening costs in speed and memory, and what it buys in security.

Each command below has its own --help. `make help` lists the same work as make targets."""
import argparse
import importlib
import sys
from pathlib import Path

from analysis.errors import HeapcostError

# The commands in the order of the work: stage -> command -> (module, one-line help). Each module has
# add_arguments(parser) and run(args); it is imported only when its command runs (or its --help is asked for),
# so `heapcost --help` starts fast. The internal stage's commands run under make or Snakemake and are left out
# of --help.
STAGES = {
    "set up": {
        "provision": ("analysis.harness.allocators.provision", "install or build every allocator this machine can have"),
        "allocators": ("analysis.harness.allocators.catalog", "list the allocator catalogue and what is available here"),
    },
    "measure": {
        "predict": ("analysis.publish.debates.predictions", "register each debate's prediction for a host not yet measured "
                    "(predictions.toml), before measuring it"),
        "predict-build": ("analysis.publish.debates.long_build", "register seed 001's long build predicted from the short "
                          "build's per-unit cost on each host (predictions.toml), before measuring it"),
        "measure": ("analysis.harness.timing.measure", "run a measurement campaign into data/runs/"),
        "probe": ("analysis.harness.security.probes", "run the heap-misuse probes under allocators"),
        "mechanism": ("analysis.harness.mechanisms.store_sequence", "time the store sequences a poisoning free executes (rep "
                      "stos, a memset call, plain stores) alone on this host, into data/runs/"),
        "profile": ("analysis.harness.workloads.profile", "a program's allocation profile under glibc: calls per size class, reuse, "
                    "mmap and brk, wall time"),
        "cost-check": ("analysis.publish.results.cost_check_command", "the cost model checked out of sample: register predicted "
                       "costs of programs nobody tuned for, measure them, print predicted against measured"),
    },
    "look": {
        "show": ("analysis.publish.results.summary", "one run: its host, what it measured, its cells by status"),
        "compare": ("analysis.stats.compare", "ratios with 95% confidence intervals of each allocator against a baseline"),
        "compare-pairs": ("analysis.stats.paired", "ratios with 95% confidence intervals from lockstep process pairs (pairs.csv)"),
        "cost": ("analysis.publish.results.cost", "a program's predicted cost under each allocator, from its allocation "
                 "profile and the per-call costs measured on each host"),
    },
    "publish": {
        "validate": ("analysis.publish.dataset.validate", "check a dataset against data/datapackage.json"),
        "paper": ("analysis.publish.render.paper", "generate the paper's figures and numbers from the dataset"),
        "dataset": ("analysis.publish.dataset.archive", "write the versioned dataset archive with its checksum"),
    },
    "share": {
        "contribute": ("analysis.publish.dataset.contribute", "pack a run with its machine description and checksums into one archive"),
        "merge": ("analysis.publish.dataset.intake", "add runs (contribution archives or run directories) to the dataset, never overwriting"),
        "fleet-plan": ("analysis.harness.fleet.plan", "say what a fleet profile will run here, how long, and what is missing"),
    },
    "internal": {
        "fleet-job": ("analysis.harness.fleet.campaigns", "run one campaign of a fleet profile and pack its run (a Snakemake job)"),
        "notebook": ("analysis.publish.render.notebook", "run a notebook with papermill, parameters as NAME=VALUE"),
        "bench": ("analysis.harness.bench.command", "benchmark the measurement protocol against hyperfine"),
    },
}
COMMANDS = {name: entry for commands in STAGES.values() for name, entry in commands.items()}
MODULE_PROG = "python -m analysis"


class LiteralHelpFormatter(argparse.HelpFormatter):
    """Help strings are plain text: argparse would %-format them, so "95% intervals" ended in a TypeError.
    None of ours uses %(default)s; defaults are written out in the text."""

    def _expand_help(self, action):
        return self._get_help_string(action)


def invoked_as(argv0: str) -> str:
    """The program name for usage lines: `heapcost` through the entry point, `python -m analysis` as a module."""
    name = Path(argv0 or "").name
    if not name or name in ("__main__.py", "-c") or name.endswith(".py"):
        return MODULE_PROG
    return name


def work_listing() -> str:
    """The commands a user runs, stage by stage in the order of the work (the internal ones left out)."""
    width = max(len(name) for stage, commands in STAGES.items() if stage != "internal" for name in commands)
    lines = ["the work, in order (each command has its own --help):"]
    for stage, commands in STAGES.items():
        if stage == "internal":
            continue
        for i, (name, (_, help_text)) in enumerate(commands.items()):
            lines.append(f"  {stage if i == 0 else '':<9} {name:<{width}}  {help_text}")
    return "\n".join(lines)


class WorkHelpFormatter(LiteralHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """The top-level help: the description and the stage listing as written."""


def build_parser(prog: str, wanted: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command; only `wanted` gets its module's arguments (and a function to run)."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__, epilog=work_listing(),
                                     formatter_class=WorkHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", help=argparse.SUPPRESS)
    for name, (module_name, help_text) in COMMANDS.items():
        command = sub.add_parser(name, description=help_text, formatter_class=LiteralHelpFormatter)
        if name == wanted:
            module = importlib.import_module(module_name)
            module.add_arguments(command)
            command.set_defaults(_run=module.run)
    return parser


def main(argv=None, prog: str | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    prog = prog or invoked_as(sys.argv[0])
    wanted = argv[0] if argv and not argv[0].startswith("-") else None
    parser = build_parser(prog, wanted if wanted in COMMANDS else None)
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 0
    try:
        return int(args._run(args) or 0)
    except HeapcostError as exc:
        print(f"heapcost: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("heapcost: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader stopped early (`| head`): nothing left to say
        sys.stderr.close()
        return 0
