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
- ``mainspring_checkpoints``: one row per event, ``(stream_id, seq)``.
- ``mainspring_sessions``: one row per session, the state without its transcript,
  decisions and write ledger; ``mainspring_messages``: the transcript, one row per
  message; ``mainspring_decisions``: keyed ``(session_id, attempt_id)``, so a
  decision is claimed once; ``mainspring_writes``: the write ledger.
- ``mainspring_locks``: one row per lease.

Rows hold JSON text from :mod:`mainspring.codec`, ASCII-escaped so that any
Python string (even a lone surrogate) round-trips.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
import time
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from typing import Self

from mainspring.codec import (
    encode,
    event_to_dict,
    message_from_dict,
    message_to_dict,
)
from mainspring.errors import StoreError
from mainspring.events import Event
from mainspring.messages import Message
from mainspring.state import SessionState, WriteRecord, state_from_stored
from mainspring.stores._log import decode_log
from mainspring.stores._sqlite import (
    CODEC_ERRORS,
    Clock,
    Database,
    StrPath,
    check_text,
    check_ttl,
    check_type,
    dumps,
    encoding,
    synced,
    transaction,
)
from mainspring.stores.base import CheckpointStore, Commit, RunLock, SpendKind

__all__ = ["SQLiteCheckpointStore", "SQLiteRunLock", "SQLiteSessionStore"]

# ----------------------------------------------------------------- checkpoints


class SQLiteCheckpointStore:
    """Event logs in a table, each expiring ``ttl`` seconds after its last append.

    An append is one ``INSERT`` that takes the next ``seq`` of its stream under
    SQLite's write lock, so appenders in several processes never collide.
    ``synchronous=NORMAL``: a commit survives the process crashing, and the last
    ones may roll back on power loss, when the clients lose their streams too.

    Expiry is sliding and lazy, by wall clock: a stream whose last append is
    older than ``ttl`` is invisible and deleted by the next load of it or the
    periodic sweep; appending to it starts a new log (the rows after a gap of
    more than ``ttl``).
    """

    def __init__(self, database: Database, *, ttl: float, clock: Clock) -> None:
        """Wrap an open database; use :meth:`open`."""
        self._db = database
        self._ttl = check_ttl(ttl)
        self._clock = clock
        self._next_sweep = 0.0

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
        """Append events in order, in one transaction and one thread hop."""
        check_text("stream_id", stream_id)
        for event in events:
            check_type("event", event, Event)
        if not events:
            return
        await self._db.run_inline(self._append, self._batch(stream_id, events))

    def _batch(self, stream_id: str, events: Sequence[Event]) -> _Batch:
        """Encode events for :meth:`_append_rows` (on the event loop: events are small)."""
        with encoding(f"an event of stream {stream_id!r}"):
            data = [dumps(event_to_dict(event)) for event in events]
        now = self._clock()
        sweep = now >= self._next_sweep and math.isfinite(self._ttl)
        if sweep:
            self._next_sweep = now + min(self._ttl, 60.0)
        return _Batch(stream_id, data, now, self._ttl if sweep else None)

    @staticmethod
    def _append(conn: sqlite3.Connection, batch: _Batch) -> None:
        with transaction(conn, write=True):  # one commit for the batch (and the sweep)
            _append_rows(conn, batch)

    async def load(self, stream_id: str) -> list[Event]:
        """Every event of the stream, in order (empty if unknown or expired).

        Raises:
            CheckpointCorrupt: A record cannot be decoded (names stream and offset);
                nothing is returned, not even the events before it.
        """
        check_text("stream_id", stream_id)
        return await self._db.run_inline(self._load, stream_id, self._clock())

    def _load(self, conn: sqlite3.Connection, stream_id: str, now: float) -> list[Event]:
        rows: list[tuple[int, str, float]] = conn.execute(
            "SELECT seq, data, updated_at FROM mainspring_checkpoints"
            " WHERE stream_id = ? ORDER BY seq",
            (stream_id,),
        ).fetchall()
        if not rows:
            return []
        ttl = self._ttl
        if now - rows[-1][2] > ttl:
            self._delete_through(conn, stream_id, rows[-1][0])
            return []
        start = 0
        for i in range(1, len(rows)):
            if rows[i][2] - rows[i - 1][2] > ttl:
                start = i  # the log expired before this append, which began a new one
        if start:
            self._delete_through(conn, stream_id, rows[start - 1][0])
        return decode_log(stream_id, [data for _, data, _ in rows[start:]])

    @staticmethod
    def _delete_through(conn: sqlite3.Connection, stream_id: str, seq: int) -> None:
        conn.execute(
            "DELETE FROM mainspring_checkpoints WHERE stream_id = ? AND seq <= ?",
            (stream_id, seq),
        )

    async def clear(self, stream_id: str) -> None:
        """Drop the stream's log."""
        check_text("stream_id", stream_id)
        await self._db.run_inline(self._clear, stream_id)

    @staticmethod
    def _clear(conn: sqlite3.Connection, stream_id: str) -> None:
        conn.execute("DELETE FROM mainspring_checkpoints WHERE stream_id = ?", (stream_id,))

    async def aclose(self) -> None:
        """Close the connection (idempotent)."""
        await self._db.aclose()


@dataclasses.dataclass(frozen=True, slots=True)
class _Batch:
    """Encoded events of one stream, ready to insert."""

    stream_id: str
    data: list[str]
    now: float
    sweep_ttl: float | None
    """With a TTL, also delete the logs it expired."""


def _append_rows(conn: sqlite3.Connection, batch: _Batch) -> None:
    """Insert a batch inside the caller's transaction."""
    stream_id, now = batch.stream_id, batch.now
    (base,) = conn.execute(
        "SELECT COALESCE(MAX(seq) + 1, 0) FROM mainspring_checkpoints WHERE stream_id = ?",
        (stream_id,),
    ).fetchone()
    conn.executemany(
        "INSERT INTO mainspring_checkpoints (stream_id, seq, data, updated_at) VALUES (?, ?, ?, ?)",
        [(stream_id, base + i, item, now) for i, item in enumerate(batch.data)],
    )
    if batch.sweep_ttl is not None:
        conn.execute(
            "DELETE FROM mainspring_checkpoints WHERE stream_id IN ("
            " SELECT stream_id FROM mainspring_checkpoints GROUP BY stream_id"
            " HAVING MAX(updated_at) < ?)",
            (now - batch.sweep_ttl,),
        )


# -------------------------------------------------------------------- sessions


@dataclasses.dataclass(frozen=True, slots=True)
class _Stored:
    """What this store object knows is stored as a session's transcript."""

    revision: str
    messages: list[Message]


@dataclasses.dataclass(frozen=True, slots=True)
class _Save:
    """A snapshot of a state taken on the event loop, for the worker thread.

    Messages are immutable, so they are encoded in the thread, and only the new ones.
    """

    session_id: str
    header: str
    messages: list[Message]
    decided: list[tuple[str, str, str]]
    writes: list[tuple[str, str, str]]
    known: _Stored | None


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
    every durable run already recovers from.

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
        self._known: OrderedDict[str, _Stored] = OrderedDict()

    @classmethod
    async def open(cls, path: StrPath) -> Self:
        """Open (or create) the store in the SQLite file at ``path``.

        Raises:
            StoreError: The file cannot be opened or is not a SQLite database.
            SchemaTooNew: The file was written by a newer mainspring.
        """
        return cls(await Database.open(path))

    def _remember(self, session_id: str, stored: _Stored | None) -> None:
        self._known.pop(session_id, None)
        if stored is not None:
            self._known[session_id] = stored
            while len(self._known) > self.CACHE_SIZE:
                self._known.popitem(last=False)

    async def save(self, state: SessionState) -> None:
        """Write the state in one transaction.

        Recorded decisions and ledger entries are kept: the state's own are added only
        where the store has none, so a stale state never moves one back.
        """
        job = self._job(state)
        revision = await self._db.run_inline(_save, job)
        self._remember(job.session_id, _Stored(revision, job.messages))

    def _job(self, state: SessionState) -> _Save:
        check_type("state", state, SessionState)
        sid = check_text("session_id", state.session_id)
        decided = [
            (sid, check_text("attempt_id", a), check_text("decision", d))
            for a, d in state.decided.items()
        ]
        with encoding(f"session {sid!r}"):
            header = dumps(encode(dataclasses.replace(state, messages=[], decided={}, writes={})))
            writes = [
                (sid, check_text("ledger key", k), dumps(encode(r)))
                for k, r in state.writes.items()
            ]
        return _Save(sid, header, list(state.messages), decided, writes, self._known.get(sid))

    async def add_spend(
        self,
        session_id: str,
        kind: SpendKind,
        amount: float,
        *,
        cap: float | None = None,
        floor: float = 0.0,
    ) -> float | None:
        """Add to a spend total unless it would pass ``cap``, under the write lock."""
        args = (check_text("session_id", session_id), str(kind), float(amount), cap, float(floor))
        return await self._db.run_inline(_add_spend, args)

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
        sid = check_text("session_id", commit.session_id)
        rows = []
        for record in commit.writes:
            check_type("record", record, WriteRecord)
            with encoding(f"ledger entry {record.key!r} of session {sid!r}"):
                rows.append((sid, check_text("ledger key", record.key), dumps(encode(record))))
        job = None if commit.state is None else self._job(commit.state)
        batch = None
        if commit.events:
            assert isinstance(checkpoints, SQLiteCheckpointStore) and commit.stream_id is not None
            batch = checkpoints._batch(check_text("stream_id", commit.stream_id), commit.events)
        clear = None if commit.clear is None else check_text("stream_id", commit.clear)
        release = commit.release
        if release is not None:
            release = (check_text("key", release[0]), check_text("owner", release[1]))
        step = _Step(rows, job, batch, clear, release)
        if commit.sync:
            revision = await self._db.run(_commit_synced, step)
        else:
            revision = await self._db.run_inline(_commit, step)
        if job is not None and revision is not None:
            self._remember(sid, _Stored(revision, job.messages))

    async def load(self, session_id: str) -> SessionState | None:
        """The saved state with every recorded decision and ledger entry, or ``None``.

        Raises:
            StoreError: A stored row cannot be decoded.
        """
        check_text("session_id", session_id)
        loaded = await self._db.run_inline(_load, session_id)
        if loaded is None:
            self._remember(session_id, None)
            return None
        state, revision = loaded
        self._remember(session_id, _Stored(revision, list(state.messages)))
        return state

    async def delete(self, session_id: str) -> None:
        """Forget a session and everything recorded for it."""
        check_text("session_id", session_id)
        self._remember(session_id, None)
        await self._db.run(_delete, session_id)

    async def session_ids(self, *, limit: int = 100, principal: str | None = None) -> list[str]:
        """Stored session ids (only ``principal``'s, if given), sorted, at most ``limit``."""
        return await self._db.run_inline(_session_ids, max(limit, 0), principal)

    async def claim_decision(self, session_id: str, attempt_id: str, decision: str) -> bool:
        """Record the decision unless one was already recorded, by any process."""
        args = (
            check_text("session_id", session_id),
            check_text("attempt_id", attempt_id),
            check_text("decision", decision),
        )
        return await self._db.run(_claim, args)

    async def record_write(self, session_id: str, record: WriteRecord) -> None:
        """Upsert one ledger entry; on disk when this returns."""
        check_text("session_id", session_id)
        check_type("record", record, WriteRecord)
        with encoding(f"ledger entry {record.key!r} of session {session_id!r}"):
            row = (session_id, check_text("ledger key", record.key), dumps(encode(record)))
        await self._db.run(_record_write, row)

    async def aclose(self) -> None:
        """Close the connection (idempotent)."""
        await self._db.aclose()


def _session_ids(conn: sqlite3.Connection, limit: int, principal: str | None) -> list[str]:
    if principal is None:
        rows = conn.execute(
            "SELECT session_id FROM mainspring_sessions ORDER BY session_id LIMIT ?", (limit,)
        ).fetchall()
    else:
        rows = conn.execute(
            "SELECT session_id FROM mainspring_sessions"
            " WHERE json_extract(header, '$.principal') = ? ORDER BY session_id LIMIT ?",
            (principal, limit),
        ).fetchall()
    return [str(r[0]) for r in rows]


_INSERT_DECISION = (
    "INSERT INTO mainspring_decisions (session_id, attempt_id, decision) VALUES (?, ?, ?)"
    " ON CONFLICT (session_id, attempt_id) DO NOTHING"
)


def _add_spend(
    conn: sqlite3.Connection, args: tuple[str, str, float, float | None, float]
) -> float | None:
    sid, kind, amount, cap, floor = args
    with transaction(conn, write=True):
        row = conn.execute(
            "SELECT amount FROM mainspring_spend WHERE session_id = ? AND kind = ?", (sid, kind)
        ).fetchone()
        total = max(float(row[0]) if row else 0.0, floor) + amount
        if cap is not None and total > cap:
            return None
        conn.execute(
            "INSERT INTO mainspring_spend (session_id, kind, amount) VALUES (?, ?, ?)"
            " ON CONFLICT (session_id, kind) DO UPDATE SET amount = excluded.amount",
            (sid, kind, total),
        )
    return total


def _claim(conn: sqlite3.Connection, args: tuple[str, str, str]) -> bool:
    with synced(conn):
        return conn.execute(_INSERT_DECISION, args).rowcount == 1


_UPSERT_WRITE = (
    "INSERT INTO mainspring_writes (session_id, key, data) VALUES (?, ?, ?)"
    " ON CONFLICT (session_id, key) DO UPDATE SET data = excluded.data"
)
_ADD_WRITE = (
    "INSERT INTO mainspring_writes (session_id, key, data) VALUES (?, ?, ?)"
    " ON CONFLICT (session_id, key) DO NOTHING"
)


def _record_write(conn: sqlite3.Connection, row: tuple[str, str, str]) -> None:
    with synced(conn):
        conn.execute(_UPSERT_WRITE, row)


@dataclasses.dataclass(frozen=True, slots=True)
class _Step:
    """One step boundary's rows, for :func:`_commit`."""

    writes: list[tuple[str, str, str]]
    save: _Save | None
    events: _Batch | None
    clear: str | None
    release: tuple[str, str] | None


def _commit(conn: sqlite3.Connection, step: _Step) -> str | None:
    """Apply a step in one transaction; the new revision if the state was saved."""
    revision = None
    with transaction(conn, write=True):
        if step.clear is not None:
            conn.execute("DELETE FROM mainspring_checkpoints WHERE stream_id = ?", (step.clear,))
        if step.writes:
            conn.executemany(_UPSERT_WRITE, step.writes)
        if step.save is not None:
            revision = _save_rows(conn, step.save)
        if step.events is not None:
            _append_rows(conn, step.events)
        if step.release is not None:
            conn.execute(_RELEASE, step.release)
    return revision


def _commit_synced(conn: sqlite3.Connection, step: _Step) -> str | None:
    with synced(conn):
        return _commit(conn, step)


def _save(conn: sqlite3.Connection, job: _Save) -> str:
    with transaction(conn, write=True):
        return _save_rows(conn, job)


def _save_rows(conn: sqlite3.Connection, job: _Save) -> str:
    """Write a state inside the caller's transaction; its new revision."""
    sid = job.session_id
    revision = uuid.uuid4().hex
    with encoding(f"a message of session {sid!r}"):
        keep, stored, saved = _stored_prefix(conn, job, revision)
        rows = [
            (sid, seq, dumps(message_to_dict(job.messages[seq])))
            for seq in range(keep, len(job.messages))
        ]
    if keep < stored:
        conn.execute(
            "DELETE FROM mainspring_messages WHERE session_id = ? AND seq >= ?", (sid, keep)
        )
    if rows:
        conn.executemany(
            "INSERT INTO mainspring_messages (session_id, seq, data) VALUES (?, ?, ?)", rows
        )
    if not saved:
        conn.execute(
            "INSERT INTO mainspring_sessions (session_id, header, revision) VALUES (?, ?, ?)"
            " ON CONFLICT (session_id) DO UPDATE"
            " SET header = excluded.header, revision = excluded.revision",
            (sid, job.header, revision),
        )
    # Only what the store lacks: a stale state never moves an entry back.
    if job.decided:
        conn.executemany(_INSERT_DECISION, job.decided)
    if job.writes:
        conn.executemany(_ADD_WRITE, job.writes)
    return revision


def _stored_prefix(conn: sqlite3.Connection, job: _Save, revision: str) -> tuple[int, int, bool]:
    """The stored prefix of the state's messages, the stored count, whether the header is saved.

    The header goes on record on the way (as ``revision``) when this object made
    the last save: then the stored messages are the ones it knows.
    """
    sid = job.session_id
    known = job.known
    if (
        known is not None
        and conn.execute(
            "UPDATE mainspring_sessions SET header = ?, revision = ?"
            " WHERE session_id = ? AND revision = ?",
            (job.header, revision, sid, known.revision),
        ).rowcount
        == 1
    ):
        # Nobody saved since this object did: its messages are the stored ones,
        # so compare references, not JSON.
        return _common_prefix(job.messages, known.messages), len(known.messages), True
    stored = int(
        conn.execute(
            "SELECT COALESCE(MAX(seq) + 1, 0) FROM mainspring_messages WHERE session_id = ?",
            (sid,),
        ).fetchone()[0]
    )
    return _compared_prefix(conn, job, stored), stored, False


def _compared_prefix(conn: sqlite3.Connection, job: _Save, stored: int) -> int:
    """The stored prefix found by comparing the ``stored`` rows with the state's JSON."""
    if not stored:
        return 0
    sid = job.session_id
    limit = min(stored, len(job.messages))
    rows = conn.execute(
        "SELECT data FROM mainspring_messages WHERE session_id = ? AND seq < ? ORDER BY seq",
        (sid, limit),
    )
    for seq, (data,) in enumerate(rows):
        if data != dumps(message_to_dict(job.messages[seq])):
            return seq
    return limit


def _common_prefix(ours: Sequence[Message], theirs: Sequence[Message]) -> int:
    n = min(len(ours), len(theirs))
    if ours[:n] == theirs[:n]:  # list equality checks identity first: fast when unchanged
        return n
    return next(i for i in range(n) if ours[i] != theirs[i])


def _load(conn: sqlite3.Connection, session_id: str) -> tuple[SessionState, str] | None:
    with transaction(conn, write=False):  # one snapshot for the four reads
        row = conn.execute(
            "SELECT header, revision FROM mainspring_sessions WHERE session_id = ?", (session_id,)
        ).fetchone()
        if row is None:
            return None
        messages = conn.execute(
            "SELECT data FROM mainspring_messages WHERE session_id = ? ORDER BY seq",
            (session_id,),
        ).fetchall()
        decided = conn.execute(
            "SELECT attempt_id, decision FROM mainspring_decisions WHERE session_id = ?",
            (session_id,),
        ).fetchall()
        writes = conn.execute(
            "SELECT key, data FROM mainspring_writes WHERE session_id = ? ORDER BY key",
            (session_id,),
        ).fetchall()
    try:
        state = state_from_stored(json.loads(row[0]), ((str(k), json.loads(w)) for k, w in writes))
        state.messages = [message_from_dict(json.loads(m)) for (m,) in messages]
        state.decided = {str(a): str(d) for a, d in decided}
    except CODEC_ERRORS as exc:
        raise StoreError(f"stored session {session_id!r} cannot be decoded: {exc}") from exc
    return state, str(row[1])


def _delete(conn: sqlite3.Connection, session_id: str) -> None:
    with transaction(conn, write=True):
        for table in ("sessions", "messages", "decisions", "writes", "spend"):
            conn.execute(f"DELETE FROM mainspring_{table} WHERE session_id = ?", (session_id,))


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
        args = (check_text("key", key), check_text("owner", owner), now + check_ttl(ttl), now)
        return await self._db.run_inline(_changed, _ACQUIRE, args)

    async def refresh(self, key: str, owner: str, *, ttl: float) -> bool:
        """Extend this owner's live lease."""
        now = self._clock()
        args = (now + check_ttl(ttl), check_text("key", key), check_text("owner", owner), now)
        return await self._db.run_inline(_changed, _REFRESH, args)

    async def release(self, key: str, owner: str) -> None:
        """Drop this owner's lease."""
        args = (check_text("key", key), check_text("owner", owner))
        await self._db.run_inline(_changed, _RELEASE, args)

    async def holder(self, key: str) -> str | None:
        """The owner of the live lease, if any."""
        return await self._db.run_inline(_holder, check_text("key", key), self._clock())

    async def aclose(self) -> None:
        """Close the connection (idempotent)."""
        await self._db.aclose()


_ACQUIRE = (
    "INSERT INTO mainspring_locks (key, owner, expires_at) VALUES (?1, ?2, ?3)"
    " ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at"
    " WHERE mainspring_locks.expires_at <= ?4 OR mainspring_locks.owner = excluded.owner"
)
_RELEASE = "DELETE FROM mainspring_locks WHERE key = ? AND owner = ?"
_REFRESH = (
    "UPDATE mainspring_locks SET expires_at = ?1 WHERE key = ?2 AND owner = ?3 AND expires_at > ?4"
)


def _changed(conn: sqlite3.Connection, sql: str, args: tuple[str | float, ...]) -> bool:
    return conn.execute(sql, args).rowcount == 1


def _holder(conn: sqlite3.Connection, key: str, now: float) -> str | None:
    row = conn.execute(
        "SELECT owner FROM mainspring_locks WHERE key = ? AND expires_at > ?", (key, now)
    ).fetchone()
    return None if row is None else str(row[0])
