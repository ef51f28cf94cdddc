"""An engine served by the application server, called by another engine with signed requests."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from mainspring import tool
from mainspring.engine import Caller, Engine, ManagementPolicy
from mainspring.engine.signing import SigningKey, public_key_text
from mainspring.errors import RemoteEngineError
from tests.server.conftest import config

pytestmark = pytest.mark.anyio

ALICE = Caller("alice")


@tool(read_only=True)
def stock(sku: str) -> str:
    """How many are in stock."""
    return f"{sku}: 7 in stock"


@tool(read_only=True)
def margins() -> str:
    """Not exported."""
    return "secret margins"


def shop() -> Engine:
    return (
        Engine("shop", policy=ManagementPolicy(visibility="protected"))
        .add_tool(stock, export=True)
        .add_tool(margins)
    )


async def test_another_engine_calls_the_exported_tools_of_a_served_engine(
    server_for: Any,
) -> None:
    trusted = SigningKey.generate("engine-a")
    stranger = SigningKey.generate("engine-x")
    base = server_for(
        None,
        config(engine=shop(), engine_keys={trusted.key_id: public_key_text(trusted.public_key)}),
    )
    local = Engine("a", policy=ManagementPolicy(controller=ALICE))
    names = await local.register_remote("shop", f"{base}/v1/engine", trusted)
    assert set(names) == {"RT_shop_stock"}  # not the unexported one
    result = await local.tool_call(ALICE, "RT_shop_stock", {"sku": "A1"})
    assert result.content == "A1: 7 in stock" and not result.is_error
    with pytest.raises(RemoteEngineError):
        await Engine("x").register_remote("shop", f"{base}/v1/engine", stranger)
    async with httpx.AsyncClient(base_url=base) as client:  # unsigned: anonymous, refused
        r = await client.post("/v1/engine/tools/margins/call", json={"arguments": {}})
        assert r.status_code in (401, 403)
        r = await client.get("/v1/sessions")  # the sessions API still needs its credential
        assert r.status_code == 401


@tool(permission="confirm")
def refund(order: str) -> str:
    """Refund an order (needs a decision)."""
    return f"refunded {order}"


async def test_paused_calls_per_caller_are_bounded_on_the_signed_route(
    server_for: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mainspring.engine import paused

    monkeypatch.setattr(paused, "MAX_PAUSED", 1)
    trusted = SigningKey.generate("engine-a")
    engine = Engine("shop", policy=ManagementPolicy(visibility="protected"))
    base = server_for(
        None,
        config(
            engine=engine.add_tool(refund, export=True),
            engine_keys={trusted.key_id: public_key_text(trusted.public_key)},
        ),
    )
    path = "/v1/engine/tools/refund/call"

    async def call(client: httpx.AsyncClient, order: str) -> httpx.Response:
        body = json.dumps({"arguments": {"order": order}}).encode()
        headers = trusted.sign("POST", path, body)
        return await client.post(path, content=body, headers=headers)

    async with httpx.AsyncClient(base_url=base) as client:
        first = await call(client, "o1")
        assert first.status_code == 200 and first.json()["status"] == "pending"
        second = await call(client, "o2")
        assert second.status_code == 409, second.text
        assert second.json()["error"] == "CallerBusy"
        assert "paused calls" in second.json()["message"]
    assert [p.name for p in await engine.pending(Caller("engine-a", kind="engine"))] == ["refund"]
