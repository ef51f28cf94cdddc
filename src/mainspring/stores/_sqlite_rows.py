"""The statements of the SQLite stores: each runs on a store's connection.

:mod:`mainspring.stores.sqlite` checks and encodes on the event loop, then runs
one of these on its :class:`~mainspring.stores._sqlite.Database` (inline or in
a worker thread): appending a checkpoint batch, saving, loading and deleting a
session (only the new transcript messages), claims, ledger entries, spend, a
step boundary in one transaction (:func:`commit_step`), and the lease table's
statements.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Sequence

from mainspring._lowlevel.frozen import dataclass
from mainspring.codec import message_from_dict, message_to_dict
from mainspring.errors import StoreError
from mainspring.messages import Message
from mainspring.state import SessionState, state_from_stored
from mainspring.stores._sqlite import CODEC_ERRORS, dumps, encoding, synced, transaction
from mainspring.stores._transcript import Stored, common_prefix

__all__ = [
    "ACQUIRE",
    "REFRESH",
    "RELEASE",
    "Batch",
    "Claim",
    "GroupOutcome",
    "Save",
    "Step",
    "add_spend",
    "append_rows",
    "apply_claim",
    "apply_step",
    "changed",
    "commit_group_synced",
    "commit_step",
    "commit_step_synced",
    "delete_session",
    "lease_holder",
    "list_session_ids",
    "load_state",
    "release_claim",
    "release_holds",
    "save_state",
]

# ----------------------------------------------------------------- checkpoints


@dataclass(frozen=True, slots=True)
class Batch:
    """Encoded events of one stream, ready to insert as one row."""

    stream_id: str
    data: str
    """One event's JSON object, or several events' JSON array (see ``_log``)."""
    now: float
    sweep_ttl: float | None
    """With a TTL, also delete the logs it expired."""
    seq: int = 0
    """The ``seq`` the store expects to be the stream's next (tried first)."""


APPEND = (
    "INSERT INTO mainspring_checkpoints (stream_id, seq, data, updated_at)"
    " SELECT ?1, COALESCE(MAX(seq) + 1, 0), ?2, ?3 FROM mainspring_checkpoints"
    " WHERE stream_id = ?1"
)
"""One row at the stream's next ``seq``, taken under the write lock (one statement)."""
APPEND_AT = (
    "INSERT INTO mainspring_checkpoints (stream_id, seq, data, updated_at)"
    " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
"""One row at a ``seq`` the writer expects to be free (an ``INSERT … SELECT`` reading
the table it writes costs a temporary table: half the statement's work)."""


def append_rows(conn: sqlite3.Connection, batch: Batch) -> int:
    """Insert a batch (one row) inside the caller's transaction; the stream's next ``seq``.

    At ``batch.seq`` if that is free (the writer knows its stream: its own last
    append, or 0 for a new stream), else (another writer appended meanwhile)
    after the stream's last row: either way under the write lock, after every
    row the stream has.
    """
    now = batch.now
    if conn.execute(APPEND_AT, (batch.stream_id, batch.seq, batch.data, now)).rowcount == 1:
        seq = batch.seq
    else:
        conn.execute(APPEND, (batch.stream_id, batch.data, now))
        seq = int(
            conn.execute(
                "SELECT MAX(seq) FROM mainspring_checkpoints WHERE stream_id = ?",
                (batch.stream_id,),
            ).fetchone()[0]
        )
    if batch.sweep_ttl is not None:
        conn.execute(
            "DELETE FROM mainspring_checkpoints WHERE stream_id IN ("
            " SELECT stream_id FROM mainspring_checkpoints GROUP BY stream_id"
            " HAVING MAX(updated_at) < ?)",
            (now - batch.sweep_ttl,),
        )
    return seq + 1


# -------------------------------------------------------------------- sessions


@dataclass(frozen=True, slots=True)
class Save:
    """A snapshot of a state taken on the event loop, for the worker thread.

    Messages are immutable, so they are encoded in the thread, and only the new ones.
    """

    session_id: str
    header: str
    messages: list[Message]
    decided: list[tuple[str, str, str]]
    writes: list[tuple[str, str, str]]
    known: Stored | None


def list_session_ids(conn: sqlite3.Connection, limit: int, principal: str | None) -> list[str]:
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


INSERT_DECISION = (
    "INSERT INTO mainspring_decisions (session_id, attempt_id, decision) VALUES (?, ?, ?)"
    " ON CONFLICT (session_id, attempt_id) DO NOTHING"
)


def add_spend(
    conn: sqlite3.Connection, args: tuple[str, str, float, float | None, float, str | None]
) -> float | None:
    sid, kind, amount, cap, floor, hold = args
    with transaction(conn, write=True):
        row = conn.execute(
            "SELECT amount FROM mainspring_spend WHERE session_id = ? AND kind = ?", (sid, kind)
        ).fetchone()
        total = max(float(row[0]) if row else 0.0, floor) + amount
        if cap is not None and total > cap:
            return None
        conn.execute(UPSERT_SPEND, (sid, kind, total))
        if hold is not None:  # (a hold is a row of its own: "hold:<kind>:<key>")
            conn.execute(ADD_HOLD, (sid, f"{HOLD}{kind}:{hold}", amount))
    return total


def release_claim(conn: sqlite3.Connection, args: tuple[str, str, str]) -> bool:
    with transaction(conn, write=True):
        cur = conn.execute(
            "DELETE FROM mainspring_decisions"
            " WHERE session_id = ? AND attempt_id = ? AND decision = ?",
            args,
        )
        return cur.rowcount == 1


HOLD = "hold:"
UPSERT_SPEND = (
    "INSERT INTO mainspring_spend (session_id, kind, amount) VALUES (?, ?, ?)"
    " ON CONFLICT (session_id, kind) DO UPDATE SET amount = excluded.amount"
)
ADD_HOLD = (
    "INSERT INTO mainspring_spend (session_id, kind, amount) VALUES (?, ?, ?)"
    " ON CONFLICT (session_id, kind) DO UPDATE SET amount = amount + excluded.amount"
)


def release_holds(conn: sqlite3.Connection, args: tuple[str, str, frozenset[str]]) -> float | None:
    sid, kind, started = args
    prefix = f"{HOLD}{kind}:"
    with transaction(conn, write=True):
        rows = conn.execute(
            "SELECT kind, amount FROM mainspring_spend WHERE session_id = ?"
            " AND substr(kind, 1, ?) = ?",
            (sid, len(prefix), prefix),
        ).fetchall()
        row = conn.execute(
            "SELECT amount FROM mainspring_spend WHERE session_id = ? AND kind = ?", (sid, kind)
        ).fetchone()
        if not rows:
            return None if row is None else float(row[0])
        back = sum(float(a) for k, a in rows if str(k)[len(prefix) :] not in started)
        conn.executemany(
            "DELETE FROM mainspring_spend WHERE session_id = ? AND kind = ?",
            [(sid, k) for k, _ in rows],
        )
        if row is None:
            return None
        total = max(float(row[0]) - back, 0.0)
        conn.execute(UPSERT_SPEND, (sid, kind, total))
    return total


UPSERT_WRITE = (
    "INSERT INTO mainspring_writes (session_id, key, data) VALUES (?, ?, ?)"
    " ON CONFLICT (session_id, key) DO UPDATE SET data = excluded.data"
)
ADD_WRITE = (
    "INSERT INTO mainspring_writes (session_id, key, data) VALUES (?, ?, ?)"
    " ON CONFLICT (session_id, key) DO NOTHING"
)


@dataclass(frozen=True, slots=True)
class Step:
    """One step boundary's rows, for :func:`commit_step`."""

    writes: list[tuple[str, str, str]]
    save: Save | None
    events: Batch | None
    clear: str | None
    release: tuple[str, str] | None


def commit_step(conn: sqlite3.Connection, step: Step) -> tuple[str | None, int]:
    """Apply a step in one transaction.

    Returns the new revision if the state was saved, and the events' stream's
    next ``seq`` (0 without events).
    """
    with transaction(conn, write=True):
        return apply_step(conn, step)


def apply_step(conn: sqlite3.Connection, step: Step) -> tuple[str | None, int]:
    """Write a step inside the caller's transaction (as :func:`commit_step` returns)."""
    revision, seq = None, 0
    if step.clear is not None:
        conn.execute("DELETE FROM mainspring_checkpoints WHERE stream_id = ?", (step.clear,))
    if step.writes:
        conn.executemany(UPSERT_WRITE, step.writes)
    if step.save is not None:
        revision = save_rows(conn, step.save)
    if step.events is not None:
        seq = append_rows(conn, step.events)
    if step.release is not None:
        conn.execute(RELEASE, step.release)
    return revision, seq


def commit_step_synced(conn: sqlite3.Connection, step: Step) -> tuple[str | None, int]:
    with synced(conn):
        return commit_step(conn, step)


@dataclass(frozen=True, slots=True)
class Claim:
    """A decision to record unless one is (``claim_decision``), for :func:`commit_group_synced`."""

    row: tuple[str, str, str]
    """``INSERT_DECISION``'s arguments: session id, attempt id, the decision."""


def apply_claim(conn: sqlite3.Connection, claim: Claim) -> bool:
    """Record ``claim`` inside the caller's transaction; whether it was the first."""
    return conn.execute(INSERT_DECISION, claim.row).rowcount == 1


GroupOutcome = tuple[str | None, int] | bool | Exception
"""What :func:`commit_group_synced` reports for one item: :func:`apply_step`'s result
for a step, :func:`apply_claim`'s for a claim, or why it failed."""


def commit_group_synced(
    conn: sqlite3.Connection, items: Sequence[Step | Claim]
) -> list[GroupOutcome]:
    """Several steps and claims (of any sessions) in one transaction and one fsync: a group commit.

    Each item goes in a savepoint of its own, so one that fails (a value that
    cannot be encoded, a constraint) is rolled back alone and reported in its
    place; the others commit. A failure that ends the transaction itself (the
    disk is full, an I/O error) raises: then nothing of the group is on record.
    One item alone is committed without a savepoint. Two claims of one attempt in
    a group: the first is recorded, the second reports ``False`` (as one after it would).
    """
    if len(items) == 1:
        (item,) = items
        if isinstance(item, Claim):
            with synced(conn):  # (one statement: its own transaction)
                return [apply_claim(conn, item)]
        return [commit_step_synced(conn, item)]
    outcomes: list[GroupOutcome] = []
    with synced(conn), transaction(conn, write=True):
        for item in items:
            conn.execute("SAVEPOINT step")
            try:
                if isinstance(item, Claim):
                    outcomes.append(apply_claim(conn, item))
                else:
                    outcomes.append(apply_step(conn, item))
            except Exception as exc:
                if not conn.in_transaction:
                    raise  # it took the transaction with it: the whole group failed
                conn.execute("ROLLBACK TO step")
                outcomes.append(exc)
            conn.execute("RELEASE step")
    return outcomes


def save_state(conn: sqlite3.Connection, job: Save) -> str:
    with transaction(conn, write=True):
        return save_rows(conn, job)


def save_rows(conn: sqlite3.Connection, job: Save) -> str:
    """Write a state inside the caller's transaction; its new revision."""
    sid = job.session_id
    revision = os.urandom(16).hex()  # (a token: no UUID object needed)
    with encoding(f"a message of session {sid!r}"):
        keep, stored, saved = stored_prefix(conn, job, revision)
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
        conn.executemany(INSERT_DECISION, job.decided)
    if job.writes:
        conn.executemany(ADD_WRITE, job.writes)
    return revision


def stored_prefix(conn: sqlite3.Connection, job: Save, revision: str) -> tuple[int, int, bool]:
    """The stored prefix of the state's messages, the stored count, whether the header is saved.

    The header goes on record on the way (as ``revision``) when this object made
    the last save: then the stored messages are the ones it knows; or when it
    knows nothing of the session and the store has no row of it: then none.
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
        return common_prefix(job.messages, known.messages), len(known.messages), True
    if (
        known is None
        and conn.execute(
            "INSERT INTO mainspring_sessions (session_id, header, revision) VALUES (?, ?, ?)"
            " ON CONFLICT (session_id) DO NOTHING",
            (sid, job.header, revision),
        ).rowcount
        == 1
    ):
        return 0, 0, True  # a new session (its rows go in with its header, never before)
    stored = int(
        conn.execute(
            "SELECT COALESCE(MAX(seq) + 1, 0) FROM mainspring_messages WHERE session_id = ?",
            (sid,),
        ).fetchone()[0]
    )
    return compared_prefix(conn, job, stored), stored, False


def compared_prefix(conn: sqlite3.Connection, job: Save, stored: int) -> int:
    """The stored prefix found by comparing the ``stored`` rows with the state's JSON."""
    if not stored:
        return 0
    sid = job.session_id
    limit = min(stored, len(job.messages))
    rows = conn.execute(
        "SELECT CAST(data AS BLOB) FROM mainspring_messages"
        " WHERE session_id = ? AND seq < ? ORDER BY seq",
        (sid, limit),
    )
    for seq, (data,) in enumerate(rows):
        # (as bytes: a damaged row differs, and is rewritten, instead of failing the save)
        if data != dumps(message_to_dict(job.messages[seq])).encode("utf-8"):
            return seq
    return limit


def load_state(conn: sqlite3.Connection, session_id: str) -> tuple[SessionState, str] | None:
    """The stored state and its revision; ``None`` if there is no such session.

    Every column is read as bytes (``CAST … AS BLOB``) and decoded here, strictly:
    a row tampered with or damaged on disk (not UTF-8, not JSON, a number or a
    blob where text belongs, the wrong shape) is a :class:`StoreError` naming
    the session, never a ``TypeError`` or ``UnicodeDecodeError`` from deep
    inside, and never a value quietly made up from it.
    """
    with transaction(conn, write=False):  # one snapshot for the four reads
        row = conn.execute(
            "SELECT CAST(header AS BLOB), CAST(revision AS BLOB) FROM mainspring_sessions"
            " WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        if row is None:
            return None
        messages = conn.execute(
            "SELECT CAST(data AS BLOB) FROM mainspring_messages WHERE session_id = ? ORDER BY seq",
            (session_id,),
        ).fetchall()
        decided = conn.execute(
            "SELECT CAST(attempt_id AS BLOB), CAST(decision AS BLOB) FROM mainspring_decisions"
            " WHERE session_id = ?",
            (session_id,),
        ).fetchall()
        writes = conn.execute(
            "SELECT CAST(key AS BLOB), CAST(data AS BLOB) FROM mainspring_writes"
            " WHERE session_id = ? ORDER BY key",
            (session_id,),
        ).fetchall()
    try:
        state = state_from_stored(
            json.loads(_text(row[0], "header")),
            ((_text(k, "write key"), json.loads(_text(w, "write"))) for k, w in writes),
        )
        state.messages = [message_from_dict(json.loads(_text(m, "message"))) for (m,) in messages]
        state.decided = {_text(a, "attempt id"): _text(d, "decision") for a, d in decided}
        revision = _text(row[1], "revision")
    except (*CODEC_ERRORS, LookupError, AttributeError) as exc:
        raise StoreError(f"stored session {session_id!r} cannot be decoded: {exc}") from exc
    return state, revision


def _text(value: object, what: str) -> str:
    """A column read as bytes, as text: strict UTF-8, else ``ValueError`` naming ``what``."""
    if not isinstance(value, bytes):
        raise TypeError(f"its {what} is {type(value).__name__}, not text")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"its {what} is not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None


def delete_session(conn: sqlite3.Connection, session_id: str) -> None:
    with transaction(conn, write=True):
        for table in ("sessions", "messages", "decisions", "writes", "spend"):
            conn.execute(f"DELETE FROM mainspring_{table} WHERE session_id = ?", (session_id,))


# ----------------------------------------------------------------------- locks


ACQUIRE = (
    "INSERT INTO mainspring_locks (key, owner, expires_at) VALUES (?1, ?2, ?3)"
    " ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at"
    " WHERE mainspring_locks.expires_at <= ?4 OR mainspring_locks.owner = excluded.owner"
)
RELEASE = "DELETE FROM mainspring_locks WHERE key = ? AND owner = ?"
REFRESH = (
    "UPDATE mainspring_locks SET expires_at = ?1 WHERE key = ?2 AND owner = ?3 AND expires_at > ?4"
)


def changed(conn: sqlite3.Connection, sql: str, args: tuple[str | float, ...]) -> bool:
    return conn.execute(sql, args).rowcount == 1


def lease_holder(conn: sqlite3.Connection, key: str, now: float) -> str | None:
    row = conn.execute(
        "SELECT owner FROM mainspring_locks WHERE key = ? AND expires_at > ?", (key, now)
    ).fetchone()
    return None if row is None else str(row[0])
