"""Hostile tool schemas: remote and dangling ``$ref``s, self-reference, another dialect.

A real MCP server (the official SDK) lists the tools; a real HTTP server on
loopback counts every request. Nothing may reach it: remote references are
refused when the tools are listed, with a diagnostic naming the server and
the tool, and a call never ends the turn with ``internal_error``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
from mainspring._lowlevel.json_value import JsonValue
from mainspring.errors import ConfigError
from mainspring.mcp import McpClientManager
from mainspring.tools import Tool, client_tool
from mainspring.tools.define import ToolOutput
from tests.attacks._mcp_fixtures import counting_server, hostile, tool
from tests.helpers import send

pytestmark = pytest.mark.anyio

DRAFT7 = "http://json-schema.org/draft-07/schema#"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def results(events: list[Any]) -> dict[str, ToolResult]:
    return {e.name: e for e in events if isinstance(e, ToolResult)}


def finished(events: list[Any]) -> None:
    assert not [e for e in events if isinstance(e, ErrorEvent)], "the turn must not fail"
    assert isinstance(events[-1], TurnComplete)


async def test_remote_refs_are_refused_at_listing_and_never_fetched(tmp_path: Path) -> None:
    with counting_server() as server:
        url = server.url
        local = {"$defs": {"n": {"type": "integer"}}, "properties": {"n": {"$ref": "#/$defs/n"}}}
        tools = [
            tool("absolute", {"type": "object", "properties": {"x": {"$ref": f"{url}/a.json"}}}),
            tool(
                "relative",  # resolves against the schema's own $id: a loopback URL
                {
                    "type": "object",
                    "$id": f"{url}/root.json",
                    "properties": {"x": {"$ref": "other.json"}},
                },
            ),
            tool(  # a pointer into a keyword no validator walks, then out
                "hidden",
                {"type": "object", "$ref": "#/stash", "stash": {"$ref": f"{url}/h.json"}},
            ),
            tool(
                "output",
                {"type": "object"},
                outputSchema={"type": "object", "properties": {"y": {"$ref": f"{url}/o.json"}}},
            ),
            tool("dangling", {"type": "object", "properties": {"x": {"$ref": "#/$defs/nope"}}}),
            tool("endless", {"type": "object", "$ref": "#"}),
            tool("fine", {"type": "object", **local}),
        ]
        config = hostile(tmp_path, "h", tools, permission="auto")
        async with McpClientManager([config]) as manager:
            offered = {t.name for t in manager.tools()}
            assert offered == {"mcp__h__fine"}
            why = manager.skipped_tools
            for name, ref in [
                ("absolute", f"{url}/a.json"),
                ("relative", "other.json"),
                ("hidden", f"{url}/h.json"),
                ("output", f"{url}/o.json"),
                ("dangling", "#/$defs/nope"),
            ]:
                assert f"MCP server 'h' tool {name!r}" in why[f"mcp__h__{name}"]
                assert repr(ref) in why[f"mcp__h__{name}"]
                assert "nothing is fetched" in why[f"mcp__h__{name}"]
            assert "output schema" in why["mcp__h__output"]
            assert "refers to itself" in why["mcp__h__endless"]
            assert server.paths == [], "listing fetched a remote reference"

            calls = [
                ScriptedCall("mcp__h__absolute", {"x": 1}),
                ScriptedCall("mcp__h__dangling", {"x": 1}),
                ScriptedCall("mcp__h__fine", {"n": "three"}),
            ]
            model = ScriptedModel(
                [
                    ScriptedResponse(tool_calls=calls),
                    ScriptedResponse(tool_calls=[ScriptedCall("mcp__h__fine", {"n": 3})]),
                    "done",
                ]
            )
            events = await send(Session(Agent(model=model, tools=manager.tools())), "go")
        finished(events)
        got = [e for e in events if isinstance(e, ToolResult)]
        assert [r.is_error for r in got] == [True, True, True, False]
        assert "unknown tool 'mcp__h__absolute'" in got[0].content
        assert "n: 'three' is not of type 'integer'" in got[2].content
        assert got[3].content == 'called fine {"n": 3}'
        assert server.paths == [], "a call fetched a remote reference"


async def test_a_raw_schema_never_fetches_and_a_bad_one_is_an_error_result() -> None:
    """Tools built from a raw schema directly (a remote engine's, say) are checked at call time."""
    with counting_server() as server:

        async def run(**kwargs: Any) -> ToolOutput:
            return ToolOutput(content="ran")

        remote: dict[str, JsonValue] = {
            "type": "object",
            "properties": {"x": {"$ref": f"{server.url}/x.json"}},
        }
        with pytest.raises(ConfigError, match="does not resolve inside the schema"):
            client_tool("pay", description="Pay.", input_schema=remote)
        schemas: list[tuple[str, dict[str, JsonValue]]] = [
            ("remote", remote),
            ("dangling", {"type": "object", "properties": {"x": {"$ref": "#/nope"}}}),
            (
                "loop",
                {
                    "type": "object",
                    "$defs": {"a": {"$ref": "#/$defs/a"}},
                    "properties": {"x": {"$ref": "#/$defs/a"}},
                },
            ),
        ]
        tools = [
            Tool(name=n, description=n, input_schema=s, fn=run, is_async=True) for n, s in schemas
        ]
        calls = [ScriptedCall(t.name, {"x": "a"}) for t in tools]
        model = ScriptedModel([ScriptedResponse(tool_calls=calls), "done"])
        events = await send(Session(Agent(model=model, tools=tools)), "go")
        finished(events)
        got = results(events)
        assert all(r.is_error for r in got.values())
        assert "tool 'remote' is unavailable" in got["remote"].content
        assert "does not resolve inside the schema" in got["remote"].content
        assert "tool 'dangling' is unavailable" in got["dangling"].content
        assert "refers to itself without end" in got["loop"].content
        assert server.paths == []


async def test_the_dialect_follows_dollar_schema(tmp_path: Path) -> None:
    """Draft-07 tuple ``items`` and ``dependencies`` are honoured, not refused nor ignored."""
    schema = {
        "$schema": DRAFT7,
        "type": "object",
        "properties": {
            "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
            "card": {"type": "string"},
            "cvc": {"type": "string"},
        },
        "dependencies": {"card": ["cvc"]},
    }
    config = hostile(tmp_path, "d7", [tool("pay", schema)], permission="auto")
    async with McpClientManager([config]) as manager:
        assert [t.name for t in manager.tools()] == ["mcp__d7__pay"], manager.skipped_tools
        calls = [
            ScriptedCall("mcp__d7__pay", {"pair": ["a", "b"]}),
            ScriptedCall("mcp__d7__pay", {"card": "4111"}),
            ScriptedCall("mcp__d7__pay", {"pair": ["a", 1], "card": "4111", "cvc": "123"}),
        ]
        model = ScriptedModel([ScriptedResponse(tool_calls=calls), "done"])
        events = await send(Session(Agent(model=model, tools=manager.tools())), "go")
    finished(events)
    got = [e for e in events if isinstance(e, ToolResult)]
    assert [r.is_error for r in got] == [True, True, False]
    assert "pair.1: 'b' is not of type 'integer'" in got[0].content
    assert "'cvc' is a dependency of 'card'" in got[1].content
    assert got[2].content.startswith("called pay")


def test_an_unknown_dialect_is_refused_by_name() -> None:
    schema: dict[str, JsonValue] = {"$schema": "http://127.0.0.1:1/meta.json", "type": "object"}
    with pytest.raises(ConfigError, match="unsupported dialect"):
        client_tool("pay", description="Pay.", input_schema=schema)
