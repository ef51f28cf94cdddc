"""Hostile regular expressions in tool schemas: ReDoS at argument checking, patterns RE2 refuses.

A real MCP server (the official SDK) lists tools whose ``inputSchema``
holds ``(a+)+$`` in ``pattern``, in ``patternProperties`` (with
``additionalProperties`` and ``unevaluatedProperties`` next to it). On
Python's ``re`` a call's argument check over 40 ``a`` and a ``!`` would run
for hours on the event loop; here the loop keeps ticking and every call gets
a result. A pattern RE2 cannot run (a backreference) or one too long makes
just that tool skipped, with a reason naming the server and tool.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from mainspring import (
    Agent,
    ErrorEvent,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    ToolResult,
    TurnComplete,
)
from mainspring.errors import ToolInputError
from mainspring.mcp import McpClientManager
from mainspring.tools import _schema_keywords
from tests.attacks._mcp_fixtures import hostile, tool
from tests.helpers import send

pytestmark = pytest.mark.anyio

EVIL = "(a+)+$"
HOSTILE_TEXT = "a" * 40 + "!"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def evil_tools(suffix: str = "1") -> list[dict[str, Any]]:
    string = {"type": "string", "pattern": EVIL}
    return [
        tool("pattern", {"type": "object", "title": suffix, "properties": {"s": string}}),
        tool(
            "keyed",
            {
                "type": "object",
                "title": suffix,
                "patternProperties": {EVIL: {"type": "integer"}},
                "additionalProperties": False,
            },
        ),
        tool(
            "unevaluated",
            {
                "type": "object",
                "title": suffix,
                "allOf": [{"patternProperties": {EVIL: {"type": "integer"}}}],
                "unevaluatedProperties": False,
            },
        ),
    ]


async def test_a_catastrophic_schema_pattern_never_stops_the_loop(tmp_path: Path) -> None:
    config = hostile(tmp_path, "h", evil_tools(), permission="auto")
    async with McpClientManager([config]) as manager:
        assert {t.name for t in manager.tools()} == {
            "mcp__h__pattern",
            "mcp__h__keyed",
            "mcp__h__unevaluated",
        }
        calls = [
            ScriptedCall("mcp__h__pattern", {"s": HOSTILE_TEXT}),
            ScriptedCall("mcp__h__keyed", {HOSTILE_TEXT: 1}),
            ScriptedCall("mcp__h__unevaluated", {HOSTILE_TEXT: 1}),
            ScriptedCall("mcp__h__pattern", {"s": "aaa"}),
            ScriptedCall("mcp__h__keyed", {"baa": 1}),
        ]
        model = ScriptedModel([ScriptedResponse(tool_calls=calls), "done"])
        session = Session(Agent(model=model, tools=manager.tools()))
        ticks = 0
        finished = anyio.Event()

        async def heartbeat() -> None:
            nonlocal ticks
            while not finished.is_set():
                ticks += 1
                await anyio.lowlevel.checkpoint()

        async with anyio.create_task_group() as tg:
            tg.start_soon(heartbeat)
            events = await send(session, "go")
            finished.set()
    assert not [e for e in events if isinstance(e, ErrorEvent)], "the turn must not fail"
    assert isinstance(events[-1], TurnComplete)
    got = [e for e in events if isinstance(e, ToolResult)]
    assert [r.is_error for r in got] == [True, True, True, False, False]
    assert f"s: {HOSTILE_TEXT!r} does not match {EVIL!r}" in got[0].content
    assert f"{HOSTILE_TEXT!r} does not match any of the regexes: {EVIL!r}" in got[1].content
    assert "Unevaluated properties are not allowed" in got[2].content
    assert got[3].content == 'called pattern {"s": "aaa"}'
    assert got[4].content == 'called keyed {"baa": 1}'
    assert session.messages[-1].text == "done"
    assert ticks > len(calls)


async def test_patterns_re2_cannot_run_skip_just_that_tool(tmp_path: Path) -> None:
    tools = [
        tool("backref", {"type": "object", "properties": {"s": {"pattern": r"(a)\1"}}}),
        tool("lookahead", {"type": "object", "patternProperties": {"(?=x)y": {}}}),
        tool("long", {"type": "object", "properties": {"s": {"pattern": "a" * 1001}}}),
        tool("fine", {"type": "object", "properties": {"s": {"pattern": "^[a-z]+$"}}}),
    ]
    config = hostile(tmp_path, "h", tools, permission="auto")
    async with McpClientManager([config]) as manager:
        assert {t.name for t in manager.tools()} == {"mcp__h__fine"}
        why = manager.skipped_tools
        for name in ("backref", "lookahead", "long"):
            assert why[f"mcp__h__{name}"].startswith(
                f"MCP server 'h' tool {name!r} has an input schema that was refused: pattern "
            )
        assert "cannot be matched in linear time: invalid escape sequence" in why["mcp__h__backref"]
        assert "cannot be matched in linear time" in why["mcp__h__lookahead"]
        assert "is longer than 1000 characters (1001)" in why["mcp__h__long"]
        ok = await manager.call_tool("h", "fine", {"s": "abc"})
        assert ok.content == 'called fine {"s": "abc"}'


async def test_without_re2_the_exponential_shapes_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_schema_keywords, "re2_available", lambda: False)
    tools = [
        *evil_tools(suffix="2"),  # (schemas of their own: one that compiled is not checked again)
        tool("fine", {"type": "object", "properties": {"s": {"pattern": "^[a-z]{2,}$"}}}),
    ]
    config = hostile(tmp_path, "h", tools, permission="auto")
    async with McpClientManager([config]) as manager:
        assert {t.name for t in manager.tools()} == {"mcp__h__fine"}
        for name in ("pattern", "keyed", "unevaluated"):
            why = manager.skipped_tools[f"mcp__h__{name}"]
            assert f"pattern {EVIL!r} could take exponential time on Python's re" in why
            assert 'pip install "mainspring[re2]"' in why
        (fine,) = manager.tools()
        with pytest.raises(ToolInputError, match=r"s: 'A' does not match '\^\[a-z\]\{2,\}\$'"):
            fine.parse({"s": "A"})
        assert fine.parse({"s": "ab"})[0] == {"s": "ab"}
