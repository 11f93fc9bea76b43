"""`python -m analysis COMMAND`: the command line (analysis/cli.py)."""

import sys

from analysis.cli import MODULE_PROG, main

sys.exit(main(prog=MODULE_PROG))
