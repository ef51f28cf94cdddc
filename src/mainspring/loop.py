"""run_loop: the agent loop for a host that keeps its own conversation (no Session).

The torus SDK's ``runLoop``: hand it an agent and the conversation (the
user's new message last), iterate its events, and find the conversation
extended with what the turn added (the assistant's messages, the tool
results) when it ends.

```python
history = [Message.user("What is my balance?")]
async for event in run_loop(agent, history):
    if isinstance(event, TextDelta):
        print(event.text, end="")
history.append(Message.user("And in euros?"))   # the next turn goes on from it
async for event in run_loop(agent, history):
    ...
```

It is a thin door onto the one loop every session runs, not a second loop:
every call passes the same dispatch path (permission rules, USD tiers and
the auto-spend cap, guards, preflight, hooks, the approval gate, the write
ledger), so a write never runs unapproved here either. A call that needs a
decision pauses the turn: with ``decide`` the loop asks it and goes on (the
write runs only if approved); without it the stream ends as a paused
session's does, ``pending_action`` then ``turn_complete(stop_reason=
"pending_action")``, and the write has not run. Answering a pause later (in
another request, another process) needs what a :class:`~mainspring.session.Session`
keeps: its paused turn, in a store.

Nothing is stored: the loop holds the turn in memory while it runs.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing

from mainspring.agent import Agent
from mainspring.decisions import Decision
from mainspring.errors import ConfigError
from mainspring.events import Event, PendingAction, TurnComplete
from mainspring.messages import Message
from mainspring.session import Session

__all__ = ["Decide", "run_loop"]

Decide = Callable[[PendingAction], "Decision | Awaitable[Decision]"]
"""Answers a paused call (sync or async): ``Approve()``, ``Approve(edits=…)``, ``Reject(…)``,
or a client-executed tool's ``ClientResult``."""


async def run_loop(
    agent: Agent, messages: list[Message], *, decide: Decide | None = None
) -> AsyncGenerator[Event, None]:
    """Run one turn of ``agent`` on ``messages`` and yield its events.

    Args:
        agent: The agent (its model, tools and policies).
        messages: The conversation, its last message the user's new one. When
            the stream ends (or is closed), the list holds the conversation
            after the turn: what it held, then what the turn added.
        decide: Asked for each call that needs a decision; its answer is
            applied and the turn goes on in the same stream (the paused
            ``pending_action`` and its ``turn_complete`` are not yielded).
            Without it a pause ends the stream, the write not run.

    The stream obeys the grammar of every stream (one terminal event, last:
    see :func:`~mainspring.testing.check_events`).

    Raises:
        ConfigError: ``messages`` is empty or does not end with a user message.
    """
    if not messages or messages[-1].role != "user":
        raise ConfigError("run_loop needs the conversation with the user's new message last")
    session = Session(agent, messages=messages[:-1])
    stream = session.send(messages[-1])
    try:
        while True:
            pending: PendingAction | None = None
            paused = False
            async with aclosing(stream) as events:
                async for event in events:
                    if decide is not None and isinstance(event, PendingAction):
                        pending = event  # asked below, once the paused stream has ended
                    elif pending is not None and isinstance(event, TurnComplete):
                        paused = event.stop_reason == "pending_action"
                        if not paused:
                            yield event
                    else:
                        yield event
            if not paused or pending is None or decide is None:
                return
            decision = decide(pending)
            if inspect.isawaitable(decision):
                decision = await decision
            stream = session.resume(pending.attempt_id, decision)
    finally:
        messages[:] = session.messages
        await session.aclose()
