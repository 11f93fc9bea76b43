"""The harness: allocators, workloads, trials, lockstep pairs, callgrind, probes, campaigns and the fleet.
It writes data/runs/ and nothing else."""
