"""Where an audit log lives: the AuditStore protocol and its in-memory implementation.

A store keeps, per log name, the entries (``seq`` → the entry's stored line)
and, apart from them, the log's head. It knows nothing of hashes or keys:
:meth:`AuditStore.append_audit` hands the current head to a *seal* — a pure,
synchronous function that returns the next entry and the new head — and stores
both atomically. The sequence number and the previous hash therefore come from
what the store holds at that instant, never from a counter in one process: two
workers appending at once make one chain (a transaction, a Lua check-and-set,
a row lock, depending on the backend). A store may call the seal more than
once (an optimistic backend retries when another append came between).

Implementations: :class:`InMemoryAuditStore` (here),
:class:`~mainspring.stores.sqlite_audit.SQLiteAuditStore`,
:class:`~mainspring.stores.redis.RedisAuditStore` and
:class:`~mainspring.stores.postgres_audit.PostgresAuditStore`;
:func:`~mainspring.stores.urls.open_audit_store` picks one by URL.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from mainspring.errors import StoreError

__all__ = ["AuditStore", "InMemoryAuditStore", "Seal", "Sealed"]


@dataclass(frozen=True, slots=True)
class Sealed:
    """What one append stores: the entry at ``seq`` and the log's new head."""

    seq: int
    entry: str
    head: str


Seal = Callable[[str | None], Sealed]
"""The next entry and head, given the stored head (``None``: the log is empty)."""


class AuditStore(Protocol):
    """Append-only audit logs with their heads kept apart."""

    async def append_audit(self, log: str, seal: Seal) -> Sealed:
        """Store ``seal(head)`` as the next entry of ``log`` and its head, atomically.

        ``seal`` sees the head as stored when the append takes effect; its
        entry's ``seq`` must be the next one (a store refuses a ``seq`` it
        holds already, so a chain never forks).

        Raises:
            StoreError: The store failed; nothing was appended.
        """
        ...

    async def audit_entries(
        self, log: str, *, after: int = 0, limit: int = 1000
    ) -> list[tuple[int, str]]:
        """``(seq, entry)`` of ``log``'s entries with ``seq > after``, in ``seq`` order."""
        ...

    async def audit_head(self, log: str) -> str | None:
        """``log``'s stored head, ``None`` when it has none."""
        ...

    async def aclose(self) -> None:
        """Release the store's connections."""
        ...


class InMemoryAuditStore:
    """Audit logs in this process's memory (tests, one-process demos).

    An append runs without awaiting anything, so it is atomic on the event loop.
    """

    def __init__(self) -> None:
        self.entries: dict[str, dict[int, str]] = {}
        """Entries by log and ``seq`` (open, so a test can tamper with them)."""
        self.heads: dict[str, str] = {}
        """Heads by log (as above)."""

    async def append_audit(self, log: str, seal: Seal) -> Sealed:
        """See :meth:`AuditStore.append_audit`."""
        sealed = seal(self.heads.get(log))
        rows = self.entries.setdefault(log, {})
        if sealed.seq in rows:
            raise StoreError(f"audit log {log!r} already holds entry {sealed.seq}")
        rows[sealed.seq] = sealed.entry
        self.heads[log] = sealed.head
        return sealed

    async def audit_entries(
        self, log: str, *, after: int = 0, limit: int = 1000
    ) -> list[tuple[int, str]]:
        """See :meth:`AuditStore.audit_entries`."""
        rows = self.entries.get(log, {})
        return [(seq, rows[seq]) for seq in sorted(s for s in rows if s > after)][:limit]

    async def audit_head(self, log: str) -> str | None:
        """See :meth:`AuditStore.audit_head`."""
        return self.heads.get(log)

    async def aclose(self) -> None:
        """Nothing to release."""
