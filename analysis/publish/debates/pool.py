"""Each debate's answer across runs, builds and hosts: one log ratio with/without per run (from the run's
direct lockstep pairs of the contested pair when it has them, else through the run's baseline), pooled by
stats.random_effects, decided by the pre-registered rule (stats.equivalence, debates.toml).

Runs of a discarded design stay in the table, marked superseded, and never enter a pooled answer: the runs
whose malloc resolution check was loaded after the brought library (results.CHECK_LOADED_AFTER_LIBRARY, the
design whose A/A copies read 30% false positives), and those a later run measured alone replaces
(results.REPLACED_BY_A_RUN_ALONE)."""
import functools
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.contract import dataset
from analysis.contract.dataset import Dataset, Run
from analysis.errors import HeapcostError
from analysis.stats.within_run import WithinRun
from analysis.publish.results.hosts import run_groups
from analysis.publish.dataset.paper_runs import aa_copies
from analysis.publish.results.comparisons import CHECK_LOADED_AFTER_LIBRARY, REPLACED_BY_A_RUN_ALONE
from analysis.stats import equivalence, paired
from analysis.stats import random_effects
from analysis.stats.estimators import Difference
from analysis.contract.host import dataset_machines, extends_label
from analysis.contract.schema import warmup_mask

SUPERSEDED = CHECK_LOADED_AFTER_LIBRARY | REPLACED_BY_A_RUN_ALONE
PAIRS = "pairs.csv"
TRIALS = "trials.csv"
MACHINE = "machine.json"
RUN_COLUMNS = ["seed", "configuration", "workload", "run_id", "host", "processor", "machine", "build", "layout", "ratio",
               "ci_low", "ci_high", "estimate", "se", "df", "method", "superseded"]
HOST_COLUMNS = ["seed", "configuration", "workload", "processor", "machines", "n_machines", "n_runs", "n_estimates",
                "n_builds", "ratio", "ci_low", "ci_high", "estimate", "se", "df", "floor_halfwidth_percent",
                "floor_from", "floored", "decision", "decision_words", "layout_variance", "mean90_low",
                "mean90_high", "next_low", "next_high", "next_one_build_low", "next_one_build_high",
                "tau_machine_percent", "registered_decision", "registered_decision_words"]
# what a kind's two intervals promise (the paper's labels)
MEAN_INTERVAL = "90% interval of the kind's mean (the one-sided 5% test decides on it)"
NEXT_INTERVAL = "95% prediction interval for the estimate a new machine of the kind gives under make debates"
MACHINE_COLUMNS = ["seed", "configuration", "workload", "processor", "machine", "n_runs", "n_builds", "estimate",
                   "se", "ratio", "ci_low", "ci_high"]
# layout builds a host needs for its layout variance to rest on at least 4 degrees of freedom
MIN_LAYOUT_BUILDS = 5
# A single estimate over hosts is shown only where the spread between hosts can be estimated from the hosts
# themselves: with fewer, the t quantile on hosts - 1 degrees of freedom (12.7 with two) makes any interval
# hold, and an interval that goes from a fraction of a percent to a factor of two when one host is added
# was never an answer. Below it, each host is answered alone and the verdict is the intersection of theirs.
MIN_HOSTS_TO_POOL = 5
# A host's A/A across runs (the baseline against a copy of its own library) is its own variance floor only
# from this many runs of the copy on it; with fewer it borrows the other hosts' (their median).
MIN_AA_RUNS = 3


@functools.lru_cache(maxsize=8)
def _host_kinds(runs_dir) -> dict[str, str]:
    """{run: its host kind} over every run of the dataset (or its runs folder) (analysis.contract.host.host_groups),
    so that a new run that records more of its machine joins the published runs of the same kind."""
    ds = dataset.load(runs_dir)
    runs = [run for run in ds.run_ids() if ds.has(run, MACHINE)]
    group, labels, _ = run_groups(ds, runs)
    return {run: labels[fp] for run, fp in group.items()}


def _machine_of(runs_dir) -> dict:
    """{run: its Machine} over every run of the dataset (or its runs folder)
    (analysis.contract.host.dataset_machines): the processor kind and the machine within it."""
    return dataset_machines(runs_dir)


@functools.lru_cache(maxsize=8)
def _processors(runs_dir) -> dict[str, str]:
    """{run: its processor kind} over every run of the dataset (or its runs folder)
    (analysis.contract.host.processor_groups)."""
    return {run: m.kind for run, m in _machine_of(dataset.load(runs_dir)).items()}


@functools.lru_cache(maxsize=8)
def _machines(runs_dir) -> dict[str, str]:
    """{run: the name of its machine} (analysis.contract.host.machine_name) over the dataset (or its runs folder)."""
    return {run: m.name for run, m in _machine_of(dataset.load(runs_dir)).items()}


def build_of(run_info: dict, allocator: str) -> str:
    """The build of an allocator's library in a run: its files' sha256 when the run recorded them, else where
    it came from (a system package is one build)."""
    rec = (run_info.get("allocators") or {}).get(allocator) or {}
    if (rec.get("origin") or {}).get("kind") == "glibc-build" and rec.get("expect_malloc"):
        # A glibc build is named by its cache folder (variant, layout, source version, patch), in the runs that
        # recorded its libc.so's sha256 and in the earlier ones that did not, so that one build stays one level
        # of the model; a build again in that folder gives the same code (patches/glibc/README.md).
        return str(rec["expect_malloc"]).strip("/").split("/")[0]
    shas = [lib.get("sha256", "") for lib in rec.get("libraries") or [] if lib.get("sha256")]
    brought = ((run_info.get("params") or {}).get("brought_libraries") or {}).get(allocator) or {}
    if brought.get("library_sha256"):
        shas.append(brought["library_sha256"])
    if shas:
        return "+".join(sorted(set(s[:12] for s in shas)))
    origin = rec.get("origin") or {}
    return str(rec.get("expect_malloc") or origin.get("version") or origin.get("package") or allocator)


def _runs(ds: Dataset, run_ids) -> dict[str, Run]:
    """{run id: its Run} of those of `run_ids` that have a readable run.json."""
    return {rid: run for rid in sorted(set(run_ids)) if (run := ds.run(rid)) is not None}


# Enough for every run of the dataset: a smaller cache, walked in run order by each debate, evicts each run's
# index before it is asked again and makes it anew every time.
RUN_CACHE = 512


def _pairs(ds: Dataset, run_id: str) -> pd.DataFrame | None:
    """A run's pairs.csv, read once for all the debates that ask it (callers never change it)."""
    return ds.table(run_id, PAIRS, shared=True)


def _pair_key(a, b):
    """One name for an unordered pair of allocators (a lockstep pair runs either side first)."""
    return a + "\0" + b if a <= b else b + "\0" + a


@functools.lru_cache(maxsize=RUN_CACHE)
def _pair_groups(ds: Dataset, run_id: str) -> tuple[pd.DataFrame | None, dict[tuple[str, str], pd.Index]]:
    """(a run's pairs.csv, {(workload, unordered pair of two different allocators): the rows of it that put them
    in turn with each other}), indexed once per run: every debate and A/A copy asks each run."""
    pairs = _pairs(ds, run_id)
    if pairs is None:
        return None, {}
    a, b = pairs["allocator_a"].astype(str), pairs["allocator_b"].astype(str)
    two = pairs[a != b]
    names = [_pair_key(x, y) for x, y in zip(a[a != b], b[a != b])]
    return pairs, {key: rows for key, rows in two.groupby([two["workload"].astype(str),
                                                           pd.Series(names, index=two.index)],
                                                          sort=False).groups.items()}


def _direct(ds: Dataset, run: Run, with_: str, without: str, workload: str) -> Difference | None:
    """with/without from the run's lockstep pairs that put the two in turn with each other (largest scale)."""
    return _direct_at(ds, run.run_id, with_, without, workload)


@functools.lru_cache(maxsize=65536)
def _direct_at(ds: Dataset, run_id: str, with_: str, without: str, workload: str) -> Difference | None:
    """with/without from the lockstep pairs of run `run_id` of the dataset that put the two in turn with each
    other (largest scale), or None."""
    if with_ == without:
        return None
    pairs, groups = _pair_groups(ds, run_id)
    rows = groups.get((str(workload), _pair_key(with_, without)))
    if rows is None:
        return None
    mine = pairs.loc[rows]
    try:
        rows = paired.as_comparison(mine, without).results
    except HeapcostError:
        return None
    rows = rows[rows["allocator"] == with_]
    if rows.empty:
        return None
    return rows.sort_values("scale").iloc[-1]["_diff"]


class RunCells:
    """A comparisons table (cells of one metric) split once by workload and run, with each run's WithinRun and
    run records built once: every debate cell, layout and A/A copy asks the same groups. Callers never change
    the table."""

    def __init__(self, cells: pd.DataFrame):
        self.cells = cells
        self._groups: dict = {}
        self._within: dict = {}
        self._runs: dict = {}

    def of(self, cells: pd.DataFrame) -> "RunCells":
        """self when it splits `cells` (this very table), else a new split of it."""
        return self if cells is self.cells else RunCells(cells)

    def groups(self, workload) -> dict:
        """{run_id: its rows on the workload}, in run order."""
        if workload not in self._groups:
            cells = self.cells[self.cells["workload"] == workload]
            self._groups[workload] = dict(tuple(cells.groupby("run_id", sort=True)))
        return self._groups[workload]

    def within(self, workload, run_id) -> WithinRun:
        """The run's comparisons on the workload at its largest scale, read once (stats/within_run.py)."""
        key = (workload, run_id)
        if key not in self._within:
            self._within[key] = WithinRun(self.groups(workload)[run_id])
        return self._within[key]

    def runs(self, runs_dir, workload) -> dict[str, Run]:
        """{run id: its Run} of the runs on the workload, from the dataset (or its runs folder)."""
        ds = dataset.load(runs_dir)
        key = (ds, workload)
        if key not in self._runs:
            self._runs[key] = _runs(ds, list(self.groups(workload)))
        return self._runs[key]


def grouped_cells(cells: dict | None) -> dict[str, RunCells]:
    """{metric: RunCells} of a Results' cells, for callers that ask the same tables many times."""
    return {metric: RunCells(t) for metric, t in (cells or {}).items() if t is not None}


def run_estimates(cells: pd.DataFrame, runs_dir: Path, seed: str, with_: str, without: str,
                  workload: str, grouped: RunCells | None = None) -> pd.DataFrame:
    """One row per run that measured both sides on the workload: its log ratio with/without and SE. `runs_dir`:
    the dataset (or its runs folder). `grouped`: the RunCells of `cells`, when the caller asks it again (else
    split here)."""
    if cells is None or cells.empty:
        return pd.DataFrame(columns=RUN_COLUMNS)
    ds = dataset.load(runs_dir)
    grouped = RunCells(cells) if grouped is None else grouped.of(cells)
    runs = grouped.runs(ds, workload)
    rows = []
    for run_id in grouped.groups(workload):
        run = runs.get(run_id)
        if run is None:
            continue
        d, method = _direct(ds, run, with_, without, workload), "direct pairs"
        if d is None and "baseline" not in cells.columns:
            continue  # cells of pairs only (the calls and brought programs' tables): nothing to read through a baseline
        if d is None:
            # WithinRun keeps the rows at the run's largest scale
            d, method = grouped.within(workload, run_id).ratio(with_, without), "through the baseline"
        if d is None:
            continue
        lo, hi = d.interval()
        rows.append({"seed": seed, "configuration": f"{with_} / {without}", "workload": workload,
                     "run_id": run_id, "host": _host_kinds(ds).get(run_id, "?"),
                     "processor": _processors(ds).get(run_id, "?"),
                     "machine": _machines(ds).get(run_id, "?"),
                     "build": f"{build_of(run.info, with_)} / {build_of(run.info, without)}",
                     "layout": _layout_of(with_, without),
                     "ratio": math.exp(d.estimate), "ci_low": math.exp(lo), "ci_high": math.exp(hi),
                     "estimate": d.estimate, "se": d.se, "df": d.df, "method": method,
                     "superseded": run_id in SUPERSEDED})
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


_LAYOUT = re.compile(r"^(.+)_l([0-9]+)$")  # <id>_l<N>: layout N of <id>, a second build of the same source


def _layout_of(*names: str) -> int:
    """The layout number of a pair: the first side that is a layout build, else 1 (the first build)."""
    for name in names:
        if m := _LAYOUT.match(name):
            return int(m.group(2))
    return 1


def layout_pairs(cells: pd.DataFrame, with_: str, without: str) -> list[tuple[str, str]]:
    """The contested pair and every layout build of it (with_lN, without_lN): each is one more sample of the
    libraries' code layout, pooled as another build of the same pair. A side that has no layout builds at all
    (a system library: one build) stands against each layout of the other side."""
    names = set(cells["allocator"].astype(str)) if cells is not None and len(cells) else set()

    def layouts(x: str) -> set[int]:
        return {int(m.group(2)) for n in names if (m := _LAYOUT.match(n)) and m.group(1) == x}

    mine, theirs = layouts(with_), layouts(without)
    out = [(with_, without)]
    for n in sorted(mine | theirs):
        a = f"{with_}_l{n}" if n in mine else (with_ if not mine else None)
        b = f"{without}_l{n}" if n in theirs else (without if not theirs else None)
        if a and b:
            out.append((a, b))
    return out


def pair_estimates(cells: pd.DataFrame, runs_dir: Path, seed: str, with_: str, without: str,
                   workload: str, grouped: RunCells | None = None) -> pd.DataFrame:
    """run_estimates of the pair and of its layout builds, in one table (configuration: the pair's name).
    `runs_dir`: the dataset (or its runs folder)."""
    runs_dir = dataset.load(runs_dir)
    frames = [run_estimates(cells, runs_dir, seed, a, b, workload, grouped).assign(configuration=f"{with_} / {without}")
              for a, b in layout_pairs(cells, with_, without)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=RUN_COLUMNS)


def identified_processors(processors) -> list[str]:
    """The processor kinds among `processors` that are told apart. Runs that recorded only a processor's model
    name and frequency join the one kind recorded in full that shares them (contract.host); where the dataset
    holds several such kinds they keep a label without family/model/stepping, and that label is left out here
    whenever one of those kinds is among `processors` too: its runs may be of that very processor, so it is
    not another host."""
    labels = sorted(set(processors))
    return [p for p in labels if not any(extends_label(q, p) for q in labels)]


def pools_across_hosts(processors) -> tuple[bool, str]:
    """Whether the hosts' answers make one over hosts (at least MIN_HOSTS_TO_POOL processors told apart, so
    that their spread is estimated from themselves) and, where they do not, what is shown instead."""
    hosts = sorted(set(processors))
    told_apart = len(identified_processors(hosts))
    if told_apart >= MIN_HOSTS_TO_POOL:
        return True, ""
    counted = f"{len(hosts)} hosts" if told_apart == len(hosts) else \
        f"{told_apart} hosts told apart and {len(hosts) - told_apart} whose processor is not identified"
    return False, f"not pooled: {counted} ({MIN_HOSTS_TO_POOL} needed)"


def pooled(runs: pd.DataFrame, margin: float, rule: str) -> dict:
    """The pooled answer of the current-design runs: estimate, interval, variance components, decision."""
    current = runs[~runs["superseded"].astype(bool)]
    if current.empty:
        return {}
    p = random_effects.pool(current[["estimate", "se", "df", "host", "build"]])
    lo, hi = p.interval()
    d = equivalence.tost(p.estimate, p.se, p.df, margin, rule)
    return {"pooled_ratio": math.exp(p.estimate), "pooled_low": math.exp(lo), "pooled_high": math.exp(hi),
            "pooled_estimate": p.estimate, "pooled_se": p.se, "pooled_df": p.df,
            "n_runs": int(current["run_id"].nunique()), "n_estimates": p.runs, "n_builds": p.builds, "n_hosts": p.hosts,
            "tau_run": math.sqrt(p.tau2["run"]), "tau_host": math.sqrt(p.tau2["host"]),
            "tau_build": math.sqrt(p.tau2["build"]), "decision": d.outcome, "decision_words": d.words(),
            "decision_low": d.low, "decision_high": d.high}


def layout_variance(builds: int, borrowed: bool = False, undecidable: bool = False) -> str:
    """What a host's layout builds let its answer say about the variance between layouts."""
    if builds < 2 and borrowed:
        return "one build: the layout variance borrowed from the cells measured in several builds"
    if builds < 2 and undecidable:
        return "one build and no layout variance to borrow: not decided"
    if builds < 2:
        return "not estimable: one build"
    if builds < MIN_LAYOUT_BUILDS:
        dof = builds - 1
        return (f"estimated from {builds} builds ({dof} degree{'' if dof == 1 else 's'} of freedom, "
                f"fewer than {MIN_LAYOUT_BUILDS - 1})")
    return f"estimated from {builds} builds"


def _with_machine(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs with a machine column: a table made before machines were told apart takes its host as one."""
    return runs if "machine" in runs.columns else runs.assign(machine=runs["host"])


def machine_estimates(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per debate cell, kind and machine: that machine's current-design runs and builds pooled alone
    (its own estimate, as a new machine's `make debates` would give it)."""
    current = _with_machine(runs[~runs["superseded"].astype(bool)] if len(runs) else runs)
    rows = []
    keys = ["seed", "configuration", "workload", "processor", "machine"]
    for key, sub in (current.groupby(keys, sort=True) if len(current) else []):
        p = random_effects.pool(sub[["estimate", "se", "df", "build"]].assign(host="one"))
        lo, hi = p.interval()
        rows.append({**dict(zip(keys, key)), "n_runs": int(sub["run_id"].nunique()), "n_builds": p.builds,
                     "estimate": p.estimate, "se": p.se, "ratio": math.exp(p.estimate), "ci_low": math.exp(lo),
                     "ci_high": math.exp(hi)})
    return pd.DataFrame(rows, columns=MACHINE_COLUMNS)


def machine_cells(machines: pd.DataFrame) -> dict:
    """{(seed, configuration, workload, kind): [(estimate, se) per machine]} of machine_estimates' rows, for
    stats.prediction.machine_spread (kinds whose processor is not told apart are left out: their runs may be
    of another kind's machines)."""
    if machines.empty:
        return {}
    told = machines[machines["processor"].isin(identified_processors(machines["processor"]))]
    return {key: list(zip(g["estimate"].astype(float), g["se"].astype(float)))
            for key, g in told.groupby(["seed", "configuration", "workload", "processor"], sort=True)}


def layout_cells(runs: pd.DataFrame) -> dict:
    """{(cell, kind, machine): [(estimate, se) per layout build]}: each build's runs on one machine pooled,
    for the layout variance a kind with one build borrows (stats.prediction.borrowed_spread)."""
    current = runs[~runs["superseded"].astype(bool)] if len(runs) else runs
    out = {}
    keys = ["seed", "configuration", "workload", "processor", "machine"]
    for key, sub in (current.groupby(keys, sort=True) if len(current) else []):
        per_build = []
        for _, b in sub.groupby("build", sort=True):
            p = random_effects.pool(b[["estimate", "se", "df", "build"]].assign(host="one"))
            per_build.append((p.estimate, p.se))
        if len(per_build) >= 2:
            out[key] = per_build
    return out


def _registered(sub: pd.DataFrame, processor: str, margin: float, rule: str, floor: float) -> tuple:
    """The decision as registered before the machine level (debates.toml's amendment of 2026-12-05): the kind's
    runs pooled with run and build alone, its machines pooled as if they were one."""
    p = random_effects.pool(sub[["estimate", "se", "df", "build"]].assign(host=processor))
    se = random_effects.floored_se(p.se, p.df, floor)
    return equivalence.tost(p.estimate, se, p.df, margin, rule)


def per_host(runs: pd.DataFrame, margin: float, rule: str, floors: dict, spread=None,
             layout_tau2: float | None = None) -> pd.DataFrame:
    """One row per processor kind: the current-design runs on it pooled, the interval widened to the kind's
    A/A floor where it is narrower (`floors`: {processor: (log half-width, where it comes from)}; the floor is
    per kind: a copy of glibc has no reason to move between machines, so it bounds the runs' noise, and the
    machines' spread enters through the model), and the pre-registered rule's decision on the 90% interval of
    the kind's mean. With `spread` (stats.prediction.Spread), machine and layout build are crossed random
    effects, the machines' variance given (estimated jointly over every cell and kind), and each kind also
    gets the 95% interval a new machine's estimate should fall in; a kind with one layout build borrows the
    layout variance (`layout_tau2`), or without one is not decided. Without `spread`: the pool as registered
    before the machine level (run and build only)."""
    from analysis.stats.prediction import next_machine

    current = _with_machine(runs[~runs["superseded"].astype(bool)])
    machines = machine_estimates(current) if spread is not None else None
    rows = []
    for processor, sub in current.groupby("processor", sort=True):
        floor, source = floors.get(processor, (0.0, "none"))
        builds = int(sub["build"].astype(str).nunique())
        fixed, fixed_df = {}, {}
        if spread is not None:
            fixed, fixed_df = {"machine": spread.tau2}, {"machine": spread.df}
            if builds < 2 and layout_tau2 is not None:
                fixed["build"] = layout_tau2
        frame = sub[["estimate", "se", "df", "build"] + (["machine"] if spread is not None else [])]
        p = random_effects.pool(frame.assign(host=processor), fixed=fixed, fixed_df=fixed_df)
        se = random_effects.floored_se(p.se, p.df, floor)
        d = equivalence.tost(p.estimate, se, p.df, margin, rule)
        undecidable = spread is not None and builds < 2 and layout_tau2 is None
        if undecidable:
            d = equivalence.Decision(equivalence.UNDECIDED, d.low, d.high, margin)
        q = random_effects.quantile(p.df)
        q90 = random_effects.quantile(p.df, 0.90)
        first = sub.iloc[0]
        row = {"seed": first["seed"], "configuration": first["configuration"], "workload": first["workload"],
               "processor": processor, "machines": "; ".join(sorted(set(sub["machine"].astype(str)))),
               "n_machines": int(sub["machine"].astype(str).nunique()),
               "n_runs": int(sub["run_id"].nunique()), "n_estimates": p.runs, "n_builds": p.builds,
               "ratio": math.exp(p.estimate), "ci_low": math.exp(p.estimate - q * se),
               "ci_high": math.exp(p.estimate + q * se), "estimate": p.estimate, "se": se, "df": p.df,
               "floor_halfwidth_percent": f"{math.expm1(floor) * 100:.2f}" if floor else "",
               "floor_from": source, "floored": bool(se > p.se), "decision": d.outcome,
               "decision_words": d.words(), "layout_variance": layout_variance(p.builds, "build" in fixed, undecidable),
               "mean90_low": math.exp(p.estimate - q90 * se), "mean90_high": math.exp(p.estimate + q90 * se)}
        if spread is not None:
            mine = machines[machines["processor"] == processor]
            se_new = float(np.median(mine["se"])) if len(mine) else se
            tau_b2 = p.tau2.get("build", 0.0)
            per_build = max(1, int(np.median(mine["n_builds"]))) if len(mine) else 1
            se_one = math.sqrt(se_new ** 2 + tau_b2 * (1 - 1 / per_build))
            lo, hi = next_machine(p.estimate, se, spread, se_new, centre_df=p.df)
            lo1, hi1 = next_machine(p.estimate, se, spread, se_one, centre_df=p.df)
            old = _registered(sub, processor, margin, rule, floor)
            row.update({"next_low": math.exp(lo), "next_high": math.exp(hi), "next_one_build_low": math.exp(lo1),
                        "next_one_build_high": math.exp(hi1), "tau_machine_percent": f"{spread.tau * 100:.2f}",
                        "registered_decision": old.outcome, "registered_decision_words": old.words()})
        rows.append(row)
    return pd.DataFrame(rows, columns=HOST_COLUMNS)


def aa_floors(aa_by_host: pd.DataFrame) -> dict:
    """{processor: (log half-width of its A/A across runs, where it comes from)}: the median half-width of its
    pooled A/A cells with at least MIN_AA_RUNS runs; a host with none borrows the median of the other hosts'
    (every host that appears in `aa_by_host` with too few runs, or any host asked later, through the
    "borrowed" entry)."""
    if aa_by_host is None or aa_by_host.empty:
        return {}
    own = aa_by_host[aa_by_host["n_runs"] >= MIN_AA_RUNS]
    halfwidth = (np.log(own["ci_high"]) - np.log(own["ci_low"])) / 2
    floors = {h: (float(w.median()), "its own A/A") for h, w in halfwidth.groupby(own["processor"])}
    if floors:
        borrowed = (float(np.median([w for w, _ in floors.values()])), "borrowed: the other hosts' A/A")
        floors["borrowed"] = borrowed
        for h in set(aa_by_host["processor"]) - set(floors):
            floors[h] = borrowed
    return floors


def floor_of(floors: dict, processor: str) -> tuple[float, str]:
    return floors.get(processor) or floors.get("borrowed") or (0.0, "none: no host has an A/A across runs")


def across_hosts(hosts: pd.DataFrame, margin: float) -> tuple[str, str]:
    """(outcome, words) of the intersection-union verdict over the per-host decisions (equivalence.across)."""
    if hosts.empty:
        return equivalence.UNDECIDED, equivalence.UNDECIDED
    return equivalence.across(dict(zip(hosts["processor"], hosts["decision"])), margin)


AA_POOLED_COLUMNS = ["workload", "allocator", "n_runs", "n_hosts", "ratio", "ci_low", "ci_high", "excludes_1"]


def aa_across_runs(cells: pd.DataFrame, runs_dir: Path, baseline: str,
                   grouped: RunCells | None = None) -> pd.DataFrame:
    """A/A across runs: each copy of the baseline's library pooled over the current-design runs that measured it
    on a workload, like a debate's pair (a pooled 95% interval should exclude 1 in at most 5% of them).
    `runs_dir`: the dataset (or its runs folder)."""
    if cells is None or cells.empty:
        return pd.DataFrame(columns=AA_POOLED_COLUMNS)
    runs_dir = dataset.load(runs_dir)
    rows = []
    for copy, workload, est in _aa_estimates(cells, runs_dir, baseline, grouped):
        if est["run_id"].nunique() < MIN_AA_RUNS:
            continue
        p = random_effects.pool(est)
        lo, hi = p.interval()
        rows.append({"workload": workload, "allocator": copy, "n_runs": p.runs, "n_hosts": p.hosts,
                     "ratio": math.exp(p.estimate), "ci_low": math.exp(lo), "ci_high": math.exp(hi),
                     "excludes_1": bool(lo > 0 or hi < 0)})
    return pd.DataFrame(rows, columns=AA_POOLED_COLUMNS)


def _aa_estimates(cells: pd.DataFrame, ds: Dataset, baseline: str, grouped: RunCells | None = None):
    """(copy, workload, its current-design run estimates against the baseline) for every A/A copy measured."""
    runs = _runs(ds, cells["run_id"])
    for copy in sorted({a for r in runs.values() for a in aa_copies(r)}):
        for workload in sorted(set(cells.loc[cells["allocator"] == copy, "workload"])):
            est = run_estimates(cells, ds, "A/A", copy, baseline, workload, grouped)
            yield copy, workload, est[~est["superseded"]]


AA_HOST_COLUMNS = ["processor", "workload", "allocator", "n_runs", "ratio", "ci_low", "ci_high", "excludes_1"]


def aa_by_host(cells: pd.DataFrame, runs_dir: Path, baseline: str, grouped: RunCells | None = None) -> pd.DataFrame:
    """A/A across runs on each processor kind alone: every copy of the baseline on every workload, its runs on
    that host pooled (the host's own floor for the width of a debate's interval there). `runs_dir`: the dataset
    (or its runs folder)."""
    if cells is None or cells.empty:
        return pd.DataFrame(columns=AA_HOST_COLUMNS)
    runs_dir = dataset.load(runs_dir)
    rows = []
    for copy, workload, est in _aa_estimates(cells, runs_dir, baseline, grouped):
        for processor, sub in est.groupby("processor", sort=True):
            p = random_effects.pool(sub)
            lo, hi = p.interval()
            rows.append({"processor": processor, "workload": workload, "allocator": copy,
                         "n_runs": int(sub["run_id"].nunique()), "ratio": math.exp(p.estimate),
                         "ci_low": math.exp(lo), "ci_high": math.exp(hi), "excludes_1": bool(lo > 0 or hi < 0)})
    return pd.DataFrame(rows, columns=AA_HOST_COLUMNS)


def transfer(res, runs: pd.DataFrame, pooled_row: dict, with_: str, without: str, workload: str) -> dict:
    """The added nanoseconds per malloc+free pair the pooled ratio implies, where callgrind counted the
    workload's frees: (ratio - 1) x the time of `without` per process / its frees at the run's scale (frees
    grow with the scale; callgrind counts them at its own scale)."""
    if not pooled_row or res.per_free is None or res.per_free.empty:
        return {}
    pf = res.per_free[res.per_free["workload"] == workload]
    if pf.empty:
        return {}
    top = pf.sort_values("scale").iloc[-1]
    frees_per_scale = float(top["free_calls"]) / float(top["scale"])
    times = []
    ds = res.dataset
    for run_id in runs.loc[~runs["superseded"].astype(bool), "run_id"]:
        t = time_of(ds, run_id, without, workload)
        if t:
            times.append(t)
    if not times:
        return {}
    seconds, scale = np.median([t[0] for t in times]), np.median([t[1] for t in times])
    per_pair = seconds / (frees_per_scale * scale)
    ns = (pooled_row["pooled_ratio"] - 1) * per_pair * 1e9
    lo, hi = ((pooled_row[k] - 1) * per_pair * 1e9 for k in ("pooled_low", "pooled_high"))
    return {"added_ns_per_pair": ns, "added_ns_low": lo, "added_ns_high": hi}


def time_of(ds: Dataset, run_id: str, allocator: str, workload: str) -> tuple[float, float] | None:
    """The median active time of one process of `allocator` on the workload in a lockstep run of the dataset,
    and its scale."""
    pairs = _pairs(ds, run_id)
    if pairs is None:
        return None
    pairs = pairs[(pairs["workload"] == workload) & (pairs["status"] == "ok") & (pairs["warmup"].astype(int) == 0)]
    times = pd.concat([pairs.loc[pairs["allocator_a"] == allocator, ["active_a_s", "scale"]].set_axis(["t", "scale"], axis=1),
                       pairs.loc[pairs["allocator_b"] == allocator, ["active_b_s", "scale"]].set_axis(["t", "scale"], axis=1)])
    if times.empty:
        return None
    top = times[times["scale"] == times["scale"].max()]
    return float(top["t"].median()), float(top["scale"].iloc[0])


LAYOUT_AA_COLUMNS = ["configuration", "layout", "workload", "processor", "n_runs", "ratio", "ci_low", "ci_high",
                     "excludes_1"]


def layout_aa(cells: pd.DataFrame, runs_dir: Path, grouped: RunCells | None = None) -> pd.DataFrame:
    """The layout's own A/A (A/A'): every layout build `<id>_l<N>` against the first build `<id>` of the same
    source on the same workload, with no defence between them, each host's runs pooled. Its intervals should
    exclude 1 in about 5% of the cells; more says the code's layout moves a ratio by more than the runs see.
    `runs_dir`: the dataset (or its runs folder)."""
    if cells is None or cells.empty:
        return pd.DataFrame(columns=LAYOUT_AA_COLUMNS)
    runs_dir = dataset.load(runs_dir)
    names = set(cells["allocator"].astype(str))
    rows = []
    for name in sorted(names):
        m = _LAYOUT.match(name)
        if not m or m.group(1) not in names:
            continue
        base = m.group(1)
        for workload in sorted(set(cells.loc[cells["allocator"] == name, "workload"])):
            est = run_estimates(cells, runs_dir, "A/A'", name, base, workload, grouped)
            est = est[~est["superseded"].astype(bool)]
            for processor, sub in est.groupby("processor", sort=True):
                p = random_effects.pool(sub[["estimate", "se", "df", "build"]].assign(host=processor))
                lo, hi = p.interval()
                rows.append({"configuration": base, "layout": int(m.group(2)), "workload": workload,
                             "processor": processor, "n_runs": int(sub["run_id"].nunique()),
                             "ratio": math.exp(p.estimate), "ci_low": math.exp(lo), "ci_high": math.exp(hi),
                             "excludes_1": bool(lo > 0 or hi < 0)})
    return pd.DataFrame(rows, columns=LAYOUT_AA_COLUMNS)


KERNEL_COLUMNS = ["seed", "configuration", "workload", "processor", "allocator", "side", "n_runs", "n_trials",
                  "scale", "wall_s", "user_s", "sys_s", "minflt", "kernel_share"]


@functools.lru_cache(maxsize=RUN_CACHE)
def _trials(ds: Dataset, run_id: str) -> pd.DataFrame | None:
    """A run's usable trials (ok, not warm-up), kept for every debate that asks it (callers never change it)."""
    t = ds.table(run_id, TRIALS, shared=True)
    if t is None:
        return None
    keep = t["status"].astype(str).eq("ok") if "status" in t else pd.Series(True, index=t.index)
    if "warmup" in t:
        keep &= ~warmup_mask(t["warmup"])
    return t[keep]


def kernel_part(runs: pd.DataFrame, runs_dir: Path) -> pd.DataFrame:
    """Where the time of each side of a debate cell goes, host by host: the median wall, user and system time
    and minor faults of one process over the current runs' usable trials (their largest scale), and the
    kernel's share of its CPU time (system / (user + system)). The part of a ratio that depends on the
    operating system stands apart in it: a side that spends its time in the kernel measures the kernel too.
    `runs_dir`: the dataset (or its runs folder)."""
    ds = dataset.load(runs_dir)
    rows = []
    current = runs[~runs["superseded"].astype(bool)] if len(runs) else runs
    for (seed, conf, workload, processor), g in (current.groupby(["seed", "configuration", "workload", "processor"],
                                                                  sort=True) if len(current) else []):
        with_, without = (s.strip() for s in conf.split(" / "))
        for side, allocator in (("with", with_), ("without", without)):
            parts = []
            for run_id in sorted(set(g["run_id"])):
                t = _trials(ds, run_id)
                if t is None:
                    continue
                sub = t[(t["allocator"].astype(str) == allocator) & (t["workload"].astype(str) == workload)]
                if len(sub):
                    scale = pd.to_numeric(sub["scale"], errors="coerce")
                    parts.append(sub[scale == scale.max()].assign(run_id=run_id))
            if not parts:
                continue
            t = pd.concat(parts, ignore_index=True)
            med = {m: float(pd.to_numeric(t[m], errors="coerce").median()) if m in t else float("nan")
                   for m in ("wall_s", "user_s", "sys_s", "minflt")}
            cpu = med["user_s"] + med["sys_s"]
            rows.append({"seed": seed, "configuration": conf, "workload": workload, "processor": processor,
                         "allocator": allocator, "side": side, "n_runs": int(t["run_id"].nunique()),
                         "n_trials": int(len(t)), "scale": float(pd.to_numeric(t["scale"], errors="coerce").max()),
                         **med, "kernel_share": med["sys_s"] / cpu if cpu > 0 else float("nan")})
    return pd.DataFrame(rows, columns=KERNEL_COLUMNS)


KERNEL_WIDE_KEYS = ["seed", "configuration", "workload", "processor"]


def kernel_part_wide(long: pd.DataFrame) -> pd.DataFrame:
    """kernel_part with the two sides of a cell on one row (with_*, without_*), and the ratios of their median
    user and system times."""
    if long.empty:
        return pd.DataFrame(columns=KERNEL_WIDE_KEYS)
    sides = []
    for side in ("with", "without"):
        part = long[long["side"] == side].drop(columns=["side"]).set_index(KERNEL_WIDE_KEYS)
        sides.append(part.add_prefix(f"{side}_"))
    wide = sides[0].join(sides[1], how="inner").reset_index()
    for m in ("user_s", "sys_s", "minflt"):
        den = wide[f"without_{m}"].where(wide[f"without_{m}"] > 0)
        wide[f"{m}_ratio"] = wide[f"with_{m}"] / den
    return wide


CODE_COLUMNS = ["allocator", "file", "sha256", "instructions", "rep_stos", "memset_calls", "memcpy_calls", "run_id"]


def code_census(runs_dir: Path, allocators) -> pd.DataFrame:
    """The census of each debated library's code (harness/mechanisms/code_census.py), from the newest run of the
    dataset (or its runs folder) that recorded it: one row per allocator and file."""
    found = {}
    wanted = set(allocators)
    ds = dataset.load(runs_dir) if runs_dir else None
    for run_id in ds.run_ids() if ds is not None else []:
        info = ds.info(run_id)
        for name, rec in (info.get("allocators") or {}).items():
            if name not in wanted or not isinstance(rec, dict):
                continue
            for lib in rec.get("libraries") or []:
                if isinstance(lib, dict) and lib.get("code"):
                    found[(name, lib.get("file", ""))] = {"allocator": name, "file": lib.get("file", ""),
                                                          "sha256": str(lib.get("sha256", ""))[:12],
                                                          **lib["code"], "run_id": run_id}
    return pd.DataFrame([found[k] for k in sorted(found)], columns=CODE_COLUMNS)
