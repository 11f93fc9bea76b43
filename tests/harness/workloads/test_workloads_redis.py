"""The request-serving workload: Debian's redis-server under the allocator, driven over the
loopback by redis-benchmark; throughput and latency percentiles recorded beside time."""
import csv
import os
import shutil
from pathlib import Path

import pytest

from analysis.harness.process import launcher
from analysis.harness.timing.measure import Campaign
from analysis.harness.process.trial import clean_env, last_checksum, preload_env, read_who, reported_metrics
from analysis.harness.workloads.builtin import get

needs_redis = pytest.mark.skipif(not (shutil.which("redis-server") and shutil.which("redis-benchmark")),
                                 reason="redis-server / redis-tools not installed (make system-deps)")


def test_metric_lines_become_the_known_trial_columns_only(tmp_path):
    out = tmp_path / "stdout"
    out.write_text("metric requests_per_s=41234.5\nmetric p50_ms=0.5\nmetric p99_ms=nan-ish\n"
                   "metric other=3\nrequests_per_s=9\nchecksum=00ff\n")
    assert reported_metrics(out) == {"requests_per_s": "41234.5", "p50_ms": "0.5"}
    assert reported_metrics(tmp_path / "missing") == {}


def _run_driver(tmp_path, preload):
    w = get("redis")
    w.prepare()
    env = {**clean_env(tmp_path), **preload_env(preload, tmp_path / "who")}
    result = launcher.run(w.argv(0.02), env=env, stdout=tmp_path / "stdout", stderr=tmp_path / "stderr",
                          cwd=tmp_path, timeout=120)
    assert result.status == "exited" and result.exit_code == 0, (tmp_path / "stderr").read_text()[-500:]
    return read_who(tmp_path / "who")


@needs_redis
@pytest.mark.slow
def test_redis_serves_every_request_leaves_no_data_behind_and_its_checksum_depends_on_the_scale_alone(tmp_path):
    sums = []
    for i in range(2):
        d = tmp_path / str(i)
        d.mkdir()
        _run_driver(d, ["libc.so.6"])
        metrics = reported_metrics(d / "stdout")
        assert set(metrics) == {"requests_per_s", "p50_ms", "p99_ms"}
        assert float(metrics["requests_per_s"]) > 0 and float(metrics["p99_ms"]) >= float(metrics["p50_ms"]) > 0
        sums.append(last_checksum(d / "stdout"))
        # no dump.rdb, no append-only file, no log: only the harness's own files
        assert sorted(p.name for p in d.iterdir()) == ["stderr", "stdout", "who"]
    assert sums[0] == sums[1] is not None


@needs_redis
@pytest.mark.slow
def test_redis_links_jemalloc_so_glibc_serves_malloc_only_with_libc_preloaded(tmp_path):
    """Debian's redis-server is linked with jemalloc: without libc.so.6 in LD_PRELOAD the glibc baseline would
    silently measure jemalloc; with it (what the trials do) every process binds glibc's malloc."""
    (tmp_path / "bare").mkdir()
    (tmp_path / "libc").mkdir()
    bare = _run_driver(tmp_path / "bare", [])
    assert any("libjemalloc" in lib for lib, _ in bare)          # the server, malloc from its linked jemalloc
    assert all("libc.so.6" in lib for lib, _ in _run_driver(tmp_path / "libc", ["libc.so.6"]))


@needs_redis
@pytest.mark.slow
@pytest.mark.allocators
def test_a_redis_campaign_records_which_malloc_served_and_the_metrics_under_each_allocator(runs_dir):
    camp = Campaign(profile="smoke", allocators="glibc,jemalloc", workloads="redis", blocks=5, seed=4,
                    runs_dir=runs_dir, progress=False)
    run_dir = camp.run()
    with open(run_dir / "trials.csv") as fh:
        rows = [r for r in csv.DictReader(fh) if r["warmup"] == "0"]
    assert {r["status"] for r in rows} == {"ok"}, {r["reason"] for r in rows}
    libs = {a: {r["malloc_lib"] for r in rows if r["allocator"] == a} for a in ("glibc", "jemalloc")}
    assert all("libc.so.6" in lib for lib in libs["glibc"])
    assert all("libjemalloc" in lib for lib in libs["jemalloc"])
    assert all(float(r["requests_per_s"]) > 0 and float(r["p50_ms"]) > 0 for r in rows)
    if len(os.sched_getaffinity(0)) > 1:
        assert camp.trial_cpus("redis") == sorted(os.sched_getaffinity(0))
