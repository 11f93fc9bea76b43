"""Predictions registered before a new host is measured, and the replication table that checks them.

`python -m analysis predict` reads the published dataset and, for each debate's primary cell, writes the
prediction interval of its answer on a host not yet measured (analysis.stats.prediction: the mean of the
earlier hosts' answers, with a between-host spread borrowed from the catalogue's ablation pairs measured on the
same hosts) into predictions.toml at the repository's root, with the date and the commit of the dataset it
was computed from. Committed before a new host's runs are merged, it is the out-of-sample test of the answers:
the paper's replication table lists every later host's answer against it, and the share that held.
"""
import datetime
import math
import subprocess
from pathlib import Path

import pandas as pd

from analysis.contract import dataset, debates_spec
from analysis.contract.host import canonical_label, extends_label
from analysis.errors import HeapcostError, read_toml
from analysis.paths import REPO
from analysis.publish.debates import pool
from analysis.publish.results.ablations import ABLATIONS
from analysis.stats import prediction, random_effects

PREDICTIONS_TOML = REPO / "predictions.toml"
KEYS = ("seed", "configuration", "workload", "registered", "from_hosts", "centre", "low", "high", "tau_percent",
        "spread_cells")
# a [[long_build]] entry (analysis/publish/debates/long_build.py)
LONG_BUILD_KEYS = ("seed", "configuration", "workload", "from_workload", "registered", "processor", "from_runs",
                   "centre", "low", "high", "startup_ms", "baseline_startup_ms")
REPLICATION_COLUMNS = ["seed", "configuration", "workload", "registered", "from_hosts", "predicted", "host",
                       "measured", "held"]
# a [[next_machine]] entry: the estimate the next machine of a kind gives, under make debates's design
# (layout builds) and with one build, from the machines named
NEXT_MACHINE_KEYS = ("seed", "configuration", "workload", "kind", "registered", "from_machines", "centre", "low",
                     "high", "one_build_low", "one_build_high", "tau_machine_percent", "spread_df")
NEXT_MACHINE_CHECK_COLUMNS = ["seed", "configuration", "workload", "kind", "registered", "from_machines", "machine",
                              "n_builds", "interval", "predicted", "measured", "held"]


def ablation_cells(cells: pd.DataFrame, runs_dir: Path, skip=(), by_kind: bool = False) -> dict:
    """{(with, without, workload): [(log ratio, se) per processor kind]} over the catalogue's ablation pairs
    (one defence inside one allocator), each host's runs and builds pooled, from the dataset (or its runs
    folder); `skip` the debates' own pairs. `by_kind`: {cell: {kind: (log ratio, se)}} instead, for predictions
    that leave a kind out."""
    out = {}
    if cells is None or cells.empty:
        return out
    runs_dir = dataset.load(runs_dir)
    for _, with_, without in ABLATIONS:
        if (with_, without) in skip:
            continue
        for workload in sorted(set(cells.loc[cells["allocator"] == with_, "workload"])):
            est = pool.run_estimates(cells, runs_dir, "ablation", with_, without, workload)
            est = est[~est["superseded"].astype(bool)]
            per_host = {}
            est = est[est["processor"].isin(pool.identified_processors(est["processor"]))]
            for kind, sub in est.groupby("processor", sort=True):
                p = random_effects.pool(sub[["estimate", "se", "df", "build"]].assign(host="one"))
                per_host[kind] = (p.estimate, p.se)
            if per_host:
                out[(with_, without, workload)] = per_host if by_kind else list(per_host.values())
    return out


def head_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    except OSError:
        return "unknown"
    return out.stdout.strip() or "unknown"


def compute(res, per_host: pd.DataFrame, spec: dict, today: str, commit: str) -> list[dict]:
    """A prediction for every debate's primary cell that some host has answered."""
    runs_dir = res.dataset
    skip = {p for q in spec.values() for p in q.contested}
    tau, n_cells = prediction.borrowed_spread(ablation_cells(res.cells.get("wall_s"), runs_dir, skip))
    out = []
    for seed, q in sorted(spec.items()):
        (with_, without), workload = q.primary
        mine = per_host[(per_host["configuration"] == f"{with_} / {without}") & (per_host["workload"] == workload)]
        mine = mine[mine["processor"].isin(pool.identified_processors(mine["processor"]))]
        if mine.empty or not math.isfinite(tau):
            continue
        p = prediction.predict(list(zip(mine["estimate"].astype(float), mine["se"].astype(float))), tau)
        lo, hi = p.interval()
        out.append({"seed": seed, "configuration": f"{with_} / {without}", "workload": workload,
                    "registered": f"{today}, commit {commit}", "from_hosts": sorted(mine["processor"]),
                    "centre": round(math.exp(p.centre), 4), "low": round(math.exp(lo), 4),
                    "high": round(math.exp(hi), 4), "tau_percent": round(math.expm1(tau) * 100, 2),
                    "spread_cells": n_cells})
    return out


def _toml_value(v) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(v)


def _block(kind: str, entry: dict, keys) -> str:
    return f"[[{kind}]]\n" + "".join(f"{k} = {_toml_value(entry[k])}\n" for k in keys)


def compute_next_machine(per_host: pd.DataFrame, spread, today: str, commit: str) -> list[dict]:
    """A [[next_machine]] entry for every debate cell and kind with an answer: the 95% interval the estimate of a
    machine of that kind not yet measured should fall in (pool.per_host's next_* columns)."""
    out = []
    if per_host.empty or "next_low" not in per_host.columns:
        return out
    told = per_host[per_host["processor"].isin(pool.identified_processors(per_host["processor"]))]
    for h in told.sort_values(["seed", "configuration", "workload", "processor"]).itertuples():
        if not (h.next_low == h.next_low):  # no machine level computed for this row
            continue
        out.append({"seed": str(h.seed), "configuration": h.configuration, "workload": h.workload, "kind": h.processor,
                    "registered": f"{today}, commit {commit}", "from_machines": sorted(str(h.machines).split("; ")),
                    "centre": round(float(h.ratio), 4), "low": round(float(h.next_low), 4),
                    "high": round(float(h.next_high), 4), "one_build_low": round(float(h.next_one_build_low), 4),
                    "one_build_high": round(float(h.next_one_build_high), 4),
                    "tau_machine_percent": round(spread.tau * 100, 3), "spread_df": round(float(spread.df), 2)})
    return out


def next_machine_check(entries: list[dict], machines: pd.DataFrame) -> pd.DataFrame:
    """Every machine measured after a [[next_machine]] registration (a machine of the kind its registration did
    not use) against it: its own estimate of the cell, inside the interval of its design (layout builds, or one
    build)?"""
    rows = []
    for e in entries:
        mine = machines[(machines["configuration"] == e["configuration"]) & (machines["workload"] == e["workload"])
                        & (machines["processor"] == e["kind"]) & ~machines["machine"].isin(e["from_machines"])]
        for m in mine.itertuples():
            one = int(m.n_builds) < 2
            lo, hi = (e["one_build_low"], e["one_build_high"]) if one else (e["low"], e["high"])
            rows.append({"seed": e["seed"], "configuration": e["configuration"], "workload": e["workload"],
                         "kind": e["kind"], "registered": e["registered"], "from_machines": "; ".join(e["from_machines"]),
                         "machine": m.machine, "n_builds": int(m.n_builds),
                         "interval": "one build" if one else "layout builds",
                         "predicted": f"{e['centre']:.3f} [{lo:.3f}, {hi:.3f}]",
                         "measured": f"{m.ratio:.3f} [{m.ci_low:.3f}, {m.ci_high:.3f}]",
                         "held": bool(lo <= m.ratio <= hi)})
    return pd.DataFrame(rows, columns=NEXT_MACHINE_CHECK_COLUMNS)


def same_machines(e: dict) -> tuple:
    """What makes two next-machine registrations one: the same cell, kind and machines."""
    return e["seed"], e["configuration"], e["workload"], e["kind"], tuple(e["from_machines"])


def render(entries: list[dict], long_builds: list[dict] = (), next_machines: list[dict] = (),
           per_calls: list[dict] = ()) -> str:
    from analysis.publish.debates.per_call_prediction import OPTIONAL_KEYS, REGISTERED_KEYS

    head = ("# Predictions registered before they are measured. [[prediction]]: each debate's primary answer on a\n"
            "# host not yet measured (`python -m analysis predict`, analysis/publish/debates/predictions.py): the\n"
            "# interval a new host's answer should fall in (95%), from the hosts named, with the between-host spread\n"
            "# borrowed from the catalogue's ablation pairs. [[long_build]]: seed 001's long build on a host, from the\n"
            "# short build's per-unit cost there (`python -m analysis predict-build`, analysis/publish/debates/\n"
            "# long_build.py). [[next_machine]]: each debate cell's answer on the next machine of a kind already\n"
            "# measured, before that machine's runs are merged (`python -m analysis predict`): the 95% interval of its\n"
            "# estimate under make debates's layout builds (low, high) and with one build. [[per_call]]: each debate\n"
            "# cell a kind's per-call costs and the workload's profile predict (`python -m analysis predict`,\n"
            "# analysis/publish/debates/per_call_prediction.py), checked by that kind's runs after `after_run`: the\n"
            "# inputs' interval (low, high) and with the model's own error (model_low, model_high); `model`, where\n"
            "# given, what the centre includes (without it: the per-call costs alone). Never edited by hand; a new\n"
            "# registration is added below the old ones.\n")
    blocks = [_block("prediction", e, KEYS) for e in entries] + \
        [_block("long_build", e, LONG_BUILD_KEYS) for e in long_builds] + \
        [_block("next_machine", e, NEXT_MACHINE_KEYS) for e in next_machines] + \
        [_block("per_call", e, REGISTERED_KEYS + tuple(k for k in OPTIONAL_KEYS if k in e)) for e in per_calls]
    return head + "\n" + "\n".join(blocks)


def write(path: Path, entries: list[dict], long_builds: list[dict] = (), next_machines: list[dict] = (),
          per_calls: list[dict] | None = None) -> None:
    """The registration file with these entries; `per_calls` None: the [[per_call]] entries it holds, kept."""
    Path(path).write_text(render(entries, long_builds, next_machines,
                                 load_per_calls(path) if per_calls is None else per_calls))


def _entries(path: Path, kind: str, keys) -> list[dict]:
    if not Path(path).is_file():
        return []
    entries = read_toml(Path(path)).get(kind, [])
    for i, e in enumerate(entries):
        missing = [k for k in keys if k not in e]
        if missing:
            raise HeapcostError(f"{Path(path).name}: {kind} {i + 1} lacks {', '.join(missing)}")
    return entries


def load(path: Path = PREDICTIONS_TOML) -> list[dict]:
    return _entries(path, "prediction", KEYS)


def load_long_builds(path: Path = PREDICTIONS_TOML) -> list[dict]:
    return _entries(path, "long_build", LONG_BUILD_KEYS)


def load_next_machines(path: Path = PREDICTIONS_TOML) -> list[dict]:
    return _entries(path, "next_machine", NEXT_MACHINE_KEYS)


def load_per_calls(path: Path = PREDICTIONS_TOML) -> list[dict]:
    from analysis.publish.debates.per_call_prediction import REGISTERED_KEYS

    return _entries(path, "per_call", REGISTERED_KEYS)


def same_per_call(e: dict) -> tuple:
    """What makes two per-call registrations one: the same cell, kind, profile and prediction."""
    return e["seed"], e["configuration"], e["workload"], e["processor"], e["profile_run"], e["centre"]


def compute_per_calls(data_dir: Path, spec: dict, today: str, commit: str, baseline: str = "glibc") -> list[dict]:
    """A [[per_call]] entry for every debate cell a kind's per-call costs and profiles predict now, as `cost`
    predicts it (start-up and the cost check's terms where they apply), the model's own error from the cost
    check's misses (publish/results/cost.model_inputs), `after_run` the dataset's newest run."""
    from analysis.publish.debates import per_call_prediction
    from analysis.publish.results import cost

    ds = dataset.load(Path(data_dir) / "runs")
    inputs = cost.model_inputs(ds, baseline)
    t = per_call_prediction.table(ds, inputs.costs, pd.DataFrame(), spec, baseline, None,
                                  per_call_prediction.direct_costs(ds, spec, baseline), inputs.premiums)
    newest = max(ds.run_ids(), default="")
    return per_call_prediction.registrations(t, inputs.residuals_per_call, f"{today}, commit {commit}", newest,
                                             inputs.residuals)


def _same_host(label: str, earlier: list[str], labels: list[str]) -> bool:
    """A host the prediction used (`earlier`, as named when it was registered), among the hosts that answer
    now (`labels`): the same label; the fuller label that runs named without their family/model/stepping
    were joined to since, where they can have joined only that kind (their own label no longer answers and
    no other kind extends it); or the label without them that such runs fall back to once a second kind
    shares their name and frequency (counted with the fuller kind the prediction used, measured before it)."""
    earlier = [canonical_label(e) for e in earlier]
    if label in earlier or any(extends_label(e, label) for e in earlier):
        return True
    return any(extends_label(label, e) and e not in labels
               and sum(extends_label(other, e) for other in labels) == 1 for e in earlier)


def replication(entries: list[dict], per_host: pd.DataFrame) -> pd.DataFrame:
    """Every host measured after a prediction (a host its registration did not use) against it."""
    rows = []
    for e in entries:
        mine = per_host[(per_host["configuration"] == e["configuration"]) & (per_host["workload"] == e["workload"])]
        labels = list(mine["processor"])
        earlier = [h for h in labels if _same_host(h, e["from_hosts"], labels)]
        for h in mine[~mine["processor"].isin(earlier)].itertuples():
            rows.append({"seed": e["seed"], "configuration": e["configuration"], "workload": e["workload"],
                         "registered": e["registered"], "from_hosts": "; ".join(e["from_hosts"]),
                         "predicted": f"{e['centre']:.3f} [{e['low']:.3f}, {e['high']:.3f}]", "host": h.processor,
                         "measured": f"{h.ratio:.3f} [{h.ci_low:.3f}, {h.ci_high:.3f}]",
                         "held": bool(e["low"] <= h.ratio <= e["high"])})
    return pd.DataFrame(rows, columns=REPLICATION_COLUMNS)


def add_arguments(parser):
    parser.add_argument("--data", default=None, help="the dataset folder (default: data/)")
    parser.add_argument("--output", default=str(PREDICTIONS_TOML), help="the registration file to add to")


def same_hosts(e: dict) -> tuple:
    """What makes two new-host predictions one: without a host measured since, registering again adds nothing
    but a later date."""
    return e["seed"], e["configuration"], e["workload"], tuple(sorted(canonical_label(h) for h in e["from_hosts"]))


def not_registered(new: list[dict], earlier: list[dict], key=same_hosts) -> tuple[list[dict], list[dict]]:
    """The new entries no earlier one registers under the same key, and the earlier entries that stand for
    the others (kept as they are: a prediction is registered once, before what it predicts is measured)."""
    before = {key(e): e for e in earlier}
    return [e for e in new if key(e) not in before], [before[key(e)] for e in new if key(e) in before]


def run(args) -> int:
    from analysis.paths import DATA_DIR
    from analysis.publish.debates import questions
    from analysis.publish.results.comparisons import compute as compute_results

    res = compute_results(Path(args.data) if args.data else DATA_DIR)
    spec = debates_spec.load()
    _, _, per_host = questions.answers(res, res.figures, spec)
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    commit = head_commit()
    new = compute(res, per_host, spec, today, commit)
    spread, _ = questions.spreads(questions.debate_runs(res, spec, pool.grouped_cells(res.cells)))
    new_machines = compute_next_machine(per_host, spread, today, commit)
    new_per_calls = compute_per_calls(Path(args.data) if args.data else DATA_DIR, spec, today, commit)
    if not new and not new_machines and not new_per_calls:
        raise HeapcostError("no primary cell has an answer on any host: nothing to predict from")
    path = Path(args.output)
    earlier = load(path)
    earlier_machines = load_next_machines(path)
    new, already = not_registered(new, earlier)
    new_machines, already_machines = not_registered(new_machines, earlier_machines, same_machines)
    earlier_per_calls = load_per_calls(path)
    new_per_calls, _ = not_registered(new_per_calls, earlier_per_calls, same_per_call)
    for e in already:
        print(f"seed {e['seed']} {e['configuration']} on {e['workload']}: registered before from the same hosts "
              f"({e['registered']}); left as it was")
    if already_machines:
        print(f"{len(already_machines)} next-machine intervals registered before from the same machines; left as they were")
    if new or new_machines or new_per_calls:
        write(path, earlier + new, load_long_builds(path), earlier_machines + new_machines,
              earlier_per_calls + new_per_calls)
    for e in new_per_calls:
        print(f"seed {e['seed']} {e['configuration']} on {e['workload']}, {e['processor']}: {e['model']} "
              f"predict {e['centre']} [{e['low']}, {e['high']}], with the model's own error "
              f"[{e['model_low']}, {e['model_high']}], for runs after {e['after_run']}")
    for e in new:
        print(f"seed {e['seed']} {e['configuration']} on {e['workload']}: a new host should read "
              f"{e['centre']} [{e['low']}, {e['high']}] (from {len(e['from_hosts'])} host(s); between-host spread "
              f"{e['tau_percent']}% from {e['spread_cells']} ablation cells)")
    print(f"{len(new_machines)} next-machine intervals registered (between-machine spread {spread.tau * 100:.2f}% on "
          f"{spread.df:g} degrees of freedom: {spread.source})")
    primary = {(f"{a} / {b}", w) for q in spec.values() for (a, b), w in [q.primary]}
    for e in new_machines:
        if (e["configuration"], e["workload"]) in primary:
            print(f"  seed {e['seed']} {e['configuration']} on {e['workload']}, {e['kind']}: the next machine should "
                  f"read {e['low']} to {e['high']} (one build: {e['one_build_low']} to {e['one_build_high']})")
    return 0
