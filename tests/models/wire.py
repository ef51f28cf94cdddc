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
WIRE = Path(
    os.environ.get("MAINSPRING_WIRE_FIXTURES", ROOT.parent / "shared" / "fixtures" / "wire")
)


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
