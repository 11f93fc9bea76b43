"""A forest plot per debate: every run's ratio with/without (labelled with its run and host), the pooled
estimate as a diamond, the pre-registered margin as a shaded band and the verdict the rule gives."""
from pathlib import Path

import pandas as pd

from analysis.publish.figures import draws_rounded, plain_log_axis, pyplot, save

POOLED_COLOUR, RUN_COLOUR, SUPERSEDED_COLOUR = "#8f2c2c", "#3b6ea8", "#a0a0a0"


def host_labels(runs: pd.DataFrame) -> dict[str, str]:
    """Short host names (H1, H2, ...) in order of first appearance."""
    return {h: f"H{i}" for i, h in enumerate(dict.fromkeys(runs["host"]), start=1)}


@draws_rounded
def debate_forest(answers: pd.DataFrame, runs: pd.DataFrame, labels: dict, hosts: dict, path: Path, margin: float,
                  rule: str) -> None:
    """One debate: `answers` its rows (configuration, workload, pooled interval, verdict), `runs` every run
    behind them, `labels` run id -> R-label, `hosts` host -> H-label (the same in every debate's figure).
    Superseded runs are drawn in grey and never pooled."""
    plt = pyplot()
    hosts = {h: hosts[h] for h in dict.fromkeys(runs["host"])}
    lines = []  # (label, ratio, low, high, kind)
    for _, a in answers.iterrows():
        mine = runs[(runs["configuration"] == a["configuration"]) & (runs["workload"] == a["workload"])]
        for _, r in mine.iterrows():
            layout = f" layout {int(r['layout'])}" if int(r.get("layout", 1) or 1) > 1 else ""
            lines.append((f"  {labels.get(r['run_id'], r['run_id'])} {hosts[r['host']]}{layout}"
                          + (" (superseded)" if r["superseded"] else ""),
                          r["ratio"], r["ci_low"], r["ci_high"], "superseded" if r["superseded"] else "run"))
        if a.get("pooled_display", "n/a") != "n/a":
            lines.append((f"{a['configuration']}, {a['workload']}: {a['verdict']}", float(a["pooled_ratio"]),
                          float(a["pooled_low"]), float(a["pooled_high"]), "pooled"))
    fig, ax = plt.subplots(figsize=(6.0, 0.7 + 0.2 * max(1, len(lines))))
    band = (1 / (1 + margin), 1 + margin) if rule == "equivalent" else (0, 1 + margin)
    ax.axvspan(max(band[0], 1e-3), band[1], color="#cfe8cf", alpha=0.6, lw=0, label=f"margin {margin * 100:g}%")
    ax.axvline(1.0, color="grey", lw=0.6, ls="--")
    colours = {"run": RUN_COLOUR, "superseded": SUPERSEDED_COLOUR, "pooled": POOLED_COLOUR}
    for y, (_, ratio, lo, hi, kind) in enumerate(lines):
        ax.errorbar([ratio], [y], xerr=[[ratio - lo], [hi - ratio]], fmt="D" if kind == "pooled" else "o",
                    ms=4 if kind == "pooled" else 2.5, color=colours[kind], elinewidth=1.2 if kind == "pooled" else 0.8,
                    capsize=1.5)
    ax.set_yticks(range(len(lines)), [t for t, *_ in lines], fontsize=6)
    ax.set_ylim(len(lines) - 0.5, -0.5)
    ratios = [v for _, r, lo, hi, _ in lines for v in (lo, hi)] + [1.0, band[1]]
    ax.set_xscale("log")
    ax.set_xlim(min(ratios) / 1.02, max(ratios) * 1.02)
    plain_log_axis(ax)
    ax.tick_params(axis="x", labelsize=6)
    ax.set_xlabel("with / without, wall time (95% interval; hosts " +
                  ", ".join(f"{v}: {k}" for k, v in hosts.items()) + ")" if hosts else "with / without", fontsize=6)
    ax.legend(fontsize=6, loc="lower right")
    fig.tight_layout()
    save(fig, path)


def write_all(answers: pd.DataFrame, runs: pd.DataFrame, labels: dict, spec: dict, path_of) -> list[str]:
    """A figure per debate with at least one pooled answer; returns the seeds drawn."""
    hosts = host_labels(runs) if len(runs) else {}
    drawn = []
    for seed, rows in answers.groupby("seed", sort=True):
        rows = rows[rows["pooled_display"].astype(str).ne("n/a") & rows["pooled_display"].astype(str).ne("")]
        if rows.empty:
            continue
        q = spec[seed]
        debate_forest(rows, runs[runs["seed"] == seed], labels, hosts, path_of(seed), q.margin, q.rule)
        drawn.append(seed)
    return drawn
