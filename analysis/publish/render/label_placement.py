"""adjustText's label placement, the same positions in less time.

adjustText 1.4.0 (pinned in requirements.txt) runs every iteration through a Python loop over all pairs of
labels (`remove_crossings`) and a broadcast comparison of every pair of overlaps (`get_shifts_texts`,
`get_shifts_extra`): with 30 labels and 2000 iterations, seconds. `adjust_text` here calls the library's own
function with those steps computed array-wise: the same floating-point operations on the same values, taken
in the same order, so every label lands where the library puts it (the figures' bytes do not change). Under
any other adjustText version the library runs as it is.
"""
import contextlib
import logging

import numpy as np

VERSION = "1.4.0"  # the adjustText whose steps these functions reproduce


def _intersecting(connections: np.ndarray) -> np.ndarray:
    """adjustText.intersect of every pair of segments (mid of a label, its target), [i, j]: seg1 = i."""
    x1, y1, x2, y2 = (connections[:, k][:, None] for k in range(4))
    x3, y3, x4, y4 = (connections[:, k][None, :] for k in range(4))
    denom = (y4 - y3) * (x2 - x1) - (x4 - x3) * (y2 - y1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ua = ((x4 - x3) * (y1 - y3) - (y4 - y3) * (x1 - x3)) / denom
        ub = ((x2 - x1) * (y1 - y3) - (y2 - y1) * (x1 - x3)) / denom
    # as the scalar test: parallel is no crossing, and a NaN fails neither range check
    return (denom != 0) & ~(ua < 0) & ~(ua > 1) & ~(ub < 0) & ~(ub > 1)


def remove_crossings(coords, target_coords, step):
    import adjustText

    connections = np.hstack([np.mean(coords[:, :2], axis=1)[:, np.newaxis],
                             np.mean(coords[:, 2:], axis=1)[:, np.newaxis], target_coords])
    crossing = np.tril(_intersecting(connections), k=-1)  # the pairs i > j the library visits
    debug = adjustText.logger.isEnabledFor(logging.DEBUG)
    for i, j in zip(*np.nonzero(crossing)):  # row by row, then column: the library's order of swaps
        if debug:
            adjustText.logger.debug(f"Removing crossing at step {step}: {i} and {j}")
            adjustText.logger.debug(f"Segments: {connections[i]} and {connections[j]}")
        coords[i], coords[j] = coords[j].copy(), coords[i].copy()
    return coords


def _rows_in(pairs: np.ndarray, among: np.ndarray) -> np.ndarray:
    """Which rows of `pairs` (index pairs) are rows of `among`: the library's (pairs[:, None] == among)
    .all(-1).any(-1), without the broadcast."""
    if not len(pairs) or not len(among):
        return np.zeros(len(pairs), dtype=bool)
    width = int(max(pairs.max(), among.max())) + 1
    return np.isin(pairs[:, 0] * width + pairs[:, 1], among[:, 0] * width + among[:, 1])


def get_shifts_texts(coords):
    from adjustText import overlap_intervals

    N = coords.shape[0]
    xoverlaps = overlap_intervals(coords[:, 0], coords[:, 1], coords[:, 0], coords[:, 1])
    xoverlaps = xoverlaps[xoverlaps[:, 0] != xoverlaps[:, 1]]
    yoverlaps = overlap_intervals(coords[:, 2], coords[:, 3], coords[:, 2], coords[:, 3])
    yoverlaps = yoverlaps[yoverlaps[:, 0] != yoverlaps[:, 1]]
    overlaps = yoverlaps[_rows_in(yoverlaps, xoverlaps)]
    if len(overlaps) == 0:
        return np.zeros((coords.shape[0])), np.zeros((coords.shape[0]))
    diff = coords[overlaps[:, 1]] - coords[overlaps[:, 0]]
    xshifts = np.where(np.abs(diff[:, 0]) < np.abs(diff[:, 1]), diff[:, 0], diff[:, 1])
    yshifts = np.where(np.abs(diff[:, 2]) < np.abs(diff[:, 3]), diff[:, 2], diff[:, 3])
    xshifts = np.bincount(overlaps[:, 0], xshifts, minlength=N)
    yshifts = np.bincount(overlaps[:, 0], yshifts, minlength=N)
    return xshifts, yshifts


def get_shifts_extra(coords, extra_coords):
    from adjustText import overlap_intervals

    N = coords.shape[0]
    xoverlaps = overlap_intervals(coords[:, 0], coords[:, 1], extra_coords[:, 0], extra_coords[:, 1])
    yoverlaps = overlap_intervals(coords[:, 2], coords[:, 3], extra_coords[:, 2], extra_coords[:, 3])
    overlaps = yoverlaps[_rows_in(yoverlaps, xoverlaps)]
    if len(overlaps) == 0:
        return np.zeros((coords.shape[0])), np.zeros((coords.shape[0]))
    diff_x = coords[overlaps[:, 0], :2] - extra_coords[overlaps[:, 1], -3::-1]
    diff_y = coords[overlaps[:, 0], 2:] - extra_coords[overlaps[:, 1], -1:-3:-1]
    xshifts = np.where(np.abs(diff_x[:, 0]) < np.abs(diff_x[:, 1]), diff_x[:, 0], diff_x[:, 1])
    yshifts = np.where(np.abs(diff_y[:, 0]) < np.abs(diff_y[:, 1]), diff_y[:, 0], diff_y[:, 1])
    xshifts = np.bincount(overlaps[:, 0], xshifts, minlength=N)
    yshifts = np.bincount(overlaps[:, 0], yshifts, minlength=N)
    return xshifts, yshifts


FASTER = {"remove_crossings": remove_crossings, "get_shifts_texts": get_shifts_texts,
          "get_shifts_extra": get_shifts_extra}


@contextlib.contextmanager
def _faster_steps():
    import adjustText

    if adjustText.__version__ != VERSION:
        yield
        return
    kept = {name: getattr(adjustText, name) for name in FASTER}
    vars(adjustText).update(FASTER)
    try:
        yield
    finally:
        vars(adjustText).update(kept)


def adjust_text(texts, **kwargs):
    """adjustText.adjust_text(texts, **kwargs), its slow steps computed array-wise."""
    from adjustText import adjust_text as library

    with _faster_steps():
        return library(texts, **kwargs)
