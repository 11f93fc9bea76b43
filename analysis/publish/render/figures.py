"""Every figure of the paper and the notebooks, and the one place that configures matplotlib.

`pyplot()` gives a non-interactive pyplot with the house style; `save()` writes SVG whose bytes depend
only on the figure (fixed hash salt for element ids, no date, no creator), so the same data gives the
same file. Each function draws one figure from a table the results, security or literature code made.
"""
import functools
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.publish.render.products import rounded

STYLE = {"svg.hashsalt": "heapcost", "svg.fonttype": "path", "font.size": 8,
         "axes.spines.top": False, "axes.spines.right": False}
OUTCOME_COLOURS = {"caught": "#1a9850", "mitigated": "#a6d96a", "missed": "#d73027", "late-crash": "#fdae61",
                   "n/a": "#e0e0e0"}
OUTCOME_COLOURS["allocator-failed-to-start"] = "#9e9ac8"  # died before the probe's setup


def pyplot():
    """pyplot on the Agg backend, in seaborn's paper style with the house's SVG settings."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(context="paper", style="whitegrid", palette="colorblind", rc=STYLE)
    return plt


def draws_rounded(draw):
    """The figure is drawn from its tables with every float rounded as the CSVs write it, so that the
    coordinates in the SVG do not depend on the host's last bit either."""
    @functools.wraps(draw)
    def drawn(*args, **kwargs):
        keep = lambda v: v if isinstance(v, (str, Path)) or v is None else rounded(v)
        return draw(*[keep(a) for a in args], **{k: keep(v) for k, v in kwargs.items()})
    return drawn


def save(fig, path: Path) -> None:
    """SVG with stable bytes, then the figure is closed."""
    import io

    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    Path(path).write_text(stable_ids(buf.getvalue()))


# A figure taller than this is split into parts (<stem>-part<N>.svg beside <stem>.svg, placed one after another
# by fig() in paper/common.typ): fig() shrinks a figure taller than 20 cm (7.87 in) to that height, which would
# take its text below a legible size.
PART_HEIGHT_IN = 7.6


def part_path(path: Path, index: int) -> Path:
    """The file of part `index` (0-based) of the figure at `path`: the first keeps the figure's own name."""
    path = Path(path)
    return path if index == 0 else path.with_name(f"{path.stem}-part{index + 1}{path.suffix}")


def clear_parts(path: Path) -> None:
    """Remove the parts an earlier drawing of `path` left (a figure drawn again may have fewer)."""
    path = Path(path)
    for old in path.parent.glob(f"{path.stem}-part*{path.suffix}"):
        old.unlink()


def split_units(units: list[int], capacity: int) -> list[list[int]]:
    """Indices of `units` (each item's height in rows) in consecutive groups of at most `capacity` rows, as even
    as the items allow; an item taller than the capacity stands alone."""
    total = sum(units)
    if total <= capacity:
        return [list(range(len(units)))]
    target = total / -(-total // capacity)  # the even share of the fewest parts that fit
    groups, current, filled = [], [], 0
    for i, u in enumerate(units):
        if current and (filled + u > capacity or filled >= target):
            groups.append(current)
            current, filled = [], 0
        current.append(i)
        filled += u
    return groups + ([current] if current else [])


# matplotlib names clip paths, markers and hatches by a hash of their full-precision coordinates, whose
# last bit depends on the host (SIMD path, BLAS threads): numbered in order of appearance they do not
_HASHED_ID = re.compile(r"\b[pmh][0-9a-f]{10}\b")
_DEFINED_ID = re.compile(r'id="([pmh][0-9a-f]{10})"')


def stable_ids(svg: str) -> str:
    """`svg` with matplotlib's hashed element ids replaced by their order of definition."""
    order = {old: f"{old[0]}{i:010d}" for i, old in enumerate(dict.fromkeys(_DEFINED_ID.findall(svg)))}
    return _HASHED_ID.sub(lambda m: order.get(m.group(0), m.group(0)), svg)


def plain_log_axis(ax) -> None:
    """Plain numbers on a log axis: 1, 2, 5 per decade over a short range, decades only over a long one."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    lo, hi = ax.get_xlim()
    subs = (1.0, 2.0, 5.0) if hi / max(lo, 1e-12) < 30 else (1.0,)
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
    ax.xaxis.set_minor_formatter(plt_null_formatter())


def plt_null_formatter():
    from matplotlib.ticker import NullFormatter

    return NullFormatter()


NEAR_ONE = (0.5, 2.0)  # allocators whose typical ratio lies here are drawn on a percent axis clipped to it
PERCENT_TICKS = (0.5, 0.67, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0)


def split_near_one(table: pd.DataFrame, geomean: pd.DataFrame, bounds=NEAR_ONE) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rows of the allocators whose geometric-mean ratio lies within bounds, the others), so that the
    differences the debates are about (a few percent) are not squeezed by the debugging allocators'
    hundredfold ones."""
    lo, hi = bounds
    near = set(geomean.loc[(geomean["geomean_ratio"] >= lo) & (geomean["geomean_ratio"] <= hi), "allocator"])
    return table[table["allocator"].isin(near)], table[~table["allocator"].isin(near)]


def percent_axis(ax, lo: float, hi: float) -> None:
    """A log ratio axis labelled as signed percentage changes (0.9 -> -10%, 1.25 -> +25%)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter

    span = [t for t in PERCENT_TICKS if lo <= t <= hi] or [1.0]
    ticks = span if len(span) <= 5 else [t for t in span if t in (0.5, 0.8, 1.0, 1.25, 2.0)]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: "0" if abs(x - 1) < 1e-9 else f"{(x - 1) * 100:+.0f}%"))
    ax.xaxis.set_minor_formatter(plt_null_formatter())


FOREST_ROW_IN = 0.12  # one allocator's row in a forest panel


@draws_rounded
def forest(table: pd.DataFrame, path: Path, xlabel: str, percent: bool = False, col_wrap: int = 2) -> None:
    """One panel per workload (a seaborn FacetGrid): each allocator's ratio to the baseline with its 95%
    confidence interval on a log axis. percent=True labels it in percent and clips it to NEAR_ONE: an
    interval that leaves the range ends in a triangle at the edge. More panels than a page holds at a legible
    size are drawn in parts (part_path), rows of panels at a time, and more allocators than a panel holds in
    groups of them; every part keeps the whole table's axis range."""
    clear_parts(path)
    if table.empty:
        return
    order = sorted(table["allocator"].unique())
    workloads = sorted(table["workload"].unique())
    lo, hi = float(table["ci_low"].min()) / 1.05, float(table["ci_high"].max()) * 1.05
    if percent:
        lo, hi = max(lo, NEAR_ONE[0]), min(hi, NEAR_ONE[1])
    groups = split_units([1] * len(order), int((PART_HEIGHT_IN - 1.0) / FOREST_ROW_IN))
    index = 0
    for group in groups:
        allocs = [order[i] for i in group]
        panel = 0.4 + FOREST_ROW_IN * len(allocs)
        per_part = max(1, int((PART_HEIGHT_IN - 0.5) // panel)) * col_wrap
        for start in range(0, len(workloads), per_part):
            mine = workloads[start:start + per_part]
            _forest_part(table[table["allocator"].isin(allocs) & table["workload"].isin(mine)], allocs, mine,
                         part_path(path, index), xlabel, percent, col_wrap, lo, hi)
            index += 1


def _forest_part(table, order, workloads, path, xlabel, percent, col_wrap, lo, hi) -> None:
    import seaborn as sns

    if table.empty:
        return
    plt = pyplot()
    height = 0.4 + FOREST_ROW_IN * len(order)
    grid = sns.FacetGrid(table, col="workload", col_order=workloads, col_wrap=min(col_wrap, len(workloads)),
                         sharex=True, sharey=True, height=height,
                         aspect=2.4 * col_wrap / min(col_wrap, len(workloads)) / height)  # a lone panel: the full width
    colour = sns.color_palette()[0]

    def panel(data, **_):
        ax = plt.gca()  # FacetGrid makes each workload's axes current before calling
        ys = np.array([order.index(a) for a in data["allocator"]])
        low, mid, high = (data[c].clip(lo, hi).to_numpy() for c in ("ci_low", "ratio", "ci_high"))
        ax.errorbar(mid, ys, xerr=[mid - low, high - mid], fmt="o", ms=2.5, elinewidth=1, capsize=1.5,
                    color=colour)
        for edge, marker, beyond in ((hi, ">", data["ci_high"].to_numpy() > hi), (lo, "<", data["ci_low"].to_numpy() < lo)):
            if beyond.any():
                ax.plot([edge] * int(beyond.sum()), ys[beyond], marker, ms=3, color=colour, clip_on=False)
        ax.axvline(1.0, color="grey", lw=0.6, ls="--")

    grid.map_dataframe(panel)
    for ax in grid.axes.flat:
        ax.set_xscale("log")
        ax.set_xlim(lo, hi)
        ax.set_yticks(range(len(order)), order)
        ax.set_ylim(len(order) - 0.5, -0.5)
        ax.tick_params(axis="both", labelsize=6)
        percent_axis(ax, lo, hi) if percent else plain_log_axis(ax)
    grid.set_titles("{col_name}", size=7)
    grid.set_axis_labels("", "")
    grid.figure.supxlabel(xlabel, fontsize=7)
    grid.figure.tight_layout()
    save(grid.figure, path)


@draws_rounded
def ablation_figure(table: pd.DataFrame, path: Path, xlabel: str) -> None:
    plt = pyplot()
    pooled = table[table["workload"] == "all"].reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(5.5, 0.6 + 0.3 * max(1, len(pooled))))
    for y, r in pooled.iterrows():
        ax.errorbar([r["ratio"]], [y], xerr=[[r["ratio"] - r["ci_low"]], [r["ci_high"] - r["ratio"]]],
                    fmt="o", ms=3, color="#8f2c2c", elinewidth=1, capsize=2)
    ax.axvline(1.0, color="grey", lw=0.6, ls="--")
    ax.set_yticks(range(len(pooled)), [f"{r['allocator']} / {r['base']}" for _, r in pooled.iterrows()], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    plain_log_axis(ax)
    ax.set_xlabel(xlabel)
    fig.tight_layout()
    save(fig, path)


@draws_rounded
def per_free_figure(table: pd.DataFrame, path: Path, baseline: str) -> None:
    """One row per allocator, one marker per workload: instructions per free on a log axis."""
    plt = pyplot()
    workloads = sorted(table["workload"].unique())
    allocs = sorted(table["allocator"].unique())
    markers = "osD^v<>phX*"
    fig, ax = plt.subplots(figsize=(5.5, 0.9 + 0.17 * len(allocs)))  # legible on one page
    for i, w in enumerate(workloads):
        sub = table[table["workload"] == w].set_index("allocator")
        ys = [y for y, a in enumerate(allocs) if a in sub.index]
        xs = [sub.loc[a, "instructions_per_free"] for a in allocs if a in sub.index]
        ax.scatter(xs, ys, s=12, marker=markers[i % len(markers)], label=w, alpha=0.8)
    ax.set_yticks(range(len(allocs)), allocs, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    plain_log_axis(ax)
    ax.set_xlabel("instructions per free (callgrind, whole program)")
    ax.legend(fontsize=6, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    save(fig, path)


@draws_rounded
def cost_check_figure(table: pd.DataFrame, path: Path) -> None:
    """Measured against predicted ratio, both with their intervals, one marker per configuration, log axes,
    the line where the two agree."""
    plt = pyplot()
    done = table[table["measured"].notna() & table["predicted"].notna()]
    allocs = sorted(done["allocator"].unique())
    markers = "osD^v<>phX*"
    fig, ax = plt.subplots(figsize=(3.3, 3.0))  # placed two side by side: half the text block, drawn at about its size
    lo = min(done[["low", "measured_low"]].min().min(), 0.9)
    hi = max(done[["high", "measured_high"]].max().max(), 1.1)
    ax.plot([lo, hi], [lo, hi], color="0.6", lw=0.8, zorder=0)
    for i, a in enumerate(allocs):
        sub = done[done["allocator"] == a]
        ax.errorbar(sub["predicted"], sub["measured"],
                    xerr=[sub["predicted"] - sub["low"], sub["high"] - sub["predicted"]],
                    yerr=[sub["measured"] - sub["measured_low"], sub["measured_high"] - sub["measured"]],
                    fmt=markers[i % len(markers)], ms=4, lw=0.7, capsize=0, alpha=0.85, label=a)
    from matplotlib.ticker import FuncFormatter, LogLocator

    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 1.2, 1.5, 2.0, 3.0, 5.0, 7.0)))
        axis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
        axis.set_minor_formatter(plt_null_formatter())
    ax.set_xlabel("predicted ratio (registered interval)")
    ax.set_ylabel("measured ratio (95% CI)")
    ax.legend(fontsize=7, frameon=False, loc="upper left")
    fig.tight_layout()
    save(fig, path)


def tradeoff_axes(ax, trade: pd.DataFrame, baseline: str) -> None:
    """Security score against overhead, both with their intervals; the Pareto front as a step line; the
    labels placed by adjustText so that none covers another."""
    from analysis.publish.render.label_placement import adjust_text

    texts = []
    for _, r in trade.sort_values(["score", "allocator"]).iterrows():
        colour = "#1a9850" if r["pareto"] else "#4d4d4d"
        ax.errorbar([r["overhead"]], [r["score"]],
                    xerr=[[r["overhead"] - r["overhead_low"]], [r["overhead_high"] - r["overhead"]]],
                    yerr=[[r["score"] - r["score_low"]], [r["score_high"] - r["score"]]],
                    fmt="o", ms=3, color=colour, elinewidth=0.7, capsize=1.5)
        texts.append(ax.text(r["overhead"], r["score"], r["allocator"], fontsize=6, color=colour))
    front = trade[trade["pareto"]].sort_values("overhead")
    if len(front):
        ax.step(front["overhead"], front["score"], where="post", color="#1a9850", lw=0.8)
    ax.set_xscale("log")
    plain_log_axis(ax)
    ax.set_xlabel(f"time overhead: geometric-mean ratio to {baseline} (95% confidence interval)")
    ax.set_ylabel("security score (95% confidence interval)")
    ax.set_ylim(0, 108)  # headroom: labels of the safest allocators need room above 100
    ax.set_yticks(range(0, 101, 20))
    if texts:
        ax.figure.tight_layout()  # labels are placed in display space: settle the axes' size first
        adjust_text(texts, ax=ax, expand=(1.5, 2.2), force_text=(0.6, 1.0), force_static=(0.3, 0.6),
                    iter_lim=2000, arrowprops={"arrowstyle": "-", "color": "grey", "lw": 0.4})
        separate_labels(ax, texts)  # where adjustText gave up


def separate_labels(ax, texts, pad_px: float = 1.0, rounds: int = 500) -> None:
    """Move apart the labels whose boxes still overlap: a label on a tick label moves right, clear of it; of each
    overlapping pair of labels, the higher goes up just clear of the lower one (in display space, then back to
    data coordinates), until none overlaps."""
    import itertools

    renderer = ax.figure.canvas.get_renderer()
    texts = [t for t in texts if t.get_text()]
    # the axes' tick labels stay where they are: a label on one moves right, clear of it
    ticks = [t.get_window_extent(renderer) for t in (*ax.get_xticklabels(), *ax.get_yticklabels()) if t.get_text()]
    for _ in range(rounds):
        boxes = [t.get_window_extent(renderer) for t in texts]
        hit = next(((i, tick) for i, box in enumerate(boxes) for tick in ticks if box.overlaps(tick)), None)
        if hit is not None:
            i, tick = hit
            x, y = ax.transData.transform(texts[i].get_position())
            texts[i].set_position(ax.transData.inverted().transform((x + tick.x1 - boxes[i].x0 + pad_px, y)))
            continue
        pair = next(((i, j) for i, j in itertools.combinations(range(len(texts)), 2) if boxes[i].overlaps(boxes[j])),
                    None)
        if pair is None:
            return
        i, j = pair
        upper, lower = (j, i) if boxes[j].y0 + boxes[j].y1 >= boxes[i].y0 + boxes[i].y1 else (i, j)
        x, y = ax.transData.transform(texts[upper].get_position())
        texts[upper].set_position(ax.transData.inverted().transform((x, y + boxes[lower].y1 - boxes[upper].y0 + pad_px)))


@draws_rounded
def tradeoff_figure(trade: pd.DataFrame, path: Path | None, baseline: str):
    plt = pyplot()
    # taller with more allocators, so that adjustText finds room for every label
    fig, ax = plt.subplots(figsize=(6.5, max(5.0, 2.5 + 0.12 * len(trade))))
    tradeoff_axes(ax, trade, baseline)
    fig.tight_layout()
    separate_labels(ax, ax.texts)  # the layout settled again: the labels' boxes in their final place
    if path is not None:
        save(fig, path)
    return fig


def probe_matrix(order: list[str], probes: list[str], outcome: dict, outcomes_path: Path) -> None:
    """Outcome matrix: allocators (best score first) x probes."""
    from matplotlib.colors import ListedColormap

    plt = pyplot()
    names = list(OUTCOME_COLOURS)
    grid = np.array([[names.index(outcome.get((a, p), "n/a")) for p in probes] for a in order])
    fig, ax = plt.subplots(figsize=(1.0 + 0.15 * len(probes), 1.0 + 0.17 * len(order)))  # legible on one page
    ax.imshow(grid, cmap=ListedColormap(list(OUTCOME_COLOURS.values())), vmin=0, vmax=len(names) - 1,
              aspect="auto")
    ax.set_xticks(range(len(probes)), probes, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(len(order)), order, fontsize=7)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in OUTCOME_COLOURS.values()]
    ax.legend(handles, names, ncol=len(names), fontsize=7, loc="lower left", bbox_to_anchor=(0, 1.01), frameon=False)
    save(fig, outcomes_path)


@draws_rounded
def security_scores(order: list[str], score: dict, scores_path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 1.0 + 0.25 * len(order)))
    values = [0 if math.isnan(score[a]["score"]) else score[a]["score"] for a in order]
    ax.barh(range(len(order)), values, color="#4575b4")
    ax.set_yticks(range(len(order)), order, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("security score (100 = no primitive worked)")
    save(fig, scores_path)


@draws_rounded
def literature_003(fig: pd.DataFrame, path: Path) -> None:
    plt = pyplot()
    rows = fig[(fig["seed"] == "003") & (fig["metric"] == "wall")]
    fig_, ax = plt.subplots(figsize=(5.5, 2.6))
    for i, cond in enumerate(("unpatched", "patched")):
        sub = rows[rows["condition"] == cond]
        flagged = (sub["slip"] != "") | (sub["note"] != "")
        jitter = np.linspace(-0.12, 0.12, len(sub))
        ax.scatter(sub["value"][~flagged], (i + jitter)[~flagged], color="black", s=18,
                   label="run" if i == 0 else None)
        ax.scatter(sub["value"][flagged], (i + jitter)[flagged], facecolors="none",
                   edgecolors="red", s=40, label="outlier / repeated line" if i == 0 else None)
    ax.set_yticks([0, 1], ["unpatched", "patched"])
    ax.set_xlabel("wall time of malloc-test (s), seed 003")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False)  # outside the data
    fig_.tight_layout()
    save(fig_, path)


@draws_rounded
def coverage(summary: pd.DataFrame, path) -> None:
    plt = pyplot()
    scenarios = list(dict.fromkeys(summary["scenario"]))
    methods = list(dict.fromkeys(summary["method"]))
    fig, ax = plt.subplots(figsize=(6.5, 3.0))
    width = 0.8 / len(methods)
    for j, m in enumerate(methods):
        sub = summary[summary["method"] == m].set_index("scenario").reindex(scenarios)  # NaN: not simulated
        xs = np.arange(len(scenarios)) + (j - (len(methods) - 1) / 2) * width
        ax.bar(xs, sub["coverage"], width, yerr=1.96 * sub["coverage_se"], label=m)
    ax.axhspan(0.93, 0.97, color="grey", alpha=0.25, label="93-97% band")
    ax.axhline(0.95, color="black", lw=0.8)
    ax.set_xticks(np.arange(len(scenarios)), scenarios, fontsize=7)
    ax.set_ylim(0.5, 1.01)
    ax.set_ylabel("coverage of the true ratio")
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # outside the bars
    fig.tight_layout()
    save(fig, path)
