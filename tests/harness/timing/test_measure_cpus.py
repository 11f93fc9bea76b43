"""Threads over both CPUs: the multi-threaded workloads' trials are pinned to every CPU the
campaign may use, the others to the trial CPU, and run.json says which ran where."""
import os
from pathlib import Path

import pytest

from analysis.harness.process import launcher
from analysis.harness.timing.measure import Campaign

CPUS = sorted(os.sched_getaffinity(0))


def _allowed_list(tmp_path, cpu):
    out = tmp_path / f"status-{cpu}"
    result = launcher.run(["/bin/cat", "/proc/self/status"], env={"PATH": "/usr/bin:/bin"}, stdout=out, cpu=cpu)
    assert result.status == "exited" and result.exit_code == 0
    line = next(l for l in out.read_text().splitlines() if l.startswith("Cpus_allowed_list:"))
    return line.split(":", 1)[1].strip()


@pytest.mark.skipif(len(CPUS) < 2, reason="needs two CPUs")
def test_the_launcher_pins_a_child_to_one_cpu_or_to_a_list(tmp_path):
    assert _allowed_list(tmp_path, CPUS[-1]) == str(CPUS[-1])
    assert _allowed_list(tmp_path, CPUS[:2]) in (f"{CPUS[0]}-{CPUS[1]}", f"{CPUS[0]},{CPUS[1]}")


@pytest.mark.skipif(len(CPUS) < 2, reason="needs two CPUs")
def test_threaded_workloads_spread_over_every_cpu_and_the_others_stay_on_the_trial_cpu(tmp_path):
    camp = Campaign(profile="smoke", allocators="glibc", workloads="server,small-loop,sqlite", protocol="trials",
                    runs_dir=tmp_path, progress=False, pin="auto")
    assert camp.trial_cpus("server") == CPUS
    assert camp.trial_cpus("small-loop") == camp.trial_cpus("sqlite") == CPUS[-1]
    unpinned = Campaign(profile="smoke", allocators="glibc", workloads="server", protocol="trials",
                        runs_dir=tmp_path, progress=False, pin="none")
    assert unpinned.trial_cpus("server") is None
