"""One name per host everywhere in the paper, on the published dataset: the first page's rows, the debates'
forest plots and the host panel never give one label to two different processor kinds or two different
machines, and a machine's name means the same machine wherever it is used. Nothing is rendered: each
surface's labels are made by the very functions that write them, from every published run's machine.json."""
import re

import pandas as pd
import pytest

from analysis.contract.host import PROCESSOR_FIELDS, Machine, host_identity, machine_groups
from analysis.contract.runstore import read_json
from analysis.paths import DATA_DIR
from analysis.publish.debates import forest
from analysis.publish.render import front_page
from analysis.publish.results import hosts

RUNS = DATA_DIR / "runs"
NAME = re.compile(r"\b[MK]-[0-9a-f]{6}\b")


@pytest.fixture(scope="module")
def published() -> dict[str, dict]:
    """{run: machine.json} of every published run that has one."""
    found = {d.name: read_json(d / "machine.json") for d in sorted(RUNS.iterdir()) if (d / "machine.json").is_file()} \
        if RUNS.is_dir() else {}
    if not found:
        pytest.skip("the published dataset has no run with a machine.json")
    return found


@pytest.fixture(scope="module")
def machines(published) -> dict[str, Machine]:
    """{run: its Machine}, as the debates' run table names them (analysis.publish.debates.pool)."""
    return machine_groups(published)


@pytest.fixture(scope="module")
def runs(machines) -> pd.DataFrame:
    """A debates' run table of every published run: its processor kind and machine name, one R-label for all
    (so that a run's line differs from another's by the host alone)."""
    return pd.DataFrame([{"run_id": run, "processor": m.kind, "machine": m.name, "layout": 1, "superseded": False}
                         for run, m in machines.items()])


@pytest.fixture(scope="module")
def kinds(runs) -> pd.DataFrame:
    """A results_debate_hosts.csv of one cell answered on every published kind, its machines "; "-joined."""
    rows = [{"seed": "000", "configuration": "a / b", "workload": "w", "processor": kind,
             "machines": "; ".join(sorted(set(g["machine"]))), "display": f"{i}.000 [{i}.000, {i}.000]",
             "decision_words": "d"} for i, (kind, g) in enumerate(runs.groupby("processor", sort=True))]
    return pd.DataFrame(rows)


def one_each(pairs) -> dict:
    """{label: the one thing it names} from (label, thing) pairs; fails on a label that names two things."""
    named: dict = {}
    for label, thing in pairs:
        named.setdefault(label, set()).add(thing)
    shared = {label: things for label, things in named.items() if len(things) > 1}
    assert not shared, f"one label for several: {shared}"
    return {label: things.pop() for label, things in named.items()}


def agree(identities) -> bool:
    """Whether processor identities agree on every field both record (one kind, some recorded in part)."""
    return all(a.get(f) is None or b.get(f) is None or a.get(f) == b.get(f)
               for a in identities for b in identities for f in PROCESSOR_FIELDS)


def test_a_kind_label_never_covers_two_processors(published, machines):
    by_label: dict = {}
    for run, m in machines.items():
        by_label.setdefault(m.kind, []).append(host_identity(published[run]))
    for label, identities in by_label.items():
        assert agree(identities), f"{label} names processors that disagree on what they recorded"


def test_a_machine_name_never_covers_two_machines(machines):
    named = one_each((m.name, (m.id, m.kind, m.identified)) for m in machines.values())
    assert len(named) == len({m.id for m in machines.values()})


def test_the_first_page_names_each_kind_and_machine_once(machines, kinds):
    debates = pd.DataFrame([{"seed": "000", "topic": "t", "cell": "primary", "configuration": "a / b",
                             "workload": "w", "margin": "1%", "verdict": "v", "not_measured": ""}])
    row = front_page.front_rows(debates, kinds).iloc[0]
    shown = [entry.partition(": ") for entry in row["per_host"].split("; ")]
    truth = {f"{d} (d)": kind for d, kind in zip(kinds["display"], kinds["processor"])}
    assert len(one_each((label, truth[answer]) for label, _, answer in shown)) == len(kinds)
    by_name = {m.name: m for m in machines.values()}
    for part in row["where"].split("; "):
        kind, _, names = part.rpartition(": ")
        assert all(by_name[n].kind == kind for n in names.split(", ")), part
    assert front_page.front_machines(debates, kinds) == row["where"]


def test_the_forest_plots_name_each_run_by_its_machine(machines, runs, kinds):
    lines = one_each((forest.run_line(r, {r["run_id"]: "R1"}), machines[r["run_id"]].id) for _, r in runs.iterrows())
    assert len(lines) == len({m.id for m in machines.values()})
    assert all(NAME.search(line) for line in lines)
    kind_lines = one_each((forest.kind_line(h), h["processor"]) for _, h in kinds.iterrows())
    assert len(kind_lines) == len(kinds)


@pytest.mark.parametrize("which", ["every run", "speed runs"])
def test_no_two_host_groups_of_the_panel_share_a_label(published, machines, which):
    chosen = [r for r in published if which == "every run" or "-time-" in r]
    if not chosen:
        pytest.skip("no published speed run")
    host_of, labels, _ = hosts.run_groups(RUNS, chosen)
    assert len(set(labels.values())) == len(labels)
    for group, label in labels.items():
        members = [machines[r] for r in chosen if host_of[r] == group]
        assert set(NAME.findall(label)) == {m.name for m in members}, label
        assert all(label.startswith(m.kind) or f"; {m.kind}, " in label for m in members), label
