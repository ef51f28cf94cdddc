"""Property: the safety contracts hold through faults, cancellations and duplicate decisions.

Random tool mixes and provider ids (as ``test_loop_properties``), and on top:

- a store that fails at a random operation — from then on the "process" is
  dead (every later operation of it fails too) and a new process takes over,
  loading the session from what was committed;
- a cancellation after a random number of events the client has seen;
- every decision posted twice at once, from two workers on the same store.

Whatever happens: no confirm-tier write runs before its approval, and a
rejected one never; every write runs at most once; each stream ends with
exactly one terminal event; and a new process can always continue the
session to a normal end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio
import anyio.lowlevel
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mainspring import (
    Agent,
    Approve,
    ClientResult,
    Event,
    Limits,
    Reject,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    client_tool,
    tool,
)
from mainspring.decisions import Decision
from mainspring.errors import DecisionConflict, SessionBusy, StoreError
from mainspring.events import TERMINAL_EVENT_TYPES, PendingAction
from mainspring.messages import Message
from mainspring.state import SessionState, WriteRecord
from mainspring.stores import (
    CheckpointStore,
    Commit,
    InMemoryCheckpointStore,
    InMemorySessionStore,
)
from mainspring.tools import Tool

pytestmark = pytest.mark.slow

TOOL_KINDS = ["read", "auto_write", "confirm_write", "client_sign"]


class Process:
    """One worker's view of the stores: its operations fail from ``dies_at`` on."""

    def __init__(self, dies_at: int | None) -> None:
        self.dies_at = dies_at
        self.ops = 0

    def tick(self) -> None:
        self.ops += 1
        if self.dies_at is not None and self.ops >= self.dies_at:
            raise StoreError(f"injected: the process died at store operation {self.dies_at}")


class Sessions(InMemorySessionStore):
    """A worker's handle on the shared session data (``shared``)."""

    def __init__(self, shared: InMemorySessionStore, process: Process) -> None:
        super().__init__()
        # One set of dicts for every worker: what one commits, the others load.
        self._states = shared._states
        self._transcripts = shared._transcripts
        self._decisions = shared._decisions
        self._writes = shared._writes
        self._spend = shared._spend
        self.process = process

    async def save(self, state: SessionState) -> None:
        self.process.tick()
        await super().save(state)

    async def commit(self, commit: Commit, checkpoints: CheckpointStore | None) -> None:
        self.process.tick()
        await super().commit(commit, checkpoints)

    async def record_write(self, session_id: str, record: WriteRecord) -> None:
        self.process.tick()
        await super().record_write(session_id, record)

    async def claim_decision(self, session_id: str, attempt_id: str, decision: str) -> bool:
        self.process.tick()
        return await super().claim_decision(session_id, attempt_id, decision)


@dataclass
class World:
    steps: list[list[str]]
    log: list[tuple[str, str]] = field(default_factory=list)  # (tool, tag) as each started
    approved: set[str] = field(default_factory=set)
    rejected: set[str] = field(default_factory=set)

    def answer(self, messages: Sequence[Message], tools: object) -> ScriptedResponse | str:
        """The model, from the transcript: the next step of the "go" turn, else a word."""
        start = max(i for i, m in enumerate(messages) if m.role == "user")
        if messages[start].text != "go":
            return "ok"
        done = sum(1 for m in messages[start:] if m.role == "assistant" and m.tool_calls)
        if done >= len(self.steps):
            return "finished"
        calls = [
            ScriptedCall(kind, {"tag": f"s{done}c{j}"}, id="same" if j % 2 else None)
            for j, kind in enumerate(self.steps[done])
        ]
        return ScriptedResponse(tool_calls=calls)

    def agent(self) -> Agent:
        world = self

        @tool(read_only=True)
        async def read(tag: str) -> str:
            """A read."""
            await anyio.lowlevel.checkpoint()
            return "r"

        @tool
        async def auto_write(tag: str) -> str:
            """An auto-tier write."""
            world.log.append(("auto_write", tag))
            await anyio.lowlevel.checkpoint()
            return "w"

        @tool(permission="confirm")
        async def confirm_write(tag: str) -> str:
            """A confirm-tier write."""
            assert tag in world.approved, f"{tag} ran before its approval"
            assert tag not in world.rejected, f"{tag} ran after a rejection"
            world.log.append(("confirm_write", tag))
            await anyio.lowlevel.checkpoint()
            return "c"

        sign = client_tool(
            "client_sign",
            description="Signed by the client.",
            input_schema={"type": "object", "properties": {"tag": {"type": "string"}}},
        )
        tools: list[Tool] = [read, auto_write, confirm_write, sign]
        return Agent(model=ScriptedModel(world.answer), tools=tools, limits=Limits(max_steps=40))


def check_stream(events: list[Event]) -> None:
    terminals = [e for e in events if e.type in TERMINAL_EVENT_TYPES]
    assert len(terminals) == 1 and events[-1] is terminals[0], [e.type for e in events]


async def consume(stream: object, cancel_after: int | None, session: Session) -> list[Event]:
    events: list[Event] = []
    async for event in stream:  # type: ignore[attr-defined]  # a send or a resume stream: both async iterate events
        events.append(event)
        if cancel_after is not None and len(events) == cancel_after:
            session.cancel()
    check_stream(events)
    return events


def decision_for(world: World, pending: PendingAction, choice: str) -> Decision:
    tag = str(pending.input["tag"])
    if pending.client_executed:
        return ClientResult("signed", is_error=choice == "reject")
    if choice == "reject":
        world.rejected.add(tag)
        return Reject("no")
    world.approved.add(tag)
    return Approve()


async def decide_twice(
    world: World,
    shared: InMemorySessionStore,
    checkpoints: InMemoryCheckpointStore,
    sid: str,
    choice: str,
) -> None:
    """Two healthy workers post the same decision at once: it applies once."""
    one = await Session.load(
        world.agent(), Sessions(shared, Process(None)), sid, checkpoint_store=checkpoints
    )
    two = await Session.load(
        world.agent(), Sessions(shared, Process(None)), sid, checkpoint_store=checkpoints
    )
    pending = one.pending
    assert pending is not None and two.pending == pending
    decision = decision_for(world, pending, choice)
    outcomes: list[str] = []

    async def post(session: Session) -> None:
        try:
            await consume(session.resume(pending.attempt_id, decision), None, session)
            outcomes.append("applied")
        except (DecisionConflict, SessionBusy):
            outcomes.append("refused")

    async with anyio.create_task_group() as tg:
        tg.start_soon(post, one)
        tg.start_soon(post, two)
    assert outcomes.count("applied") == 1, outcomes


async def scenario(
    steps: list[list[str]], choices: list[str], dies_at: int | None, cancel_after: int | None
) -> None:
    world = World(steps)
    shared = InMemorySessionStore()
    checkpoints = InMemoryCheckpointStore()
    first = Session(
        world.agent(),
        session_store=Sessions(shared, Process(dies_at)),
        checkpoint_store=checkpoints,
    )
    sid = first.session_id
    await consume(first.send("go"), cancel_after, first)  # may end in an error or a cancel
    if first.pending is not None and dies_at is None:
        # The same process goes on while it is healthy: one decision, maybe cancelled.
        pending = first.pending
        decision = decision_for(world, pending, choices[0])
        await consume(first.resume(pending.attempt_id, decision), cancel_after, first)
    # A new process takes over from whatever was committed.
    if await shared.load(sid) is None:
        return  # it died before anything reached the store: nothing to continue
    pauses = 0
    while True:
        later = await Session.load(
            world.agent(), Sessions(shared, Process(None)), sid, checkpoint_store=checkpoints
        )
        if later.pending is None:
            break
        await decide_twice(world, shared, checkpoints, sid, choices[pauses % len(choices)])
        pauses += 1
        assert pauses < 40
    final = await consume(later.send("and now?"), None, later)
    assert final[-1].type == "turn_complete" and final[-1].stop_reason == "end_turn"
    # Every write ran at most once, whatever was cut where.
    tags = [tag for _name, tag in world.log]
    assert len(tags) == len(set(tags)), tags
    assert not any(name == "client_sign" for name, _ in world.log)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.lists(st.sampled_from(TOOL_KINDS), min_size=1, max_size=3), min_size=1, max_size=3
    ),
    choices=st.lists(st.sampled_from(["approve", "reject"]), min_size=1, max_size=4),
    dies_at=st.none() | st.integers(min_value=1, max_value=14),
    cancel_after=st.none() | st.integers(min_value=1, max_value=25),
    backend=st.sampled_from(["asyncio", "trio"]),
)
def test_contracts_hold_through_faults_cancellations_and_duplicate_decisions(
    steps: list[list[str]],
    choices: list[str],
    dies_at: int | None,
    cancel_after: int | None,
    backend: str,
) -> None:
    anyio.run(scenario, steps, choices, dies_at, cancel_after, backend=backend)
