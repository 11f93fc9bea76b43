import numpy as np
import pandas as pd
import pytest

from analysis.contract.schema import usable_trials
from analysis.stats import compare
from analysis.stats import simulate
from analysis.cli import main
from analysis.errors import HeapcostError
from conftest import cli

REQUIRED = ["workload", "allocator", "baseline", "metric", "ratio", "ci_low", "ci_high", "n",
            "n_baseline"]


def _trials(seed=1, **kw):
    sc = simulate.Scenario(ratios={"glibc": 1.0, "hard": 1.10, "same": 1.0},
                           workloads={"w1": 0.5, "w2": 0.2}, n_blocks=20, **kw)
    return sc, simulate.simulate_trials(sc, seed)


def test_compare_cli_end_to_end(tmp_path):
    _, t = _trials()
    src, out = tmp_path / "trials.csv", tmp_path / "result.csv"
    t.to_csv(src, index=False)
    proc = cli("compare", str(src), "--baseline", "glibc", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "hard" in proc.stdout and "95% CI" in proc.stdout
    res = pd.read_csv(out)
    assert list(res.columns[:9]) == REQUIRED
    assert len(res) == 4  # 2 workloads x 2 allocators
    assert set(res["baseline"]) == {"glibc"}
    hard = res[res["allocator"] == "hard"]
    assert ((hard["ci_low"] <= 1.10) & (1.10 <= hard["ci_high"])).all()


@pytest.mark.parametrize("mutate, needle", [
    (lambda t: t.drop(columns="wall_s"), "lacks column"),
    (lambda t: t.assign(wall_s=t["wall_s"].astype(object).where(t.index != 50, "fast")),
     "non-numeric"),
    (lambda t: t.assign(wall_s=t["wall_s"].where(t.index != 50, -1.0)), "non-positive"),
    (lambda t: t.assign(wall_s=t["wall_s"].where(t.index != 50, np.nan)), "missing"),
    (lambda t: t[~((t["allocator"] == "hard") & (t["workload"] == "w2"))
                 | (t["seq"] < 30)], "at least 5"),
])
def test_malformed_input_gets_one_line_error(tmp_path, capsys, mutate, needle):
    _, t = _trials()
    t = mutate(t)
    src = tmp_path / "bad.csv"
    t.to_csv(src, index=False)
    assert main(["compare", str(src), "--baseline", "glibc"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("heapcost: error:") and "\n" not in err and needle in err
    assert "Traceback" not in err


def test_unknown_baseline_and_missing_file_and_garbage(tmp_path, capsys):
    _, t = _trials()
    src = tmp_path / "t.csv"
    t.to_csv(src, index=False)
    assert main(["compare", str(src), "--baseline", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown baseline 'nope'" in err and "glibc" in err and "hard" in err
    assert main(["compare", str(tmp_path / "missing.csv"), "--baseline", "glibc"]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "empty.csv").write_text("")
    assert main(["compare", str(tmp_path / "empty.csv"), "--baseline", "glibc"]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_minimal_csv_without_optional_columns():
    rng = np.random.default_rng(3)
    t = pd.DataFrame({"workload": "w", "allocator": np.repeat(["a", "b"], 8),
                      "time": np.r_[rng.normal(1.0, 0.01, 8), rng.normal(2.0, 0.02, 8)]})
    res = compare.compare(t, "a", "time").results
    assert res.loc[0, "ratio"] == pytest.approx(2.0, rel=0.02)
    assert res.loc[0, "method"] == "yuen-trim20-log"
    assert not res.loc[0, "adjusted"]


def test_failed_and_warmup_runs_are_excluded_outliers_are_kept():
    sc, t = _trials(failure_prob=0.05)
    comp = compare.compare(t, "glibc")
    used = usable_trials(t)
    counts = used.groupby(["workload", "allocator"]).size()
    for _, r in comp.results.iterrows():
        assert r["n"] == counts[(r["workload"], r["allocator"])]
    assert len(comp.trials) == len(used)
    assert set(comp.trials["outlier"]) <= {"none", "slow-clock", "slow-unexplained", "fast"}


def test_injected_outliers_are_classified():
    _, t = _trials(noise=simulate.NoiseModel(clock_drop_prob=0.0, interference_prob=0.0,
                                              outlier_prob=0.0, tail_df=None))
    t.loc[t.index[40:43], "wall_s"] *= 1.5
    comp = compare.compare(t, "glibc")
    flagged = comp.trials.set_index("seq").loc[t["seq"].iloc[40:43], "outlier"]
    assert (flagged == "slow-unexplained").all()
    assert (comp.trials["outlier"] != "none").sum() <= 3 + 3  # at most 2.5% false flags


def test_probe_adjustment_supported_only_when_the_clock_matters():
    _, t = _trials(noise=simulate.NoiseModel(clock_drop_prob=0.1))
    res = compare.compare(t, "glibc").results
    assert res["adjustment_supported"].all() and res["adjusted"].all()
    assert res["probe_slope"].between(0.9, 1.1).all()  # the simulated workload tracks the clock
    unadj_width = np.log(res["ci_high_unadjusted"] / res["ci_low_unadjusted"])
    assert (np.log(res["ci_high"] / res["ci_low"]) < unadj_width).all()

    quiet = t.copy()
    quiet["clock_probe_s"] = 0.002 * np.exp(np.random.default_rng(0).normal(0, 0.003, len(t)))
    # a probe that is pure noise: the adjustment is reported but not used
    res = compare.compare(quiet, "glibc").results
    assert (~res["adjusted"]).sum() >= 3
    assert res["ratio_adjusted"].notna().all()
    assert not compare.compare(t, "glibc", use_probe=False).results["adjusted"].any()


def test_probe_slope_interval_covers_the_true_slope():
    hits = 0
    for seed in range(20):
        _, t = _trials(seed=seed, noise=simulate.NoiseModel(clock_drop_prob=0.1))
        res = compare.compare(t, "glibc").results.drop_duplicates("workload")
        hits += ((res["probe_slope_ci_low"] <= 1) & (1 <= res["probe_slope_ci_high"])).sum()
    assert hits >= 34  # of 40; nominal 38


def test_other_metrics_and_geomean_and_noninferiority():
    sc = simulate.Scenario(ratios={"glibc": 1.0, "hard": 1.10, "same": 1.0},
                           workloads={"w1": 0.5, "w2": 0.2}, n_blocks=20,
                           rss_ratios={"glibc": 1.0, "hard": 1.5, "same": 1.0})
    t = simulate.simulate_trials(sc, 4)
    rss = compare.compare(t, "glibc", "maxrss_kb").results
    hard = rss[rss["allocator"] == "hard"]
    assert ((hard["ci_low"] <= 1.5) & (1.5 <= hard["ci_high"])).all()
    assert rss["probe_slope"].isna().all()  # the clock does not scale memory
    cpu = compare.compare(t, "glibc", "cpu_s")
    assert (cpu.results["metric"] == "cpu_s").all()
    gm = cpu.geomean.set_index("allocator")
    assert gm.loc["hard", "ci_low"] <= 1.10 <= gm.loc["hard", "ci_high"]
    assert gm.loc["hard", "workloads"] == 2
    wall = compare.compare(t, "glibc", margin=0.05).results.set_index(["workload", "allocator"])
    assert wall["noninferior"].xs("same", level="allocator").all()
    assert not wall["noninferior"].xs("hard", level="allocator").any()
    assert (wall["p_noninferior_holm"] >= wall["p_noninferior"]).all()


def test_invocations_are_averaged_to_one_unit_per_process():
    rng = np.random.default_rng(5)
    rows = []
    for alloc, ratio in (("a", 1.0), ("b", 1.3)):
        for inv in range(6):
            process = rng.normal(0, 0.05)  # between-process noise shared by its iterations
            for it in range(10):
                rows.append({"workload": "w", "allocator": alloc, "invocation": inv,
                             "wall_s": ratio * np.exp(process + rng.normal(0, 0.001))})
    res = compare.compare(pd.DataFrame(rows), "a").results
    assert res.loc[0, "n"] == 6 and res.loc[0, "n_baseline"] == 6
    # 60 pooled iterations would give a far too narrow interval; 6 processes do not
    assert res.loc[0, "ci_high"] / res.loc[0, "ci_low"] > 1.05


def test_runs_needed_and_pairs_to_extend():
    _, t = _trials()
    res = compare.compare(t, "glibc", target=0.002).results
    assert (res["runs_needed"] > res["n"]).all()
    assert len(compare.pairs_to_extend(res, 0.002)) == len(res)
    assert compare.pairs_to_extend(res, 0.5).empty


def test_format_table_lists_every_row():
    _, t = _trials()
    comp = compare.compare(t, "glibc")
    text = compare.format_table(comp)
    assert text.count("\n") > len(comp.results)
    for _, r in comp.results.iterrows():
        assert f"{r['ratio']:.4f}" in text


def test_prepare_reports_empty_selection():
    t = pd.DataFrame({"workload": ["w"], "allocator": ["a"], "wall_s": [1.0], "status": ["crashed"]})
    with pytest.raises(HeapcostError, match="no usable runs"):
        compare.prepare(t, "wall_s")


def test_callgrind_counts_are_exact_and_per_free(tmp_path, capsys):
    counts = pd.DataFrame({
        "workload": ["w", "w", "v", "v"], "allocator": ["glibc", "hard", "glibc", "hard"],
        "status": "ok", "instructions": [1000, 1300, 500, 600], "free_calls": [10, 10, 5, 4]})
    t = compare.exact_ratios(counts, "glibc").set_index("workload")
    assert t.loc["w", "ratio"] == pytest.approx(1.3) and t.loc["w", "method"] == "exact"
    assert t.loc["w", "ci_low"] == t.loc["w", "ci_high"] == t.loc["w", "ratio"]
    assert t.loc["v", "ratio_per_free"] == pytest.approx((600 / 4) / (500 / 5))
    src, out = tmp_path / "counts.csv", tmp_path / "r.csv"
    counts.to_csv(src, index=False)
    assert main(["compare", str(src), "--baseline", "glibc", "--metric", "instructions",
                 "--out", str(out)]) == 0
    assert pd.read_csv(out)["ratio"].tolist() == pytest.approx([1.2, 1.3])


def test_process_variance_components_with_invocations():
    rng = np.random.default_rng(8)
    rows = []
    for alloc in ("a", "b"):
        for inv in range(30):
            proc = rng.normal(0, 0.05)
            rows += [{"workload": "w", "allocator": alloc, "invocation": inv,
                      "wall_s": float(np.exp(proc + rng.normal(0, 0.01)))} for _ in range(8)]
    res = compare.compare(pd.DataFrame(rows), "a").results
    assert res.loc[0, "var_between_process"] == pytest.approx(0.05 ** 2, rel=0.5)
    assert res.loc[0, "var_within_process"] == pytest.approx(0.01 ** 2, rel=0.2)
    assert res.loc[0, "iterations_per_process"] == 8


def test_allocators_at_a_reduced_scale_are_compared_with_the_baseline_at_that_scale():
    sc_full = simulate.Scenario(ratios={"glibc": 1.0, "fast": 1.1}, workloads={"w": 0.5}, n_blocks=10)
    sc_small = simulate.Scenario(ratios={"glibc": 1.0, "slow": 3.0}, workloads={"w": 0.05},
                                 n_blocks=10)
    full = simulate.simulate_trials(sc_full, 1)
    small = simulate.simulate_trials(sc_small, 2).assign(scale=0.1)
    small["seq"] += len(full)
    res = compare.compare(pd.concat([full, small], ignore_index=True), "glibc").results
    res = res.set_index("allocator")
    assert res.loc["slow", "scale"] == 0.1 and res.loc["fast", "scale"] == 1.0
    assert res.loc["slow", "ci_low"] <= 3.0 <= res.loc["slow", "ci_high"]  # not 30x
    assert res.loc["slow", "n_baseline"] == 10
    lone = small[small["allocator"] == "slow"]
    with pytest.raises(HeapcostError, match="none of the baseline"):
        compare.compare(pd.concat([full, lone], ignore_index=True), "glibc")
