"""The journal's commits: what a failed or cancelled commit took goes with the next one.

A consumer commits the run's events as it takes them, in its own task; the run
commits its ledger entries in its own. Commits queue on one lock, and each takes
everything pending. When the consumer's commit is cancelled while the database
holds it (the client went away), the ledger entry it took must go with the
run's next commit: the run awaits that commit before its write runs, and
believes the entry on record when it returns.
"""

from __future__ import annotations

import anyio
import pytest

from mainspring._lowlevel.relay import Relay
from mainspring._run.journal import Journal
from mainspring.events import Event, TextDelta
from mainspring.state import SessionState, WriteRecord
from mainspring.stores.base import CheckpointStore, Commit

pytestmark = pytest.mark.anyio


class GatedStore:
    """A store committing a step in one transaction, each commit held until let go."""

    def __init__(self) -> None:
        self.gates: list[anyio.Event] = []
        self.done: list[Commit] = []

    def joins(self, checkpoints: CheckpointStore | None) -> bool:
        return True

    async def commit(self, commit: Commit, checkpoints: CheckpointStore | None) -> None:
        gate = anyio.Event()
        self.gates.append(gate)
        await gate.wait()
        self.done.append(commit)

    # (the SessionStore side the journal never calls on a joint store)
    async def load(self, session_id: str) -> SessionState | None:
        raise NotImplementedError  # pragma: no cover

    async def save(self, state: SessionState) -> None:
        raise NotImplementedError  # pragma: no cover

    async def record_write(self, session_id: str, record: WriteRecord) -> None:
        raise NotImplementedError  # pragma: no cover


async def test_a_cancelled_consumer_commit_leaves_its_ledger_entry_for_the_next() -> None:
    store = GatedStore()
    relay: Relay[Event] = Relay()
    journal = Journal(
        state=SessionState(session_id="s", agent_name="a"),
        sessions=store,  # type: ignore[arg-type]  # (a joint store: its commit is all it uses)
        checkpoints=object(),  # type: ignore[arg-type]  # a stand-in the journal does not touch in this test
        stream_id="stream",
        relay=relay,
        outbox=Relay(),
    )
    record = WriteRecord(key="call_1", tool="pay", status="started")
    saved = anyio.Event()

    async def write_started() -> None:
        await journal.record_write(record)  # what the run awaits before the write runs
        saved.set()

    consumer = anyio.CancelScope()
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(journal.save)  # the run's first commit, held by the database
            await anyio.wait_all_tasks_blocked()
            relay.put(TextDelta(text="hi"))
            tg.start_soon(_take, journal, consumer)  # queues on the lock first
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(write_started)  # queues second, its entry pending
            await anyio.wait_all_tasks_blocked()
            assert len(store.gates) == 1
            store.gates[0].set()  # the first commit ends: the consumer's takes it all
            await anyio.wait_all_tasks_blocked()
            assert len(store.gates) == 2
            consumer.cancel()  # the client goes away while the database holds it
            await anyio.wait_all_tasks_blocked()
            assert len(store.gates) == 3 and not saved.is_set()
            store.gates[2].set()
    assert saved.is_set()
    on_record = [w for c in store.done for w in c.writes]
    assert on_record == [record]  # the run's commit carried the entry the consumer had taken
    events = [e for c in store.done for e in c.events]
    assert events == [TextDelta(text="hi")]  # and the event it had taken


async def _take(journal: Journal, scope: anyio.CancelScope) -> None:
    with scope:
        await journal.take()


async def test_put_many_queues_like_puts_and_wakes_a_waiting_consumer() -> None:
    relay: Relay[int] = Relay()
    got: list[bool] = []

    async def consume() -> None:
        got.append(await relay.wait())

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await anyio.wait_all_tasks_blocked()
        relay.put_many([1, 2])
    relay.put(3)
    assert got == [True] and relay.drain() == [1, 2, 3]
    relay.close()
    relay.put_many([4])  # dropped once closed, as a put is
    assert relay.drain() == []
