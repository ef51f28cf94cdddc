"""Crash recovery: the state of a run whose process died, repaired on record.

Ledger entries still ``started`` become ``unknown`` (a write is never run
twice), except a write a paused turn suspended on a nested decision (it runs
again when the decision comes); the calls of a step that was executing get
results (the one gathered before the crash, the result a finished write left
in the ledger, or an error naming the attempt); a paused turn stays paused.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from operator import attrgetter

from mainspring.context.compiler import ContextCompiler
from mainspring.messages import Message, ToolResultPart
from mainspring.state import Call, SessionState, Turn, WriteRecord
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
            state.set_auto_spent(total)
    await sessions.save(state)


def recover_interrupted(
    state: SessionState, append: Callable[[Message], None] | None = None
) -> list[WriteRecord]:
    """Repair the state of a run whose process died; return the writes of unknown outcome.

    Ledger entries still ``started`` become ``unknown`` (never re-run), but
    for a write the paused turn suspended on a nested decision. The
    calls of a step that was executing get results: the one gathered before
    the crash, the result a finished write left in the ledger, or an error
    saying the call was interrupted (naming the attempt for writes of unknown
    outcome). A paused turn stays paused; any other turn is over. The results
    go to ``append`` (the session's transcript), or onto ``state.messages``.
    """
    turn = state.turn
    parked = _parked(turn)
    unknown: list[WriteRecord] = []
    for key, record in list(state.writes.items()):
        if record.status == "started" and key != parked:
            state.ledger(replace(record, status="unknown"))
            unknown.append(state.writes[key])
    if turn is not None and turn.status == "executing":
        results = [
            _recovered_result(state, call) for call in sorted(turn.calls, key=attrgetter("index"))
        ]
        (append or state.messages.append)(Message.tool_results(results))
    state.finish_turn()
    state.clear_stream()
    return unknown


def _parked(turn: Turn | None) -> str | None:
    """The call id of a write the paused ``turn`` suspended on a nested decision, if any.

    It did not die mid-run: it stopped itself to wait, and runs again (handed
    the decision) when the turn resumes, so its ``started`` entry stands.
    """
    if turn is None or turn.status != "paused" or turn.pending is None:
        return None
    return turn.pending.tool_use_id if turn.pending.nested is not None else None


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
