"""The MCP server in the stateless 2026-07-28 revision, driven by the official SDK's client.

A confirm-tier call asks for approval with an ``input_required`` result and a
sealed ``requestState``; it runs only on the retry that carries an approval,
once, for exactly the input that was approved.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as mt
import pytest
from mcp.shared.exceptions import MCPError

from mainspring.mcp.server import build_mcp_server, serve_http
from mcp import Client
from tests.mcp.test_server import agent, answering, deleted, text_of

pytestmark = pytest.mark.anyio

APPROVE = {"mainspring_approval": mt.ElicitResult(action="accept", content={"approve": True})}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def modern(*, elicitation: Any = None, mode: str = "auto") -> AsyncIterator[Client]:
    deleted.clear()
    server = build_mcp_server(agent(), expose_confirm=True)
    async with anyio.create_task_group() as tg:
        port = await tg.start(
            lambda task_status: serve_http(server, port=0, task_status=task_status)
        )
        try:
            url = f"http://127.0.0.1:{port}/mcp"
            async with Client(url, mode=mode, elicitation_callback=elicitation) as client:
                yield client
        finally:
            tg.cancel_scope.cancel()


@pytest.mark.parametrize("approve", [True, False, None], ids=["approved", "refused", "declined"])
async def test_a_gated_tool_runs_only_after_approval_through_input_required(
    approve: bool | None,
) -> None:
    asked: list[str] = []
    with anyio.fail_after(20):
        async with modern(elicitation=answering(approve, asked)) as client:
            assert client.protocol_version == "2026-07-28"  # server/discover, no handshake
            result = await client.call_tool("delete_account", {"account": "acme"})
            add = await client.call_tool("add", {"a": 2, "b": 3})
    assert len(asked) == 1 and "delete_account needs your approval" in asked[0]
    assert '"sum": 5' in text_of(add)
    if approve:
        assert not result.is_error and text_of(result) == "deleted acme"
        assert deleted == ["acme"]
    else:
        assert result.is_error and "did not approve" in text_of(result)
        assert deleted == []


async def test_an_approval_is_used_once_and_only_for_the_input_shown() -> None:
    with anyio.fail_after(20):
        async with modern(elicitation=answering(True, []), mode="2026-07-28") as client:
            session = client.session
            first = await session.call_tool(
                "delete_account", {"account": "acme"}, allow_input_required=True
            )
            assert isinstance(first, mt.InputRequiredResult), first
            assert first.request_state and "acme" not in first.request_state, "sealed"
            assert deleted == [], "nothing runs in the first round"
            state = first.request_state
            with pytest.raises(MCPError, match="Invalid or expired requestState"):
                await session.call_tool(  # the state is bound to the request it came from
                    "delete_account",
                    {"account": "everyone"},
                    input_responses=APPROVE,  # type: ignore[arg-type]  # the SDK's union
                    request_state=state,
                )
            second = await client.session.call_tool(
                "delete_account", {"account": "acme"}, allow_input_required=True
            )
            assert isinstance(second, mt.InputRequiredResult)
            ran = await session.call_tool(
                "delete_account",
                {"account": "acme"},
                input_responses=APPROVE,  # type: ignore[arg-type]  # the SDK's union
                request_state=second.request_state,
            )
            assert not ran.is_error and text_of(ran) == "deleted acme"
            replay = await session.call_tool(
                "delete_account",
                {"account": "acme"},
                input_responses=APPROVE,  # type: ignore[arg-type]  # the SDK's union
                request_state=second.request_state,
            )
            assert replay.is_error and "already used" in text_of(replay)
            with pytest.raises(MCPError, match="Invalid or expired requestState"):
                await session.call_tool(
                    "note",
                    {"text": "x"},
                    input_responses=APPROVE,  # type: ignore[arg-type]  # the SDK's union
                    request_state=state,
                )
            assert state is not None
            forged = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
            with pytest.raises(MCPError, match="Invalid or expired requestState"):
                await session.call_tool(
                    "delete_account",
                    {"account": "acme"},
                    input_responses=APPROVE,  # type: ignore[arg-type]  # the SDK's union
                    request_state=forged,
                )
    assert deleted == ["acme"], "ran once, for the input approved"


async def test_without_an_answer_the_gated_tool_does_not_run() -> None:
    with anyio.fail_after(20):
        async with modern(elicitation=answering(True, []), mode="2026-07-28") as client:
            first = await client.session.call_tool(
                "delete_account", {"account": "acme"}, allow_input_required=True
            )
            assert isinstance(first, mt.InputRequiredResult)
            empty = await client.session.call_tool(
                "delete_account", {"account": "acme"}, request_state=first.request_state
            )
    assert empty.is_error and "no answer to the approval request" in text_of(empty)
    assert deleted == []


async def test_the_2025_handshake_still_asks_by_elicitation() -> None:
    asked: list[str] = []
    with anyio.fail_after(20):
        async with modern(elicitation=answering(True, asked), mode="legacy") as client:
            assert client.protocol_version != "2026-07-28"
            result = await client.call_tool("delete_account", {"account": "acme"})
    assert text_of(result) == "deleted acme" and len(asked) == 1
