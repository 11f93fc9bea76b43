import io
import os
import shutil
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Tests run campaigns on a machine that is busy by design (the tests themselves): the quiet-machine check
# (analysis/harness/process/quiet.py) is forced off here; tests of the check itself pass force explicitly.
os.environ.setdefault("HEAPCOST_FORCE", "1")
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def runs_dir(tmp_path, monkeypatch):
    """A private data/runs for one test: the published dataset is never touched."""
    d = tmp_path / "runs"
    d.mkdir()
    monkeypatch.setenv("HEAPCOST_RUNS_DIR", str(d))
    return d


def cli(*args, env_extra=None, timeout=600):
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", "analysis", *args], cwd=REPO, capture_output=True, text=True,
                          env=env, timeout=timeout)


def cli_here(*args):
    """What `cli` returns (exit code, stdout, stderr) from the CLI's main() in this process: for commands
    whose start-up dominates a test (validate: frictionless compiles its format grammars in every new
    interpreter, about 3 s), so the suite pays it once. Other tests run the real entry point through `cli`."""
    from analysis.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess(["heapcost", *args], code, out.getvalue(), err.getvalue())


def libc_path() -> str:
    """This process's libc.so.6: brought as a second allocator, the A/A copy of the baseline."""
    with open("/proc/self/maps") as fh:
        for line in fh:
            if line.rstrip().endswith("libc.so.6"):
                return line.split()[-1]
    pytest.skip("libc.so.6 not found in this process's maps")


def copy_checkout(target):
    """The files git knows of (as they are in the work tree), the way a clone has them."""
    names = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True).stdout
    for name in filter(None, names.decode().split("\0")):
        src = REPO / name
        if src.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target / name)
    return target


# Two small published runs (a probe run, a callgrind run): a clone reduced to them (keep_only_runs) still has
# published runs for a new one to join, and renders its paper without computing every published result.
SMALL_PUBLISHED_RUNS = ("20261130T021342Z-probe-security", "20261130T125006Z-callgrind-full")


def keep_only_runs(clone, kept) -> None:
    """A clone's dataset reduced to the runs `kept`: the others' folders and their entries in
    datapackage.json removed, as if they had never been published."""
    import json

    runs = clone / "data" / "runs"
    assert all((runs / name).is_dir() for name in kept), "a kept run is no longer published: name another"
    for run in runs.iterdir():
        if run.name not in kept:
            shutil.rmtree(run)
    package_path = clone / "data" / "datapackage.json"
    package = json.loads(package_path.read_text())
    package["resources"] = [r for r in package["resources"]
                            if not r["path"].startswith("runs/") or r["path"].split("/")[1] in kept]
    package_path.write_text(json.dumps(package, indent=2) + "\n")


def build_fixture_libs(out: Path, source: str, variants) -> dict:
    """Shared libraries built from tests/fixtures/<source>, one per (name, extra gcc flags)."""
    libs = {}
    for name, flags in variants:
        libs[name] = out / f"lib{name}.so"
        subprocess.run(["gcc", "-shared", "-fPIC", "-O1", *flags, str(REPO / "tests" / "fixtures" / source),
                        "-o", str(libs[name])], check=True)
    return libs


def pytest_collection_modifyitems(session, config, items):
    """The modules with the most slow tests first, each module's tests still together and in their order: the
    workers (pytest-xdist) take the long tests while the short ones remain to fill the gaps at the end, instead of
    one worker finishing a long test alone after the other has run out of work."""
    modules: dict = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    slow = {m: sum(1 for i in its if i.get_closest_marker("slow")) for m, its in modules.items()}
    order = sorted(modules, key=lambda m: -slow[m])  # stable: equal modules keep their collection order
    items[:] = [item for m in order for item in modules[m]]


def published_machine(index: int) -> dict:
    """The machine.json of the index-th published speed run of a processor kind (sorted by label): a real host for
    canned runs."""
    import json

    from analysis.paths import DATA_DIR
    from analysis.publish.debates import pool

    runs = sorted(p.parent for p in (DATA_DIR / "runs").glob("*time*/machine.json"))
    labels = pool._processors(DATA_DIR / "runs")
    first = {}
    for run in runs:
        first.setdefault(labels[run.name], run)
    kinds = sorted(first)
    return json.loads((first[kinds[index]] / "machine.json").read_text())
