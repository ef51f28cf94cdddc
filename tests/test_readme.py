"""The README is code: every Python block runs, and every name it mentions imports."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
TEXT = README.read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, flags=re.DOTALL)
# The public modules the README says names may come from (besides `mainspring`).
PUBLIC_MODULES = (
    "mainspring",
    "mainspring.models",
    "mainspring.stores",
    "mainspring.context",
    "mainspring.pipelines",
    "mainspring.mcp",
    "mainspring.skills",
    "mainspring.skill_runner",
    "mainspring.devtools",
    "mainspring.toolkits",
    "mainspring.engine",
    "mainspring.server",
    "mainspring.embeddings",
    "mainspring.memory",
    "mainspring.evals",
    # Modules behind extras, named in the README where it mentions their names.
    "mainspring.models.openai.embeddings",
    "mainspring.models.gemini_embeddings",
    "mainspring.stores.postgres_memory",
    "mainspring.stores.artifacts",
    "mainspring.toolkits.artifacts",
    "mainspring.toolkits.conversations",
    "mainspring.audit",
    "mainspring.stores.redis",
    "mainspring.stores.postgres_audit",
)


def run_block(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        timeout=90,
        cwd=cwd,
    )


def expected_output(code: str) -> str | None:
    """The ```text block right after "It prints:" following ``code``, if there is one."""
    after = TEXT.split(code, 1)[1]
    found = re.match(r"\s*```\s*It prints:\s*```text\n(.*?)```", after, flags=re.DOTALL)
    return found.group(1) if found else None


def test_the_readme_has_its_example() -> None:
    assert len(BLOCKS) >= 1, "the README lost its example (the rest are in docs/)"


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_every_python_block_runs_offline(index: int, tmp_path: Path) -> None:
    code = BLOCKS[index]
    result = run_block(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip(), "an example should print something a reader learns from"
    expected = expected_output(code)
    if expected is not None:
        assert result.stdout == expected


def test_the_offline_example_shows_the_approval_and_the_edit() -> None:
    expected = expected_output(BLOCKS[0])
    assert expected is not None, "the first example documents what it prints"
    assert "needs approval: pay" in expected and "sent $15.00 to alice" in expected


def mentioned_names(text: str = TEXT) -> set[str]:
    """CamelCase names and called snake_case names in backticks, outside code blocks."""
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    names: set[str] = set()
    for span in re.findall(r"`([^`]+)`", prose):
        names.update(re.findall(r"(?<![\w.:/\-])([A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*)\b", span))
        names.update(re.findall(r"(?<![\w.])([a-z][a-z0-9]*_[a-z0-9_]+)\(", span))
    return names - {"None", "True", "False"}


def not_importable_by_design() -> set[str]:
    """Names the README mentions that are not imports: wire names, fields, placeholders."""
    from dataclasses import fields
    from typing import get_args

    from mainspring import Agent, Event, PermissionRules

    wire = {event.__dataclass_fields__["type"].default for event in get_args(Event)}
    documented_fields = {f.name for cls in (Agent, PermissionRules) for f in fields(cls)}
    http = {"Authorization", "Bearer", "Last", "Retry"}  # header names (Last-Event-ID…)
    return wire | documented_fields | http | {"MyProcessor"}  # MyProcessor: a placeholder


def test_the_name_finder_sees_what_the_prose_names() -> None:
    prose = "Use `Session`, `SQLiteMemoryStore(path)` and `report_data()`; not `a.b` or `x`.\n"
    code = "```python\nMcpClientManager()\n```\n"
    assert mentioned_names(prose + code) == {"Session", "SQLiteMemoryStore", "report_data"}
    assert {"Session", "Approve", "PendingAction"} <= mentioned_names()


def test_every_name_the_readme_mentions_is_importable_where_it_says() -> None:
    modules = [importlib.import_module(m) for m in PUBLIC_MODULES]
    missing = sorted(
        name
        for name in mentioned_names() - not_importable_by_design()
        if not any(hasattr(module, name) for module in modules)
    )
    assert not missing, f"README names not importable from {PUBLIC_MODULES}: {missing}"


def test_quick_start_has_exactly_two_commands() -> None:
    quick = TEXT.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```bash\n(.*?)```", quick, flags=re.DOTALL)
    assert len(commands) == 2
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1].strip() in ci, ".ci/run must run the README's test command"
    assert commands[0].strip() in ci, ".ci/run must run the README's demo command"
