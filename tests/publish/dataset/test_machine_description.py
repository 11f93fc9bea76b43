"""The machine of each run in the dataset's description: datapackage.json names it on the run's machine.json
with its processor kind, the codebook lists every kind's machines with their runs, both computed from the runs
(analysis/contract/host.py); a description gaining these names is a regeneration, never a loss."""
import json
import shutil

from analysis.contract.host import boot_machine_id, machine_groups
from analysis.paths import DATA_DIR, machine_paths
from analysis.publish.dataset import archive, codebook, datapackage
from analysis.publish.dataset.validate import validate
from conftest import REPO

PUBLISHED = REPO / "data" / "runs"
ONE_HOST = ("20261130T125006Z-callgrind-full", "20261130T135001Z-time-quick")  # small runs, one K- machine
BOOTED = "20261205T090000Z-time-quick"  # a copy of one of them that recorded its boot


def small_dataset(root):
    """ONE_HOST as published, and BOOTED: a copy of the time run, renamed, whose machine.json has a machine_id."""
    data = root / "data"
    for run_id in ONE_HOST:
        shutil.copytree(PUBLISHED / run_id, data / "runs" / run_id)
    booted = shutil.copytree(PUBLISHED / ONE_HOST[1], data / "runs" / BOOTED)
    info = json.loads((booted / "run.json").read_text())
    (booted / "run.json").write_text(json.dumps({**info, "run_id": BOOTED}, indent=2) + "\n")
    machine = json.loads((booted / "machine.json").read_text())
    (booted / "machine.json").write_text(json.dumps({**machine, "machine_id": boot_machine_id("boot-1")}) + "\n")
    return data


def machines_of(data):
    return machine_groups({p.parent.name: json.loads(p.read_text()) for p in (data / "runs").glob("*/machine.json")})


def machine_resources(package):
    return {r["path"]: r for r in package["resources"] if r["path"].endswith("/machine.json")}


# ------------------------------------------------------------------------------------- datapackage.json
def test_each_machine_json_names_its_machine_and_processor(tmp_path):
    data = small_dataset(tmp_path)
    package = datapackage.build_datapackage(data)
    named = {path: (r["machine"], r["processor"]) for path, r in machine_resources(package).items()}
    assert named == {f"runs/{run}/machine.json": (m.name, m.kind) for run, m in machines_of(data).items()}
    assert named[f"runs/{BOOTED}/machine.json"][0] == "M-" + boot_machine_id("boot-1")[:6]
    assert len({name for name, _ in named.values()}) == 2  # the two published runs share their K- machine
    others = [r for r in package["resources"] if not r["path"].endswith("/machine.json")]
    assert others and not any("machine" in r or "processor" in r for r in others)


def test_a_description_that_gains_the_machine_names_is_rewritten_and_validates(tmp_path):
    """A datapackage.json written before machines were named (the files, their sha256 unchanged) is brought
    up to date as a regeneration: nothing refuses it, and frictionless takes the custom properties."""
    data = small_dataset(tmp_path)
    archive.refresh_description(data)
    package = json.loads((data / "datapackage.json").read_text())
    for resource in package["resources"]:
        for added in ("machine", "processor"):
            resource.pop(added, None)
    (data / "datapackage.json").write_text(json.dumps(package, indent=2) + "\n")
    assert archive.refresh_description(data) == [str(data / "datapackage.json")]
    rewritten = json.loads((data / "datapackage.json").read_text())
    assert all("machine" in r and "processor" in r for r in machine_resources(rewritten).values())
    assert validate(data) == []


def test_the_published_dataset_described_anew_only_gains_the_machine_names():
    """datapackage.json as data/ would be described now, built in memory: every published machine.json
    named, and against the published description nothing lost and no file's sha256 changed."""
    current = datapackage.current_package(DATA_DIR)
    new = datapackage.build_datapackage(DATA_DIR)
    datapackage.check_no_loss(DATA_DIR, current, new)
    datapackage.check_unchanged(current, new)
    named = machine_resources(new)
    assert set(named) == {f"runs/{p.parent.name}/machine.json" for p in PUBLISHED.glob("*/machine.json")}
    assert all(r["machine"][:2] in ("M-", "K-") and r["processor"] for r in named.values())


# ------------------------------------------------------------------------------------------- the codebook
def test_the_codebook_lists_each_kind_with_its_machines_and_their_runs(tmp_path):
    data = small_dataset(tmp_path)
    text = codebook.codebook(data)
    section = text[text.index("## Machines"):text.index("## Files of every run")]
    machines = machines_of(data)
    published, booted = machines[ONE_HOST[0]], machines[BOOTED]
    assert section.count("\n### ") == 1 and f"### {published.kind}\n" in section  # one kind, its runs joined
    assert "2 machine(s), 3 run(s)." in section
    assert (f"| `{published.name}` | no: kind and kernel build | {published.kernel} | 2 | 2026-11-30 | "
            "2026-11-30 |") in section
    assert f"| `{booted.name}` | yes, one boot | {booted.kernel} | 1 | 2026-12-05 | 2026-12-05 |" in section
    assert section.index(published.name) < section.index(booted.name)  # in the order of their first run
    assert codebook.codebook(data) == text and not machine_paths(section)


def test_a_dataset_without_machines_says_so():
    assert codebook.machine_section(REPO / "no-such-dataset")[-1] == "(no run records its machine)"


def test_a_runs_date_is_read_from_its_id():
    assert codebook.run_date("20261130T125006Z-callgrind-full") == "2026-11-30"
    assert codebook.run_date("r") == ""
