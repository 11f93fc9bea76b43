"""What runs: the built-in workloads (builtin.py), the programs a user brings (brought.py), the programs the cost
model is checked on (cost_programs.py), and the allocation profile of any of them (profile.py, allocprofile.c)."""
