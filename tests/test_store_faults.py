"""A store that fails mid-run ends the stream with exactly one typed ``error`` event.

Never a silent end, never an exception out of ``async for``, never a session
left marked running; once the store is back, a new process continues the
session. Each fault is injected at a chosen operation of a real in-memory
store (the model is the only mock).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mainspring import (
    Agent,
    Approve,
    ErrorEvent,
    Event,
    PendingAction,
    Reject,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    TurnComplete,
    tool,
)
from mainspring.errors import DecisionConflict, StoreError
from mainspring.messages import Message
from mainspring.state import SessionState, WriteRecord
from mainspring.stores import (
    CheckpointStore,
    Commit,
    InMemoryCheckpointStore,
    InMemoryRunLock,
    InMemorySessionStore,
)
from tests.helpers import collect

pytestmark = pytest.mark.anyio


class Faults:
    """Counts store operations; the ``fail_at``-th one raises (``None``: never).

    ``also`` names more operation numbers that fail (a process that dies fails
    every later save too).
    """

    def __init__(self, fail_at: int | None = None, *, also: tuple[int, ...] = ()) -> None:
        self.fail_at = fail_at
        self.also = also
        self.count = 0

    def tick(self, what: str) -> None:
        self.count += 1
        if self.count == self.fail_at or self.count in self.also:
            raise StoreError(f"injected failure at store operation {self.count} ({what})")


class FlakySessions(InMemorySessionStore):
    def __init__(self, faults: Faults) -> None:
        super().__init__()
        self.faults = faults

    async def save(self, state: SessionState) -> None:
        self.faults.tick("save")
        await super().save(state)

    async def record_write(self, session_id: str, record: WriteRecord) -> None:
        self.faults.tick("record_write")
        await super().record_write(session_id, record)

    async def commit(self, commit: Commit, checkpoints: CheckpointStore | None) -> None:
        self.faults.tick("commit")  # a run's step boundary: one transaction, all or nothing
        await super().commit(commit, checkpoints)


class FlakyCheckpoints(InMemoryCheckpointStore):
    def __init__(self, faults: Faults) -> None:
        super().__init__()
        self.faults = faults

    async def append_many(self, stream_id: str, events: Sequence[Event]) -> None:
        self.faults.tick("append_many")
        await super().append_many(stream_id, events)


class StoppedClock:
    """The lock's clock: it moves only when the test moves it, so no lease runs
    out because the machine is slow."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FlakyLock(InMemoryRunLock):
    def __init__(self, faults: Faults) -> None:
        self.clock = StoppedClock()
        super().__init__(clock=self.clock)
        self.faults = faults

    async def release(self, key: str, owner: str) -> None:
        self.faults.tick("release")
        await super().release(key, owner)


paid: list[str] = []


@tool(read_only=True)
def balance() -> str:
    """The balance."""
    return "$100"


@tool
def pay(to: str) -> str:
    """Pay (auto tier)."""
    paid.append(to)
    return f"paid {to}"


def agent() -> Agent:
    script: list[ScriptedResponse | str] = [
        ScriptedResponse(text="Checking. ", tool_calls=[ScriptedCall("balance", {})]),
        ScriptedResponse(tool_calls=[ScriptedCall("pay", {"to": "bob"})]),
        "Done.",
    ]
    return Agent(model=ScriptedModel(script), tools=[balance, pay])


async def run_once(fail_at: int | None) -> tuple[list[Event], Session, FlakySessions]:
    faults = Faults(fail_at)
    sessions = FlakySessions(faults)
    session = Session(
        agent(),
        session_store=sessions,
        checkpoint_store=FlakyCheckpoints(faults),
        run_lock=FlakyLock(faults),
        lock_ttl=5,
    )
    events = await collect(session.send("pay bob"))  # exactly one terminal, last
    return events, session, sessions


async def test_without_faults_the_run_completes_and_counts_its_store_operations() -> None:
    events, _, _ = await run_once(None)
    assert isinstance(events[-1], TurnComplete) and events[-1].stop_reason == "end_turn"


OPERATIONS = 12  # more than the run makes: the last points fail after the terminal


@settings(max_examples=OPERATIONS, derandomize=True)
@given(fail_at=st.integers(min_value=1, max_value=OPERATIONS))
async def test_a_store_failing_at_any_operation_ends_with_one_typed_error(fail_at: int) -> None:
    paid.clear()
    events, session, sessions = await run_once(fail_at)
    last = events[-1]
    assert isinstance(last, ErrorEvent | TurnComplete)
    if isinstance(last, ErrorEvent):
        assert last.code == "store_error" and last.retryable
        assert "injected failure" in last.message
    assert not session.running  # never left marked running
    assert len(paid) <= 1  # the write ran at most once
    # The store is back: a new process continues the session.
    sessions.faults.fail_at = None
    stored = await sessions.load(session.session_id)
    if stored is None:  # the failure came before anything was saved
        return
    later = await Session.load(agent(), sessions, session.session_id)
    more = await collect(later.send("and now?"))
    assert isinstance(more[-1], TurnComplete | PendingAction | ErrorEvent)
    assert not later.running
    assert len(paid) <= 2


async def test_a_failing_lock_release_does_not_leave_the_session_running() -> None:
    faults = Faults()
    lock = FlakyLock(faults)
    session = Session(agent(), run_lock=lock, lock_ttl=5, when_busy="wait")
    faults.fail_at = 1  # the first release fails
    events = await collect(session.send("pay bob"))
    assert isinstance(events[-1], TurnComplete)
    assert not session.running
    assert await lock.holder(session.session_id) == session.owner  # the stale lease
    # Its own stale lease does not hold the session's next run back (re-entrant).
    again = await collect(session.send("again"))
    assert isinstance(again[-1], TurnComplete | ErrorEvent)


class UnreadableSessions(InMemorySessionStore):
    """A session store whose every load fails (its database went away)."""

    async def load(self, session_id: str) -> SessionState | None:
        raise StoreError("the session store is unreachable")


async def test_a_run_that_cannot_load_its_stored_state_drops_the_lease_it_took() -> None:
    lock = InMemoryRunLock()
    session = Session(
        agent(), session_id="named", session_store=UnreadableSessions(), run_lock=lock
    )
    with pytest.raises(StoreError, match="unreachable"):
        await collect(session.send("pay bob"))  # named, not loaded: its run reads the store
    assert not session.running
    assert await lock.holder("named") is None  # another worker may take the session now
    assert session.messages == ()  # nothing ran


@tool(permission="confirm")
def transfer(to: str) -> str:
    """Transfer."""
    paid.append(f"transfer:{to}")
    return "sent"


def transfer_agent() -> Agent:
    """The same agent in every process: the model answers from the transcript."""

    def answer(messages: Sequence[Message], tools: object) -> ScriptedResponse | str:
        if messages[-1].role == "tool":
            return "ok"
        return ScriptedResponse(tool_calls=[ScriptedCall("transfer", {"to": "x"})])

    return Agent(model=ScriptedModel(answer), tools=[transfer])


@pytest.mark.parametrize("dies", [False, True], ids=["store-blip", "process-dies"])
async def test_a_claimed_decision_that_was_not_consumed_can_be_posted_again(dies: bool) -> None:
    """Deciding is one durable step: a claim without its consumption never strands the turn."""
    paid.clear()
    faults = Faults()
    sessions = FlakySessions(faults)
    session = Session(transfer_agent(), session_store=sessions)
    events = await collect(session.send("send"))
    pending = events[-2]
    assert isinstance(pending, PendingAction)
    # The save that consumes the claimed decision fails (and, when the process
    # "dies", every save after it: nothing more reaches the store).
    consume = faults.count + 1
    faults.fail_at, faults.also = consume, tuple(range(consume + 1, consume + 50)) if dies else ()
    failed = await collect(session.resume(pending.attempt_id, Approve()))
    assert isinstance(failed[-1], ErrorEvent) and failed[-1].code == "store_error"
    assert not session.running and paid == []
    faults.fail_at, faults.also = None, ()
    if dies:
        loaded = await sessions.load(session.session_id)
        assert loaded is not None and loaded.pending is not None  # still paused, and claimed
        assert pending.attempt_id in loaded.decided
        session = Session(transfer_agent(), state=loaded, session_store=sessions)
        with pytest.raises(DecisionConflict):  # another decision than the claimed one
            session.resume(pending.attempt_id, Reject("changed my mind"))
    assert session.pending is not None
    done = await collect(session.resume(pending.attempt_id, Approve()))  # the same decision
    assert isinstance(done[-1], TurnComplete) and done[-1].stop_reason == "end_turn"
    assert paid == ["transfer:x"]  # ran once
    with pytest.raises(DecisionConflict):
        session.resume(pending.attempt_id, Approve())  # consumed now: never twice
