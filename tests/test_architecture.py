"""The layers of analysis/ as the code has them: every import, function-level ones included, read with ast."""
import ast
import re
from functools import cache
from pathlib import Path

import pytest

from conftest import REPO

PACKAGE = REPO / "analysis"
# what each layer may import from the package (besides the base: analysis, errors, paths)
ALLOWED = {
    "contract": {"contract"},
    "stats": {"contract", "stats"},
    "harness": {"contract", "stats", "harness"},
    "publish": {"contract", "stats", "harness", "publish"},
}
BASE = {"analysis", "analysis.errors", "analysis.paths"}
SOFT_CEILING = 800  # lines: past it a module is asked to be split by concept, never by line count


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports_of(path: Path, modules: dict) -> set[str]:
    """The package's modules this file imports, wherever the import statement stands."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from analysis.stats import compare` imports the module analysis.stats.compare
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                     for a in node.names]
        else:
            continue
        found.update(n for n in names if n in modules)
    return found


@cache
def import_graph() -> dict[str, frozenset[str]]:
    """Parsed once a session: every module's parametrized test reads the same graph."""
    modules = package_modules()
    return {name: frozenset(imports_of(path, modules) - {name}) for name, path in modules.items()}


def layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 and parts[1] in ALLOWED else None


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            # a package's __init__ importing nothing of its children is no edge back
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_graph_sees_function_level_imports():
    graph = import_graph()
    # analysis.harness.security.probes imports the catalogue inside a function
    assert "analysis.harness.allocators.catalog" in graph["analysis.harness.security.probes"]
    assert "analysis.stats.compare" in graph["analysis.publish.results.comparisons"]


def test_no_import_circle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_a_planted_circle_is_found():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("module", sorted(import_graph()))
def test_each_layer_imports_only_what_lies_below_it(module):
    own = layer(module)
    if own is None:
        return  # the top: cli, notebook (they wire commands to every layer)
    bad = sorted(m for m in import_graph()[module]
                 if m not in BASE and layer(m) not in ALLOWED[own] and m != f"analysis.{own}")
    assert not bad, f"{module} ({own}) imports {', '.join(bad)}"


def test_the_statistics_never_reach_the_harness():
    graph = import_graph()
    stats = [m for m in graph if layer(m) == "stats"]
    assert stats
    for m in stats:
        assert not any(layer(x) in ("harness", "publish") for x in graph[m]), m


# the harness's rooms in their declared order: what each may import of the others (its own room always)
HARNESS_ROOMS = {
    "process": set(),          # the base: running one program on a described, quiet machine; randomized blocks
    "nbstrip": set(),          # the notebook filter (tooling), kept at its path for clones' git config
    "allocators": {"process"},
    "workloads": {"process", "allocators"},
    "mechanisms": {"process", "allocators", "workloads"},
    "security": {"process", "allocators", "workloads", "mechanisms"},
    "timing": {"process", "allocators", "workloads", "mechanisms"},
    "bench": {"process", "allocators", "workloads", "mechanisms", "timing"},
    "fleet": {"process", "allocators", "workloads", "mechanisms", "timing"},
}


def harness_room(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["analysis", "harness"] else None


def against_room_order(graph: dict) -> list[str]:
    """Every import of one harness room from another that the declared order does not allow."""
    return sorted(f"{m} -> {d}" for m, deps in graph.items() for d in deps
                  if harness_room(m) and harness_room(d) and harness_room(d) != harness_room(m)
                  and harness_room(d) not in HARNESS_ROOMS.get(harness_room(m), set()))


def test_every_harness_module_sits_in_a_declared_room():
    flat = sorted(m for m in import_graph()
                  if m.startswith("analysis.harness.") and harness_room(m) not in HARNESS_ROOMS)
    assert not flat, f"modules outside the harness's rooms: {flat}"
    rooms = {p.name for p in (PACKAGE / "harness").iterdir() if p.is_dir() and not p.name.startswith("__")}
    assert rooms == set(HARNESS_ROOMS)
    assert not [p.name for p in (PACKAGE / "harness").iterdir() if p.is_file() and p.name != "__init__.py"]


def test_the_harness_rooms_import_only_in_their_declared_order():
    bad = against_room_order(import_graph())
    assert not bad, "imports against the rooms' order: " + "; ".join(bad)
    rooms = {harness_room(m) for m in import_graph() if harness_room(m)}
    room_graph = {r: {harness_room(d) for m in import_graph() if harness_room(m) == r for d in import_graph()[m]
                      if harness_room(d) and harness_room(d) != r} for r in rooms}
    assert find_cycle(room_graph) is None


def test_an_import_against_the_room_order_is_found():
    planted = {"analysis.harness.process.trial": {"analysis.harness.timing.measure"},
               "analysis.harness.timing.measure": {"analysis.harness.process.trial"}}
    assert against_room_order(planted) == ["analysis.harness.process.trial -> analysis.harness.timing.measure"]


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(REPO)))
def test_each_module_opens_with_the_one_concept_it_holds(path):
    """Size follows concept: a module's opening docstring says what it holds, and a module past the soft
    ceiling is a sign it holds more than one concept (split it by concept, never by line count)."""
    doc = ast.get_docstring(ast.parse(path.read_text()))
    assert doc and len(doc.split()) >= 4, f"{path.relative_to(REPO)} does not open by saying what it holds"
    lines = len(path.read_text().splitlines())
    assert lines <= SOFT_CEILING, (f"{path.relative_to(REPO)} holds {lines} lines: which concepts are in it? "
                                   "split it by concept")


def test_test_modules_do_not_import_each_other():
    for path in (REPO / "tests").rglob("test_*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith(("test_", "tests.")), f"{path.name} imports {node.module}"
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith(("test_", "tests.")) for a in node.names), path.name


# ------------------------------------------------------------------------------- the design page
DESIGN = REPO / "docs" / "design.md"
NAMED_FILE = re.compile(r"`([\w./-]+\.(?:py|c|h|toml|ipynb))`")


def named_files(text: str) -> set[str]:
    """Every source file a page names in backticks (a path, or a bare file name)."""
    return set(NAMED_FILE.findall(text))


def exists_somewhere(name: str) -> bool:
    """A path names a file from the repository root, or from a folder of analysis/ (`process/launcher.c` beside
    `harness/...`); a bare file name names a file anywhere in analysis/, tests/, workloads/, probes/ or
    notebooks/."""
    if "/" in name:
        return (REPO / name).is_file() or any(p.as_posix().endswith("/" + name) for p in PACKAGE.rglob(Path(name).name))
    return any(any(base.rglob(name)) for base in (PACKAGE, REPO / "tests", REPO / "workloads", REPO / "probes",
                                                  REPO / "notebooks")) or (REPO / name).is_file()


PAGES = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md"), REPO / "bench" / "README.md"])


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_each_page_names_only_files_that_exist(page):
    missing = sorted(n for n in named_files(page.read_text()) if not exists_somewhere(n))
    assert not missing, f"{page.relative_to(REPO)} names files that do not exist: {missing}"


def test_the_design_check_sees_a_file_that_is_gone():
    text = "the table (`publish/results/comparisons.py`, `publish/merge.py`, `blocks.py`, `nowhere_at_all.py`)"
    assert named_files(text) == {"publish/results/comparisons.py", "publish/merge.py", "blocks.py", "nowhere_at_all.py"}
    assert [n for n in sorted(named_files(text)) if not exists_somewhere(n)] == ["nowhere_at_all.py", "publish/merge.py"]


LAYERS_TESTED = ("contract", "stats", "harness", "publish")


def test_the_tests_are_laid_out_like_the_code():
    """tests/<layer>/... mirrors analysis/<layer>/... (each test folder is a folder of the package), plus
    tests/integration/ for what crosses the layers; only the package-wide tests sit at the top."""
    for path in (REPO / "tests").rglob("test_*.py"):
        folder = path.parent.relative_to(REPO / "tests")
        if folder.parts and folder.parts[0] == "integration":
            continue
        if not folder.parts:
            assert path.name in {"test_architecture.py", "test_cli.py"}, f"{path.name}: put it beside its layer"
            continue
        assert folder.parts[0] in LAYERS_TESTED and (PACKAGE / folder).is_dir(), \
            f"tests/{folder}/ names no folder of analysis/"
