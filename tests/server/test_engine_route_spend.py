"""The auto-spend cap of a served engine's direct calls, over the signed route, on two workers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mainspring.codec import event_from_dict
from mainspring.engine import ToolCallResult
from mainspring.engine.remote import RemoteEngine
from mainspring.engine.signing import SigningKey, public_key_text
from tests.server.conftest import config
from tests.test_direct_spend_concurrency import CALLS, PRICE, check, concurrently, payments, shop

pytestmark = pytest.mark.anyio


async def test_the_signed_engine_route_of_two_servers_spends_at_most_the_cap(
    server_for: Any, tmp_path: Path
) -> None:
    paid, pay = payments()
    key = SigningKey.generate("engine-a")
    trusted = {key.key_id: public_key_text(key.public_key)}
    store = f"sqlite:///{tmp_path / 'server.db'}"
    bases = [
        server_for(None, config(engine=shop(pay), engine_keys=trusted, store=store))
        for _ in range(2)
    ]
    remotes = [RemoteEngine("shop", f"{base}/v1/engine", key) for base in bases]
    body: dict[str, Any] = {"arguments": {"to": "bob", "amount_usd": PRICE}}

    async def call(i: int) -> ToolCallResult:
        data = await remotes[i % 2]._request("POST", "/tools/pay/call", body)  # 200 or raises
        pending = data.get("pending")
        return ToolCallResult(
            name="pay",
            content=str(data.get("content", "")),
            is_error=bool(data.get("is_error")),
            ran=bool(data.get("ran")),
            pending=None if pending is None else _pending(pending),
        )

    check(paid, await concurrently(CALLS, call))


def _pending(data: dict[str, Any]) -> Any:
    return event_from_dict(data)
