"""The heap-leak attacker of tcache-poison-safelink writes the target the way the allocator stores its links:
against an allocator with plain links (tests/fixtures/raw_list_malloc.c, a stand-in for
glibc-no-safe-linking) a safe-linking-encoded target sent malloc to a garbage address and the crash in the
allocator was credited as caught, so removing safe-linking raised the score."""
import pytest

from analysis.harness.security import probes as P
from analysis.harness.allocators.catalog import parse_extra
from conftest import build_fixture_libs


@pytest.fixture(scope="module")
def raw_list(tmp_path_factory):
    return build_fixture_libs(tmp_path_factory.mktemp("raw-list"), "raw_list_malloc.c", (("rawlist", []),))["rawlist"]


def test_plain_links_are_poisoned_with_the_plain_target(raw_list):
    target = P.target_for(parse_extra(f"rawlist={raw_list}")[0])
    probe = P.PROBES["tcache-poison-safelink"]
    trial = P.run_once(probe, target, P.binary_for(probe.source, target), 64)
    assert trial.outcome == "missed", trial.detail
    assert trial.values.get("encoding") == "raw" and trial.values.get("at_target") == "1"


def test_safe_linked_links_are_poisoned_with_the_encoded_target():
    probe = P.PROBES["tcache-poison-safelink"]
    system = P.Target("glibc", expect_malloc="libc.so.6")
    trial = P.run_once(probe, system, P.binary_for(probe.source, system), 64)
    assert trial.outcome == "missed" and trial.values.get("encoding") == "safe-linking", trial.detail
