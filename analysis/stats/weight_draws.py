"""The security score under other weights: the weights follow the attacker capability (security_weights.toml), so
the draws move each capability's entries together; scores drawn under them and the probes' sampling at once; and the
verdicts that survive them ("safer" or "less safe" only when the difference holds in at least SURE of the draws)."""
import numpy as np
import pandas as pd

from analysis.stats.security import _draw_loss, _probe_loss_cells, posterior_loss, scores, weights_file

# The weights are a judgement. To show what it carries, scores are also drawn under other weights. The weights
# follow the capability, so the draws do too: the capabilities' total weights are drawn from a Dirichlet whose
# mean is their published shares, and every entry of a capability moves with it (an entry outside the weights
# file is a capability of its own). Concentration c gives a capability of share m a standard deviation of
# sqrt(m (1 - m) / (c + 1)); c is set so that a capability of the average share 1/K has a standard deviation of
# WEIGHT_CV times its weight (5 capabilities: c = 15).
WEIGHT_CV = 0.5
SURE = 0.95  # "safer" / "less safe" only when the difference holds in at least this share of the draws
INDISTINCT = "not distinguishable under the weights"


def weight_concentration(n_groups: int, cv: float = WEIGHT_CV) -> float:
    """The Dirichlet concentration giving a group of the average share 1/n the coefficient of variation cv."""
    m = 1 / n_groups
    return (1 - m) / (m * cv * cv) - 1


def weight_groups(weights: dict, capability_of: dict | None = None) -> dict[str, list]:
    """{capability: [entries with a positive weight]}, in the weights' order."""
    capability_of = weights_file().capability_of() if capability_of is None else capability_of
    groups: dict[str, list] = {}
    for p, w in weights.items():
        if w > 0:
            groups.setdefault(capability_of.get(p, p), []).append(p)
    return groups


def weight_draws(weights: dict, draws: int, seed: int = 0, cv: float = WEIGHT_CV,
                 capability_of: dict | None = None) -> tuple[list, np.ndarray]:
    """(entries, draws x entries weights): the capabilities' totals from the Dirichlet around their published
    shares, each entry scaled with its capability; each draw sums to the published total."""
    groups = weight_groups(weights, capability_of)
    totals = np.array([sum(float(weights[p]) for p in members) for members in groups.values()])
    alpha = totals / totals.sum() * weight_concentration(len(groups), cv) if len(groups) > 1 else totals
    drawn = (np.random.default_rng(seed).dirichlet(alpha, size=draws) * totals.sum() if len(groups) > 1
             else np.tile(totals, (draws, 1)))
    entries, columns = [], []
    for g, members in enumerate(groups.values()):
        for p in members:
            entries.append(p)
            columns.append(drawn[:, g] * float(weights[p]) / totals[g])
    return entries, np.stack(columns, axis=1) if columns else np.zeros((draws, 0))


def weighted_score_draws(rows, weights: dict | None = None, *, draws: int = 2000, seed: int = 0,
                         cv: float = WEIGHT_CV, capability_of: dict | None = None) -> dict[str, np.ndarray]:
    """Per allocator, `draws` scores, each under one weight draw (weight_draws) and one posterior draw of every
    row's loss (score_intervals): the spread is the weights' and the probes' sampling together. Draw k uses the
    same weights for every allocator, so a difference of two allocators' draws is a draw of their difference."""
    weights = weights_file().weights() if weights is None else weights
    rows = list(rows)
    rng = np.random.default_rng(seed + 1)
    point = [posterior_loss(r) for r in rows]
    cells = _probe_loss_cells(rows, [None if x is None else _draw_loss(r, x, rng, draws)
                                     for r, x in zip(rows, point)])
    probes, w = weight_draws(weights, draws, seed, cv, capability_of)
    out = {}
    for alloc, losses in cells.items():
        cols = [i for i, p in enumerate(probes) if losses.get(p) is not None]
        if not cols:
            out[alloc] = np.full(draws, np.nan)
            continue
        lost = sum(w[:, i] * np.broadcast_to(losses[probes[i]], draws) for i in cols)
        out[alloc] = 100 * (1 - lost / w[:, cols].sum(axis=1))
    return out


def share_above(drawn: dict[str, np.ndarray], a: str, b: str) -> float:
    """The share of joint draws in which a scores above b (nan when either has no score)."""
    x, y = drawn.get(a), drawn.get(b)
    if x is None or y is None or np.isnan(x).all() or np.isnan(y).all():
        return float("nan")
    return float(np.mean(x > y))


def safety_verdict(share: float, sure: float = SURE) -> str:
    """"safer" when a scored above b in at least `sure` of the draws, "less safe" when in at most 1 - sure,
    INDISTINCT otherwise."""
    if share != share:
        return INDISTINCT
    return "safer" if share >= sure else "less safe" if share <= 1 - sure else INDISTINCT


def weighted_intervals(rows, weights: dict | None = None, baseline: str | None = None, *, draws: int = 2000,
                       seed: int = 0) -> pd.DataFrame:
    """Per allocator: the score's 95% interval under drawn weights and the probes' sampling together
    (weights_low, weights_high), the share of those draws in which it scores above the baseline (above_baseline)
    and the points the primitive cells take off 100 and their share of the weight."""
    weights = weights_file().weights() if weights is None else weights
    rows = list(rows)
    drawn = weighted_score_draws(rows, weights, draws=draws, seed=seed)
    point = scores(rows, weights)
    out = []
    for a in sorted(drawn):
        v = drawn[a]
        low, high = (float("nan"),) * 2 if np.isnan(v).all() else (float(x) for x in np.nanquantile(v, [0.025, 0.975]))
        out.append({"allocator": a, "weights_low": low, "weights_high": high,
                    "above_baseline": share_above(drawn, a, baseline) if baseline and a != baseline else float("nan"),
                    "primitive_points": point[a]["primitive_points"], "primitive_share": point[a]["primitive_share"]})
    return pd.DataFrame(out, columns=["allocator", "weights_low", "weights_high", "above_baseline",
                                      "primitive_points", "primitive_share"])
