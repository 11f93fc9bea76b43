"""The defences' cost beside what they buy: the primitive a defence removes, the probes it changes, the
instructions it adds per malloc+free pair, and an honest column for the known techniques not yet measured."""
import pandas as pd

from analysis.publish.security import defences as D
from analysis.publish.render.formats import fmt_interval
from analysis.stats import primitives as PR


def cell(alloc, bug, prim, count, n=1000, cap="none"):
    low, high = PR.wilson(count, n)
    return {"allocator": alloc, "bug_class": bug, "capability": cap, "primitive": prim, "sequences": n,
            "count": count, "rate": count / n, "rate_ci_low": low, "rate_ci_high": high}


def test_the_removed_primitive_is_the_cell_that_falls_most_with_intervals_apart():
    rows = [cell("without", "double-free", "overlap", 579), cell("with", "double-free", "overlap", 2),
            cell("without", "overflow", "overlap", 30), cell("with", "overflow", "overlap", 0),
            cell("without", "write-after-free", "chosen-address", 12), cell("with", "write-after-free", "chosen-address", 9)]
    got = D.primitive_removed(rows, "with", "without")
    assert (got["bug_class"], got["primitive"]) == ("double-free", "overlap")
    assert round(1000 * got["without"]) == 579 and round(1000 * got["with"]) == 2
    # a fall inside the sampling (12 -> 9 of 1000) is no removed primitive
    assert D.primitive_removed(rows[-2:], "with", "without") is None


def test_the_table_pairs_the_cost_with_the_primitive_and_says_techniques_are_not_measured():
    ablation = pd.DataFrame([{"defence": "tcache key", "allocator": "with", "base": "without", "workload": "all",
                              "ratio": 1.026, "ci_low": 1.017, "ci_high": 1.035, "n": 8}])
    per_free = pd.DataFrame([{"workload": w, "allocator": a, "instructions_per_free": v}
                             for w, a, v in (("x", "with", 110.0), ("x", "without", 100.0),
                                             ("y", "with", 60.0), ("y", "without", 54.0))])
    probes = [{"allocator": a, "probe": "double-free", "size": 64, "outcome": o, "outcomes": f"{o}=20", "trials": 20}
              for a, o in (("with", "caught"), ("without", "missed"))]
    rows = [cell("without", "double-free", "overlap", 579), cell("with", "double-free", "overlap", 2)]
    table = D.defence_table(ablation, per_free, probes, rows, fmt_interval)
    row = table.iloc[0]
    assert row["time_display"] == "1.026 [1.017, 1.035]" and row["instructions_per_pair"] == "+8"
    assert (row["primitive_without"], row["primitive_with"]) == ("579", "2")
    assert row["primitive_removed"] == "overlap after double-free (no leak)"
    assert row["primitive_display"] == "overlap after double-free (no leak): 579 \u2192 2"
    assert row["probes_changed"] == "double-free"
    assert row["techniques_stopped"] == D.NOT_MEASURED
    techniques = pd.DataFrame([{"technique": "fastbin_dup", "allocator": "without", "outcome": "works"},
                               {"technique": "fastbin_dup", "allocator": "with", "outcome": "stopped"}])
    row = D.defence_table(ablation, per_free, probes, rows, fmt_interval, techniques).iloc[0]
    assert (row["techniques_stopped"], row["techniques_stopped_names"]) == ("1 of 1", "fastbin_dup")
