"""A forest plot per debate: every run's ratio with/without (labelled with its run and the name of the machine
that measured it), each host's pooled estimate as a diamond with the rule's decision there (the host named by
its processor kind's label, with its machines), the single estimate over hosts where there is one, the
pre-registered margin as a shaded band and the verdict across hosts. Kinds and machines are named as
everywhere else in the paper (analysis/contract/host.py)."""
import textwrap
from pathlib import Path

import pandas as pd

from analysis.publish.render.figures import (PART_HEIGHT_IN, clear_parts, draws_rounded, part_path, plain_log_axis,
                                             pyplot, save, split_units)

POOLED_COLOUR, RUN_COLOUR, SUPERSEDED_COLOUR, HOST_COLOUR = "#8f2c2c", "#3b6ea8", "#a0a0a0", "#c07a1a"


def run_line(run, labels: dict) -> str:
    """A run's line label: its R-label (`labels`, run id -> R-label), the name of the machine that measured it,
    its layout build past the first, and "(superseded)" for a run of a superseded design."""
    layout = f" layout {int(run['layout'])}" if int(run.get("layout", 1) or 1) > 1 else ""
    return (f"  {labels.get(run['run_id'], run['run_id'])} {run['machine']}{layout}"
            + (" (superseded)" if run["superseded"] else ""))


def kind_line(host) -> str:
    """A host's line label: its processor kind, the machines its runs came from and the rule's decision there."""
    machines = ", ".join(m for m in str(host.get("machines", "") or "").split("; ") if m)
    return f" {host['processor']}" + (f" ({machines})" if machines else "") + f": {host['decision_words']}"


LABEL_CHARS = 64  # a line's label wraps beyond this many characters (70 took a kind of four machines past the placed width)
ROW_IN = 0.15  # the height of one text row of a label


@draws_rounded
def debate_forest(answers: pd.DataFrame, runs: pd.DataFrame, per_host: pd.DataFrame, labels: dict,
                  path: Path, margin: float, rule: str) -> None:
    """One debate: `answers` its rows (configuration, workload, pooled interval, verdict), `runs` every run
    behind them (each with its `processor` kind and `machine` name), `per_host` each host's answer, `labels` run
    id -> R-label. A cell's runs are listed by kind and machine. Superseded runs are drawn in grey and never
    pooled. Long labels wrap; a debate with more lines than a page holds is drawn in parts (figures.part_path),
    each cell whole in one part where it fits."""
    cells = []  # per cell: its lines (label, ratio, low, high, kind)
    for _, a in answers.iterrows():
        lines = []
        mine = runs[(runs["configuration"] == a["configuration"]) & (runs["workload"] == a["workload"])]
        for _, r in mine.sort_values(["processor", "machine"], kind="stable").iterrows():
            lines.append((run_line(r, labels), r["ratio"], r["ci_low"], r["ci_high"],
                          "superseded" if r["superseded"] else "run"))
        cell = per_host[(per_host["configuration"] == a["configuration"]) & (per_host["workload"] == a["workload"])]
        for _, h in cell.iterrows():
            lines.append((kind_line(h), float(h["ratio"]), float(h["ci_low"]), float(h["ci_high"]), "host"))
        pooled = str(a.get("pooled_ratio", "")) not in ("", "n/a") and len(cell) != 1
        lines.append((f"{a['configuration']}, {a['workload']}: {a['verdict']}",
                      *((float(a["pooled_ratio"]), float(a["pooled_low"]), float(a["pooled_high"])) if pooled
                        else (float("nan"),) * 3), "pooled"))
        cells.append([(textwrap.fill(t, LABEL_CHARS, subsequent_indent="    "), *rest) for t, *rest in lines])
    clear_parts(path)
    capacity = int((PART_HEIGHT_IN - 1.0) / ROW_IN)
    # a cell with more runs than a page holds is cut into pieces of its lines first
    cells = [[cell[i] for i in piece] for cell in cells for piece in split_units(_rows(cell), capacity)]
    groups = split_units([sum(_rows(cell)) for cell in cells], capacity)
    for i, group in enumerate(groups):
        _draw(sum((cells[j] for j in group), []), part_path(path, i), margin, rule)


def _rows(lines: list) -> list[int]:
    """The text rows each line's (wrapped) label takes."""
    return [t.count("\n") + 1 for t, *_ in lines]


def _draw(lines: list, path: Path, margin: float, rule: str) -> None:
    plt = pyplot()
    heights = _rows(lines)
    ys = [sum(heights[:i]) + (h - 1) / 2 for i, h in enumerate(heights)]
    rows = sum(heights)
    fig, ax = plt.subplots(figsize=(5.6, 1.0 + ROW_IN * max(1, rows)))
    band = (1 / (1 + margin), 1 + margin) if rule == "equivalent" else (0, 1 + margin)
    ax.axvspan(max(band[0], 1e-3), band[1], color="#cfe8cf", alpha=0.6, lw=0, label=f"margin {margin * 100:g}%")
    ax.axvline(1.0, color="grey", lw=0.6, ls="--")
    colours = {"run": RUN_COLOUR, "superseded": SUPERSEDED_COLOUR, "pooled": POOLED_COLOUR, "host": HOST_COLOUR}
    for y, (_, ratio, lo, hi, kind) in zip(ys, lines):
        if ratio != ratio:  # a verdict with no single estimate over hosts: its line has words only
            continue
        ax.errorbar([ratio], [y], xerr=[[ratio - lo], [hi - ratio]], fmt="o" if kind in ("run", "superseded") else "D",
                    ms=2.5 if kind in ("run", "superseded") else 4, color=colours[kind],
                    elinewidth=0.8 if kind in ("run", "superseded") else 1.2,
                    capsize=1.5)
    ax.set_yticks(ys, [t for t, *_ in lines], fontsize=6)
    ax.set_ylim(rows - 0.5, -0.5)
    ratios = [v for _, r, lo, hi, _ in lines for v in (lo, hi) if v == v] + [1.0, band[1]]
    ax.set_xscale("log")
    ax.set_xlim(min(ratios) / 1.02, max(ratios) * 1.02)
    plain_log_axis(ax)
    ax.tick_params(axis="x", labelsize=6)
    ax.set_xlabel("with / without, wall time (95% interval; a run: its R-label and machine)", fontsize=6)
    ax.legend(fontsize=6, loc="lower right")
    fig.tight_layout()
    save(fig, path)


def write_all(answers: pd.DataFrame, runs: pd.DataFrame, per_host: pd.DataFrame, labels: dict, spec: dict,
              path_of) -> list[str]:
    """A figure per debate with at least one host's answer; returns the seeds drawn."""
    drawn = []
    for seed, rows in answers.groupby("seed", sort=True):
        answered = per_host[per_host["seed"] == seed]
        rows = rows[[((answered["configuration"] == c) & (answered["workload"] == w)).any()
                     for c, w in zip(rows["configuration"], rows["workload"])]]
        if rows.empty:
            continue
        q = spec[seed]
        debate_forest(rows, runs[runs["seed"] == seed], answered, labels, path_of(seed), q.margin, q.rule)
        drawn.append(seed)
    return drawn
