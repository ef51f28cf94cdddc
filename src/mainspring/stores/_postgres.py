"""One PostgreSQL connection of a store object, used by one operation at a time.

The PostgreSQL stores (:mod:`mainspring.stores.postgres`,
:mod:`mainspring.stores.postgres_memory`) each hold a :class:`PostgresConnection`:
it connects on first use and runs the store's ``set_up`` hook (tables, schema
checks) on every new connection, in a transaction holding the store's advisory
lock (workers opening at once create tables one at a time); an operation that finds the connection
closed, or left inside a transaction by an operation that was cancelled or
failed, gets a new one. Database errors inside :meth:`PostgresConnection.use`
become :class:`~mainspring.errors.StoreError` naming the operation; closing
is shielded from cancellation, so a connection is never left half-closed.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio

try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict
    from psycopg.pq import TransactionStatus
    from psycopg.rows import TupleRow
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError('PostgreSQL stores need: pip install "mainspring[postgres]"') from exc

from mainspring.errors import ConfigError, StoreError

__all__ = ["Connection", "PostgresConnection"]

Connection = psycopg.AsyncConnection[TupleRow]
"""An open autocommit connection, as :meth:`PostgresConnection.use` yields it."""

SetUp = Callable[[Connection], Awaitable[None]]


class PostgresConnection:
    """A store's connection to ``url``: made on first use, made again when it broke.

    ``set_up`` runs on each new connection before any operation uses it, in a
    transaction holding the advisory lock ``setup_lock``; what it raises
    closes that connection and reaches the caller (a database error as
    StoreError: setting up ``what`` failed).
    """

    def __init__(
        self, url: str, *, connect_timeout: int, set_up: SetUp, setup_lock: int, what: str
    ) -> None:
        """Prepare a connection to ``url`` without connecting.

        Raises:
            ConfigError: ``url`` is not a PostgreSQL URL or connection string.
        """
        try:
            params = conninfo_to_dict(url)
        except psycopg.ProgrammingError:
            # from None: the URL may hold a password.
            raise ConfigError("not a PostgreSQL URL or connection string") from None
        host = params.get("host") or os.environ.get("PGHOST") or "localhost"
        port = params.get("port") or os.environ.get("PGPORT") or 5432
        self.where = f"{host}:{port}"
        """``host:port``, for messages (never the URL: it may hold a password)."""
        self._url = url
        self._connect_timeout = connect_timeout
        self._set_up = set_up
        self._setup_lock = setup_lock
        self._what = what
        self._conn: Connection | None = None
        self._lock = anyio.Lock()

    @asynccontextmanager
    async def use(self, action: str) -> AsyncIterator[Connection]:
        """The connection, for one operation at a time; database errors become StoreError.

        Raises:
            StoreError: The server cannot be reached, or ``action`` failed.
        """
        async with self._lock:
            conn = await self._connection()
            try:
                yield conn
            except psycopg.Error as exc:
                raise StoreError(f"PostgreSQL at {self.where}: {action} failed: {exc}") from exc

    async def connect(self) -> None:
        """Connect (and set up) now, unless connected.

        Raises:
            StoreError: The server cannot be reached, or setting up failed.
        """
        async with self._lock:
            await self._connection()

    async def _connection(self) -> Connection:
        """The open connection, made again if it broke or was left mid-operation."""
        conn = self._conn
        if conn is not None:
            if not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE:
                return conn
            self._conn = None
            await _close(conn)
        try:
            conn = await psycopg.AsyncConnection.connect(
                self._url, autocommit=True, connect_timeout=self._connect_timeout
            )
        except psycopg.Error as exc:
            raise StoreError(f"cannot reach PostgreSQL at {self.where}: {exc}") from exc
        try:
            await self._setting_up(conn)
        except BaseException:
            await _close(conn)
            raise
        self._conn = conn
        return conn

    async def _setting_up(self, conn: Connection) -> None:
        try:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._setup_lock,))
                await self._set_up(conn)
        except psycopg.Error as exc:
            raise StoreError(
                f"PostgreSQL at {self.where}: setting up {self._what} failed: {exc}"
            ) from exc

    async def aclose(self) -> None:
        """Close the connection (the next :meth:`use` connects again)."""
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                await _close(conn)


async def _close(conn: Connection) -> None:
    with anyio.CancelScope(shield=True):
        await conn.close()
