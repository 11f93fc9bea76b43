"""The trade-off plot's label placement computes adjustText's slow steps array-wise: on random layouts (labels
that overlap, touch, cross their targets' lines, sit on their targets, lie parallel), each step gives exactly
what the library's own step gives, so the labels land where the library puts them."""
import adjustText
import numpy as np
import pytest

from analysis.publish.render import label_placement as L

pytestmark = pytest.mark.skipif(adjustText.__version__ != L.VERSION,
                                reason="the array-wise steps reproduce one adjustText version; others run as they are")


def layouts(seed: int, n: int = 300):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        k = int(rng.integers(1, 30))
        grid = rng.integers(0, 6, size=(k, 2)).astype(float) if rng.random() < 0.3 else rng.random((k, 2)) * 5
        w, h = rng.random((k, 1)) + 0.2, rng.random((k, 1)) * 0.5 + 0.1
        coords = np.hstack([grid[:, :1], grid[:, :1] + w, grid[:, 1:], grid[:, 1:] + h])
        targets = grid + (rng.random((k, 2)) - 0.5) * (0 if rng.random() < 0.2 else 3)
        extra = rng.random((int(rng.integers(0, 20)), 4)) * 5
        extra[:, 1] = extra[:, 0] + 0.3
        extra[:, 3] = extra[:, 2] + 0.3
        yield coords, targets, extra


def test_each_array_wise_step_gives_exactly_the_librarys():
    for coords, targets, extra in layouts(7):
        assert np.array_equal(L.remove_crossings(coords.copy(), targets, 0),
                              adjustText.remove_crossings(coords.copy(), targets, 0))
        for mine, theirs in zip(L.get_shifts_texts(coords), adjustText.get_shifts_texts(coords)):
            assert np.array_equal(mine, theirs)
        if len(extra):
            for mine, theirs in zip(L.get_shifts_extra(coords, extra), adjustText.get_shifts_extra(coords, extra)):
                assert np.array_equal(mine, theirs)


def test_the_library_is_left_as_it_was_after_a_placement():
    kept = {name: getattr(adjustText, name) for name in L.FASTER}
    with L._faster_steps():
        assert all(getattr(adjustText, name) is L.FASTER[name] for name in L.FASTER)
    assert all(getattr(adjustText, name) is kept[name] for name in L.FASTER)
