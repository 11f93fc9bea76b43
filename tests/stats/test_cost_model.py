"""The cost model on profiles and per-call costs whose answer is known by hand."""
import math

import numpy as np
import pandas as pd
import pytest

from analysis.errors import HeapcostError
from analysis.stats import cost_model


def profile(rows, wall_s=2.0) -> pd.DataFrame:
    out = [{"quantity": q, "size_class": c, "value": v} for q, c, v in rows]
    out.append({"quantity": "wall_s", "size_class": None, "value": wall_s})
    return pd.DataFrame(out)


def costs(cells) -> pd.DataFrame:
    """cells: (pattern, class, added ns, half-width ns)"""
    return pd.DataFrame([{"pattern": p, "size_class": c, "added_ns": a, "added_ns_low": a - h, "added_ns_high": a + h}
                         for p, c, a, h in cells], columns=cost_model.COST_COLUMNS)


COSTS = costs([("lifo", 16, 2.0, 0.5), ("random", 16, 10.0, 1.0), ("lifo", 256, 4.0, 0.5),
               ("random", 256, 20.0, 2.0), ("pages", 262144, 50_000.0, 5_000.0)])


def test_the_added_time_is_the_calls_times_their_cells_costs():
    # 1e6 mallocs of class 16 (30% reused), 2e5 callocs of class 256 (none reused), 10 blocks of 1 MiB
    p = profile([("malloc_calls", 16, 1e6), ("reuse_share", 16, 0.3), ("calloc_calls", 256, 2e5),
                 ("malloc_calls", 1048576, 10), ("free_calls", 16, 1e6)])
    got = cost_model.predict(p, COSTS)
    added_ns = 1e6 * (0.3 * 2.0 + 0.7 * 10.0) + 2e5 * 20.0 + 10 * 4 * 50_000.0
    assert got.added_s == pytest.approx(added_ns * 1e-9)
    assert got.ratio == pytest.approx(1 + added_ns * 1e-9 / 2.0)
    se = {("lifo", 16): 0.5, ("random", 16): 1.0, ("random", 256): 2.0, ("pages", 262144): 5000.0}
    pairs = {("lifo", 16): 3e5, ("random", 16): 7e5, ("random", 256): 2e5, ("pages", 262144): 40}
    sd = math.sqrt(sum((pairs[k] * se[k] / cost_model.Z * 1e-9) ** 2 for k in se))
    assert got.high - got.ratio == pytest.approx(cost_model.Z * sd / 2.0)
    assert got.ratio - got.low == pytest.approx(got.high - got.ratio)
    assert got.calls == 1e6 + 2e5 + 10  # frees are in the pairs, not counted again


def test_a_realloc_the_baseline_grew_in_place_is_no_fresh_large_block():
    # 1,000 reallocs in the 1 MiB class (the pages cell) and 1,000 in class 256; 1,600 of all 2,000 grew, 400 moved:
    # 1,200 grew in place, a share of 0.6 of the reallocs, so 600 of the large class's are no fresh block
    rows = [("realloc_calls", 1048576, 1000), ("realloc_calls", 256, 1000), ("realloc_calls", None, 2000),
            ("realloc_grow", None, 1600), ("realloc_moved", None, 400)]
    p = profile(rows)
    assert cost_model.in_place_share(p) == pytest.approx(0.6)
    fresh = cost_model.fresh_calls(p)
    assert fresh.loc[1048576, "calls"] == pytest.approx(400)
    assert fresh.loc[256, "calls"] == pytest.approx(1000)  # a small class's growth is a fresh pair under a slab
    got = cost_model.predict(p, COSTS)
    assert got.added_s == pytest.approx((400 * 4 * 50_000.0 + 1000 * 20.0) * 1e-9)
    assert got.calls == 2000  # the program's calls, as it made them
    # every grow moved, no grow, or no realloc at all: each realloc is a fresh block, as before the term
    for moved, grow in ((1600, 1600), (0, 0)):
        q = profile(rows[:3] + [("realloc_grow", None, grow), ("realloc_moved", None, moved)])
        assert cost_model.in_place_share(q) == 0.0
        assert cost_model.fresh_calls(q).equals(cost_model.class_calls(q))
    assert cost_model.in_place_share(profile([("malloc_calls", 16, 10)])) == 0.0
    # the share never passes 1, even where the program-wide counts disagree
    assert cost_model.in_place_share(profile([("realloc_calls", None, 10), ("realloc_grow", None, 50)])) == 1.0


def test_a_class_held_few_blocks_at_once_takes_the_held_cell():
    held = pd.concat([COSTS, costs([("held", 32768, 300.0, 30.0), ("held", 131072, 20_000.0, 2_000.0),
                                    ("random", 32768, 3_000.0, 100.0)])], ignore_index=True)
    rows = [("malloc_calls", 32768, 1000), ("malloc_calls", 65536, 100), ("malloc_calls", 262144, 10),
            ("malloc_calls", 4096, 50)]
    # at most 4 blocks of the 32 and 64 KiB classes live: each call a pair of the nearest held cell; 256 KiB lies
    # past the largest held class and 4 KiB below 16 KiB, so both keep their cells
    few = profile(rows + [("peak_live_blocks", 32768, 3), ("peak_live_blocks", 65536, 4),
                          ("peak_live_blocks", 262144, 1), ("peak_live_blocks", 4096, 2)])
    assert cost_model.class_peaks(few) == {32768: 3, 65536: 4, 262144: 1, 4096: 2}
    w = cost_model.weights(cost_model.class_calls(few), held, None, cost_model.class_peaks(few))
    got = {(r.pattern, r.size_class): r.pairs for r in w.itertuples()}
    # 64 KiB lies as near 32 KiB as 128 KiB on a log scale: the smaller class is taken, as for the other cells
    assert got[("held", 32768)] == 1000 + 100 and ("held", 131072) not in got and got[("pages", 262144)] == 10
    assert got[("random", 32768)] == 50  # the 4 KiB calls, below 16 KiB, keep their nearest cell of many live
    # five blocks live, or a profile without the quantity: the cells of many live blocks, as before the term
    many = profile(rows + [("peak_live_blocks", 32768, 5)])
    w = cost_model.weights(cost_model.class_calls(many), held, None, cost_model.class_peaks(many))
    pairs = dict(zip(zip(w["pattern"], w["size_class"]), w["pairs"]))
    assert pairs[("random", 32768)] == 1000 + 50 and pairs[("pages", 262144)] > 10  # 64 KiB: the pages cell again
    assert cost_model.predict(profile(rows), held).added_s == cost_model.predict(many, held).added_s
    assert cost_model.predict(few, held).added_s < cost_model.predict(many, held).added_s
    # without held cells measured, a few-held class keeps its cells
    assert cost_model.predict(few, COSTS).added_s == cost_model.predict(profile(rows), COSTS).added_s


def test_the_held_cells_blocks_live_are_the_harness_held_slots():
    from analysis.harness.workloads.builtin import CALL_WORKLOADS, HELD_SLOTS, HELD_WORKLOADS

    assert cost_model.HELD_LIVE == HELD_SLOTS
    assert {w.cell_pattern for w in HELD_WORKLOADS.values()} == {cost_model.HELD}
    assert cost_model.HELD not in {w.cell_pattern for w in CALL_WORKLOADS.values()}


def test_a_process_start_up_is_charged_per_process_only_when_asked():
    # 1e6 mallocs of class 16, none reused, in 100 processes; a process's start-up adds 1.5 ms +- 0.2
    p = profile([("malloc_calls", 16, 1e6), ("processes", None, 100)])
    with_start = pd.concat([COSTS, costs([("processes", 0, 1.5e6, 0.2e6)])], ignore_index=True)
    plain = cost_model.predict(p, COSTS)
    assert cost_model.predict(p, with_start).added_s == pytest.approx(plain.added_s)  # the cell alone changes nothing
    got = cost_model.predict(p, with_start, startup=True)
    assert got.added_s == pytest.approx(1e6 * 10.0 * 1e-9 + 100 * 1.5e-3)
    sd = math.sqrt((1e6 * 1.0 / cost_model.Z * 1e-9) ** 2 + (100 * 0.2e6 / cost_model.Z * 1e-9) ** 2)
    assert got.high - got.ratio == pytest.approx(cost_model.Z * sd / 2.0)
    assert got.calls == 1e6  # processes are no calls
    # a profile without processes adds none; without the cell the prediction asked for cannot be made
    assert cost_model.predict(profile([("malloc_calls", 16, 1e6)]), with_start, startup=True).added_s == \
        pytest.approx(plain.added_s)
    with pytest.raises(HeapcostError, match="calls-processes"):
        cost_model.predict(p, COSTS, startup=True)
    # the processes cell is no small size class: a class is never mapped to it
    w = cost_model.weights(cost_model.class_calls(profile([("malloc_calls", 1, 5)])), with_start)
    assert set(w["pattern"]) == {"random"}


def test_a_class_takes_the_nearest_measured_class_on_a_log_scale():
    # 32 is nearer 16 than 256 on a log scale (1 against 3 doublings); 128 nearer 256
    w = cost_model.weights(cost_model.class_calls(profile([("malloc_calls", 32, 5), ("malloc_calls", 128, 7)])),
                           COSTS)
    assert {(r.pattern, r.size_class): r.pairs for r in w.itertuples()} == {("random", 16): 5, ("random", 256): 7}


def test_no_calls_predicts_no_cost_and_bad_input_says_what_is_wrong():
    assert cost_model.predict(profile([("malloc_calls", 16, 0)]), COSTS).ratio == 1.0
    with pytest.raises(HeapcostError, match="no time under the baseline"):
        cost_model.predict(profile([("malloc_calls", 16, 1)], wall_s=0), COSTS)
    with pytest.raises(HeapcostError, match="lack the column"):
        cost_model.predict(profile([("malloc_calls", 16, 1)]), COSTS.drop(columns="added_ns_low"))
    with pytest.raises(HeapcostError, match="lifo pattern at class 16"):
        cost_model.predict(profile([("malloc_calls", 16, 1), ("reuse_share", 16, 1.0)]),
                           COSTS[COSTS["pattern"] != "lifo"])
    with pytest.raises(HeapcostError, match="small size class"):
        cost_model.predict(profile([("malloc_calls", 16, 1)]), COSTS[COSTS["pattern"] == "pages"])


def test_the_programs_time_is_its_cpu_time_where_the_profile_has_it():
    p = pd.concat([profile([("malloc_calls", 16, 1e6)], wall_s=4.0),
                   pd.DataFrame([{"quantity": "user_s", "size_class": None, "value": 1.5},
                                 {"quantity": "sys_s", "size_class": None, "value": 0.5}])])
    assert cost_model.base_time(p) == 2.0
    assert cost_model.predict(p, COSTS).ratio == pytest.approx(1 + 1e6 * 10.0e-9 / 2.0)
    assert cost_model.base_time(profile([], wall_s=4.0)) == 4.0


def test_the_spread_of_the_timed_runs_widens_the_interval_through_added_over_t():
    base = profile([("malloc_calls", 16, 1e6)], wall_s=2.0)
    timed = pd.concat([base, pd.DataFrame([{"quantity": "timed_runs", "size_class": None, "value": 4},
                                           {"quantity": "cpu_sd_log", "size_class": None, "value": 0.1}])])
    plain, spread = cost_model.predict(base, COSTS), cost_model.predict(timed, COSTS)
    assert spread.ratio == plain.ratio
    per_call_half = (plain.high - plain.low) / 2
    t_half = cost_model.Z * (plain.ratio - 1) * 0.1 / 2  # the log's SE over sqrt(4) runs, on added / T
    assert (spread.high - spread.low) / 2 == pytest.approx(math.hypot(per_call_half, t_half))


def test_a_cheaper_allocator_predicts_below_one():
    cheap = costs([("lifo", 16, -3.0, 0.2), ("random", 16, -3.0, 0.2)])
    got = cost_model.predict(profile([("malloc_calls", 16, 1e8)], wall_s=10.0), cheap)
    assert got.ratio == pytest.approx(1 - 0.03) and got.high < 1


def test_a_pair_is_the_ratio_of_both_sides_predicted_times():
    # 1e6 pairs of class 16, none reused: T = 2 s, one side adds 10 ns a pair, the other 4 ns
    p = profile([("malloc_calls", 16, 1e6)])
    slower = costs([("random", 16, 10.0, 1.0)])
    faster = costs([("random", 16, 4.0, 0.5)])
    got = cost_model.predict_pair(p, slower, faster)
    assert got.ratio == pytest.approx((2.0 + 1e6 * 10e-9) / (2.0 + 1e6 * 4e-9))
    se = math.hypot(1e6 * 1.0 / cost_model.Z * 1e-9 / (2.0 + 0.01), 1e6 * 0.5 / cost_model.Z * 1e-9 / (2.0 + 0.004))
    assert math.log(got.high / got.ratio) == pytest.approx(cost_model.Z * se)
    assert math.log(got.ratio / got.low) == pytest.approx(cost_model.Z * se)
    # against the baseline itself (None adds nothing) it is the single prediction
    alone = cost_model.predict(p, slower)
    assert cost_model.predict_pair(p, slower, None).ratio == pytest.approx(alone.ratio)
    assert cost_model.predict_pair(p, None, None).ratio == 1.0
    with pytest.raises(HeapcostError, match="not positive"):
        cost_model.predict_pair(profile([("malloc_calls", 16, 1e9)], wall_s=1.0), costs([("random", 16, -5.0, 1.0)]),
                                None)


@pytest.mark.slow  # hundreds of simulated data sets: seconds of CPU, in `make test` only
def test_a_pairs_interval_covers_the_truth_at_its_rate_on_simulated_per_call_costs():
    """Per-call costs measured with a known standard error around a known truth: the pair's 95% interval holds
    the true ratio in about 95% of the simulated measurements, T's own spread included."""
    import numpy as np

    rng = np.random.default_rng(20261204)
    truth_with, truth_without, se_with, se_without = 30.0, 12.0, 3.0, 2.0
    calls, t_true, t_sd_log, runs = 2e7, 1.5, 0.05, 5
    true_ratio = (t_true + calls * truth_with * 1e-9) / (t_true + calls * truth_without * 1e-9)
    held, draws = 0, 500
    for _ in range(draws):
        w, wo = rng.normal(truth_with, se_with), rng.normal(truth_without, se_without)
        t = t_true * math.exp(rng.normal(0, t_sd_log / math.sqrt(runs)))
        prof = profile([("malloc_calls", 64, calls), ("timed_runs", None, runs), ("cpu_sd_log", None, t_sd_log)],
                       wall_s=t)
        got = cost_model.predict_pair(prof, costs([("random", 64, w, cost_model.Z * se_with)]),
                                      costs([("random", 64, wo, cost_model.Z * se_without)]))
        held += got.low <= true_ratio <= got.high
    assert 0.92 <= held / draws <= 0.98  # 95% +- 2.5 binomial SDs at 500 draws


# ---- the model's own error: split-conformal half-widths from the checked programs' misses ----

def _residuals(errors, allocator="a", family="f", programs=None):
    programs = programs or [f"p{i}" for i in range(len(errors))]
    return pd.DataFrame({"program": programs, "allocator": allocator, "family": family, "processor": "P",
                         "log_error": errors})


def test_a_conformal_half_width_needs_nineteen_residuals_at_95_percent():
    assert cost_model.min_residuals(0.95) == 19
    assert cost_model.conformal_half_width([0.01] * 18) is None
    # 19 residuals: the 19th smallest |r| (the largest); 39: the 38th
    r = [i / 100 for i in range(1, 20)]
    assert cost_model.conformal_half_width([-x for x in r]) == pytest.approx(0.19)
    r = [i / 100 for i in range(1, 40)]
    assert cost_model.conformal_half_width(r) == pytest.approx(0.38)


def test_the_model_error_falls_back_from_configuration_to_family_to_every_configuration():
    own = _residuals([0.01] * 10, "a", "f")
    kin = _residuals([0.05] * 10, "b", "f", [f"q{i}" for i in range(10)])
    far = _residuals([0.30] * 30, "c", "g", [f"r{i}" for i in range(30)])
    both = pd.concat([own, kin], ignore_index=True)
    e = cost_model.model_error(both, "a", "f")
    assert (e.scope, e.residuals, e.half_log) == ("family", 20, pytest.approx(0.05))
    e = cost_model.model_error(pd.concat([both, far], ignore_index=True), "a", "h")
    assert e.scope == "every configuration" and e.residuals == 50
    assert cost_model.model_error(own, "a", "f").half_log is None
    # left out, a program's residuals give nothing to its own interval
    e = cost_model.model_error(pd.concat([_residuals([0.02] * 19), _residuals([9.0], programs=["odd"])]),
                               "a", "f", leave_out="odd")
    assert (e.scope, e.half_log) == ("configuration", pytest.approx(0.02))


def test_intervals_with_the_model_error_cover_new_programs_at_their_level_on_simulated_misses():
    """A known truth: each program misses by a draw from a heavy-tailed law the inputs' interval knows nothing
    of; left out one at a time, the widened intervals hold about 95% of the programs, the inputs' alone few."""
    rng = np.random.default_rng(5)
    held = plain = total = 0
    for _ in range(40):
        misses = 0.05 * rng.standard_t(3, size=40)
        table = _residuals(misses)
        for i, m in enumerate(misses):
            e = cost_model.model_error(table, "a", "f", leave_out=f"p{i}")
            low, high = cost_model.with_model_error(1.2, 1.19, 1.21, e)
            measured = 1.2 * math.exp(m)
            held += low <= measured <= high
            plain += 1.19 <= measured <= 1.21
            total += 1
    assert 0.92 <= held / total <= 0.985
    assert plain / total < 0.3


def test_the_model_error_widens_an_interval_in_quadrature_on_the_log_scale():
    e = cost_model.ModelError(0.1, "configuration", 20, 20)
    low, high = cost_model.with_model_error(2.0, 2.0 * math.exp(-0.1), 2.0 * math.exp(0.2), e)
    assert math.log(2.0 / low) == pytest.approx(math.hypot(0.1, 0.1))
    assert math.log(high / 2.0) == pytest.approx(math.hypot(0.2, 0.1))
    unknown = cost_model.ModelError(None, "too few programs checked", 3, 3)
    assert cost_model.with_model_error(2.0, 1.9, 2.1, unknown) == (1.9, 2.1)
    # an inputs' interval reaching below zero (a linear half-width) takes the upper half for the lower
    low, _ = cost_model.with_model_error(1.5, -0.5, 3.5, e)
    assert low > 0


def test_a_new_machine_widens_by_its_own_deviation_and_the_measured_machines():
    from scipy import stats as sps

    tau, q = 0.02, cost_model.t_quantile(14)
    assert q == pytest.approx(2.1447866879)
    for df in range(1, 12):  # the kept quantiles are scipy's
        assert cost_model.t_quantile(df) == pytest.approx(float(sps.t.ppf(0.975, df)), rel=1e-12)
    assert cost_model.t_quantile(float("nan")) == cost_model.Z
    one = cost_model.machine_half_width(tau, q)
    assert one == pytest.approx(2.1447866879 * tau * math.sqrt(2))
    assert cost_model.machine_half_width(tau, q, measured_machines=3) == pytest.approx(
        one * math.sqrt(1 + 1 / 3) / math.sqrt(2))
    assert cost_model.machine_half_width(0.0, q) == 0.0
    low, high = cost_model.widened(1.5, 1.5 * math.exp(-0.03), 1.5 * math.exp(0.04), one)
    assert math.log(1.5 / low) == pytest.approx(math.hypot(0.03, one))
    assert math.log(high / 1.5) == pytest.approx(math.hypot(0.04, one))


def test_intervals_for_a_new_machine_hold_on_simulated_machines_of_a_kind():
    """A known truth: machines of a kind deviate from the kind's mean ratio by N(0, tau); the per-call costs, and
    so the prediction, come from one machine, and the program is measured on another. With tau estimated from six
    cells measured on three machines each (stats.prediction.machine_spread), the widened interval holds about 95%
    of new machines' values; the one for the measured machine alone holds far fewer."""
    from analysis.stats import prediction

    rng = np.random.default_rng(11)
    tau_true, se = 0.015, 0.003
    held = plain = total = 0
    for _ in range(400):
        cells = {(f"c{i}", "kind"): [(float(rng.normal(0, tau_true) + rng.normal(0, se)), se) for _ in range(3)]
                 for i in range(6)}
        spread = prediction.machine_spread(cells)
        half = cost_model.machine_half_width(spread.tau, cost_model.t_quantile(spread.df))
        truth = 0.12
        measured_on, new = rng.normal(0, tau_true, size=2)
        ratio = math.exp(truth + measured_on + rng.normal(0, se))
        inputs = (ratio * math.exp(-1.96 * se), ratio * math.exp(1.96 * se))
        low, high = cost_model.widened(ratio, *inputs, half)
        measured = math.exp(truth + new + rng.normal(0, se))
        held += low <= measured <= high
        plain += inputs[0] <= measured <= inputs[1]
        total += 1
    assert 0.92 <= held / total <= 0.995
    assert plain / total < 0.5


def test_what_breaks_the_new_machine_interval_a_spread_larger_than_the_prior_seen_on_too_few_machines():
    """The spread is known from the debates' cells with two machines or more, moderated by a 1% prior on 2
    degrees of freedom. Where machines truly differ by 4% and a single cell of two machines estimates it, the
    prior pulls the spread down and the interval holds clearly fewer than 95% of new machines' values; with six
    cells of three machines it holds its level again."""
    from analysis.stats import prediction

    def coverage(cells_n, machines, tau_true, reps=400, seed=3):
        rng = np.random.default_rng(seed)
        held = 0
        for _ in range(reps):
            cells = {(f"c{i}", "kind"): [(float(rng.normal(0, tau_true)), 0.002) for _ in range(machines)]
                     for i in range(cells_n)}
            spread = prediction.machine_spread(cells)
            half = cost_model.machine_half_width(spread.tau, cost_model.t_quantile(spread.df))
            measured_on, new = rng.normal(0, tau_true, size=2)
            held += abs(new - measured_on) <= half
        return held / reps

    assert coverage(1, 2, 0.04) < 0.88
    assert coverage(6, 3, 0.04) >= 0.92


def test_the_baselines_error_takes_the_blocks_spread_when_it_is_the_larger_on_a_t_of_their_number():
    def prof(**values):
        return pd.DataFrame([{"quantity": q, "size_class": None, "value": v} for q, v in values.items()])

    within = cost_model.base_se_log(prof(timed_runs=6, cpu_sd_log=0.03))
    assert within == pytest.approx(0.03 / math.sqrt(6))
    blocked = cost_model.base_se_log(prof(timed_runs=6, cpu_sd_log=0.03, timed_blocks=3, cpu_sd_log_blocks=0.05))
    assert blocked == pytest.approx(0.05 / math.sqrt(3) * 4.302652729749464 / cost_model.Z)
    quiet = cost_model.base_se_log(prof(timed_runs=6, cpu_sd_log=0.03, timed_blocks=3, cpu_sd_log_blocks=0.001))
    assert quiet == pytest.approx(within)
    assert cost_model.base_se_log(prof(timed_runs=6, cpu_sd_log=0.03, timed_blocks=1)) == pytest.approx(within)


def test_reused_pairs_taken_by_the_size_just_freed_take_the_one_size_cells():
    # 1,000 mallocs of class 256 (80% reused, 3 of 4 of those by the size just freed) and 100 of class 32768 held 2
    # at a time (all reused, all by the size just freed)
    one_size = pd.concat([COSTS, costs([("lifo-same", 256, 1.0, 0.2), ("held", 32768, 300.0, 30.0),
                                        ("held-same", 32768, 100.0, 10.0)])], ignore_index=True)
    rows = [("malloc_calls", 256, 1000), ("free_calls", 256, 1000), ("reuse_share", 256, 0.8),
            ("frees_reused", 256, 800), ("frees_reused_same_size", 256, 600), ("malloc_calls", 32768, 100),
            ("free_calls", 32768, 100), ("reuse_share", 32768, 1.0), ("frees_reused", 32768, 100),
            ("frees_reused_same_size", 32768, 100), ("peak_live_blocks", 32768, 2)]
    p = profile(rows)
    calls = cost_model.class_calls(p)
    assert calls.loc[256, "same_share"] == pytest.approx(0.75) and calls.loc[32768, "same_share"] == 1.0
    w = cost_model.weights(calls, one_size, None, cost_model.class_peaks(p))
    got = {(r.pattern, r.size_class): r.pairs for r in w.itertuples()}
    assert got == pytest.approx({("lifo-same", 256): 600, ("lifo", 256): 200, ("random", 256): 200,
                                 ("held-same", 32768): 100})
    added = cost_model.predict(p, one_size).added_s
    assert added == pytest.approx((600 * 1.0 + 200 * 4.0 + 200 * 20.0 + 100 * 100.0) * 1e-9)
    # without the one-size cells (a kind that has not measured them), or a profile made before it counted the
    # same-size frees: the cells of drawn sizes, as before
    drawn = one_size[~one_size["pattern"].isin(list(cost_model.SAME_SIZE.values()))]
    before = profile([r for r in rows if r[0] != "frees_reused_same_size"])
    expected = (800 * 4.0 + 200 * 20.0 + 100 * 300.0) * 1e-9
    assert cost_model.predict(p, drawn).added_s == pytest.approx(expected)
    assert cost_model.predict(before, one_size).added_s == pytest.approx(expected)
    assert (cost_model.class_calls(before)["same_share"] == 0).all()


def test_the_one_size_cells_are_the_harness_same_size_workloads():
    from analysis.harness.workloads.builtin import CALL_WORKLOADS, HELD_WORKLOADS, SAME_SIZE_WORKLOADS

    assert {w.cell_pattern for w in SAME_SIZE_WORKLOADS.values()} == set(cost_model.SAME_SIZE.values())
    drawn = {(w.cell_pattern, w.size_class) for w in {**CALL_WORKLOADS, **HELD_WORKLOADS}.values()}
    for w in SAME_SIZE_WORKLOADS.values():  # each beside the drawn cell it stands in for
        plain = {v: k for k, v in cost_model.SAME_SIZE.items()}[w.cell_pattern]
        assert (plain, w.size_class) in drawn and w.same_size


def test_profiles_of_one_program_pool_their_times_and_keep_the_newest_counts():
    def timed(user, sys_, calls, placement=None):
        rows = [("malloc_calls", 16, calls), ("user_s", None, user), ("sys_s", None, sys_), ("timed_runs", None, 5),
                ("timed_blocks", None, 1), ("cpu_sd_log", None, 0.01)]
        if placement:
            rows += [("placement_runs", None, 6), ("placement_ordered_cpu_s", None, placement[0]),
                     ("placement_shuffled_cpu_s", None, placement[1]), ("placement_ordered_sd_log", None, 0.02),
                     ("placement_shuffled_sd_log", None, 0.02)]
        return pd.DataFrame([{"quantity": q, "size_class": c, "value": v} for q, c, v in rows])

    older = timed(0.2, 0.0, 900, placement=(0.22, 0.242))  # side by side 10% slower, scattered 10% more
    newest = timed(0.27, 0.03, 1000)
    pooled = cost_model.pooled_profile([older, newest])
    t = math.sqrt(0.2 * 0.3)  # the profiles' log T averaged, a block each
    assert cost_model.base_time(pooled) == pytest.approx(t)
    assert cost_model.profile_value(pooled, "sys_s") == pytest.approx(0.03 * t / 0.3)  # the newest's split kept
    assert cost_model.class_calls(pooled).loc[16, "calls"] == 1000  # the newest's counts
    assert cost_model.profile_value(pooled, "timed_blocks") == 2 and cost_model.profile_value(pooled, "timed_runs") == 10
    spread = abs(math.log(0.3 / 0.2)) / math.sqrt(2)  # two blocks, no spread of their own: how far apart they lie
    assert cost_model.profile_value(pooled, "cpu_sd_log_blocks") == pytest.approx(spread)
    assert cost_model.base_se_log(pooled) > cost_model.base_se_log(newest)  # the spread between profiles carried
    order, shuffle = cost_model.placement_shares(pooled)  # the one profile with placement runs, on the pooled T
    assert order == pytest.approx(0.1) and shuffle == pytest.approx(1.1 * 0.1)
    # the same shares from a second profile: the turns add up and their spread stays the profiles' own
    again = cost_model.pooled_profile([older, timed(0.2, 0.0, 900, placement=(0.22, 0.242))])
    assert cost_model.placement_shares(again) == pytest.approx((0.1, 0.11))
    assert cost_model.profile_value(again, "placement_runs") == 12
    assert cost_model.profile_value(again, "placement_ordered_sd_log") == pytest.approx(0.02 * math.sqrt(10 / 11))
    # one profile is read as it is
    assert cost_model.pooled_profile([newest]) is newest


def test_a_large_block_grown_in_place_under_the_baseline_takes_the_grow_cell_in_proportion_to_its_size():
    from analysis.harness.workloads.builtin import CALL_GROW, CALL_GROW_PAGE, CALL_WORKLOADS

    assert cost_model.GROW_STEPS == {cost_model.GROW: CALL_GROW[2], cost_model.GROW_PAGE: CALL_GROW_PAGE[2]}
    assert CALL_WORKLOADS[f"calls-{CALL_GROW[0]}-grow"].cell_pattern == cost_model.GROW
    assert CALL_WORKLOADS[f"calls-{CALL_GROW_PAGE[0]}-grow-page"].cell_pattern == cost_model.GROW_PAGE
    # 100 reallocs to the 1 MiB class and 10 to the 256-byte class, all grown in place under the baseline: the small
    # class's stay fresh pairs (a slab allocator cannot grow a block past its class), the large class's are no
    # fresh block but 100 growing reallocs, each 0.75 MiB over the cell's mean block of (64 KiB + 4 MiB) / 2
    rows = [("realloc_calls", 1048576, 100), ("realloc_calls", 256, 10), ("realloc_grown", 1048576, 100),
            ("realloc_grown", 256, 10), ("realloc_grow", None, 110), ("realloc_grown_pages", 1048576, 100)]
    p = profile(rows)
    grow = pd.concat([COSTS, costs([("grow", 4 * 2**20, 200_000.0, 20_000.0)])], ignore_index=True)
    steps = 100 * 0.75 * 2**20 / ((65536 + 4 * 2**20) / 2)
    got = cost_model.grown_pairs(p, grow)
    assert list(got["pattern"]) == ["grow"] and got["pairs"].iloc[0] == pytest.approx(steps)
    added = cost_model.predict(p, grow).added_s
    assert added == pytest.approx((10 * 20.0 + steps * 200_000.0) * 1e-9)
    # without the cell (a kind that has not measured it), or with nothing grown in place: as before
    assert cost_model.grown_pairs(p, COSTS).empty
    assert cost_model.predict(p, COSTS).added_s == pytest.approx(10 * 20.0 * 1e-9)
    moved = profile(rows + [("realloc_grown_moved", 1048576, 100)])
    assert cost_model.grown_pairs(moved, grow).empty
    # grows within the block's pages (a few bytes at a time) are no step; a profile without the count, none
    within = profile(rows[:-1] + [("realloc_grown_pages", 1048576, 10)])
    assert cost_model.grown_pairs(within, grow)["pairs"].iloc[0] == pytest.approx(steps / 10)
    assert cost_model.grown_pairs(profile(rows[:-1]), grow).empty


def test_grows_within_a_large_blocks_pages_take_what_the_small_cells_add_with_the_block():
    """The small grow cells (128 KiB, 1 MiB and 4 MiB blocks grown 256 bytes a step) cross the same pages a step,
    so a step's cost beyond the smallest cell's is what it adds with the block: a grow the baseline did within a
    large block's pages takes that at its block (0.75 c), linear between the cells' mean blocks, none below the
    smallest, along the line from the smallest through the largest beyond it. An allocator whose two largest cells
    agree within their standard errors (one-sided) is charged nothing; so is a profile or a kind without the counts
    or with one cell."""
    from analysis.harness.workloads.builtin import (CALL_GROW_SMALL, CALL_GROW_SMALL_LARGE, CALL_GROW_SMALL_SLAB,
                                                    CALL_WORKLOADS)

    cells_measured = (CALL_GROW_SMALL_SLAB, CALL_GROW_SMALL, CALL_GROW_SMALL_LARGE)
    assert {c[2] for c in cells_measured} == {cost_model.GROW_SMALL_STEP}
    for cell in cells_measured:
        assert CALL_WORKLOADS[f"calls-{cell[0]}-grow-small"].cell_pattern == cost_model.GROW_SMALL
    slab, mid, big = 2**17, 2**20, 4 * 2**20
    m_slab, m_mid, m_big = ((256 + c) / 2 for c in (slab, mid, big))

    def cells(slab_ns, mid_ns, big_ns, half=0.1):
        return pd.concat([COSTS, costs([("grow-small", slab, slab_ns, 50.0), ("grow-small", mid, mid_ns, mid_ns * half),
                                        ("grow-small", big, big_ns, big_ns * half)])], ignore_index=True)

    def profile_of(c, within):  # `within` grows to class c that stayed in the block's pages, 10 more past a page
        return profile([("realloc_calls", c, within + 10), ("realloc_grow", None, within + 10),
                        ("realloc_grown", c, within + 10), ("realloc_grown_in_place", c, 10),
                        ("realloc_grown_in_place_pages", c, 10)])

    moving = cells(80.0, 130_000.0, 650_000.0)  # every step past the slab classes a move, in proportion to the block
    # 900 grows in the 2 MiB class, blocks of 1.5 MiB: between the 1 and the 4 MiB cells' mean blocks
    got = cost_model.grown_within_pages(profile_of(2**21, 900), moving).set_index("size_class")
    t = (0.75 * 2**21 - m_mid) / (m_big - m_mid)
    assert set(got["less_class"]) == {slab}
    assert got.at[mid, "pairs"] == pytest.approx(900 * (1 - t)) and got.at[big, "pairs"] == pytest.approx(900 * t)
    parts = cost_model.predict(profile_of(2**21, 900), moving).parts
    small = parts[parts["pattern"] == "grow-small"]
    expected = 900 * ((1 - t) * (130_000.0 - 80.0) + t * (650_000.0 - 80.0)) * 1e-9
    assert small["added_s"].sum() == pytest.approx(expected)
    # blocks of the 128 KiB class (96 KiB) lie above the slab cell's mean (64 KiB): part of the way to the 1 MiB
    # cell; those of the 64 KiB class (48 KiB) lie below it and take nothing; 64 MiB blocks take the line beyond
    near = cost_model.grown_within_pages(profile_of(slab, 100), moving).set_index("size_class")
    assert list(near.index) == [mid] and near.at[mid, "pairs"] == pytest.approx(100 * (0.75 * slab - m_slab) / (m_mid - m_slab))
    assert cost_model.grown_within_pages(profile_of(2**16, 100), moving).empty
    far = cost_model.grown_within_pages(profile_of(2**26, 10), moving).set_index("size_class")
    assert list(far.index) == [big] and far.at[big, "pairs"] == pytest.approx(10 * (0.75 * 2**26 - m_slab) / (m_big - m_slab))
    # the two largest cells within one-sided noise, or a per-call cost the same in every cell: nothing
    p = profile_of(2**21, 900)
    se = math.hypot(13_000.0, 65_000.0) / cost_model.Z

    def apart(z):
        return pd.concat([COSTS, costs([("grow-small", mid, 130_000.0, 13_000.0),
                                        ("grow-small", big, 130_000.0 + z * se, 65_000.0)])], ignore_index=True)

    assert not cost_model.grown_within_pages(p, apart(1.7)).empty
    assert cost_model.grown_within_pages(p, apart(1.6)).empty
    assert cost_model.grown_within_pages(p, cells(600.0, 620.0, 640.0)).empty
    # one cell, or a profile without the in-place count, or every grow past a page: nothing
    assert cost_model.grown_within_pages(p, moving[(moving["pattern"] != "grow-small") | (moving["size_class"] == mid)]).empty
    assert cost_model.grown_within_pages(profile([("realloc_grown", 2**21, 910)]), moving).empty
    assert cost_model.grown_within_pages(profile_of(2**21, 0), moving).empty


def test_grows_are_split_between_the_grow_cells_by_the_pages_each_added():
    """With both grow cells measured and the pages the in-place grows added counted, the grows take x_page steps of
    the page cell and x steps of the 64 KiB cell, their mean blocks summing to the program's and their steps to its
    pages; a program growing a page at a time lies between the cells, one growing in large jumps takes the 64 KiB
    cell alone, and one growing by a page on blocks larger than the cells' takes the page cell alone."""
    big = 4 * 2**20
    m1, m2 = (4096 + big) / 2, (65536 + big) / 2
    cells = pd.concat([COSTS, costs([("grow", big, 200_000.0, 20_000.0), ("grow-page", big, 10_000.0, 1_000.0)])],
                      ignore_index=True)

    def split(c, grows, pages, moved_rows=()):
        p = profile([("realloc_calls", c, grows), ("realloc_grown", c, grows), ("realloc_grow", None, grows),
                     ("realloc_grown_pages", c, grows), ("realloc_grown_in_place", c, grows),
                     ("realloc_grown_in_place_pages", c, pages), *moved_rows])
        got = cost_model.grown_pairs(p, cells)
        return dict(zip(got["pattern"], got["pairs"]))

    # 100 grows of the 2 MiB class, a page each: the blocks sum to 100 * 0.75 * 2 MiB, the steps to 100 pages
    blocks, pages = 100 * 0.75 * 2**21, 100 * 4096.0
    x = split(2**21, 100, 100)
    assert set(x) == {"grow", "grow-page"}
    assert x["grow-page"] * m1 + x["grow"] * m2 == pytest.approx(blocks)
    assert x["grow-page"] * 4096 + x["grow"] * 65536 == pytest.approx(pages)
    # 16 pages a grow on the same blocks: nearer the 64 KiB cell; 256 pages a grow: that cell alone
    assert split(2**21, 100, 1600)["grow"] > x["grow"]
    assert split(2**21, 100, 25600) == {"grow": pytest.approx(blocks / m2)}
    # a page a grow on 64 MiB blocks, smaller steps for their size than the page cell's: that cell alone
    assert split(2**26, 100, 100) == {"grow-page": pytest.approx(100 * 0.75 * 2**26 / m1)}
    # a kind without the page cell: the 64 KiB cell alone, as before it
    only = cost_model.grown_pairs(profile([("realloc_grown_pages", 2**21, 100), ("realloc_grown_in_place", 2**21, 100),
                                           ("realloc_grown_in_place_pages", 2**21, 100)]),
                                  cells[cells["pattern"] != "grow-page"])
    assert dict(zip(only["pattern"], only["pairs"])) == {"grow": pytest.approx(blocks / m2)}
    # the in-place count, where the profile has it, stands for the grows past a page less the moved ones
    assert split(2**21, 100, 100, [("realloc_grown_moved", 2**21, 100)]) == x
