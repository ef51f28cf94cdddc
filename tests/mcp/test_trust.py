"""Tool tiers from annotations, and config overrides, against an SDK-built server."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mainspring import (
    Agent,
    Approve,
    PendingAction,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    ToolResult,
)
from mainspring.errors import ConfigError
from mainspring.mcp import McpClientManager, McpServerConfig
from tests.helpers import pending_of, resume, send

pytestmark = pytest.mark.anyio

SERVER = str(Path(__file__).with_name("_annotated_server.py"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def annotated(**kw: object) -> McpServerConfig:
    return McpServerConfig(
        name="srv",
        command=sys.executable,
        args=(SERVER,),
        startup_timeout=20,
        **kw,  # type: ignore[arg-type]  # test shorthand
    )


async def test_tiers_follow_the_annotations() -> None:
    async with McpClientManager([annotated()]) as manager:
        tools = {t.name.removeprefix("mcp__srv__"): t for t in manager.tools()}
    peek, wipe, bare, tidy = (tools[n] for n in ("peek", "wipe", "bare", "tidy"))
    assert peek.policy.read_only and peek.policy.parallel
    assert peek.policy.permission == "auto"
    assert peek.meta["permission_source"] == "annotations: readOnlyHint"
    assert wipe.policy.permission == "confirm" and not wipe.policy.read_only
    assert bare.policy.permission == "confirm" and not bare.policy.parallel
    assert bare.meta["permission_source"] == "annotations: none"
    assert tidy.policy.permission == "auto" and tidy.policy.is_write
    assert not tidy.policy.parallel
    assert tidy.meta["permission"] == "auto"


async def test_destructive_tool_pauses_then_runs_once_approved() -> None:
    async with McpClientManager([annotated()]) as manager:
        model = ScriptedModel(
            [
                ScriptedResponse(tool_calls=[ScriptedCall("mcp__srv__wipe", {"target": "db"})]),
                "wiped",
            ]
        )
        session = Session(Agent(model=model, tools=manager.tools()))
        events = await send(session, "wipe the db")
        assert not any(isinstance(e, ToolResult) for e in events), "nothing ran before approval"
        pending = pending_of(events)
        assert pending.name == "mcp__srv__wipe"
        after = await resume(session, pending.attempt_id, Approve())
        result = next(e for e in after if isinstance(e, ToolResult))
        assert not result.is_error and result.content == "wiped db"


async def test_read_only_tools_run_in_parallel_without_asking() -> None:
    async with McpClientManager([annotated()]) as manager:
        calls = [ScriptedCall("mcp__srv__peek", {"tag": t}) for t in ("a", "b")]
        model = ScriptedModel([ScriptedResponse(tool_calls=calls), "done"])
        events = await send(Session(Agent(model=model, tools=manager.tools())), "look")
        assert not any(isinstance(e, PendingAction) for e in events)
        results = sorted(e.content for e in events if isinstance(e, ToolResult))
        assert results == ["a: together", "b: together"]  # both calls were in flight at once


async def test_overrides_flip_the_tier() -> None:
    config = annotated(
        permission="confirm",
        tool_permissions={"wipe": "auto", "ba*": "deny"},
    )
    async with McpClientManager([config]) as manager:
        tools = {t.name.removeprefix("mcp__srv__"): t for t in manager.tools()}
        assert "bare" not in tools  # denied
        assert tools["wipe"].policy.permission == "auto"
        assert tools["wipe"].meta["permission_source"] == "tool_permissions['wipe']"
        assert tools["tidy"].policy.permission == "confirm"
        assert tools["peek"].policy.permission == "confirm"
        assert tools["peek"].meta["permission_source"] == "permission"
        model = ScriptedModel(
            [
                ScriptedResponse(tool_calls=[ScriptedCall("mcp__srv__wipe", {"target": "x"})]),
                "done",
            ]
        )
        events = await send(Session(Agent(model=model, tools=list(tools.values()))), "go")
        assert not any(isinstance(e, PendingAction) for e in events)
        result = next(e for e in events if isinstance(e, ToolResult))
        assert result.content == "wiped x"


def test_override_values_are_validated() -> None:
    with pytest.raises(ConfigError, match="'auto', 'confirm', 'deny'"):
        McpServerConfig(name="s", command="x", permission="Confirm")  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
    with pytest.raises(ConfigError, match=r"tool_permissions\['t'\]"):
        McpServerConfig(name="s", command="x", tool_permissions={"t": "ask"})  # type: ignore[dict-item]  # a wrong type on purpose: the test checks it is refused
