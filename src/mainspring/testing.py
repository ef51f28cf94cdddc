"""Test helpers for applications built on mainspring (and for mainspring's own tests).

```python
from mainspring.testing import ScriptedModel, ScriptedResponse, ScriptedCall, collect

model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("pay", {"to": "bo"})]), "ok"])
events = await collect(Session(Agent(model=model, tools=[pay])).send("pay Bo"))
pending = pending_of(events)
```

- :class:`ScriptedModel` (with :class:`ScriptedResponse` and :class:`ScriptedCall`):
  the offline, deterministic model; it records every request it received.
- :class:`MockModel`: the offline model that needs no script: it calls the first
  offered tool once a turn (arguments made up from its schema), then answers.
- :func:`check_events`: the event grammar every stream obeys — exactly one
  terminal event (``turn_complete`` or ``error``), last; ``stream_started``
  first, once, when the stream is checkpointed; a ``pending_action`` right
  before ``turn_complete(stop_reason="pending_action")`` and nowhere else.
- :func:`collect`: every event of a stream, checked; :func:`pending_of`: its
  one pending action.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from mainspring.events import (
    TERMINAL_EVENT_TYPES,
    Event,
    PendingAction,
    StreamStarted,
    TurnComplete,
)
from mainspring.models.mock import MockModel
from mainspring.models.scripted import ScriptedCall, ScriptedModel, ScriptedResponse

__all__ = [
    "MockModel",
    "ScriptedCall",
    "ScriptedModel",
    "ScriptedResponse",
    "check_events",
    "collect",
    "pending_of",
]


def check_events(events: Sequence[Event]) -> None:
    """Raise AssertionError unless ``events`` is one well-formed stream."""
    terminals = [i for i, e in enumerate(events) if e.type in TERMINAL_EVENT_TYPES]
    if len(terminals) != 1:
        found = [events[i] for i in terminals]
        raise AssertionError(f"expected exactly one terminal event, got {found}")
    if terminals[0] != len(events) - 1:
        raise AssertionError(f"the terminal event must be last, not at {terminals[0]}")
    starts = [i for i, e in enumerate(events) if isinstance(e, StreamStarted)]
    if starts and starts != [0]:
        raise AssertionError(f"stream_started must come first and once, found at {starts}")
    pauses = [i for i, e in enumerate(events) if isinstance(e, PendingAction)]
    last = events[-1]
    paused = isinstance(last, TurnComplete) and last.stop_reason == "pending_action"
    if paused and pauses != [len(events) - 2]:
        raise AssertionError("a paused stream ends with pending_action, then turn_complete")
    if not paused and pauses:
        raise AssertionError(f"pending_action at {pauses} but the turn did not pause")


async def collect(stream: AsyncIterator[Event]) -> list[Event]:
    """Every event of ``stream``, checked with :func:`check_events`."""
    events = [event async for event in stream]
    check_events(events)
    return events


def pending_of(events: Sequence[Event]) -> PendingAction:
    """The one pending action of a stream (AssertionError if there is not exactly one)."""
    found = [e for e in events if isinstance(e, PendingAction)]
    if len(found) != 1:
        raise AssertionError(f"expected one pending_action, got {found}")
    return found[0]
