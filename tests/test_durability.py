"""Durable sessions in one process: shared stores stand in for many workers."""

from __future__ import annotations

import sqlite3
from contextlib import aclosing, closing
from pathlib import Path
from typing import cast

import anyio
import pytest

from mainspring import (
    Agent,
    Approve,
    DecisionConflict,
    ErrorEvent,
    Event,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    SessionBusy,
    TextDelta,
    ToolStart,
    TurnComplete,
    tool,
)
from mainspring.errors import ConfigError, StoreError
from mainspring.stores import InMemoryCheckpointStore, InMemoryRunLock, InMemorySessionStore
from mainspring.stores.urls import open_stores
from mainspring.tools import Tool
from tests.helpers import collect, pending_of

pytestmark = pytest.mark.anyio


def pay_tool(log: list[float]) -> Tool:
    @tool(permission="confirm")
    async def pay(amount: float) -> str:
        """Pay."""
        log.append(amount)
        await anyio.sleep(0.01)
        return f"paid {amount}"

    return pay


def pay_agent(log: list[float]) -> Agent:
    model = ScriptedModel(
        lambda messages, tools: (
            "done"
            if messages[-1].role == "tool"
            else ScriptedResponse(tool_calls=[ScriptedCall("pay", {"amount": 7})])
        )
    )
    return Agent(model=model, tools=[pay_tool(log)])


async def test_the_same_decision_posted_to_two_workers_runs_the_write_once() -> None:
    log: list[float] = []
    sessions, lock = InMemorySessionStore(), InMemoryRunLock()
    first = Session(pay_agent(log), session_store=sessions, run_lock=lock, owner="w1")
    pending = pending_of(await collect(first.send("pay")))
    worker_a = await Session.load(
        pay_agent(log), sessions, first.session_id, run_lock=lock, owner="a"
    )
    worker_b = await Session.load(
        pay_agent(log), sessions, first.session_id, run_lock=lock, owner="b"
    )
    outcomes: list[str] = []

    async def decide(session: Session) -> None:
        try:
            events = await collect(session.resume(pending.attempt_id, Approve()))
            outcomes.append(events[-1].type)
        except (DecisionConflict, SessionBusy) as exc:
            outcomes.append(type(exc).__name__)

    async with anyio.create_task_group() as tg:
        tg.start_soon(decide, worker_a)
        tg.start_soon(decide, worker_b)
    assert log == [7.0]
    assert sorted(outcomes)[1] == "turn_complete"
    assert sorted(outcomes)[0] in ("DecisionConflict", "SessionBusy")
    # A third worker, later, is refused too.
    late = await Session.load(pay_agent(log), sessions, first.session_id, run_lock=lock)
    with pytest.raises(DecisionConflict):
        late.resume(pending.attempt_id, Approve())
    assert log == [7.0]


async def test_a_second_run_on_another_worker_is_refused_or_waits() -> None:
    sessions, lock = InMemorySessionStore(), InMemoryRunLock()
    slow = ScriptedResponse(text="slow answer " * 4, delay=0.01)
    model = ScriptedModel([slow, "second"])
    one = Session(Agent(model=model), session_store=sessions, run_lock=lock, owner="w1")
    await one.save()
    two = await Session.load(
        Agent(model=model), sessions, one.session_id, run_lock=lock, owner="w2"
    )
    waiter = await Session.load(
        Agent(model=model), sessions, one.session_id, run_lock=lock, owner="w3", when_busy="wait"
    )
    stream = one.send("first")
    await stream.__anext__()  # the run holds the lock now
    with pytest.raises(SessionBusy, match="'w1'"):
        await two.send("second").__anext__()
    results: list[Event] = []

    async def wait_then_run() -> None:
        results.extend(await collect(waiter.send("second")))

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait_then_run)
        rest = [event async for event in stream]
        assert isinstance(rest[-1], TurnComplete)
    assert isinstance(results[-1], TurnComplete)
    # The waiter saw the first run's messages before adding its own.
    texts = [m.text for m in waiter.messages]
    assert texts[:2] == ["first", "slow answer " * 4] and texts[2] == "second"


class RenewalCountingLock(InMemoryRunLock):
    """A lease table on a clock that jumps most of a lease's lifetime at every renewal."""

    def __init__(self, ttl: float) -> None:
        self.now = 0.0
        super().__init__(clock=lambda: self.now)
        self.ttl = ttl
        self.renewals = 0
        self.renewed = anyio.Event()

    async def refresh(self, key: str, owner: str, *, ttl: float) -> bool:
        self.now += 0.9 * self.ttl  # two of these without a renewal would expire the lease
        kept = await super().refresh(key, owner, ttl=ttl)
        self.renewals += 1
        if self.renewals == 3:
            self.renewed.set()
        return kept


async def test_a_run_longer_than_its_lease_keeps_it_and_lets_go_at_the_end() -> None:
    lock = RenewalCountingLock(ttl=0.03)
    finish = anyio.Event()

    @tool(read_only=True)
    async def slow() -> str:
        """Take a while."""
        await finish.wait()
        return "slow"

    model = ScriptedModel(
        lambda messages, tools: (
            "done"
            if messages[-1].role == "tool"
            else ScriptedResponse(tool_calls=[ScriptedCall("slow", {})])
        )
    )
    agent = Agent(model=model, tools=[slow])
    session = Session(agent, run_lock=lock, lock_ttl=lock.ttl, owner="w1")
    events: list[Event] = []

    async def run() -> None:
        events.extend(await collect(session.send("go")))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(60):  # (a guard against a hang, not a timing)
            await lock.renewed.wait()  # 2.7 lease lifetimes later, renewed each time
        assert await lock.holder(session.session_id) == "w1"
        assert not await lock.acquire(session.session_id, "w2", ttl=1)
        finish.set()
    assert isinstance(events[-1], TurnComplete) and events[-1].stop_reason == "end_turn"
    assert await lock.holder(session.session_id) is None  # released with the run


async def test_resume_without_a_checkpoint_store_raises() -> None:
    session = Session(Agent(model=ScriptedModel(["x"])))
    with pytest.raises(ConfigError, match="checkpoint_store"):
        session.send(resume_stream_id="abc")
    with pytest.raises(ConfigError, match="not both"):
        Session(Agent(model=ScriptedModel(["x"])), checkpoint_store=InMemoryCheckpointStore()).send(
            "hi", resume_stream_id="abc"
        )


async def test_resume_of_an_unknown_stream_is_a_clear_error() -> None:
    session = Session(Agent(model=ScriptedModel(["x"])), checkpoint_store=InMemoryCheckpointStore())
    with pytest.raises(StoreError, match="no checkpoint for stream 'nope'"):
        await session.send(resume_stream_id="nope").__anext__()


async def test_a_naturally_ended_stream_replays_whole_until_the_next_one_clears_it() -> None:
    store = InMemoryCheckpointStore()
    session = Session(Agent(model=ScriptedModel(["hello", "again"])), checkpoint_store=store)
    events = await collect(session.send("hi"))
    stream_id = events[0].stream_id  # type: ignore[union-attr]  # the first event is StreamStarted, which has a stream_id
    assert await collect(session.send(resume_stream_id=stream_id)) == events
    await collect(session.send("next"))
    assert await store.load(stream_id) == []  # cleared once the next stream started
    with pytest.raises(StoreError, match="unknown or expired"):
        await session.send(resume_stream_id=stream_id).__anext__()


async def test_resume_while_running_replays_then_follows_live() -> None:
    store = InMemoryCheckpointStore()
    model = ScriptedModel([ScriptedResponse(text="streaming slowly " * 3, delay=0.01)])
    session = Session(Agent(model=model), checkpoint_store=store)
    original: list[Event] = []
    resumed: list[Event] = []
    started = anyio.Event()

    async def consume() -> None:
        async for event in session.send("go"):
            original.append(event)
            if isinstance(event, TextDelta):
                started.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await started.wait()
        stream_id = original[0].stream_id  # type: ignore[union-attr]  # the first event is StreamStarted, which has a stream_id
        resumed = await collect(session.send(resume_stream_id=stream_id))
    assert resumed == original  # nothing lost, nothing twice


async def test_a_cut_stream_with_no_tool_in_flight_ends_interrupted() -> None:
    store = InMemoryCheckpointStore()
    model = ScriptedModel([ScriptedResponse(text="a long answer " * 5, delay=0.01)])
    session = Session(Agent(model=model), checkpoint_store=store)
    seen: list[Event] = []
    async with aclosing(session.send("go")) as stream:
        async for event in stream:
            seen.append(event)
            if len(seen) == 3:
                break  # the consumer leaves: the run is aborted, the log stays
    stream_id = seen[0].stream_id  # type: ignore[union-attr]  # the first event is StreamStarted, which has a stream_id
    replay = await collect(session.send(resume_stream_id=stream_id))
    assert replay[: len(seen)] == seen
    assert isinstance(replay[-1], TurnComplete) and replay[-1].stop_reason == "interrupted"


async def test_a_cut_stream_with_a_tool_in_flight_ends_with_an_explicit_error() -> None:
    store = InMemoryCheckpointStore()

    @tool(read_only=True)
    async def slow_read() -> str:
        """Takes long."""
        await anyio.sleep(10)
        return "late"

    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("slow_read")]), "after"])
    session = Session(Agent(model=model, tools=[slow_read]), checkpoint_store=store)
    seen: list[Event] = []
    async with aclosing(session.send("go")) as stream:
        async for event in stream:
            seen.append(event)
            if isinstance(event, ToolStart):
                break
    stream_id = seen[0].stream_id  # type: ignore[union-attr]  # the first event is StreamStarted, which has a stream_id
    replay = await collect(session.send(resume_stream_id=stream_id))
    terminal = replay[-1]
    assert isinstance(terminal, ErrorEvent) and terminal.code == "tool_interrupted"
    assert "slow_read" in terminal.message
    # The session goes on normally.
    events = await collect(session.send("again"))
    assert isinstance(events[-1], TurnComplete) and events[-1].stop_reason == "end_turn"


# --- the README recipe (one SQLite file): the run's last commit drops its lease ------


async def test_on_one_sqlite_file_the_last_commit_of_a_run_drops_its_lease(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stores = await open_stores(f"sqlite:///{tmp_path / 'ms.db'}")
    assert stores.locks is not None and stores.sessions is not None
    releases: list[str] = []
    release = stores.locks.release

    async def counted(key: str, owner: str) -> None:
        releases.append(key)
        await release(key, owner)

    monkeypatch.setattr(stores.locks, "release", counted)
    agent = Agent(model=ScriptedModel(["hello", "hello again"]))
    session = Session(agent, **stores.session_kwargs(), owner="w1")
    events = await collect(session.send("hi"))
    assert isinstance(events[-1], TurnComplete) and not session.running
    assert await stores.locks.holder(session.session_id) is None
    assert releases == []  # no round trip of its own: it went with the terminal event
    other = await Session.load(agent, stores.sessions, session.session_id, run_lock=stores.locks)
    assert isinstance((await collect(other.send("again")))[-1], TurnComplete)
    await stores.aclose()


async def test_when_the_last_commit_fails_the_lease_is_still_dropped(tmp_path: Path) -> None:
    path = tmp_path / "ms.db"
    stores = await open_stores(f"sqlite:///{path}")
    assert stores.locks is not None and stores.sessions is not None
    with closing(sqlite3.connect(path)) as conn:  # the disk refuses the terminal event
        conn.execute(
            "CREATE TRIGGER no_end BEFORE INSERT ON mainspring_checkpoints"
            " WHEN NEW.data LIKE '%\"turn_complete\"%'"
            " BEGIN SELECT RAISE(ABORT, 'disk says no'); END"
        )
    session = Session(Agent(model=ScriptedModel(["hello"])), **stores.session_kwargs())
    events = await collect(session.send("hi"))
    assert [e.type for e in events if isinstance(e, TurnComplete | ErrorEvent)] == ["error"]
    assert "disk says no" in cast(ErrorEvent, events[-1]).message
    assert not session.running
    assert await stores.locks.holder(session.session_id) is None
    await stores.aclose()


@pytest.mark.parametrize("locked", [False, True])
async def test_a_session_named_again_continues_the_stored_history(locked: bool) -> None:
    # A host that builds Session(agent, session_id=...) again, instead of
    # Session.load, must not overwrite what the store holds for that id.
    store = InMemorySessionStore()
    lock = InMemoryRunLock() if locked else None
    model = ScriptedModel(["first answer", "second answer"])
    agent = Agent(model=model)
    first = Session(agent, session_id="alice", session_store=store, run_lock=lock)
    await collect(first.send("first question"))
    again = Session(agent, session_id="alice", session_store=store, run_lock=lock)
    await collect(again.send("second question"))
    stored = await store.load("alice")
    assert stored is not None
    assert [m.text for m in stored.messages] == [
        "first question",
        "first answer",
        "second question",
        "second answer",
    ]
    assert stored.turn_index == 2
