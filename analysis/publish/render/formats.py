"""How the products print what they give: ratios and intervals to three decimals, an interval too wide to
resolve anything or a start-up time below zero said in words, scores, shares and percentages, and long clauses
that recur across a table's rows said once as notes."""
import numpy as np
import pandas as pd


def fmt_ratio(x) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.3f}"


def fmt_interval(ratio, lo, hi) -> str:
    return f"{fmt_ratio(ratio)} [{fmt_ratio(lo)}, {fmt_ratio(hi)}]"


# An interval whose bounds differ by more than this factor resolves nothing: printed as not estimable, with why.
WIDEST_RESOLVED = 100.0


def fmt_resolved_interval(ratio, lo, hi) -> str:
    """A ratio with its interval, or "not estimable" with the reason when the interval spans more than a
    factor of WIDEST_RESOLVED (or a bound is missing or not positive)."""
    if not all(np.isfinite(x) for x in (ratio, lo, hi)) or lo <= 0 or hi <= 0:
        return "not estimable: no interval"
    if hi / lo > WIDEST_RESOLVED:
        return f"not estimable: the interval spans a factor of {hi / lo:,.0f}"
    return fmt_interval(ratio, lo, hi)


def fmt_startup_ms(ms, lo, hi) -> str:
    """A start-up time in milliseconds, never negative: an interval wholly below zero is no start-up (the time
    grows faster than the work), a negative estimate whose interval reaches above zero is at most its upper
    bound, and a lower bound below zero is shown as zero."""
    if not all(np.isfinite(x) for x in (ms, lo, hi)):
        return "not estimable: no interval"
    if hi < 0:
        return "not estimable: time grows faster than the work"
    if ms < 0:
        return f"at most {hi:.1f}"
    return f"{ms:.1f} [{max(lo, 0.0):.1f}, {hi:.1f}]"


def fmt_score(x) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.1f}"


def fmt_share(x) -> str:
    """A share as a percentage: 0.546 -> 54.6%."""
    return "n/a" if x is None or not np.isfinite(x) else f"{x * 100:.1f}%"


def fmt_percent(ratio) -> str:
    """A ratio as a signed percentage change: 1.025 -> +2.5%."""
    return "n/a" if ratio is None or not np.isfinite(ratio) else f"{(ratio - 1) * 100:+.1f}%"


# A clause of a build's description this long, repeated in this many rows, is said once as a note.
NOTE_MIN_CHARS, NOTE_MIN_ROWS = 60, 2


def _clauses(text: str) -> list[str]:
    """A text split at "; " outside parentheses."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and text.startswith("; ", i):
            out.append(text[start:i])
            start = i + 2
    return out + [text[start:]]


def shared_notes(texts: pd.Series) -> tuple[list[str], list[tuple[str, str]]]:
    """Each text with its long clauses (split at "; " outside parentheses) that recur across rows replaced by a reference to a
    note said once: (the texts as shown, [(note label, note text)])."""
    clauses = [[c.strip() for c in _clauses(t) if c.strip()] for t in texts]
    counts: dict[str, int] = {}
    for cs in clauses:
        for c in dict.fromkeys(cs):
            counts[c] = counts.get(c, 0) + 1
    labels: dict[str, str] = {}
    for cs in clauses:
        for c in cs:
            if c not in labels and len(c) >= NOTE_MIN_CHARS and counts[c] >= NOTE_MIN_ROWS:
                labels[c] = f"N{len(labels) + 1}"
    shown = ["; ".join(f"see {labels[c]}" if c in labels else c for c in cs) for cs in clauses]
    return shown, [(label, text) for text, label in labels.items()]
