"""A run that lost its session's lock to another worker stops: no write, nothing on record.

The run lock is a lease. A worker whose event loop stalls past the lease's
time to live (or whose lock store expired it) no longer owns the session:
another worker may already be running it. Each write is fenced — the lease is
renewed right before the write's ledger entry, and a write whose lease cannot
be confirmed never runs — and once the loss is known the run commits nothing
more, so it cannot overwrite what the new owner records.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from mainspring import Agent, ErrorEvent, Message, Session, tool
from mainspring.models import ToolSpec
from mainspring.stores import InMemoryRunLock, RunLock, SQLiteRunLock, open_stores
from mainspring.testing import ScriptedCall, ScriptedModel, ScriptedResponse, check_events

pytestmark = pytest.mark.anyio

PAID: list[str] = []


def _script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse | str:
    results = sum(1 for m in messages if m.role == "tool")
    if results == 0:
        return ScriptedResponse(tool_calls=[ScriptedCall("steal_lock", {})])
    if results == 1:
        return ScriptedResponse(tool_calls=[ScriptedCall("pay", {"to": "bo"})])
    return "done"


@pytest.fixture(params=["sqlite", "memory"])
async def stores_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ms.db'}" if request.param == "sqlite" else "memory://"


async def test_a_write_after_the_lease_was_taken_never_runs_and_nothing_more_is_recorded(
    stores_url: str,
) -> None:
    stores = await open_stores(stores_url)
    assert stores.locks is not None and stores.sessions is not None
    PAID.clear()
    holder: dict[str, Session] = {}

    @tool(read_only=True)
    async def steal_lock() -> str:
        """Simulate a stall past the lease: the lock expires and another worker takes it."""
        session = holder["session"]
        assert stores.locks is not None
        await stores.locks.release(session.session_id, session.owner)
        assert await stores.locks.acquire(session.session_id, "intruder", ttl=60)
        return "ok"

    @tool
    async def pay(to: str) -> str:
        """Pay someone (an auto-approved write)."""
        PAID.append(to)
        return f"paid {to}"

    agent = Agent(model=ScriptedModel(_script), tools=[steal_lock, pay], name="fence")
    session = holder["session"] = Session(agent, **stores.session_kwargs())
    events = [event async for event in session.send("pay bo")]
    check_events(events)
    terminal = events[-1]
    assert isinstance(terminal, ErrorEvent) and terminal.code == "lease_lost"
    assert terminal.retryable
    assert PAID == []  # the write never ran
    stored = await stores.sessions.load(session.session_id)
    assert stored is not None
    assert not any(r.tool == "pay" for r in stored.writes.values())  # no ledger entry
    # Nothing after the loss went on record: the new owner's view is not overwritten.
    assert all("paid" not in m.text for m in stored.messages)
    assert await stores.locks.holder(session.session_id) == "intruder"  # never released by us
    await stores.aclose()


async def test_a_lease_lost_while_a_read_runs_stops_the_run_with_lease_lost(
    stores_url: str,
) -> None:
    stores = await open_stores(stores_url)
    assert stores.locks is not None and stores.sessions is not None
    holder: dict[str, Session] = {}
    finished: list[str] = []

    @tool(read_only=True)
    async def steal_lock() -> str:
        """The lease expires and another worker takes the session while this read runs."""
        session = holder["session"]
        assert stores.locks is not None
        await stores.locks.release(session.session_id, session.owner)
        assert await stores.locks.acquire(session.session_id, "intruder", ttl=60)
        await anyio.sleep(30)  # cancelled once the renewal finds the lease gone
        finished.append("read")
        return "ok"

    agent = Agent(model=ScriptedModel(_script), tools=[steal_lock], name="fence")
    session = holder["session"] = Session(agent, **stores.session_kwargs(), lock_ttl=0.3)
    with anyio.fail_after(60):  # (only a hang)
        events = [event async for event in session.send("go")]
    check_events(events)
    terminal = events[-1]
    assert isinstance(terminal, ErrorEvent) and terminal.code == "lease_lost"
    assert finished == []
    stored = await stores.sessions.load(session.session_id)
    assert stored is not None and stored.active_stream is not None  # the new owner's to repair
    assert await stores.locks.holder(session.session_id) == "intruder"
    assert not session.running
    await stores.aclose()


class LockClock:
    """The lock's clock, moved only by the test: a lease expires when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class WatchedLock:
    """A run lock that signals each renewal (``renewed``), so a test can wait for one."""

    def __init__(self, inner: RunLock) -> None:
        self.inner = inner
        self.renewed = anyio.Event()

    async def acquire(self, key: str, owner: str, *, ttl: float) -> bool:
        return await self.inner.acquire(key, owner, ttl=ttl)

    async def refresh(self, key: str, owner: str, *, ttl: float) -> bool:
        kept = await self.inner.refresh(key, owner, ttl=ttl)
        self.renewed.set()
        self.renewed = anyio.Event()
        return kept

    async def release(self, key: str, owner: str) -> None:
        await self.inner.release(key, owner)

    async def holder(self, key: str) -> str | None:
        return await self.inner.holder(key)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_a_run_longer_than_its_lease_keeps_renewing_it(
    stores_url: str, tmp_path: Path
) -> None:
    """The lease is renewed every third of its time to live: no other worker can take it.

    The lock's clock moves only when the test moves it, two thirds of a lease
    after each renewal the test has seen: six rounds are four lease lifetimes,
    so the lease outlives them only by its renewals — and no stall of the
    machine can expire it meanwhile.
    """
    stores = await open_stores(stores_url)
    clock = LockClock()
    inner: RunLock = (
        await SQLiteRunLock.open(tmp_path / "ms.db", clock=clock)
        if stores_url.startswith("sqlite")
        else InMemoryRunLock(clock=clock)
    )
    lock = WatchedLock(inner)
    holder: dict[str, Session] = {}
    taken: list[bool] = []

    @tool(read_only=True)
    async def slow_read() -> str:
        """Outlast the lease several times over, trying to take the session meanwhile."""
        session = holder["session"]
        for _ in range(6):
            await lock.renewed.wait()
            clock.now += 0.2
            taken.append(await lock.acquire(session.session_id, "intruder", ttl=60))
        return "read"

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse | str:
        if not any(m.role == "tool" for m in messages):
            return ScriptedResponse(tool_calls=[ScriptedCall("slow_read", {})])
        return "done"

    agent = Agent(model=ScriptedModel(script), tools=[slow_read], name="renew")
    session = holder["session"] = Session(
        agent,
        session_store=stores.sessions,
        checkpoint_store=stores.checkpoints,
        run_lock=lock,
        lock_ttl=0.3,
    )
    with anyio.fail_after(60):  # (only a hang: nothing here waits on the clock)
        events = [event async for event in session.send("go")]
    check_events(events)
    assert events[-1].type == "turn_complete"
    assert taken == [False] * 6  # held all along (1.2 s on the lock's clock, four lifetimes)
    assert await lock.holder(session.session_id) is None  # released at the end
    await lock.aclose()
    await stores.aclose()
