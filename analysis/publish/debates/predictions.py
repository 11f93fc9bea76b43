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

from analysis.contract import debates_spec
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


def ablation_cells(cells: pd.DataFrame, runs_dir: Path, skip=()) -> dict:
    """{(with, without, workload): [(log ratio, se) per processor kind]} over the catalogue's ablation pairs
    (one defence inside one allocator), each host's runs and builds pooled; `skip` the debates' own pairs."""
    out = {}
    if cells is None or cells.empty:
        return out
    for _, with_, without in ABLATIONS:
        if (with_, without) in skip:
            continue
        for workload in sorted(set(cells.loc[cells["allocator"] == with_, "workload"])):
            est = pool.run_estimates(cells, runs_dir, "ablation", with_, without, workload)
            est = est[~est["superseded"].astype(bool)]
            per_host = []
            est = est[est["processor"].isin(pool.identified_processors(est["processor"]))]
            for _, sub in est.groupby("processor", sort=True):
                p = random_effects.pool(sub[["estimate", "se", "df", "build"]].assign(host="one"))
                per_host.append((p.estimate, p.se))
            if per_host:
                out[(with_, without, workload)] = per_host
    return out


def head_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    except OSError:
        return "unknown"
    return out.stdout.strip() or "unknown"


def compute(res, per_host: pd.DataFrame, spec: dict, today: str, commit: str) -> list[dict]:
    """A prediction for every debate's primary cell that some host has answered."""
    runs_dir = pool.runs_dir_of(res)
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


def render(entries: list[dict], long_builds: list[dict] = ()) -> str:
    head = ("# Predictions registered before they are measured. [[prediction]]: each debate's primary answer on a\n"
            "# host not yet measured (`python -m analysis predict`, analysis/publish/debates/predictions.py): the\n"
            "# interval a new host's answer should fall in (95%), from the hosts named, with the between-host spread\n"
            "# borrowed from the catalogue's ablation pairs. [[long_build]]: seed 001's long build on a host, from the\n"
            "# short build's per-unit cost there (`python -m analysis predict-build`, analysis/publish/debates/\n"
            "# long_build.py). Never edited by hand; a new registration is added below the old ones.\n")
    blocks = [_block("prediction", e, KEYS) for e in entries] + \
        [_block("long_build", e, LONG_BUILD_KEYS) for e in long_builds]
    return head + "\n" + "\n".join(blocks)


def write(path: Path, entries: list[dict], long_builds: list[dict] = ()) -> None:
    Path(path).write_text(render(entries, long_builds))


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
    return e["seed"], e["configuration"], e["workload"], tuple(e["from_hosts"])


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
    new = compute(res, per_host, spec, today, head_commit())
    if not new:
        raise HeapcostError("no primary cell has an answer on any host: nothing to predict from")
    path = Path(args.output)
    earlier = load(path)
    new, already = not_registered(new, earlier)
    for e in already:
        print(f"seed {e['seed']} {e['configuration']} on {e['workload']}: registered before from the same hosts "
              f"({e['registered']}); left as it was")
    if new:
        write(path, earlier + new, load_long_builds(path))
    for e in new:
        print(f"seed {e['seed']} {e['configuration']} on {e['workload']}: a new host should read "
              f"{e['centre']} [{e['low']}, {e['high']}] (from {len(e['from_hosts'])} host(s); between-host spread "
              f"{e['tau_percent']}% from {e['spread_cells']} ablation cells)")
    return 0
