"""Stream resume: what to say after replaying a checkpointed stream's log.

A log that ends with its terminal event is complete. A log cut short (the
process died, or the stream is still running somewhere) ends either with
every started tool finished — then the turn is reported as interrupted — or
with a tool in flight, which is reported as an explicit error naming it and,
for a write, its attempt: it is never silently run again.
"""

from __future__ import annotations

from collections.abc import Mapping

from mainspring.events import (
    TERMINAL_EVENT_TYPES,
    ErrorEvent,
    Event,
    ToolResult,
    ToolStart,
    TurnComplete,
)
from mainspring.state import WriteRecord

__all__ = ["has_terminal", "synthesize_terminal"]


def has_terminal(events: list[Event]) -> bool:
    """Whether the log already ends its stream."""
    return bool(events) and events[-1].type in TERMINAL_EVENT_TYPES


def synthesize_terminal(
    events: list[Event], *, writes: Mapping[str, WriteRecord], turn_index: int
) -> Event:
    """The terminal event for a log that was cut before its own."""
    finished = {e.tool_use_id for e in events if isinstance(e, ToolResult)}
    in_flight = {
        e.tool_use_id: e.name
        for e in events
        if isinstance(e, ToolStart) and e.tool_use_id not in finished
    }
    # The ledger knows of writes that started before their tool_start was logged.
    attempt: str | None = None
    for call_id, record in writes.items():
        if record.turn_index == turn_index and record.status != "done" and call_id not in finished:
            in_flight.setdefault(call_id, record.tool)
            attempt = attempt or record.attempt_id
    if not in_flight:
        return TurnComplete(stop_reason="interrupted", turn_index=turn_index)
    names = ", ".join(f"{name} ({tool_use_id})" for tool_use_id, name in in_flight.items())
    return ErrorEvent(
        code="tool_interrupted",
        message=(
            f"the stream was cut while tools were running: {names}; "
            "a write among them has an unknown outcome and was not run again"
        ),
        attempt_id=attempt,
    )
