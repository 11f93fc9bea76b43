"""Every complete run contributes: a user's run with a brought allocator reaches the results."""
import csv

import pytest

from analysis.publish import results, results_writer
from simulated_dataset import TRUE_RATIOS, add_time_run, make_dataset

BYO = "20990102T000000Z-time-quick"
MORE = "20990103T000000Z-time-quick"


@pytest.fixture(scope="module")
def merged(tmp_path_factory):
    data = make_dataset(tmp_path_factory.mktemp("merge"))
    add_time_run(data, BYO, {"glibc": 1.0, "hardened": 1.25}, seed=5, n_blocks=8, profile="quick")
    add_time_run(data, MORE, {"glibc": 1.0, "jemalloc": 0.9}, seed=6, n_blocks=20, profile="quick")
    return data, results.compute(data)


def test_a_brought_allocator_from_its_own_run_is_in_the_results(merged):
    _, res = merged
    geo = res.speed.geomean.set_index("allocator")
    assert geo.loc["hardened", "run_id"] == BYO
    assert geo.loc["hardened", "ci_low"] < 1.25 < geo.loc["hardened", "ci_high"]
    assert set(res.speed.results.loc[res.speed.results["allocator"] == "hardened", "run_id"]) == {BYO}
    assert "hardened" in set(res.memory.geomean["allocator"])


def test_the_run_with_more_measurements_leads_and_the_other_replicates(merged):
    _, res = merged
    geo = res.speed.geomean.set_index("allocator")
    assert geo.loc["jemalloc", "run_id"] == MORE  # 20 blocks against the main run's 12
    assert geo.loc["scudo", "run_id"] == "20990101T000000Z-time-sim"
    rep = res.replication.set_index("allocator")
    assert rep.loc["jemalloc", "run_id"] == "20990101T000000Z-time-sim"
    assert "hardened" not in rep.index and "scudo" not in rep.index
    for name, ratio in TRUE_RATIOS.items():
        if name != "glibc":
            assert geo.loc[name, "ci_low"] < ratio < geo.loc[name, "ci_high"], name


def test_tables_name_the_run_each_row_comes_from(merged, tmp_path):
    _, res = merged
    numbers = results_writer.write_outputs(res, tmp_path)
    labels = {v["run_id"]: k for k, v in numbers["runs"].items()}
    with open(tmp_path / "results_speed_geomean.csv", newline="") as fh:
        geo = {r["allocator"]: r for r in csv.DictReader(fh)}
    assert geo["hardened"]["run"] == labels[BYO]
    assert geo["scudo"]["run"] == labels["20990101T000000Z-time-sim"]
    assert numbers["runs"][labels[BYO]]["leads"] == 1  # the baseline of that run leads nowhere
