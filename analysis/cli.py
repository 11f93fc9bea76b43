"""python -m analysis <command>: each command is a module with add_arguments(parser) and run(args)."""
import argparse
import importlib
import sys

from analysis.errors import HeapcostError

# command -> (module, one-line help). Modules are imported only when their command runs.
COMMANDS = {
    "allocators": ("analysis.harness.catalog", "list the allocator catalogue and what is available here"),
    "provision": ("analysis.harness.provision", "install or build every allocator this machine can have"),
    "measure": ("analysis.harness.measure", "run a measurement campaign into data/runs/"),
    "validate": ("analysis.publish.validate", "check a dataset against data/datapackage.json"),
    "compare": ("analysis.stats.compare", "ratios with 95% confidence intervals of each allocator against a baseline"),
    "compare-pairs": ("analysis.stats.paired", "ratios with 95% confidence intervals from lockstep process pairs (pairs.csv)"),
    "probe": ("analysis.harness.probes", "run the heap-misuse probes under allocators"),
    "paper": ("analysis.publish.paper", "generate the paper's figures and numbers from the dataset"),
    "dataset": ("analysis.publish.dataset", "write the versioned dataset archive with its checksum"),
    "notebook": ("analysis.publish.notebook", "run a notebook with papermill, parameters as NAME=VALUE"),
    "bench": ("analysis.harness.bench", "benchmark the measurement protocol against hyperfine"),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis", description=__doc__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    argv = sys.argv[1:] if argv is None else argv
    wanted = argv[0] if argv and not argv[0].startswith("-") else None
    for name, (module_name, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        if name == wanted:
            module = importlib.import_module(module_name)
            module.add_arguments(p)
            p.set_defaults(_run=module.run)
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 0 if args.command is None else 2
    try:
        return int(args._run(args) or 0)
    except HeapcostError as exc:
        print(f"heapcost: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("heapcost: interrupted", file=sys.stderr)
        return 130
