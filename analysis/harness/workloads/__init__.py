"""What runs: the built-in workloads (builtin.py), the programs a user brings (brought.py), the programs the cost
model is checked on (cost_programs.py), and the allocation profile of any of them (profile.py, allocprofile.c);
and which workloads a catalogue entry runs (supports, below)."""


def supports(alloc, workload_id: str) -> bool:
    """Whether a catalogue entry runs a workload: its `workloads` patterns ("*", an id or a group of
    builtin.WORKLOAD_GROUPS) read against the workload's id."""
    from analysis.harness.workloads.builtin import WORKLOAD_GROUPS

    for pattern in alloc.workloads:
        if pattern in ("*", workload_id) or workload_id in WORKLOAD_GROUPS.get(pattern, ()):
            return True
    return False
