"""Store protocols: CheckpointStore (a per-stream event log) and SessionStore."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from mainspring.events import Event
from mainspring.state import SessionState

__all__ = ["CheckpointStore", "SessionStore"]


@runtime_checkable
class CheckpointStore(Protocol):
    """An append-only event log per stream id, for stream resume."""

    async def append(self, stream_id: str, event: Event) -> None:
        """Append one event; must be durable when it returns."""
        ...

    async def load(self, stream_id: str) -> list[Event]:
        """Every event of the stream, in order (empty if unknown)."""
        ...

    async def clear(self, stream_id: str) -> None:
        """Drop the stream's log."""
        ...


@runtime_checkable
class SessionStore(Protocol):
    """Durable session state by session id."""

    async def save(self, state: SessionState) -> None:
        """Write the whole state (replacing the previous one)."""
        ...

    async def load(self, session_id: str) -> SessionState | None:
        """The saved state, or ``None``."""
        ...

    async def delete(self, session_id: str) -> None:
        """Forget a session."""
        ...
