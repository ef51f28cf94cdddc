"""Servers and clients for the UI protocol tests (AI SDK, AG-UI)."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio.to_thread
import httpx
from pydantic import JsonValue

from mainspring import (
    Agent,
    PermissionRules,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    client_tool,
    tool,
)
from mainspring.demo import demo_agent
from mainspring.messages import Message
from mainspring.models import ToolSpec
from mainspring.server import ServerConfig, create_app
from mainspring.tools import Tool, ToolContext
from tests.server.servers import serving

ALICE = "alice-key-0123456789abcdef"
BOB = "bob-key-0123456789abcdef00"
KEYS = {ALICE: "alice", BOB: "bob"}


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@dataclass
class Served:
    base: str
    alice: httpx.Client
    bob: httpx.Client
    anonymous: httpx.Client


@contextmanager
def served(agent: Agent | None = None, config: ServerConfig | None = None) -> Iterator[Served]:
    """The server of ``agent`` (the demo agent) with clients for alice, bob and nobody."""
    app = create_app(agent or demo_agent(), config or ServerConfig(api_keys=dict(KEYS)))
    with serving(app) as base:
        clients = [
            httpx.Client(base_url=base, headers=auth(ALICE), timeout=60),
            httpx.Client(base_url=base, headers=auth(BOB), timeout=60),
            httpx.Client(base_url=base, timeout=60),
        ]
        try:
            yield Served(base, *clients)
        finally:
            for client in clients:
                client.close()


@contextmanager
def two_workers(agent: Agent, folder: Path) -> Iterator[tuple[Served, Served]]:
    """Two workers of one deployment: one SQLite file for every store, one signing key."""
    config = {
        "store": f"sqlite:///{folder / 'stores.db'}",
        "api_keys": dict(KEYS),
        "signing_key": b"a shared signing key of 32 bytes",
    }
    with (
        served(agent, ServerConfig(**config, worker="a")) as a,  # type: ignore[arg-type]  # the shared config dict mixes value types
        served(agent, ServerConfig(**config, worker="b")) as b,  # type: ignore[arg-type]  # the shared config dict mixes value types
    ):
        yield a, b


def new_id() -> str:
    return uuid.uuid4().hex


def sse_data(response: httpx.Response) -> list[str]:
    """The ``data:`` payloads of an SSE response, in order."""
    return [line[6:] for line in response.iter_lines() if line.startswith("data: ")]


def state_of(client: httpx.Client, session_id: str) -> dict[str, JsonValue]:
    response = client.get(f"/v1/sessions/{session_id}/state")
    assert response.status_code == 200, response.text
    body: dict[str, JsonValue] = response.json()
    return body


def writes_of(client: httpx.Client, session_id: str) -> int:
    writes = state_of(client, session_id)["writes"]
    assert isinstance(writes, dict)
    return len(writes)


# ----------------------------------------------------------- a gated agent


def gate_tool(gate: threading.Event) -> Tool:
    @tool(read_only=True)
    async def wait_here(ctx: ToolContext) -> str:
        """Wait until the test opens the gate."""
        ctx.progress("waiting for the gate")
        opened = await anyio.to_thread.run_sync(gate.wait, 60.0)
        return json.dumps({"opened": opened})

    return wait_here


def gated_agent(gate: threading.Event) -> Agent:
    """An agent whose turn calls ``wait_here`` (blocking on ``gate``), then says "released"."""

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse | str:
        if messages[-1].role == "tool":
            return "released"
        return ScriptedResponse(text="Waiting.", tool_calls=[ScriptedCall("wait_here", {})])

    return Agent(
        name="gated",
        model=ScriptedModel(script),
        tools=[gate_tool(gate)],
        permissions=PermissionRules(allow=("*",)),
    )


# ------------------------------------------------------ a client-executed tool


def signing_agent() -> Agent:
    """An agent whose turn asks the client to sign (a client-executed tool), then reports."""

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse | str:
        last = messages[-1]
        if last.role == "tool":
            result = last.tool_results_parts[0]
            return f"client said: {result.content} (error: {result.is_error})"
        call = ScriptedCall("sign_transaction", {"to": "0xabc", "amount_usd": 1.0})
        return ScriptedResponse(tool_calls=[call])

    sign = client_tool(
        "sign_transaction",
        description="Sign in the user's wallet.",
        input_schema={
            "type": "object",
            "properties": {"to": {"type": "string"}, "amount_usd": {"type": "number"}},
            "required": ["to", "amount_usd"],
        },
    )
    return Agent(
        name="signer",
        model=ScriptedModel(script),
        tools=[sign],
        permissions=PermissionRules(allow=("*",)),
    )
