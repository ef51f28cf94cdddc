"""Store protocols: CheckpointStore, SessionStore, RunLock.

- **CheckpointStore**: an append-only event log per stream id, so a client
  can resume a stream after a reload, on any worker.
  A follower reads a log's new events with :func:`load_after`: natively
  from a store that has :class:`TailLoad`, else by slicing ``load()``.
- **SessionStore**: a session's durable state. The transcript is append-only,
  so ``save`` may write only the messages it has not stored yet. Decisions and
  the write ledger have their own atomic operations, so that two workers
  receiving the same decision apply it once, and a write is on record before
  and after it runs.
- **RunLock**: one active run per session, across workers, with expiry.
- **TailLoad** (optional): a checkpoint store that reads a log from a
  position on, so a follower's poll costs the new events, not the whole log.
- **SpendLedger** (optional): a session's running totals (auto-approved
  spend, cost) added to atomically in the store, so the auto-spend cap and the
  budget hold across workers and processes, with or without a run lock.
- **SpendHolds** (optional): a spend ledger whose adds can be held under a
  key (an auto-approved write's call id) until the write starts, so crash
  recovery gives back what a write that never started reserved.
- **ClaimRelease** (optional): a session store that can drop a decision
  claim nobody consumed (its run died or was cancelled between the claim and
  the save that consumes it), so the session's next decider is not bound to it.
- **JointCommit** (optional): a session store that can put a whole step
  boundary on record in one transaction — the state, ledger entries and the
  events of a checkpoint store it shares a database with (:class:`Commit`).
  Without it a session makes the same writes one store at a time.
- **JointLease** (optional): a joint session store whose database also holds
  a run lock's leases (SQLite files), so the commit that ends a run drops its
  lease too.
- **SharedRecords** (optional): small records every worker sees, each with an
  owner and an expiry, added only when absent and taken once — the
  at-most-once guards of the doors (a signed request's nonce, a used approval
  round, a paused remote call) live there, not in one process's memory.
- **TaskRecords** (optional): the server's A2A task records, opaque bytes
  per ``(owner, task id)``, replaced by each save and expiring a while after
  their last change, so every worker reads, decides and lists the same tasks.

Every implementation must pass ``tests/stores/test_contract.py``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Literal, Protocol, runtime_checkable

from mainspring._lowlevel.frozen import dataclass
from mainspring.events import Event
from mainspring.state import SessionState, SpendKind, WriteRecord

__all__ = [
    "SCHEMA_VERSION",
    "CheckpointStore",
    "ClaimRelease",
    "Commit",
    "JointCommit",
    "JointLease",
    "RecordAdded",
    "RunLock",
    "SessionStore",
    "SharedRecords",
    "SpendHolds",
    "SpendKind",
    "SpendLedger",
    "TailLoad",
    "TaskRecords",
    "load_after",
]

SCHEMA_VERSION = 2
"""Version of the persisted layout; a store written by a newer one refuses to open.

2: a SQLite checkpoint row may hold several events (a JSON array); a SQLite file
of version 1 is upgraded when opened (its rows load as they are). The other
stores' layouts are those of version 1.
"""


@runtime_checkable
class CheckpointStore(Protocol):
    """An append-only event log per stream id, for stream resume."""

    async def append(self, stream_id: str, event: Event) -> None:
        """Append one event; durable when it returns (one round trip for remote stores)."""
        ...

    async def append_many(self, stream_id: str, events: Sequence[Event]) -> None:
        """Append events in order, all durable when it returns, in one round trip.

        A session appends each batch of events it is about to yield at once.
        """
        ...

    async def load(self, stream_id: str) -> list[Event]:
        """Every event of the stream, in order (empty if unknown or expired).

        Raises:
            CheckpointCorrupt: A record cannot be decoded (names stream and offset).
        """
        ...

    async def clear(self, stream_id: str) -> None:
        """Drop the stream's log."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


@runtime_checkable
class TailLoad(Protocol):
    """A checkpoint store that reads a log from a position on (see :func:`load_after`).

    Optional: a store without it is read by slicing :meth:`CheckpointStore.load`,
    which costs the whole log on every poll of a follower.
    """

    async def load_after(self, stream_id: str, cursor: int) -> list[Event]:
        """The stream's events at positions ``cursor`` and after: ``load(stream_id)[cursor:]``.

        Positions count events from 0 (a batch appended at once is several
        positions), so a reader that has seen ``n`` events passes ``n``. Past
        the end, or for an unknown or expired stream, the result is empty.

        Raises:
            ValueError: ``cursor`` is negative (or not an ``int``).
            CheckpointCorrupt: A record it reads cannot be decoded (names the
                stream and the offset in the whole log).
        """
        ...


async def load_after(store: CheckpointStore, stream_id: str, cursor: int) -> list[Event]:
    """``store.load(stream_id)[cursor:]``, read natively where ``store`` is a :class:`TailLoad`.

    The fallback for a store without :meth:`TailLoad.load_after` (a third-party
    store written before it) loads the whole log and slices it: the same events,
    at the cost of the whole log.

    Raises:
        ValueError: ``cursor`` is negative (or not an ``int``).
        CheckpointCorrupt: A record cannot be decoded.
    """
    if isinstance(store, TailLoad):
        return await store.load_after(stream_id, cursor)
    if type(cursor) is not int or cursor < 0:
        raise ValueError(f"a log cursor is an int of 0 or more, not {cursor!r}")
    return (await store.load(stream_id))[cursor:]


@runtime_checkable
class SessionStore(Protocol):
    """Durable session state by session id."""

    async def save(self, state: SessionState) -> None:
        """Write the state.

        Decisions and ledger entries already recorded through
        :meth:`claim_decision` and :meth:`record_write` are kept (merged, never
        lost): ``save`` only adds entries the store lacks, so a stale state can
        never move a write back from ``done`` to ``started``.
        """
        ...

    async def load(self, session_id: str) -> SessionState | None:
        """The saved state with every recorded decision and ledger entry, or ``None``."""
        ...

    async def delete(self, session_id: str) -> None:
        """Forget a session and everything recorded for it."""
        ...

    async def session_ids(self, *, limit: int = 100, principal: str | None = None) -> list[str]:
        """The ids of stored sessions, sorted, at most ``limit`` of them.

        With ``principal``, only the sessions whose ``SessionState.principal`` it is.
        """
        ...

    async def claim_decision(self, session_id: str, attempt_id: str, decision: str) -> bool:
        """Atomically record the decision for ``attempt_id``.

        Returns ``False`` (and records nothing) when a decision for it was
        already recorded, by this worker or any other.
        """
        ...

    async def record_write(self, session_id: str, record: WriteRecord) -> None:
        """Durably record one write-ledger entry (upsert by ``record.key``)."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


@runtime_checkable
class RunLock(Protocol):
    """A lease on a key (a session id), held by one owner until released or expired."""

    async def acquire(self, key: str, owner: str, *, ttl: float) -> bool:
        """Take the lease for ``ttl`` seconds; ``False`` if another owner holds it."""
        ...

    async def refresh(self, key: str, owner: str, *, ttl: float) -> bool:
        """Extend a lease this owner holds; ``False`` if it lost it."""
        ...

    async def release(self, key: str, owner: str) -> None:
        """Give the lease up (a no-op unless this owner holds it)."""
        ...

    async def holder(self, key: str) -> str | None:
        """The current owner, or ``None`` when free or expired."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


@dataclass(frozen=True, slots=True)
class Commit:
    """What one step boundary of a run puts on record, all or nothing.

    Applied in this order where it is not one transaction: ``clear``, ``writes``,
    ``state``, ``events`` — so a ledger entry is on record before anything that
    follows it, and the run is on record before its first event.
    """

    session_id: str
    state: SessionState | None = None
    """The state to save (``None``: unchanged since the last commit)."""
    writes: tuple[WriteRecord, ...] = ()
    """Ledger entries to upsert."""
    stream_id: str | None = None
    """The stream ``events`` belong to."""
    events: tuple[Event, ...] = ()
    """Events to append to the stream's checkpoint log."""
    clear: str | None = None
    """A finished stream whose log is dropped."""
    sync: bool = False
    """On disk when the commit returns, even across a power loss (a ledger entry)."""
    release: tuple[str, str] | None = None
    """A run lock's lease, ``(key, owner)``, dropped with the commit (the run's end).
    Set only for a store whose :meth:`JointLease.holds` said it holds the lock."""


@runtime_checkable
class JointCommit(Protocol):
    """A session store that commits a step boundary in one transaction."""

    def joins(self, checkpoints: CheckpointStore | None) -> bool:
        """Whether :meth:`commit` can write ``checkpoints``' log too (or there is none)."""
        ...

    async def commit(self, commit: Commit, checkpoints: CheckpointStore | None) -> None:
        """Apply ``commit`` atomically; events go to ``checkpoints``' log.

        Only called when :meth:`joins` said so. Ledger entries upsert like
        :meth:`SessionStore.record_write`, the state saves like
        :meth:`SessionStore.save`. The state is encoded before the first
        ``await``: the run goes on changing it while the commit is on its way.
        """
        ...


@runtime_checkable
class JointLease(Protocol):
    """A :class:`JointCommit` store that holds a run lock's leases in its database."""

    def holds(self, lock: RunLock | None) -> bool:
        """Whether a :class:`Commit` can drop ``lock``'s leases (its ``release``)."""
        ...


@runtime_checkable
class SpendLedger(Protocol):
    """A session store that keeps spend totals with an atomic add."""

    async def add_spend(
        self,
        session_id: str,
        kind: SpendKind,
        amount: float,
        *,
        cap: float | None = None,
        floor: float = 0.0,
    ) -> float | None:
        """Add ``amount`` to the session's ``kind`` total in one atomic step.

        The total first rises to ``floor`` if it is below (what this worker
        already knows was spent). With ``cap``, an add that would take the total
        over it is refused: nothing changes and the result is ``None``;
        otherwise the result is the new total, every worker's adds included.
        """
        ...


RecordAdded = Literal["added", "exists", "full"]
"""What :meth:`SharedRecords.put_record` did: added it, or refused it because a live
record has that key (``exists``) or its owner holds ``limit`` live ones (``full``)."""


@runtime_checkable
class SharedRecords(Protocol):
    """Small records shared by every worker of a deployment, each with an owner and an expiry.

    A record lives under ``(kind, key)``; ``kind`` is a short name (letters,
    digits, ``_``, ``-``) that keeps the users of the store apart. Each
    operation is one atomic step in the store, so two workers putting the same
    key are told apart (one ``added``, the other ``exists``), and two workers
    taking the same record get it once. An expired record is as good as absent.

    - A claim-once guard (a nonce, a used approval) is a record with an empty
      value: ``put_record(...) == "added"`` admits the act, anything else refuses it.
    - A parked item (a paused remote call) is a record with a value: put with
      its owner and a per-owner ``limit``, listed by owner, taken once.
    """

    async def put_record(
        self,
        kind: str,
        key: str,
        value: str,
        *,
        owner: str,
        ttl: float,
        limit: int | None = None,
    ) -> RecordAdded:
        """Add the record for ``ttl`` seconds unless a live one has this key.

        With ``limit``, it is refused (``full``) when ``owner`` already holds
        that many live records of ``kind``. A refused put changes nothing.

        Raises:
            ConfigError: ``kind`` is not a short name, ``ttl`` not positive.
        """
        ...

    async def take_record(self, kind: str, key: str) -> tuple[str, str] | None:
        """Remove the live record and return ``(owner, value)``; ``None`` if there is none.

        Of concurrent takes of one record, exactly one gets it.
        """
        ...

    async def owned_records(
        self, kind: str, owner: str, *, limit: int = 1000
    ) -> list[tuple[str, str]]:
        """``(key, value)`` of ``owner``'s live records of ``kind``, sorted by key.

        At most ``limit`` of them.
        """
        ...


@runtime_checkable
class SpendHolds(Protocol):
    """A :class:`SpendLedger` that can hold an add under a key until it is settled.

    An auto-approved write reserves its amount against the session cap before
    it runs; held under the write's call id, the reservation can be given back
    when the process died before the write started (its ledger has no entry).
    """

    async def add_spend(
        self,
        session_id: str,
        kind: SpendKind,
        amount: float,
        *,
        cap: float | None = None,
        floor: float = 0.0,
        hold: str | None = None,
    ) -> float | None:
        """As :meth:`SpendLedger.add_spend`; with ``hold``, the add is also kept as a hold.

        The hold (``amount`` under key ``hold``) is recorded in the same atomic
        step as the add: there is never a counted amount without its hold.
        """
        ...

    async def release_holds(
        self, session_id: str, kind: SpendKind, started: Collection[str]
    ) -> float | None:
        """Settle the session's holds of ``kind`` in one atomic step.

        A hold whose key is not in ``started`` (its write never started) is
        subtracted from the total; every hold is dropped. Returns the total
        after it (``None`` when the session has no ``kind`` total).
        """
        ...


@runtime_checkable
class ClaimRelease(Protocol):
    """A session store that can drop a decision claim that was never consumed."""

    async def release_claim(self, session_id: str, attempt_id: str, decision: str) -> bool:
        """Drop the claim of ``attempt_id`` if it is still ``decision``, atomically.

        Returns whether it was dropped. Called only by a run that holds the
        session's run lock and sees the turn still paused on the attempt: the
        run that claimed it is gone without consuming it.
        """
        ...


@runtime_checkable
class TaskRecords(Protocol):
    """A2A task records shared by every worker: opaque bytes per ``(owner, task id)``.

    The server keeps the A2A SDK's task records here (serialized by the
    caller) when its session store holds them. Records of one owner never
    show under another. A record expires ``ttl`` seconds after its last save;
    an expired record is as good as absent and is pruned lazily.
    """

    async def save_task(self, owner: str, task_id: str, data: bytes, *, ttl: float) -> None:
        """Save (or replace) the record, live for ``ttl`` seconds from now.

        Raises:
            ConfigError: ``ttl`` is not positive, or an argument has the wrong type.
        """
        ...

    async def load_task(self, owner: str, task_id: str) -> bytes | None:
        """``owner``'s live record ``task_id``, or ``None``.

        Raises:
            StoreError: The stored row is damaged (not bytes).
        """
        ...

    async def owned_tasks(self, owner: str) -> list[tuple[str, bytes]]:
        """``(task id, data)`` of every live record of ``owner``, sorted by task id.

        Raises:
            StoreError: A stored row is damaged (not bytes).
        """
        ...

    async def delete_task(self, owner: str, task_id: str) -> None:
        """Forget ``owner``'s record ``task_id`` (nothing if there is none)."""
        ...
