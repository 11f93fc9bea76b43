"""The machines of the published runs (data/runs), as analysis/contract/host.py groups them: none of these runs
recorded a boot id, so each machine is a (processor kind, kernel build) pair, possibly several virtual machines
that booted that kernel on that kind.

The numbers are pinned from the runs as published. A run merged into data/runs later (`merge`) may add a
machine or a kind, or join a kind that was left without its family: this test is then expected to need
updating, to the counts the new runs give."""
import json

from analysis.contract.host import machine_groups
from conftest import REPO

PUBLISHED = REPO / "data" / "runs"
MACHINES_PER_KIND = {
    "AMD EPYC 2450 MHz (25/1/1)": 2,
    "AMD EPYC 2600 MHz (25/17/1)": 4,
    "AMD EPYC 2600 MHz (26/2/1)": 1,
    "AMD EPYC 2600 MHz, family not recorded": 1,
    "Intel(R) Xeon(R) Processor 2600 MHz (6/167/1)": 2,
}


def published_machines():
    """{run id: its Machine} for every published run."""
    return machine_groups({p.parent.name: json.loads(p.read_text()) for p in sorted(PUBLISHED.glob("*/machine.json"))})


def test_each_processor_kind_has_its_pinned_number_of_machines():
    machines = set(published_machines().values())
    counted = {kind: sum(1 for m in machines if m.kind == kind) for kind in {m.kind for m in machines}}
    assert counted == MACHINES_PER_KIND


def test_every_published_machine_is_a_boot_or_a_kind_and_kernel_build():
    machines = set(published_machines().values())
    unnamed = [m for m in machines if not m.identified]
    assert unnamed and all(m.name.startswith("K-") and m.kernel for m in unnamed)
    assert len({(m.kind, m.kernel) for m in unnamed}) == len(unnamed)  # one machine per pair, no more
    assert all(m.name.startswith("M-") for m in machines if m.identified)
