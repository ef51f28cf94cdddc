"""Recorded provider traffic (``../shared/fixtures/wire``), served through the real SDKs.

``load(provider, name)`` reads one exchange; ``transport(exchange)`` is an
``httpx.MockTransport`` that answers the recorded response (JSON body or raw
SSE text) and keeps the request it received, so a test can check both what
the adapter sent and what it made of the answer.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _find_wire() -> Path:
    """``MAINSPRING_WIRE_FIXTURES``, else ``shared/fixtures/wire`` beside the checkout.

    Beside it or beside any folder above it: a clone one level deeper than
    usual (``work/ci/main``) finds the fixtures as ``work/main`` does.
    """
    named = os.environ.get("MAINSPRING_WIRE_FIXTURES")
    if named:
        return Path(named)
    for folder in ROOT.parents:
        candidate = folder / "shared" / "fixtures" / "wire"
        if candidate.is_dir():
            return candidate
    return ROOT.parent / "shared" / "fixtures" / "wire"


WIRE = _find_wire()


def load(provider: str, name: str) -> dict[str, Any]:
    """One recorded exchange, e.g. ``load("anthropic", "text_stream")``."""
    path = WIRE / provider / f"{name}.json"
    if not path.exists():
        pytest.skip(f"needs the recorded wire fixtures at {WIRE} (shared/fixtures/wire)")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@dataclass
class Recorded:
    """A mock transport answering one recorded exchange (or several, in order)."""

    exchanges: list[dict[str, Any]]
    requests: list[httpx.Request] = field(default_factory=list)

    def handler(self, request: httpx.Request) -> httpx.Response:
        exchange = self.exchanges[min(len(self.requests), len(self.exchanges) - 1)]
        self.requests.append(request)
        response = exchange["response"]
        headers = dict(response.get("headers_subset", {}))
        if "sse" in response:
            headers["content-type"] = "text/event-stream"
            return httpx.Response(
                response["status"], headers=headers, content=response["sse"].encode()
            )
        headers["content-type"] = "application/json"
        return httpx.Response(
            response["status"], headers=headers, content=json.dumps(response["body"]).encode()
        )

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handler)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=self.transport)

    def sent_json(self, index: int = -1) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(self.requests[index].content)
        return body


def recorded(*exchanges: dict[str, Any]) -> Recorded:
    return Recorded(list(exchanges))


def as_provider_ids(sent: Any, messages: Any) -> Any:
    """``sent`` with the engine's call ids put back to the ids the provider issued.

    The engine gives every call its own id (a model may repeat one or send
    none) and sends that id back to the provider; a recorded follow-up request
    holds the provider's. Mapping one onto the other shows the request is the
    recorded one in every other respect.
    """
    ids = {
        part.id: part.provider_id
        for message in messages
        for part in message.tool_calls
        if part.provider_id
    }
    assert ids, "the session made no call with a provider id"
    assert all(i.startswith("call_") and len(i) == 37 for i in ids), "engine ids expected"

    def swap(value: Any) -> Any:
        if isinstance(value, str):
            return ids.get(value, value)
        if isinstance(value, list):
            return [swap(v) for v in value]
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        return value

    return swap(sent)
