"""The host panel and the clock-lock comparison in the paper: shown when the simulated dataset has runs from
more than one host (or with the clock both locked and not), absent when it has one."""
import json
import math
import shutil

import pytest

from analysis.contract.host import host_fingerprint
from analysis.publish.results import hosts, comparisons, writer
from analysis.publish.render import paper
from analysis.paths import REPO
from paper_checks import with_supplement_text, generated_csv, pdf_text, squash
from simulated_dataset import TRUE_RATIOS, add_time_run, make_dataset

pytestmark = pytest.mark.paper

# a second kind of host: another CPU and kernel, where every allocator is 8% dearer against glibc than the truth
OTHER_HOST = {"kernel": "6.1.0-test", "memory_kb": 16_000_000,
              "cpu": {"model": "Intel(R) Xeon(R) Test", "logical_cpus": 4, "cpuinfo_mhz": [2100.0],
                      "hypervisor_flag": False, "nominal_mhz": 2100.0}}
SHIFT = 1.08


def build_paper(data, out):
    """results -> generated/ -> PDF text, as `python -m analysis paper` does for the results notebook."""
    generated = out / "generated"
    generated.mkdir(parents=True)
    for name in paper.SOURCES:
        shutil.copyfile(REPO / "paper" / name, out / name)
    writer.write_outputs(comparisons.compute(data), generated)
    paper.write_paper_numbers(data, generated, ["results"])
    pdf, _ = paper.compile_paper(out)
    return squash(with_supplement_text(pdf))


@pytest.fixture(scope="module")
def one_host(tmp_path_factory):
    root = tmp_path_factory.mktemp("onehost")
    data = make_dataset(root, probed=TRUE_RATIOS)  # probe rows of the measured allocators
    return data, build_paper(data, root / "paper")


@pytest.fixture(scope="module")
def two_hosts(tmp_path_factory):
    root = tmp_path_factory.mktemp("twohosts")
    data = make_dataset(root, probed=TRUE_RATIOS)  # probe rows of the measured allocators
    shifted = {a: r * (SHIFT if a != "glibc" else 1.0) for a, r in TRUE_RATIOS.items()}
    run = add_time_run(data, "20990102T000000Z-time-sim", shifted, seed=12, n_blocks=12, machine=OTHER_HOST)
    described = json.loads((run / "machine.json").read_text())
    described["clock_lock"] = [{"requested": True, "locked": True, "outcome": "locked: boost off",
                                "settings": {}, "crash_recovery": None}]
    (run / "machine.json").write_text(json.dumps(described))
    return data, build_paper(data, root / "paper")


def test_one_host_says_nothing_about_hosts(one_host):
    data, text = one_host
    numbers = json.loads((data.parent / "paper" / "generated" / "results_numbers.json").read_text())
    assert numbers["hosts"]["count"] == 1 and not numbers["clock_lock"]["both"]
    for absent in ("kinds of host", "random effect", "Clock locked or not", "locked / not locked"):
        assert squash(absent) not in text, absent
    assert squash("The measurements ran on one machine") in text


def test_two_hosts_get_a_panel_per_host_and_pooled(two_hosts):
    data, text = two_hosts
    out = data.parent / "paper"
    numbers = json.loads((out / "generated" / "results_numbers.json").read_text())
    assert numbers["hosts"]["count"] == 2 and numbers["hosts"]["runs"] == [1, 1]
    assert squash("kinds of host") in text and squash("Intel(R) Xeon(R) Test 2100 MHz") in text
    assert squash("The measurements ran on one machine") not in text
    per_host = generated_csv(out, "results_hosts.csv")
    pooled = generated_csv(out, "results_hosts_pooled.csv")
    assert {r["allocator"] for r in pooled} == set(TRUE_RATIOS) - {"glibc"}
    other = host_fingerprint(OTHER_HOST)
    for r in per_host:
        truth = TRUE_RATIOS[r["allocator"]] * (SHIFT if r["group"] == other else 1.0)
        assert float(r["ci_low"]) <= truth <= float(r["ci_high"]), r
        assert squash(r["allocator"] + r["host"] + r["runs"] + r["cells"] + r["display"]) in text
    for r in pooled:
        geometric = TRUE_RATIOS[r["allocator"]] * math.sqrt(SHIFT)
        assert float(r["ci_low"]) <= geometric <= float(r["ci_high"]), r
        assert squash(r["display"] + r["tau_percent"]) in text


def test_the_clock_is_compared_only_where_runs_differ_in_it(two_hosts):
    data, text = two_hosts
    out = data.parent / "paper"
    numbers = json.loads((out / "generated" / "results_numbers.json").read_text())
    assert numbers["clock_lock"]["both"] and numbers["clock_lock"]["runs_locked"] == 1
    assert squash("Clock locked or not") in text
    for r in generated_csv(out, "results_clock_lock.csv"):
        # the locked run is the other host's, 8% dearer: locked / not locked covers it
        assert float(r["contrast_low"]) <= SHIFT <= float(r["contrast_high"]), r
        assert squash(r["allocator"] + r["cells"] + r["contrast_display"]) in text


def test_clock_state_reads_new_and_old_runs(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"clock_lock": [{"outcome": "locked 2 CPUs to performance"}]}))
    assert hosts.clock_state(run) == hosts.LOCKED
    (run / "run.json").write_text(json.dumps({"clock_lock": [{"outcome": "could not lock: cpufreq is not exposed"}]}))
    assert hosts.clock_state(run) == hosts.NOT_LOCKED
    (run / "machine.json").write_text(json.dumps({"clock_lock": [{"locked": True}, {"locked": False}]}))
    assert hosts.clock_state(run) == hosts.NOT_LOCKED  # one session without the lock


def test_host_groups_are_named_by_kind_and_machine_and_never_share_a_name(tmp_path):
    """Two runs of one kind and kernel that recorded no boot are one machine (K-...) even where their memory
    differs: their fingerprints' groups would read the same, so they are one group. Two boots of one kind and
    host are one group naming both machines (M-...)."""
    def machine(memory_kb, machine_id=None, kernel="6.1.0-test"):
        described = {**OTHER_HOST, "kernel": kernel, "memory_kb": memory_kb}
        return {**described, "machine_id": machine_id} if machine_id else described

    runs = {"a": machine(16_000_000), "b": machine(32_000_000), "c": machine(16_000_000, "0123456789ab", "6.2"),
            "d": machine(16_000_000, "ba9876543210", "6.2")}
    for run, described in runs.items():
        (tmp_path / run).mkdir()
        (tmp_path / run / "machine.json").write_text(json.dumps(described))
    assert host_fingerprint(runs["a"]) != host_fingerprint(runs["b"])
    host_of, labels, _ = hosts.run_groups(tmp_path, list(runs))
    assert host_of["a"] == host_of["b"] and host_of["c"] == host_of["d"] != host_of["a"]
    assert len(set(labels.values())) == len(labels) == 2
    kind = "Intel(R) Xeon(R) Test 2100 MHz, family not recorded"
    assert labels[host_of["a"]].startswith(f"{kind}, machine K-")
    assert labels[host_of["c"]] == f"{kind}, machines M-012345, M-ba9876"
