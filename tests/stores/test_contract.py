"""The contract every store implementation keeps (run against every backend)."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mainspring.errors import StoreError
from mainspring.events import Event, PendingAction, TextDelta
from mainspring.messages import Message, ToolCallPart, ToolResultPart
from mainspring.state import Call, SessionState, Turn, WriteRecord
from mainspring.stores import (
    CheckpointStore,
    InMemoryCheckpointStore,
    RunLock,
    SessionStore,
    SpendHolds,
    SpendLedger,
    TailLoad,
    load_after,
)
from mainspring.usage import Usage
from tests import strategies

pytestmark = pytest.mark.anyio


# ------------------------------------------------------------- checkpoints


async def test_checkpoint_round_trips_every_event_type_in_order(
    checkpoint_store: CheckpointStore,
) -> None:
    events = list(strategies.ONE_OF_EACH_EVENT)
    for event in events:
        await checkpoint_store.append("s1", event)
    assert await checkpoint_store.load("s1") == events


async def test_checkpoint_streams_are_isolated_and_clearable(
    checkpoint_store: CheckpointStore,
) -> None:
    await checkpoint_store.append("a", TextDelta(text="for a"))
    await checkpoint_store.append("b", TextDelta(text="for b ✓ 日本"))
    assert await checkpoint_store.load("a") == [TextDelta(text="for a")]
    assert await checkpoint_store.load("b") == [TextDelta(text="for b ✓ 日本")]
    assert await checkpoint_store.load("unknown") == []
    await checkpoint_store.clear("a")
    assert await checkpoint_store.load("a") == []
    assert await checkpoint_store.load("b") == [TextDelta(text="for b ✓ 日本")]


async def test_checkpoint_appends_from_concurrent_tasks_are_all_kept(
    checkpoint_store: CheckpointStore,
) -> None:
    async def writer(n: int) -> None:
        for i in range(20):
            await checkpoint_store.append("s", TextDelta(text=f"{n}:{i}"))

    async with anyio.create_task_group() as tg:
        for n in range(4):
            tg.start_soon(writer, n)
    loaded = await checkpoint_store.load("s")
    texts = [e.text for e in loaded if isinstance(e, TextDelta)]
    assert sorted(texts) == sorted(f"{n}:{i}" for n in range(4) for i in range(20))
    for n in range(4):  # each writer's own order is kept
        mine = [t for t in texts if t.startswith(f"{n}:")]
        assert mine == [f"{n}:{i}" for i in range(20)]


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(events=st.lists(strategies.events, max_size=8))
async def test_checkpoint_round_trips_random_events(
    checkpoint_store: CheckpointStore, events: list[Event]
) -> None:
    await checkpoint_store.clear("h")
    for event in events:
        await checkpoint_store.append("h", event)
    assert await checkpoint_store.load("h") == events


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    batches=st.lists(st.lists(strategies.events, min_size=1, max_size=4), max_size=5),
    cursors=st.lists(st.integers(min_value=0, max_value=20), min_size=1, max_size=6),
)
async def test_load_after_is_the_log_from_the_cursor_on(
    checkpoint_store: CheckpointStore, batches: list[list[Event]], cursors: list[int]
) -> None:
    """``load_after(s, k) == load(s)[k:]`` for any k: 0, inside a batch, past the end."""
    await checkpoint_store.clear("h")
    for batch in batches:  # a batch appended at once is several positions
        await checkpoint_store.append_many("h", batch)
    log = await checkpoint_store.load("h")
    assert log == [event for batch in batches for event in batch]
    assert isinstance(checkpoint_store, TailLoad)
    for k in [0, len(log), len(log) + 1, *cursors]:
        assert await checkpoint_store.load_after("h", k) == log[k:]
        assert await load_after(checkpoint_store, "h", k) == log[k:]
    assert await checkpoint_store.load_after("never-written", 0) == []


@pytest.mark.parametrize("cursor", [-1, -5, 1.0, True, "0"])
async def test_load_after_refuses_a_cursor_that_is_not_a_position(
    checkpoint_store: CheckpointStore, cursor: object
) -> None:
    await checkpoint_store.append("s", TextDelta(text="kept"))
    assert isinstance(checkpoint_store, TailLoad)
    with pytest.raises(ValueError, match="a log cursor is an int of 0 or more"):
        await checkpoint_store.load_after("s", cursor)  # type: ignore[arg-type]  # a bad cursor on purpose
    with pytest.raises(ValueError, match="a log cursor is an int of 0 or more"):
        await load_after(checkpoint_store, "s", cursor)  # type: ignore[arg-type]  # a bad cursor on purpose
    assert await checkpoint_store.load("s") == [TextDelta(text="kept")]


async def test_a_follower_reads_only_what_another_client_appended(
    checkpoint_stores: tuple[CheckpointStore, CheckpointStore],
) -> None:
    """One client appends batches; another, told of each, reads exactly the new events."""
    appender, follower = checkpoint_stores
    sent, received = anyio.create_memory_object_stream[int]()
    read, acked = anyio.create_memory_object_stream[None]()
    batches = [[TextDelta(text=f"{i}.{j}") for j in range(i % 3 + 1)] for i in range(12)]

    async def append() -> None:
        async with sent, acked:
            for batch in batches:
                await appender.append_many("live", batch)
                await sent.send(len(batch))
                await acked.receive()  # the follower read it: the next batch is new

    seen: list[Event] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(append)
        async with received, read:
            async for count in received:
                new = await load_after(follower, "live", len(seen))
                assert len(new) == count  # only what was appended since the last read
                seen.extend(new)
                await read.send(None)
    assert seen == [event for batch in batches for event in batch]
    assert await follower.load("live") == seen
    assert await load_after(follower, "live", len(seen)) == []


async def test_a_log_cleared_and_written_anew_is_read_anew_by_a_follower(
    checkpoint_stores: tuple[CheckpointStore, CheckpointStore],
) -> None:
    appender, follower = checkpoint_stores
    await appender.append_many("s", [TextDelta(text="a"), TextDelta(text="b")])
    await appender.append_many("s", [TextDelta(text="c")])
    assert await load_after(follower, "s", 2) == [TextDelta(text="c")]
    await appender.clear("s")
    assert await load_after(follower, "s", 2) == []
    await appender.append_many("s", [TextDelta(text="x")])
    await appender.append_many("s", [TextDelta(text="y"), TextDelta(text="z")])
    assert await load_after(follower, "s", 1) == [TextDelta(text="y"), TextDelta(text="z")]
    assert await load_after(follower, "s", 0) == await follower.load("s")
    assert await follower.load("s") == [TextDelta(text=t) for t in "xyz"]


class _Minimal:
    """A third-party checkpoint store written before ``load_after``: only the protocol."""

    def __init__(self) -> None:
        self.inner = InMemoryCheckpointStore()
        self.loads = 0

    async def append(self, stream_id: str, event: Event) -> None:
        await self.inner.append(stream_id, event)

    async def append_many(self, stream_id: str, events: Sequence[Event]) -> None:
        await self.inner.append_many(stream_id, events)

    async def load(self, stream_id: str) -> list[Event]:
        self.loads += 1
        return await self.inner.load(stream_id)

    async def clear(self, stream_id: str) -> None:
        await self.inner.clear(stream_id)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_a_store_without_load_after_is_read_by_slicing_its_load() -> None:
    store = _Minimal()
    assert not isinstance(store, TailLoad)
    events = [TextDelta(text=str(i)) for i in range(5)]
    await store.append_many("s", events)
    for k in range(7):
        assert await load_after(store, "s", k) == events[k:]
    assert store.loads == 7
    with pytest.raises(ValueError, match="a log cursor is an int of 0 or more"):
        await load_after(store, "s", -1)
    assert store.loads == 7


# ---------------------------------------------------------------- sessions


def paused_state(session_id: str = "sess-1") -> SessionState:
    call = ToolCallPart(id="c1", name="pay", arguments={"amount": 5})
    pending = PendingAction(
        attempt_id="att-1",
        tool_use_id="c1",
        turn_index=1,
        name="pay",
        input={"amount": 5},
        description="Pay.",
    )
    return SessionState(
        session_id=session_id,
        agent_name="wallet",
        messages=[Message.user("pay 5 ✓"), Message(role="assistant", parts=(call,))],
        turn_index=1,
        usage=Usage(input_tokens=10, output_tokens=3, requests=1),
        cost_usd=0.25,
        auto_spent_usd=1.5,
        turn=Turn(
            index=1,
            status="paused",
            steps=1,
            calls=[Call(id="c1", index=0, name="pay", input={"amount": 5})],
            position=0,
            pending=pending,
        ),
        active_stream=None,
    )


async def test_session_round_trip(session_store: SessionStore) -> None:
    state = paused_state()
    await session_store.save(state)
    assert await session_store.load("sess-1") == state
    assert await session_store.load("nobody") is None


async def test_session_saves_appended_messages_and_a_shorter_transcript(
    session_store: SessionStore,
) -> None:
    state = paused_state()
    await session_store.save(state)
    result = ToolResultPart(tool_use_id="c1", name="pay", content="paid")
    state.messages.append(Message.tool_results([result]))
    state.messages.append(Message.assistant("done"))
    state.turn = None
    await session_store.save(state)
    loaded = await session_store.load("sess-1")
    assert loaded == state
    state.messages = state.messages[:1]  # a host may rewrite history
    await session_store.save(state)
    loaded = await session_store.load("sess-1")
    assert loaded is not None and loaded.messages == state.messages


_EDITS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(strategies.messages, min_size=1, max_size=3)),
        st.tuples(st.just("cut"), st.integers(min_value=0, max_value=6)),
        st.tuples(st.just("replace"), strategies.messages),
        st.tuples(st.just("rewrite"), st.tuples(st.integers(0, 6), strategies.messages)),
    ),
    max_size=6,
)


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(edits=_EDITS)
async def test_every_save_of_an_edited_transcript_loads_back_as_saved(
    session_stores: tuple[SessionStore, SessionStore],
    edits: list[tuple[str, int | list[Message] | Message | tuple[int, Message]]],
) -> None:
    # Saves write only what the store lacks: after appends, a cut history, the
    # last message replaced, an earlier one rewritten (the last one unchanged),
    # the same list mutated after a save, saves by two workers in turn, each
    # load gives exactly the transcript last saved.
    one, two = session_stores
    state = SessionState(session_id="edited", agent_name="a", messages=[Message.user("hi")])
    await one.save(state)
    for i, edit in enumerate(edits):
        if edit[0] == "append":
            assert isinstance(edit[1], list)
            state.messages.extend(edit[1])
        elif edit[0] == "cut":
            assert isinstance(edit[1], int)
            del state.messages[edit[1] :]
        elif edit[0] == "rewrite":
            assert isinstance(edit[1], tuple)
            index, message = edit[1]
            if index < len(state.messages):
                state.messages[index] = message
        elif state.messages:
            assert isinstance(edit[1], Message)
            state.messages[-1] = edit[1]
        saver = one if i % 3 else two
        await saver.save(state)
        for store in (one, two):
            loaded = await store.load("edited")
            assert loaded is not None and loaded.messages == state.messages
    await one.delete("edited")


async def test_an_earlier_message_rewritten_is_stored_though_the_last_is_unchanged(
    session_stores: tuple[SessionStore, SessionStore],
) -> None:
    one, two = session_stores
    messages = [Message.user("pay Ann 10"), Message.assistant("paid"), Message.user("thanks")]
    state = SessionState(session_id="mid-edit", agent_name="a", messages=messages)
    await one.save(state)
    for saver in (one, two):  # the worker that saved, and one that knows nothing of it
        state.messages[1] = Message.assistant(f"refunded ({saver is one})")
        await saver.save(state)
        for store in (one, two):
            loaded = await store.load("mid-edit")
            assert loaded is not None and loaded.messages == state.messages


async def test_a_new_message_that_cannot_be_stored_changes_nothing(
    session_store: SessionStore,
) -> None:
    state = SessionState(session_id="bad-msg", agent_name="a", messages=[Message.user("one")])
    await session_store.save(state)
    state.messages.append(Message.user("two"))
    state.messages.append(Message(role="user", parts=(object(),)))  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
    state.turn_index = 7
    with pytest.raises((StoreError, TypeError, ValueError)):
        await session_store.save(state)
    loaded = await session_store.load("bad-msg")
    assert loaded is not None and loaded.messages == [Message.user("one")]
    assert loaded.turn_index == 0
    del state.messages[-1]
    await session_store.save(state)
    loaded = await session_store.load("bad-msg")
    assert loaded is not None and loaded.messages == state.messages and loaded.turn_index == 7


async def test_a_decision_is_claimed_once_across_workers(
    session_stores: tuple[SessionStore, SessionStore],
) -> None:
    one, two = session_stores
    await one.save(paused_state())
    results: list[bool] = []

    async def claim(store: SessionStore, decision: str) -> None:
        results.append(await store.claim_decision("sess-1", "att-1", decision))

    async with anyio.create_task_group() as tg:
        for i in range(6):
            tg.start_soon(claim, one if i % 2 else two, f"approved-{i}")
    assert sorted(results) == [False] * 5 + [True]
    loaded = await two.load("sess-1")
    assert loaded is not None and set(loaded.decided) == {"att-1"}


async def test_saving_a_stale_state_never_loses_a_claim_or_ledger_entry(
    session_stores: tuple[SessionStore, SessionStore],
) -> None:
    one, two = session_stores
    stale = paused_state()
    await one.save(stale)
    assert await two.claim_decision("sess-1", "att-1", "approved")
    record = WriteRecord(key="1:c1", tool="pay", status="started", attempt_id="att-1")
    await two.record_write("sess-1", record)
    await one.save(stale)  # a worker that never saw the claim saves its copy
    loaded = await one.load("sess-1")
    assert loaded is not None
    assert loaded.decided == {"att-1": "approved"}
    assert loaded.writes == {"1:c1": record}
    assert not await one.claim_decision("sess-1", "att-1", "rejected")


async def test_a_stale_save_never_moves_a_write_back(
    session_stores: tuple[SessionStore, SessionStore],
) -> None:
    one, two = session_stores
    stale = paused_state()
    stale.writes["1:c1"] = WriteRecord(key="1:c1", tool="pay", status="started")
    await one.save(stale)
    done = WriteRecord(key="1:c1", tool="pay", status="done")
    await two.record_write("sess-1", done)
    await one.save(stale)  # still thinks the write is running
    loaded = await two.load("sess-1")
    assert loaded is not None and loaded.writes["1:c1"] == done


async def test_write_ledger_entries_are_upserted(session_store: SessionStore) -> None:
    await session_store.save(paused_state())
    started = WriteRecord(key="1:c1", tool="pay", status="started", attempt_id="att-1")
    done = WriteRecord(key="1:c1", tool="pay", status="done", attempt_id="att-1")
    other = WriteRecord(key="1:c2", tool="pay", status="unknown")
    await session_store.record_write("sess-1", started)
    await session_store.record_write("sess-1", done)
    await session_store.record_write("sess-1", other)
    loaded = await session_store.load("sess-1")
    assert loaded is not None and loaded.writes == {"1:c1": done, "1:c2": other}


async def test_delete_forgets_everything(session_store: SessionStore) -> None:
    await session_store.save(paused_state())
    await session_store.claim_decision("sess-1", "att-1", "approved")
    await session_store.delete("sess-1")
    assert await session_store.load("sess-1") is None
    await session_store.save(paused_state())
    loaded = await session_store.load("sess-1")
    assert loaded is not None and loaded.decided == {}
    assert await session_store.claim_decision("sess-1", "att-1", "approved")


async def test_sessions_are_isolated(session_store: SessionStore) -> None:
    await session_store.save(paused_state("a"))
    await session_store.save(paused_state("b"))
    await session_store.claim_decision("a", "att-1", "approved")
    b = await session_store.load("b")
    assert b is not None and b.decided == {}


# ------------------------------------------------------------------- locks


async def test_one_owner_at_a_time(run_locks: tuple[RunLock, RunLock]) -> None:
    one, two = run_locks
    assert await one.acquire("sess", "w1", ttl=30)
    assert not await two.acquire("sess", "w2", ttl=30)
    assert await one.acquire("sess", "w1", ttl=30)  # re-entrant for its owner
    assert await two.holder("sess") == "w1"
    await two.release("sess", "w2")  # not the owner: no effect
    assert await one.holder("sess") == "w1"
    assert await one.refresh("sess", "w1", ttl=30)
    assert not await two.refresh("sess", "w2", ttl=30)
    await one.release("sess", "w1")
    assert await two.holder("sess") is None
    assert await two.acquire("sess", "w2", ttl=30)
    assert await one.acquire("other", "w1", ttl=30)  # keys are independent


async def test_an_expired_lease_can_be_taken(run_locks: tuple[RunLock, RunLock]) -> None:
    one, two = run_locks
    assert await one.acquire("sess", "w1", ttl=0.2)
    with anyio.fail_after(60):
        while not await two.acquire("sess", "w2", ttl=30):  # noqa: ASYNC110  # polling a lease
            await anyio.sleep(0.05)
    assert await one.holder("sess") == "w2"
    assert not await one.refresh("sess", "w1", ttl=30)


async def test_racing_acquires_have_one_winner(run_locks: tuple[RunLock, RunLock]) -> None:
    one, two = run_locks
    winners: list[str] = []

    async def take(lock: RunLock, owner: str) -> None:
        if await lock.acquire("race", owner, ttl=30):
            winners.append(owner)

    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(take, one if i % 2 else two, f"w{i}")
    assert len(winners) == 1


async def test_session_ids_lists_stored_sessions_sorted_and_bounded(
    session_store: SessionStore,
) -> None:
    for sid in ("b-2", "a-1", "c-3"):
        await session_store.save(paused_state(sid))
    assert await session_store.session_ids() == ["a-1", "b-2", "c-3"]
    assert await session_store.session_ids(limit=2) == ["a-1", "b-2"]
    await session_store.delete("b-2")
    assert await session_store.session_ids() == ["a-1", "c-3"]


async def test_session_ids_of_one_principal_only(session_store: SessionStore) -> None:
    for sid, who in (("s-1", "alice"), ("s-2", "bob"), ("s-3", "alice"), ("s-4", None)):
        state = paused_state(sid)
        state.principal = who
        await session_store.save(state)
    assert await session_store.session_ids(principal="alice") == ["s-1", "s-3"]
    assert await session_store.session_ids(principal="alice", limit=1) == ["s-1"]
    assert await session_store.session_ids(principal="carol") == []
    # A name that looks like SQL or JSON is only a name.
    assert await session_store.session_ids(principal="' OR 1=1 --") == []
    assert await session_store.session_ids() == ["s-1", "s-2", "s-3", "s-4"]
    loaded = await session_store.load("s-2")
    assert loaded is not None and loaded.principal == "bob"


# ------------------------------------------------------------- spend totals


async def test_spend_totals_add_atomically_under_a_cap(session_store: SessionStore) -> None:
    store: object = session_store
    if not isinstance(store, SpendLedger):
        pytest.skip("this store keeps no spend totals")  # a store may leave it out
    assert await store.add_spend("s", "auto", 60.0, cap=100.0) == 60.0
    assert await store.add_spend("s", "auto", 60.0, cap=100.0) is None  # refused: unchanged
    assert await store.add_spend("s", "auto", 40.0, cap=100.0) == 100.0  # up to the cap
    assert await store.add_spend("s", "cost", 1.5) == 1.5  # kinds are separate
    assert await store.add_spend("other", "auto", 10.0, cap=100.0) == 10.0  # so are sessions
    # The floor: what this worker knows was spent already (its state before the table).
    assert await store.add_spend("s", "cost", 1.0, floor=5.0) == 6.0
    assert await store.add_spend("s", "cost", 1.0, floor=2.0) == 7.0  # a lower floor is moot
    assert await store.add_spend("new", "auto", 150.0, cap=100.0) is None  # over on its own


async def test_concurrent_spend_adds_never_pass_the_cap(session_store: SessionStore) -> None:
    store: object = session_store
    if not isinstance(store, SpendLedger):
        pytest.skip("this store keeps no spend totals")
    ledger = store
    granted: list[float] = []

    async def add() -> None:
        total = await ledger.add_spend("s", "auto", 30.0, cap=100.0)
        if total is not None:
            granted.append(total)

    async with anyio.create_task_group() as tg:
        for _ in range(8):
            tg.start_soon(add)
    assert sorted(granted) == [30.0, 60.0, 90.0]


async def test_deleting_a_session_forgets_its_spend(session_store: SessionStore) -> None:
    store: object = session_store
    if not isinstance(store, SpendLedger):
        pytest.skip("this store keeps no spend totals")
    await store.add_spend("s", "auto", 60.0, cap=100.0)
    await session_store.delete("s")
    assert await store.add_spend("s", "auto", 60.0, cap=100.0) == 60.0


async def test_holds_of_writes_that_never_started_are_given_back(
    session_store: SessionStore,
) -> None:
    store: object = session_store
    if not isinstance(store, SpendHolds):
        pytest.skip("this store keeps no spend holds")
    assert await store.add_spend("s", "auto", 30.0, cap=100.0, hold="call-1") == 30.0
    assert await store.add_spend("s", "auto", 20.0, cap=100.0, hold="call-2") == 50.0
    assert await store.add_spend("s", "auto", 90.0, cap=100.0, hold="call-3") is None  # no hold
    assert await store.add_spend("s", "cost", 1.0, hold="call-2") == 1.0  # kinds are separate
    assert await store.add_spend("other", "auto", 10.0, hold="call-1") == 10.0
    # call-1 started (its ledger has an entry): it stays spent; call-2 never did.
    assert await store.release_holds("s", "auto", {"call-1"}) == 30.0
    assert await store.release_holds("s", "auto", set()) == 30.0  # settled: nothing twice
    assert await store.add_spend("s", "auto", 70.0, cap=100.0) == 100.0  # room again
    assert await store.release_holds("s", "cost", set()) == 0.0
    assert await store.release_holds("other", "auto", {"call-1"}) == 10.0  # its own holds
    assert await store.release_holds("nobody", "auto", set()) is None
    await session_store.delete("s")
    assert await store.add_spend("s", "auto", 5.0, hold="call-9") == 5.0
    assert await store.release_holds("s", "auto", set()) == 0.0
