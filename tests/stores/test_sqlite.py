"""The SQLite backend beyond the contract: the file, its schema, expiry, damage, processes."""

from __future__ import annotations

import math
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import pytest

from mainspring.errors import CheckpointCorrupt, ConfigError, SchemaTooNew, StoreError
from mainspring.events import Event, TextDelta
from mainspring.messages import Message, ToolCallPart
from mainspring.state import SessionState, WriteRecord
from mainspring.stores import (
    SCHEMA_VERSION,
    SQLiteCheckpointStore,
    SQLiteRunLock,
    SQLiteSessionStore,
)
from mainspring.stores._sqlite import Database
from tests import strategies

ROOT = Path(__file__).resolve().parents[2]
STORES = [SQLiteCheckpointStore, SQLiteSessionStore, SQLiteRunLock]
AnyStore = SQLiteCheckpointStore | SQLiteSessionStore | SQLiteRunLock


def raw(path: Path, sql: str, args: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one statement with plain sqlite3, as another program would, and commit."""
    with closing(sqlite3.connect(path)) as conn, conn:
        return conn.execute(sql, args).fetchall()


def texts(events: list[Event]) -> list[str]:
    return [e.text for e in events if isinstance(e, TextDelta)]


def state(messages: list[Message], session_id: str = "s") -> SessionState:
    return SessionState(session_id=session_id, agent_name="agent", messages=list(messages))


def transcript(n: int, prefix: str = "m") -> list[Message]:
    return [(Message.user if i % 2 == 0 else Message.assistant)(f"{prefix}{i}") for i in range(n)]


class Clock:
    """A wall clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


async def open_store(kind: type[AnyStore], path: Path) -> AnyStore:
    return await kind.open(path)


# --------------------------------------------------------------------- the file


@pytest.mark.anyio
async def test_the_file_is_created_in_wal_mode_with_the_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dirs" / "mainspring.db"
    stores = [await open_store(kind, path) for kind in STORES]
    assert raw(path, "PRAGMA journal_mode") == [("wal",)]
    assert raw(path, "SELECT value FROM mainspring_meta WHERE key = 'schema_version'") == [
        (str(SCHEMA_VERSION),)
    ]
    for store in stores:
        await store.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("kind", STORES)
async def test_a_newer_schema_refuses_to_open(tmp_path: Path, kind: type[AnyStore]) -> None:
    path = tmp_path / "mainspring.db"
    await (await open_store(kind, path)).aclose()
    newer = str(SCHEMA_VERSION + 1)
    raw(path, "UPDATE mainspring_meta SET value = ? WHERE key = 'schema_version'", (newer,))
    with pytest.raises(SchemaTooNew) as caught:
        await open_store(kind, path)
    message = str(caught.value)
    assert str(path) in message
    assert f"version {SCHEMA_VERSION + 1}" in message
    assert f"up to version {SCHEMA_VERSION}" in message
    # the newer file is left as it was
    assert raw(path, "SELECT value FROM mainspring_meta") == [(newer,)]


@pytest.mark.anyio
@pytest.mark.parametrize("value", ["abc", "0", "-3", ""])
async def test_an_unreadable_schema_version_is_a_store_error(tmp_path: Path, value: str) -> None:
    path = tmp_path / "mainspring.db"
    await (await SQLiteSessionStore.open(path)).aclose()
    raw(path, "UPDATE mainspring_meta SET value = ? WHERE key = 'schema_version'", (value,))
    with pytest.raises(StoreError, match="not a positive integer") as caught:
        await SQLiteSessionStore.open(path)
    assert not isinstance(caught.value, SchemaTooNew)


@pytest.mark.anyio
@pytest.mark.parametrize("kind", STORES)
async def test_a_file_that_is_not_a_database_is_refused_and_left_alone(
    tmp_path: Path, kind: type[AnyStore]
) -> None:
    path = tmp_path / "notes.txt"
    content = b"these are my notes, not a database\n" * 200
    path.write_bytes(content)
    with pytest.raises(StoreError, match="not a SQLite database") as caught:
        await open_store(kind, path)
    assert str(path) in str(caught.value)
    assert path.read_bytes() == content


@pytest.mark.anyio
async def test_unusable_paths(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="cannot open"):
        await SQLiteCheckpointStore.open(tmp_path)  # a directory
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="cannot open"):
        await SQLiteCheckpointStore.open(blocker / "mainspring.db")  # its parent is a file
    for path in (":memory:", ""):
        with pytest.raises(ConfigError, match="needs a file path"):
            await SQLiteSessionStore.open(path)


@pytest.mark.anyio
async def test_an_open_that_meets_a_lock_tries_again_and_other_errors_do_not(
    tmp_path: Path,
) -> None:
    # Opening a file others are creating can meet a lock SQLite's busy handler does
    # not wait for (seen on loaded machines as "database is locked" from the switch
    # to WAL). `prepare` runs first on every attempt, so it stands in for the lock.
    attempts: list[int] = []

    def locked_twice(conn: sqlite3.Connection) -> None:
        attempts.append(len(attempts))
        if len(attempts) <= 2:
            raise sqlite3.OperationalError("database is locked")

    db = await Database.open(tmp_path / "busy.db", prepare=locked_twice)
    try:
        assert len(attempts) == 3
        assert await db.run(lambda c: c.execute("PRAGMA journal_mode").fetchone()[0]) == "wal"
    finally:
        await db.aclose()

    def broken(conn: sqlite3.Connection) -> None:
        attempts.append(len(attempts))
        raise sqlite3.OperationalError("no such module: vec0")

    attempts.clear()
    with pytest.raises(StoreError, match="no such module"):
        await Database.open(tmp_path / "broken.db", prepare=broken)
    assert len(attempts) == 1


@pytest.mark.anyio
async def test_a_closed_store_says_so(tmp_path: Path) -> None:
    store = await SQLiteCheckpointStore.open(tmp_path / "mainspring.db")
    await store.aclose()
    await store.aclose()  # idempotent
    with pytest.raises(StoreError, match="is closed"):
        await store.load("s")


# ----------------------------------------------------------------- checkpoints


@pytest.mark.anyio
async def test_checkpoints_survive_reopening_the_file(tmp_path: Path) -> None:
    path = tmp_path / "mainspring.db"
    events = list(strategies.ONE_OF_EACH_EVENT)
    writer = await SQLiteCheckpointStore.open(path)
    for event in events:
        await writer.append("s1", event)
    await writer.aclose()
    reader = await SQLiteCheckpointStore.open(path)  # as a new process would
    assert await reader.load("s1") == events
    await reader.aclose()


@pytest.mark.anyio
async def test_appenders_on_two_connections_share_one_gapless_log(tmp_path: Path) -> None:
    path = tmp_path / "mainspring.db"
    stores = [await SQLiteCheckpointStore.open(path) for _ in range(2)]

    async def writer(n: int) -> None:
        for i in range(25):
            await stores[n % 2].append("s", TextDelta(text=f"{n}:{i}"))

    async with anyio.create_task_group() as tg:
        for n in range(4):
            tg.start_soon(writer, n)
    loaded = texts(await stores[1].load("s"))
    assert sorted(loaded) == sorted(f"{n}:{i}" for n in range(4) for i in range(25))
    for n in range(4):
        assert [t for t in loaded if t.startswith(f"{n}:")] == [f"{n}:{i}" for i in range(25)]
    seqs = raw(path, "SELECT seq FROM mainspring_checkpoints WHERE stream_id = 's' ORDER BY seq")
    assert [s for (s,) in seqs] == list(range(100))
    for store in stores:
        await store.aclose()


@pytest.mark.anyio
async def test_an_appender_whose_next_seq_another_took_goes_after_the_stream(
    tmp_path: Path,
) -> None:
    """A store tries the ``seq`` it expects first; another connection's rows come first."""
    path = tmp_path / "mainspring.db"
    one, other = [await SQLiteCheckpointStore.open(path) for _ in range(2)]
    await one.append("s", TextDelta(text="a"))  # seq 0: it expects 1 next
    await other.append("s", TextDelta(text="b"))  # expected 0, taken: after the last row
    await other.append_many("s", [TextDelta(text="c"), TextDelta(text="d")])
    await one.append("s", TextDelta(text="e"))  # expected 1, taken: after the last row
    await one.append("s", TextDelta(text="f"))
    await other.append("s", TextDelta(text="g"))
    assert texts(await one.load("s")) == list("abcdefg")
    seqs = raw(path, "SELECT seq FROM mainspring_checkpoints WHERE stream_id = 's' ORDER BY seq")
    assert [seq for (seq,) in seqs] == list(range(6))
    await other.clear("s")
    await one.append("s", TextDelta(text="h"))  # a log cleared elsewhere starts again
    assert texts(await other.load("s")) == ["h"]
    for store in (one, other):
        await store.aclose()


@pytest.mark.anyio
async def test_events_appended_together_are_one_row_and_load_in_order(tmp_path: Path) -> None:
    path = tmp_path / "mainspring.db"
    store = await SQLiteCheckpointStore.open(path)
    await store.append("s", TextDelta(text="a"))
    await store.append_many("s", [TextDelta(text=t) for t in "bcd"])
    await store.append("s", TextDelta(text="e"))
    await store.append_many("s", [TextDelta(text="f")])
    assert texts(await store.load("s")) == list("abcdef")
    rows = raw(path, "SELECT seq, data FROM mainspring_checkpoints ORDER BY seq")
    assert [seq for seq, _ in rows] == [0, 1, 2, 3]
    assert [data[0] for _, data in rows] == ["{", "[", "{", "{"]  # one event: an object
    reader = await SQLiteCheckpointStore.open(path)  # another connection reads the same
    assert texts(await reader.load("s")) == list("abcdef")
    for each in (store, reader):
        await each.aclose()


@pytest.mark.anyio
async def test_a_version_1_file_is_upgraded_and_its_rows_still_load(tmp_path: Path) -> None:
    path = tmp_path / "mainspring.db"
    await (await SQLiteCheckpointStore.open(path)).aclose()
    raw(path, "UPDATE mainspring_meta SET value = '1' WHERE key = 'schema_version'")
    for seq, text in enumerate("ab"):  # as version 1 wrote them: one row per event
        raw(
            path,
            "INSERT INTO mainspring_checkpoints VALUES ('s', ?, ?, 1e12)",
            (seq, f'{{"text":"{text}","type":"text_delta"}}'),
        )
    store = await SQLiteCheckpointStore.open(path)
    assert raw(path, "SELECT value FROM mainspring_meta") == [(str(SCHEMA_VERSION),)]
    assert SCHEMA_VERSION == 2
    await store.append_many("s", [TextDelta(text="c"), TextDelta(text="d")])
    assert texts(await store.load("s")) == list("abcd")
    await store.aclose()


EARLIER_LAYOUT = (  # as files were made before: checkpoints WITHOUT ROWID, locks a rowid table
    "CREATE TABLE mainspring_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    f"INSERT INTO mainspring_meta VALUES ('schema_version', '{SCHEMA_VERSION}')",
    "CREATE TABLE mainspring_checkpoints (stream_id TEXT NOT NULL, seq INTEGER NOT NULL,"
    " data TEXT NOT NULL, updated_at REAL NOT NULL, PRIMARY KEY (stream_id, seq)) WITHOUT ROWID",
    "CREATE TABLE mainspring_locks (key TEXT PRIMARY KEY, owner TEXT NOT NULL,"
    " expires_at REAL NOT NULL)",
)


def layout(path: Path) -> dict[str, bool]:
    """Whether each table of the file is a ``WITHOUT ROWID`` one."""
    rows = raw(path, "SELECT name, sql FROM sqlite_master WHERE type = 'table'")
    return {str(name): "WITHOUT ROWID" in str(sql) for name, sql in rows}


@pytest.mark.anyio
async def test_a_new_file_gets_the_layout_that_writes_fewest_pages(tmp_path: Path) -> None:
    path = tmp_path / "mainspring.db"
    await (await SQLiteRunLock.open(path)).aclose()
    tables = layout(path)
    assert tables["mainspring_locks"]  # one b-tree: a lease writes one page
    assert not tables["mainspring_checkpoints"]  # appended at its end, not split at random


@pytest.mark.anyio
async def test_a_file_with_the_earlier_table_layout_opens_and_works(tmp_path: Path) -> None:
    path = tmp_path / "mainspring.db"
    with closing(sqlite3.connect(path)) as conn, conn:
        for sql in EARLIER_LAYOUT:
            conn.execute(sql)
    raw(
        path,
        "INSERT INTO mainspring_checkpoints VALUES ('old', 0, ?, 1e12)",
        ('{"text":"a","type":"text_delta"}',),
    )
    raw(path, "INSERT INTO mainspring_locks VALUES ('k', 'w0', 1e12)")
    checkpoints = await SQLiteCheckpointStore.open(path, ttl=math.inf)
    locks = await SQLiteRunLock.open(path)
    sessions = await SQLiteSessionStore.open(path)
    assert layout(path)["mainspring_checkpoints"] and not layout(path)["mainspring_locks"]
    await checkpoints.append_many("old", [TextDelta(text="b"), TextDelta(text="c")])
    await checkpoints.append("new", TextDelta(text="x"))
    assert texts(await checkpoints.load("old")) == list("abc")
    assert texts(await checkpoints.load("new")) == ["x"]
    assert await locks.holder("k") == "w0"
    assert not await locks.acquire("k", "w1", ttl=60)
    assert await locks.acquire("k2", "w1", ttl=60)
    await locks.release("k2", "w1")
    assert await locks.holder("k2") is None
    await sessions.save(state(transcript(3)))
    loaded = await sessions.load("s")
    assert loaded is not None and len(loaded.messages) == 3
    for store in (checkpoints, locks, sessions):
        await store.aclose()


BAD_BATCHES: list[str] = [
    "[]",
    "[42]",
    '[{"text":"x","type":"text_delta"},{"type":"no_such_event"}]',
    "[{",
    '[{"text":"x","type":"text_delta"}]]',
]


@pytest.mark.anyio
@pytest.mark.parametrize("bad", BAD_BATCHES, ids=range(len(BAD_BATCHES)))
async def test_a_corrupt_batch_row_names_the_offset_of_its_first_event(
    tmp_path: Path, bad: str
) -> None:
    path = tmp_path / "mainspring.db"
    store = await SQLiteCheckpointStore.open(path)
    await store.append_many("s", [TextDelta(text="a"), TextDelta(text="b")])
    await store.append_many("s", [TextDelta(text="c"), TextDelta(text="d")])
    await store.append("s", TextDelta(text="e"))
    raw(
        path, "UPDATE mainspring_checkpoints SET data = ? WHERE stream_id = 's' AND seq = 1", (bad,)
    )
    with pytest.raises(CheckpointCorrupt) as caught:
        await store.load("s")
    assert caught.value.offset == 2  # the events of the rows before it
    assert len(raw(path, "SELECT 1 FROM mainspring_checkpoints")) == 3  # nothing dropped
    await store.aclose()


GARBAGE: list[object] = [
    "{not json",
    '{"type": "no_such_event"}',
    '{"type": "text_delta"}',
    "[" * 100_000 + "]" * 100_000,
    42,
    b"\xff\xfe",
]


@pytest.mark.anyio
@pytest.mark.parametrize("garbage", GARBAGE, ids=range(len(GARBAGE)))
async def test_a_corrupt_record_names_stream_and_offset(tmp_path: Path, garbage: object) -> None:
    path = tmp_path / "mainspring.db"
    store = await SQLiteCheckpointStore.open(path)
    for i in range(4):
        await store.append("stream-7", TextDelta(text=str(i)))
    await store.append("other", TextDelta(text="fine"))
    # offsets count the records present, not seq numbers: drop the first, damage the third
    raw(path, "DELETE FROM mainspring_checkpoints WHERE stream_id = 'stream-7' AND seq = 0")
    raw(
        path,
        "UPDATE mainspring_checkpoints SET data = ? WHERE stream_id = 'stream-7' AND seq = 2",
        (garbage,),
    )
    with pytest.raises(CheckpointCorrupt) as caught:
        await store.load("stream-7")
    assert caught.value.stream_id == "stream-7"
    assert caught.value.offset == 1
    assert "'stream-7'" in str(caught.value) and "offset 1" in str(caught.value)
    # nothing was dropped or skipped: the damage is still there, and so is every record
    with pytest.raises(CheckpointCorrupt):
        await store.load("stream-7")
    assert len(raw(path, "SELECT 1 FROM mainspring_checkpoints WHERE stream_id = 'stream-7'")) == 3
    assert await store.load("other") == [TextDelta(text="fine")]
    await store.aclose()


@pytest.mark.anyio
async def test_expiry_is_sliding_and_purges_lazily(tmp_path: Path) -> None:
    path = tmp_path / "mainspring.db"
    clock = Clock()
    store = await SQLiteCheckpointStore.open(path, ttl=10, clock=clock)
    await store.append("s", TextDelta(text="a"))
    clock.now += 6
    await store.append("s", TextDelta(text="b"))
    clock.now += 10  # 16 s after the first append, 10 after the last: still alive
    assert texts(await store.load("s")) == ["a", "b"]
    clock.now += 0.5
    assert await store.load("s") == []
    assert raw(path, "SELECT COUNT(*) FROM mainspring_checkpoints") == [(0,)]


@pytest.mark.anyio
async def test_appending_to_an_expired_stream_starts_a_new_log(tmp_path: Path) -> None:
    path = tmp_path / "mainspring.db"
    clock = Clock()
    store = await SQLiteCheckpointStore.open(path, ttl=10, clock=clock)
    reader = await SQLiteCheckpointStore.open(path, ttl=10, clock=clock)
    await store.append("s", TextDelta(text="old"))
    clock.now += 11
    await store.append("s", TextDelta(text="new"))
    assert texts(await reader.load("s")) == ["new"]
    assert raw(path, "SELECT seq FROM mainspring_checkpoints") == [(1,)]  # old row purged
    await store.aclose()
    await reader.aclose()


@pytest.mark.anyio
async def test_a_follower_reading_from_its_last_row_sees_expiry_and_a_new_log(
    tmp_path: Path,
) -> None:
    """A read from the reader's anchor row keeps load()'s expiry: gone, then begun anew."""
    path = tmp_path / "mainspring.db"
    clock = Clock()
    store = await SQLiteCheckpointStore.open(path, ttl=10, clock=clock)
    reader = await SQLiteCheckpointStore.open(path, ttl=10, clock=clock)
    await store.append_many("s", [TextDelta(text="a"), TextDelta(text="b")])
    assert texts(await reader.load_after("s", 1)) == ["b"]  # the anchor: row 0
    clock.now += 6
    await store.append("s", TextDelta(text="c"))
    assert texts(await reader.load_after("s", 1)) == ["b", "c"]  # the anchor: row 1
    clock.now += 11  # the log expired: nothing, and its rows are deleted
    assert await reader.load_after("s", 2) == []
    assert raw(path, "SELECT COUNT(*) FROM mainspring_checkpoints") == [(0,)]
    await store.append("s", TextDelta(text="new"))
    await store.append("s", TextDelta(text="newer"))
    assert texts(await reader.load_after("s", 1)) == ["newer"]
    clock.now += 11  # a gap: the next append begins a log of its own
    await store.append("s", TextDelta(text="fresh"))
    assert texts(await reader.load_after("s", 0)) == ["fresh"]
    assert texts(await reader.load("s")) == ["fresh"]
    await store.aclose()
    await reader.aclose()


@pytest.mark.anyio
async def test_a_corrupt_row_read_from_a_cursor_names_its_offset_in_the_whole_log(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mainspring.db"
    store = await SQLiteCheckpointStore.open(path)
    await store.append_many("s", [TextDelta(text="a"), TextDelta(text="b")])
    await store.append("s", TextDelta(text="c"))
    assert texts(await store.load_after("s", 2)) == ["c"]
    raw(path, "UPDATE mainspring_checkpoints SET data = '{\"no\"' WHERE seq = 1")
    with pytest.raises(CheckpointCorrupt) as caught:
        await store.load_after("s", 2)
    assert caught.value.offset == 2
    with pytest.raises(CheckpointCorrupt):
        await store.load("s")
    await store.aclose()


@pytest.mark.anyio
async def test_expired_streams_are_swept_without_being_loaded(tmp_path: Path) -> None:
    path = tmp_path / "mainspring.db"
    clock = Clock()
    store = await SQLiteCheckpointStore.open(path, ttl=10, clock=clock)
    for text in ("x", "y"):
        await store.append("abandoned", TextDelta(text=text))
    clock.now += 100
    await store.append("live", TextDelta(text="z"))
    assert raw(path, "SELECT DISTINCT stream_id FROM mainspring_checkpoints") == [("live",)]
    await store.aclose()


@pytest.mark.anyio
async def test_expiry_on_the_real_clock(tmp_path: Path) -> None:
    # Only the expiry is checked here: that a log lives until its time (which a busy
    # machine could outrun on the real clock) is checked on an injected clock above.
    store = await SQLiteCheckpointStore.open(tmp_path / "mainspring.db", ttl=0.2)
    await store.append("s", TextDelta(text="soon gone"))
    await anyio.sleep(0.5)
    assert await store.load("s") == []
    await store.aclose()


@pytest.mark.anyio
async def test_an_infinite_ttl_never_expires(tmp_path: Path) -> None:
    clock = Clock()
    store = await SQLiteCheckpointStore.open(tmp_path / "m.db", ttl=math.inf, clock=clock)
    await store.append("s", TextDelta(text="kept"))
    clock.now += 10**9
    assert texts(await store.load("s")) == ["kept"]
    await store.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("stream_id", ["", "a\x00b", "日本 😀 \u2028", "x" * 10_000, "'; DROP"])
async def test_any_text_is_a_stream_id_and_any_text_round_trips(
    tmp_path: Path, stream_id: str
) -> None:
    store = await SQLiteCheckpointStore.open(tmp_path / "mainspring.db")
    events: list[Event] = [TextDelta(text="lone surrogate \ud800, NUL \x00, 😀")]
    await store.append(stream_id, events[0])
    await store.append("neighbour", TextDelta(text="n"))
    assert await store.load(stream_id) == events
    await store.clear(stream_id)
    assert await store.load(stream_id) == []
    assert texts(await store.load("neighbour")) == ["n"]
    await store.aclose()


BAD_APPENDS: list[tuple[object, object, type[Exception], str]] = [
    (7, TextDelta(text="x"), ConfigError, "stream_id must be a str"),
    ("bad \udc80", TextDelta(text="x"), ConfigError, "not valid Unicode"),
    ("s", {"type": "text_delta", "text": "x"}, ConfigError, "event must be"),
    ("s", TextDelta(text=object()), StoreError, "event of stream 's' cannot be stored"),  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
]


@pytest.mark.anyio
@pytest.mark.parametrize(("stream_id", "event", "error", "match"), BAD_APPENDS)
async def test_bad_appends_fail_clearly_and_store_nothing(
    tmp_path: Path, stream_id: object, event: object, error: type[Exception], match: str
) -> None:
    path = tmp_path / "mainspring.db"
    store = await SQLiteCheckpointStore.open(path)
    with pytest.raises(error, match=match):
        await store.append(stream_id, event)  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
    assert raw(path, "SELECT COUNT(*) FROM mainspring_checkpoints") == [(0,)]
    await store.append("s", TextDelta(text="still works"))
    assert texts(await store.load("s")) == ["still works"]
    await store.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("ttl", [0, -1, math.nan, True, "300"])
async def test_a_bad_ttl_is_refused(tmp_path: Path, ttl: object) -> None:
    with pytest.raises(ConfigError, match="ttl must be a positive number"):
        await SQLiteCheckpointStore.open(tmp_path / "m.db", ttl=ttl)  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
    lock = await SQLiteRunLock.open(tmp_path / "m.db")
    with pytest.raises(ConfigError, match="ttl must be a positive number"):
        await lock.acquire("k", "w1", ttl=ttl)  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
    assert await lock.holder("k") is None
    await lock.aclose()


@pytest.mark.anyio
async def test_cancelled_appends_leave_an_ordered_log_and_a_usable_store(tmp_path: Path) -> None:
    store = await SQLiteCheckpointStore.open(tmp_path / "mainspring.db")
    for i in range(40):
        with anyio.move_on_after(0.0002 * (i % 5)):
            await store.append("s", TextDelta(text=str(i)))
    kept = [int(t) for t in texts(await store.load("s"))]
    assert kept == sorted(set(kept))  # no duplicate, no reordering
    await store.append("s", TextDelta(text="after"))
    assert texts(await store.load("s"))[-1] == "after"
    await store.aclose()


# -------------------------------------------------------------------- sessions


@pytest.mark.anyio
async def test_sessions_survive_reopening_the_file(tmp_path: Path) -> None:
    path = tmp_path / "mainspring.db"
    saved = state(transcript(3))
    store = await SQLiteSessionStore.open(path)
    await store.save(saved)
    assert await store.claim_decision("s", "att-1", "approved")
    record = WriteRecord(key="1:c1", tool="pay", status="done", attempt_id="att-1")
    await store.record_write("s", record)
    await store.aclose()
    reopened = await SQLiteSessionStore.open(path)
    loaded = await reopened.load("s")
    assert loaded is not None
    assert loaded.messages == saved.messages
    assert loaded.decided == {"att-1": "approved"}
    assert loaded.writes == {"1:c1": record}
    assert not await reopened.claim_decision("s", "att-1", "rejected")
    await reopened.aclose()


def watch_messages(path: Path) -> None:
    """Log every insert and delete of a transcript row (triggers, made by another program)."""
    raw(path, "CREATE TABLE changes (kind TEXT, seq INTEGER)")
    for kind, row in (("INSERT", "NEW"), ("DELETE", "OLD")):
        raw(
            path,
            f"CREATE TRIGGER log_{kind} AFTER {kind} ON mainspring_messages"
            f" BEGIN INSERT INTO changes VALUES ('{kind}', {row}.seq); END",
        )


def changes(path: Path) -> list[tuple[str, int]]:
    """The logged changes since the last call."""
    found = [(str(k), int(s)) for k, s in raw(path, "SELECT kind, seq FROM changes ORDER BY rowid")]
    raw(path, "DELETE FROM changes")
    return found


@pytest.mark.anyio
async def test_save_inserts_only_new_messages(tmp_path: Path) -> None:
    path = tmp_path / "mainspring.db"
    store = await SQLiteSessionStore.open(path)
    watch_messages(path)
    current = state(transcript(50))
    await store.save(current)
    assert changes(path) == [("INSERT", seq) for seq in range(50)]
    await store.save(current)
    assert changes(path) == []
    current.messages.extend(transcript(2, prefix="new"))
    await store.save(current)
    assert changes(path) == [("INSERT", 50), ("INSERT", 51)]
    # another worker loads the session and appends to it
    other = await SQLiteSessionStore.open(path)
    loaded = await other.load("s")
    assert loaded is not None and loaded.messages == current.messages
    loaded.messages.append(Message.user("from the other worker"))
    await other.save(loaded)
    assert changes(path) == [("INSERT", 52)]
    # the first worker's view is stale now; it checks the stored transcript and appends
    current.messages.extend([loaded.messages[-1], Message.assistant("back here")])
    await store.save(current)
    assert changes(path) == [("INSERT", 53)]
    reloaded = await other.load("s")
    assert reloaded is not None and reloaded.messages == current.messages
    await store.aclose()
    await other.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("stale", [False, True], ids=["same-worker", "other-worker"])
async def test_a_rewritten_message_is_saved_from_the_first_difference(
    tmp_path: Path, stale: bool
) -> None:
    path = tmp_path / "mainspring.db"
    store = await SQLiteSessionStore.open(path)
    current = state(transcript(6))
    await store.save(current)
    if stale:  # someone else saved since: compare with the stored transcript
        other = await SQLiteSessionStore.open(path)
        await other.save(state(transcript(6)))
        await other.aclose()
    watch_messages(path)
    current.messages[3] = Message.assistant("edited, same length")
    await store.save(current)
    assert changes(path) == [(kind, seq) for kind in ("DELETE", "INSERT") for seq in (3, 4, 5)]
    loaded = await store.load("s")
    assert loaded is not None and loaded.messages == current.messages
    current.messages[4:] = []  # a shorter transcript
    await store.save(current)
    assert changes(path) == [("DELETE", 4), ("DELETE", 5)]
    loaded = await store.load("s")
    assert loaded is not None and loaded.messages == current.messages
    await store.aclose()


@pytest.mark.anyio
async def test_saves_by_workers_with_stale_views_never_mix_transcripts(tmp_path: Path) -> None:
    path = tmp_path / "mainspring.db"
    one = await SQLiteSessionStore.open(path)
    two = await SQLiteSessionStore.open(path)
    mine = state(transcript(4))
    await one.save(mine)
    theirs = await two.load("s")
    assert theirs is not None
    theirs.messages.append(Message.user("theirs"))
    await two.save(theirs)
    # one saves its own continuation: the last save wins, whole (as with the memory store)
    mine.messages.append(Message.user("mine"))
    await one.save(mine)
    loaded = await two.load("s")
    assert loaded is not None and loaded.messages == mine.messages
    # a delete and a new session under the same id, then one saves its stale copy again
    await two.delete("s")
    await two.save(state(transcript(5, prefix="other")))
    mine.messages.append(Message.assistant("more"))
    await one.save(mine)
    loaded = await two.load("s")
    assert loaded is not None and loaded.messages == mine.messages
    await one.aclose()
    await two.aclose()


def unencodable() -> Message:
    call = ToolCallPart(id="c1", name="t", arguments={"x": object()})  # type: ignore[dict-item]  # not JSON on purpose: the test checks the error
    return Message(role="assistant", parts=(call,))


@pytest.mark.anyio
async def test_a_failed_save_changes_nothing(tmp_path: Path) -> None:
    store = await SQLiteSessionStore.open(tmp_path / "mainspring.db")
    good = state(transcript(2))
    await store.save(good)
    bad = state([*transcript(2), Message.user("fine"), unencodable()])
    bad.turn_index = 9
    bad.decided = {"att-9": "approved"}
    with pytest.raises(StoreError, match="a message of session 's' cannot be stored"):
        await store.save(bad)
    loaded = await store.load("s")
    assert loaded == good
    bad_header = state(transcript(3))
    bad_header.active_stream = object()  # type: ignore[assignment]  # a wrong type on purpose: the test checks it is refused
    with pytest.raises(StoreError, match="session 's' cannot be stored"):
        await store.save(bad_header)
    assert await store.load("s") == good
    await store.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("table", "column"),
    [("sessions", "header"), ("messages", "data"), ("writes", "data")],
)
async def test_a_damaged_session_row_is_a_store_error(
    tmp_path: Path, table: str, column: str
) -> None:
    path = tmp_path / "mainspring.db"
    store = await SQLiteSessionStore.open(path)
    await store.save(state(transcript(2), session_id="sess-3"))
    await store.record_write("sess-3", WriteRecord(key="k", tool="t", status="started"))
    raw(path, f"UPDATE mainspring_{table} SET {column} = '{{\"broken'")
    with pytest.raises(StoreError, match="session 'sess-3' cannot be decoded"):
        await store.load("sess-3")
    await store.aclose()


@pytest.mark.anyio
async def test_bad_session_input_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "mainspring.db"
    store = await SQLiteSessionStore.open(path)
    with pytest.raises(ConfigError, match="state must be a SessionState"):
        await store.save({"session_id": "s"})  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
    with pytest.raises(ConfigError, match="session_id must be a str"):
        await store.save(state([], session_id=None))  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
    with pytest.raises(ConfigError, match="attempt_id must be a str"):
        await store.claim_decision("s", 1, "approved")  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
    with pytest.raises(ConfigError, match="record must be a WriteRecord"):
        await store.record_write("s", {"key": "k"})  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
    for table in ("sessions", "messages", "decisions", "writes"):
        assert raw(path, f"SELECT COUNT(*) FROM mainspring_{table}") == [(0,)]
    await store.aclose()


CLAIMER = """
import sys, anyio
from mainspring.stores import SQLiteSessionStore

async def claim(store, decision):
    return [await store.claim_decision("sess", f"att-{i}", decision) for i in range(5)]

async def main():
    store = await SQLiteSessionStore.open(sys.argv[1])
    print("ready", flush=True)
    await anyio.to_thread.run_sync(sys.stdin.readline)
    print(" ".join(str(won) for won in await claim(store, sys.argv[2])), flush=True)
    await store.aclose()

anyio.run(main)
"""


def test_processes_racing_for_a_decision_have_one_winner_each(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIMER, str(path), f"decision-{n}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for n in range(4)
    ]
    try:
        for proc in procs:  # every process has opened the file (racing to create it)
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready", proc.communicate(timeout=30)
        for proc in procs:  # release them all at once
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outputs = [proc.communicate(timeout=30) for proc in procs]
    finally:
        for proc in procs:  # communicate() also closes the pipes a failure would leak
            proc.kill()
            proc.communicate(timeout=30)
    assert [proc.returncode for proc in procs] == [0] * 4, outputs
    wins = [out.split() for out, _ in outputs]
    for i in range(5):
        winners = [n for n in range(4) if wins[n][i] == "True"]
        assert len(winners) == 1, wins
        stored = raw(
            path, "SELECT decision FROM mainspring_decisions WHERE attempt_id = ?", (f"att-{i}",)
        )
        assert stored == [(f"decision-{winners[0]}",)]


# ----------------------------------------------------------------------- locks


@pytest.mark.anyio
async def test_a_lease_expires_on_the_wall_clock(tmp_path: Path) -> None:
    path = tmp_path / "mainspring.db"
    clock = Clock()
    one = await SQLiteRunLock.open(path, clock=clock)
    two = await SQLiteRunLock.open(path, clock=clock)
    assert await one.acquire("k", "w1", ttl=10)
    clock.now += 9.9
    assert not await two.acquire("k", "w2", ttl=10)
    assert await one.refresh("k", "w1", ttl=10)  # now until +19.9
    clock.now += 9.9
    assert await two.holder("k") == "w1"
    clock.now += 0.1
    assert await two.holder("k") is None
    assert not await one.refresh("k", "w1", ttl=10)
    assert await two.acquire("k", "w2", ttl=10)
    await one.release("k", "w1")  # not the holder any more: no effect
    assert await one.holder("k") == "w2"
    await one.aclose()
    await two.aclose()


@pytest.mark.anyio
async def test_a_lease_survives_reopening_the_file(tmp_path: Path) -> None:
    path = tmp_path / "mainspring.db"
    lock = await SQLiteRunLock.open(path)
    assert await lock.acquire("k", "w1", ttl=60)
    await lock.aclose()
    reopened = await SQLiteRunLock.open(path)
    assert await reopened.holder("k") == "w1"
    assert not await reopened.acquire("k", "w2", ttl=60)
    await reopened.aclose()


# --- one connection per file; the event loop never waits for another's lock ---------


@pytest.mark.anyio
async def test_open_stores_gives_the_stores_of_one_file_one_connection(tmp_path: Path) -> None:
    from mainspring.stores import open_stores

    url = f"sqlite:///{tmp_path / 'one.db'}"
    stores = await open_stores(url)
    assert stores.sessions is not None and stores.checkpoints is not None
    assert stores.locks is not None
    await stores.sessions.save(state(transcript(2)))
    await stores.checkpoints.append("st", TextDelta(text="a"))
    await stores.locks.aclose()  # one store closed: the others keep the connection
    assert texts(await stores.checkpoints.load("st")) == ["a"]
    loaded = await stores.sessions.load("s")
    assert loaded is not None and len(loaded.messages) == 2
    await stores.aclose()
    with pytest.raises(StoreError, match="closed"):
        await stores.sessions.load("s")


@pytest.mark.anyio
async def test_a_write_locked_by_another_connection_waits_off_the_event_loop(
    tmp_path: Path,
) -> None:
    path = tmp_path / "busy.db"
    store = await SQLiteCheckpointStore.open(path)
    await store.append("st", TextDelta(text="first"))
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    ticks = 0
    appended, ticked = anyio.Event(), anyio.Event()

    async def append() -> None:
        await store.append("st", TextDelta(text="second"))
        appended.set()

    async def ticker() -> None:
        nonlocal ticks
        while not appended.is_set():
            ticks += 1
            if ticks == 5:
                ticked.set()
            await anyio.sleep(0.01)

    async with anyio.create_task_group() as tg:
        tg.start_soon(append)
        tg.start_soon(ticker)
        with anyio.fail_after(60):  # (only a hang)
            await ticked.wait()  # the loop kept running while the append waits
        assert not appended.is_set()  # (it cannot end while the other holds the lock)
        other.execute("COMMIT")
    other.close()
    assert texts(await store.load("st")) == ["first", "second"]  # once, in order
    await store.aclose()


# --- the WAL is checkpointed in a thread of its own, never in a commit on the loop ---


def rows_in_the_main_file(path: Path, sql: str) -> list[tuple[Any, ...]]:
    """Read the database file alone, ignoring its WAL: only checkpointed rows are there."""
    with closing(sqlite3.connect(f"file:{path}?immutable=1", uri=True)) as conn:
        return conn.execute(sql).fetchall()


@pytest.mark.anyio
async def test_commits_never_checkpoint_and_a_thread_does_it_after_enough_changes(
    tmp_path: Path,
) -> None:
    from mainspring.stores._wal import CHECKPOINT_CHANGES

    path = tmp_path / "wal.db"
    store = await SQLiteSessionStore.open(path)
    checkpointer = store._db._wal  # the store's connection has SQLite's own one off
    assert store._db._conn is not None
    assert store._db._conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
    await store.save(state(transcript(3), "small"))
    assert checkpointer.checkpoints == 0
    tables = "SELECT name FROM sqlite_master WHERE name = 'mainspring_sessions'"
    assert rows_in_the_main_file(path, tables) == []  # all still in the WAL
    await store.save(state(transcript(CHECKPOINT_CHANGES), "big"))  # enough changes
    await checkpointer.join()
    assert checkpointer.checkpoints == 1
    ids = rows_in_the_main_file(path, "SELECT session_id FROM mainspring_sessions ORDER BY 1")
    assert ids == [("big",), ("small",)]
    loaded = await store.load("big")
    assert loaded is not None and len(loaded.messages) == CHECKPOINT_CHANGES
    await store.aclose()


def wal_bytes(path: Path) -> int:
    wal = path.with_name(path.name + "-wal")
    return wal.stat().st_size if wal.exists() else 0


@pytest.mark.anyio
async def test_a_checkpoint_that_met_a_newer_commit_still_lets_the_log_start_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As under load: a passive checkpoint cannot copy back a commit someone cannot see yet.

    A reader on an older snapshot stands for the commits that race a checkpoint
    in a server: the passive pass stops at what the reader sees, so the log is
    never all copied back, and SQLite lets it start over only when it is.
    """
    import threading

    import mainspring.stores._wal as wal

    monkeypatch.setattr(wal, "RESTART_WAIT", 10.0)  # (the reader below ends after 0.2 s)
    path = tmp_path / "wal.db"
    store = await SQLiteSessionStore.open(path)
    await store.save(state(transcript(300), "long"))
    reader = sqlite3.connect(path, check_same_thread=False)
    reader.execute("BEGIN")
    assert reader.execute("SELECT count(*) FROM mainspring_messages").fetchone() == (300,)
    await store.save(state(transcript(400), "long"))  # a commit the reader does not see
    ends = threading.Timer(0.2, reader.commit)  # the reader goes on for a while, then ends
    ends.start()
    checkpointer = wal.WalCheckpointer(path, sqlite3, every=1, restart_frames=1)
    checkpointer.changed(1)
    await checkpointer.join()
    ends.join()
    reader.close()
    assert (checkpointer.checkpoints, checkpointer.restarts) == (1, 1)
    size = wal_bytes(path)
    await store.save(state(transcript(401), "long"))
    assert wal_bytes(path) == size  # written from the log's start: the file did not grow
    ids = rows_in_the_main_file(path, "SELECT count(*) FROM mainspring_messages")
    assert ids == [(400,)]  # every commit before the restart is in the database file
    loaded = await store.load("long")
    assert loaded is not None and len(loaded.messages) == 401
    await store.aclose()


@pytest.mark.anyio
async def test_a_log_that_starts_over_is_cut_back_to_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mainspring.stores._sqlite as connections
    from mainspring.stores._wal import WalCheckpointer

    monkeypatch.setattr(connections, "LOG_LIMIT", 64 * 1024)
    path = tmp_path / "wal.db"
    store = await SQLiteSessionStore.open(path)
    await store.save(state(transcript(3000), "long"))
    await store._db._wal.join()  # (3,000 changes started the store's own: one at a time)
    assert wal_bytes(path) > 256 * 1024
    checkpointer = WalCheckpointer(path, sqlite3, every=1, restart_frames=1)
    checkpointer.changed(1)
    await checkpointer.join()
    assert checkpointer.restarts == 1
    await store.save(state(transcript(3001), "long"))
    assert wal_bytes(path) <= 64 * 1024
    await store.aclose()


@pytest.mark.anyio
async def test_the_log_stays_bounded_while_commits_keep_coming(tmp_path: Path) -> None:
    """Checkpoints in a thread race the loop's commits: the log must still start over.

    A passive checkpoint copies back the frames there were when it began; a
    commit made meanwhile leaves the log not fully copied, and SQLite rewinds it
    only when it is. Without emptying it, the log kept every commit, without end.
    """
    from mainspring.stores._wal import WalCheckpointer

    path = tmp_path / "wal.db"
    store = await SQLiteSessionStore.open(path)
    checkpointer = store._db._wal = WalCheckpointer(path, sqlite3, every=40, restart_frames=200)
    largest = 0
    saves = 1000
    for i in range(saves):  # one session per save: new rows and a new header each time
        await store.save(state(transcript(2, f"s{i}-"), f"s{i}"))
        largest = max(largest, wal_bytes(path))
        await anyio.sleep(0.001)  # (as a server's conversations wait for their model)
    await checkpointer.join()
    # Keeping every frame, the log reached 19 MB here; restarted past 200 frames, about 1 MB.
    # (When a checkpoint happens to meet no commit, SQLite rewinds the log itself.)
    assert largest < 6 * 2**20, largest
    for i in (0, saves // 2, saves - 1):  # nothing lost on the way
        loaded = await store.load(f"s{i}")
        assert loaded is not None and [m.text for m in loaded.messages] == [f"s{i}-0", f"s{i}-1"]
    await store.aclose()


@pytest.mark.anyio
async def test_a_failing_checkpoint_is_logged_and_changes_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from mainspring.stores._wal import WalCheckpointer

    path = tmp_path / "wal.db"
    store = await SQLiteSessionStore.open(path)
    await store.save(state(transcript(4)))
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database" * 512)
    checkpointer = WalCheckpointer(garbage, sqlite3, every=1)
    checkpointer.changed(1)
    await checkpointer.join()
    assert checkpointer.checkpoints == 0
    assert "WAL checkpoint failed" in caplog.text
    assert garbage.read_bytes() == b"not a database" * 512
    loaded = await store.load("s")
    assert loaded is not None and len(loaded.messages) == 4
    await store.aclose()
