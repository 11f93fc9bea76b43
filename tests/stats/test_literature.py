import json
import re

import numpy as np
import pytest

from analysis.publish.results import reanalysis
from analysis.stats import literature
from analysis.paths import REPO

SEEDS = REPO.parent / "shared" / "seeds"


@pytest.fixture(scope="module")
def fig():
    return literature.load_figures()


@pytest.mark.skipif(not SEEDS.is_dir(), reason="shared/seeds is not beside this clone")
def test_every_row_cites_a_line_that_carries_its_text(fig):
    texts = {f: (SEEDS / f).read_text().splitlines() for f in fig["file"].unique()}
    for _, row in fig.iterrows():
        assert row["file"].startswith(row["seed"] + "_")
        assert row["text"] in texts[row["file"]][row["line"] - 1], (row["file"], row["line"])


def test_values_agree_with_their_text(fig):
    for _, row in fig[fig["kind"] != "claim"].iterrows():
        text = row["text"]
        hms = re.search(r"(\d+):(\d\d):(\d\d)", text)
        if hms:
            h, m, s = map(int, hms.groups())
            assert row["value"] == h * 3600 + m * 60 + s
            continue
        numbers = [float(x.replace(",", "")) for x in re.findall(r"\d[\d,]*\.?\d*", text)]
        scale = 1e6 if re.search(r"\dM\b", text) else 1.0
        assert any(np.isclose(row["value"], n * scale) for n in numbers), (row["line"], text)


def test_every_seed_and_the_figures_the_issue_names_are_there(fig):
    assert set(fig["seed"]) == {"000", "001", "002", "003", "004"}
    metrics = set(fig["metric"])
    for m in ("wall", "user", "sys", "instructions", "maxrss", "minor_faults", "page_faults",
              "d1_read_misses"):
        assert m in metrics
    wall3 = fig[(fig["seed"] == "003") & (fig["metric"] == "wall")]
    assert (wall3["condition"] == "unpatched").sum() == 6
    assert (wall3["condition"] == "patched").sum() == 7  # the repeated line is kept


def test_slips_are_flagged_not_corrected(fig):
    slips = literature.slips(fig)
    flagged = {(r.seed, r.line) for r in slips.itertuples()}
    assert {("003", 298), ("001", 2), ("000", 45), ("000", 57)} <= flagged
    row = fig[(fig["seed"] == "001") & (fig["text"].str.contains("6536"))]
    assert row["value"].iloc[0] == 6536  # as printed
    assert fig[(fig["seed"] == "003") & (fig["line"] == 298) & (fig["metric"] == "wall")
               ]["value"].iloc[0] == 32.11


def test_reanalysis_003_with_and_without_the_outlier(fig):
    t = literature.reanalyse(fig)
    s3 = t[t["seed"] == "003"].set_index(["scenario", "method"])
    robust = s3.xs("yuen-trim20-log", level="method")
    naive = s3.xs("welch-raw (naive)", level="method")
    assert (robust["ci_high"] < 1).all()  # the speedup holds however the outlier is treated
    assert naive.loc["as published", "ci_high"] > 1  # a t-test on raw times misses it ...
    assert naive.loc["without both", "ci_high"] < 1  # ... unless the outlier is removed by hand
    assert robust.loc["as published", "ratio"] == pytest.approx(0.92, abs=0.01)
    assert robust.loc["without the repeated line", "n"] == 6


def test_single_runs_get_no_interval_and_counts_are_exact(fig):
    t = literature.reanalyse(fig)
    single = t[t["seed"].isin(["000", "001"])]
    assert (single["method"] == "single run: no interval").all()
    assert single["ci_low"].isna().all()
    wall = t[(t["seed"] == "001") & (t["metric"] == "wall")]["ratio"].iloc[0]
    assert wall == pytest.approx(8563 / 6546)
    cg = t[(t["seed"] == "002") & t["method"].str.startswith("exact")].set_index("metric")
    assert cg.loc["instructions_per_free", "ratio"] == pytest.approx(1.087, abs=0.001)
    assert cg.loc["data_accesses_per_free", "ratio"] == pytest.approx(1.151, abs=0.001)
    sky = t[t["comparison"].str.contains("Skylake")].iloc[0]
    assert sky["ci_low"] < 1 < sky["ci_high"]  # two runs per arm cannot resolve 2.5%


def test_write_outputs(tmp_path):
    numbers = reanalysis.write_outputs(tmp_path)
    # seed 001 prints 1:49:06 and 2:22:43 elapsed; its ratio divides by a mistyped 6536 s
    assert numbers["seed001_wall_ratio_corrected"] == pytest.approx(8563 / 6546)
    for name in ("literature_reanalysis.csv", "literature_slips.csv", "literature_003.svg",
                 "literature_numbers.json"):
        assert (tmp_path / name).stat().st_size > 0
    saved = json.loads((tmp_path / "literature_numbers.json").read_text())
    assert saved["slips_flagged"] == numbers["slips_flagged"] >= 4
    assert (tmp_path / "literature_003.svg").read_text().lstrip().startswith("<?xml")
