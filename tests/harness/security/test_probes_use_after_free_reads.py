"""What poisoning buys: the stale-data read right after free (uaf-read) and the read of the
next owner's data once the block is handed out again (uaf-read-reused) are two probes. Before the split one
probe fell back to the second when the first found poison, so glibc with perturb (which fills freed blocks)
was `missed` just like glibc, and its claimed free-poison was never credited."""
from analysis.harness.security import probes as P
from analysis.harness.allocators.catalog import load_catalog
from analysis.stats import security as S


def run(probe_id, alloc_id, size=64):
    target = P.target_for(load_catalog()[alloc_id])
    probe = P.PROBES[probe_id]
    return P.run_once(probe, target, P.binary_for(probe.source, target), size)


def test_poisoning_stops_the_stale_read_and_not_the_read_after_reuse():
    assert run("uaf-read", "glibc").outcome == "missed"
    poisoned = run("uaf-read", "glibc-perturb")
    assert poisoned.outcome == "mitigated" and poisoned.values.get("old_bytes") == "0", poisoned.detail
    reused = run("uaf-read-reused", "glibc-perturb")
    assert reused.outcome == "missed" and reused.values.get("mode") == "reused", reused.detail
    assert int(reused.values["new_owner_bytes"]) > 0


def test_the_two_reads_are_weighed_and_only_the_stale_one_shows_poisoning():
    assert {"uaf-read", "uaf-read-reused"} <= set(S.DEFAULT_WEIGHTS) & set(S.EXPLOITATION_WEIGHTS)
    assert S.DEFENCE_PROBES["free-poison"][0] == ("uaf-read",)


def test_an_entropy_probe_runs_at_its_own_arguments_and_a_misuse_probe_at_each_size():
    from analysis.harness.security.probes import PROBES
    assert PROBES["reuse-entropy"].argv(None) == []
    assert PROBES["reuse-entropy-page"].argv(None) == ["4096", "512", "256"]
    assert PROBES["placement-entropy-page"].argv(None) == ["65536"]
    assert PROBES["overflow-16"].argv(64) == ["64", "16"]
