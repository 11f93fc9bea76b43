"""The debates' cells predicted from per-call costs (results_debate_per_call.csv): what the time a malloc+free
pair adds under each configuration (publish/results/per_call.py), times the calls a debated workload makes
(its allocation profile, a run of kind `profile`), says the debated ratio should be, beside the ratio measured.

Per host: a cell is predicted where that host's newest profile run profiled the workload and the host has
per-call costs of both configurations of the pair against the baseline (a side that is the baseline adds
nothing); the prediction is stats.cost_model.predict_pair, the workload's time under the baseline its profile's
CPU time on that host. A profiled cell that cannot be predicted keeps its row with the reason (no per-call costs
of a configuration there), so the table says what is missing as well as what was found. Where the host also
measured each side's start-up per process (the calls-processes workload), a second prediction beside the first
charges it for each process the workload's profile counts (cost_model.predict, startup=True): the builds start
many short processes, each of which pays an allocator's start-up and exit.

These predictions are made after the cells were measured: they are not a registered, out-of-sample check (the
cost check of programs nobody tuned for is, publish/results/cost_check.py). They say how much of a debated
ratio the per-call costs of small blocks account for; the rest lies in what the model leaves out (pages,
caches, where the blocks sit), which the paper names where the two disagree."""
import math
from pathlib import Path

import pandas as pd

from analysis.contract import dataset
from analysis.contract.profile_schema import RUN_KIND, RUN_TABLE
from analysis.errors import HeapcostError
from analysis.publish.debates import pool
from analysis.publish.render.formats import fmt_interval
from analysis.stats import cost_model

COLUMNS = ["seed", "configuration", "workload", "processor", "profile_run", "scale", "calls", "base_cpu_s",
           "per_call_from", "added_with_ms", "added_without_ms", "predicted", "pred_low", "pred_high", "measured", "ci_low",
           "ci_high", "inside", "overlap", "per_call_percent", "reason", "missing", "cpu_ratio", "user_added_percent",
           "sys_added_percent", "per_call_added_percent", "minflt_ratio", "predicted_display", "measured_display",
           "per_call_display", "split_display", "cpu_display", "user_display", "sys_display", "minflt_display",
           "per_call_added_display", "startup_predicted", "startup_low", "startup_high", "startup_percent",
           "startup_display", "startup_percent_display", "model", "model_predicted", "model_low", "model_high",
           "model_display"]
SPLIT_DISPLAYS = ["split_display", "cpu_display", "user_display", "sys_display", "minflt_display",
                  "per_call_added_display"]
# configurations that no calls workload can measure per call, and why (the paper says it where one is missing)
UNREACHABLE = {"perl-mymalloc": "perl's own malloc is compiled into the perl binary, out of reach of the calls "
                                "workloads, C programs that take their malloc from the library preloaded"}
# where a cell's trials recorded each side's user and system time (results_kernel_part.csv: trial-protocol cells)
SPLIT_KEYS = ["seed", "configuration", "workload", "processor"]


def host_profiles(runs_dir: Path | None) -> dict[str, pd.DataFrame]:
    """{processor label: profiles.csv rows}: of each workload, the rows of the host's newest complete profile run
    that profiled it (runs may profile different workloads, at the scales their time runs use), from the dataset
    (or its runs folder)."""
    if runs_dir is None:
        return {}
    ds = dataset.load(runs_dir)
    runs = [r for r in ds.runs(RUN_KIND) if r.complete and ds.has(r, RUN_TABLE)]
    labels = pool._processors(ds) if runs else {}
    out: dict[str, dict[str, pd.DataFrame]] = {}
    for r in runs:  # oldest first: a newer run's profile of a workload replaces an older one's
        table = ds.table(r, RUN_TABLE)
        for workload, rows in table.groupby("workload", sort=True):
            out.setdefault(labels.get(r.run_id, r.run_id), {})[str(workload)] = rows
    return {host: pd.concat(list(w.values()), ignore_index=True) for host, w in out.items()}


def _costs(costs: pd.DataFrame, processor: str, allocator: str) -> pd.DataFrame:
    mine = costs[(costs["processor"] == processor) & (costs["allocator"] == allocator)]
    return mine[cost_model.COST_COLUMNS].reset_index(drop=True)


def _measured(per_host: pd.DataFrame, seed: str, configuration: str, workload: str, processor: str) -> dict:
    if per_host is None or per_host.empty:
        return {}
    hit = per_host[(per_host["seed"].astype(str) == seed) & (per_host["configuration"] == configuration)
                   & (per_host["workload"] == workload) & (per_host["processor"] == processor)]
    if hit.empty:
        return {}
    r = hit.iloc[0]
    return {"measured": float(r["ratio"]), "ci_low": float(r["ci_low"]), "ci_high": float(r["ci_high"])}


def direct_costs(runs_dir: Path | None, spec: dict, baseline: str) -> pd.DataFrame:
    """Per-call costs of a contested configuration measured in turns with the other side of its pair directly
    (the calls workloads run with PAIRS=with:without), per host: publish/results/per_call.table with the
    configuration without the change as the baseline. Empty where no run paired them. `runs_dir`: the dataset
    (or its runs folder)."""
    from analysis.publish.results import per_call

    if runs_dir is None:
        return pd.DataFrame(columns=per_call.COLUMNS)
    ds = dataset.load(runs_dir)
    withouts = sorted({without for q in spec.values() for _, without in q.contested} - {baseline})
    frames = [t for t in (per_call.table(ds, w) for w in withouts) if len(t)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=per_call.COLUMNS)


def table(runs_dir: Path | None, costs: pd.DataFrame, per_host: pd.DataFrame, spec: dict,
          baseline: str, kernel: pd.DataFrame | None = None, direct: pd.DataFrame | None = None,
          premiums: dict | None = None) -> pd.DataFrame:
    """One row per debate, contested pair, workload and host with a profile run: predicted and measured; where
    `kernel` (results_kernel_part.csv's rows) has the cell, the measured CPU time split beside the prediction.
    Where `direct` (direct_costs) has the pair's per-call costs measured in turns with each other on that host,
    they predict it; elsewhere each side's costs against the baseline do. Beside the per-call prediction, the
    cell as `cost` predicts a configuration (the `model` columns, _model_prediction): with each process's
    start-up where both sides have it measured, and the terms the cost check fitted (`premiums`, {configuration:
    stats/cost_terms.Premium}). `runs_dir`: the dataset (or its runs folder), None for none."""
    rows = []
    for processor, profiles in sorted(host_profiles(runs_dir).items()):
        for q in spec.values():
            for with_, without in q.contested:
                configuration = f"{with_} / {without}"
                for workload in [w for w in q.workloads if w in set(profiles["workload"])]:
                    run_id = str(profiles.loc[profiles["workload"] == workload, "run_id"].iloc[0])
                    row = {"seed": q.seed, "configuration": configuration, "workload": workload,
                           "processor": processor, "profile_run": run_id,
                           **_measured(per_host, q.seed, configuration, workload, processor)}
                    rows.append({**row, **_predict(profiles, workload, costs, processor, with_, without, baseline,
                                                   direct, premiums or {})})
    out = pd.DataFrame(rows, columns=COLUMNS)
    if len(out):
        out["predicted_display"] = [fmt_interval(r.predicted, r.pred_low, r.pred_high) if _num(r.predicted) else ""
                                    for r in out.itertuples()]
        out["measured_display"] = [fmt_interval(r.measured, r.ci_low, r.ci_high) if _num(r.measured) else ""
                                   for r in out.itertuples()]
        both = out["predicted"].notna() & out["measured"].notna()
        out["inside"] = pd.Series([None] * len(out), dtype=object)
        out["overlap"] = pd.Series([None] * len(out), dtype=object)
        out.loc[both, "inside"] = (out["measured"] >= out["pred_low"]) & (out["measured"] <= out["pred_high"])
        out.loc[both, "overlap"] = (out["ci_low"] <= out["pred_high"]) & (out["ci_high"] >= out["pred_low"])
        resolved = both & ((out["ci_low"] > 1) | (out["ci_high"] < 1))
        out.loc[resolved, "per_call_percent"] = [100 * math.log(r.predicted) / math.log(r.measured)
                                                 for r in out[resolved].itertuples()]
        out["per_call_display"] = [f"{x:.0f}%" if _num(x) else "" for x in out["per_call_percent"]]
        out["startup_display"] = [fmt_interval(r.startup_predicted, r.startup_low, r.startup_high)
                                  if _num(r.startup_predicted) else "" for r in out.itertuples()]
        out.loc[resolved & out["startup_predicted"].notna(), "startup_percent"] = [
            100 * math.log(r.startup_predicted) / math.log(r.measured)
            for r in out[resolved & out["startup_predicted"].notna()].itertuples()]
        out["startup_percent_display"] = [f"{x:.0f}%" if _num(x) else "" for x in out["startup_percent"]]
        out["model_display"] = [fmt_interval(r.model_predicted, r.model_low, r.model_high)
                                if _num(r.model_predicted) else "" for r in out.itertuples()]
        out = _with_split(out, kernel)
    return out


def _with_split(out: pd.DataFrame, kernel: pd.DataFrame | None) -> pd.DataFrame:
    """Where the cell's trials timed each side's user and system CPU (medians of one process tree): the CPU
    ratio, the time each part added as a percentage of the configuration without's CPU time, and the per-call
    prediction's own added percentage beside them; the minor faults' ratio. Percentages, since the trials may
    have run at another scale than the profile (results_kernel_part.csv has each side's scale)."""
    if kernel is None or kernel.empty:
        return out.assign(**{c: "" for c in SPLIT_DISPLAYS})
    k = kernel.assign(seed=kernel["seed"].astype(str))
    cpu_without = k["without_user_s"] + k["without_sys_s"]
    k = k.assign(cpu_ratio=(k["with_user_s"] + k["with_sys_s"]) / cpu_without,
                 user_added_percent=100 * (k["with_user_s"] - k["without_user_s"]) / cpu_without,
                 sys_added_percent=100 * (k["with_sys_s"] - k["without_sys_s"]) / cpu_without,
                 minflt_ratio=k["with_minflt"] / k["without_minflt"])
    parts = ["cpu_ratio", "user_added_percent", "sys_added_percent", "minflt_ratio"]
    out = out.drop(columns=parts).merge(k[SPLIT_KEYS + parts], on=SPLIT_KEYS, how="left")[
        [c for c in COLUMNS if c not in SPLIT_DISPLAYS]]
    out["per_call_added_percent"] = [100 * (r.predicted - 1) if _num(r.predicted) and _num(r.cpu_ratio) else None
                                     for r in out.itertuples()]
    split = [_num(r.cpu_ratio) and _num(r.per_call_added_percent) for r in out.itertuples()]
    shown = {"cpu_display": lambda r: f"{r.cpu_ratio:.3f}", "user_display": lambda r: f"{r.user_added_percent:+.0f}%",
             "sys_display": lambda r: f"{r.sys_added_percent:+.0f}%", "minflt_display": lambda r: f"x{r.minflt_ratio:.2f}",
             "per_call_added_display": lambda r: f"{r.per_call_added_percent:+.0f}%"}
    for column, show in shown.items():
        out[column] = [show(r) if ok else "" for r, ok in zip(out.itertuples(), split)]
    out["split_display"] = [
        f"CPU {r.cpu_display}: user {r.user_display}, system {r.sys_display} (minor faults {r.minflt_display}); "
        f"per-call {r.per_call_added_display}" if ok else "" for r, ok in zip(out.itertuples(), split)]
    return out[COLUMNS]


def _num(x) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def _predict(profiles: pd.DataFrame, workload: str, costs: pd.DataFrame, processor: str, with_: str,
             without: str, baseline: str, direct: pd.DataFrame | None = None, premiums: dict | None = None) -> dict:
    mine = profiles[profiles["workload"] == workload]
    profile = mine[["quantity", "size_class", "value"]].reset_index(drop=True)
    paired = pd.DataFrame() if direct is None or direct.empty else direct[
        (direct["processor"] == processor) & (direct["allocator"] == with_) & (direct["baseline"] == without)]
    if len(paired):
        return _predict_direct(profile, mine, paired, costs, processor, without, baseline)
    sides, missing = {}, []
    for allocator in (with_, without):
        sides[allocator] = None if allocator == baseline else _costs(costs, processor, allocator)
        if sides[allocator] is not None and sides[allocator].empty:
            missing.append(allocator)
    if missing:
        return {"reason": f"no per-call costs of {' and '.join(missing)} on this host", "missing": " ".join(missing)}
    try:
        p = cost_model.predict_pair(profile, sides[with_], sides[without])
    except HeapcostError as exc:
        return {"reason": str(exc)}
    base = cost_model.base_time(profile)
    calls = cost_model.class_calls(profile)["calls"].sum()
    started = {}
    if all(_has_startup(c) for c in sides.values() if c is not None):
        s = cost_model.predict_pair(profile, sides[with_], sides[without], startup=True)
        started = {"startup_predicted": s.ratio, "startup_low": s.low, "startup_high": s.high}
    return {"scale": float(mine["scale"].iloc[0]), "calls": int(calls), "base_cpu_s": base,
            "added_with_ms": 1e3 * p.with_.added_s if p.with_ else 0.0,
            "added_without_ms": 1e3 * p.without.added_s if p.without else 0.0,
            "predicted": p.ratio, "pred_low": p.low, "pred_high": p.high, "reason": "",
            "per_call_from": f"each against {baseline}", **started,
            **_model_prediction(profile, sides, with_, without, bool(started), premiums or {})}


# the words a prediction's `model` is written in (_model_prediction, _predict_direct), read back by takes_terms and
# model_label
PER_CALL_WORDS, IN_TURNS_WORDS, STARTUP_WORDS, TERMS_WORDS = ("per-call costs", "in turns with each other",
                                                              "start-up per process", "'s terms (")


def takes_terms(words: str) -> bool:
    """Whether a prediction's `model` took the cost check's terms."""
    return TERMS_WORDS in words


def _model_prediction(profile: pd.DataFrame, sides: dict, with_: str, without: str, startup: bool,
                      premiums: dict) -> dict:
    """The cell as `cost` predicts a configuration against the baseline: the per-call costs, each process's
    start-up where both sides have it measured (`startup`), and each side's terms fitted by the cost check
    (`premiums`; stats/cost_terms.py). A side's terms are fitted against the baseline, so they join only where
    every side that is not the baseline has its own: a pair whose configuration without the change has none
    (mozjemalloc against its poisoning build) would charge the change for what both sides share, such as where
    they place blocks, and is predicted without terms. `model`: what the prediction includes, in words."""
    from analysis.stats.cost_terms import ORDER_TERM

    others = [a for a, c in sides.items() if c is not None]
    fitted = bool(others) and all(a in premiums for a in others)
    terms = tuple(premiums[a] if fitted and sides[a] is not None else None for a in (with_, without))
    p = cost_model.predict_pair(profile, sides[with_], sides[without], startup=startup, terms=terms)
    words = [PER_CALL_WORDS] + ([STARTUP_WORDS] if startup else [])
    if fitted:
        words += [f"{a}{TERMS_WORDS}{premiums[a].describe()})" for a in others]
        placed = any(ORDER_TERM in premiums[a].terms for a in others)
        if placed and math.isnan(cost_model.placement_shares(profile)[0]):
            words.append("no placement runs in the profile: no placement part")
    elif any(a in premiums for a in others):
        words.append(f"no terms: {' and '.join(a for a in others if a not in premiums)} has none fitted")
    return {"model": "; ".join(words), "model_predicted": p.ratio, "model_low": p.low, "model_high": p.high}


def _has_startup(costs: pd.DataFrame) -> bool:
    return bool((costs["pattern"] == cost_model.PROCESSES).any())


def _predict_direct(profile: pd.DataFrame, mine: pd.DataFrame, paired: pd.DataFrame, costs: pd.DataFrame,
                    processor: str, without: str, baseline: str) -> dict:
    """The pair from its direct per-call costs: 1 + added / (T + a_without), a_without the configuration
    without's own added time against the baseline where that host measured it (else none: T alone)."""
    base = cost_model.base_time(profile)
    own = _costs(costs, processor, without) if without != baseline else pd.DataFrame()
    added_without = cost_model.predict(profile, own).added_s if len(own) else 0.0
    pair_costs = paired[cost_model.COST_COLUMNS].reset_index(drop=True)
    try:
        p = cost_model.predict(profile, pair_costs, base_s=base + added_without)
    except HeapcostError as exc:
        return {"reason": str(exc)}
    started = {}
    if _has_startup(pair_costs) and (without == baseline or (len(own) and _has_startup(own))):
        own_started = cost_model.predict(profile, own, startup=True).added_s if len(own) else 0.0
        s = cost_model.predict(profile, pair_costs, base_s=base + own_started, startup=True)
        started = {"startup_predicted": s.ratio, "startup_low": s.low, "startup_high": s.high}
    in_turns = f"{PER_CALL_WORDS} {IN_TURNS_WORDS}"
    model = ({"model": f"{in_turns}; {STARTUP_WORDS}", "model_predicted": started["startup_predicted"],
              "model_low": started["startup_low"], "model_high": started["startup_high"]} if started else
             {"model": in_turns, "model_predicted": p.ratio, "model_low": p.low, "model_high": p.high})
    return {"scale": float(mine["scale"].iloc[0]), "calls": p.calls, "base_cpu_s": base,
            "added_with_ms": 1e3 * (added_without + p.added_s), "added_without_ms": 1e3 * added_without,
            "predicted": p.ratio, "pred_low": p.low, "pred_high": p.high, "reason": "",
            "per_call_from": "in turns with each other", **started, **model}


def _model_numbers(both: pd.DataFrame) -> dict:
    modelled = both[both["model_predicted"].notna()]
    if modelled.empty:
        return {"cells": 0}

    def median_miss(column):
        miss = (modelled["measured"].map(math.log) - modelled[column].map(math.log)).abs().median()
        return f"{100 * math.expm1(float(miss)):.1f}"
    words = modelled["model"].astype(str)
    return {"cells": int(len(modelled)), "terms": int(words.map(takes_terms).sum()),
            "startup": int(words.str.contains(STARTUP_WORDS, regex=False).sum()),
            "median_miss_percent": median_miss("model_predicted"),
            "per_call_median_miss_percent": median_miss("predicted")}


def _missing(rows: pd.DataFrame) -> list[str]:
    return sorted({c for names in rows["missing"].dropna().astype(str) for c in names.split()})


def numbers(t: pd.DataFrame) -> dict:
    """For results_numbers.json: what was predicted, how often the measured ratio fell inside, what was not."""
    if t.empty:
        return {"rows": 0, "predicted": 0, "hosts": []}
    done = t[t["predicted"].notna()]
    both = done[done["measured"].notna()]
    missing = t[t["predicted"].isna()]
    return {
        "rows": int(len(t)), "predicted": int(len(done)), "compared": int(len(both)),
        "inside": int(both["inside"].astype(bool).sum()), "overlap": int(both["overlap"].astype(bool).sum()),
        "hosts": sorted(set(t["processor"])), "profile_runs": sorted(set(t["profile_run"])),
        "seeds_predicted": sorted(set(done["seed"])),
        # per seed, the configurations without per-call costs on a host that profiled the seed's workloads, and
        # any other reason a cell could not be predicted
        "not_predicted": [{"seed": s, "configurations": _missing(g),
                           "unreachable": [{"configuration": c, "why": UNREACHABLE[c]} for c in _missing(g)
                                           if c in UNREACHABLE],
                           "other": sorted(set(g.loc[g["missing"].isna(), "reason"].astype(str)))}
                          for s, g in missing.groupby("seed", sort=True)],
        "cells": [{"seed": r.seed, "configuration": r.configuration, "workload": r.workload,
                   "processor": r.processor, "predicted": r.predicted_display, "measured": r.measured_display,
                   "inside": bool(r.inside) if _num(r.measured) else None,
                   "per_call_percent": f"{r.per_call_percent:.0f}" if _num(r.per_call_percent) else "",
                   "split": r.split_display}
                  for r in both.itertuples()],
        # cells predicted from the pair's own per-call costs, its two configurations in turns with each other
        "direct": [{"configuration": r.configuration, "workload": r.workload, "processor": r.processor}
                   for r in done.itertuples() if r.per_call_from == "in turns with each other"],
        # cells predicted also with each process's start-up charged, and how many of those measured inside
        "startup": {"cells": int(both["startup_predicted"].notna().sum()),
                    "inside": int(((both["measured"] >= both["startup_low"])
                                   & (both["measured"] <= both["startup_high"])).sum())},
        # the cells predicted as `cost` predicts a program (start-up and terms where they apply): how many take the
        # cost check's terms, and the median miss of that prediction beside the per-call one's
        "model": _model_numbers(both),
        "split_cells": int((both["split_display"] != "").sum()),
        # of those, the cells whose system time alone, or whose user time alone, added more than the whole per-call
        # prediction
        "split_sys_above_per_call": int((both["sys_added_percent"] > both["per_call_added_percent"]).sum()),
        "split_user_above_per_call": int((both["user_added_percent"] > both["per_call_added_percent"]).sum()),
        # the cells without a split whose measured interval lies wholly above the prediction interval
        "above_unsplit": [{"seed": r.seed, "configuration": r.configuration, "workload": r.workload,
                           "predicted": r.predicted_display, "measured": r.measured_display}
                          for r in both.itertuples() if r.split_display == "" and r.ci_low > r.pred_high],
    }


# ---- registered before the cells are measured again ----

# a [[per_call]] entry of predictions.toml: a debate cell predicted from a kind's per-call costs and the workload's
# profile, registered (`python -m analysis predict`, committed) before the kind's next runs of the cell. `model`
# (entries registered since the cost check fitted its terms): what the centre includes; an entry without it is
# the per-call costs alone
REGISTERED_KEYS = ("seed", "configuration", "workload", "processor", "registered", "after_run", "profile_run",
                   "centre", "low", "high", "model_low", "model_high", "model_error_from")
OPTIONAL_KEYS = ("model",)
PER_CALL_ALONE = PER_CALL_WORDS
CHECK_COLUMNS = ["seed", "configuration", "workload", "processor", "registered", "after_run", "model", "model_label",
                 "predicted_display", "model_display", "runs", "measured", "ci_low", "ci_high", "measured_display",
                 "inside", "inside_model", "log_error"]


def registrations(t: pd.DataFrame, residuals_per_call: pd.DataFrame, registered: str, after_run: str,
                  residuals: pd.DataFrame | None = None) -> list[dict]:
    """A [[per_call]] entry for every predicted cell of `t` (table()): the cell as `cost` predicts it (the `model`
    columns: start-up per process and the cost check's terms where they apply), its interval from the inputs,
    and the same widened by the model's own error for the configuration with the defence, as `cost` prints it:
    the misses of the checked programs under the model with its terms (`residuals`) where the prediction takes
    them, else under the per-call model alone (`residuals_per_call`; stats/cost_model.model_error). `after_run`:
    the newest run id of the dataset when registered; a run that checks the entry started after it."""
    from analysis.publish.results.cost_prediction import family_of

    out = []
    for r in t.itertuples():
        if not _num(r.predicted):
            continue
        with_ = r.configuration.split(" / ")[0]
        modelled = _num(getattr(r, "model_predicted", None))
        words = str(r.model) if modelled else PER_CALL_ALONE
        centre, in_low, in_high = ((r.model_predicted, r.model_low, r.model_high) if modelled
                                   else (r.predicted, r.pred_low, r.pred_high))
        misses = residuals if takes_terms(words) and residuals is not None else residuals_per_call
        err = cost_model.model_error(misses, with_, family_of(with_)) if len(misses) else None
        low, high = (cost_model.with_model_error(centre, in_low, in_high, err) if err is not None
                     else (in_low, in_high))
        out.append({"seed": str(r.seed), "configuration": r.configuration, "workload": r.workload,
                    "processor": r.processor, "registered": registered, "after_run": after_run,
                    "profile_run": r.profile_run, "centre": round(float(centre), 6),
                    "low": round(float(in_low), 6), "high": round(float(in_high), 6),
                    "model_low": round(float(low), 6), "model_high": round(float(high), 6),
                    "model_error_from": (f"{err.residuals} misses of {err.programs} checked programs ({err.scope})"
                                         if err is not None else "not checked"),
                    "model": words})
    return out


def model_label(words: str) -> str:
    """A registration's model in a few words, for a table: what its centre includes."""
    parts = ["per-call" + (" in turns" if IN_TURNS_WORDS in words else "")]
    if STARTUP_WORDS in words:
        parts.append("start-up")
    if takes_terms(words):
        parts.append("terms")
    return " + ".join(parts)


def check(entries: list[dict], runs: pd.DataFrame) -> pd.DataFrame:
    """Every registered entry against the runs of its cell on its kind that started after it (results_debate_runs
    rows: one estimate per run and layout build, pooled as the debates pool them); a cell no such run measured
    keeps its row, unmeasured."""
    from analysis.stats import random_effects

    rows = []
    for e in entries:
        row = dict.fromkeys(CHECK_COLUMNS)
        row.update({k: e[k] for k in ("seed", "configuration", "workload", "processor", "registered", "after_run")})
        row["model"] = e.get("model", PER_CALL_ALONE)
        row["model_label"] = model_label(row["model"])
        row.update(predicted_display=fmt_interval(e["centre"], e["low"], e["high"]),
                   model_display=fmt_interval(e["centre"], e["model_low"], e["model_high"]), runs=0)
        later = runs[(runs["seed"].astype(str) == str(e["seed"])) & (runs["configuration"] == e["configuration"])
                     & (runs["workload"] == e["workload"]) & (runs["processor"] == e["processor"])
                     & (runs["run_id"].astype(str) > str(e["after_run"]))
                     & ~runs["superseded"].astype(str).str.lower().eq("true")] if len(runs) else runs
        if len(later):
            pooled = random_effects.pool(later.assign(host=later["processor"]))
            lo, hi = pooled.interval()
            m = math.exp(pooled.estimate)
            row.update(runs=int(later["run_id"].nunique()), measured=m, ci_low=math.exp(lo), ci_high=math.exp(hi),
                       measured_display=fmt_interval(m, math.exp(lo), math.exp(hi)),
                       inside=bool(e["low"] <= m <= e["high"]), inside_model=bool(e["model_low"] <= m <= e["model_high"]),
                       log_error=math.log(m) - math.log(e["centre"]))
        rows.append(row)
    return pd.DataFrame(rows, columns=CHECK_COLUMNS)


def check_numbers(t: pd.DataFrame) -> dict:
    done = t[t["measured"].notna()] if len(t) else t
    return {"registered": int(len(t)), "measured": int(len(done)),
            "inside": int(done["inside"].astype(bool).sum()) if len(done) else 0,
            "inside_model": int(done["inside_model"].astype(bool).sum()) if len(done) else 0,
            "registrations": sorted(set(t["registered"])) if len(t) else [],
            "median_abs_error_percent": (f"{100 * math.expm1(float(done['log_error'].astype(float).abs().median())):.1f}"
                                         if len(done) else ""),
            # per model (model_label) with a cell measured since: those cells, how many fell inside the interval
            # with the model's own error, and their median miss; and per model, the cells not yet measured
            "by_model": [{"model": label, "registered": int(len(g)), "measured": int(g["measured"].notna().sum()),
                          "inside_model": int(g.loc[g["measured"].notna(), "inside_model"].astype(bool).sum()),
                          "median_abs_error_percent":
                              f"{100 * math.expm1(float(g['log_error'].dropna().astype(float).abs().median())):.1f}"}
                         for label, g in _by_model(t) if g["measured"].notna().any()],
            "waiting_by_model": [{"model": label, "cells": int(g["measured"].isna().sum())}
                                 for label, g in _by_model(t) if g["measured"].isna().any()]}


def _by_model(t: pd.DataFrame):
    return t.groupby("model_label", sort=True) if len(t) else []
