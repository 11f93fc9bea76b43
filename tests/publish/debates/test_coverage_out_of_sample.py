"""The out-of-sample checks of the intervals (publish/debates/coverage.py) and the next-machine registration
(predictions.compute_next_machine, next_machine_check) on synthetic runs with a known truth."""
import math

import numpy as np
import pandas as pd

from analysis.publish.debates import coverage, pool, predictions
from analysis.stats import prediction
from synthetic_machines import machine_runs


def dataset(rng, tau=0.01, kinds=("K1", "K2"), machines=3):
    frames = []
    for k, kind in enumerate(kinds):
        for m in range(machines):
            frames.append(machine_runs(kind, f"M-{kind}{m}", 1.05 * math.exp(rng.normal(0, tau)), rng))
    return pd.concat(frames, ignore_index=True)


def test_leave_one_machine_out_checks_every_machine_of_every_kind_with_two_or_more():
    rng = np.random.default_rng(2)
    runs = dataset(rng)
    details = coverage.leave_one_machine_out(runs, {}, {("x / y", "w")})
    assert len(details) == 6 and set(details["left_out"]) == set(runs["machine"])
    assert details["primary"].all() and details["held"].mean() >= 0.5
    table = coverage.summary(details)
    row = table[(table["check"] == coverage.NEXT_MACHINE) & (table["cells"] == "every cell")].iloc[0]
    assert row["checked"] == 6 and row["held"] == int(details["held"].sum()) and row["low"] != ""
    # a machine far from its kind's others is outside the interval the others give
    far = pd.concat([runs, machine_runs("K1", "M-far", 1.40, rng)], ignore_index=True)
    out = coverage.leave_one_machine_out(far, {}, set())
    assert not out.loc[out["left_out"] == "M-far", "held"].iloc[0]


def test_leave_one_kind_out_predicts_each_kind_from_the_others_with_a_spread_that_leaves_it_out():
    per_host = pd.DataFrame([{"seed": "002", "configuration": "x / y", "workload": "w", "processor": f"P{i} (1/1/{i})",
                              "estimate": math.log(r), "se": 0.005, "ratio": r, "n_builds": 5}
                             for i, r in enumerate((1.10, 1.11, 1.09, 1.40))])
    ablations = {("a", "b", "w"): {f"P{i} (1/1/{i})": (e, 0.005) for i, e in enumerate((0.0, 0.01, -0.01, 0.3))},
                 ("c", "d", "w"): {f"P{i} (1/1/{i})": (e, 0.005) for i, e in enumerate((0.02, 0.03, 0.01, 0.02))}}
    details = coverage.leave_one_kind_out(per_host, ablations, set())
    assert len(details) == 4
    held = dict(zip(details["kind"], details["held"]))
    assert held["P0 (1/1/0)"] and not held["P3 (1/1/3)"]


def test_a_next_machine_registration_is_checked_by_the_machines_measured_after_it():
    rng = np.random.default_rng(4)
    runs = dataset(rng, kinds=("K1",), machines=2)
    others = pd.concat([machine_runs("K2", f"M-o{m}", 1.03, rng, cell="v") for m in range(2)], ignore_index=True)
    every = pd.concat([runs, others], ignore_index=True)
    spread = prediction.machine_spread(pool.machine_cells(pool.machine_estimates(every)))
    per_host = pool.per_host(runs, 0.025, "cost_at_most", {}, spread)
    entries = predictions.compute_next_machine(per_host, spread, "2026-12-05", "abc1234")
    assert len(entries) == 1 and entries[0]["from_machines"] == ["M-K10", "M-K11"]
    text = predictions.render([], [], entries)
    assert "[[next_machine]]" in text and 'kind = "K1"' in text
    later = pd.concat([runs, machine_runs("K1", "M-new", 1.05, rng), machine_runs("K1", "M-one", 1.05, rng, builds=1)])
    check = predictions.next_machine_check(entries, pool.machine_estimates(later))
    assert list(check["machine"]) == ["M-new", "M-one"]
    assert list(check["interval"]) == ["layout builds", "one build"]
    # registering again from the same machines adds nothing
    new, kept = predictions.not_registered(entries, entries, predictions.same_machines)
    assert new == [] and kept == entries
