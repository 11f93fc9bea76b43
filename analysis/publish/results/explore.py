"""What notebooks/explore.ipynb shows, as pure functions a test can reach.

`load(data_dir)` reads the dataset once: the runs the paper reports (paper_runs.contributing_runs), lockstep
pairs included. `explore(dataset, workloads, allocators, baseline, metric, weights)` gives a `View`: either
the security-versus-overhead table with its verdicts and the per-workload ratios behind it, or one line that
says exactly why there is nothing to show. Times and peak RSS come from the paper's own functions
(comparisons.run_comparison in each run, merged by each allocator's leading run), so with every workload and
allocator selected and the default weights the table is the paper's. Either way the view lists the
allocators it left out and why. No selection raises: a HeapcostError becomes the message. `figure`,
`forest_svg` and `export` draw and write what the notebook displays (exports go to build/explore/, never to
paper/generated/).
"""
import base64
import io
import math
import tempfile
from functools import cached_property
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.contract import dataset
from analysis.errors import HeapcostError
from analysis.paths import BUILD_DIR, DATA_DIR
from analysis.publish.render import figures, formats
from analysis.publish.results import instruction_counts, comparisons
from analysis.publish.dataset import paper_runs
from analysis.publish.security import primitives
from analysis.stats import security

EXPORT_DIR = BUILD_DIR / "explore"
METRICS = {"wall_s": "wall time", "cpu_s": "CPU time (user + system)", "maxrss_kb": "peak RSS",
           "instructions_per_free": "instructions per free (callgrind)"}
# what "overhead" means for each metric, in the verdicts' words
NOUNS = {"wall_s": "time", "cpu_s": "CPU time", "maxrss_kb": "peak RSS", "instructions_per_free": "instructions"}
CHEAPER = {"wall_s": "faster", "cpu_s": "less CPU", "maxrss_kb": "smaller", "instructions_per_free": "fewer instructions"}
LEFT_OUT_COLUMNS = ["allocator", "left out of", "why"]
TABLE_COLUMNS = ["allocator", "overhead", "score", "workloads", "pareto", "verdict"]
PAPER_DRAWS = 1000  # the paper's posterior draws (security.score_intervals): the same intervals
PAIRED_METRICS = {"wall_s", "maxrss_kb"}  # what a lockstep pair records of both processes


@dataclass
class Explorable:
    """What the explorer chooses from: the reported runs' tables (read through analysis.contract.dataset)."""
    trials: pd.DataFrame | None  # the time run's trials.csv (after narrowed(): the run chosen for the view)
    counts: pd.DataFrame | None  # the callgrind run's counts.csv (likewise)
    probe_rows: list  # probes.csv rows of every probe run, each allocator's from the run that leads for it
    runs: dict  # kind -> run id
    tables: dict = field(default_factory=dict)  # kind -> {run id: table} of every contributing run
    time_runs: list = field(default_factory=list)  # paper_runs.RunTable of every contributing time run (pairs too)
    time_main: object = None  # the time run the paper reports (paper_runs.contributing_runs)

    @cached_property
    def workloads(self) -> list[str]:
        return sorted({w for kind in ("time", "callgrind") for table in self._all(kind) for w in _col(table, "workload")}
                      | {w for pairs in self._pairs() for w in _col(pairs, "workload")})

    @cached_property
    def allocators(self) -> list[str]:
        return sorted({a for kind in ("time", "callgrind") for table in self._all(kind) for a in _col(table, "allocator")}
                      | {a for pairs in self._pairs() for a in _col(pairs, "allocator_a") | _col(pairs, "allocator_b")}
                      | {r["allocator"] for r in self.probe_rows})

    def _all(self, kind: str) -> list:
        own = self.trials if kind == "time" else self.counts
        return list(self.tables.get(kind, {}).values()) or ([own] if own is not None else [])

    def _pairs(self) -> list:
        return [rt.pairs for rt in self.time_runs if rt.pairs is not None and len(rt.pairs)]

    @cached_property
    def measured_on(self) -> dict:
        """allocator -> the workloads any time run measured it on, in trials or in lockstep pairs (read once:
        the view asks for it per allocator)."""
        found: dict = {}
        for rt in self.time_runs:
            sides = [(rt.table, "allocator")]
            if rt.pairs is not None:
                sides += [(rt.pairs, "allocator_a"), (rt.pairs, "allocator_b")]
            for table, column in sides:
                for a, w in table[[column, "workload"]].drop_duplicates().itertuples(index=False):
                    found.setdefault(a, set()).add(w)
        return found

    def narrowed(self, allocators, baseline: str, left: "_Left") -> "Explorable":
        """Instruction counts are compared inside one run: the callgrind run holding the baseline and most of
        the chosen allocators; an allocator counted only in another run is left out, with that run named.
        (Times and peak RSS merge every run as the paper does: _timed.)"""
        tables = self.tables.get("callgrind") or {}
        with_base = {rid: tab for rid, tab in tables.items() if baseline in _col(tab, "allocator")}
        rid, counts = None, self.counts
        if with_base:
            rid = max(sorted(with_base), key=lambda r: len(set(allocators) & _col(with_base[r], "allocator")))
            counts = with_base[rid]
            for a in sorted(set(allocators) - _col(counts, "allocator") - {baseline}):
                elsewhere = [r for r, tab in tables.items() if a in _col(tab, "allocator")]
                if elsewhere:
                    left.add(a, "the callgrind view", f"measured in run {elsewhere[-1]} only, beside another run's "
                             f"{baseline}: the view compares counts inside one run")
        runs = dict(self.runs, **({"callgrind": rid} if rid else {}))
        return Explorable(self.trials, counts, self.probe_rows, runs, self.tables, self.time_runs, self.time_main)


def _col(table, column) -> set:
    return set() if table is None else {str(v) for v in table[column].unique()}


def load(data_dir: Path = DATA_DIR) -> Explorable:
    runs_dir = Path(data_dir) / "runs"
    if not runs_dir.is_dir():
        raise HeapcostError(f"{runs_dir} does not exist; give a dataset directory holding runs/ (e.g. data)")
    runs = dataset.load(runs_dir)  # the runs, read once per process
    found = {kind: paper_runs.contributing_runs(runs, kind) for kind in ("time", "callgrind", "probe")}
    tables = {kind: {rt.run_id: rt.table for rt in found[kind][1] if len(rt.table)} for kind in ("time", "callgrind")}
    main = {kind: found[kind][0] for kind in found}
    probe_runs = found["probe"][1]
    probe_rows = primitives.scored_rows(runs, paper_runs.merge_probe_rows(probe_runs, paper_runs.leads("probe", probe_runs,
                                                                                             main["probe"])))
    return Explorable(tables["time"].get(main["time"].run_id) if main["time"] else None,
                   tables["callgrind"].get(main["callgrind"].run_id) if main["callgrind"] else None,
                   probe_rows, {k: r.run_id for k, r in main.items() if r}, tables, found["time"][1], main["time"])


@dataclass
class View:
    baseline: str
    metric: str
    message: str = ""  # one line when there is nothing to show, else ""
    trade: pd.DataFrame = field(default_factory=pd.DataFrame)  # comparisons.tradeoff + verdict per allocator
    per_workload: pd.DataFrame = field(default_factory=pd.DataFrame)  # workload, allocator, ratio, ci_low, ci_high
    left_out: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=LEFT_OUT_COLUMNS))

    @property
    def ok(self) -> bool:
        return not self.message

    @property
    def xlabel(self) -> str:
        what = "exact counts: no interval" if self.metric == "instructions_per_free" else "95% interval"
        return f"{METRICS[self.metric]}: geometric-mean ratio to {self.baseline} ({what})"

    def table(self) -> pd.DataFrame:
        """The trade-off as the reader sees it: intervals as text, cheapest first, every verdict whole."""
        if not self.ok or self.trade.empty:
            return pd.DataFrame(columns=TABLE_COLUMNS)
        t = self.trade.sort_values(["overhead", "allocator"])
        return pd.DataFrame({
            "allocator": t["allocator"],
            "overhead": [formats.fmt_interval(r["overhead"], r["overhead_low"], r["overhead_high"])
                         for _, r in t.iterrows()],
            "score": [f"{formats.fmt_score(r['score'])} [{formats.fmt_score(r['score_low'])}, "
                      f"{formats.fmt_score(r['score_high'])}]" for _, r in t.iterrows()],
            "workloads": t["workloads"].astype(int), "pareto": t["pareto"].map({True: "yes", False: ""}),
            "verdict": t["verdict"]}).reset_index(drop=True)

    def html(self) -> str:
        """The message, or the table in full (no truncated cell), then what was left out and why."""
        with pd.option_context("display.max_colwidth", None, "display.max_rows", None):
            parts = ([f"<p><b>Nothing to show:</b> {_esc(self.message)}</p>"] if not self.ok else
                     [self.table().to_html(index=False, escape=True, border=0)])
            if len(self.left_out):
                parts.append("<p>Left out:</p>" + self.left_out.to_html(index=False, escape=True, border=0))
        return "\n".join(parts)

    def text(self) -> str:
        lines = [f"nothing to show: {self.message}"] if not self.ok else [
            self.table().to_string(index=False, max_colwidth=None)]
        lines += [f"left out of {r['left out of']}: {r['allocator']}: {r['why']}" for _, r in self.left_out.iterrows()]
        return "\n".join(lines)


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def explore(ds: Explorable, workloads, allocators, baseline: str = comparisons.BASELINE, metric: str = "wall_s",
            weights: dict | None = None, draws: int = PAPER_DRAWS) -> View:
    """The trade-off for a selection, or the one-line reason there is none. Never raises for a selection."""
    view = View(baseline, metric)
    try:
        _explore(view, ds, list(dict.fromkeys(workloads or ())), list(dict.fromkeys(allocators or ())),
                 weights, draws)
    except HeapcostError as exc:
        view.message = str(exc)
    except Exception as exc:  # a selection must never end in a traceback; say what broke instead
        view.message = f"unexpected {type(exc).__name__}: {exc} (a bug in analysis.publish.results.explore: please report it)"
    if view.message:
        view.trade = pd.DataFrame()
    return view


class _Left:
    def __init__(self):
        self.rows = []
        self.elsewhere = {}  # allocator -> why the trade-off leaves it out: measured outside the like-with-like run

    def add(self, allocator, where, why):
        self.rows.append({"allocator": allocator, "left out of": where, "why": why})


def _explore(view: View, ds: Explorable, workloads: list, allocators: list, weights, draws) -> None:
    baseline, metric = view.baseline, view.metric
    if metric not in METRICS:
        raise HeapcostError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}")
    weights = dict(security.DEFAULT_WEIGHTS if weights is None else weights)
    if not workloads:
        raise HeapcostError("no workload selected: pick at least one")
    unknown = [w for w in workloads if w not in ds.workloads]
    if unknown:
        raise HeapcostError(f"unknown workload(s) {', '.join(unknown)}; the dataset has {', '.join(ds.workloads)}")
    unknown = [a for a in [*allocators, baseline] if a not in ds.allocators]
    if unknown:
        raise HeapcostError(f"unknown allocator(s) {', '.join(unknown)}; the dataset has {', '.join(ds.allocators)}")
    others = [a for a in allocators if a != baseline]
    if not others:
        raise HeapcostError(f"no allocator selected besides the baseline {baseline}: pick at least one to compare")
    if not any(_weight(v) > 0 for v in weights.values()):
        raise HeapcostError("every weight is 0: no security score can be computed")
    left = _Left()
    ds = ds.narrowed(allocators, baseline, left)
    if metric == "instructions_per_free":
        geomean, per_workload, kept = _instructions(ds, workloads, others, baseline, left)
    else:
        geomean, per_workload, kept = _timed(ds, workloads, others, baseline, metric, left)
    view.per_workload = per_workload
    scores = _scores(ds, kept, baseline, weights, draws, left)  # drawn as the paper draws them: every allocator
    scored = [a for a in kept if a in set(scores.loc[scores["score"].notna(), "allocator"])]
    for a, why in left.elsewhere.items():
        left.add(a, "the trade-off", why)
    scored = [a for a in scored if a not in left.elsewhere]
    view.left_out = pd.DataFrame(left.rows, columns=LEFT_OUT_COLUMNS)
    if not scored:
        raise HeapcostError("none of the chosen allocators has a security score: "
                            + "; ".join(f"{r['allocator']}: {r['why']}" for r in left.rows if "score" in r["why"]))
    trade = comparisons.tradeoff(geomean[geomean["allocator"].isin(scored)], scores, baseline)
    trade = comparisons.verdicts(trade, baseline)
    if metric != "wall_s":
        trade["verdict"] = [_reword(v, metric) for v in trade["verdict"]]
    view.trade = trade


def _weight(value) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return 0.0
    return x if math.isfinite(x) else 0.0


def _reword(verdict: str, metric: str) -> str:
    """results.verdict speaks of time; say the chosen metric instead."""
    return (verdict.replace("faster than the baseline", f"{CHEAPER[metric]} than the baseline")
            .replace("the baseline's time", f"the baseline's {NOUNS[metric]}"))


def _listing(names) -> str:
    return ", ".join(sorted(names)) or "none"


# ------------------------------------------------------------------------------------------ overhead
def _timed(ds: Explorable, workloads, others, baseline, metric, left: _Left):
    """The paper's comparisons (comparisons.run_comparison: trials and lockstep pairs, each inside its run)
    over the selection, each allocator from its leading run (paper_runs.leads), as analysis.publish.results.comparisons
    computes them for the paper: with every workload and allocator selected, the paper's geometric means."""
    label = METRICS[metric]
    if not ds.time_runs:
        raise HeapcostError(f"the dataset has no time run: no {label} to show (try instructions per free)")
    selected, compared, bad, usable = _selection(ds, workloads, {*others, baseline}, baseline, metric)
    per_run = {}
    for rt in selected:
        try:
            per_run[rt.run_id] = comparisons.run_comparison(compared[rt.run_id], baseline, metric)
        except HeapcostError:
            continue  # no baseline in this run for the selection: it contributes nothing here
    lead = _leads(selected, per_run, ds.time_main)
    rows = paper_runs.merge_rows({r: c.results for r, c in per_run.items()}, lead, baseline)
    geomean = paper_runs.merge_rows({r: c.geomean for r, c in per_run.items()}, lead, baseline)
    rows = rows[rows["ratio"].notna()] if len(rows) else pd.DataFrame(columns=["workload", "allocator", "ratio"])
    base_w = set(rows["workload"])
    scales = lambda a: set(pd.to_numeric(usable.loc[usable["allocator"] == a].get("scale", pd.Series(dtype=float)),
                                         errors="coerce").round(8))
    if not base_w and not len(usable[usable["allocator"] == baseline]) and not any(
            baseline in _col(rt.pairs, "allocator_a") for rt in selected if rt.pairs is not None):
        measured = {w for rt in ds.time_runs for w in _on(rt.table, baseline)}
        raise HeapcostError(f"the baseline {baseline} has no usable {label} runs on {_listing(workloads)}"
                            + _why(bad, baseline) + f" (it was measured on: {_listing(measured)})")
    kept = []
    for a in others:
        have = set(rows.loc[rows["allocator"] == a, "workload"])
        if not have or a not in set(geomean.get("allocator", [])):
            measured = _measured_on(ds, a)
            why = (f"no usable runs on {_listing(workloads)}" + _why(bad, a) + f" (measured on: {_listing(measured)})"
                   + _no_pairs(metric, ds, a))
            if scales(a) and not scales(a) & scales(baseline):
                why = (f"it runs at a reduced scale ({_listing({f'{x:g}' for x in scales(a)})}) at which the baseline "
                       f"{baseline} has no runs (the slow allocators' reduced-scale cells have reference runs "
                       f"of {comparisons.BASELINE} only)")
            left.add(a, "the view", why)
            continue
        kept.append(a)
        missing = base_w - have
        if missing:
            left.add(a, _listing(missing), ("no usable runs there" + _why(bad, a) if missing & _measured_on(ds, a)
                                             else "not measured there") + "; its overhead is the geometric mean over its other workloads")
    for w in sorted(set(workloads) - base_w):
        left.add(baseline, w, f"no allocator has a usable comparison there{_why(bad, baseline)}: the workload is "
                 "left out" + _no_pairs(metric, ds, baseline))
    like = paper_runs.like_with_like_run([rt for rt in selected if rt.run_id in per_run])
    if like is not None:  # as the paper: the trade-off weighs one run, one machine and one scale
        left.elsewhere = {a: f"measured in run {lead.get(a)}, not in the like-with-like run {like.run_id} (the "
                             "full-scale run of the most configurations): the trade-off compares one run, one "
                             "machine and one scale" for a in kept if lead.get(a) != like.run_id}
    if not kept:
        raise HeapcostError(f"none of the chosen allocators has usable {label} runs on {_listing(workloads)} "
                            "beside the baseline: " + "; ".join(f"{r['allocator']}: {r['why']}" for r in left.rows
                                                                if r["allocator"] != baseline))
    per_workload = rows[rows["allocator"].isin(kept)][["workload", "allocator", "ratio", "ci_low", "ci_high"]]
    return geomean[geomean["allocator"].isin(kept)].reset_index(drop=True), per_workload.reset_index(drop=True), kept


def _selection(ds: Explorable, workloads, chosen: set, baseline: str, metric: str):
    """Each time run narrowed to the selection: (RunTables with something to compare, the same by run id
    with every pair of the chosen allocators for run_comparison, the groups left out with why, the usable
    trials)."""
    selected, compared, bad, usable = [], {}, [], []
    for rt in ds.time_runs:
        table = rt.table[rt.table["workload"].isin(workloads) & rt.table["allocator"].isin(chosen)]
        pairs = among = None
        if rt.pairs is not None and metric in PAIRED_METRICS:
            among = rt.pairs[rt.pairs["workload"].isin(workloads) & rt.pairs["allocator_a"].isin(chosen)
                             & rt.pairs["allocator_b"].isin(chosen)]
            pairs = among[(among["allocator_a"] == baseline) | (among["allocator_b"] == baseline)]
        if table.empty and (pairs is None or pairs.empty):
            continue  # a run with nothing of the selection has no group to leave out, and nothing to compare
        data, why = comparisons.usable(table, metric)
        bad.append(why)
        usable.append(data)
        table = _beside_baseline(data, baseline)
        if len(table) or (pairs is not None and len(pairs)):
            selected.append(paper_runs.RunTable(rt.run, table, pairs))
            # paired.as_comparison reads only the pairs with the baseline, whatever else the table holds: given
            # every pair of the chosen allocators (all chosen: the run's whole table, as the paper compared it),
            # it finds the paper's remembered result (memo). A run without a pair of the baseline gets none.
            with_baseline = pairs is not None and len(pairs) > 0
            compared[rt.run_id] = paper_runs.RunTable(rt.run, table, among if with_baseline else pairs)
    if not usable and ds.time_runs:  # no run holds any of the selection: empty tables of the usual columns
        data, why = comparisons.usable(ds.time_runs[0].table.iloc[0:0], metric)
        bad.append(why)
        usable.append(data)
    return selected, compared, pd.concat(bad, ignore_index=True), pd.concat(usable, ignore_index=True)


def _leads(selected, per_run: dict, main) -> dict:
    """merge.leads over the runs compared; an allocator measured in its leading run but not beside the
    baseline there is led by the run that compares it on the most workloads."""
    lead = paper_runs.leads("time", [rt for rt in selected if rt.run_id in per_run], main)
    names = {r: set(c.geomean.get("allocator", [])) for r, c in per_run.items()}  # once, not per allocator
    for a, rid in lead.items():
        compared = [r for r in per_run if a in names[r]]
        if compared and rid not in compared:
            workloads = {r: int(per_run[r].geomean.set_index("allocator").loc[a, "workloads"]) for r in compared}
            lead[a] = max(compared, key=lambda r: (workloads[r], r))
    return lead


def _beside_baseline(data: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """The usable trials of the cells (workload, scale) where the baseline was measured too, or none when no
    other allocator shares one: compare needs the baseline in every cell and something to compare."""
    if data.empty:
        return data
    scale = pd.to_numeric(data["scale"], errors="coerce").round(8) if "scale" in data else pd.Series(1.0, data.index)
    cells = pd.MultiIndex.from_arrays([data["workload"], scale])
    base = set(cells[(data["allocator"] == baseline).to_numpy()])
    kept = data[cells.isin(list(base))]
    return kept if (kept["allocator"] != baseline).any() else data.iloc[0:0]


def _no_pairs(metric: str, ds: Explorable, allocator: str) -> str:
    """Lockstep pairs record wall (active) time and peak RSS, not CPU time: say so when that is why."""
    if metric in PAIRED_METRICS or not any(allocator in _col(pairs, "allocator_a") | _col(pairs, "allocator_b")
                                           for pairs in ds._pairs()):
        return ""
    return f"; its lockstep pairs record no {METRICS[metric]}"


def _measured_on(ds: Explorable, allocator: str) -> set:
    """The workloads any time run measured the allocator on, in trials or in lockstep pairs."""
    return set(ds.measured_on.get(allocator, ()))


def _on(table: pd.DataFrame, allocator: str) -> set:
    return set(table.loc[table["allocator"] == allocator, "workload"])


def _why(bad: pd.DataFrame, allocator: str) -> str:
    sub = bad[bad["allocator"] == allocator] if len(bad) else bad
    if sub.empty:
        return ""
    r = sub.iloc[0]
    return f" ({r['workload']}: {r['ok']} usable of {r['trials']} trials, {r['why']})"


def _instructions(ds: Explorable, workloads, others, baseline, left: _Left):
    if ds.counts is None:
        raise HeapcostError("the dataset has no callgrind run: no instructions per free to show")
    c = ds.counts
    sel = c[c["workload"].isin(workloads) & c["allocator"].isin([*others, baseline])]
    table = instruction_counts.main_scale(instruction_counts.per_free(sel, baseline)) if len(sel) else pd.DataFrame(
        columns=["workload", "allocator", "instructions_ratio"])
    missing = comparisons.missing_callgrind(sel)
    reason = dict(zip(missing["allocator"], missing["reason"]))
    base_w = set(table.loc[table["allocator"] == baseline, "workload"])
    if not base_w:
        raise HeapcostError(f"the baseline {baseline} has no callgrind count on {_listing(workloads)}"
                            + (f" ({reason[baseline]})" if baseline in reason else ""))
    table = table[table["allocator"] != baseline].dropna(subset=["instructions_ratio"])
    kept, geo = [], []
    for a in others:
        r = table[table["allocator"] == a]
        if r.empty:
            why = reason.get(a) or f"not counted on {_listing(workloads)} (counted on: {_listing(_on(c, a))})"
            left.add(a, "the view", f"no callgrind count: {why}")
            continue
        kept.append(a)
        g = float(np.exp(np.log(r["instructions_ratio"].astype(float)).mean()))
        geo.append({"allocator": a, "geomean_ratio": g, "ci_low": g, "ci_high": g, "workloads": len(r)})
        if a in reason:
            left.add(a, _listing(set(workloads) - set(r["workload"])), f"no callgrind count there: {reason[a]}")
    if not kept:
        raise HeapcostError(f"none of the chosen allocators has a callgrind count on {_listing(workloads)}: "
                            + "; ".join(f"{r['allocator']}: {r['why']}" for r in left.rows))
    pw = table[table["allocator"].isin(kept)]
    per_workload = pd.DataFrame({"workload": pw["workload"], "allocator": pw["allocator"],
                                 "ratio": pw["instructions_ratio"], "ci_low": pw["instructions_ratio"],
                                 "ci_high": pw["instructions_ratio"]}).reset_index(drop=True)
    return pd.DataFrame(geo), per_workload, kept


# ------------------------------------------------------------------------------------------ security
def _scores(ds: Explorable, kept, baseline, weights, draws, left: _Left) -> pd.DataFrame:
    run = ds.runs.get("probe", "")
    rows = [r for r in ds.probe_rows if r["allocator"] in {*kept, baseline}]
    scores = (comparisons.security_scores(rows, weights, baseline, draws=int(draws)) if rows
              else pd.DataFrame(columns=comparisons.SCORE_COLUMNS))
    has = set(scores.loc[scores["score"].notna(), "allocator"])
    if baseline not in has:
        raise HeapcostError(f"the baseline {baseline} has no security score: {_no_score(rows, baseline, weights, run)}")
    for a in kept:
        if a not in has:
            left.add(a, "the trade-off", f"no security score: {_no_score(rows, a, weights, run)}")
    return scores


def _no_score(rows, allocator, weights, run) -> str:
    mine = [r for r in rows if r["allocator"] == allocator]
    if not mine:
        return f"it is not in the probe run {run}".rstrip()
    applies = [r for r in mine if security.probe_loss(r) is not None]
    if not applies:
        details = sorted({r.get("detail") or "" for r in mine} - {""})
        return "no probe applies to it" + (f": {details[0]}" if details else "")
    return (f"every probe that applies to it has weight 0 ({', '.join(sorted(r['probe'] for r in applies))})")


# ------------------------------------------------------------------------------------------ drawing
def figure(view: View):
    """The trade-off plot of a view (None when it has nothing to show)."""
    if not view.ok or view.trade.empty:
        return None
    plt = figures.pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    figures.tradeoff_axes(ax, view.trade, view.baseline)
    ax.set_xlabel(view.xlabel)
    fig.tight_layout()
    return fig


def svg(fig) -> str:
    """A figure as SVG text; the figure is closed."""
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    return buf.getvalue()


def tradeoff_svg(view: View) -> str:
    fig = figure(view)
    return "" if fig is None else svg(fig)


def forest_svg(view: View, path: Path | None = None) -> str:
    """The per-workload forest of a view as SVG text (also written to `path` when given)."""
    if not view.ok or view.per_workload.empty:
        return ""
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(path) if path is not None else Path(tmp) / "forest.svg"
        figures.forest(view.per_workload, target, f"{METRICS[view.metric]}: ratio to {view.baseline}")
        return target.read_text()


def export(view: View, out_dir: Path = EXPORT_DIR, stem: str | None = None) -> list[Path]:
    """The current figures (SVG) and tables (CSV) into out_dir (build/explore/ by default); the paths."""
    if not view.ok:
        raise HeapcostError(f"nothing to export: {view.message}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = stem or f"explore-{view.metric}-vs-{view.baseline}"
    written = []
    fig = figure(view)
    if fig is not None:
        path = out_dir / f"{stem}-tradeoff.svg"
        figures.save(fig, path)
        written.append(path)
    if len(view.per_workload):
        path = out_dir / f"{stem}-forest.svg"
        forest_svg(view, path)
        written.append(path)
    for name, table in (("tradeoff", view.trade), ("per-workload", view.per_workload), ("left-out", view.left_out)):
        path = out_dir / f"{stem}-{name}.csv"
        table.to_csv(path, index=False)
        written.append(path)
    return written


def page(view: View) -> str:
    """What the notebook shows for a view, as one HTML fragment: the message or the table in full, what
    was left out, then the trade-off plot and the per-workload forest side by side (each an image of its
    own, so the two SVGs never share ids)."""
    parts = [view.html()]
    images = [(title, text) for title, text in (("trade-off (geometric mean over the workloads)", tradeoff_svg(view)),
                                                ("per workload (95% intervals)", forest_svg(view))) if text]
    if images:
        cells = "".join(
            f'<div style="flex:1 1 28em;max-width:100%"><p style="margin:0"><b>{_esc(title)}</b></p>'
            f'<img style="max-width:100%;height:auto" alt="{_esc(title)}" src="data:image/svg+xml;base64,'
            f'{base64.b64encode(text.encode()).decode()}"></div>' for title, text in images)
        parts.append(f'<div style="display:flex;flex-wrap:wrap;gap:1em;align-items:flex-start">{cells}</div>')
    return "\n".join(parts)
