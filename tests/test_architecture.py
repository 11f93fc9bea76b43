"""The layers of analysis/ as the code has them: every import, function-level ones included, read with ast."""
import ast
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
MAX_LINES = 500


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
    # analysis.harness.probes imports the catalogue inside a function
    assert "analysis.harness.allocators.catalog" in graph["analysis.harness.probes"]
    assert "analysis.stats.compare" in graph["analysis.publish.results"]


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


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(REPO)))
def test_no_module_over_500_lines(path):
    assert len(path.read_text().splitlines()) <= MAX_LINES


def test_test_modules_do_not_import_each_other():
    for path in (REPO / "tests").glob("test_*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("test_"), f"{path.name} imports {node.module}"
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("test_") for a in node.names), path.name
