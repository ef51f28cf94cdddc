"""`mainspring.engine`'s modules import one another without a circle.

Every import counts: module level, under ``TYPE_CHECKING`` and inside a
function. A circle hidden behind a function-level import still ties the
modules together (neither can be read, moved or tested without the other),
so the graph is built from the source, not from what an import runs.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

import mainspring.engine

PACKAGE = Path(mainspring.engine.__file__).parent


def import_graph(package: Path, name: str) -> dict[str, set[str]]:
    """Each module of ``package`` (dotted ``name``) → the modules of it that it imports."""
    modules = {p.stem for p in package.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in package.glob("*.py"):
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):  # every level, every branch
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module == name:
                targets = [f"{name}.{a.name}" for a in node.names]  # `from pkg import mod`
                targets.append(f"{name}.__init__")
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module]
            for target in targets:
                module = target.removeprefix(f"{name}.") if target.startswith(f"{name}.") else ""
                if module in modules and module != path.stem:
                    found.add(module)
        graph[path.stem] = found
    return graph


def circle_in(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of ``graph`` (its modules, the first repeated last), or ``[]``."""
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return []


def test_the_engine_package_has_no_import_circle() -> None:
    graph = import_graph(PACKAGE, "mainspring.engine")
    assert {"core", "remote", "client", "results"} <= set(graph)  # the graph saw them
    assert circle_in(graph) == []


def test_the_served_routes_know_the_engine_only_as_a_type() -> None:
    graph = import_graph(PACKAGE, "mainspring.engine")
    assert "remote" not in graph["core"] and "core" in graph["remote"]
    tree = ast.parse((PACKAGE / "remote.py").read_text())
    module_level = {
        node.module for node in tree.body if isinstance(node, ast.ImportFrom) and node.module
    }
    assert "mainspring.engine.core" not in module_level


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("if TYPE_CHECKING:\n    from pkg.b import B\n", "from pkg.a import A\n"),
        ("def f():\n    from pkg.b import B\n", "import pkg.a\n"),
        ("from pkg import b\n", "def g():\n    from pkg import a\n"),
    ],
    ids=["type-checking", "function-level", "from-package"],
)
def test_a_hidden_circle_is_still_found(tmp_path: Path, a: str, b: str) -> None:
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "a.py").write_text(f"from __future__ import annotations\n{a}")
    (tmp_path / "b.py").write_text(b)
    circle = circle_in(import_graph(tmp_path, "pkg"))
    assert set(circle) == {"a", "b"}
