r"""PostgreSQL session store: durable sessions shared by many workers.

Import it from this module (``mainspring.stores`` does not, so that it stays
light without the extra)::

    from mainspring.stores.postgres import PostgresSessionStore

    store = await PostgresSessionStore.open("postgresql://user:password@db.internal/app")

Tables are created when missing, in the connection's first schema on
``search_path`` (pick another with ``?options=-csearch_path%3Dmyschema``):

- ``mainspring_meta``: the layout version.
- ``mainspring_sessions``: one row per session, the state without its
  transcript, decisions and write ledger.
- ``mainspring_messages``: the transcript, one row per message; ``save``
  inserts only the messages not stored yet, and rewrites the stored ones
  from the first that differs from the state's.
- ``mainspring_decisions``: keyed by ``(session_id, attempt_id)``, so a
  decision is claimed once, by whichever worker inserts it first.
- ``mainspring_writes``: the write ledger, upserted by ``(session_id, key)``.
- ``mainspring_records``: shared records (``SharedRecords``: nonces, used
  approvals, paused calls), keyed ``(kind, key)``, expiring on the server's clock.
- ``mainspring_tasks``: the server's A2A task records (``TaskRecords``), keyed
  ``(owner, task_id)``, expiring on the server's clock.

JSON is stored as ``text``, not ``jsonb``: jsonb rejects the NUL character
(``\u0000``) that message text may contain.

Each store object holds one connection and runs one operation at a time on
it; open one per worker. A lost connection fails the operation in progress
with :class:`~mainspring.errors.StoreError`; the next one reconnects.
psycopg's async connection runs on asyncio only (not trio).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Collection, Sequence
from typing import Self

from pydantic import JsonValue, ValidationError

try:
    from mainspring.stores._postgres import Connection, PostgresConnection
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'mainspring.stores.postgres needs: pip install "mainspring[postgres]"'
    ) from exc

from mainspring.codec import encode, message_from_dict, message_to_dict
from mainspring.errors import ConfigError, SchemaTooNew, StoreError
from mainspring.messages import Message
from mainspring.state import SessionState, WriteRecord, state_from_stored
from mainspring.stores import _postgres_tasks as tasks
from mainspring.stores._transcript import KnownTranscripts, Stored, common_prefix
from mainspring.stores.base import SCHEMA_VERSION, RecordAdded, SpendKind
from mainspring.stores.records import check_kind, check_record_ttl

__all__ = ["PostgresSessionStore"]

# Serializes table creation across workers opening at once (CREATE TABLE IF NOT
# EXISTS races otherwise). The number spells "mainspr".
_SETUP_LOCK = 0x6D61696E737072

_TABLES = (
    """CREATE TABLE IF NOT EXISTS mainspring_sessions (
        session_id text PRIMARY KEY,
        data text NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS mainspring_messages (
        session_id text NOT NULL,
        seq integer NOT NULL,
        data text NOT NULL,
        PRIMARY KEY (session_id, seq)
    )""",
    """CREATE TABLE IF NOT EXISTS mainspring_decisions (
        session_id text NOT NULL,
        attempt_id text NOT NULL,
        decision text NOT NULL,
        PRIMARY KEY (session_id, attempt_id)
    )""",
    """CREATE TABLE IF NOT EXISTS mainspring_writes (
        session_id text NOT NULL,
        key text NOT NULL,
        data text NOT NULL,
        PRIMARY KEY (session_id, key)
    )""",
    """CREATE TABLE IF NOT EXISTS mainspring_spend (
        session_id text NOT NULL,
        kind text NOT NULL,
        amount double precision NOT NULL,
        PRIMARY KEY (session_id, kind)
    )""",
    """CREATE TABLE IF NOT EXISTS mainspring_records (
        kind text NOT NULL,
        key text NOT NULL,
        owner text NOT NULL,
        value text NOT NULL,
        expires_at double precision NOT NULL,
        PRIMARY KEY (kind, key)
    )""",
    "CREATE INDEX IF NOT EXISTS mainspring_records_owner ON mainspring_records (kind, owner)",
    "CREATE INDEX IF NOT EXISTS mainspring_records_expiry ON mainspring_records (expires_at)",
    """CREATE TABLE IF NOT EXISTS mainspring_tasks (
        owner text NOT NULL,
        task_id text NOT NULL,
        data bytea NOT NULL,
        expires_at double precision NOT NULL,
        PRIMARY KEY (owner, task_id)
    )""",
    "CREATE INDEX IF NOT EXISTS mainspring_tasks_expiry ON mainspring_tasks (expires_at)",
)
_NOW = "extract(epoch from clock_timestamp())"
# A bounded put holds its owner's advisory lock for the transaction, so two
# workers counting the owner's records never both see room for one more.
_RECORD_OWNER_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
# An expired record of the key goes first (one row: two puts of it serialize on
# it); others expired go a few at a time, skipping rows another put holds, so
# sweeps never wait on each other (nor deadlock).
_RECORD_SWEEP_KEY = (
    f"DELETE FROM mainspring_records WHERE kind = %s AND key = %s AND expires_at <= {_NOW}"
)
_RECORD_SWEEP_SOME = f"""
    DELETE FROM mainspring_records WHERE ctid IN (
        SELECT ctid FROM mainspring_records WHERE expires_at <= {_NOW}
        LIMIT 64 FOR UPDATE SKIP LOCKED
    )
"""
_RECORD_COUNT = (
    "SELECT count(*) FROM mainspring_records"
    f" WHERE kind = %s AND owner = %s AND expires_at > {_NOW}"
)
_RECORD_INSERT = f"""
    INSERT INTO mainspring_records (kind, key, owner, value, expires_at)
    VALUES (%s, %s, %s, %s, {_NOW} + %s)
    ON CONFLICT (kind, key) DO NOTHING
"""
_RECORD_TAKE = f"""
    DELETE FROM mainspring_records WHERE kind = %s AND key = %s
    RETURNING owner, value, expires_at > {_NOW}
"""
_RECORD_OWNED = f"""
    SELECT key, value FROM mainspring_records
    WHERE kind = %s AND owner = %s AND expires_at > {_NOW} ORDER BY key COLLATE "C" LIMIT %s
"""
_DELETES = (
    "DELETE FROM mainspring_sessions WHERE session_id = %s",
    "DELETE FROM mainspring_messages WHERE session_id = %s",
    "DELETE FROM mainspring_decisions WHERE session_id = %s",
    "DELETE FROM mainspring_writes WHERE session_id = %s",
    "DELETE FROM mainspring_spend WHERE session_id = %s",
)
# One statement, so concurrent adds serialize on the row: the total rises to the
# floor first; an add that would pass the cap changes nothing and returns no row.
_ADD_SPEND = """
    INSERT INTO mainspring_spend AS s (session_id, kind, amount)
    SELECT %(sid)s, %(kind)s, %(floor)s + %(amount)s WHERE %(floor)s + %(amount)s <= %(cap)s
    ON CONFLICT (session_id, kind) DO UPDATE
    SET amount = GREATEST(s.amount, %(floor)s) + %(amount)s
    WHERE GREATEST(s.amount, %(floor)s) + %(amount)s <= %(cap)s
    RETURNING amount
"""
# A hold is a row of its own ("hold:<kind>:<key>"), added in the same statement.
_ADD_HELD_SPEND = f"""
    WITH added AS ({_ADD_SPEND}), held AS (
        INSERT INTO mainspring_spend AS h (session_id, kind, amount)
        SELECT %(sid)s, %(hold)s, %(amount)s FROM added
        ON CONFLICT (session_id, kind) DO UPDATE SET amount = h.amount + EXCLUDED.amount
    )
    SELECT amount FROM added
"""
_HOLDS = """
    SELECT kind, amount FROM mainspring_spend
    WHERE session_id = %s AND left(kind, length(%s)) = %s FOR UPDATE
"""
_INSERT_DECISION = """
    INSERT INTO mainspring_decisions (session_id, attempt_id, decision) VALUES (%s, %s, %s)
    ON CONFLICT (session_id, attempt_id) DO NOTHING
"""
_UPSERT_WRITE = """
    INSERT INTO mainspring_writes (session_id, key, data) VALUES (%s, %s, %s)
    ON CONFLICT (session_id, key) DO UPDATE SET data = EXCLUDED.data
"""
# save() only fills gaps in the ledger: a stale state must never move an entry
# back (say from "done" to "started"); record_write is the one path forward.
_INSERT_WRITE = """
    INSERT INTO mainspring_writes (session_id, key, data) VALUES (%s, %s, %s)
    ON CONFLICT (session_id, key) DO NOTHING
"""


def _dumps(data: JsonValue) -> str:
    # json escapes control characters, so NUL is stored as the six characters \u0000.
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


class PostgresSessionStore:
    """Session states in PostgreSQL tables: an append-only transcript, atomic claims.

    ``save`` remembers what it stored or loaded for the last
    :attr:`CACHE_SIZE` sessions, with the session row's revision; while
    nobody else saved since, it compares the state's messages with those by
    reference. Otherwise it compares the stored transcript with the state's
    and rewrites it from the first message that differs.
    """

    CACHE_SIZE = 256
    """Sessions whose stored transcript this object remembers (message references)."""

    def __init__(self, url: str, *, connect_timeout: int = 10) -> None:
        """Prepare a store on ``url`` without connecting; use :meth:`open`.

        Raises:
            ConfigError: ``url`` is not a PostgreSQL URL or connection string.
        """
        self._db = PostgresConnection(
            url,
            connect_timeout=connect_timeout,
            set_up=self._set_up,
            setup_lock=_SETUP_LOCK,
            what="tables",
        )
        self._known = KnownTranscripts(self.CACHE_SIZE)
        """Revisions are the session row's ``xmin``: the transaction that wrote it
        last. Every save rewrites the row (in any mainspring version), so an
        unchanged ``xmin`` means nobody saved since."""

    @classmethod
    async def open(cls, url: str, *, connect_timeout: int = 10) -> Self:
        """Connect to ``url`` and create the tables if missing.

        Args:
            url: A ``postgresql://`` URL or a libpq connection string.
            connect_timeout: Seconds to wait for the server.

        Raises:
            StoreError: The server cannot be reached.
            SchemaTooNew: The tables were written by a newer mainspring.
        """
        store = cls(url, connect_timeout=connect_timeout)
        await store._db.connect()
        return store

    async def _set_up(self, conn: Connection) -> None:
        """Check the schema version (set it on first use) and create missing tables."""
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS mainspring_meta (key text PRIMARY KEY, value text NOT NULL)"
        )
        await conn.execute(
            "INSERT INTO mainspring_meta (key, value) VALUES ('schema_version', %s)"
            " ON CONFLICT (key) DO NOTHING",
            (str(SCHEMA_VERSION),),
        )
        cur = await conn.execute("SELECT value FROM mainspring_meta WHERE key = 'schema_version'")
        row = await cur.fetchone()
        stored = row[0] if row else None
        try:
            version = int(str(stored))
        except ValueError:
            raise StoreError(
                f"PostgreSQL at {self._db.where}: mainspring_meta holds schema version"
                f" {stored!r}, not a number"
            ) from None
        if version > SCHEMA_VERSION:
            raise SchemaTooNew(
                f"PostgreSQL at {self._db.where} holds schema version {version}, written"
                f" by a newer mainspring; this one reads up to version {SCHEMA_VERSION}"
            )
        for ddl in _TABLES:
            await conn.execute(ddl)

    async def save(self, state: SessionState) -> None:
        """Write the state in one transaction (recorded decisions and ledger entries are kept).

        Only messages not stored yet are inserted; the stored transcript is
        rewritten from the first message that differs from the state's.
        """
        sid = state.session_id
        header = encode(dataclasses.replace(state, messages=[], decided={}, writes={}))
        decisions = [(sid, attempt_id, d) for attempt_id, d in state.decided.items()]
        writes = [(sid, key, _dumps(encode(record))) for key, record in state.writes.items()]
        messages = list(state.messages)
        known = self._known.get(sid)
        self._known.remember(sid, None)  # until this save is known to have committed
        async with self._db.use(f"save of session {sid!r}") as conn:
            async with conn.transaction():
                # Writing the session's row locks it: saves of one session run one at a time.
                revision, unchanged = await self._write_header(conn, sid, _dumps(header), known)
                if unchanged:  # the stored messages are the ones this object remembers
                    assert known is not None
                    start = await self._cut(conn, sid, messages, known.messages)
                else:
                    start = await self._compared_prefix(conn, sid, messages)
                if start < len(messages):
                    async with conn.cursor() as cur:
                        await cur.executemany(
                            "INSERT INTO mainspring_messages (session_id, seq, data)"
                            " VALUES (%s, %s, %s)",
                            [
                                (sid, seq, _dumps(message_to_dict(messages[seq])))
                                for seq in range(start, len(messages))
                            ],
                        )
                async with conn.cursor() as cur:
                    if decisions:
                        await cur.executemany(_INSERT_DECISION, decisions)
                    if writes:
                        await cur.executemany(_INSERT_WRITE, writes)
        self._known.remember(sid, Stored(revision, messages))

    @staticmethod
    async def _write_header(
        conn: Connection, sid: str, header: str, known: Stored | None
    ) -> tuple[str, bool]:
        """Write the session's row: its new revision, and whether nobody wrote it since.

        Nobody did when its revision is still the one this object's last save
        or load of the session saw.
        """
        if known is not None:
            cur = await conn.execute(
                "UPDATE mainspring_sessions SET data = %s"
                " WHERE session_id = %s AND xmin::text = %s RETURNING xmin::text",
                (header, sid, known.revision),
            )
            row = await cur.fetchone()
            if row is not None:
                return str(row[0]), True
        cur = await conn.execute(
            "INSERT INTO mainspring_sessions (session_id, data) VALUES (%s, %s)"
            " ON CONFLICT (session_id) DO UPDATE SET data = EXCLUDED.data RETURNING xmin::text",
            (sid, header),
        )
        row = await cur.fetchone()
        assert row is not None  # (an upsert returns its row)
        return str(row[0]), False

    @staticmethod
    async def _cut(
        conn: Connection, sid: str, messages: Sequence[Message], stored: Sequence[Message]
    ) -> int:
        """The stored prefix, comparing references with what is known stored (rows past it go)."""
        keep = common_prefix(messages, stored)
        if keep < len(stored):
            await conn.execute(
                "DELETE FROM mainspring_messages WHERE session_id = %s AND seq >= %s", (sid, keep)
            )
        return keep

    @staticmethod
    async def _compared_prefix(conn: Connection, sid: str, messages: Sequence[Message]) -> int:
        """The stored prefix, comparing the stored rows' JSON with the state's (rows past it go)."""
        cur = await conn.execute(
            "SELECT data FROM mainspring_messages WHERE session_id = %s ORDER BY seq", (sid,)
        )
        keep = 0
        async for (data,) in cur:
            if keep >= len(messages) or str(data) != _dumps(message_to_dict(messages[keep])):
                break
            keep += 1
        await conn.execute(
            "DELETE FROM mainspring_messages WHERE session_id = %s AND seq >= %s", (sid, keep)
        )
        return keep

    async def load(self, session_id: str) -> SessionState | None:
        """The saved state with every recorded decision and ledger entry, or ``None``.

        Raises:
            StoreError: A stored row cannot be decoded.
        """
        async with self._db.use(f"load of session {session_id!r}") as conn, conn.transaction():
            # One snapshot for the four reads, even while another worker saves.
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            cur = await conn.execute(
                "SELECT data, xmin::text FROM mainspring_sessions WHERE session_id = %s",
                (session_id,),
            )
            header = await cur.fetchone()
            if header is None:
                self._known.remember(session_id, None)
                return None
            cur = await conn.execute(
                "SELECT data FROM mainspring_messages WHERE session_id = %s ORDER BY seq",
                (session_id,),
            )
            messages = await cur.fetchall()
            cur = await conn.execute(
                "SELECT attempt_id, decision FROM mainspring_decisions WHERE session_id = %s",
                (session_id,),
            )
            decisions = await cur.fetchall()
            cur = await conn.execute(
                "SELECT key, data FROM mainspring_writes WHERE session_id = %s ORDER BY key",
                (session_id,),
            )
            writes = await cur.fetchall()
        try:
            state = state_from_stored(
                json.loads(str(header[0])), ((str(k), json.loads(str(w))) for k, w in writes)
            )
            state.messages = [message_from_dict(json.loads(str(m))) for (m,) in messages]
            state.decided = {str(a): str(d) for a, d in decisions}
        except (ValueError, ValidationError, RecursionError) as exc:
            raise StoreError(
                f"PostgreSQL at {self._db.where}: stored session {session_id!r}"
                f" is unreadable: {exc}"
            ) from exc
        self._known.remember(session_id, Stored(str(header[1]), list(state.messages)))
        return state

    async def delete(self, session_id: str) -> None:
        """Forget a session and everything recorded for it."""
        self._known.remember(session_id, None)
        async with self._db.use(f"delete of session {session_id!r}") as conn, conn.transaction():
            for statement in _DELETES:
                await conn.execute(statement, (session_id,))

    async def session_ids(self, *, limit: int = 100, principal: str | None = None) -> list[str]:
        """Stored session ids (only ``principal``'s, if given), sorted, at most ``limit``."""
        async with self._db.use("listing sessions") as conn:
            if principal is None:
                cur = await conn.execute(
                    "SELECT session_id FROM mainspring_sessions ORDER BY session_id LIMIT %s",
                    (max(limit, 0),),
                )
            else:
                cur = await conn.execute(
                    "SELECT session_id FROM mainspring_sessions"
                    " WHERE (data::jsonb) ->> 'principal' = %s ORDER BY session_id LIMIT %s",
                    (principal, max(limit, 0)),
                )
            return [str(row[0]) for row in await cur.fetchall()]

    async def claim_decision(self, session_id: str, attempt_id: str, decision: str) -> bool:
        """Record the decision unless one was already recorded, by any worker."""
        async with self._db.use(f"claim of attempt {attempt_id!r}") as conn:
            cur = await conn.execute(_INSERT_DECISION, (session_id, attempt_id, decision))
            return cur.rowcount == 1

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
        """Add to a spend total unless it would pass ``cap``: one atomic upsert.

        With ``hold``, the add is held under that key too (see ``SpendHolds``).
        """
        args = {
            "sid": session_id,
            "kind": kind,
            "amount": float(amount),
            "floor": float(floor),
            "cap": math.inf if cap is None else float(cap),
            "hold": f"hold:{kind}:{hold}",
        }
        sql = _ADD_SPEND if hold is None else _ADD_HELD_SPEND
        async with self._db.use(f"spend of session {session_id!r}") as conn:
            cur = await conn.execute(sql, args)
            row = await cur.fetchone()
        if row is None:
            # Refused, or the first add for the session went over the cap (the
            # INSERT's SELECT gave no row and there was nothing to update).
            return None
        return float(row[0])

    async def release_claim(self, session_id: str, attempt_id: str, decision: str) -> bool:
        """Drop the claim of ``attempt_id`` if it is still ``decision`` (see ``ClaimRelease``)."""
        async with self._db.use(f"release of attempt {attempt_id!r}") as conn:
            cur = await conn.execute(
                "DELETE FROM mainspring_decisions"
                " WHERE session_id = %s AND attempt_id = %s AND decision = %s",
                (session_id, attempt_id, decision),
            )
            return cur.rowcount == 1

    async def release_holds(
        self, session_id: str, kind: SpendKind, started: Collection[str]
    ) -> float | None:
        """Give back the holds of writes that never started; drop every hold (one transaction)."""
        prefix = f"hold:{kind}:"
        async with self._db.use(f"holds of session {session_id!r}") as conn, conn.transaction():
            cur = await conn.execute(
                "SELECT amount FROM mainspring_spend WHERE session_id = %s AND kind = %s"
                " FOR UPDATE",
                (session_id, kind),
            )
            row = await cur.fetchone()
            cur = await conn.execute(_HOLDS, (session_id, prefix, prefix))
            held = await cur.fetchall()
            if not held:
                return None if row is None else float(row[0])
            back = sum(float(a) for k, a in held if str(k)[len(prefix) :] not in started)
            await conn.execute(
                "DELETE FROM mainspring_spend WHERE session_id = %s AND kind = ANY(%s)",
                (session_id, [str(k) for k, _ in held]),
            )
            if row is None:
                return None
            total = max(float(row[0]) - back, 0.0)
            await conn.execute(
                "UPDATE mainspring_spend SET amount = %s WHERE session_id = %s AND kind = %s",
                (total, session_id, kind),
            )
        return total

    async def record_write(self, session_id: str, record: WriteRecord) -> None:
        """Upsert one ledger entry."""
        data = _dumps(encode(record))
        async with self._db.use(f"ledger write {record.key!r}") as conn:
            await conn.execute(_UPSERT_WRITE, (session_id, record.key, data))

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
        """Add a shared record unless a live one has the key (``SharedRecords``)."""
        seconds = check_record_ttl(ttl, limit)
        check_kind(kind)
        async with self._db.use(f"put of record {kind}/{key!r}") as conn, conn.transaction():
            if limit is not None:
                await conn.execute(_RECORD_OWNER_LOCK, (f"{kind}/{owner}",))
            await conn.execute(_RECORD_SWEEP_SOME)
            await conn.execute(_RECORD_SWEEP_KEY, (kind, key))
            if limit is not None:
                cur = await conn.execute(_RECORD_COUNT, (kind, owner))
                row = await cur.fetchone()
                if row is not None and int(row[0]) >= limit:
                    exists = await conn.execute(
                        "SELECT 1 FROM mainspring_records WHERE kind = %s AND key = %s",
                        (kind, key),
                    )  # (an expired one was swept above)
                    return "exists" if await exists.fetchone() else "full"
            cur = await conn.execute(_RECORD_INSERT, (kind, key, owner, value, seconds))
            return "added" if cur.rowcount == 1 else "exists"

    async def take_record(self, kind: str, key: str) -> tuple[str, str] | None:
        """Remove and return a live shared record, ``(owner, value)``."""
        check_kind(kind)
        async with self._db.use(f"take of record {kind}/{key!r}") as conn:
            cur = await conn.execute(_RECORD_TAKE, (kind, key))
            row = await cur.fetchone()
        if row is None or not row[2]:
            return None
        return str(row[0]), str(row[1])

    async def owned_records(
        self, kind: str, owner: str, *, limit: int = 1000
    ) -> list[tuple[str, str]]:
        """``(key, value)`` of ``owner``'s live records of ``kind``, sorted by key."""
        check_kind(kind)
        async with self._db.use(f"list of records {kind}") as conn:
            cur = await conn.execute(_RECORD_OWNED, (kind, owner, max(limit, 0)))
            return [(str(k), str(v)) for k, v in await cur.fetchall()]

    async def save_task(self, owner: str, task_id: str, data: bytes, *, ttl: float) -> None:
        """Save (or replace) an A2A task record for ``ttl`` seconds (``TaskRecords``)."""
        seconds = check_record_ttl(ttl)
        if not isinstance(data, bytes):
            raise ConfigError(f"data must be bytes, not {type(data).__name__}")
        async with self._db.use(f"save of A2A task {task_id!r}") as conn:
            await tasks.save_task(conn, owner, task_id, data, seconds)

    async def load_task(self, owner: str, task_id: str) -> bytes | None:
        """``owner``'s live A2A task record ``task_id``, or ``None``."""
        async with self._db.use(f"load of A2A task {task_id!r}") as conn:
            return await tasks.load_task(conn, owner, task_id)

    async def owned_tasks(self, owner: str) -> list[tuple[str, bytes]]:
        """``(task id, data)`` of ``owner``'s live A2A task records, sorted by task id."""
        async with self._db.use("list of A2A tasks") as conn:
            return await tasks.owned_tasks(conn, owner)

    async def delete_task(self, owner: str, task_id: str) -> None:
        """Forget ``owner``'s A2A task record ``task_id``."""
        async with self._db.use(f"delete of A2A task {task_id!r}") as conn:
            await tasks.delete_task(conn, owner, task_id)

    async def aclose(self) -> None:
        """Close the connection."""
        await self._db.aclose()
