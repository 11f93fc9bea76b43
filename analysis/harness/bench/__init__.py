"""`make bench`: the measurement protocol measured against hyperfine (command.py runs the parts; each part is a
module of its own, with the throwaway campaign they share in campaign.py; the interference study's load,
cpu_load.c, beside interference.py). Results: bench/README.md."""
