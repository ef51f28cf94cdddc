"""The how-to guides and the "coming from" page are code: every Python block runs.

Each ```python block of ``docs/how-to/*.md`` and ``docs/coming-from.md`` runs
as a standalone script in a fresh folder; when a ```text block follows an
"It prints:" line, the output must match it exactly. A block that reads
``REDIS_URL`` or ``DATABASE_URL`` gets a real Redis and a real PostgreSQL
(a fresh schema) started for it. Every API-looking name in backticks must be
importable from ``mainspring`` or one of its public modules.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [*sorted((ROOT / "docs" / "how-to").glob("*.md")), ROOT / "docs" / "coming-from.md"]
PUBLIC_MODULES = (
    "mainspring",
    "mainspring.models",
    "mainspring.stores",
    "mainspring.context",
    "mainspring.server",
    "mainspring.testing",
    "mainspring.engine",
    "mainspring.mcp",
    "mainspring.toolkits",
    "mainspring.pipelines",
    "mainspring.skills",
    "mainspring.devtools",
    "mainspring.models.openai",
    "mainspring.models.retry",
    "mainspring.stores.redis",
    "mainspring.stores.postgres",
)
# Names the pages use that are not imports: header names, other libraries' names.
NOT_IMPORTS = {
    "Authorization",
    "Bearer",
    "Last",  # Last-Event-ID
    "Retry",  # Retry-After
    "DefaultChatTransport",  # the AI SDK
    "RunAgentInput",  # AG-UI
}


def blocks() -> list[tuple[Path, int, str]]:
    found: list[tuple[Path, int, str]] = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for index, code in enumerate(re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)):
            found.append((page, index, code))
    return found


BLOCKS = blocks()


def expected_output(page: Path, code: str) -> str | None:
    """The ```text block right after "It prints:" following ``code``, if there is one."""
    after = page.read_text(encoding="utf-8").split(code, 1)[1]
    found = re.match(r"\s*```\s*It prints:\s*```text\n(.*?)```", after, flags=re.DOTALL)
    return found.group(1) if found else None


def test_every_page_is_there_and_has_examples() -> None:
    names = {page.name for page in PAGES if page.exists()}
    assert names == {
        "approvals-in-a-web-app.md",
        "durable-sessions-one-machine.md",
        "durable-sessions-many-machines.md",
        "serving-an-agent.md",
        "local-model-server.md",
        "testing-your-agent.md",
        "coming-from.md",
    }
    for page in PAGES:
        assert any(p == page for p, _, _ in BLOCKS), f"{page.name} has no Python example"


@pytest.mark.parametrize(
    ("page", "index", "code"),
    BLOCKS,
    ids=[f"{page.stem}-{index}" for page, index, _ in BLOCKS],
)
def test_every_python_block_runs_offline(
    page: Path, index: int, code: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    env = dict(os.environ)
    if "REDIS_URL" in code or "DATABASE_URL" in code:
        env["REDIS_URL"] = request.getfixturevalue("redis_server").url
        env["DATABASE_URL"] = request.getfixturevalue("postgres_schemas").url()  # a fresh schema
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip(), "an example should print something a reader learns from"
    expected = expected_output(page, code)
    if expected is not None:
        assert result.stdout == expected


def mentioned_names(text: str) -> set[str]:
    """CamelCase names and called snake_case names in backticks, outside code blocks."""
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    names: set[str] = set()
    for span in re.findall(r"`([^`]+)`", prose):
        names.update(re.findall(r"(?<![\w.:/\-])([A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*)\b", span))
        names.update(re.findall(r"(?<![\w.])([a-z][a-z0-9]*_[a-z0-9_]+)\(", span))
    return names - {"None", "True", "False"}


def mainspring_text(page: Path) -> str:
    """The page's text, less the other frameworks' names (a table's first column)."""
    text = page.read_text(encoding="utf-8")
    if page.name != "coming-from.md":
        return text
    lines = []
    for line in text.splitlines():
        cells = line.split(" | ")
        lines.append(" | ".join(cells[1:]) if line.startswith("| ") else line)
    return "\n".join(lines)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_every_name_a_page_mentions_is_importable(page: Path) -> None:
    from dataclasses import fields
    from typing import get_args

    from mainspring import Agent, Event
    from mainspring.server import ServerConfig

    wire = {event.__dataclass_fields__["type"].default for event in get_args(Event)}
    documented = {f.name for cls in (Agent, ServerConfig) for f in fields(cls)}
    modules = [importlib.import_module(m) for m in PUBLIC_MODULES]
    missing = sorted(
        name
        for name in mentioned_names(mainspring_text(page)) - wire - documented - NOT_IMPORTS
        if not any(hasattr(module, name) for module in modules)
    )
    assert not missing, f"{page.name} names not importable from {PUBLIC_MODULES}: {missing}"
