"""Approvals in a web app: the server streams a pending action, the client decides over HTTP.

Run it from the repository root (it needs the server extra: pip install "mainspring[server]"):

    python examples/web-approvals/main.py

It serves an agent on a loopback port with uvicorn, in this process, and plays the browser:
it reads the turn's server-sent events, finds the pending action and posts the decision.
"""

from __future__ import annotations

import secrets
import socket
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import uvicorn

from mainspring import (
    Agent,
    Event,
    PendingAction,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    ToolResult,
    parse_sse,
    tool,
)
from mainspring.server import ServerConfig, create_app

PAYMENTS: list[str] = []  # what really left the account


@tool(permission="confirm", modifiable_fields=("amount_usd",))
def send_payment(to: str, amount_usd: float) -> str:
    """Send money to someone."""
    PAYMENTS.append(f"{to} ${amount_usd:.2f}")
    return f"sent ${amount_usd:.2f} to {to}"


def make_agent() -> Agent:
    """The agent the server runs (offline: a scripted model)."""
    call = ScriptedCall("send_payment", {"to": "alice", "amount_usd": 20})
    model = ScriptedModel([ScriptedResponse(tool_calls=[call]), "Paid Alice."])
    return Agent(model=model, tools=[send_payment])


async def events_of(response: httpx.Response) -> AsyncIterator[Event]:
    """The events of a server-sent event stream, one at a time as they arrive."""
    frame: list[str] = []
    async for line in response.aiter_lines():
        if line:
            frame.append(line)
        elif frame:
            for event in parse_sse("\n".join(frame) + "\n\n"):
                yield event
            frame = []


async def client(base_url: str, key: str) -> None:
    """What a browser (or any HTTP client) does."""
    auth = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base_url, headers=auth, timeout=30) as http:
        sid = (await http.post("/v1/sessions")).json()["session_id"]
        pending: PendingAction | None = None
        kinds: list[str] = []
        body = {"message": "Pay Alice $20"}
        async with http.stream("POST", f"/v1/sessions/{sid}/messages", json=body) as response:
            async for event in events_of(response):
                kinds.append(event.type)
                if isinstance(event, PendingAction):
                    pending = event
        print(f"events: {' '.join(kinds)}")
        assert pending is not None
        print(
            f"approval needed: {pending.name} {pending.input}, may edit {pending.modifiable_fields}"
        )

        # The user lowers the amount and approves; the turn goes on as a new stream.
        decision = {"decision": "approve", "edits": {"amount_usd": 15}}
        url = f"/v1/sessions/{sid}/decisions/{pending.approval_id}"
        kinds = []
        async with http.stream("POST", url, json=decision) as response:
            async for event in events_of(response):
                kinds.append(event.type)
                if isinstance(event, ToolResult):
                    # (an edited approval's result starts with a note of what ran)
                    print(f"tool result: {event.content.splitlines()[-1]}")
        print(f"events: {' '.join(kinds)}")

        again = await http.post(url, json={"decision": "approve"})
        print(f"the same approval posted again: HTTP {again.status_code}")
        forged = await http.post(f"/v1/sessions/{sid}/decisions/forged", json=decision)
        print(f"a forged approval id: HTTP {forged.status_code}")
        anonymous = await http.get(f"/v1/sessions/{sid}", headers={"Authorization": ""})
        print(f"no key: HTTP {anonymous.status_code}")


async def main() -> None:
    """Serve the agent on 127.0.0.1 (a free port), run the client, stop the server."""
    key = secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory() as folder:
        config = ServerConfig(
            store=f"sqlite:///{Path(folder) / 'app.db'}",  # sessions, checkpoints, locks
            api_keys={key: "alice"},  # key -> principal: private by default
            signing_key=secrets.token_bytes(32),  # signs approval ids; share it across workers
        )
        app = create_app(make_agent(), config)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        # Bound and listening before the server starts: the client can connect at once.
        with socket.create_server(("127.0.0.1", 0)) as listener:
            port = listener.getsockname()[1]
            async with anyio.create_task_group() as tg:
                tg.start_soon(server.serve, [listener])
                await client(f"http://127.0.0.1:{port}", key)
                server.should_exit = True  # a graceful stop, as on Ctrl-C
    print(f"payments that ran: {PAYMENTS}")


if __name__ == "__main__":
    anyio.run(main)
