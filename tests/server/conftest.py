"""Fixtures of the server tests: a real uvicorn on loopback, httpx clients, SSE reading."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse

from mainspring.agent import Agent
from mainspring.demo import demo_agent
from mainspring.server import ServerConfig, create_app
from tests.server.servers import serving

ALICE = "alice-key-0000000000000001"
BOB = "bob-key-00000000000000000002"
KEYS = {ALICE: "alice", BOB: "bob"}
SIGNING_KEY = b"k" * 32


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the server runs on asyncio (uvicorn); the clients too


@dataclass
class Frame:
    id: str
    event: str
    data: dict[str, Any]


async def read_sse(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    json_body: object = None,
    headers: dict[str, str] | None = None,
    stop_after: int | None = None,
) -> list[Frame]:
    """The frames of an SSE response (the first ``stop_after`` only, then hang up)."""
    frames: list[Frame] = []
    kwargs: dict[str, Any] = {"headers": headers or {}}
    if json_body is not None:
        kwargs["json"] = json_body
    async with aconnect_sse(client, method, url, **kwargs) as source:
        if source.response.status_code != 200:
            await source.response.aread()
            raise AssertionError(f"{source.response.status_code}: {source.response.text}")
        async for sse in source.aiter_sse():
            frames.append(Frame(sse.id, sse.event, json.loads(sse.data)))
            if stop_after is not None and len(frames) >= stop_after:
                break
    return frames


def client_for(base: str, key: str | None = ALICE) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.AsyncClient(base_url=base, headers=headers, timeout=30)


def config(**changes: Any) -> ServerConfig:
    fields: dict[str, Any] = {"api_keys": KEYS, "signing_key": SIGNING_KEY}
    fields.update(changes)
    return ServerConfig(**fields)


@pytest.fixture
def server_for() -> Iterator[Any]:
    """``server_for(agent, config)`` -> base URL of a running server (stopped after the test)."""
    from contextlib import ExitStack

    with ExitStack() as stack:

        def start(agent: Agent | None = None, cfg: ServerConfig | None = None) -> str:
            app = create_app(agent or demo_agent(), cfg or config())
            return stack.enter_context(serving(app))

        yield start


@pytest.fixture
def base(server_for: Any) -> str:
    url: str = server_for()
    return url
