"""SQLite plumbing shared by the SQLite stores: the schema, one connection per store.

A :class:`Database` opens the file (WAL journal, ``synchronous=NORMAL``, a busy
timeout; :func:`synced` for the commits that must survive a power loss), checks or
records the schema version, and runs one operation at a time on its
connection in a worker thread, so the event loop never blocks; the WAL is
checkpointed in a thread of its own (:mod:`mainspring.stores._wal`).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType, UnionType
from typing import Any, Generic, TypeVar, TypeVarTuple, cast

import anyio
import anyio.to_thread
from pydantic import JsonValue
from pydantic_core import PydanticSerializationError, to_json
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_random_exponential

from mainspring.errors import ConfigError, SchemaTooNew, StoreError
from mainspring.stores._private import make_private_file
from mainspring.stores._wal import LOG_LIMIT, WalCheckpointer
from mainspring.stores.base import SCHEMA_VERSION

__all__ = [
    "BUSY_TIMEOUT",
    "CODEC_ERRORS",
    "Clock",
    "Database",
    "Prepare",
    "StrPath",
    "check_ttl",
    "check_type",
    "dumps",
    "encoding",
    "synced",
    "transaction",
]

T = TypeVar("T")
A = TypeVar("A")
Ts = TypeVarTuple("Ts")
Clock = Callable[[], float]
"""Wall-clock seconds (``time.time``): rows are compared across processes."""
StrPath = str | os.PathLike[str]

BUSY_TIMEOUT = 10.0
"""Seconds an operation waits for another connection's write to finish."""

CODEC_ERRORS = (ValueError, TypeError, RecursionError)
"""What encoding or decoding JSON raises (pydantic's errors are ``ValueError``)."""

# The physical layout of a table (rowid or ``WITHOUT ROWID``) is set when a file
# is created and never changes it; files made by earlier releases keep theirs.
# Every statement works on either, so it is no schema version of its own.
_TABLES = (
    # A rowid table: rows go in at its end, and only its small primary-key index
    # takes an insert at a random place (the stream id); rows of up to a kilobyte
    # inserted at random places split a page every other commit (and a WITHOUT
    # ROWID table puts a row over about 1,000 bytes on overflow pages).
    """CREATE TABLE IF NOT EXISTS mainspring_checkpoints (
        stream_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        data TEXT NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (stream_id, seq)
    )""",
    """CREATE TABLE IF NOT EXISTS mainspring_sessions (
        session_id TEXT PRIMARY KEY,
        header TEXT NOT NULL,
        revision TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS mainspring_messages (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    )""",
    """CREATE TABLE IF NOT EXISTS mainspring_decisions (
        session_id TEXT NOT NULL,
        attempt_id TEXT NOT NULL,
        decision TEXT NOT NULL,
        PRIMARY KEY (session_id, attempt_id)
    )""",
    """CREATE TABLE IF NOT EXISTS mainspring_writes (
        session_id TEXT NOT NULL,
        key TEXT NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (session_id, key)
    )""",
    """CREATE TABLE IF NOT EXISTS mainspring_spend (
        session_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        amount REAL NOT NULL,
        PRIMARY KEY (session_id, kind)
    )""",
    # Tiny rows: one b-tree (WITHOUT ROWID), not a table and its key's index, so
    # taking or dropping a lease writes one page, not two.
    """CREATE TABLE IF NOT EXISTS mainspring_locks (
        key TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        expires_at REAL NOT NULL
    ) WITHOUT ROWID""",
    # Shared records (``SharedRecords``): nonces, used approvals, paused calls.
    """CREATE TABLE IF NOT EXISTS mainspring_records (
        kind TEXT NOT NULL,
        key TEXT NOT NULL,
        owner TEXT NOT NULL,
        value TEXT NOT NULL,
        expires_at REAL NOT NULL,
        PRIMARY KEY (kind, key)
    ) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS mainspring_records_owner ON mainspring_records (kind, owner)",
    "CREATE INDEX IF NOT EXISTS mainspring_records_expiry ON mainspring_records (expires_at)",
    # A2A task records (``TaskRecords``): a rowid table, as a task with its
    # history runs to kilobytes (a WITHOUT ROWID table puts those on overflow pages).
    """CREATE TABLE IF NOT EXISTS mainspring_tasks (
        owner TEXT NOT NULL,
        task_id TEXT NOT NULL,
        data BLOB NOT NULL,
        expires_at REAL NOT NULL,
        PRIMARY KEY (owner, task_id)
    )""",
    "CREATE INDEX IF NOT EXISTS mainspring_tasks_expiry ON mainspring_tasks (expires_at)",
)


def dumps(data: JsonValue) -> str:
    """Compact JSON text; any Python string (even a lone surrogate) round-trips.

    Text that is valid Unicode is kept as is (UTF-8 in the file; escaping it to
    ASCII cost the encoder a third more); only text it cannot encode, a lone
    surrogate, goes through the standard library's encoder, which escapes
    everything to ASCII. Rows written ASCII-escaped (by earlier releases) decode the same.
    """
    try:  # pydantic-core's encoder: about three times the standard library's speed
        return to_json(data).decode()
    except PydanticSerializationError:  # a lone surrogate, a cycle, too deep
        # The standard library's encoder escapes surrogates, and raises what
        # CODEC_ERRORS names for the rest.
        return json.dumps(data, separators=(",", ":"))


class encoding:  # (lower case: used like a function: ``with encoding(what):``)
    """Turn a value the codec cannot encode into :class:`StoreError` naming ``what``.

    A class, not a ``contextmanager`` generator: a commit enters several, and a
    generator's set-up costs microseconds.
    """

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if isinstance(exc, CODEC_ERRORS):
            raise StoreError(f"{self.what} cannot be stored: {exc}") from exc


def check_type(what: str, value: object, kind: type | UnionType) -> None:
    if not isinstance(value, kind):
        raise ConfigError(
            f"{what} must be a {getattr(kind, '__name__', kind)}, not {type(value).__name__}"
        )


def check_ttl(ttl: object) -> float:
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0:
        raise ConfigError(f"ttl must be a positive number of seconds, not {ttl!r}")
    return float(ttl)


class transaction:  # (lower case: used like a function: ``with transaction(conn):``)
    """One transaction; ``write`` takes the write lock first (no upgrade deadlock).

    Rolled back when the block raises, or when its ``COMMIT`` does. (A class:
    cheaper to enter than a ``contextmanager`` generator.)
    """

    __slots__ = ("conn", "write")

    def __init__(self, conn: sqlite3.Connection, *, write: bool) -> None:
        self.conn, self.write = conn, write

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE" if self.write else "BEGIN")

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        conn = self.conn
        if exc is None:
            try:
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.rollback()
                raise
        elif conn.in_transaction:
            conn.rollback()


@contextmanager
def synced(conn: sqlite3.Connection) -> Iterator[None]:
    """Commits made inside are on disk when they return (``synchronous=FULL``).

    In WAL mode that also syncs every commit before them, by any connection.
    """
    conn.execute("PRAGMA synchronous=FULL")
    try:
        yield
    finally:
        conn.execute("PRAGMA synchronous=NORMAL")


Prepare = Callable[[sqlite3.Connection], None]
"""Run on a new connection before anything else (e.g. loading an extension)."""


def _connect(path: Path, driver: ModuleType, prepare: Prepare | None) -> sqlite3.Connection:
    """Open ``path``, switch it to WAL and check or create the schema.

    Opening races other processes opening the same file: switching a new file to
    WAL and creating its tables need locks that SQLite's busy handler does not
    always wait for, so a busy open is tried again, with growing random pauses,
    for up to :data:`BUSY_TIMEOUT` seconds.
    """
    try:
        make_private_file(path)  # 0600 (its -wal and -shm take its mode), folders 0700
    except OSError as exc:
        raise StoreError(f"cannot open SQLite store {str(path)!r}: {exc}") from exc
    retrying = Retrying(
        retry=retry_if_exception(lambda exc: _busy(exc, driver)),
        stop=stop_after_delay(BUSY_TIMEOUT),
        wait=wait_random_exponential(multiplier=0.005, max=0.25),
        reraise=True,
    )
    try:
        conn: sqlite3.Connection = retrying(_open_once, path, driver, prepare)
    except OSError as exc:
        raise StoreError(f"cannot open SQLite store {str(path)!r}: {exc}") from exc
    except driver.Error as exc:
        code = getattr(exc, "sqlite_errorcode", None)
        if code in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT) or (
            code is None and "not a database" in str(exc)
        ):
            raise StoreError(
                f"{str(path)!r} is not a SQLite database (or is damaged): {exc}"
            ) from exc
        raise StoreError(f"cannot open SQLite store {str(path)!r}: {exc}") from exc
    conn.execute("PRAGMA busy_timeout=0")  # waits happen in worker threads only (_run_guarded)
    return conn


def _busy(exc: BaseException, driver: ModuleType) -> bool:
    """Whether ``exc`` says another connection holds a lock (worth trying again)."""
    if not isinstance(exc, driver.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def _open_once(path: Path, driver: ModuleType, prepare: Prepare | None) -> sqlite3.Connection:
    """One attempt of :func:`_connect`; driver errors propagate as they are."""
    conn: sqlite3.Connection = driver.connect(
        str(path), timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
    )
    try:
        if prepare is not None:
            prepare(conn)
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
        if str(mode).lower() != "wal":  # WAL is kept in the file: only its creator switches
            (mode,) = conn.execute("PRAGMA journal_mode=WAL").fetchone()
        if str(mode).lower() != "wal":
            raise StoreError(f"SQLite store {str(path)!r} cannot use WAL (journal mode {mode})")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA wal_autocheckpoint=0")  # off the event loop: WalCheckpointer
        conn.execute(f"PRAGMA journal_size_limit={LOG_LIMIT}")  # (as the log starts over)
        with transaction(conn, write=True):
            _check_schema(conn, path)
            for ddl in _TABLES:
                conn.execute(ddl)
    except BaseException:
        conn.close()
        raise
    return conn


def _check_schema(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a file written by a newer layout; record the version in a new one."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS mainspring_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
    )
    row = conn.execute("SELECT value FROM mainspring_meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        conn.execute(
            "INSERT INTO mainspring_meta (key, value) VALUES ('schema_version', ?)",
            (str(SCHEMA_VERSION),),
        )
        return
    try:
        version = int(row[0])
    except (TypeError, ValueError):
        version = 0
    if version < 1:
        raise StoreError(
            f"SQLite store {str(path)!r}: mainspring_meta holds schema version {row[0]!r},"
            " not a positive integer"
        )
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"SQLite store {str(path)!r} has schema version {version}, written by a newer"
            f" mainspring; this one reads up to version {SCHEMA_VERSION}: upgrade mainspring"
        )
    if version < SCHEMA_VERSION:
        # 1 -> 2: checkpoint rows may hold a batch (a JSON array); rows of version 1
        # (one event each) load as they are. Recorded, so an older mainspring, which
        # cannot read a batch, refuses the file instead of calling it corrupt.
        conn.execute(
            "UPDATE mainspring_meta SET value = ? WHERE key = 'schema_version'",
            (str(SCHEMA_VERSION),),
        )


def _run_guarded(
    path: Path,
    error: type[Exception],
    fn: Callable[[sqlite3.Connection, *Ts], T],
    conn: sqlite3.Connection,
    *args: *Ts,
) -> T:
    """``fn`` in a worker thread, waiting up to :data:`BUSY_TIMEOUT` for the write lock."""
    try:
        conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT * 1000)}")
        try:
            return fn(conn, *args)
        finally:
            conn.execute("PRAGMA busy_timeout=0")  # at rest: never wait on the event loop
    except error as exc:
        raise StoreError(f"SQLite store {str(path)!r}: {exc}") from exc


class Database:
    """One connection, used by one operation at a time, always from a worker thread.

    Stores of one deployment that live in one file share one ``Database``
    (:meth:`share`): their operations then queue on its lock instead of
    contending for SQLite's write lock from several connections, where the
    loser sleeps in SQLite's busy handler for a millisecond or more.
    """

    def __init__(self, path: Path, conn: sqlite3.Connection, driver: ModuleType = sqlite3) -> None:
        self.path = path
        self.driver = driver
        """The DB-API module of the connection (``sqlite3``, or a drop-in such as pysqlite3)."""
        self._error: type[Exception] = driver.Error
        self._conn: sqlite3.Connection | None = conn
        # Uncontended, taking the lock does not yield: an inline operation then
        # runs without a trip through the event loop.
        self._lock = anyio.Lock(fast_acquire=True)
        self._users = 1
        self._wal = WalCheckpointer(path, driver)
        self._queued: list[_Queued[Any]] = []
        """Items waiting for :meth:`run_grouped`'s next call, in arrival order."""

    def share(self) -> Database:
        """This database for one more store; it closes when the last one does."""
        self._users += 1
        return self

    @classmethod
    async def open(
        cls, path: StrPath, *, driver: ModuleType = sqlite3, prepare: Prepare | None = None
    ) -> Database:
        """Open ``path`` with ``driver`` (a DB-API module like ``sqlite3``), then ``prepare``."""
        location = Path(path)
        if str(path) in ("", ":memory:"):
            raise ConfigError("an SQLite store needs a file path; use the InMemory stores instead")
        conn = await anyio.to_thread.run_sync(_connect, location, driver, prepare)
        return cls(location, conn, driver)

    async def run(self, fn: Callable[[sqlite3.Connection, *Ts], T], *args: *Ts) -> T:
        """``fn(connection, *args)`` in a worker thread; sqlite errors become StoreError."""
        async with self._lock:
            conn = self._conn
            if conn is None:
                raise StoreError(f"SQLite store {str(self.path)!r} is closed")
            # Not abandoned on cancellation: the lock is held until the call is done.
            try:
                return await anyio.to_thread.run_sync(
                    _run_guarded, self.path, self._error, fn, conn, *args
                )
            finally:
                self._wal.changed(conn.total_changes)

    async def run_grouped(
        self, fn: Callable[[sqlite3.Connection, Sequence[A]], Sequence[object]], item: A
    ) -> object:
        """``fn(connection, [item, ...])`` in a worker thread, with the items queued meanwhile.

        A group commit: while the connection is busy (a commit's fsync takes
        milliseconds on a real disk), the items of every caller that comes
        queue up, and the next one to get the connection hands them all to one
        call of ``fn`` (one transaction, one fsync). ``fn`` returns each item's
        outcome in order: a result, or the exception that item alone failed with
        (it raises when the whole call fails; then every item fails with it).
        Alone, an item goes to ``fn`` by itself as soon as it comes. The queue is
        the database's: every caller passes the same ``fn`` (the stores use
        ``commit_group_synced``, which takes steps and decision claims alike).

        A caller cancelled while its item waits takes it out of the queue (it
        never runs); one whose item another caller already took waits for that
        call to finish (as :meth:`run` waits for its thread), then raises.
        """
        entry = _Queued(item)
        self._queued.append(entry)
        try:
            async with self._lock:
                if not entry.done.is_set():
                    await self._run_queued(fn)
        except BaseException:
            if entry in self._queued:
                self._queued.remove(entry)  # never taken: nothing of it ran
                raise
            if not entry.done.is_set():  # taken by the call under way: not abandoned
                with anyio.CancelScope(shield=True):
                    await entry.done.wait()
            raise
        if entry.error is not None:
            raise entry.error
        return entry.result

    async def _run_queued(
        self, fn: Callable[[sqlite3.Connection, Sequence[A]], Sequence[object]]
    ) -> None:
        """Hand every queued item to one call of ``fn``; each entry gets its outcome."""
        batch, self._queued = self._queued, []
        conn = self._conn
        try:
            if conn is None:
                raise StoreError(f"SQLite store {str(self.path)!r} is closed")
            try:
                outcomes = await anyio.to_thread.run_sync(
                    _run_guarded, self.path, self._error, fn, conn, [e.item for e in batch]
                )
            finally:
                self._wal.changed(conn.total_changes)
        except Exception as exc:
            for entry in batch:
                entry.fail(exc)
            return
        except BaseException:
            for entry in batch:  # (a native cancel that reached the thread's wait)
                entry.fail(StoreError(f"SQLite store {str(self.path)!r}: commit interrupted"))
            raise
        for entry, outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, self._error):
                entry.fail(StoreError(f"SQLite store {str(self.path)!r}: {outcome}"))
            elif isinstance(outcome, Exception):
                entry.fail(outcome)
            else:
                entry.succeed(outcome)

    async def run_inline(self, fn: Callable[[sqlite3.Connection, *Ts], T], *args: *Ts) -> T:
        """``fn(connection, *args)`` on the event loop when it need not wait, else in a thread.

        An uncontended WAL transaction takes tens of microseconds, less than a
        hop to a worker thread and back. So ``fn`` runs here first with no busy
        timeout; if another connection holds the write lock (``SQLITE_BUSY``,
        raised before ``fn`` changed anything), it runs again in a worker thread
        that waits for the lock, and the event loop never blocks on it. Only for
        ``fn`` that can meet ``SQLITE_BUSY`` solely before its first change (one
        statement, or one ``transaction(write=True)``) and never fsyncs.

        While no operation holds the connection, ``fn`` runs without taking the
        lock: nothing can come between the check and the call (no ``await``).
        """
        conn = self._conn
        if conn is not None and not self._lock.locked():
            done, result = self._attempt(conn, fn, args)
            if done:
                return cast(T, result)
        async with self._lock:
            conn = self._conn
            if conn is None:
                raise StoreError(f"SQLite store {str(self.path)!r} is closed")
            done, result = self._attempt(conn, fn, args)
            if done:
                return cast(T, result)
            return await anyio.to_thread.run_sync(
                _run_guarded, self.path, self._error, fn, conn, *args
            )

    def _attempt(
        self,
        conn: sqlite3.Connection,
        fn: Callable[[sqlite3.Connection, *Ts], T],
        args: tuple[*Ts],
    ) -> tuple[bool, T | None]:
        """``(True, fn(conn, *args))``, or ``(False, None)`` if it met another's write lock."""
        try:  # the connection rests with busy_timeout=0: busy raises at once
            return True, fn(conn, *args)
        except self.driver.OperationalError as exc:
            code = getattr(exc, "sqlite_errorcode", None)
            if code not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                raise StoreError(f"SQLite store {str(self.path)!r}: {exc}") from exc
            return False, None
        except self._error as exc:
            raise StoreError(f"SQLite store {str(self.path)!r}: {exc}") from exc
        finally:
            self._wal.changed(conn.total_changes)

    async def aclose(self) -> None:
        """Close the connection once every store sharing it has closed."""
        if self._users > 1:
            self._users -= 1
            return
        self._users = 0
        with anyio.CancelScope(shield=True):
            async with self._lock:
                conn, self._conn = self._conn, None
                await self._wal.join()
                if conn is not None:
                    await anyio.to_thread.run_sync(conn.close)


class _Queued(Generic[A]):
    """An item waiting in :meth:`Database.run_grouped`, and then its outcome."""

    __slots__ = ("done", "error", "item", "result")

    def __init__(self, item: A) -> None:
        self.item = item
        self.done = anyio.Event()
        self.result: object = None
        self.error: Exception | None = None

    def succeed(self, result: object) -> None:
        self.result = result
        self.done.set()

    def fail(self, error: Exception) -> None:
        self.error = error
        self.done.set()
