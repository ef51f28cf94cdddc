"""Imports point down DESIGN's spine, and the public API is complete."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import mainspring

SRC = Path(mainspring.__file__).parent

# Lower numbers know nothing of higher ones.
RANKS: dict[str, int] = {
    "_frozen": -1,
    "errors": 0,
    "usage": 0,
    "_background": 0,
    "_relay": 1,  # above _wakeup
    "_wakeup": 0,
    "_lazy": 0,
    "_version": 0,
    "thinking": 0,
    "messages": 1,
    "events": 1,
    "codec": 2,
    "tokens": 2,
    "sse": 3,
    "embeddings": 2,
    "memory": 3,
    "models": 4,
    "tools": 5,
    "permissions": 6,
    "guards": 6,
    "hooks": 6,
    "cost": 6,
    "prices": 5,
    "decisions": 2,
    "state": 6,
    "context": 6,
    "agent": 7,
    "skills": 7,
    "skill_runner": 12,
    "_arguments": 2,
    "_recovery": 7,
    "_tasks": 0,
    "_journal": 9,
    "_decide": 9,
    "_results": 7,
    "_dispatch": 8,
    "_steering": 8,
    "_agent_spec": 8,
    "_loop": 9,
    "stores": 8,
    "replay": 8,
    "result": 2,
    "session": 10,
    "subagents": 11,
    "testing": 5,
    "devtools": 11,
    "demo": 11,
    "finance": 11,
    "mcp": 12,
    "server": 13,
    "_direct": 11,
    "pipelines": 12,
    "engine": 12,
    "principals": 1,
    "namespaces": 1,
    "toolkits": 11,
    "_cli_render": 11,
    "_cli_sessions": 12,
    "_cli_chat": 12,
    "_cli_serve": 14,
    "_cli_finance": 12,
    "_cli_report": 12,  # above devtools
    "_cli_pipeline": 13,  # above pipelines
    "_cli_mcp": 14,  # above mcp and demo
    "cli": 15,
    "__init__": 16,
    "__main__": 16,
}


def concept(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py")


def imported_concepts(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            if name == "mainspring":
                found.add("__init__")
            elif name.startswith("mainspring."):
                found.add(name.split(".")[1])
    return found


def test_every_module_has_a_rank() -> None:
    missing = {concept(p) for p in SRC.rglob("*.py")} - set(RANKS)
    assert not missing, f"give these modules a rank in RANKS: {missing}"


def test_imports_only_point_down_the_spine() -> None:
    upward: list[str] = []
    for path in SRC.rglob("*.py"):
        own = concept(path)
        upward.extend(
            f"{path.relative_to(SRC)} imports {other}"
            for other in imported_concepts(path)
            if other != own and RANKS[other] >= RANKS[own]
        )
    assert not upward, upward


def test_all_is_sorted_and_complete() -> None:
    exported = mainspring.__all__
    assert exported == sorted(exported)
    for name in exported:
        assert hasattr(mainspring, name), name
    lazy = set(mainspring._LAZY)  # the lazily loaded names are the public API
    assert lazy | {"__version__"} == set(exported)


def test_bare_import_loads_nothing_heavy_until_a_name_is_used() -> None:
    code = (
        "import sys, mainspring; "
        "print('pydantic' in sys.modules, 'mainspring._loop' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.split() == ["False", "False"]


def test_import_stays_light() -> None:
    code = (
        "import sys, mainspring; from mainspring import *; "
        "heavy = [m for m in ('typer', 'rich', 'jsonschema', 'trio', 'mainspring.cli') "
        "if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "", f"import mainspring pulled in: {out.stdout.strip()}"


def test_the_toolkits_export_what_they_list() -> None:
    import mainspring.toolkits as toolkits

    for name in toolkits.__all__:
        assert hasattr(toolkits, name), name
