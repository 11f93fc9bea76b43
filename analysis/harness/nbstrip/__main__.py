"""`python3 -m analysis.harness.nbstrip`: the clean filter, a notebook on stdin, the stripped one on stdout."""
import sys

from analysis.harness.nbstrip import main

sys.exit(main())
