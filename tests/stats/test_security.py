"""Estimators against simulated data with a known truth (seeded), the score and the claims check."""
import json
import math

import numpy as np
import pytest

from analysis.publish.security import writer
from analysis.stats import security as S


def test_clopper_pearson_known_values():
    assert S.clopper_pearson(0, 20)[0] == 0
    assert S.clopper_pearson(0, 20)[1] == pytest.approx(0.1684, abs=1e-4)
    assert S.clopper_pearson(20, 20) == (pytest.approx(0.8316, abs=1e-4), 1.0)
    assert S.clopper_pearson(0, 0) == (None, None)


def simulated_addresses(rng, n, random_bits, base=0x7F0000000000, shift=12):
    return [base | (int(rng.integers(0, 2 ** random_bits)) << shift) if random_bits else base for _ in range(n)]


def test_fixed_addresses_have_no_entropy():
    assert S.address_entropy([0x55550000] * 20) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize("truth", [8, 20, 28])
def test_address_entropy_recovers_known_bits_and_its_interval_covers_them(truth):
    rng = np.random.default_rng(truth)
    reps, covered, estimates = 40, 0, []
    for _ in range(reps):
        bits, lo, hi = S.address_entropy(simulated_addresses(rng, 20, truth), seed=int(rng.integers(1 << 30)),
                                         reps=300)
        assert lo <= bits <= hi
        covered += lo <= truth <= hi
        estimates.append(bits)
    assert abs(np.mean(estimates) - truth) < 0.06 * truth + 0.3
    assert covered / reps >= 0.85


def test_address_entropy_ignores_alignment_bits():
    rng = np.random.default_rng(5)
    aligned = simulated_addresses(rng, 30, 10, shift=16)  # bits 16..25 random, the rest fixed
    assert S.address_entropy(aligned, reps=200)[0] == pytest.approx(10, abs=1.0)


def test_placement_entropy_known_truths():
    rng = np.random.default_rng(7)
    sequential = [list(range(0x1000, 0x1000 + 64 * 256, 64))] * 10
    assert S.placement_entropy(sequential, reps=200) == (0.0, 0.0, 0.0)
    uniform8 = [np.cumsum(rng.choice(np.arange(1, 9) * 64, 255)).tolist() for _ in range(20)]
    bits, lo, hi = S.placement_entropy(uniform8, reps=300)
    assert bits == pytest.approx(3.0, abs=0.05) and lo <= 3.0 <= hi
    k, n = S.predictable_steps(sequential)
    assert (k, n) == (2550, 2550)


def rows_for(alloc, outcomes, **extra):
    return [{"allocator": alloc, "probe": p, "outcome": o, **extra.get(p, {})} for p, o in outcomes.items()]


def test_score_extremes_and_not_applicable():
    probes = ["double-free", "freelist-poison", "uaf-read"]
    rows = (rows_for("safe", {p: "caught" for p in probes})
            + rows_for("weak", {p: "missed" for p in probes})
            + rows_for("partial", {"double-free": "missed", "freelist-poison": "n/a", "uaf-read": "caught"}))
    s = S.scores(rows)
    assert s["safe"]["score"] == 100 and s["weak"]["score"] == 0
    w = S.DEFAULT_WEIGHTS
    assert s["partial"]["score"] == pytest.approx(100 * (1 - w["double-free"] / (w["double-free"] + w["uaf-read"])))
    assert s["partial"]["not_applicable"] == ["freelist-poison"]


def test_weights_are_adjustable_and_rates_count():
    rows = rows_for("a", {"double-free": "missed", "uaf-read": "caught"})
    assert S.scores(rows, {"double-free": 0, "uaf-read": 1})["a"]["score"] == 100
    assert S.scores(rows, {"double-free": 1, "uaf-read": 0})["a"]["score"] == 0
    random = rows_for("r", {"reuse-immediate": "caught"}, **{"reuse-immediate": {"rate": "0.25"}})
    assert S.scores(random)["r"]["score"] == pytest.approx(75)
    # a mitigated row's trials without the primitive still cost the attacker less than a caught one's
    mitigated = rows_for("m", {"reuse-immediate": "mitigated"}, **{"reuse-immediate": {"rate": "0.25"}})
    assert S.scores(mitigated)["m"]["score"] == pytest.approx(100 * (1 - 0.25 - 0.75 * S.MITIGATED_LOSS))
    late = rows_for("l", {"double-free": "late-crash"}, **{"double-free": {"rate": "0"}})
    assert S.scores(late)["l"]["score"] == pytest.approx(100 * (1 - S.LATE_CRASH_LOSS))


def test_entropy_losses_scale_with_bits():
    assert S.probe_loss({"probe": "address-entropy", "outcome": "mitigated", "bits": "28"}) == 0
    assert S.probe_loss({"probe": "address-entropy", "outcome": "mitigated", "bits": "14"}) == pytest.approx(0.5)
    assert S.probe_loss({"probe": "placement-entropy", "outcome": "missed", "bits": "0"}) == 1
    assert S.probe_loss({"probe": "placement-entropy", "outcome": "n/a", "bits": ""}) is None


def test_claims_against_observations():
    rows = (rows_for("g", {"double-free": "caught", "double-free-interleaved": "caught",
                           "double-free-cache-full": "missed", "freelist-poison": "caught"})
            + rows_for("j", {"double-free": "missed", "uaf-read": "mitigated"}))
    claims = {"g": ("double-free-detect",), "j": ("free-poison",)}
    found = {(d["allocator"], d["defence"]): d for d in S.disagreements(rows, claims)}
    assert found[("g", "double-free-detect")]["kind"] == "claimed-not-seen"
    assert "double-free-cache-full=missed" in found[("g", "double-free-detect")]["probes"]
    assert found[("g", "freelist-protect")]["kind"] == "seen-not-claimed"
    assert ("j", "free-poison") not in found  # claimed and seen
    assert ("j", "double-free-detect") not in found  # not claimed, not seen


def test_every_defence_id_maps_to_known_probes():
    from analysis.harness.allocators.catalog import DEFENCES
    from analysis.harness.security.probes import PROBES

    assert set(S.DEFENCE_PROBES) == set(DEFENCES)
    for probe_ids, _ in S.DEFENCE_PROBES.values():
        assert set(probe_ids) <= set(PROBES)
    # primitive-sequences writes primitives.csv, not probe rows: it has no weight in the score
    # the probes read beside the score (scored=False) have no weight either
    assert set(S.PROBE_WEIGHTS) == {p for p, probe in PROBES.items() if probe.kind != "primitives" and probe.scored}


def test_outputs_are_written(tmp_path):
    rows = (rows_for("a", {"double-free": "caught", "address-entropy": "mitigated"},
                     **{"address-entropy": {"bits": "20"}})
            + rows_for("b", {"double-free": "missed", "address-entropy": "n/a"}))
    numbers = writer.write_outputs(rows, tmp_path, claims={"a": (), "b": ("double-free-detect",)})
    for name in ("outcomes.svg", "scores.svg", "scores.csv", "disagreements.csv", "numbers.json"):
        assert (tmp_path / f"security_{name}").stat().st_size > 0
    assert numbers["disagreements"]["claimed-not-seen"] == 1
    assert json.loads((tmp_path / "security_numbers.json").read_text())["scores"]["b"] == 0
    assert not math.isnan(numbers["scores"]["a"])


# ------------------------------------------------------------------ sizes, outcome counts, the score interval
def sized(alloc, probe, size, **counts):
    n = sum(v for k, v in counts.items() if k != "detected_silently")
    text = " ".join(f"{k}={v}" for k, v in counts.items() if k != "detected_silently")
    if counts.get("detected_silently"):
        text += f" detected-silently={counts['detected_silently']}"
    missed = counts.get("missed", 0)
    outcome = max((k for k in counts if k != "detected_silently"), key=lambda k: counts[k])
    return {"allocator": alloc, "probe": probe, "size": str(size), "outcome": outcome, "outcomes": text,
            "trials": str(n), "rate": str(missed / n)}


def jeffreys_loss(missed=0, late=0, stopped=0, mitigated=0):
    """The posterior mean loss of a row by hand: Dirichlet(counts + 1/2) over (missed, late, mitigated, caught);
    `stopped` counts as caught."""
    return ((missed + 0.5) + (late + 0.5) * S.LATE_CRASH_LOSS + (mitigated + 0.5) * S.MITIGATED_LOSS) / (
        missed + late + mitigated + stopped + 2)


def test_a_probes_loss_averages_its_size_classes_equally():
    rows = [sized("a", "double-free", s, missed=20) for s in (16, 24, 41, 64)]  # small: all missed
    rows += [sized("a", "double-free", s, caught=20) for s in (4000, 5000)]  # medium: all caught
    rows += [sized("a", "double-free", 262144, mitigated=20)]  # large: mitigated
    loss = (jeffreys_loss(missed=20) + jeffreys_loss(stopped=20) + jeffreys_loss(mitigated=20)) / 3
    assert S.scores(rows)["a"]["score"] == pytest.approx(100 * (1 - loss))
    assert S.size_weights([16, 24, 4000, 262144]) == {16: 1 / 6, 24: 1 / 6, 4000: 1 / 3, 262144: 1 / 3}
    assert S.size_weights([None]) == {None: 1.0}


def test_late_crashes_and_failed_starts_in_the_counts():
    late = [sized("l", "double-free", 41, mitigated=10)]
    late[0]["outcomes"] = "late-crash=10 mitigated=10"
    assert S.scores(late)["l"]["score"] == pytest.approx(100 * (1 - jeffreys_loss(late=10, mitigated=10)))
    dead = {"allocator": "d", "probe": "double-free", "size": "41", "outcome": "allocator-failed-to-start",
            "outcomes": "allocator-failed-to-start=20", "trials": "20"}
    assert S.scores([dead])["d"]["not_applicable"] == ["double-free"]


def test_the_point_and_the_interval_come_from_one_posterior():
    fixed = [sized("f", p, 41, caught=20) for p in ("double-free", "uaf-read")]
    t = S.score_intervals(fixed, draws=4000).set_index("allocator")
    # unanimous rows are not known exactly: the point is below 100 and the interval has width on both sides
    assert t.loc["f", "score"] == pytest.approx(100 * (1 - jeffreys_loss(stopped=20)))
    assert 85 < t.loc["f", "score_low"] < t.loc["f", "score"] < t.loc["f", "score_high"] <= 100
    mixed = [sized("m", "double-free", 41, missed=10, caught=10)]
    t = S.score_intervals(mixed, draws=4000, seed=1).set_index("allocator")
    assert t.loc["m", "score"] == pytest.approx(100 * (1 - jeffreys_loss(missed=10, stopped=10)))
    assert 25 < t.loc["m", "score_low"] < t.loc["m", "score"] < t.loc["m", "score_high"] < 75
    # the point is the mean of the very draws the interval comes from
    rng = np.random.default_rng(3)
    drawn = S._draw_loss(mixed[0], S.posterior_loss(mixed[0]), rng, 200_000)
    assert drawn.mean() == pytest.approx(S.posterior_loss(mixed[0]), abs=2e-3)


def test_an_entropy_rows_posterior_mean_is_the_mean_of_its_clipped_draws():
    row = {"probe": "reuse-entropy", "outcome": "mitigated", "bits": "3.6", "bits_ci_low": "2.8",
           "bits_ci_high": "4.6"}
    drawn = S._draw_loss(row, S.probe_loss(row), np.random.default_rng(0), 400_000)
    assert drawn.min() == 0 and S.posterior_loss(row) == pytest.approx(drawn.mean(), abs=1e-3)


def test_the_score_interval_covers_a_known_score_about_95_percent_of_the_time():
    """Seeded simulation: an allocator with known miss rates per (probe, size), 20 fresh processes
    per cell; the interval should cover the true score in about 95% of replications."""
    rng = np.random.default_rng(2024)
    probes = ["double-free", "uaf-write", "overflow-16", "uaf-read", "freelist-poison", "reuse-immediate"]
    sizes = (41, 4000, 262144)
    truth_rates = {(p, s): rng.uniform(0.15, 0.85) for p in probes for s in sizes}
    truth_rows = [{"allocator": "t", "probe": p, "size": str(s), "outcome": "missed",
                   "outcomes": f"missed={r * 1e6:.0f} mitigated={(1 - r) * 1e6:.0f}"} for (p, s), r in truth_rates.items()]
    true_score = S.scores(truth_rows)["t"]["score"]
    reps, covered = 200, 0
    for i in range(reps):
        rows = []
        for (p, s), r in truth_rates.items():
            k = int(rng.binomial(20, r))
            rows.append(sized("t", p, s, missed=k, mitigated=20 - k) if 0 < k < 20
                        else sized("t", p, s, **({"missed": 20} if k else {"mitigated": 20})))
        t = S.score_intervals(rows, draws=400, seed=i).iloc[0]
        covered += t["score_low"] <= true_score <= t["score_high"]
    assert 0.90 <= covered / reps <= 0.99


def test_a_detection_that_did_not_stop_the_primitive_is_told_from_caught():
    rows = [sized("ms", "double-free", 41, missed=20, detected_silently=20),
            sized("ms", "double-free", 5000, caught=20)]
    found = {d["defence"]: d for d in S.disagreements(rows, {"ms": ("double-free-detect",)})}
    assert found["double-free-detect"]["kind"] == "detected-silently"
    assert "double-free@41=missed" in found["double-free-detect"]["probes"]
    rows[0]["outcomes"] = "missed=20"
    found = {d["defence"]: d for d in S.disagreements(rows, {"ms": ("double-free-detect",)})}
    assert found["double-free-detect"]["kind"] == "claimed-not-seen"


def test_the_matrix_takes_the_worst_size_and_the_numbers_count_outcomes_per_size(tmp_path):
    rows = [sized("a", "double-free", 41, caught=20), sized("a", "double-free", 5000, missed=20),
            {"allocator": "a", "probe": "address-entropy", "outcome": "mitigated", "bits": "20"},
            {"allocator": "b", "probe": "double-free", "size": "41", "outcome": "allocator-failed-to-start",
             "outcomes": "allocator-failed-to-start=20", "trials": "20"}]
    assert writer.worst_outcome(["caught", "missed", "n/a"]) == "missed"
    assert writer.worst_outcome(["n/a", "allocator-failed-to-start"]) == "allocator-failed-to-start"
    numbers = writer.write_outputs(rows, tmp_path, claims={"a": (), "b": ()})
    assert numbers["outcomes_by_size"] == {"41": {"caught": 1, "allocator-failed-to-start": 1},
                                           "5000": {"missed": 1}, "unsized": {"mitigated": 1}}
    assert (tmp_path / "security_outcomes.svg").stat().st_size > 0


# ------------------------------------------------------------------ entropy that does not saturate
def simulated_placement(rng, processes, bits, steps=255, align=16):
    """Processes of an allocator whose next block lies at one of 2^bits distances, uniformly."""
    return [np.cumsum((rng.integers(0, 2 ** bits, steps) + 1) * align).tolist() for _ in range(processes)]


@pytest.mark.parametrize("truth, processes", [(4, 20), (8, 20), (12, 20), (16, 100)])
def test_placement_entropy_recovers_known_bits_within_half_a_bit(truth, processes):
    # 16 bits needs more processes than the default 20 (standard error 0.46 bit there, 0.21 at 100):
    # the module docstring gives the resolution for n processes.
    rng = np.random.default_rng(truth)
    bits, lo, hi = S.placement_entropy(simulated_placement(rng, processes, truth), reps=300)
    assert bits == pytest.approx(truth, abs=0.5)
    assert lo <= bits <= hi
    # the plug-in estimator this replaces saturates near log2(255) = 8 bits
    if truth >= 12:
        assert S.step_entropy(simulated_placement(rng, 1, truth)[0]) < truth - 3


def test_placement_entropy_interval_covers_the_truth():
    rng = np.random.default_rng(3)
    covered = 0
    for i in range(60):
        bits, lo, hi = S.placement_entropy(simulated_placement(rng, 20, 12), reps=200, seed=i)
        covered += lo <= 12 <= hi
    assert covered / 60 >= 0.85


def test_entropy_bounds_never_exceed_what_the_kernel_supplies():
    rng = np.random.default_rng(11)
    wide = [int(rng.integers(0, 2 ** 40)) << 12 for _ in range(20)]  # 40 independent random bits
    assert max(S.address_entropy(wide, reps=200)) <= S.TARGET_ADDRESS_BITS
    lone = [np.cumsum(rng.integers(1, 2 ** 40, 255)).tolist() for _ in range(3)]
    assert max(S.placement_entropy(lone, reps=50)) <= S.TARGET_ADDRESS_BITS
