"""Group commit: synced step commits of many sessions share one SQLite transaction.

A commit that records a ledger entry is fsynced before the write it guards
runs. While one such commit holds the connection, the ones that come
meanwhile (other sessions') queue, and the next goes to disk together with
them: one transaction, one fsync. Each still succeeds or fails on its own.
Decision claims and direct ledger entries are fsynced commits too, and join
the same groups.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from pathlib import Path

import anyio
import pytest

from mainspring.errors import StoreError
from mainspring.events import StreamStarted, TextDelta
from mainspring.messages import Message
from mainspring.state import SessionState, WriteRecord
from mainspring.stores import JointCommit
from mainspring.stores.base import Commit
from mainspring.stores.urls import Stores, open_stores

pytestmark = pytest.mark.anyio


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[Stores]:
    opened = await open_stores(f"sqlite:///{tmp_path / 's.db'}")
    try:
        yield opened
    finally:
        await opened.aclose()


def joint(stores: Stores) -> JointCommit:
    sessions: object = stores.sessions
    assert isinstance(sessions, JointCommit) and sessions.joins(stores.checkpoints)
    return sessions


def traced(stores: Stores) -> list[str]:
    """The SQL the stores' shared connection runs from now on."""
    statements: list[str] = []
    stores.sessions._db._conn.set_trace_callback(statements.append)  # type: ignore[union-attr]  # the stores are open: the connection is set
    return statements


def transactions(statements: list[str]) -> int:
    return sum(1 for sql in statements if sql.startswith("BEGIN IMMEDIATE"))


def step(sid: str) -> Commit:
    """A step boundary of session ``sid`` that records a ledger entry (so it is fsynced)."""
    state = SessionState(session_id=sid, agent_name="a", messages=[Message.user(f"hi {sid}")])
    return Commit(
        session_id=sid,
        state=state,
        writes=(WriteRecord(key=f"{sid}-call", tool="pay", status="started"),),
        stream_id=f"stream-{sid}",
        events=(StreamStarted(stream_id=f"stream-{sid}", session_id=sid), TextDelta(text=sid)),
        sync=True,
    )


@asynccontextmanager
async def busy(stores: Stores) -> AsyncIterator[None]:
    """The connection is busy (as with another commit's fsync) until the block ends."""
    async with stores.sessions._db._lock:  # type: ignore[union-attr]  # the stores are open: the connection is set
        yield
        await anyio.wait_all_tasks_blocked()  # every commit started in the block waits


async def commit_all(
    stores: Stores, sids: list[str], *, meanwhile: bool = True
) -> dict[str, BaseException | None]:
    """Commit a step of each session, all coming while the connection is busy; each outcome."""
    outcomes: dict[str, BaseException | None] = {}

    async def one(sid: str) -> None:
        try:
            await joint(stores).commit(step(sid), stores.checkpoints)
        except Exception as exc:
            outcomes[sid] = exc
        else:
            outcomes[sid] = None

    async with anyio.create_task_group() as tg:
        if not meanwhile:
            for sid in sids:
                tg.start_soon(one, sid)
            return outcomes
        async with busy(stores):
            for sid in sids:
                tg.start_soon(one, sid)
    return outcomes


async def on_record(stores: Stores, sid: str) -> bool:
    """Whether all of ``step(sid)`` is on record (and False if none of it is)."""
    assert stores.sessions is not None and stores.checkpoints is not None
    state = await stores.sessions.load(sid)
    events = await stores.checkpoints.load(f"stream-{sid}")
    if state is None:
        assert events == []
        return False
    assert state.messages == [Message.user(f"hi {sid}")]
    assert state.writes[f"{sid}-call"].status == "started"
    assert events == list(step(sid).events)
    return True


async def test_synced_commits_that_come_while_one_is_on_its_way_go_in_one_transaction(
    stores: Stores,
) -> None:
    statements = traced(stores)
    sids = [f"s{i}" for i in range(12)]
    outcomes = await commit_all(stores, sids)
    assert outcomes == dict.fromkeys(sids)
    assert transactions(statements) == 1  # the twelve queued: one transaction, one fsync
    assert statements.count("PRAGMA synchronous=FULL") == 1
    for sid in sids:
        assert await on_record(stores, sid)


async def test_a_step_that_fails_in_a_group_fails_alone(stores: Stores, tmp_path: Path) -> None:
    with closing(sqlite3.connect(tmp_path / "s.db")) as conn:  # another program's rule
        conn.execute(
            "CREATE TRIGGER refuse_bad BEFORE INSERT ON mainspring_messages"
            " WHEN NEW.session_id = 'bad' BEGIN SELECT RAISE(ABORT, 'not this one'); END"
        )
    statements = traced(stores)
    sids = ["s0", "s1", "bad", "s3", "s4"]
    outcomes = await commit_all(stores, sids)
    assert transactions(statements) == 1  # "bad" went in the group
    error = outcomes.pop("bad")
    assert isinstance(error, StoreError) and "not this one" in str(error)
    assert outcomes == dict.fromkeys(["s0", "s1", "s3", "s4"])
    assert not await on_record(stores, "bad")  # none of it: its savepoint was rolled back
    assert stores.sessions is not None
    assert (await stores.sessions.load("bad")) is None
    for sid in outcomes:
        assert await on_record(stores, sid)
    # The store goes on: the same session commits once the rule is gone.
    with closing(sqlite3.connect(tmp_path / "s.db")) as conn:
        conn.execute("DROP TRIGGER refuse_bad")
    assert await commit_all(stores, ["bad"], meanwhile=False) == {"bad": None}
    assert await on_record(stores, "bad")


async def test_a_failure_that_ends_the_transaction_fails_the_whole_group(
    stores: Stores, tmp_path: Path
) -> None:
    with closing(sqlite3.connect(tmp_path / "s.db")) as conn:
        conn.execute(
            "CREATE TRIGGER end_all BEFORE INSERT ON mainspring_messages"
            " WHEN NEW.session_id = 'bad' BEGIN SELECT RAISE(ROLLBACK, 'all of it'); END"
        )
    statements = traced(stores)
    outcomes = await commit_all(stores, ["s0", "s1", "bad", "s3"])
    assert transactions(statements) == 1
    assert all(isinstance(e, StoreError) and "all of it" in str(e) for e in outcomes.values())
    for sid in ["s0", "s1", "bad", "s3"]:
        assert not await on_record(stores, sid)
    assert await commit_all(stores, ["s1"], meanwhile=False) == {"s1": None}
    assert await on_record(stores, "s1")


async def test_a_commit_cancelled_while_it_waits_never_runs(stores: Stores) -> None:
    store = joint(stores)
    statements = traced(stores)
    waiting = anyio.CancelScope()
    done: list[str] = []

    async def first() -> None:
        await store.commit(step("first"), stores.checkpoints)
        done.append("first")

    async def second() -> None:
        with waiting:
            await store.commit(step("second"), stores.checkpoints)
            done.append("second")

    async with anyio.create_task_group() as tg, busy(stores):
        tg.start_soon(first)
        tg.start_soon(second)
        await anyio.wait_all_tasks_blocked()  # both wait for the connection
        waiting.cancel()
    assert done == ["first"] and waiting.cancelled_caught
    assert transactions(statements) == 1
    assert await on_record(stores, "first")
    assert not await on_record(stores, "second")
    assert await commit_all(stores, ["second"], meanwhile=False) == {"second": None}
    assert await on_record(stores, "second")


async def test_decision_claims_that_come_together_share_one_fsync_and_still_claim_once(
    stores: Stores,
) -> None:
    """Approvals arriving at once (a server's many users) are one fsync, not one each.

    Two claims of one attempt in the same group still leave exactly one decision:
    the first recorded, the second told it lost.
    """
    assert stores.sessions is not None
    sessions = stores.sessions
    statements = traced(stores)
    claims = [(f"s{i}", "attempt-1", "approve") for i in range(8)]
    claims.insert(3, ("s1", "attempt-1", "reject"))  # a concurrent duplicate of s1's claim
    won: dict[int, bool] = {}

    async def claim(i: int, sid: str, attempt: str, decision: str) -> None:
        won[i] = await sessions.claim_decision(sid, attempt, decision)

    async with anyio.create_task_group() as tg, busy(stores):
        for i, args in enumerate(claims):
            tg.start_soon(claim, i, *args)
    assert transactions(statements) == 1
    assert statements.count("PRAGMA synchronous=FULL") == 1
    others = [won[i] for i, (sid, _, _) in enumerate(claims) if sid != "s1"]
    assert others == [True] * 7
    s1 = {claims[i][2]: won[i] for i in (1, 3)}  # whichever came first (trio shuffles) won
    assert sorted(s1.values()) == [False, True]
    winner = next(decision for decision, ok in s1.items() if ok)
    assert not await sessions.claim_decision("s1", "attempt-1", "reject")  # it holds
    # What the winning claim recorded is what a worker that loads the session sees.
    await sessions.save(SessionState(session_id="s1", agent_name="a"))
    loaded = await sessions.load("s1")
    assert loaded is not None and loaded.decided == {"attempt-1": winner}


async def test_claims_ledger_entries_and_step_commits_share_a_group(stores: Stores) -> None:
    assert stores.sessions is not None
    sessions = stores.sessions
    statements = traced(stores)
    outcomes: dict[str, object] = {}

    async def claim(sid: str) -> None:
        outcomes[f"claim {sid}"] = await sessions.claim_decision(sid, "a1", "approve")

    async def ledger(sid: str) -> None:
        record = WriteRecord(key=f"{sid}-direct", tool="pay", status="started")
        await sessions.record_write(sid, record)
        outcomes[f"ledger {sid}"] = "recorded"

    async def commit(sid: str) -> None:
        await joint(stores).commit(step(sid), stores.checkpoints)
        outcomes[f"step {sid}"] = "committed"

    async with anyio.create_task_group() as tg, busy(stores):
        for sid in ("s0", "s1", "s2"):
            tg.start_soon(commit, sid)
            tg.start_soon(claim, sid)
            tg.start_soon(ledger, sid)
    assert transactions(statements) == 1
    assert outcomes == {
        **{f"claim s{i}": True for i in range(3)},
        **{f"ledger s{i}": "recorded" for i in range(3)},
        **{f"step s{i}": "committed" for i in range(3)},
    }
    for sid in ("s0", "s1", "s2"):
        assert await on_record(stores, sid)
        state = await sessions.load(sid)
        assert state is not None and state.decided == {"a1": "approve"}
        assert state.writes[f"{sid}-direct"].status == "started"


async def test_a_claim_that_fails_in_a_group_fails_alone(stores: Stores, tmp_path: Path) -> None:
    with closing(sqlite3.connect(tmp_path / "s.db")) as conn:
        conn.execute(
            "CREATE TRIGGER refuse_bad BEFORE INSERT ON mainspring_decisions"
            " WHEN NEW.session_id = 'bad' BEGIN SELECT RAISE(ABORT, 'no claim here'); END"
        )
    assert stores.sessions is not None
    sessions = stores.sessions
    statements = traced(stores)
    outcomes: dict[str, object] = {}

    async def claim(sid: str) -> None:
        try:
            outcomes[sid] = await sessions.claim_decision(sid, "a1", "approve")
        except Exception as exc:
            outcomes[sid] = exc

    async with anyio.create_task_group() as tg, busy(stores):
        for sid in ("s0", "bad", "s2"):
            tg.start_soon(claim, sid)
    assert transactions(statements) == 1
    error = outcomes.pop("bad")
    assert isinstance(error, StoreError) and "no claim here" in str(error)
    assert outcomes == {"s0": True, "s2": True}
    with closing(sqlite3.connect(tmp_path / "s.db")) as conn:
        conn.execute("DROP TRIGGER refuse_bad")
    assert await sessions.claim_decision("bad", "a1", "reject")  # nothing of it was kept
