"""Following a stream from its checkpoint log: what is on record, then what is still to come.

``Session.send(resume_stream_id=...)`` replays a stream's log and then follows
it while its run goes on (in this process, or on a worker holding the
session's lock), ending with its terminal event: the original one, or one
synthesized for a run that died (see :func:`~mainspring.replay.synthesize_terminal`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass

import anyio

from mainspring.errors import StoreError
from mainspring.events import ApprovalExpiring, ErrorEvent, Event, TurnComplete
from mainspring.replay import has_terminal, synthesize_terminal
from mainspring.state import SessionState
from mainspring.stores.base import CheckpointStore, RunLock, SessionStore, load_after

__all__ = ["Followed", "follow"]

POLL = 0.05
"""Seconds between two reads of a log whose run goes on elsewhere."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Followed:
    """The session a followed stream belongs to, as data and callbacks."""

    session_id: str
    sessions: SessionStore | None
    lock: RunLock | None
    state: Callable[[], SessionState]
    """The session's state now (a run may replace it with a fresher one)."""
    live: Callable[[], str | None]
    """The stream this process runs for the session now, if any."""
    recover: Callable[[], Awaitable[None]]
    """Repair, on record, the state of a run that died (see :mod:`mainspring._run.recovery`)."""
    expiring: Callable[[SessionState], ApprovalExpiring | None] = lambda state: None
    """The warning due now for the action the session waits on (see
    :func:`mainspring.approvals.expiring`); a followed paused stream yields it
    just before its ``pending_action``."""


async def follow(
    store: CheckpointStore, stream_id: str, session: Followed
) -> AsyncGenerator[Event, None]:
    """The stream's events on record, then the rest of them as its run goes on.

    Raises:
        StoreError: No log holds the stream and the session does not know it.
    """
    events = await store.load(stream_id)
    if not events and session.state().active_stream != stream_id:
        ended = await _ended_terminal(session, stream_id)
        if ended is None:
            raise StoreError(f"no checkpoint for stream {stream_id!r} (unknown or expired)")
        yield ended  # it ended naturally and its log was cleared
        return
    # (An empty log of the session's active stream: it died before logging anything.)
    warn_at = _pause_position(events)
    for position, event in enumerate(events):
        if position == warn_at:
            warning = session.expiring(session.state())
            if warning is not None:
                yield warning
        yield event
    seen = len(events)
    while not has_terminal(events) and await _still_running(session, stream_id):
        await anyio.sleep(POLL)
        # A poll reads from the last event seen on (that one and the new ones, not
        # the whole log); if even that one is gone, the log was cleared.
        fresh = (
            await load_after(store, stream_id, seen - 1) if seen else await store.load(stream_id)
        )
        if seen and not fresh:  # cleared: it ended naturally meanwhile
            ended = await _ended_terminal(session, stream_id)
            if ended is not None:
                yield ended
                return
            events = []
            break
        new = fresh[1:] if seen else fresh
        for event in new:
            yield event
        events.extend(new)
        seen = len(events)
    if has_terminal(events):
        return
    if session.state().active_stream == stream_id:
        await session.recover()
    state = session.state()
    terminal = synthesize_terminal(events, writes=state.writes, turn_index=state.turn_index)
    await store.append(stream_id, terminal)
    yield terminal


def _pause_position(events: list[Event]) -> int | None:
    """Where a paused stream's ``pending_action`` is (an expiry warning goes just before it)."""
    last = events[-1] if events else None
    if isinstance(last, TurnComplete) and last.stop_reason == "pending_action":
        return len(events) - 2
    return None


async def _ended_terminal(session: Followed, stream_id: str) -> TurnComplete | ErrorEvent | None:
    state = session.state()
    if session.sessions is not None and session.live() is None:
        state = await session.sessions.load(session.session_id) or state
    return state.last_terminal if state.last_stream == stream_id else None


async def _still_running(session: Followed, stream_id: str) -> bool:
    if session.live() == stream_id:
        return True
    lock = session.lock
    if lock is None or session.sessions is None:
        return False
    if await lock.holder(session.session_id) is None:
        return False
    fresh = await session.sessions.load(session.session_id)
    return fresh is not None and fresh.active_stream == stream_id
