"""Helpers shared by engine tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

from mainspring import Event, PendingAction, Session
from mainspring.decisions import Decision
from mainspring.events import TERMINAL_EVENT_TYPES


async def collect(stream: AsyncIterator[Event]) -> list[Event]:
    """Every event of a stream, checking the terminal-event grammar."""
    events = [event async for event in stream]
    terminals = [e for e in events if e.type in TERMINAL_EVENT_TYPES]
    assert len(terminals) == 1, f"expected exactly one terminal event, got {terminals}"
    assert events[-1] is terminals[0], "the terminal event must be last"
    return events


async def send(session: Session, message: str) -> list[Event]:
    return await collect(session.send(message))


async def resume(session: Session, attempt_id: str, decision: Decision) -> list[Event]:
    return await collect(session.resume(attempt_id, decision))


def pending_of(events: list[Event]) -> PendingAction:
    found = [e for e in events if isinstance(e, PendingAction)]
    assert len(found) == 1, f"expected one pending_action, got {found}"
    return found[0]


def types(events: list[Event]) -> list[str]:
    return [e.type for e in events]
