"""The MCP server, driven by the official SDK's client over streamable HTTP and stdio."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

import mcp_types as mt
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from mainspring import Agent, Allow, Deny, Hooks, PermissionRules, ScriptedModel, tool
from mainspring.errors import ConfigError
from mainspring.guards import Guard
from mainspring.mcp.server import (
    APPROVAL_META_KEY,
    build_mcp_server,
    http_app,
    is_loopback,
    serve_http,
)
from mainspring.skills import SkillCatalog
from mainspring.tools import ToolContext

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@tool(read_only=True)
async def add(a: int, b: int) -> dict[str, int]:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return {"sum": a + b}


@tool(read_only=True)
def explode() -> str:
    """Always fails."""
    raise RuntimeError("the ledger is on fire")


deleted: list[str] = []


@tool(permission="confirm")
async def delete_account(account: str) -> str:
    """Close an account for good."""
    deleted.append(account)
    return f"deleted {account}"


def _secret(tool: Any, args: Any) -> Any:
    return ("block", "a live key in the input") if "sk-live" in str(args) else None


secret_guard = Guard(name="secrets", before=_secret)


@tool
async def note(text: str) -> str:
    """Write a note (an auto-tier write)."""
    return f"noted: {text}"


def agent() -> Agent:
    return Agent(model=ScriptedModel([]), name="t", tools=[add, explode, delete_account, note])


@asynccontextmanager
async def http_session(
    server: Server[Any], *, elicitation: Any = None
) -> AsyncIterator[ClientSession]:
    async with anyio.create_task_group() as tg:
        port = await tg.start(
            lambda task_status: serve_http(server, port=0, task_status=task_status)
        )
        try:
            url = f"http://127.0.0.1:{port}/mcp"
            async with (
                streamable_http_client(url) as (read, write),
                ClientSession(read, write, elicitation_callback=elicitation) as session,
            ):
                await session.initialize()
                yield session
        finally:
            tg.cancel_scope.cancel()


def text_of(result: mt.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, mt.TextContent))


async def test_http_lists_and_calls_tools() -> None:
    with anyio.fail_after(15):
        async with http_session(build_mcp_server(agent())) as session:
            listed = {t.name: t for t in (await session.list_tools()).tools}
            assert set(listed) == {"add", "explode", "note"}  # the confirm-tier write is hidden
            assert listed["add"].annotations is not None
            assert listed["add"].annotations.read_only_hint is True
            assert listed["add"].input_schema["required"] == ["a", "b"]
            assert listed["note"].annotations is not None
            assert listed["note"].annotations.destructive_hint is True

            ok = await session.call_tool("add", {"a": 2, "b": 3})
            assert not ok.is_error
            assert '"sum": 5' in text_of(ok)

            bad = await session.call_tool("add", {"a": "two", "b": 3})
            assert bad.is_error
            assert "a:" in text_of(bad) and "add" in text_of(bad)

            missing = await session.call_tool("add", {"a": 1})
            assert missing.is_error and "b" in text_of(missing)

            boom = await session.call_tool("explode", {})
            assert boom.is_error
            assert "the ledger is on fire" in text_of(boom)

            with pytest.raises(MCPError, match="unknown tool 'delete_account'"):
                await session.call_tool("delete_account", {"account": "x"})


async def test_expose_confirm_marks_the_approval() -> None:
    deleted.clear()
    server = build_mcp_server(agent(), expose_confirm=True)
    with anyio.fail_after(15):
        async with http_session(server) as session:
            listed = {t.name: t for t in (await session.list_tools()).tools}
            gated = listed["delete_account"]
            assert gated.description is not None
            assert "APPROVAL" in gated.description
            assert gated.annotations is not None
            assert gated.annotations.read_only_hint is False
            assert gated.annotations.destructive_hint is True
            assert gated.annotations.title == "delete_account (requires approval)"
            assert gated.meta == {APPROVAL_META_KEY: True}
            assert listed["add"].meta == {APPROVAL_META_KEY: False}
            # A client that did not declare elicitation is not asked: the tool does not run.
            result = await session.call_tool("delete_account", {"account": "acct_1"})
            assert result.is_error and "cannot give one" in text_of(result)
    assert deleted == []


def answering(approve: bool | None, asked: list[str]) -> Any:
    """An elicitation callback: the client's user approves, declines (None) or says no."""

    async def callback(context: Any, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        asked.append(params.message)
        if approve is None:
            return mt.ElicitResult(action="decline")
        return mt.ElicitResult(action="accept", content={"approve": approve})

    return callback


@pytest.mark.parametrize("approve", [True, False, None], ids=["approved", "refused", "declined"])
async def test_a_gated_tool_runs_over_mcp_only_after_the_clients_user_approves(
    approve: bool | None,
) -> None:
    deleted.clear()
    asked: list[str] = []
    server = build_mcp_server(agent(), expose_confirm=True)
    with anyio.fail_after(15):
        async with http_session(server, elicitation=answering(approve, asked)) as session:
            result = await session.call_tool("delete_account", {"account": "acct_1"})
    assert len(asked) == 1 and "delete_account" in asked[0] and "acct_1" in asked[0]
    if approve:
        assert not result.is_error and text_of(result) == "deleted acct_1"
        assert deleted == ["acct_1"]  # once
    else:
        assert result.is_error and "rejected" in text_of(result)
        assert deleted == []


async def test_an_mcp_call_is_judged_like_a_call_from_the_model() -> None:
    """Guards, can_use_tool, deny lists and hooks see a call over MCP too (one dispatch path)."""
    seen: list[str] = []

    def before(t: Any, args: Any) -> None:
        seen.append(f"before:{t.name}")

    def audited(t: Any, args: Any, out: Any) -> None:
        seen.append(f"audit:{t.name}")

    async def can_use_tool(name: str, args: Mapping[str, Any]) -> Allow | Deny:
        if args.get("text") == "forbidden":
            return Deny("not that note")
        return Allow()

    guarded = Agent(
        model=ScriptedModel([]),
        name="t",
        tools=[add, note],
        permissions=PermissionRules(can_use_tool=can_use_tool),
        guards=[secret_guard],
        hooks=Hooks(before_tool_call=before),
        on_auto_executed=audited,
    )
    with anyio.fail_after(15):
        async with http_session(build_mcp_server(guarded)) as session:
            ok = await session.call_tool("note", {"text": "fine"})
            denied = await session.call_tool("note", {"text": "forbidden"})
            blocked = await session.call_tool("note", {"text": "sk-live-123456"})
    assert not ok.is_error and text_of(ok) == "noted: fine"
    assert denied.is_error and "not that note" in text_of(denied)
    assert blocked.is_error and "blocked" in text_of(blocked)
    assert seen == ["before:note", "audit:note"]  # only the call that ran


async def test_skills_are_prompts(tmp_path: Path) -> None:
    folder = tmp_path / "refund"
    folder.mkdir()
    (folder / "SKILL.md").write_text(
        "---\nname: refund\ndescription: How to refund a payment.\n---\n"
        "1. Look up the payment.\n2. Refund it.\n"
    )
    server = build_mcp_server(agent(), skills=SkillCatalog([tmp_path]))
    with anyio.fail_after(15):
        async with http_session(server) as session:
            prompts = (await session.list_prompts()).prompts
            assert [(p.name, p.description) for p in prompts] == [
                ("refund", "How to refund a payment.")
            ]
            got = await session.get_prompt("refund")
            assert got.description == "How to refund a payment."
            content = got.messages[0].content
            assert isinstance(content, mt.TextContent)
            assert "1. Look up the payment." in content.text
            assert "name: refund" not in content.text


def test_http_is_private_by_default() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0")
    with pytest.raises(ConfigError, match="loopback"):
        http_app(build_mcp_server(agent()), host="0.0.0.0")


async def test_stdio_cli_serves_the_demo_agent() -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mainspring", "mcp", "serve"]
    )
    with anyio.fail_after(20):
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            names = {t.name for t in (await session.list_tools()).tools}
            assert names == {"get_balance", "lookup_contact"}  # send_payment is USD-tiered
            found = await session.call_tool("lookup_contact", {"name": "alice"})
            assert "acct_alice_01" in text_of(found)


async def test_our_client_manager_uses_our_server_over_http() -> None:
    """Both ends of this project over streamable HTTP on loopback, through an agent."""
    from mainspring import ScriptedCall, ScriptedResponse, Session
    from mainspring.mcp import McpClientManager, McpServerConfig
    from tests.helpers import collect

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            port = await tg.start(
                lambda task_status: serve_http(
                    build_mcp_server(agent()), port=0, task_status=task_status
                )
            )
            config = McpServerConfig(
                name="calc", transport="http", url=f"http://127.0.0.1:{port}/mcp"
            )
            async with McpClientManager([config]) as manager:
                tools = {t.name: t for t in manager.tools()}
                assert "mcp__calc__add" in tools
                assert "mcp__calc__delete_account" not in tools  # approval-gated: hidden
                model = ScriptedModel(
                    [
                        ScriptedResponse(
                            tool_calls=[ScriptedCall("mcp__calc__add", {"a": 2, "b": 3})]
                        ),
                        "five",
                    ]
                )
                session = Session(Agent(model=model, tools=list(tools.values())))
                events = await collect(session.send("add"))
                assert events[-1].type == "turn_complete"
                result = session.messages[-2].tool_results_parts[0]
                assert not result.is_error and "5" in result.content
            tg.cancel_scope.cancel()


@tool(read_only=True)
async def crunch(ctx: ToolContext) -> str:
    """Work in three stages."""
    ctx.progress("loading", pct=10)
    ctx.progress("crunching", pct=60)
    ctx.progress("done", pct=100)
    return "crunched"


async def test_a_tools_progress_reaches_the_client_as_mcp_progress() -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    served = Agent(model=ScriptedModel([]), name="t", tools=[crunch])
    with anyio.fail_after(15):
        async with http_session(build_mcp_server(served)) as session:
            result = await session.call_tool("crunch", {}, progress_callback=on_progress)
            quiet = await session.call_tool("crunch", {})  # no token asked: nothing sent
    assert text_of(result) == "crunched" and text_of(quiet) == "crunched"
    assert seen == [(10, 100, "loading"), (60, 100, "crunching"), (100, 100, "done")]
