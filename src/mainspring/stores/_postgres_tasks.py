"""PostgreSQL statements of A2A task records (``TaskRecords``; table ``mainspring_tasks``).

Expiry is on the server's clock, as for shared records. A save upserts its
row and prunes a few expired rows of any owner in the same statement,
skipping rows another save holds, so saves never wait on each other's sweep.
"""

from __future__ import annotations

from psycopg import AsyncConnection
from psycopg.rows import TupleRow

__all__ = ["delete_task", "load_task", "owned_tasks", "save_task"]

_NOW = "extract(epoch from clock_timestamp())"
# The sweep leaves the saved row alone: one statement must not both delete
# and update a row (PostgreSQL does only one of the two, and not predictably).
_SAVE = f"""
    WITH swept AS (
        DELETE FROM mainspring_tasks WHERE ctid IN (
            SELECT ctid FROM mainspring_tasks
            WHERE expires_at <= {_NOW} AND NOT (owner = %(owner)s AND task_id = %(task_id)s)
            LIMIT 64 FOR UPDATE SKIP LOCKED
        )
    )
    INSERT INTO mainspring_tasks (owner, task_id, data, expires_at)
    VALUES (%(owner)s, %(task_id)s, %(data)s, {_NOW} + %(ttl)s)
    ON CONFLICT (owner, task_id) DO UPDATE
    SET data = EXCLUDED.data, expires_at = EXCLUDED.expires_at
"""
_LOAD = (
    f"SELECT data FROM mainspring_tasks WHERE owner = %s AND task_id = %s AND expires_at > {_NOW}"
)
_OWNED = (
    "SELECT task_id, data FROM mainspring_tasks"
    f' WHERE owner = %s AND expires_at > {_NOW} ORDER BY task_id COLLATE "C"'
)
_DELETE = "DELETE FROM mainspring_tasks WHERE owner = %s AND task_id = %s"

Connection = AsyncConnection[TupleRow]


async def save_task(conn: Connection, owner: str, task_id: str, data: bytes, ttl: float) -> None:
    await conn.execute(_SAVE, {"owner": owner, "task_id": task_id, "data": data, "ttl": ttl})


async def load_task(conn: Connection, owner: str, task_id: str) -> bytes | None:
    cur = await conn.execute(_LOAD, (owner, task_id))
    row = await cur.fetchone()
    return None if row is None else bytes(row[0])


async def owned_tasks(conn: Connection, owner: str) -> list[tuple[str, bytes]]:
    cur = await conn.execute(_OWNED, (owner,))
    return [(str(task_id), bytes(data)) for task_id, data in await cur.fetchall()]


async def delete_task(conn: Connection, owner: str, task_id: str) -> None:
    await conn.execute(_DELETE, (owner, task_id))
