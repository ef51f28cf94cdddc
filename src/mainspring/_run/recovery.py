"""Crash recovery: the state of a run whose process died, repaired on record.

Ledger entries still ``started`` become ``unknown`` (a write is never run
twice); the calls of a step that was executing get results (the one gathered
before the crash, the result a finished write left in the ledger, or an error
naming the attempt); a paused turn stays paused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from operator import attrgetter

from mainspring.messages import Message, ToolResultPart
from mainspring.state import Call, SessionState, WriteRecord

__all__ = ["recover_interrupted"]


def recover_interrupted(
    state: SessionState, append: Callable[[Message], None] | None = None
) -> list[WriteRecord]:
    """Repair the state of a run whose process died; return the writes of unknown outcome.

    Ledger entries still ``started`` become ``unknown`` (never re-run). The
    calls of a step that was executing get results: the one gathered before
    the crash, the result a finished write left in the ledger, or an error
    saying the call was interrupted (naming the attempt for writes of unknown
    outcome). A paused turn stays paused; any other turn is over. The results
    go to ``append`` (the session's transcript), or onto ``state.messages``.
    """
    unknown: list[WriteRecord] = []
    for key, record in list(state.writes.items()):
        if record.status == "started":
            state.writes[key] = replace(record, status="unknown")
            unknown.append(state.writes[key])
    turn = state.turn
    if turn is not None and turn.status == "executing":
        results = [
            _recovered_result(state, call) for call in sorted(turn.calls, key=attrgetter("index"))
        ]
        (append or state.messages.append)(Message.tool_results(results))
    if turn is not None and turn.status != "paused":
        state.turn = None
    state.active_stream = None
    return unknown


def _recovered_result(state: SessionState, call: Call) -> ToolResultPart:
    if call.result is not None:
        return call.result
    entry = state.writes.get(call.id)
    if entry is not None and entry.result is not None:
        return entry.result
    if entry is not None:
        attempt = f" (attempt {entry.attempt_id})" if entry.attempt_id else ""
        note = f"was interrupted while running; its outcome is unknown{attempt}"
    else:
        note = "did not run: the process running the turn stopped"
    return ToolResultPart(
        tool_use_id=call.id, name=call.name, content=f"tool {call.name!r} {note}", is_error=True
    )
