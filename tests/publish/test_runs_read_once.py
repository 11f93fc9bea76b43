"""No module of publish reads the runs folder itself: every product takes the dataset that
analysis.contract.dataset loads once per process. Read with ast: a path joined to a run's file name (run.json,
machine.json, a run's table), a listing of a runs folder, or runstore's run selection, outside the loader. (Writing into a run, as the measure notebook's record does, is the harness's business.)"""
import ast
from pathlib import Path

import pytest

from conftest import REPO

PUBLISH = REPO / "analysis" / "publish"
RUN_FILES = {"run.json", "machine.json", "intake.json", "trials.csv", "pairs.csv", "probes.csv", "counts.csv",
             "primitives.csv", "techniques.csv", "store_sequence.csv", "profiles.csv"}
SELECTION = {"runs_of_kind", "pick_run", "read_json"}


def _constants(tree) -> dict[str, str]:
    """Module-level names bound to a string (TABLE = "trials.csv")."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            out.update({t.id: node.value.value for t in node.targets if isinstance(t, ast.Name)})
    return out


def _mentions_runs(node) -> bool:
    return any(isinstance(n, ast.Name) and ("run" in n.id.lower()) or
               isinstance(n, ast.Attribute) and "run" in n.attr.lower() for n in ast.walk(node))


def own_reads(source: str) -> list[str]:
    """Where a module reads a run folder itself: `line: what`."""
    tree = ast.parse(source)
    named = _constants(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            right = node.right
            name = right.value if isinstance(right, ast.Constant) else named.get(getattr(right, "id", None))
            if isinstance(name, str) and name in RUN_FILES:
                found.append(f"{node.lineno}: a path to a run's {name}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("iterdir", "glob", "rglob") and _mentions_runs(node):
            found.append(f"{node.lineno}: a listing of a runs folder ({node.func.attr})")
        elif isinstance(node, ast.ImportFrom) and node.module == "analysis.contract.runstore":
            found += [f"{node.lineno}: runstore's {a.name}" for a in node.names if a.name in SELECTION]
    return sorted(found, key=lambda s: (int(s.split(":")[0]), s))


@pytest.mark.parametrize("path", sorted(PUBLISH.rglob("*.py")), ids=lambda p: str(p.relative_to(PUBLISH)))
def test_no_module_of_publish_reads_the_runs_itself(path):
    assert own_reads(path.read_text()) == []


def test_a_module_reading_a_run_itself_is_found():
    planted = ('import json\nfrom analysis.contract.runstore import runs_of_kind\nTABLE = "pairs.csv"\n'
               'def f(runs_dir, run):\n'
               '    info = json.loads((runs_dir / run / "run.json").read_text())\n'
               '    t = run.path / TABLE\n'
               '    return [d for d in runs_dir.iterdir()], sorted(Path(runs_dir).glob("*/machine.json"))\n')
    assert own_reads(planted) == ["2: runstore's runs_of_kind", "5: a path to a run's run.json",
                                  "6: a path to a run's pairs.csv", "7: a listing of a runs folder (glob)",
                                  "7: a listing of a runs folder (iterdir)"]
    clean = 'def f(ds, run):\n    return ds.table(run, "pairs.csv"), ds.machine(run), sorted(Path("x").glob("*.svg"))\n'
    assert own_reads(clean) == []
