"""PostgresAuditStore: audit logs in the PostgreSQL database that holds the sessions.

Two tables, created when missing: ``mainspring_audit`` (one row per entry,
keyed ``(log, seq)``) and ``mainspring_audit_head`` (one row per log: its
signed head, apart from the entries). An append is one transaction that locks
the log's head row (``SELECT … FOR UPDATE``; the row is made empty first if the
log is new), seals the entry against it, inserts the entry and updates the
head: workers on any number of machines make one chain.
"""

from __future__ import annotations

from typing import Self

from mainspring.audit.store import Seal, Sealed
from mainspring.stores._postgres import Connection, PostgresConnection

__all__ = ["PostgresAuditStore"]

_SETUP_LOCK = 0x6D61696E617564  # "mainaud": serializes table creation across workers

_TABLES = (
    """CREATE TABLE IF NOT EXISTS mainspring_audit (
        log text NOT NULL,
        seq bigint NOT NULL,
        entry text NOT NULL,
        PRIMARY KEY (log, seq)
    )""",
    """CREATE TABLE IF NOT EXISTS mainspring_audit_head (
        log text PRIMARY KEY,
        head text
    )""",
)


async def _set_up(conn: Connection) -> None:
    for ddl in _TABLES:
        await conn.execute(ddl)


class PostgresAuditStore:
    """Audit logs in PostgreSQL (see the module docstring)."""

    def __init__(self, url: str, *, connect_timeout: int = 10) -> None:
        """Prepare a store on ``url`` without connecting; use :meth:`open`.

        Raises:
            ConfigError: ``url`` is not a PostgreSQL URL or connection string.
        """
        self._db = PostgresConnection(
            url,
            connect_timeout=connect_timeout,
            set_up=_set_up,
            setup_lock=_SETUP_LOCK,
            what="audit tables",
        )

    @classmethod
    async def open(cls, url: str, *, connect_timeout: int = 10) -> Self:
        """Connect to ``url`` and create the tables if missing.

        Raises:
            StoreError: The server cannot be reached.
        """
        store = cls(url, connect_timeout=connect_timeout)
        await store._db.connect()
        return store

    async def append_audit(self, log: str, seal: Seal) -> Sealed:
        """See :meth:`~mainspring.audit.store.AuditStore.append_audit`."""
        async with self._db.use(f"append to audit log {log!r}") as conn:
            async with conn.transaction():
                await conn.execute(
                    "INSERT INTO mainspring_audit_head (log, head) VALUES (%s, NULL)"
                    " ON CONFLICT (log) DO NOTHING",
                    (log,),
                )
                cur = await conn.execute(
                    "SELECT head FROM mainspring_audit_head WHERE log = %s FOR UPDATE", (log,)
                )
                row = await cur.fetchone()
                sealed = seal(None if row is None or row[0] is None else str(row[0]))
                await conn.execute(
                    "INSERT INTO mainspring_audit (log, seq, entry) VALUES (%s, %s, %s)",
                    (log, sealed.seq, sealed.entry),
                )
                await conn.execute(
                    "UPDATE mainspring_audit_head SET head = %s WHERE log = %s",
                    (sealed.head, log),
                )
        return sealed

    async def audit_entries(
        self, log: str, *, after: int = 0, limit: int = 1000
    ) -> list[tuple[int, str]]:
        """See :meth:`~mainspring.audit.store.AuditStore.audit_entries`."""
        async with self._db.use(f"read of audit log {log!r}") as conn:
            cur = await conn.execute(
                "SELECT seq, entry FROM mainspring_audit WHERE log = %s AND seq > %s"
                " ORDER BY seq LIMIT %s",
                (log, after, max(limit, 0)),
            )
            rows = await cur.fetchall()
        return [(int(seq), str(entry)) for seq, entry in rows]

    async def audit_head(self, log: str) -> str | None:
        """See :meth:`~mainspring.audit.store.AuditStore.audit_head`."""
        async with self._db.use(f"read of audit head {log!r}") as conn:
            cur = await conn.execute(
                "SELECT head FROM mainspring_audit_head WHERE log = %s", (log,)
            )
            row = await cur.fetchone()
        return None if row is None or row[0] is None else str(row[0])

    async def aclose(self) -> None:
        """Close the connection."""
        await self._db.aclose()
