"""A step boundary in one commit (``JointCommit``): all of it on record, or none.

Run against the stores that implement it: memory, and SQLite with the
checkpoint store of the same file (``open_stores`` shares the connection).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mainspring.errors import StoreError
from mainspring.events import StreamStarted, TextDelta, TurnComplete
from mainspring.messages import Message
from mainspring.state import SessionState, Turn, WriteRecord
from mainspring.stores import Commit, JointCommit, SQLiteCheckpointStore
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
    return WriteRecord(key=key, tool="pay", status=status)  # type: ignore[arg-type]


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
