"""The paper's figures as a reader sees them: drawn at the size paper.typ places them, no text under 6 pt, none
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


def test_every_figure_the_paper_places_is_legible_as_placed():
    source = (REPO / "paper" / "paper.typ").read_text()
    placed = {name: share for name, share in placements(source, GENERATED).items() if (GENERATED / name).is_file()}
    if not placed:
        pytest.skip("paper/generated/ holds no figure the paper places: `make paper` makes them")
    found = [f for name, share in sorted(placed.items()) for f in faults(GENERATED / name, share)]
    assert found == [], f"{len(found)} faults, the first: " + "; ".join(found[:5])
