"""A client process for the durable input_required tests: one phase, then it dies or exits.

``python -m tests.mcp._resume_child PHASE URL STORE SESSION_ID [ATTEMPT]``:

- ``send``: a session calls ``delete_account`` on the mainspring MCP server at
  URL; the user approves the call here, the server answers ``input_required``,
  the turn pauses on it; the child prints the pending action and dies (SIGKILL:
  nothing is closed or flushed that the store did not already have).
- ``resume``: a new process loads the session and approves ATTEMPT (the
  server's approval form answered ``approve: true``), printing each event.
- ``crash``: as ``resume``, but the process dies after the decision is
  consumed and before the retry could be sent.
- ``next``: a new process loads the session and sends the next message.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence

import anyio

from mainspring import Agent, Approve, Session
from mainspring.codec import event_to_json
from mainspring.events import PendingAction
from mainspring.hooks import Hooks
from mainspring.mcp import McpClientManager, McpServerConfig
from mainspring.messages import Message
from mainspring.models.base import ToolSpec
from mainspring.stores.urls import open_stores
from mainspring.testing import ScriptedCall, ScriptedModel, ScriptedResponse
from mainspring.tools import Tool, ToolInput


def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
    if messages[-1].role == "user":
        if messages[-1].text != "close acme":
            return ScriptedResponse(text="Nothing else.")
        call = ScriptedCall("mcp__ms__delete_account", {"account": "acme"})
        return ScriptedResponse(text="Closing it.", tool_calls=[call])
    return ScriptedResponse(text="Done.")


def die_before_sending(tool: Tool, args: ToolInput) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def out(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def main(argv: list[str]) -> None:
    phase, url, store, session_id, *rest = argv
    config = McpServerConfig(name="ms", transport="http", url=url, protocol="2026-07-28")
    stores = await open_stores(store)
    assert stores.sessions is not None
    async with McpClientManager([config], pause_on_elicit=True) as manager:
        hooks = Hooks(before_tool_call=die_before_sending) if phase == "crash" else Hooks()
        agent = Agent(model=ScriptedModel(script), tools=manager.tools(), hooks=hooks)
        if phase == "send":
            session = Session(agent, session_id=session_id, session_store=stores.sessions)
            events = [e async for e in session.send("close acme")]
            approve = [e for e in events if isinstance(e, PendingAction)]
            assert len(approve) == 1 and approve[0].nested is None, events  # the client asks
            async for event in session.resume(approve[0].attempt_id, Approve()):
                out(event_to_json(event))  # the server asks: input_required, paused
            os.kill(os.getpid(), signal.SIGKILL)
        session = await Session.load(agent, stores.sessions, session_id)
        if phase == "next":
            async for event in session.send("anything else?"):
                out(event_to_json(event))
            return
        async for event in session.resume(rest[0], Approve(edits={"approve": True})):
            out(event_to_json(event))
    await stores.aclose()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
