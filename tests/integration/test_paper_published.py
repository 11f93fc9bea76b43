"""The paper rendered from the published dataset in data/: it builds, and states what generated/ holds.

The products of the notebooks that do not read data/runs (noise: simulation; literature: the seeds'
figures) are the committed ones; security and results run on data/ into a temporary directory.
"""
import shutil
from pathlib import Path

import pytest

from analysis.publish.render import paper
from analysis.paths import DATA_DIR, REPO
from paper_checks import assert_paper_states_generated, layout_faults, pdf_pages

pytestmark = pytest.mark.paper


def has_run(kind: str) -> bool:
    from analysis.contract.runstore import pick_run

    return pick_run(DATA_DIR / "runs", kind, {"time": "trials.csv", "probe": "probes.csv"}[kind]) is not None


def paper_inputs() -> list[Path]:
    """What the Makefile's paper target depends on (PAPER_INPUTS and CITATION.cff)."""
    found = [REPO / "paper" / "paper.typ", REPO / "paper" / "refs.bib", REPO / "CITATION.cff"]
    for folder in ("data", "notebooks", "analysis"):
        found += [p for p in (REPO / folder).rglob("*") if p.is_file()
                  and not {"__pycache__", ".ipynb_checkpoints"} & set(p.relative_to(REPO).parts)]
    return found


def rendered_paper_is_current() -> bool:
    """paper/paper.pdf and .html are newer than every input: `make paper` has just made them from what is
    here (`make test` runs it first), so the tests of the rendered paper below check this very build."""
    made = [REPO / "paper" / "paper.pdf", REPO / "paper" / "paper.html"]
    if not all(p.is_file() for p in made):
        return False
    oldest = min(p.stat().st_mtime_ns for p in made)
    return all(p.stat().st_mtime_ns <= oldest for p in paper_inputs())


def test_paper_from_the_published_dataset(tmp_path):
    if rendered_paper_is_current():
        pytest.skip("paper/paper.pdf was rendered from these very inputs (`make paper`): the tests of the "
                    "rendered paper check that build")
    generated = tmp_path / "generated"
    generated.mkdir()
    for pattern in ("noise_*", "literature_*"):
        for f in (REPO / "paper" / "generated").glob(pattern):
            shutil.copyfile(f, generated / f.name)
    pdf, html = paper.build(DATA_DIR, tmp_path, notebooks=["security", "results"], log=lambda *_: None)
    assert pdf.stat().st_size > 0 and html.stat().st_size > 0
    if not (has_run("time") and has_run("probe")):
        pytest.xfail("data/ holds no speed run yet: the paper says so instead of stating results")
    assert_paper_states_generated(tmp_path, pdf, html, DATA_DIR)


def test_the_rendered_paper_matches_its_generated_numbers():
    """paper/paper.pdf, when `make paper` has made it, states what paper/generated/ holds."""
    pdf, html = REPO / "paper" / "paper.pdf", REPO / "paper" / "paper.html"
    if not pdf.is_file():
        pytest.skip("paper/paper.pdf is not built: `make paper` makes it")
    import json

    from analysis.publish.dataset import archive

    rendered_from = json.loads((REPO / "paper" / "generated" / "paper_numbers.json").read_text())["dataset"]["sha256"]
    assert rendered_from == archive.checksum(DATA_DIR), \
        "paper/paper.pdf was rendered from other data than data/ holds now: run `make paper`"
    assert_paper_states_generated(REPO / "paper", pdf, html, DATA_DIR)


def test_the_rendered_paper_has_no_layout_faults():
    """No text outside the text block, no words printed over others, no half-empty page but the last."""
    pdf = REPO / "paper" / "paper.pdf"
    if not pdf.is_file():
        pytest.skip("paper/paper.pdf is not built: `make paper` makes it (`make test` does first)")
    assert layout_faults(pdf) == []


def test_the_layout_check_sees_overprinting_overflow_and_a_half_empty_page(tmp_path):
    import typst

    src = tmp_path / "bad.typ"
    src.write_text('#set page(paper: "a4", margin: 2cm)\n'
                   '#place(dx: 0pt, dy: 0pt)[overprinted words] #place(dx: 2pt, dy: 1pt)[overprinted words]\n'
                   '#v(1cm) #box(width: 30cm)[#("a line far too long for the page " * 6)]\n'
                   '#pagebreak() last page\n')
    pdf = tmp_path / "bad.pdf"
    typst.compile(str(src), output=str(pdf))
    faults = layout_faults(pdf)
    assert any("printed over" in f for f in faults)
    assert any("outside the text block" in f for f in faults)
    assert any("page 1: content ends" in f for f in faults)


def test_runs_measured_with_the_check_behind_the_library_are_the_listed_ones():
    """The A/A table separates the runs measured before the resolution check went first in LD_PRELOAD
    (commit bfb3990); the list in analysis.publish.results.comparisons must be exactly those published runs."""
    import json
    import subprocess

    from analysis.publish.results.comparisons import CHECK_LOADED_AFTER_LIBRARY

    if not (REPO / ".git").exists():
        pytest.skip("no git history to read the runs' commits against")
    before = set()
    for run_json in sorted((DATA_DIR / "runs").glob("*-time-*/run.json")):
        commit = json.loads(run_json.read_text())["git"]["commit"]
        fixed = subprocess.run(["git", "merge-base", "--is-ancestor", "bfb3990", commit], cwd=REPO)
        assert fixed.returncode in (0, 1), f"git cannot place commit {commit} of {run_json.parent.name}"
        if fixed.returncode == 1:
            before.add(run_json.parent.name)
    assert before == set(CHECK_LOADED_AFTER_LIBRARY)


def test_each_run_replaced_by_a_run_alone_has_a_later_run_of_its_cells_on_its_machine_with_fewer_flags():
    """comparisons.REPLACED_BY_A_RUN_ALONE names only published runs whose every (workload, allocator) a later run
    on the same machine measured too, with a smaller share of its rows flagged interfered; and every table that
    pools runs leaves them out (debates' pool, and the check's longer turns)."""
    import json

    import pandas as pd

    from analysis.publish.debates import pool
    from analysis.publish.results import cost_check
    from analysis.publish.results.comparisons import REPLACED_BY_A_RUN_ALONE

    assert REPLACED_BY_A_RUN_ALONE <= pool.SUPERSEDED and REPLACED_BY_A_RUN_ALONE == cost_check.SUPERSEDED
    runs = DATA_DIR / "runs"

    def rows(run_id):
        table = pd.concat([pd.read_csv(f) for f in (runs / run_id / "pairs.csv", runs / run_id / "trials.csv")
                           if f.is_file()], ignore_index=True)
        sides = [c for c in ("allocator", "allocator_a", "allocator_b") if c in table]
        cells = {(w, a) for c in sides for w, a in zip(table["workload"], table[c]) if isinstance(a, str)}
        return cells, float(pd.to_numeric(table["interfered"], errors="coerce").fillna(0).mean())

    def machine(run_id):
        return json.loads((runs / run_id / "machine.json").read_text()).get("machine_id")

    for old in sorted(REPLACED_BY_A_RUN_ALONE):
        cells, flagged = rows(old)
        later = [r.name for r in sorted(runs.iterdir()) if r.name > old and r.name.endswith("-time-quick")
                 and machine(r.name) == machine(old)]
        better = [r for r in later if cells <= rows(r)[0] and rows(r)[1] < flagged]
        assert better, f"{old}: no later run of its cells on its machine with fewer rows flagged"


MAIN_TEXT_PAGES = 16  # the main text's budget: pages before the references
WHOLE_PAPER_PAGES = 45  # the main text, the references and the appendix; the rest is in the supplement


def test_the_whole_paper_fits_its_budget_and_cites_only_parts_the_supplement_has():
    """At most 45 pages in all, the supplement beside it; every part of the supplement the paper cites is one the
    supplement numbered (never the fallback "the supplement" of a label it lacks)."""
    import json

    pdf = REPO / "paper" / "paper.pdf"
    if not pdf.is_file():
        pytest.skip("paper/paper.pdf is not built: `make paper` makes it (`make test` does first)")
    assert len(pdf_pages(pdf)) <= WHOLE_PAPER_PAGES
    assert (REPO / "paper" / "supplement.pdf").is_file()
    refs = json.loads((REPO / "paper" / "generated" / "supplement_refs.json").read_text())
    import re

    cited = set(re.findall(r'#supp\("([a-z0-9-]+)"\)', (REPO / "paper" / "paper.typ").read_text()))
    assert cited and cited <= set(refs), sorted(cited - set(refs))
    assert all(re.fullmatch(r"(Table|Figure|Section) S[0-9]+(\.[0-9]+)*", v) for v in refs.values())


def test_the_main_text_fits_its_budget_and_page_one_gives_the_five_answers():
    """The references start within the main text's page budget (the appendix follows them), page one holds
    every debate's answer as generated (the abstract's sentences and the first table), and no interval in the
    main text spans more than a factor of a hundred."""
    import csv
    import re

    from paper_checks import squash

    pdf = REPO / "paper" / "paper.pdf"
    if not pdf.is_file():
        pytest.skip("paper/paper.pdf is not built: `make paper` makes it (`make test` does first)")
    pages = pdf_pages(pdf)
    references = next(i for i, text in enumerate(pages) if re.search(r"^References$", text, re.M))
    assert references + 1 <= MAIN_TEXT_PAGES, f"the references start on page {references + 1}"
    with open(REPO / "paper" / "generated" / "results_front.csv", newline="") as fh:
        front = list(csv.DictReader(fh))
    assert len(front) == 5
    first = squash(pages[0])
    for row in front:
        assert squash(row["sentence"]) in first, row["seed"]
        assert squash(row["verdict"]) in first, row["seed"]
    main = " ".join(pages[:references])
    for lo, hi in re.findall(r"\[(\d[\d,]*\.\d+), (\d[\d,]*\.\d+)\]", main):
        lo, hi = float(lo.replace(",", "")), float(hi.replace(",", ""))
        assert lo <= 0 or hi / lo <= 100, f"an interval [{lo}, {hi}] in the main text"


def test_no_sentence_of_the_main_text_is_said_twice():
    """A note said once is referenced: no sentence of twelve words or more appears twice in the main text."""
    import collections
    import re

    pdf = REPO / "paper" / "paper.pdf"
    if not pdf.is_file():
        pytest.skip("paper/paper.pdf is not built: `make paper` makes it (`make test` does first)")
    pages = pdf_pages(pdf)
    references = next(i for i, text in enumerate(pages) if re.search(r"^References$", text, re.M))
    main = " ".join(pages[:references]).replace("\n", " ")
    sentences = [s.strip() for s in re.split(r"(?<=[.;])\s+", main) if len(s.split()) >= 12]
    assert [s for s, n in collections.Counter(sentences).items() if n > 1] == []


def test_the_abstract_is_at_most_250_words_and_says_what_each_defence_buys():
    import csv
    import re

    pdf = REPO / "paper" / "paper.pdf"
    if not pdf.is_file():
        pytest.skip("paper/paper.pdf is not built: `make paper` makes it (`make test` does first)")
    from paper_checks import squash

    first = pdf_pages(pdf)[0]
    with open(REPO / "paper" / "generated" / "results_front.csv", newline="") as fh:
        front = list(csv.DictReader(fh))
    # the abstract: its opening up to the reference to Table 1, then one sentence per debate (each on page one)
    opening = first[first.index("Abstract."):re.search(r"\(Table\s1\)\.", first).end()]
    assert all(squash(r["sentence"]) in squash(first) for r in front)
    words = len(opening.replace("Abstract.", "").split()) + sum(len(r["sentence"].split()) for r in front)
    assert words <= 250, f"the abstract has {words} words"
    for row in front:
        assert row["security"], row["seed"]  # measured, or unmeasured with its reason
        assert row["claim"], row["seed"]


def test_the_probe_outcomes_the_paper_counts_add_up_to_their_total():
    """Every outcome kind of the security numbers is printed beside the others, and they sum to the total."""
    import json

    numbers = REPO / "paper" / "generated" / "security_numbers.json"
    if not numbers.is_file():
        pytest.skip("paper/generated is not built: `make paper` makes it")
    s = json.loads(numbers.read_text())
    assert sum(s["outcomes"].values()) == s["rows"]
    source = (REPO / "paper" / "paper.typ").read_text()
    sentence = source[source.index("Of #S.rows outcomes"):]
    sentence = sentence[:sentence.index("Where the documentation's claims")]
    for outcome in s["outcomes"]:
        assert f'"outcomes", "{outcome}"' in sentence, outcome


def test_the_comparisons_the_paper_counts_add_up_to_their_total():
    """The speed and memory comparisons the paper counts (slower, faster and neither; larger, smaller and
    neither) sum to the comparisons it says there are, and the rendered paper prints each part."""
    import json
    import re

    from paper_checks import squash

    numbers = REPO / "paper" / "generated" / "results_numbers.json"
    pdf = REPO / "paper" / "paper.pdf"
    if not (numbers.is_file() and pdf.is_file()):
        pytest.skip("paper/paper.pdf is not built: `make paper` makes it")
    r = json.loads(numbers.read_text())
    speed, memory = r["speed"], r["memory"]
    assert speed["slower"] + speed["faster"] + speed["neither"] == speed["rows"]
    assert memory["larger"] + memory["smaller"] + memory["neither"] == memory["rows"]
    text = squash(" ".join(pdf_pages(pdf)))
    assert squash(f"{speed['slower']} are slower than") in text and squash(f"and {speed['neither']} neither") in text
    assert re.search(squash(f"Of {memory['rows']} comparisons, {memory['larger']} show a larger and "
                            f"{memory['smaller']} a smaller"), text) and squash(f"and {memory['neither']} neither.") in text


def test_the_pairs_and_trials_the_paper_counts_add_up_to_their_totals():
    """The speed run's pairs and trials are each printed as a total and its parts (warm-up and measured), and
    the parts the rendered paper prints add up to the total it prints."""
    import json
    import re

    numbers = REPO / "paper" / "generated" / "results_numbers.json"
    pdf = REPO / "paper" / "paper.pdf"
    if not (numbers.is_file() and pdf.is_file()):
        pytest.skip("paper/paper.pdf is not built: `make paper` makes it")
    r = json.loads(numbers.read_text())
    if "lockstep" not in r.get("time_run", {}):
        pytest.skip("the published speed run is not a lockstep run: its sentence counts trials alone")
    text = " ".join(" ".join(pdf_pages(pdf)).split())
    pairs = re.search(r"It ran (\d+) pairs in (\d+) cells, (\d+) warm-up and (\d+) measured, of which (\d+) were "
                      r"valid; and (\d+) trials, (\d+) warm-up and (\d+) measured, of which (\d+) were valid", text)
    assert pairs, "the speed run's counts are not printed as a total and its parts"
    total, cells, warm, measured, ok, trials, twarm, tmeasured, tok = map(int, pairs.groups())
    assert warm + measured == total and ok <= measured
    assert warm == int(r["time_run"]["warmups"]) * cells  # each cell's pairs of the warm-up blocks
    assert twarm + tmeasured == trials and tok <= tmeasured
    assert (total, measured, ok) == (r["time_run"]["lockstep"]["pairs"], r["time_run"]["lockstep"]["measured"],
                                     r["time_run"]["lockstep"]["ok"])
