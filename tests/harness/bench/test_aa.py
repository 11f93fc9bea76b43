"""The hyperfine A/A benchmark (analysis/harness/bench/aa.py) with hyperfine and the campaign faked: no process
runs. What it must get right: the copy is the preloaded library, both commands run at one scale, the Welch
interval's exclusions are counted per workload, and results.md shows them."""
import math
from types import SimpleNamespace

import numpy as np
import pytest

from analysis.errors import HeapcostError
from analysis.harness.bench import command as bench, aa as bench_aa


class FakeCampaign:
    made: list = []

    def __init__(self, workload, libc, runs_dir, seed):
        self.workload, self.libc, self.seed = workload, libc, seed
        self.resolved = {bench_aa.COPY: SimpleNamespace(allocator=SimpleNamespace(scale=1.0))}
        FakeCampaign.made.append(self)

    def scale_of(self, factor):
        return 0.25 * factor

    def trial(self, aid, wid, factor):
        return SimpleNamespace(argv=[f"/wl/{wid}", repr(self.scale_of(factor))],
                               env=lambda workdir, pad: {"ALLOC": aid})


def fake_hyperfine(shift_by_seed):
    """hyperfine_json whose copy runs `shift_by_seed(seed)` times slower than the baseline (1.0: an honest A/A)."""
    def run(commands):
        seed = FakeCampaign.made[-1].seed
        rng = np.random.default_rng(seed)
        base = rng.lognormal(np.log(0.05), 0.02, 45)
        copy = rng.lognormal(np.log(0.05 * shift_by_seed(seed)), 0.02, 45)
        assert "ALLOC=glibc" in commands[0] and "ALLOC=glibc-copy" in commands[1]
        assert commands[0].split()[-1] == commands[1].split()[-1] == "0.25"  # one scale for both
        return {"results": [{"times": list(base)}, {"times": list(copy)}]}, 4.5
    return run


@pytest.fixture
def faked(monkeypatch, tmp_path):
    FakeCampaign.made = []
    libc = tmp_path / "libc.so.6"
    libc.write_bytes(b"")
    monkeypatch.setattr(bench_aa, "_campaign", FakeCampaign)
    return libc


def test_exclusions_are_counted_per_workload_and_a_biased_copy_shows(faked, monkeypatch):
    # the copy is 5% slower in rounds with an even seed: those intervals exclude one, the others do not
    monkeypatch.setattr(bench_aa, "hyperfine_json", fake_hyperfine(lambda s: 1.05 if s % 2 == 0 else 1.0))
    out = bench_aa.hyperfine_aa(rounds=4, workloads=("small-loop", "dom-churn"), libc=str(faked), seed=1)
    assert out["cells"] == 8 and out["copy"] == f"glibc-copy={faked}"
    assert {m.libc for m in FakeCampaign.made} == {str(faked)}
    biased = [r for r in out["rows"] if r["seed"] % 2 == 0]
    assert all(r["excludes_1"] for r in biased) and len(biased) == 4
    assert out["exclude_1"] == 4 + sum(r["excludes_1"] for r in out["rows"] if r["seed"] % 2)
    assert out["by_workload"]["dom-churn"]["cells"] == 4
    text = "\n".join(bench_aa.format_aa(out))
    assert "| dom-churn | 4 |" in text and "about 5% expected" in text


def test_bad_input_is_a_one_line_error(faked, tmp_path):
    with pytest.raises(HeapcostError, match="--aa-rounds"):
        bench_aa.hyperfine_aa(rounds=0, libc=str(faked))
    with pytest.raises(HeapcostError, match="no such file"):
        bench_aa.hyperfine_aa(rounds=1, libc=str(tmp_path / "missing.so"))


def test_the_running_libc_is_found():
    assert bench_aa.running_libc().endswith("libc.so.6")


def test_the_part_is_stored_under_its_key_and_tabulated(monkeypatch):
    results = {"measured": {}}
    monkeypatch.setattr(bench.os, "getloadavg", lambda: (0.1, 0.0, 0.0))
    row = {"workload": "pareto", "ratio": 1.0, "ci": [0.99, 1.01], "halfwidth": 0.01, "excludes_1": False}
    bench._measure_part(results, "hyperfine-aa", lambda: {"baseline": "glibc", "copy": "glibc-copy=x",
                                                          "tool": "t", **bench_aa.summarize([row])})
    assert results["hyperfine_aa"]["cells"] == 1 and "hyperfine-aa" in results["measured"]
    assert "A/A through hyperfine" in bench.format_results({**results, "cpus": 2})


def test_the_widening_that_makes_the_a_a_intervals_cover_one():
    honest = [{"ratio": 1.01, "ci": [1.01 / 1.02, 1.01 * 1.02]}] * 19 + [{"ratio": 1.05, "ci": [1.04, 1.06]}]
    # 19 of 20 contain 1 with room to spare: the 95th percentile sits between them and the one outlier
    k = bench_aa.widening_for_coverage(honest)
    assert 0.5 < k < 5
    narrow = [{"ratio": math.exp(0.02 * (i % 5 - 2)), "ci": [math.exp(0.02 * (i % 5 - 2) - 0.01),
                                                              math.exp(0.02 * (i % 5 - 2) + 0.01)]} for i in range(40)]
    assert bench_aa.widening_for_coverage(narrow) == pytest.approx(4.0)  # |log r| up to 0.04, half-width 0.01
    lines = bench_aa.calibrated_ratios([{"profile": "quick", "budget_s": 180.0, "halfwidth_ratio": 1.0}], 2.0)
    assert "| quick | 180 s | 0.50 |" in lines
