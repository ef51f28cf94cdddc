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
    in_flight = [e for e in events if isinstance(e, ToolStart) and e.tool_use_id not in finished]
    if not in_flight:
        return TurnComplete(stop_reason="interrupted", turn_index=turn_index)
    names: list[str] = []
    attempt: str | None = None
    for start in in_flight:
        record = writes.get(f"{turn_index}:{start.tool_use_id}")
        if record is not None and record.attempt_id and attempt is None:
            attempt = record.attempt_id
        names.append(f"{start.name} ({start.tool_use_id})")
    return ErrorEvent(
        code="tool_interrupted",
        message=(
            "the stream was cut while tools were running: "
            + ", ".join(names)
            + "; a write among them has an unknown outcome and was not run again"
        ),
        attempt_id=attempt,
    )
