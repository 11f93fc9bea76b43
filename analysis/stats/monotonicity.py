"""Monotonicity in defences: removing a defence must not raise the security score, and a probe of the removed
defence must tell the two configurations apart. The pairs come from the catalogue's claims
(defence_pairs); the scores and their posterior from analysis/stats/security.py."""
import math

import numpy as np

from analysis.stats.security import (
    DEFENCE_PROBES, _draw_loss, _probe_loss_cells, _score_arrays, posterior_loss, size_of, weights_file,
)

TOLD_APART = 0.1  # a probe tells a pair apart when its loss with the defence is lower by at least this share


def defence_pairs(claims: dict[str, tuple], families: dict[str, str]) -> list[tuple[str, str, tuple]]:
    """Knock-out pairs from the catalogue: (with, without, removed defences) for every two configurations of
    one family whose claimed defences differ only by what `with` adds (glibc-built and glibc-no-tcache-key,
    scudo-quarantine and scudo, hardened_malloc and its light configuration)."""
    pairs = []
    for a in sorted(claims):
        for b in sorted(claims):
            if a != b and families.get(a) is not None and families.get(a) == families.get(b) \
                    and set(claims[b]) < set(claims[a]):
                pairs.append((a, b, tuple(d for d in claims[a] if d not in set(claims[b]))))
    return pairs


def _probe_losses(rows) -> dict:
    """{(allocator, probe): {size: posterior loss}} over the usable rows."""
    out: dict = {}
    for row in rows:
        loss = posterior_loss(row)
        if loss is not None:
            out.setdefault((row["allocator"], row["probe"]), {})[size_of(row)] = loss
    return out


def told_apart(losses: dict, with_: str, without: str, defence: str) -> tuple[list[str], bool]:
    """(the probes of a defence, DEFENCE_PROBES, whose loss at a size both ran is lower by TOLD_APART at least
    with the defence than without it, as "probe@size"; whether any probe of it ran on both sides)."""
    found, measured = [], False
    for probe in DEFENCE_PROBES.get(defence, ((), None))[0]:
        a, b = losses.get((with_, probe), {}), losses.get((without, probe), {})
        both = sorted(set(a) & set(b), key=lambda s: s or 0)
        measured = measured or bool(both)
        found += [f"{probe}{'' if s is None else f'@{s}'}" for s in both if b[s] - a[s] >= TOLD_APART]
    return found, measured


def driver(rows, with_: str, without: str, weights: dict) -> dict | None:
    """The entry (a probe or a primitive cell) that takes the most points off `with_`'s score against
    `without`'s: 100 w_p (L_p,with / W_with - L_p,without / W_without) over the entries both have, W each side's
    weight with data. None when no entry takes points off."""
    cells = _probe_loss_cells(rows, [posterior_loss(r) for r in rows])
    a, b = cells.get(with_, {}), cells.get(without, {})

    def total(c):
        return sum(float(weights.get(p, 0.0)) for p, x in c.items() if x is not None) or 1.0
    wa, wb = total(a), total(b)
    best = None
    for p in sorted(set(a) & set(b)):
        if a[p] is None or b[p] is None:
            continue
        w = float(weights.get(p, 0.0))
        points = 100 * w * (a[p] / wa - b[p] / wb)
        if points > 0 and (best is None or points > best["points"]):
            best = {"entry": p, "points": points, "loss_with": a[p], "loss_without": b[p]}
    return best


def monotonicity(rows, pairs, weights: dict | None = None, *, draws: int = 2000, seed: int = 0) -> list[dict]:
    """Per knock-out pair (defence_pairs) with a score on both sides: the scores, their difference (with -
    without) and its 95% interval from the two posteriors (as score_intervals draws them); `raised` when the
    interval lies wholly below 0 (removing the defences raised the score beyond what sampling explains); per
    removed defence, the probes that tell the pair apart (`apart`), `blind`: the removed defences whose probes
    ran on both sides and none tells them apart, `unmeasured`: those whose probes did not run on both; for a
    raised pair, `driver`: the entry that takes the most points off the side with the defences (driver)."""
    weights = weights_file().weights() if weights is None else weights
    rows = list(rows)
    rng = np.random.default_rng(seed)
    point = [posterior_loss(r) for r in rows]
    drawn = _score_arrays(rows, weights, [None if x is None else _draw_loss(r, x, rng, draws)
                                          for r, x in zip(rows, point)])
    mean = _score_arrays(rows, weights, point)
    losses = _probe_losses(rows)
    out = []
    for with_, without, removed in pairs:
        if any(a not in mean or math.isnan(mean[a]["score"]) for a in (with_, without)):
            continue
        diff = np.asarray(drawn[with_]["score"]) - np.asarray(drawn[without]["score"])
        low, high = (float(x) for x in np.quantile(diff, [0.025, 0.975]))
        apart = {d: told_apart(losses, with_, without, d) for d in removed}
        out.append({"with": with_, "without": without, "removed": " ".join(removed),
                    "score_with": mean[with_]["score"], "score_without": mean[without]["score"],
                    "difference": mean[with_]["score"] - mean[without]["score"], "difference_low": low,
                    "difference_high": high, "raised": high < 0,
                    "apart": "; ".join(f"{d}: {', '.join(p)}" for d, (p, _) in apart.items() if p),
                    "blind": " ".join(d for d, (p, ran) in apart.items() if ran and not p),
                    "unmeasured": " ".join(d for d, (_, ran) in apart.items() if not ran),
                    "driver": (driver(rows, with_, without, weights) or {}).get("entry", "") if high < 0 else ""})
    return out
