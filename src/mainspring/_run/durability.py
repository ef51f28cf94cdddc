"""Where a run makes its progress durable: the protocol a session with a store meets.

The loop and the dispatcher save through it (the state at each point a crash
must not lose, each write's ledger entries, spend added across workers); the
session's journal implements it, and so does a direct caller's.
"""

from __future__ import annotations

from typing import Protocol

from mainspring.state import SpendKind, WriteRecord

__all__ = ["Durability"]


class Durability(Protocol):
    """Where a run makes its progress durable (a session with a SessionStore)."""

    async def save(self, *, defer: bool = False) -> None:
        """Persist the session state as it is now.

        With ``defer``, the state may go on record with the next commit instead
        (the next batch of events, ledger entry or terminal event): for the step
        boundaries no side effect depends on. A commit that :meth:`save`,
        :meth:`record_write` or :meth:`flush` starts is shielded by the
        implementation: a cancellation never leaves it half-waited for.
        """
        ...

    async def record_write(self, record: WriteRecord) -> None:
        """Persist one write-ledger entry."""
        ...

    async def flush(self) -> None:
        """A deferred save now, unless a later commit is certain to carry it."""
        ...

    async def add_spend(
        self,
        kind: SpendKind,
        amount: float,
        *,
        cap: float | None,
        floor: float,
        hold: str | None = None,
    ) -> float | None:
        """Add to the session's spend total in the store, atomically across workers.

        ``None`` when ``cap`` refused it (see :class:`~mainspring.stores.base.SpendLedger`).
        ``hold`` (a write's call id) keeps the add as a hold that crash recovery
        gives back if the write never started (:class:`~mainspring.stores.base.SpendHolds`).
        """
        ...
