"""SQLite statements of A2A task records (``TaskRecords``; table ``mainspring_tasks``).

A save is one write transaction: it drops the rows expired by then (every
owner's; an index on ``expires_at`` keeps that a short probe) and upserts its
own. Not fsynced (``synchronous=NORMAL``): a task record is what a client
reads about a turn, not a guard; the session's decision claim, fsynced, is
what keeps a write to one run, and a power loss that rolls a record back
leaves the session the truth.
"""

from __future__ import annotations

import sqlite3

from mainspring.errors import StoreError
from mainspring.stores._sqlite import transaction

__all__ = ["delete_task", "load_task", "owned_tasks", "save_task"]

Save = tuple[str, str, bytes, float, float]
"""``(owner, task_id, data, expires_at, now)``."""


def save_task(conn: sqlite3.Connection, args: Save) -> None:
    owner, task_id, data, expires_at, now = args
    with transaction(conn, write=True):
        conn.execute("DELETE FROM mainspring_tasks WHERE expires_at <= ?", (now,))
        conn.execute(
            "INSERT INTO mainspring_tasks (owner, task_id, data, expires_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (owner, task_id) DO UPDATE"
            " SET data = excluded.data, expires_at = excluded.expires_at",
            (owner, task_id, data, expires_at),
        )


def load_task(conn: sqlite3.Connection, owner: str, task_id: str, now: float) -> bytes | None:
    row = conn.execute(
        "SELECT data FROM mainspring_tasks WHERE owner = ? AND task_id = ? AND expires_at > ?",
        (owner, task_id, now),
    ).fetchone()
    return None if row is None else _data(task_id, row[0])


def owned_tasks(conn: sqlite3.Connection, owner: str, now: float) -> list[tuple[str, bytes]]:
    rows = conn.execute(
        "SELECT task_id, data FROM mainspring_tasks WHERE owner = ? AND expires_at > ?"
        " ORDER BY task_id",
        (owner, now),
    ).fetchall()
    return [(str(task_id), _data(str(task_id), data)) for task_id, data in rows]


def delete_task(conn: sqlite3.Connection, owner: str, task_id: str) -> None:
    conn.execute("DELETE FROM mainspring_tasks WHERE owner = ? AND task_id = ?", (owner, task_id))


def _data(task_id: str, data: object) -> bytes:
    """A row's data, which SQLite (typed by value) may hold as anything if it was tampered with."""
    if not isinstance(data, bytes):
        raise StoreError(
            f"stored A2A task {task_id!r} is damaged: its data is {type(data).__name__}, not bytes"
        )
    return data
