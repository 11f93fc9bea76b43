"""The figures read: no label covers another, ticks on a single workload, the forest split near 1."""
import itertools

import pandas as pd
import pytest

from analysis.publish.render import figures
from conftest import REPO

pytestmark = pytest.mark.paper


def overlapping_labels(ax) -> list[tuple[str, str]]:
    renderer = ax.figure.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in ax.texts if t.get_text()]
    return [(a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2) if ba.overlaps(bb)]


def published_trade() -> pd.DataFrame:
    trade = pd.read_csv(REPO / "paper" / "generated" / "results_tradeoff.csv")
    trade["pareto"] = trade["pareto"].astype(bool)
    return trade


def test_no_label_of_the_tradeoff_plot_covers_another():
    fig = figures.tradeoff_figure(published_trade(), None, "glibc")
    ax = fig.axes[0]
    assert len(ax.texts) == len(published_trade())
    assert overlapping_labels(ax) == []


def test_the_overlap_check_sees_an_overlap():
    plt = figures.pyplot()
    fig, ax = plt.subplots()
    ax.text(0.5, 0.5, "mimalloc2")
    ax.text(0.5, 0.5, "mimalloc3")
    assert overlapping_labels(ax) == [("mimalloc2", "mimalloc3")]
    plt.close(fig)


def test_near_one_split_keeps_the_debugging_allocators_apart():
    table = pd.DataFrame({"allocator": ["a", "a", "debug"], "workload": ["w1", "w2", "w1"],
                          "ratio": [1.02, 3.0, 80.0], "ci_low": [1.0, 2.5, 70.0], "ci_high": [1.04, 3.5, 90.0]})
    geomean = pd.DataFrame({"allocator": ["a", "debug"], "geomean_ratio": [1.7, 80.0]})
    near, far = figures.split_near_one(table, geomean)
    assert set(near["allocator"]) == {"a"} and set(far["allocator"]) == {"debug"}


def test_a_single_workload_forest_has_readable_ticks(tmp_path):
    table = pd.DataFrame({"allocator": ["a", "b"], "workload": ["w1", "w1"], "ratio": [1.02, 0.9],
                          "ci_low": [1.0, 0.85], "ci_high": [1.04, 0.95]})
    figures.forest(table, tmp_path / "f.svg", "ratio", percent=True)
    svg = (tmp_path / "f.svg").read_text()
    assert "-10%" in svg or "−10%" in svg
    assert svg.count("<g id=\"xtick_") >= 2


def test_legends_stand_outside_the_data(tmp_path):
    """Every legend of the paper's figures is drawn beside the axes, never over the data."""
    import matplotlib.pyplot as plt

    from analysis.stats import literature

    drawn = []
    original = figures.save
    figures.save = lambda fig, path: drawn.append(fig)
    try:
        figures.literature_003(literature.load_figures(), tmp_path / "l.svg")
        summary = pd.read_csv(REPO / "paper" / "generated" / "noise_coverage.csv")
        figures.coverage(summary, tmp_path / "c.svg")
    finally:
        figures.save = original
    for fig in drawn:
        ax = fig.axes[0]
        renderer = fig.canvas.get_renderer()
        legend = ax.get_legend().get_window_extent(renderer)
        assert not legend.overlaps(ax.get_window_extent(renderer)), fig
        plt.close(fig)


def test_a_label_on_a_tick_label_or_on_another_label_is_moved_clear_of_it():
    from analysis.publish.render import figures

    plt = figures.pyplot()
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 100)
    ax.set_yticks([0, 50, 100])
    fig.canvas.draw()
    on_tick = ax.text(-0.6, 50, "a long label", fontsize=6)  # starts left of the axes, over the "50"
    first, second = ax.text(5, 20, "one", fontsize=6), ax.text(5.05, 20.5, "two", fontsize=6)
    texts = [on_tick, first, second]
    renderer = fig.canvas.get_renderer()
    ticks = [t.get_window_extent(renderer) for t in ax.get_yticklabels() if t.get_text()]
    assert any(on_tick.get_window_extent(renderer).overlaps(t) for t in ticks)
    figures.separate_labels(ax, texts)
    boxes = [t.get_window_extent(renderer) for t in texts]
    assert not any(b.overlaps(t) for b in boxes for t in ticks)
    assert not boxes[1].overlaps(boxes[2])
    plt.close(fig)
