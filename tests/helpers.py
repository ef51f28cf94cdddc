"""Helpers shared by engine tests."""

from __future__ import annotations

from mainspring import Event, Session
from mainspring.decisions import Decision
from mainspring.testing import collect, pending_of

__all__ = ["collect", "pending_of", "resume", "send", "types"]


async def send(session: Session, message: str) -> list[Event]:
    return await collect(session.send(message))


async def resume(session: Session, attempt_id: str, decision: Decision) -> list[Event]:
    return await collect(session.resume(attempt_id, decision))


def types(events: list[Event]) -> list[str]:
    return [e.type for e in events]
