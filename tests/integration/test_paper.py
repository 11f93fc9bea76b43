"""The paper's results against a dataset with a known truth, and the paper itself: built from that
dataset, its PDF and HTML state exactly what paper/generated/ holds, and the same data gives the same bytes."""
import re
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from analysis.publish.render import paper
from analysis.contract.schema import read_table
from analysis.publish.render import formats
from analysis.publish.results import instruction_counts, comparisons, writer
from analysis.stats import security
from analysis.paths import REPO
from paper_checks import assert_paper_states_generated, generated_csv
from simulated_dataset import FREES, PER_FREE, TRUE_RATIOS, make_dataset

pytestmark = pytest.mark.paper


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    # the probe rows of the allocators it measures: no check reads the scores of the others
    return make_dataset(tmp_path_factory.mktemp("paperdata"), probed=TRUE_RATIOS)


@pytest.fixture(scope="module")
def computed(data):
    return comparisons.compute(data)


# ------------------------------------------------------------------------------------------ results
def test_speed_geomeans_cover_the_truth(computed):
    geo = computed.speed.geomean.set_index("allocator")
    for alloc, truth in TRUE_RATIOS.items():
        if alloc == "glibc":
            continue
        lo, hi = geo.loc[alloc, ["ci_low", "ci_high"]]
        assert lo <= truth <= hi, (alloc, truth, lo, hi)
    assert geo.loc["scudo-quarantine", "ci_low"] > 1.0  # a 43% cost is found, not hidden in noise


def test_ablations_measure_the_defence_against_its_own_base(computed):
    pooled = computed.ablation[computed.ablation["workload"] == "all"].set_index("allocator")
    assert set(pooled.index) == {"jemalloc-junk-free", "scudo-quarantine"}  # glibc/mimalloc/perl pairs absent
    for alloc in pooled.index:
        base = pooled.loc[alloc, "base"]
        truth = TRUE_RATIOS[alloc] / TRUE_RATIOS[base]
        assert pooled.loc[alloc, "ci_low"] <= truth <= pooled.loc[alloc, "ci_high"]
        assert abs(np.log(pooled.loc[alloc, "ratio"] / truth)) < 0.05


def test_per_free_is_exact_and_relative_to_the_baseline_at_the_same_scale(computed):
    pf = instruction_counts.main_scale(computed.per_free).set_index(["workload", "allocator"])
    for w in FREES:
        for a, cost in PER_FREE.items():
            assert pf.loc[(w, a), "instructions_per_free"] == pytest.approx(cost)
            assert pf.loc[(w, a), "instructions_ratio"] == pytest.approx(cost / PER_FREE["glibc"])
    # counted at a smaller scale: against glibc at that scale (2000/200), not at the main one (2000/100)
    assert pf.loc[("small-loop", "tcmalloc-debug"), "instructions_ratio"] == pytest.approx(10.0)
    geo = computed.per_free_geomean.set_index("allocator")
    assert geo.loc["tcmalloc-debug", "instructions_ratio"] == pytest.approx(10.0)
    assert "glibc" not in geo.index
    assert list(computed.callgrind_missing["allocator"]) == ["efence"]


def test_groups_with_too_few_runs_are_reported_not_fatal(data):
    trials = read_table(next((data / "runs").glob("*time*")) / "trials.csv")
    trials["reason"] = trials["reason"].astype(object)
    bad = (trials["allocator"] == "scudo") & (trials["workload"] == "pow2-churn")
    trials.loc[bad, "status"] = "crashed"
    trials.loc[bad, "reason"] = "signal SIGSEGV: simulated"
    kept, left_out = comparisons.usable(trials, "wall_s")
    assert left_out.to_dict("records") == [{"workload": "pow2-churn", "allocator": "scudo", "ok": 0,
                                            "trials": int((bad & (trials["warmup"] == 0)).sum()),
                                            "why": "crashed: signal SIGSEGV: simulated"}]
    comp = comparisons.against(trials, "glibc", "wall_s")
    assert ("pow2-churn", "scudo") not in set(zip(comp.results["workload"], comp.results["allocator"]))


def test_pareto_front_and_domination():
    pts = pd.DataFrame([
        {"allocator": "a", "overhead": 1.0, "overhead_low": 0.99, "overhead_high": 1.01, "score": 50,
         "score_low": 45, "score_high": 55},
        {"allocator": "b", "overhead": 1.2, "overhead_low": 1.1, "overhead_high": 1.3, "score": 80,
         "score_low": 75, "score_high": 85},
        {"allocator": "c", "overhead": 1.5, "overhead_low": 1.4, "overhead_high": 1.6, "score": 70,
         "score_low": 65, "score_high": 72},  # dominated by b, firmly
        {"allocator": "d", "overhead": 1.25, "overhead_low": 1.0, "overhead_high": 1.5, "score": 79,
         "score_low": 60, "score_high": 90},  # dominated by b on the estimates, not firmly
    ])
    assert comparisons.pareto_front(pts) == ["a", "b"]
    assert comparisons.dominator(pts, pts.iloc[2]) == "b"
    assert comparisons.dominator(pts, pts.iloc[3]) == ""


@pytest.mark.parametrize("overhead, above, want", [
    ((0.90, 0.85, 0.93), 0.99, "a better default: safer, faster than the baseline"),
    ((1.00, 0.97, 1.03), 0.95, "a better default: safer, no measurable cost"),
    # an interval inside the margin that excludes 1 resolved a cost: "within the margin", not "no measurable cost"
    ((1.02, 1.01, 1.03), 1.0, "a better default: safer, within the margin"),
    ((1.02, 1.01, 1.03), 0.0, "less safe than the baseline; within the margin"),
    ((1.30, 1.20, 1.40), 0.97, "buys security: costs more than the margin"),
    ((1.30, 0.90, 1.40), 0.5, "not distinguishable under the weights; cost unresolved"),
    # above the baseline in 94% of the draws is not enough: the weights could still reverse it
    ((1.30, 1.20, 1.40), 0.94, "not distinguishable under the weights; costs more than the margin"),
    ((1.00, 0.97, 1.03), 0.05, "less safe than the baseline; no measurable cost"),
    ((1.00, 0.97, 1.03), 0.06, "not distinguishable under the weights; no measurable cost"),
    ((3.00, 2.50, 3.50), 1.0, "buys security: over 2 times the baseline's time"),
    ((3.00, 1.90, 3.50), 1.0, "buys security: costs more than the margin"),
])
def test_verdict_rules(overhead, above, want):
    base = {"allocator": "glibc", "score": 55.0, "score_low": 50.0, "score_high": 60.0}
    row = {"allocator": "x", "overhead": overhead[0], "overhead_low": overhead[1], "overhead_high": overhead[2],
           "score": 60, "score_low": 40, "score_high": 80, "above_baseline": above, "dominated_by": ""}
    assert comparisons.verdict(row, base) == want


def test_security_score_interval_covers_the_true_score():
    """Probe outcomes drawn from known rates: the interval holds the score of the true rates."""
    rng = np.random.default_rng(5)
    probes = ["double-free", "uaf-write", "overflow-16", "reuse-immediate", "freelist-poison"]
    true_rates = dict(zip(probes, (0.0, 0.3, 0.6, 0.9, 0.15)))
    truth = security.scores([{"allocator": "x", "probe": p, "outcome": "missed", "rate": r}
                             for p, r in true_rates.items()])["x"]["score"]
    covered, reps = 0, 60
    for i in range(reps):
        rows = []
        for p, r in true_rates.items():
            k = rng.binomial(20, r)
            rows.append({"allocator": "x", "probe": p, "outcome": "missed" if k else "caught",
                         "trials": "20", "rate": str(k / 20)})
        s = security.score_intervals(rows, draws=300, seed=i).iloc[0]
        assert s["score_low"] <= s["score"] <= s["score_high"]
        covered += s["score_low"] <= truth <= s["score_high"]
    assert covered / reps >= 0.88, covered / reps


def test_seeds_figures_for_unmeasurable_allocators():
    figures = read_table(REPO / "data" / "literature" / "figures.csv")
    so = comparisons.seed_only_figures(figures)
    hardened = so[(so["seed"] == "001") & (so["metric"] == "wall")].iloc[0]
    assert hardened["ratio"] == pytest.approx(hardened["value"] / hardened["reference_value"])
    assert 1.2 < hardened["ratio"] < 1.4  # the seed's "1.3 times as much wall clock"
    assert set(so["allocator"]) == {"OpenBSD malloc", "hardened_malloc (LD_PRELOAD)"}


# ------------------------------------------------------------------------------------------ the paper
@pytest.fixture(scope="module")
def built(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("paper")
    # the literature notebook reads only data/literature (the same here): its committed products serve;
    # security and results run on this dataset, through the parameters paper.build passes them
    (out / "generated").mkdir()
    for f in (REPO / "paper" / "generated").glob("literature_*"):
        shutil.copyfile(f, out / "generated" / f.name)
    pdf, html = paper.build(data, out, notebooks=["security", "results"], log=lambda *_: None)
    return out, pdf, html


def test_paper_states_what_generated_holds(built, data):
    out, pdf, html = built
    assert_paper_states_generated(out, pdf, html, data)
    assert len(generated_csv(out, "results_tradeoff.csv")) == len(TRUE_RATIOS)


def test_generated_numbers_are_the_datasets(built, computed):
    """generated/ agrees with the results recomputed from the dataset (no stale or edited numbers)."""
    out, _, _ = built
    res = computed
    shown = {r["allocator"]: r["display"] for r in generated_csv(out, "results_speed_geomean.csv")}
    for _, g in res.speed.geomean.iterrows():
        assert shown[g["allocator"]] == formats.fmt_interval(g["geomean_ratio"], g["ci_low"], g["ci_high"])


def test_same_data_gives_the_same_bytes(built, data, tmp_path, monkeypatch):
    monkeypatch.setenv("HEAPCOST_MEMO", "0")  # computed again, not read back (publish/results/memo.py)
    out, pdf, html = built
    again = tmp_path / "again"
    shutil.copytree(out, again)
    writer.write_outputs(comparisons.compute(data), again / "generated")
    for svg in sorted((out / "generated").glob("results_*.svg")):
        assert (again / "generated" / svg.name).read_bytes() == svg.read_bytes(), svg.name
    pdf2, html2 = paper.compile_paper(again)
    assert pdf2.read_bytes() == pdf.read_bytes()
    assert html2.read_bytes() == html.read_bytes()


def typst_prose(src: str) -> str:
    """The markup text of a Typst source with all code (#expressions, their arguments, strings) and raw
    text removed; content blocks [...] inside code are markup again and kept."""
    out: list[str] = []
    n = len(src)

    def skip_string(i):
        i += 1
        while i < n and src[i] != '"':
            i += 2 if src[i] == "\\" else 1
        return i + 1

    def markup(i, end=None):
        while i < n:
            c = src[i]
            if end and c == end:
                return i + 1
            if c == "`":
                j = src.find("`", i + 1)
                i = n if j < 0 else j + 1
            elif src.startswith("//", i):
                j = src.find("\n", i)
                i = n if j < 0 else j
            elif c == "\\":
                i += 2
            elif c == "#":
                i = code_expr(i + 1)
            elif c == "[":
                i = markup(i + 1, "]")
            elif c in "<@" and i + 1 < n and (src[i + 1].isalpha()):
                j = i + 1
                while j < n and (src[j].isalnum() or src[j] in "-_"):
                    j += 1
                i = j + (1 if c == "<" and j < n and src[j] == ">" else 0)
            else:
                out.append(c)
                i += 1
        return i

    def code(i, close):
        while i < n:
            c = src[i]
            if c == close:
                return i + 1
            if c == '"':
                i = skip_string(i)
            elif c == "[":
                out.append(" ")
                i = markup(i + 1, "]")
                out.append(" ")
            elif c == "(":
                i = code(i + 1, ")")
            elif c == "{":
                i = code(i + 1, "}")
            elif src.startswith("//", i):
                j = src.find("\n", i)
                i = n if j < 0 else j
            else:
                i += 1
        return i

    def code_expr(i):
        j = i
        while j < n and (src[j].isalnum() or src[j] in "_-"):
            j += 1
        word = src[i:j]
        if word in ("let", "set", "show", "if", "for", "import", "while", "return", "context"):
            # a statement: code up to the end of the line, brackets may span lines
            k = j
            while k < n and src[k] != "\n":
                c = src[k]
                if c == '"':
                    k = skip_string(k)
                elif c == "[":
                    out.append(" ")
                    k = markup(k + 1, "]")
                    out.append(" ")
                elif c in "({":
                    k = code(k + 1, ")" if c == "(" else "}")
                else:
                    k += 1
            return k
        while j < n:
            if src[j] == "." and j + 1 < n and src[j + 1].isalpha():
                j += 1
                while j < n and (src[j].isalnum() or src[j] in "_-"):
                    j += 1
            elif src[j] == "(":
                j = code(j + 1, ")")
            elif src[j] == "[":
                out.append(" ")
                j = markup(j + 1, "]")
                out.append(" ")
            else:
                break
        return j

    markup(0)
    return "".join(out)


def typed_numbers(src: str) -> list[str]:
    prose = typst_prose(src)
    return [m.group(0) for m in re.finditer(r"(?<![\w.])\d+(\.\d+)?(?!\w)", prose)]


def test_no_number_is_typed_into_the_paper():
    """Prose in paper.typ carries no number: every one comes from generated/ through code. Digits
    inside identifiers (mimalloc2, D1) and inside code (sizes, widths) are not numbers of the text."""
    typed = typed_numbers((REPO / "paper" / "paper.typ").read_text())
    assert typed == [], f"numbers typed into paper.typ: {typed}"


def swallowed_semicolons(src: str) -> list[str]:
    """Embedded expressions followed by ';' in markup: Typst takes the ';' as the end of the expression and
    prints nothing ('#x; y' renders 'x y'); the text needs '\\;'. String literals are left out."""
    src = re.sub(r'"(?:[^"\\]|\\.)*"', '""', src, flags=re.S)
    return [m.group(0) for m in re.finditer(r"#[A-Za-z_][\w.-]*(?:\([^()\n]*\))*;", src)]


def test_no_semicolon_of_the_paper_is_swallowed():
    found = swallowed_semicolons((REPO / "paper" / "paper.typ").read_text())
    assert found == [], f"';' after an expression is not printed; write '\\;': {found}"
    assert swallowed_semicolons('roles: #r.a; then #raw(b); "#c; in a string" and #d\\; kept') == ["#r.a;", "#raw(b);"]


def test_typed_number_lint_catches_a_typed_number():
    """The lint must fail on a number in prose, also inside content blocks of code, and pass code."""
    assert typed_numbers("= Results\nThe overhead is 2.5 percent over a 1-minute run.\n") == ["2.5", "1"]
    assert typed_numbers('#if x [costs 3 times] else [#y.z of #f(a, 7pt)]') == ["3"]
    assert typed_numbers('#let f(x) = calc.round(x, digits: 3)\nmimalloc2 and D1 misses, #conf%') == []


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "analysis", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


def test_cli_errors_are_one_line(tmp_path):
    r = run_cli("paper", "--data", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "runs/" in r.stderr
    r = run_cli("paper", "--notebooks", "results,bogus", "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "valid: noise, literature, security, primitives, results" in r.stderr


def test_other_runs_of_the_profile_are_compared_with_the_published_one(computed):
    """A second simulated run of the same truth: its intervals overlap the published run's; a run with
    one allocator made 30% slower does not, for that allocator."""
    from simulated_dataset import WORKLOADS
    from analysis.stats import simulate

    published = computed.speed.geomean
    same = simulate.simulate_trials(simulate.Scenario(ratios=TRUE_RATIOS, workloads=WORKLOADS, n_blocks=12), 99)
    shifted = dict(TRUE_RATIOS, jemalloc=TRUE_RATIOS["jemalloc"] * 1.3)
    slower = simulate.simulate_trials(simulate.Scenario(ratios=shifted, workloads=WORKLOADS, n_blocks=12), 98)
    others = {name: comparisons.against(trials, "glibc", "wall_s").geomean for name, trials in
              (("same", same), ("slower", slower))}
    rep = comparisons.between_runs(published, others).set_index(["run_id", "allocator"])
    assert rep.loc[("slower", "jemalloc"), "overlap"] == False  # noqa: E712
    assert rep.loc["same", "overlap"].mean() >= 0.75
    # given each run's cells, a run over fewer workloads (another geometric mean) is not a replication
    fewer = same[same["workload"] == "small-loop"]
    runs = {"same": same, "slower": slower, "fewer": fewer}
    lead_run = published["run_id"].iloc[0]
    cells = {lead_run: computed.cells["wall_s"].query("run_id == @lead_run"),
             **{name: comparisons.against(trials, "glibc", "wall_s").results for name, trials in runs.items()}}
    others = {name: comparisons.against(trials, "glibc", "wall_s").geomean for name, trials in runs.items()}
    rep = comparisons.between_runs(published, others, cells)
    assert set(rep["run_id"]) == {"same", "slower"}
    assert len(comparisons.between_runs(published, others)) > len(rep)  # without the cells, fewer counts


def test_data_free_notebook_products_are_kept_only_while_their_inputs_are_unchanged(tmp_path, data):
    generated = tmp_path / "generated"
    generated.mkdir()
    (generated / "noise_coverage.csv").write_text("made earlier\n")
    assert paper.kept_products(generated, ["noise"], data) == {}  # no stamp: run it
    paper.stamp_path(generated, "noise").write_text(paper.inputs_digest("noise", {}) + "\n")
    kept = paper.kept_products(generated, ["noise", "results"], data)
    assert set(kept) == {"noise"} and kept["noise"]["noise_coverage.csv"] == b"made earlier\n"
    paper.stamp_path(generated, "noise").write_text(paper.inputs_digest("noise", {"replications": 5}) + "\n")
    assert paper.kept_products(generated, ["noise"], data) == {}  # other inputs: run it again


def test_a_notebook_reading_the_dataset_keeps_its_products_only_while_data_and_code_are_unchanged(tmp_path, data,
                                                                                                   monkeypatch):
    from analysis.publish.render import notebook

    repo = tmp_path / "repo"
    (repo / "notebooks").mkdir(parents=True)
    (repo / "analysis").mkdir()
    shutil.copyfile(REPO / "notebooks" / "results.ipynb", repo / "notebooks" / "results.ipynb")
    (repo / "analysis" / "model.py").write_text("SLOPE = 1\n")
    monkeypatch.setattr(paper, "REPO", repo)
    mine = tmp_path / "data"
    shutil.copytree(data, mine)
    generated = tmp_path / "generated"
    generated.mkdir()
    (generated / "results_front.csv").write_text("made earlier\n")

    def stamp(data_dir):
        params = paper.notebook_params("results", notebook.default_parameters(repo / "notebooks" / "results.ipynb"),
                                       data_dir, generated)
        paper.stamp_path(generated, "results").write_text(paper.inputs_digest("results", params, data_dir) + "\n")

    assert paper.kept_products(generated, ["results"], mine) == {}  # no stamp: run it
    stamp(mine)
    kept = paper.kept_products(generated, ["results"], mine)
    assert set(kept) == {"results"} and kept["results"]["results_front.csv"] == b"made earlier\n"
    elsewhere = tmp_path / "clone" / "data"  # the same files elsewhere (another clone, another host): kept
    shutil.copytree(mine, elsewhere)
    assert set(paper.kept_products(generated, ["results"], elsewhere)) == {"results"}
    run = next(p for p in sorted((mine / "runs").rglob("*.csv")))
    run.write_text(run.read_text() + run.read_text().splitlines()[-1] + "\n")  # one more row measured: run it
    assert paper.kept_products(generated, ["results"], mine) == {}
    stamp(mine)
    assert set(paper.kept_products(generated, ["results"], mine)) == {"results"}
    (repo / "analysis" / "model.py").write_text("SLOPE = 20\n")  # the code changed: run it
    assert paper.kept_products(generated, ["results"], mine) == {}
    with pytest.raises(paper.HeapcostError, match="need the dataset.s directory"):
        paper.inputs_digest("results", {})
