"""A step boundary in one commit (``JointCommit``): all of it on record, or none.

Run against the stores that implement it: memory, and SQLite with the
checkpoint store of the same file (``open_stores`` shares the connection).
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import pytest

from mainspring.errors import ConfigError, StoreError
from mainspring.events import StreamStarted, TextDelta, TurnComplete
from mainspring.messages import Message
from mainspring.state import SessionState, Turn, WriteRecord
from mainspring.stores import (
    Commit,
    InMemoryRunLock,
    JointCommit,
    JointLease,
    SQLiteCheckpointStore,
)
from mainspring.stores.urls import Stores, open_stores

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "sqlite"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 's.db'}"
    opened = await open_stores(url)
    try:
        yield opened
    finally:
        await opened.aclose()


def joint(stores: Stores) -> JointCommit:
    sessions: object = stores.sessions
    assert isinstance(sessions, JointCommit) and sessions.joins(stores.checkpoints)
    return sessions


def record(key: str, status: str = "started") -> WriteRecord:
    return WriteRecord(key=key, tool="pay", status=status)  # type: ignore[arg-type]  # callers pass the status literals as a str


async def test_a_commit_puts_state_ledger_and_events_on_record_together(stores: Stores) -> None:
    state = SessionState(session_id="s", agent_name="a", messages=[Message.user("hi")])
    state.turn = Turn(index=1)
    events = (StreamStarted(stream_id="x", session_id="s"), TextDelta(text="hello"))
    await joint(stores).commit(
        Commit(session_id="s", state=state, writes=(record("c1"),), stream_id="x", events=events),
        stores.checkpoints,
    )
    assert stores.sessions is not None and stores.checkpoints is not None
    loaded = await stores.sessions.load("s")
    assert loaded is not None and loaded.messages == state.messages
    assert loaded.turn is not None and loaded.turn.index == 1
    assert loaded.writes["c1"].status == "started"
    assert await stores.checkpoints.load("x") == list(events)


async def test_a_commit_upserts_ledger_entries_and_clears_a_finished_log(stores: Stores) -> None:
    assert stores.sessions is not None and stores.checkpoints is not None
    await stores.checkpoints.append("old", TextDelta(text="done before"))
    store = joint(stores)
    await store.commit(Commit(session_id="s", writes=(record("c1"),)), stores.checkpoints)
    done = TurnComplete(stop_reason="end_turn", turn_index=1)
    await store.commit(
        Commit(
            session_id="s",
            writes=(record("c1", "done"),),
            stream_id="new",
            events=(done,),
            clear="old",
            sync=True,
        ),
        stores.checkpoints,
    )
    assert await stores.checkpoints.load("old") == []
    assert await stores.checkpoints.load("new") == [done]
    state = SessionState(session_id="s", agent_name="a")
    await store.commit(Commit(session_id="s", state=state), stores.checkpoints)
    loaded = await stores.sessions.load("s")
    assert loaded is not None and loaded.writes["c1"].status == "done"  # never moved back


async def test_a_commit_that_cannot_be_encoded_changes_nothing(stores: Stores) -> None:
    assert stores.sessions is not None and stores.checkpoints is not None
    before = SessionState(session_id="s", agent_name="a", messages=[Message.user("first")])
    store = joint(stores)
    await store.commit(Commit(session_id="s", state=before), stores.checkpoints)
    bad = SessionState(session_id="s", agent_name="a", messages=[Message.user("first")])
    bad.turn = Turn(index=1)
    bad.turn.usage = object()  # type: ignore[assignment]  # not storable
    with pytest.raises((StoreError, TypeError, ValueError)):
        await store.commit(
            Commit(
                session_id="s",
                state=bad,
                writes=(record("c9"),),
                stream_id="x",
                events=(TextDelta(text="never"),),
            ),
            stores.checkpoints,
        )
    loaded = await stores.sessions.load("s")
    assert loaded is not None and loaded.turn is None and "c9" not in loaded.writes
    assert await stores.checkpoints.load("x") == []


async def test_stores_of_different_files_do_not_join(tmp_path: Path) -> None:
    one = await open_stores(f"sqlite:///{tmp_path / 'one.db'}")
    other = await SQLiteCheckpointStore.open(tmp_path / "other.db")
    try:
        sessions: object = one.sessions
        assert isinstance(sessions, JointCommit)
        assert sessions.joins(one.checkpoints)
        assert not sessions.joins(other)
    finally:
        await one.aclose()
        await other.aclose()


# --- the commit of a run's end drops its lease (JointLease: SQLite's one file) -------


async def sqlite_stores(tmp_path: Path) -> tuple[Stores, JointLease]:
    opened = await open_stores(f"sqlite:///{tmp_path / 'lease.db'}")
    sessions: object = opened.sessions
    assert isinstance(sessions, JointLease) and sessions.holds(opened.locks)
    return opened, sessions


async def test_a_commit_drops_the_owners_lease_with_the_rest(tmp_path: Path) -> None:
    stores, store = await sqlite_stores(tmp_path)
    assert stores.locks is not None and isinstance(store, JointCommit)
    assert await stores.locks.acquire("s", "w1", ttl=60)
    done = TurnComplete(stop_reason="end_turn", turn_index=1)
    state = SessionState(session_id="s", agent_name="a", messages=[Message.user("hi")])
    await store.commit(
        Commit(session_id="s", state=state, stream_id="x", events=(done,), release=("s", "w2")),
        stores.checkpoints,
    )
    assert await stores.locks.holder("s") == "w1"  # only its owner's release drops a lease
    await store.commit(Commit(session_id="s", release=("s", "w1")), stores.checkpoints)
    assert await stores.locks.holder("s") is None
    assert await stores.locks.acquire("s", "w2", ttl=60)
    await stores.aclose()


async def test_a_commit_that_fails_keeps_the_lease_and_records_nothing(tmp_path: Path) -> None:
    stores, store = await sqlite_stores(tmp_path)
    assert stores.locks is not None and stores.sessions is not None
    assert isinstance(store, JointCommit) and stores.checkpoints is not None
    assert await stores.locks.acquire("s", "w1", ttl=60)
    with closing(sqlite3.connect(tmp_path / "lease.db")) as conn:  # another program's rule
        conn.execute(
            "CREATE TRIGGER no_release BEFORE DELETE ON mainspring_locks"
            " BEGIN SELECT RAISE(ABORT, 'leases stay'); END"
        )
    state = SessionState(session_id="s", agent_name="a", messages=[Message.user("hi")])
    done = TurnComplete(stop_reason="end_turn", turn_index=1)
    with pytest.raises(StoreError, match="leases stay"):
        await store.commit(
            Commit(session_id="s", state=state, stream_id="x", events=(done,), release=("s", "w1")),
            stores.checkpoints,
        )
    assert await stores.locks.holder("s") == "w1"
    assert await stores.sessions.load("s") is None  # none of it: one transaction
    assert await stores.checkpoints.load("x") == []
    with pytest.raises(ConfigError):
        await store.commit(Commit(session_id="s", release=("s", 7)), stores.checkpoints)  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
    await stores.aclose()


async def test_stores_of_different_files_hold_no_leases_of_each_other(tmp_path: Path) -> None:
    from mainspring.stores import SQLiteRunLock

    one = await open_stores(f"sqlite:///{tmp_path / 'one.db'}")
    other = await SQLiteRunLock.open(tmp_path / "other.db")
    memory = await open_stores("memory://")
    try:
        sessions: object = one.sessions
        assert isinstance(sessions, JointLease)
        assert sessions.holds(one.locks) and not sessions.holds(other)
        assert not sessions.holds(memory.locks) and not sessions.holds(None)
        in_memory: object = memory.sessions
        assert isinstance(in_memory, JointLease)  # its own lock only
        assert in_memory.holds(memory.locks) and not in_memory.holds(one.locks)
        assert not in_memory.holds(InMemoryRunLock()) and not in_memory.holds(None)
    finally:
        await one.aclose()
        await other.aclose()
