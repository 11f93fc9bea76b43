"""The figures as a reader sees them: drawn at the size paper.typ and supplement.typ place them, no text under 6 pt, none
leaving its figure, none over another (figure_checks.py reads the texts' boxes from the SVG). The checker is held
to figures drawn here with a known fault first."""
import pytest

from analysis.paths import REPO
from analysis.publish.render import figures
from figure_checks import SMALLEST_PT, TEXT_BLOCK_PT, faults, placements, scale_placed, texts

GENERATED = REPO / "paper" / "generated"


def drawn(tmp_path, name, draw, size=(6.0, 3.0)):
    plt = figures.pyplot()
    fig, ax = plt.subplots(figsize=size)
    ax.plot([0, 1], [0, 1])
    ax.set_xlabel("a label of the x axis")
    draw(ax)
    path = tmp_path / name
    figures.save(fig, path)
    return path


def test_the_checker_finds_small_overlapping_and_escaping_texts_and_passes_a_plain_figure(tmp_path):
    plain = drawn(tmp_path, "plain.svg", lambda ax: ax.set_title("a plain figure"))
    size, found = texts(plain)
    assert {"a plain figure", "a label of the x axis"} <= {t["text"] for t in found}
    # a 6 x 3 inch figure placed across the text block is drawn at about its own size
    assert 1.0 <= scale_placed(size, 1.0) <= 1.3 and faults(plain, 1.0) == []
    # the same figure in a fifth of the text block: every text falls under 6 pt
    assert all("pt as placed" in f for f in faults(plain, 0.2)) and len(faults(plain, 0.2)) >= len(found)
    tiny = drawn(tmp_path, "tiny.svg", lambda ax: ax.text(0.5, 0.5, "three points", fontsize=3))
    assert faults(tiny, 1.0) == [f"tiny.svg: 'three points' is {3 * scale_placed(texts(tiny)[0], 1.0):.1f} pt as placed"]

    def two(ax):
        ax.text(0.2, 0.5, "first words here", fontsize=9)
        ax.text(0.21, 0.5, "second words", fontsize=9)
    assert faults(drawn(tmp_path, "over.svg", two), 1.0) == ["over.svg: 'first words here' and 'second words' overlap"]
    escaping = tmp_path / "escaping.svg"  # a text moved past the figure's right edge
    escaping.write_text(plain.read_text().replace("translate(", "translate(9000", 1))
    assert any("leaves the figure" in f for f in faults(escaping, 1.0))
    # a tall figure is drawn 20 cm tall, whatever its width
    assert scale_placed((TEXT_BLOCK_PT, 4 * TEXT_BLOCK_PT), 1.0) < 0.5
    assert SMALLEST_PT == 6.0


@pytest.mark.parametrize("document", ["paper.typ", "supplement.typ"])
def test_every_figure_the_paper_places_is_legible_as_placed(document):
    """Both documents; a figure drawn in parts (<stem>-part<N>.svg) is read part by part."""
    source = (REPO / "paper" / document).read_text()
    placed = {name: share for name, share in placements(source, GENERATED).items() if (GENERATED / name).is_file()}
    if not placed:
        pytest.skip("paper/generated/ holds no figure the paper places: `make paper` makes them")
    found = [f for name, share in sorted(placed.items()) for f in faults(GENERATED / name, share)]
    assert found == [], f"{len(found)} faults, the first: " + "; ".join(found[:5])


@pytest.mark.slow  # draws a four-part forest, 2-3 s: in make test, not test-fast
def test_a_forest_too_tall_for_a_page_is_drawn_in_legible_parts(tmp_path):
    """60 allocators on 3 workloads: more rows than a page holds at 6 pt, so the forest comes in parts (allocators
    in groups, panels a few at a time), each legible at the full text width; a second, smaller drawing leaves
    none of the first one's parts behind."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(3)
    rows = [{"allocator": f"allocator-{i:02d}", "workload": f"workload-{w}", "ratio": r, "ci_low": r / 1.05,
             "ci_high": r * 1.05} for i in range(60) for w in range(3) for r in [float(np.exp(rng.normal(0, 0.1)))]]
    path = tmp_path / "forest.svg"
    figures.forest(pd.DataFrame(rows), path, "ratio", percent=True)
    parts = [path, *sorted(tmp_path.glob("forest-part*.svg"))]
    assert len(parts) >= 4
    assert [f for p in parts for f in faults(p, 1.0)] == []
    drawn = {t["text"] for p in parts for t in texts(p)[1]}
    assert {f"allocator-{i:02d}" for i in range(60)} <= drawn and {f"workload-{w}" for w in range(3)} <= drawn
    figures.forest(pd.DataFrame(rows[:10]), path, "ratio", percent=True)
    assert not list(tmp_path.glob("forest-part*.svg"))


def test_parts_split_evenly_and_keep_a_tall_item_alone():
    assert figures.split_units([1] * 10, 10) == [list(range(10))]
    groups = figures.split_units([1] * 11, 10)
    assert [len(g) for g in groups] == [6, 5]
    assert figures.split_units([2, 30, 2], 10) == [[0], [1], [2]]
    assert sum(figures.split_units([3] * 40, 44), []) == list(range(40))
