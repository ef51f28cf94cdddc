"""A client process for the durable A2A tool tests: one phase, then it dies or exits.

``python -m tests.server._a2a_child PHASE URL KEY STORE SESSION_ID [ATTEMPT]``:

- ``send``: a session calls the remote ``payer`` agent at URL through
  ``a2a_tool``; the user approves the local call here, the remote task asks
  for approval of its ``pay`` (input-required), the turn pauses on it; the
  child prints the pending action and dies (SIGKILL: nothing is closed or
  flushed that the store did not already have).
- ``resume``: a new process builds the tool afresh, loads the session and
  approves ATTEMPT with ``amount`` edited to 3, printing each event.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence

import anyio

from mainspring import Agent, Approve, Session
from mainspring.codec import event_to_json
from mainspring.errors import MainspringError
from mainspring.events import PendingAction
from mainspring.messages import Message
from mainspring.models.base import ToolSpec
from mainspring.stores.urls import open_stores
from mainspring.testing import ScriptedCall, ScriptedModel, ScriptedResponse
from mainspring.toolkits.a2a import a2a_tool


def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
    if messages[-1].role == "user":
        return ScriptedResponse(tool_calls=[ScriptedCall(tools[0].name, {"request": "pay bo"})])
    return ScriptedResponse(text="Done.")


def out(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def main(argv: list[str]) -> None:
    phase, url, key, store, session_id, *rest = argv
    stores = await open_stores(store)
    assert stores.sessions is not None
    agent = Agent(model=ScriptedModel(script), tools=[await a2a_tool(url, auth=key)])
    if phase == "send":
        session = Session(agent, session_id=session_id, session_store=stores.sessions)
        events = [e async for e in session.send("pay bo")]
        [local] = [e for e in events if isinstance(e, PendingAction)]
        assert local.nested is None, events  # the local confirm tier asks first
        async for event in session.resume(local.attempt_id, Approve()):
            out(event_to_json(event))  # the remote asks: input-required, paused
        os.kill(os.getpid(), signal.SIGKILL)
    session = await Session.load(agent, stores.sessions, session_id)
    try:
        async for event in session.resume(rest[0], Approve(edits={"amount": 3})):
            out(event_to_json(event))
    except MainspringError as exc:
        sys.stderr.write(f"refused: {exc}\n")
    await stores.aclose()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
