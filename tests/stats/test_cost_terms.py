"""The premium (stats/cost_terms.py) on simulated checks with a known truth: found where it exists, left out
where it does not, its interval covering the truth, and nested leave-one-program-out honest about both."""
import math

import numpy as np
import pandas as pd
import pytest

from analysis.stats import cost_model, cost_terms


def simulated(rng, truth_ns: dict, programs: int = 20, kinds=("K1",), noise: float = 0.02, miss: float = 0.0):
    """Checked cells: each program's calls and CPU time drawn, the per-call model's prediction drawn near 1, the
    measured ratio the prediction plus each configuration's true premium (per kind where a dict), times a
    log-normal run noise; `miss`: a per-program error of the model shared by every configuration (what no
    term explains)."""
    rows = []
    for i in range(programs):
        base = float(rng.uniform(0.05, 0.6))
        calls = float(10 ** rng.uniform(3, 6.5))
        shared = rng.normal(0, miss) if miss else 0.0
        for kind in kinds:
            for allocator, ns in truth_ns.items():
                ns = ns[kind] if isinstance(ns, dict) else ns
                predicted = 1 + float(rng.uniform(0, 0.1))
                measured = (predicted + ns * 1e-9 * calls / base) * math.exp(rng.normal(0, noise) + shared)
                rows.append({"program": f"p{i}", "allocator": allocator, "processor": kind, "measured": measured,
                             "predicted": predicted, "calls": calls, "base_s": base})
    return pd.DataFrame(rows, columns=cost_terms.CELL_COLUMNS)


def test_a_premium_that_exists_is_taken_and_one_that_does_not_is_left_out():
    taken = {"quarantine": 0, "none": 0}
    for seed in range(20):
        cells = simulated(np.random.default_rng(seed), {"quarantine": 80.0, "none": 0.0})
        chosen = cost_terms.premiums(cells)
        for allocator in taken:
            taken[allocator] += allocator in chosen
    assert taken["quarantine"] == 20
    assert taken["none"] <= 8  # a term with nothing to find wins the leave-one-out by chance at most this often


def test_the_premium_recovers_the_truth_and_its_interval_covers_it():
    held, estimates = 0, []
    for seed in range(200):
        got = cost_terms.fit(simulated(np.random.default_rng(1000 + seed), {"a": 60.0}))
        estimates.append(got.ns)
        held += abs(got.ns - 60.0) <= cost_model.Z * got.se_ns
    assert abs(np.median(estimates) - 60.0) < 3.0
    assert 0.88 <= held / 200 <= 0.99


def test_nested_leave_one_program_out_shows_what_the_term_buys_and_costs():
    bought, cost = [], []
    for seed in range(10):
        with_truth = cost_terms.nested(simulated(np.random.default_rng(seed), {"a": 80.0}))
        s = cost_terms.summary(with_truth)
        bought.append(s["p90_nested"] < s["p90_without"] and s["median_nested"] < s["median_without"])
        without_truth = cost_terms.summary(cost_terms.nested(simulated(np.random.default_rng(50 + seed), {"b": 0.0})))
        cost.append(without_truth["median_nested"] / without_truth["median_without"])
    assert all(bought)
    assert np.median(cost) <= 1.1  # choosing on the others' programs costs little where there is nothing to find


def test_too_few_programs_take_no_term():
    cells = simulated(np.random.default_rng(7), {"a": 200.0}, programs=cost_terms.MIN_PROGRAMS - 1)
    assert cost_terms.premiums(cells) == {}
    assert not cost_terms.takes_term(cells)


def test_a_program_checked_on_two_kinds_is_left_out_whole():
    cells = simulated(np.random.default_rng(3), {"a": 80.0}, kinds=("K1", "K2"))
    nested = cost_terms.nested(cells)
    assert len(nested) == len(cells)
    left = cells[cells["program"] != "p0"]
    alone = cost_terms.fit(left)
    # p0's nested errors are those of the premium fitted without either of its cells
    p0 = cells[cells["program"] == "p0"]
    assert np.allclose(nested.loc[nested["program"] == "p0", "log_error_nested"].to_numpy(),
                       cost_terms.log_errors(p0, alone))


def test_a_premium_that_differs_by_kind_is_fitted_between_and_still_helps():
    # host x configuration interaction: the premium is pooled over kinds, so it sits between the two
    cells = simulated(np.random.default_rng(11), {"a": {"K1": 100.0, "K2": 40.0}}, kinds=("K1", "K2"))
    got = cost_terms.fit(cells)
    assert 40.0 < got.ns < 100.0
    s = cost_terms.summary(cost_terms.nested(cells))
    assert s["median_nested"] < s["median_without"]


def test_a_miss_no_term_explains_stays_in_the_nested_errors():
    # a per-program error of the model that no premium carries: the term still finds the premium, and the nested
    # errors keep the miss (the intervals' model error must come from them, not from in-sample fits)
    cells = simulated(np.random.default_rng(5), {"a": 80.0}, noise=0.01, miss=0.08)
    s = cost_terms.summary(cost_terms.nested(cells))
    assert s["p90_nested"] > 8.0


def test_applied_adds_a_part_and_widens_the_interval():
    costs = pd.DataFrame([{"pattern": "lifo", "size_class": 16, "added_ns": 10.0, "added_ns_low": 9.0,
                           "added_ns_high": 11.0}])
    profile = pd.DataFrame([{"quantity": "malloc_calls", "size_class": "16", "value": 1e6},
                            {"quantity": "reuse_share", "size_class": "16", "value": 1.0},
                            {"quantity": "user_s", "size_class": "", "value": 0.5},
                            {"quantity": "sys_s", "size_class": "", "value": 0.0}])
    p = cost_model.predict(profile, costs)
    q = cost_terms.Premium(50.0, 5.0, 10, 12).applied(p)
    assert q.ratio == pytest.approx(p.ratio + 50e-9 * 1e6 / 0.5)
    assert q.added_s == pytest.approx(p.added_s + 0.05)
    assert (q.parts["pattern"] == cost_terms.PREMIUM).sum() == 1
    assert q.high - q.ratio > p.high - p.ratio and q.ratio - q.low > p.ratio - p.low


def simulated_held(rng, truth: dict, programs: int = 24, noise: float = 0.02):
    """Checked cells whose configurations pay `truth` = {configuration: (ns a call, ns a KiB held)}: each program's
    calls, CPU time and small-block heap drawn independently, so that the two terms can be told apart."""
    rows = []
    for i in range(programs):
        base = float(rng.uniform(0.05, 0.6))
        calls = float(10 ** rng.uniform(3, 6.5))
        held = float(10 ** rng.uniform(1, 5))  # 10 KiB to 100 MiB
        for allocator, (ns, ns_kib) in truth.items():
            predicted = 1 + float(rng.uniform(0, 0.1))
            measured = (predicted + (ns * calls + ns_kib * held) * 1e-9 / base) * math.exp(rng.normal(0, noise))
            rows.append({"program": f"p{i}", "allocator": allocator, "processor": "K1", "measured": measured,
                         "predicted": predicted, "calls": calls, "base_s": base, "held_kib": held})
    return pd.DataFrame(rows, columns=cost_terms.CELL_COLUMNS)


def test_the_held_term_is_told_from_the_premium_and_recovers_its_truth():
    truth = {"slabs": (0.0, 2000.0), "quarantine": (80.0, 0.0), "both": (40.0, 1500.0), "none": (0.0, 0.0)}
    picked = {a: [] for a in truth}
    held = []
    for seed in range(12):
        cells = simulated_held(np.random.default_rng(300 + seed), truth)
        got = cost_terms.premiums(cells)
        for a in truth:
            picked[a].append(got[a].terms if a in got else ())
        t = cost_terms.fit(cells[cells["allocator"] == "slabs"], ("held",))
        held.append(abs(t.ns_per_kib - 2000.0) <= cost_model.Z * t.se_ns_per_kib)
    assert all("held" in t for t in picked["slabs"]) and all("calls" in t for t in picked["quarantine"])
    assert all(t == ("calls", "held") for t in picked["both"])
    assert sum(bool(t) for t in picked["none"]) <= 5  # nothing to find: a term wins by chance at most this often
    assert sum(held) >= 10


def test_a_held_term_applied_adds_its_part_from_the_profiles_heap():
    costs = pd.DataFrame([{"pattern": p, "size_class": c, "added_ns": 10.0, "added_ns_low": 9.0, "added_ns_high": 11.0}
                          for p in ("lifo", "random") for c in (16, 65536)])
    profile = pd.DataFrame([{"quantity": "malloc_calls", "size_class": "16", "value": 3e6},
                            {"quantity": "malloc_calls", "size_class": "65536", "value": 16.0},
                            {"quantity": "reuse_share", "size_class": "16", "value": 1.0},
                            {"quantity": "reuse_share", "size_class": "65536", "value": 1.0},
                            {"quantity": "peak_live_bytes", "size_class": "", "value": 64 * 2**20},
                            {"quantity": "user_s", "size_class": "", "value": 0.5},
                            {"quantity": "sys_s", "size_class": "", "value": 0.0}])
    p = cost_model.predict(profile, costs)
    # 3e6 calls of 16 bytes (12 each on average) against 16 of 64 KiB (48 KiB): the small share of the bytes asked for
    small = 3e6 * 12 / (3e6 * 12 + 16 * 49152)
    assert p.held_kib == pytest.approx(64 * 1024 * small)
    q = cost_terms.Premium(0.0, 0.0, 10, 12, 2000.0, 100.0, 0.0, ("held",)).applied(p)
    assert q.ratio == pytest.approx(p.ratio + 2000e-9 * p.held_kib / 0.5)
    assert list(q.parts["pattern"]).count(cost_terms.HELD) == 1 and cost_terms.PREMIUM not in set(q.parts["pattern"])
    assert q.high - q.ratio > p.high - p.ratio


def test_a_profile_without_a_peak_holds_nothing():
    profile = pd.DataFrame([{"quantity": "malloc_calls", "size_class": "16", "value": 10.0},
                            {"quantity": "user_s", "size_class": "", "value": 0.5}])
    assert cost_model.held_small_kib(profile) == 0.0


def simulated_placement(rng, truth: dict, programs: int = 16, noise: float = 0.02, without: int = 0):
    """Checked cells whose configurations take `truth` = {configuration: (part of the order share, part of the
    shuffle share)}: each program's shares drawn as the placement runs measure them (order from -0.5 to 0.1,
    shuffle from 0 to 1), the last `without` programs' profiles lacking them (NaN, the term cannot reach them)."""
    rows = []
    for i in range(programs):
        base = float(rng.uniform(0.05, 0.6))
        calls = float(10 ** rng.uniform(3, 5))
        order, shuffle = float(rng.uniform(-0.5, 0.1)), float(rng.uniform(0.0, 1.0))
        lacks = i >= programs - without
        for allocator, (a, b) in truth.items():
            predicted = 1 + float(rng.uniform(0, 0.05))
            measured = max(predicted + a * order + b * shuffle, 0.1) * math.exp(rng.normal(0, noise))
            rows.append({"program": f"p{i}", "allocator": allocator, "processor": "K", "measured": measured,
                         "predicted": predicted, "calls": calls, "base_s": base, "held_kib": 0.0,
                         "order_share": math.nan if lacks else order, "shuffle_share": math.nan if lacks else shuffle})
    return pd.DataFrame(rows, columns=cost_terms.CELL_COLUMNS)


def test_placement_parts_are_found_where_they_exist_and_recover_their_truth():
    truth = {"segregated": (1.0, 0.0), "randomized": (1.0, 0.9), "glibc-like": (0.0, 0.0)}
    picked, covered = {a: [] for a in truth}, 0
    for seed in range(10):
        cells = simulated_placement(np.random.default_rng(400 + seed), truth)
        for allocator in truth:
            picked[allocator].append(cost_terms.chosen(cells[cells["allocator"] == allocator]))
        t = cost_terms.fit(cells[cells["allocator"] == "randomized"], cost_terms.PLACEMENT)
        covered += abs(t.order - 1.0) <= cost_model.Z * t.se_order and abs(t.shuffle - 0.9) <= cost_model.Z * t.se_shuffle
    assert all(t is not None and "order" in t for a in ("segregated", "randomized") for t in picked[a])
    assert sum(t is not None for t in picked["glibc-like"]) <= 4  # nothing to find: a term wins by chance rarely
    assert covered >= 8


def test_placement_parts_applied_move_the_prediction_by_the_profiles_shares_and_skip_a_profile_without():
    t = cost_terms.Premium(0.0, 0.0, 12, 12, terms=cost_terms.PLACEMENT, order=1.0, se_order=0.1, shuffle=0.5,
                           se_shuffle=0.1)
    parts = pd.DataFrame(columns=["pattern", "size_class", "pairs", "added_ns", "se_ns", "added_s"])
    p = cost_model.Prediction(1.10, 1.05, 1.15, 0.05, 0.5, 1000, parts, 0.01, 0.0, -0.4, 0.6)
    q = t.applied(p)
    assert q.ratio == pytest.approx(1.10 - 0.4 + 0.5 * 0.6)
    assert q.low < q.ratio < q.high and set(q.parts["pattern"]) == {cost_terms.ORDER, cost_terms.SHUFFLE}
    lacking = cost_model.Prediction(1.10, 1.05, 1.15, 0.05, 0.5, 1000, parts, 0.01)
    assert t.applied(lacking).ratio == pytest.approx(1.10)


def test_cells_without_placement_shares_leave_the_parts_to_the_cells_with_them():
    cells = simulated_placement(np.random.default_rng(9), {"randomized": (1.0, 0.9)}, programs=20, without=8)
    t = cost_terms.fit(cells, cost_terms.PLACEMENT)
    assert t.cells == 20 and abs(t.shuffle - 0.9) < 0.2


def test_a_profiles_placement_shares_are_over_its_baseline_time_and_absent_without_its_runs():
    rows = [("user_s", 0.9), ("sys_s", 0.1), ("placement_ordered_cpu_s", 0.5), ("placement_shuffled_cpu_s", 1.0)]
    prof = pd.DataFrame([{"quantity": q, "size_class": None, "value": v} for q, v in rows])
    assert cost_model.placement_shares(prof) == pytest.approx((-0.5, 0.5))
    assert all(math.isnan(x) for x in cost_model.placement_shares(prof.iloc[:2]))


def test_growing_reallocs_counted_per_class_charge_only_the_ones_that_moved_as_fresh_blocks():
    mib2 = 2 ** 21
    rows = [("realloc_calls", mib2, 100), ("realloc_calls", 256, 1000), ("realloc_calls", None, 1100),
            ("realloc_grow", None, 1100),
            ("realloc_moved", None, 501), ("realloc_grown", mib2, 100), ("realloc_grown_moved", mib2, 1),
            ("realloc_grown", 256, 1000), ("realloc_grown_moved", 256, 500)]
    prof = pd.DataFrame([{"quantity": q, "size_class": c, "value": v} for q, c, v in rows])
    fresh = cost_model.fresh_calls(prof)["calls"]
    assert fresh[mib2] == 1 and fresh[256] == 1000  # small classes keep every call: their cells price the moves
    older = prof[~prof["quantity"].str.startswith("realloc_grown")]  # a profile made before: the program-wide share
    assert cost_model.fresh_calls(older)["calls"][mib2] == pytest.approx(100 - 100 * (1100 - 501) / 1100)


def test_a_profiles_noisy_placement_runs_widen_the_interval_their_shares_give_and_move_nothing_else():
    """The shares are measured: their sampling error (the spread of each turn's log difference over the turns,
    as medians) joins the interval through the coefficients that multiply them, and nothing else changes."""
    rows = [("user_s", 0.9), ("sys_s", 0.1), ("placement_ordered_cpu_s", 0.8), ("placement_shuffled_cpu_s", 1.2),
            ("placement_runs", 6), ("placement_ordered_sd_log", 0.12), ("placement_shuffled_sd_log", 0.06)]
    prof = pd.DataFrame([{"quantity": q, "size_class": None, "value": v} for q, v in rows])
    se_o, se_s = cost_model.placement_share_errors(prof)
    factor = math.sqrt(math.pi / 2) / math.sqrt(6)
    assert se_o == pytest.approx(0.8 * 0.12 * factor) and se_s == pytest.approx(1.2 * 0.06 * factor)
    assert cost_model.placement_share_errors(prof.iloc[:4]) == (0.0, 0.0)  # no runs counted: no error known
    t = cost_terms.Premium(0.0, 0.0, 12, 12, terms=cost_terms.PLACEMENT, order=1.0, se_order=0.0, shuffle=0.5,
                           se_shuffle=0.0)
    parts = pd.DataFrame(columns=["pattern", "size_class", "pairs", "added_ns", "se_ns", "added_s"])
    quiet = cost_model.Prediction(1.10, 1.10, 1.10, 0.1, 1.0, 1000, parts, 0.0, 0.0, -0.2, 0.4)
    noisy = cost_model.Prediction(1.10, 1.10, 1.10, 0.1, 1.0, 1000, parts, 0.0, 0.0, -0.2, 0.4, se_o, se_s)
    q, n = t.applied(quiet), t.applied(noisy)
    assert q.ratio == n.ratio == pytest.approx(1.10 - 0.2 + 0.5 * 0.4)
    assert q.high - q.low == pytest.approx(0.0, abs=1e-12)  # exact coefficients, exact shares: no width
    half = cost_model.Z * math.hypot(1.0 * se_o, 0.5 * se_s)
    assert n.high - n.ratio == pytest.approx(half) and n.ratio - n.low == pytest.approx(half)
    assert n.added_sd_s == pytest.approx(math.hypot(1.0 * se_o, 0.5 * se_s) * 1.0)
    # a configuration that takes no placement part is not widened by the shares' errors
    held = cost_terms.Premium(0.0, 0.0, 12, 12, 100.0, 0.0, terms=(cost_terms.HELD_TERM,))
    assert held.applied(noisy).high - held.applied(noisy).low == pytest.approx(0.0, abs=1e-12)


def test_the_premium_and_the_placement_parts_are_fitted_together_though_their_scales_lie_far_apart():
    # calls / T runs to millions a second, a placement share to tenths: the premium fitted beside both parts
    rng = np.random.default_rng(31)
    rows = []
    for i in range(24):
        base, calls = float(rng.uniform(0.05, 0.6)), float(10 ** rng.uniform(5, 7))
        order, shuffle = float(rng.uniform(-0.5, 0.1)), float(rng.uniform(0.0, 1.0))
        predicted = 1 + float(rng.uniform(0, 0.05))
        measured = (predicted + 20e-9 * calls / base + 1.0 * order + 0.8 * shuffle) * math.exp(rng.normal(0, 0.01))
        rows.append({"program": f"p{i}", "allocator": "randomized", "processor": "K", "measured": measured,
                     "predicted": predicted, "calls": calls, "base_s": base, "held_kib": 0.0,
                     "order_share": order, "shuffle_share": shuffle})
    cells = pd.DataFrame(rows, columns=cost_terms.CELL_COLUMNS)
    t = cost_terms.fit(cells, (cost_terms.CALLS_TERM, *cost_terms.PLACEMENT))
    assert t is not None and t.terms == (cost_terms.CALLS_TERM, *cost_terms.PLACEMENT)
    assert abs(t.ns - 20) <= cost_model.Z * t.se_ns + 1 and abs(t.order - 1.0) < 0.15 and abs(t.shuffle - 0.8) < 0.15
    assert 0 < t.se_ns < 5 and 0 < t.se_order < 0.2
    assert cost_terms.chosen(cells) == (cost_terms.CALLS_TERM, *cost_terms.PLACEMENT)
