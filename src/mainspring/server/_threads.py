"""Sessions named by a UI protocol: an AI SDK chat ``id``, an AG-UI ``threadId``.

A UI client names its conversation itself. The server maps that name to the
session of the same id: on first use it is created, owned by the caller;
afterwards only its owner reaches it (to anyone else it does not exist,
404). Creation is serialised through the run lock, so two workers (or two
principals racing for one name) never both create it and one never
overwrites the other's session.
"""

from __future__ import annotations

import re

import anyio
from pydantic import JsonValue

from mainspring.errors import ConfigError, SessionBusy
from mainspring.messages import ToolCallPart
from mainspring.server._auth import Principal
from mainspring.server._host import SessionHost
from mainspring.session import Session

__all__ = [
    "CLIENT_ID",
    "THREAD_ID",
    "check_thread_id",
    "find_thread",
    "open_thread",
    "tool_calls_of",
]

CLIENT_ID = "client_id"
"""The ``meta`` key of a user message for the id its UI client gave it (AG-UI, AI SDK)."""

THREAD_ID = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$"
"""What a chat or thread id may be: 1-128 letters, digits, ``-`` and ``_``."""

_THREAD = re.compile(THREAD_ID)
_CREATE_TRIES = 50


def check_thread_id(thread_id: str) -> str:
    """``thread_id`` if it is a valid chat/thread id.

    Raises:
        ConfigError: It is not (400).
    """
    if not _THREAD.match(thread_id):
        raise ConfigError(
            f"{thread_id[:80]!r} is not a valid chat id: 1-128 letters, digits, '-' and '_'"
        )
    return thread_id


async def open_thread(host: SessionHost, principal: Principal, thread_id: str) -> Session:
    """``principal``'s session ``thread_id``, created on first use.

    Raises:
        ConfigError: Not a valid id.
        NotFound: The id names another principal's session.
        SessionBusy: Another request is creating it right now and did not finish.
    """
    check_thread_id(thread_id)
    if host.runs.active(thread_id) is not None:
        return await host.open(principal, thread_id)
    sessions, locks = host.stores.sessions, host.stores.locks
    assert sessions is not None and locks is not None
    state = await sessions.load(thread_id)
    if state is not None:
        return await host.open(principal, thread_id)
    key = f"{thread_id}#create"
    for _ in range(_CREATE_TRIES):
        if await locks.acquire(key, host.worker, ttl=host.config.lock_ttl):
            break
        await anyio.sleep(0.05)
    else:
        raise SessionBusy(f"session {thread_id!r} is being created; retry")
    try:
        if await sessions.load(thread_id) is not None:
            return await host.open(principal, thread_id)
        return await host.create(principal, thread_id)
    finally:
        await locks.release(key, host.worker)


async def find_thread(host: SessionHost, principal: Principal, thread_id: str) -> Session | None:
    """``principal``'s session ``thread_id``, or ``None`` when no session has the id yet.

    Raises:
        ConfigError: Not a valid id.
        NotFound: The id names another principal's session.
    """
    check_thread_id(thread_id)
    if host.runs.active(thread_id) is None:
        assert host.stores.sessions is not None
        if await host.stores.sessions.load(thread_id) is None:
            return None
    return await host.open(principal, thread_id)


def tool_calls_of(session: Session) -> dict[str, tuple[str, dict[str, JsonValue]]]:
    """``{tool_use_id: (name, arguments)}`` of every tool call in the session's history."""
    calls: dict[str, tuple[str, dict[str, JsonValue]]] = {}
    for message in session.state.messages:
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                calls[part.id] = (part.name, dict(part.arguments))
    return calls
