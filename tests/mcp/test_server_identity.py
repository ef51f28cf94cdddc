"""Who an MCP client is to the tools: one named caller per server, never "local"."""

from __future__ import annotations

import anyio
import pytest

from mainspring import Agent, ScriptedModel, tool
from mainspring.mcp.server import build_mcp_server
from mainspring.principals import Caller
from mainspring.tools.context import ToolContext
from tests.mcp.test_server import http_session, text_of

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # uvicorn serves on asyncio


@tool(read_only=True)
def whoami(ctx: ToolContext) -> str:
    """Who is calling."""
    return ctx.caller.key


@tool
def keep(text: str, ctx: ToolContext) -> str:
    """Keep a text in this caller's storage; say what was there."""
    before = ctx.storage.get("kept")
    ctx.storage.put("kept", text)
    return repr(before)


def agent() -> Agent:
    return Agent(model=ScriptedModel([]), name="t", tools=[whoami, keep])


async def test_an_mcp_server_runs_its_tools_as_its_named_principal() -> None:
    with anyio.fail_after(15):
        async with http_session(build_mcp_server(agent())) as session:
            assert text_of(await session.call_tool("whoami", {})) == "service:mcp"
        carol = build_mcp_server(agent(), principal=Caller("carol"))
        async with http_session(carol) as session:
            assert text_of(await session.call_tool("whoami", {})) == "user:carol"
            assert text_of(await session.call_tool("keep", {"text": "a"})) == "None"
            assert text_of(await session.call_tool("keep", {"text": "b"})) == "'a'"
