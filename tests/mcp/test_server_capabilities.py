"""The MCP server honours what its client declared, in both protocol eras.

Driven by the official SDK's ``Client`` over streamable HTTP: a client that
did not declare elicitation is never sent one (the call is an error result
saying why, and nothing runs); client-executed tools are never listed; the
approval form offers exactly the tool's editable fields, current values as
defaults, and only those can be changed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as mt
import pytest
from mcp.shared.exceptions import MCPError

from mainspring import Agent, ScriptedModel, client_tool, tool
from mainspring.mcp.server import build_mcp_server, serve_http
from mcp import Client
from tests.mcp.test_server import add, delete_account, deleted, text_of

pytestmark = pytest.mark.anyio

ERAS = pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])

sent: list[tuple[str, float, str]] = []


@tool(permission="confirm", modifiable_fields=("amount_usd", "memo"))
async def transfer(to: str, amount_usd: float, memo: str = "") -> str:
    """Send money to someone.

    Args:
        to: Who receives it.
        amount_usd: How much, in USD.
        memo: A note for the receiver.
    """
    sent.append((to, amount_usd, memo))
    return f"sent {amount_usd} to {to}"


sign = client_tool(
    "sign_transfer",
    description="Sign a transfer in the user's wallet.",
    input_schema={"type": "object", "properties": {"to": {"type": "string"}}},
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def served(*, mode: str, elicitation: Any = None) -> AsyncIterator[Client]:
    deleted.clear()
    sent.clear()
    agent = Agent(model=ScriptedModel([]), name="t", tools=[add, delete_account, transfer, sign])
    server = build_mcp_server(agent, expose_confirm=True)
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


@ERAS
async def test_a_client_without_elicitation_gets_an_error_and_nothing_runs(mode: str) -> None:
    with anyio.fail_after(20):
        async with served(mode=mode) as client:
            if mode == "2026-07-28":
                raw = await client.session.call_tool(
                    "delete_account", {"account": "acme"}, allow_input_required=True
                )
                assert isinstance(raw, mt.CallToolResult), "no input_required to this client"
            result = await client.call_tool("delete_account", {"account": "acme"})
            still = await client.call_tool("add", {"a": 2, "b": 3})
    said = text_of(result)
    assert result.is_error
    assert "delete_account needs the user's approval" in said
    assert "did not declare the elicitation capability" in said
    assert "HTTP API" in said and "supports elicitation" in said
    assert deleted == [], "the write never ran"
    assert '"sum": 5' in text_of(still), "reads still run"


@ERAS
async def test_client_executed_tools_are_never_listed(mode: str) -> None:
    with anyio.fail_after(20):
        async with served(mode=mode) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            with pytest.raises(MCPError, match="unknown tool 'sign_transfer'"):
                await client.call_tool("sign_transfer", {"to": "zoe"})
    assert "sign_transfer" not in names
    assert {"delete_account", "transfer", "add"} <= names


def answering(content: dict[str, Any], forms: list[dict[str, Any]]) -> Any:
    """The client's user accepts the form with ``content``; the forms shown are kept."""

    async def callback(context: Any, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        assert isinstance(params, mt.ElicitRequestFormParams)
        forms.append(dict(params.requested_schema))
        return mt.ElicitResult(action="accept", content=content)

    return callback


@ERAS
async def test_the_approval_form_offers_the_editable_fields_and_only_those(mode: str) -> None:
    forms: list[dict[str, Any]] = []
    edit = answering({"approve": True, "amount_usd": 2.5}, forms)
    with anyio.fail_after(20):
        async with served(mode=mode, elicitation=edit) as client:
            ok = await client.call_tool("transfer", {"to": "zoe", "amount_usd": 10, "memo": "rent"})
    assert not ok.is_error, text_of(ok)
    assert sent == [("zoe", 2.5, "rent")], "ran once, with the user's edit"
    props = forms[0]["properties"]
    assert set(props) == {"approve", "amount_usd", "memo"}, "the recipient is not editable"
    assert props["amount_usd"]["type"] == "number" and props["amount_usd"]["default"] == 10
    assert props["memo"] == {
        "type": "string",
        "title": "memo",
        "description": "A note for the receiver.",
        "default": "rent",
    }
    assert forms[0]["required"] == ["approve"]

    forms.clear()
    forged = answering({"approve": True, "to": "mallory"}, forms)
    with anyio.fail_after(20):
        async with served(mode=mode, elicitation=forged) as client:
            refused = await client.call_tool("transfer", {"to": "zoe", "amount_usd": 10})
    assert refused.is_error and "fields the form did not offer: ['to']" in text_of(refused)
    assert sent == [], "an edit the form did not offer runs nothing"
