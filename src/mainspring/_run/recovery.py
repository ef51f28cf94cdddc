"""Crash recovery: the state of a run whose process died, repaired on record.

Ledger entries still ``started`` become ``unknown`` (a write is never run
twice); the calls of a step that was executing get results (the one gathered
before the crash, the result a finished write left in the ledger, or an error
naming the attempt); a paused turn stays paused.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from operator import attrgetter

from mainspring.context.compiler import ContextCompiler
from mainspring.messages import Message, ToolResultPart
from mainspring.state import Call, SessionState, WriteRecord
from mainspring.stores.base import SessionStore, SpendHolds

__all__ = ["recover", "recover_interrupted"]

log = logging.getLogger("mainspring.session")


async def recover(
    state: SessionState, context: ContextCompiler[Message], sessions: SessionStore | None
) -> None:
    """Repair the state left by a run whose process died, on record (in ``sessions``).

    The repaired results join ``context``'s transcript (the state's messages).
    Spend the dead run reserved for auto-approved writes that never started
    (no ledger entry) is given back to the session's cap.
    """
    unknown = recover_interrupted(state, lambda m: context.append((m,)))
    if unknown:
        log.warning(
            "session %s: writes of unknown outcome after a crash: %s",
            state.session_id,
            ", ".join(f"{r.tool} {r.key} attempt={r.attempt_id}" for r in unknown),
        )
    if sessions is None:
        return
    for record in unknown:
        await sessions.record_write(state.session_id, record)
    store: object = sessions
    if isinstance(store, SpendHolds):
        total = await store.release_holds(state.session_id, "auto", set(state.writes))
        if total is not None:
            state.auto_spent_usd = total
    await sessions.save(state)


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
