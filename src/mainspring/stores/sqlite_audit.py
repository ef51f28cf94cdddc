"""SQLiteAuditStore: audit logs in the SQLite file that holds the sessions.

Two tables, created when missing:

- ``mainspring_audit``: one row per entry, keyed ``(log, seq)``: the entry's line.
- ``mainspring_audit_head``: one row per log, its signed head, apart from the entries.

An append is one write transaction (``BEGIN IMMEDIATE``): it reads the head,
seals the entry against it, inserts the entry and replaces the head. The write
lock is the file's, so workers in any number of processes make one chain; the
primary key refuses a second entry at a ``seq``. Commits use the file's
``synchronous=NORMAL``: a power loss may take back the last appends, entry and
head together, never one without the other.
"""

from __future__ import annotations

import sqlite3
from typing import Self

from mainspring.audit.store import Seal, Sealed
from mainspring.stores._sqlite import Database, StrPath, transaction

__all__ = ["SQLiteAuditStore"]

_TABLES = (
    """CREATE TABLE IF NOT EXISTS mainspring_audit (
        log TEXT NOT NULL,
        seq INTEGER NOT NULL,
        entry TEXT NOT NULL,
        PRIMARY KEY (log, seq)
    )""",
    """CREATE TABLE IF NOT EXISTS mainspring_audit_head (
        log TEXT PRIMARY KEY,
        head TEXT NOT NULL
    )""",
)


def _create(conn: sqlite3.Connection) -> None:
    with transaction(conn, write=True):
        for ddl in _TABLES:
            conn.execute(ddl)


def _append(conn: sqlite3.Connection, log: str, seal: Seal) -> Sealed:
    with transaction(conn, write=True):
        row = conn.execute(
            "SELECT head FROM mainspring_audit_head WHERE log = ?", (log,)
        ).fetchone()
        sealed = seal(None if row is None else str(row[0]))
        conn.execute(
            "INSERT INTO mainspring_audit (log, seq, entry) VALUES (?, ?, ?)",
            (log, sealed.seq, sealed.entry),
        )
        conn.execute(
            "INSERT OR REPLACE INTO mainspring_audit_head (log, head) VALUES (?, ?)",
            (log, sealed.head),
        )
    return sealed


def _entries(conn: sqlite3.Connection, log: str, after: int, limit: int) -> list[tuple[int, str]]:
    rows = conn.execute(
        "SELECT seq, entry FROM mainspring_audit WHERE log = ? AND seq > ? ORDER BY seq LIMIT ?",
        (log, after, limit),
    ).fetchall()
    return [(int(seq), str(entry)) for seq, entry in rows]


def _head(conn: sqlite3.Connection, log: str) -> str | None:
    row = conn.execute("SELECT head FROM mainspring_audit_head WHERE log = ?", (log,)).fetchone()
    return None if row is None else str(row[0])


class SQLiteAuditStore:
    """Audit logs in a SQLite file (see the module docstring)."""

    def __init__(self, database: Database) -> None:
        """Wrap an open database whose audit tables exist; use :meth:`open`."""
        self._db = database

    @classmethod
    async def open(cls, path: StrPath) -> Self:
        """Open (or create) the audit tables in the SQLite file at ``path``.

        Raises:
            StoreError: The file cannot be opened or is not a SQLite database.
            SchemaTooNew: The file was written by a newer mainspring.
        """
        database = await Database.open(path)
        try:
            await database.run(_create)
        except BaseException:
            await database.aclose()
            raise
        return cls(database)

    async def append_audit(self, log: str, seal: Seal) -> Sealed:
        """See :meth:`~mainspring.audit.store.AuditStore.append_audit`."""
        return await self._db.run_inline(_append, log, seal)

    async def audit_entries(
        self, log: str, *, after: int = 0, limit: int = 1000
    ) -> list[tuple[int, str]]:
        """See :meth:`~mainspring.audit.store.AuditStore.audit_entries`."""
        return await self._db.run_inline(_entries, log, after, max(limit, 0))

    async def audit_head(self, log: str) -> str | None:
        """See :meth:`~mainspring.audit.store.AuditStore.audit_head`."""
        return await self._db.run_inline(_head, log)

    async def aclose(self) -> None:
        """Close the connection."""
        await self._db.aclose()
