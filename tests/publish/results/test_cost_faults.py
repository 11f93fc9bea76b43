"""What the cost check's misses come from, on simulated trials with a known truth: each configuration's added
faults and CPU time over the baseline's in the same run, beside the check's miss; the summary ranks the added
faults against the misses and reads what a knock-out removes of its control's added faults."""
import math

import numpy as np
import pandas as pd
import pytest

from analysis.publish.results import cost_faults

KIND = "Simulated CPU 2000 MHz (1/1/1)"
CONTROL, KO = "hardened-72fb357", "hardened-72fb357-no-quarantine"


def trials(truth: dict, blocks: int = 4, seed: int = 0) -> pd.DataFrame:
    """truth: {(program, allocator): (minor faults, user s, sys s)}; each trial jitters the times a little and
    the faults not at all, and a warm-up block and a failed trial are there to be left out."""
    rng = np.random.default_rng(seed)
    rows = []
    for b in range(blocks + 1):
        for (program, allocator), (flt, user, sys) in truth.items():
            rows.append({"workload": program, "allocator": allocator, "block": b, "warmup": int(b == 0),
                         "status": "ok", "minflt": flt + (10_000 if b == 0 else 0),
                         "user_s": user * math.exp(rng.normal(0, 0.01)), "sys_s": sys * math.exp(rng.normal(0, 0.01))})
    rows.append({**rows[-1], "status": "failed", "minflt": 10 ** 7})
    return pd.DataFrame(rows)


def checked(cells: dict) -> pd.DataFrame:
    """cells: {(program, allocator): (predicted now, measured)}: the check's table as the writer passes it."""
    return pd.DataFrame([{"processor": KIND, "program": p, "allocator": a, "predicted": pred * 0.9,
                          "current_predicted": pred, "measured": meas} for (p, a), (pred, meas) in cells.items()])


def test_each_configuration_is_read_against_the_baselines_trials_in_its_run():
    truth = {("prog", "glibc"): (1000, 0.090, 0.010), ("prog", CONTROL): (3000, 0.100, 0.030),
             ("other", "glibc"): (500, 0.050, 0.010), ("other", CONTROL): (500, 0.050, 0.010)}
    t = cost_faults.cells_of(trials(truth), "R", KIND, checked({("prog", CONTROL): (1.1, 1.5)}), {"prog"})
    assert list(t["program"]) == ["prog"]  # a program the run did not run as registered is left out
    r = t.iloc[0]
    assert r["trials"] == 4 and r["added_minflt"] == 2000 and r["base_cpu_ms"] == pytest.approx(100, rel=0.02)
    assert r["added_sys_ms"] == pytest.approx(20, rel=0.05) and r["added_user_ms"] == pytest.approx(10, rel=0.2)
    assert r["added_minflt_per_ms"] == pytest.approx(20, rel=0.02)
    # the miss: (1.5 - 1.1) of 100 ms is 40 ms, of which the added 20 ms of system time carry half
    assert r["log_error"] == pytest.approx(math.log(1.5 / 1.1)) and r["miss_ms"] == pytest.approx(40, rel=0.02)
    assert r["sys_share_of_miss"] == pytest.approx(0.5, rel=0.06)
    assert r["added_minflt_display"] == "+2000" and r["check_display"] == "1.100 / 1.500"
    unchecked = cost_faults.cells_of(trials(truth), "R", KIND, checked({}), {"prog"}).iloc[0]
    assert pd.isna(unchecked["log_error"]) and unchecked["check_display"] == ""


def test_the_added_faults_rank_with_the_misses_and_a_knock_out_removes_its_share():
    """Twelve programs whose miss under the control grows with the faults it adds; the knock-out removes 40% of
    them on every program with many."""
    truth, cells = {}, {}
    for i in range(12):
        added = 500 * (i + 1)
        truth[(f"p{i}", "glibc")] = (1000, 0.1, 0.01)
        truth[(f"p{i}", CONTROL)] = (1000 + added, 0.1 + added * 2e-6, 0.01 + added * 2e-6)
        truth[(f"p{i}", KO)] = (1000 + 0.6 * added, 0.1, 0.01)
        cells[(f"p{i}", CONTROL)] = (1.02, 1.02 * math.exp(added * 2e-5))
    t = cost_faults.cells_of(trials(truth), "R", KIND, checked(cells), {f"p{i}" for i in range(12)})
    n = cost_faults.numbers(t, {CONTROL: [KO]})
    assert n["cells"] == 12 and float(n["all"]["rho"]) == pytest.approx(1.0) and n["all"]["p"] == "p < 0.001"
    control = n["controls"][0]
    assert control["under"] == sum(1 for i in range(12) if 500 * (i + 1) * 2e-5 > math.log(1.05))
    ko = control["knock_outs"][0]
    assert ko["knock_out"] == KO and ko["programs"] == 11  # the controls adding 1000 faults or more
    assert ko["median_share_removed_percent"] == "40"
    assert cost_faults.numbers(t.iloc[0:0], {})["cells"] == 0


def test_the_protocols_compared_say_how_far_turns_move_a_ratio_from_alone():
    import math

    import pandas as pd

    from analysis.publish.results import cost_faults

    rows = [{"processor": "K", "program": f"p{i}", "allocator": "a", "measured": m, "alone": a,
             "turns_over_alone": math.log(m / a)} for i, (m, a) in enumerate([(1.0, 1.0), (1.02, 1.0), (0.28, 0.68),
                                                                              (1.5, 1.3), (0.99, 1.0)])]
    got = cost_faults.protocols(pd.DataFrame(rows))["kinds"][0]
    assert got["cells"] == 5 and got["disagree"] == 2  # 0.28 against 0.68, and 1.5 against 1.3
    assert got["largest"] == {"program": "p2", "allocator": "a", "turns": "0.28", "alone": "0.68"}
    assert got["median_percent"] == "2.0"
    assert cost_faults.protocols(pd.DataFrame(columns=cost_faults.COLUMNS)) == {}
