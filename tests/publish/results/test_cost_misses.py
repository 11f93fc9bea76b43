"""The check's far misses (publish/results/cost_misses.py): each reason read from the data that bears on it."""
import math

import pandas as pd

from analysis.publish.results import cost_misses


def _check_row(program, allocator, predicted, measured, **more):
    return {"program": program, "allocator": allocator, "processor": "K", "current_predicted": predicted,
            "measured": measured, "current_log_error": math.log(measured / predicted), "large_share": 0.0,
            "order_share": None, "shuffle_share": None, "programs_set": "seventh", **more}


def test_far_misses_name_what_the_data_say_and_leave_the_rest_unexplained(tmp_path):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    rows = [("malloc_calls", "", 1000), ("malloc_calls", 8192, 900), ("malloc_calls", 16, 100)]
    pd.DataFrame(rows, columns=["quantity", "size_class", "value"]).to_csv(profiles / "awk.csv", index=False)
    pd.DataFrame([("malloc_calls", 16, 1000)], columns=["quantity", "size_class", "value"]).to_csv(
        profiles / "walker.csv", index=False)
    table = pd.DataFrame([_check_row("awk", "h", 2.0, 3.5), _check_row("walker", "j", 1.0, 0.3, shuffle_share=0.6),
                          _check_row("walker", "h", 1.0, 1.1), _check_row("other", "h", 1.0, 2.0)])
    pd.DataFrame(columns=["quantity", "size_class", "value"]).to_csv(profiles / "other.csv", index=False)
    costs = pd.DataFrame([{"processor": "K", "allocator": a, "pattern": "lifo", "size_class": c}
                          for a in ("h", "j") for c in (16, 64, 256, 1024, 4096, 32768)])
    faults = pd.DataFrame([{"processor": "K", "program": "walker", "allocator": "j", "alone": 0.7}])
    far = cost_misses.far_misses([(tmp_path, table)], costs, faults, {}).set_index(["program", "allocator"])
    assert len(far) == 3  # the miss of a tenth is not far
    assert far.loc[("awk", "h"), "reasons"] == "unmeasured_class" and far.loc[("awk", "h"), "nearest_cell"] == 4096
    assert far.loc[("walker", "j"), "reasons"] == "protocol+placement"
    assert far.loc[("other", "h"), "reasons"] == "unexplained"
    got = cost_misses.numbers(far.reset_index())
    assert got["cells"] == 3 and got["unexplained"] == 1 and got["newest_set"] == "seventh"
    assert got["by_reason"] == {"placement": 1, "protocol": 1, "unexplained": 1, "unmeasured_class": 1}


def test_a_class_in_a_gap_of_the_cells_is_one_the_ladder_of_fours_does_not_reach():
    cells = [16, 64, 256, 1024, 4096, 32768]
    assert cost_misses._in_gap(8192, cells) and cost_misses._in_gap(16384, cells)
    assert not cost_misses._in_gap(32, cells) and not cost_misses._in_gap(4096, cells)
    assert cost_misses._in_gap(8, [16, 64]) and not cost_misses._in_gap(8, [])
