"""SQLite stores: checkpoints, sessions and run locks in one database file.

The embedded durable default (one machine, any number of processes)::

    from mainspring.stores import SQLiteCheckpointStore, SQLiteSessionStore

    checkpoints = await SQLiteCheckpointStore.open("var/mainspring.db")
    sessions = await SQLiteSessionStore.open("var/mainspring.db")

Every store object holds one connection to the file (WAL journal, a busy
timeout) and runs one operation at a time on it; ``open_stores`` gives the
stores of one file one shared connection. An operation that does not have to
wait for another connection's write lock runs on the event loop (tens of
microseconds, less than a thread hop); one that would wait, and every fsynced
one (a claimed decision, a ledger entry), runs in a worker thread, so the
event loop never blocks on a lock or a disk flush; asyncio and trio alike.
Open one object per store and process; several processes may share the file.
Tables, created when missing:

- ``mainspring_meta``: the layout version (:data:`~mainspring.stores.base.SCHEMA_VERSION`).
- ``mainspring_checkpoints``: one row per append, ``(stream_id, seq)``: an event's
  JSON object, or the JSON array of the events appended together (``append_many``,
  a run's commit; schema version 2 — version 1 wrote one row per event, and both
  load).
- ``mainspring_sessions``: one row per session, the state without its transcript,
  decisions and write ledger; ``mainspring_messages``: the transcript, one row per
  message; ``mainspring_decisions``: keyed ``(session_id, attempt_id)``, so a
  decision is claimed once; ``mainspring_writes``: the write ledger.
- ``mainspring_locks``: one row per lease.
- ``mainspring_records``: shared records (``SharedRecords``); ``mainspring_tasks``:
  the server's A2A task records (``TaskRecords``), keyed ``(owner, task_id)``.

A new file makes ``mainspring_locks`` a ``WITHOUT ROWID`` table (a lease writes
one b-tree page, not a table's and its key index's) and ``mainspring_checkpoints``
a rowid table (rows go in at its end; only its key index takes them at random
places); a file made earlier keeps its layout, which every statement works on.

Rows hold JSON text from :mod:`mainspring.codec` (valid Unicode as is, text
with a lone surrogate ASCII-escaped), so that any Python string round-trips.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Collection, Sequence
from typing import Self, cast

from mainspring.codec import encode, event_to_dict
from mainspring.events import Event
from mainspring.memory import check_str
from mainspring.state import SessionState, WriteRecord
from mainspring.stores._log import check_cursor
from mainspring.stores._sqlite import (
    Clock,
    Database,
    StrPath,
    check_ttl,
    check_type,
    dumps,
    encoding,
    transaction,
)
from mainspring.stores._sqlite_log import Anchor, read_log
from mainspring.stores._sqlite_records import list_owned, put_record, take_record
from mainspring.stores._sqlite_rows import (
    ACQUIRE,
    REFRESH,
    RELEASE,
    Batch,
    Claim,
    Save,
    Step,
    add_spend,
    append_rows,
    changed,
    commit_group_synced,
    commit_step,
    delete_session,
    lease_holder,
    list_session_ids,
    load_state,
    release_claim,
    release_holds,
    save_state,
)
from mainspring.stores._sqlite_tasks import delete_task, load_task, owned_tasks, save_task
from mainspring.stores._transcript import KnownTranscripts, Stored, header
from mainspring.stores.base import CheckpointStore, Commit, RecordAdded, RunLock, SpendKind
from mainspring.stores.records import check_kind, check_record_ttl

__all__ = ["SQLiteCheckpointStore", "SQLiteRunLock", "SQLiteSessionStore"]

# ----------------------------------------------------------------- checkpoints


class SQLiteCheckpointStore:
    """Event logs in a table, each expiring ``ttl`` seconds after its last append.

    An append is one ``INSERT`` of one row (several events: a JSON array) at
    the next ``seq`` of its stream under SQLite's write lock: the one this object
    expects (its own last append's next, 0 for a stream it does not know), or
    if another appender took that one, after the stream's last row; so
    appenders in several processes never collide.
    ``synchronous=NORMAL``: a commit survives the process crashing, and the last
    ones may roll back on power loss, when the clients lose their streams too.

    Expiry is sliding and lazy, by wall clock: a stream whose last append is
    older than ``ttl`` is invisible and deleted by the next load of it or the
    periodic sweep; appending to it starts a new log (the rows after a gap of
    more than ``ttl``).
    """

    STREAMS = 1024
    """Streams whose next ``seq`` this object remembers."""

    def __init__(self, database: Database, *, ttl: float, clock: Clock) -> None:
        """Wrap an open database; use :meth:`open`."""
        self._db = database
        self._ttl = check_ttl(ttl)
        self._clock = clock
        self._next_sweep = 0.0
        self._next_seq: OrderedDict[str, int] = OrderedDict()
        """The next ``seq`` of the streams this object appended to last (a guess: see
        :func:`append_rows`), for its last :attr:`STREAMS` streams."""
        self._anchors: OrderedDict[str, Anchor] = OrderedDict()
        """Where this object's last read of each of its last :attr:`STREAMS` streams
        ended, for the next read from there on (see ``_sqlite_log``)."""

    @classmethod
    async def open(cls, path: StrPath, *, ttl: float = 300.0, clock: Clock = time.time) -> Self:
        """Open (or create) the store in the SQLite file at ``path``.

        Args:
            path: The database file; it and its directory are created if missing.
            ttl: Seconds a stream lives after its last append (``math.inf``: forever).
            clock: Wall-clock time, shared by every process using the file.

        Raises:
            StoreError: The file cannot be opened or is not a SQLite database.
            SchemaTooNew: The file was written by a newer mainspring.
        """
        ttl = check_ttl(ttl)
        return cls(await Database.open(path), ttl=ttl, clock=clock)

    async def append(self, stream_id: str, event: Event) -> None:
        """Append one event; committed when this returns."""
        await self.append_many(stream_id, (event,))

    async def append_many(self, stream_id: str, events: Sequence[Event]) -> None:
        """Append events in order, in one transaction, as one row."""
        check_str("stream_id", stream_id)
        for event in events:
            check_type("event", event, Event)
        if not events:
            return
        self.appended(
            stream_id, await self._db.run_inline(self._append, self._batch(stream_id, events))
        )

    def _batch(self, stream_id: str, events: Sequence[Event]) -> Batch:
        """Encode events for :func:`append_rows` (on the event loop: events are small)."""
        with encoding(f"an event of stream {stream_id!r}"):
            if len(events) == 1:
                data = dumps(event_to_dict(events[0]))
            else:  # one row: one JSON array, encoded in one call
                data = dumps([event_to_dict(event) for event in events])
        now = self._clock()
        sweep = now >= self._next_sweep and math.isfinite(self._ttl)
        if sweep:
            self._next_sweep = now + min(self._ttl, 60.0)
        return Batch(
            stream_id, data, now, self._ttl if sweep else None, self._next_seq.get(stream_id, 0)
        )

    def appended(self, stream_id: str, seq: int) -> None:
        """After a committed append: ``seq`` is the stream's next."""
        known = self._next_seq
        known.pop(stream_id, None)
        known[stream_id] = seq
        if len(known) > self.STREAMS:
            known.popitem(last=False)

    @staticmethod
    def _append(conn: sqlite3.Connection, batch: Batch) -> int:
        with transaction(conn, write=True):  # one commit for the batch (and the sweep)
            return append_rows(conn, batch)

    async def load(self, stream_id: str) -> list[Event]:
        """Every event of the stream, in order (empty if unknown or expired).

        Raises:
            CheckpointCorrupt: A record cannot be decoded (names stream and offset);
                nothing is returned, not even the events before it.
        """
        return await self.load_after(stream_id, 0)

    async def load_after(self, stream_id: str, cursor: int) -> list[Event]:
        """The stream's events from position ``cursor`` on (see :class:`~.base.TailLoad`).

        After a read of a stream, the next reads from there on (a follower's
        polls) read only the rows from the last one read (see ``_sqlite_log``).

        Raises:
            ValueError: ``cursor`` is negative.
            CheckpointCorrupt: A record cannot be decoded (names stream and offset);
                nothing is returned, not even the events before it.
        """
        check_str("stream_id", stream_id)
        check_cursor(cursor)
        anchors = self._anchors
        events, anchor = await self._db.run_inline(
            self._read, stream_id, cursor, self._clock(), anchors.get(stream_id)
        )
        anchors.pop(stream_id, None)
        if anchor is not None:
            anchors[stream_id] = anchor
            if len(anchors) > self.STREAMS:
                anchors.popitem(last=False)
        return events

    def _read(
        self,
        conn: sqlite3.Connection,
        stream_id: str,
        cursor: int,
        now: float,
        anchor: Anchor | None,
    ) -> tuple[list[Event], Anchor | None]:
        return read_log(conn, stream_id, cursor=cursor, now=now, ttl=self._ttl, anchor=anchor)

    async def clear(self, stream_id: str) -> None:
        """Drop the stream's log."""
        check_str("stream_id", stream_id)
        self._next_seq.pop(stream_id, None)
        self._anchors.pop(stream_id, None)
        await self._db.run_inline(self._clear, stream_id)

    @staticmethod
    def _clear(conn: sqlite3.Connection, stream_id: str) -> None:
        conn.execute("DELETE FROM mainspring_checkpoints WHERE stream_id = ?", (stream_id,))

    async def aclose(self) -> None:
        """Close the connection (idempotent)."""
        await self._db.aclose()


# -------------------------------------------------------------------- sessions


class SQLiteSessionStore:
    """Session states in tables: an append-only transcript, atomic claims.

    Durability: :meth:`claim_decision` and :meth:`record_write` commit with
    ``synchronous=FULL``, on disk when they return, even across a power loss: a
    claim or a ``started`` ledger entry rolled back after its write ran would let
    the write run twice. :meth:`save` commits with ``synchronous=NORMAL`` (no
    fsync; a session saves several times a turn): a power loss may roll back the
    last saves, but never past the last claim or ledger entry, because a WAL sync
    covers every commit before it. So what a power loss can take back is progress
    since the last write began, as if the process had crashed there: the state
    every durable run already recovers from. These fsynced commits — claims,
    ledger entries, the step commits that carry one — form groups: those that
    come while the connection is busy go to disk together, in one transaction
    and one fsync, each succeeding or failing on its own.

    :meth:`commit` (``JointCommit``) writes a run's step boundary — ledger
    entries, the state and the events of a checkpoint store on the same
    connection — in one transaction, fsynced when it carries a ledger entry;
    the one that ends a run drops its lease too, when the run lock shares the
    connection (``JointLease``).

    ``save`` inserts only the messages not stored yet. It remembers what it
    stored or loaded for the last :attr:`CACHE_SIZE` sessions, with a revision
    token written by every save; when another process saved since, it compares
    the stored transcript with the state's and rewrites it from the first
    message that differs.
    """

    CACHE_SIZE = 256
    """Sessions whose stored transcript this object remembers (message references)."""

    def __init__(self, database: Database) -> None:
        """Wrap an open database; use :meth:`open`."""
        self._db = database
        self._known = KnownTranscripts(self.CACHE_SIZE)

    @classmethod
    async def open(cls, path: StrPath) -> Self:
        """Open (or create) the store in the SQLite file at ``path``.

        Raises:
            StoreError: The file cannot be opened or is not a SQLite database.
            SchemaTooNew: The file was written by a newer mainspring.
        """
        return cls(await Database.open(path))

    async def save(self, state: SessionState) -> None:
        """Write the state in one transaction.

        Recorded decisions and ledger entries are kept: the state's own are added only
        where the store has none, so a stale state never moves one back.
        """
        job = self._job(state)
        revision = await self._db.run_inline(save_state, job)
        self._known.remember(job.session_id, Stored(revision, job.messages))

    def _job(self, state: SessionState) -> Save:
        check_type("state", state, SessionState)
        sid = check_str("session_id", state.session_id)
        decided = [
            (sid, check_str("attempt_id", a), check_str("decision", d))
            for a, d in state.decided.items()
        ]
        with encoding(f"session {sid!r}"):
            head = dumps(header(state))
            writes = [
                (sid, check_str("ledger key", k), dumps(encode(r))) for k, r in state.writes.items()
            ]
        return Save(sid, head, list(state.messages), decided, writes, self._known.get(sid))

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
        """Add to a spend total unless it would pass ``cap``, under the write lock.

        With ``hold``, the add is held under that key too (see ``SpendHolds``).
        """
        sid = check_str("session_id", session_id)
        held = None if hold is None else check_str("hold", hold)
        args = (sid, str(kind), float(amount), cap, float(floor), held)
        return await self._db.run_inline(add_spend, args)

    async def release_holds(
        self, session_id: str, kind: SpendKind, started: Collection[str]
    ) -> float | None:
        """Give back the holds of writes that never started; drop every hold."""
        args = (check_str("session_id", session_id), str(kind), frozenset(started))
        return await self._db.run_inline(release_holds, args)

    def joins(self, checkpoints: CheckpointStore | None) -> bool:
        """Whether ``checkpoints`` lives on this store's connection (or is ``None``)."""
        return checkpoints is None or (
            isinstance(checkpoints, SQLiteCheckpointStore) and checkpoints._db is self._db
        )

    def holds(self, lock: RunLock | None) -> bool:
        """Whether ``lock`` keeps its leases on this store's connection (``JointLease``)."""
        return isinstance(lock, SQLiteRunLock) and lock._db is self._db

    async def commit(self, commit: Commit, checkpoints: CheckpointStore | None) -> None:
        """Put a step boundary on record in one transaction (fsynced with ``sync``)."""
        sid = check_str("session_id", commit.session_id)
        rows = []
        for record in commit.writes:
            check_type("record", record, WriteRecord)
            with encoding(f"ledger entry {record.key!r} of session {sid!r}"):
                rows.append((sid, check_str("ledger key", record.key), dumps(encode(record))))
        job = None if commit.state is None else self._job(commit.state)
        batch = None
        if commit.events:
            assert isinstance(checkpoints, SQLiteCheckpointStore) and commit.stream_id is not None
            batch = checkpoints._batch(check_str("stream_id", commit.stream_id), commit.events)
        clear = None if commit.clear is None else check_str("stream_id", commit.clear)
        release = commit.release
        if release is not None:
            release = (check_str("key", release[0]), check_str("owner", release[1]))
        step = Step(rows, job, batch, clear, release)
        if commit.sync:
            outcome = await self._db.run_grouped(commit_group_synced, step)
            revision, seq = cast(tuple[str | None, int], outcome)
        else:
            revision, seq = await self._db.run_inline(commit_step, step)
        if job is not None and revision is not None:
            self._known.remember(sid, Stored(revision, job.messages))
        if batch is not None:
            assert isinstance(checkpoints, SQLiteCheckpointStore)
            checkpoints.appended(batch.stream_id, seq)
        if clear is not None and isinstance(checkpoints, SQLiteCheckpointStore):
            checkpoints._next_seq.pop(clear, None)
            checkpoints._anchors.pop(clear, None)

    async def load(self, session_id: str) -> SessionState | None:
        """The saved state with every recorded decision and ledger entry, or ``None``.

        Raises:
            StoreError: A stored row cannot be decoded.
        """
        check_str("session_id", session_id)
        loaded = await self._db.run_inline(load_state, session_id)
        if loaded is None:
            self._known.remember(session_id, None)
            return None
        state, revision = loaded
        self._known.remember(session_id, Stored(revision, list(state.messages)))
        return state

    async def delete(self, session_id: str) -> None:
        """Forget a session and everything recorded for it."""
        check_str("session_id", session_id)
        self._known.remember(session_id, None)
        await self._db.run(delete_session, session_id)

    async def session_ids(self, *, limit: int = 100, principal: str | None = None) -> list[str]:
        """Stored session ids (only ``principal``'s, if given), sorted, at most ``limit``."""
        return await self._db.run_inline(list_session_ids, max(limit, 0), principal)

    async def claim_decision(self, session_id: str, attempt_id: str, decision: str) -> bool:
        """Record the decision unless one was already recorded, by any process."""
        args = (
            check_str("session_id", session_id),
            check_str("attempt_id", attempt_id),
            check_str("decision", decision),
        )
        # Fsynced, in one group with whatever other sessions commit meanwhile.
        return cast(bool, await self._db.run_grouped(commit_group_synced, Claim(args)))

    async def release_claim(self, session_id: str, attempt_id: str, decision: str) -> bool:
        """Drop the claim of ``attempt_id`` if it is still ``decision`` (see ``ClaimRelease``)."""
        args = (
            check_str("session_id", session_id),
            check_str("attempt_id", attempt_id),
            check_str("decision", decision),
        )
        return await self._db.run_inline(release_claim, args)

    async def record_write(self, session_id: str, record: WriteRecord) -> None:
        """Upsert one ledger entry; on disk when this returns."""
        check_str("session_id", session_id)
        check_type("record", record, WriteRecord)
        with encoding(f"ledger entry {record.key!r} of session {session_id!r}"):
            row = (session_id, check_str("ledger key", record.key), dumps(encode(record)))
        await self._db.run_grouped(commit_group_synced, Step([row], None, None, None, None))

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
        """Add a shared record unless a live one has the key (``SharedRecords``); fsynced."""
        now = time.time()
        args = (
            check_kind(kind),
            check_str("key", key),
            check_str("owner", owner),
            check_str("value", value),
            now + check_record_ttl(ttl, limit),
            limit,
            now,
        )
        return await self._db.run(put_record, args)

    async def take_record(self, kind: str, key: str) -> tuple[str, str] | None:
        """Remove and return a live shared record, ``(owner, value)``; fsynced."""
        args = (check_kind(kind), check_str("key", key), time.time())
        return await self._db.run(take_record, *args)

    async def owned_records(
        self, kind: str, owner: str, *, limit: int = 1000
    ) -> list[tuple[str, str]]:
        """``(key, value)`` of ``owner``'s live records of ``kind``, sorted by key."""
        args = (check_kind(kind), check_str("owner", owner), time.time(), max(limit, 0))
        return await self._db.run_inline(list_owned, *args)

    async def save_task(self, owner: str, task_id: str, data: bytes, *, ttl: float) -> None:
        """Save (or replace) an A2A task record for ``ttl`` seconds (``TaskRecords``)."""
        check_type("data", data, bytes)
        now = time.time()
        args = (check_str("owner", owner), check_str("task_id", task_id), data)
        await self._db.run_inline(save_task, (*args, now + check_ttl(ttl), now))

    async def load_task(self, owner: str, task_id: str) -> bytes | None:
        """``owner``'s live A2A task record ``task_id``, or ``None``."""
        args = (check_str("owner", owner), check_str("task_id", task_id), time.time())
        return await self._db.run_inline(load_task, *args)

    async def owned_tasks(self, owner: str) -> list[tuple[str, bytes]]:
        """``(task id, data)`` of ``owner``'s live A2A task records, sorted by task id."""
        return await self._db.run_inline(owned_tasks, check_str("owner", owner), time.time())

    async def delete_task(self, owner: str, task_id: str) -> None:
        """Forget ``owner``'s A2A task record ``task_id``."""
        args = (check_str("owner", owner), check_str("task_id", task_id))
        await self._db.run_inline(delete_task, *args)

    async def aclose(self) -> None:
        """Close the connection (idempotent)."""
        await self._db.aclose()


# ----------------------------------------------------------------------- locks


class SQLiteRunLock:
    """Leases in a table, shared by every process using the file.

    Each operation is one statement; expiry compares wall-clock times, so the
    processes sharing the file must agree on the time (they share a machine).
    ``synchronous=NORMAL``: a power loss that rolls a lease back also stopped
    its holder.
    """

    def __init__(self, database: Database, *, clock: Clock) -> None:
        """Wrap an open database; use :meth:`open`."""
        self._db = database
        self._clock = clock

    @classmethod
    async def open(cls, path: StrPath, *, clock: Clock = time.time) -> Self:
        """Open (or create) the lock table in the SQLite file at ``path``.

        Raises:
            StoreError: The file cannot be opened or is not a SQLite database.
            SchemaTooNew: The file was written by a newer mainspring.
        """
        return cls(await Database.open(path), clock=clock)

    async def acquire(self, key: str, owner: str, *, ttl: float) -> bool:
        """Take the lease unless another owner holds a live one."""
        now = self._clock()
        args = (check_str("key", key), check_str("owner", owner), now + check_ttl(ttl), now)
        return await self._db.run_inline(changed, ACQUIRE, args)

    async def refresh(self, key: str, owner: str, *, ttl: float) -> bool:
        """Extend this owner's live lease."""
        now = self._clock()
        args = (now + check_ttl(ttl), check_str("key", key), check_str("owner", owner), now)
        return await self._db.run_inline(changed, REFRESH, args)

    async def release(self, key: str, owner: str) -> None:
        """Drop this owner's lease."""
        args = (check_str("key", key), check_str("owner", owner))
        await self._db.run_inline(changed, RELEASE, args)

    async def holder(self, key: str) -> str | None:
        """The owner of the live lease, if any."""
        return await self._db.run_inline(lease_holder, check_str("key", key), self._clock())

    async def aclose(self) -> None:
        """Close the connection (idempotent)."""
        await self._db.aclose()
