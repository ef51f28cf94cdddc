"""SQLite statements of shared records (``SharedRecords``; table ``mainspring_records``).

Each operation is one write transaction, fsynced (``synchronous=FULL``): a
claimed nonce or a taken paused call rolled back by a power loss could let a
request run twice.
"""

from __future__ import annotations

import sqlite3

from mainspring.stores._sqlite import synced, transaction
from mainspring.stores.base import RecordAdded

__all__ = ["list_owned", "put_record", "take_record"]

Put = tuple[str, str, str, str, float, int | None, float]
"""``(kind, key, owner, value, expires_at, limit, now)``."""


def put_record(conn: sqlite3.Connection, args: Put) -> RecordAdded:
    kind, key, owner, value, expires_at, limit, now = args
    with synced(conn), transaction(conn, write=True):
        conn.execute("DELETE FROM mainspring_records WHERE expires_at <= ?", (now,))
        if conn.execute(
            "SELECT 1 FROM mainspring_records WHERE kind = ? AND key = ?", (kind, key)
        ).fetchone():
            return "exists"
        if limit is not None:
            (held,) = conn.execute(
                "SELECT count(*) FROM mainspring_records WHERE kind = ? AND owner = ?",
                (kind, owner),
            ).fetchone()
            if held >= limit:
                return "full"
        conn.execute(
            "INSERT INTO mainspring_records (kind, key, owner, value, expires_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (kind, key, owner, value, expires_at),
        )
    return "added"


def take_record(
    conn: sqlite3.Connection, kind: str, key: str, now: float
) -> tuple[str, str] | None:
    with synced(conn), transaction(conn, write=True):
        row = conn.execute(
            "DELETE FROM mainspring_records WHERE kind = ? AND key = ? RETURNING"
            " owner, value, expires_at",
            (kind, key),
        ).fetchone()
    if row is None or float(row[2]) <= now:
        return None
    return str(row[0]), str(row[1])


def list_owned(
    conn: sqlite3.Connection, kind: str, owner: str, now: float, limit: int
) -> list[tuple[str, str]]:
    rows = conn.execute(
        "SELECT key, value FROM mainspring_records WHERE kind = ? AND owner = ?"
        " AND expires_at > ? ORDER BY key LIMIT ?",
        (kind, owner, now, limit),
    ).fetchall()
    return [(str(k), str(v)) for k, v in rows]
