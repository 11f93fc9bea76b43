"""The side-by-side table of our ratios and the field's published ones (analysis/publish/results/field.py), on a
SIMULATED run of mimalloc-bench workloads with known true ratios, and on the committed field.csv."""
import csv
import shutil

import numpy as np
import pandas as pd
import pytest

from analysis.errors import HeapcostError
from analysis.paths import DATA_DIR
from analysis.publish.results import field
from simulated_dataset import add_time_run

# glibc = 1; mimalloc2 / jemalloc = 0.8 / 1.0 = 0.8 on every workload, hardened / jemalloc = 1.7
TRUE = {"glibc": 1.0, "jemalloc": 1.0, "mimalloc2": 0.8, "hardened-2026062800": 1.7}
WORKLOADS = {"mib-cfrac": 0.5, "mib-espresso": 0.6, "mib-mstress": 0.4}
HEADER = ["source", "url", "published", "machine", "versions", "benchmark", "workload", "allocator", "reference",
          "our_allocator", "our_reference", "metric", "ratio", "kind", "text", "note"]


def write_field(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(HEADER)
        for bench, alloc, ref, ours, our_ref, ratio in rows:
            w.writerow(["src", "https://example.org", "2020-01-01", "some machine", "v1", bench, f"mib-{bench}",
                        alloc, ref, ours, our_ref, "wall", ratio, "measured", f"{bench} {alloc}", ""])


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("field") / "data"
    add_time_run(root, "20990101T000000Z-time-sim", TRUE, seed=5, n_blocks=40, workloads=WORKLOADS)
    write_field(root / "literature" / "field.csv", [
        ("cfrac", "mi", "je", "mimalloc2", "jemalloc", 0.80),       # the truth: inside our interval
        ("cfrac", "hm", "je", "hardened-2026062800", "jemalloc", 1.20),  # far below the truth 1.7
        ("espresso", "mi", "je", "mimalloc2", "jemalloc", 1.00),    # 25% above the truth 0.8
        ("barnes", "mi", "je", "mimalloc2", "jemalloc", 1.00),      # a program we did not run
        ("cfrac", "tbb", "je", "tbbmalloc", "jemalloc", 1.14),      # an allocator we did not run
    ])
    return root


def test_side_by_side_recovers_the_true_ratio_and_judges_each_figure(data, tmp_path):
    numbers = field.write_outputs(data, tmp_path / "field.csv")
    table = pd.read_csv(tmp_path / "field.csv")
    mi = table[(table["workload"] == "mib-cfrac") & table["pair"].str.startswith("mi /")].iloc[0]
    assert mi["ours_low"] < 0.8 < mi["ours_high"] and mi["ours_high"] - mi["ours_low"] < 0.15
    assert mi["verdict"].startswith("agrees")
    hm = table[table["pair"].str.startswith("hm /")].iloc[0]
    assert hm["ours_low"] < 1.7 < hm["ours_high"]
    assert hm["verdict"] == f"theirs {abs(1.2 / hm['ours'] - 1) * 100:.0f}% lower than ours"
    esp = table[table["workload"] == "mib-espresso"].iloc[0]
    assert esp["verdict"].startswith("theirs") and esp["verdict"].endswith("higher than ours")
    assert set(table.loc[table["n"] == 0, "verdict"]) == {"not measured here"}
    assert numbers["figures"] == 5 and numbers["compared"] == 3
    assert numbers["agree"] == 1 and numbers["disagree"] == 2
    assert numbers["not_measured"] == ["mi / je = mimalloc2 / jemalloc", "tbb / je = tbbmalloc / jemalloc"]
    assert numbers["no_source"] == ["mstress"]


def test_our_ratio_between_two_allocators_neither_of_them_the_baseline(data):
    tables = field.time_tables(data)
    direct = field.our_ratio(tables, "mib-mstress", "hardened-2026062800", "mimalloc2")
    assert direct["ours_low"] < 1.7 / 0.8 < direct["ours_high"]
    assert field.our_ratio(tables, "mib-mstress", "scudo", "jemalloc")["n"] == 0


def test_bad_field_files_get_one_line_errors(tmp_path):
    with pytest.raises(HeapcostError, match="does not exist"):
        field.load_field(tmp_path / "none.csv")
    bad = tmp_path / "bad.csv"
    write_field(bad, [("cfrac", "mi", "je", "mimalloc2", "jemalloc", "fast")])
    with pytest.raises(HeapcostError, match="row 2 has no positive ratio"):
        field.load_field(bad)
    pd.DataFrame({"source": ["x"]}).to_csv(bad, index=False)
    with pytest.raises(HeapcostError, match="lacks the column"):
        field.load_field(bad)


def test_the_committed_figures_are_well_formed_and_each_ratio_follows_from_its_quoted_times():
    table = field.load_field(DATA_DIR / "literature" / field.FIELD_CSV)
    assert (table["kind"].isin(["measured", "claim"])).all()
    assert table["url"].str.startswith("https://").all() and (table["machine"] != "").all()
    for _, row in table[table["kind"] == "measured"].iterrows():
        times = [float(tok) for tok in row["text"].replace("|", " ").split() if tok.replace(".", "").isdigit()]
        assert len(times) == 2, row["text"]
        assert np.isclose(row["ratio"], times[0] / times[1], rtol=1e-5), row["text"]


def test_no_field_file_writes_nothing(tmp_path):
    root = tmp_path / "data"
    (root / "runs").mkdir(parents=True)
    assert field.write_outputs(root, tmp_path / "out.csv") == {}
    assert not (tmp_path / "out.csv").exists()


@pytest.mark.paper
def test_the_paper_states_each_figure_beside_ours(tmp_path):
    """A simulated dataset with a run of brought mimalloc-bench programs: the paper's table and text state
    every published figure, our ratio with its interval, the verdict, and the program no source covers."""
    from analysis.publish.render import paper
    from paper_checks import generated_csv, pdf_text, squash
    from simulated_dataset import TRUE_RATIOS, make_dataset

    data = make_dataset(tmp_path / "set", probed={*TRUE_RATIOS, *TRUE, "tbbmalloc"})  # the measured allocators' probe rows
    add_time_run(data, "20990102T000000Z-time-mib", {**TRUE, "tbbmalloc": 1.05}, seed=3, n_blocks=12,
                 workloads={**WORKLOADS, "mib-barnes": 0.4, "mib-glibc-simple": 0.5})
    out = tmp_path / "paper"
    pdf, _ = paper.build(data, out, notebooks=["results"], log=lambda *_: None)
    text = squash(pdf_text(pdf))
    rows = generated_csv(out, "results_field.csv")
    assert len(rows) == len(field.load_field(data / "literature" / field.FIELD_CSV))
    for r in rows:
        assert squash(r["theirs_display"] + r["ours_display"] + r["verdict"]) in text, r["pair"]
    assert squash("for glibc-simple; for them this comparison cannot be made") in text
    assert "No run of mimalloc-bench" not in text
