"""In-memory stores, for tests and single-process use.

Both go through the JSON codec, so anything that cannot be persisted fails
here first, not in a durable backend later.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pydantic import JsonValue

from mainspring.codec import decode, encode, event_from_dict, event_to_dict
from mainspring.events import Event
from mainspring.state import SessionState

__all__ = ["InMemoryCheckpointStore", "InMemorySessionStore"]


class InMemoryCheckpointStore:
    """Event logs in a dict, each expiring ``ttl`` seconds after its last append."""

    def __init__(self, *, ttl: float = 300.0, clock: Callable[[], float] = time.monotonic) -> None:
        """Create an empty store (sliding TTL, 5 minutes by default)."""
        self._ttl = ttl
        self._clock = clock
        self._logs: dict[str, tuple[float, list[dict[str, JsonValue]]]] = {}

    def _expire(self) -> None:
        now = self._clock()
        for key in [k for k, (seen, _) in self._logs.items() if now - seen > self._ttl]:
            del self._logs[key]

    async def append(self, stream_id: str, event: Event) -> None:
        """Append one event and refresh the stream's TTL."""
        self._expire()
        _, log = self._logs.get(stream_id, (0.0, []))
        log.append(event_to_dict(event))
        self._logs[stream_id] = (self._clock(), log)

    async def load(self, stream_id: str) -> list[Event]:
        """Every event of the stream, in order."""
        self._expire()
        entry = self._logs.get(stream_id)
        return [event_from_dict(e) for e in entry[1]] if entry else []

    async def clear(self, stream_id: str) -> None:
        """Drop the stream's log."""
        self._logs.pop(stream_id, None)


class InMemorySessionStore:
    """Session states as JSON data in a dict."""

    def __init__(self) -> None:
        """Create an empty store."""
        self._states: dict[str, JsonValue] = {}

    async def save(self, state: SessionState) -> None:
        """Replace the stored state."""
        self._states[state.session_id] = encode(state)

    async def load(self, session_id: str) -> SessionState | None:
        """The stored state, or ``None``."""
        data = self._states.get(session_id)
        return None if data is None else decode(SessionState, data)

    async def delete(self, session_id: str) -> None:
        """Forget a session."""
        self._states.pop(session_id, None)
