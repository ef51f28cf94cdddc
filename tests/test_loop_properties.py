"""Property: for random tool mixes, scripts, provider ids and decisions, the contracts hold.

Provider ids are random too: each call's own, one id shared by a whole step,
none at all, or the scripted model's; the loop's ids keep the calls apart.

- no confirm-tier write runs before its approval, and a rejected one never runs;
- every write runs at most once; client-executed tools never run on the server;
- within a step, reads finish before the first write starts, and writes run
  one at a time in the model's order;
- every stream ends with exactly one terminal event (and starts with
  stream_started when checkpointed), and the transcript stays valid.
"""

from __future__ import annotations

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
    PendingAction,
    Reject,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    client_tool,
    tool,
)
from mainspring.decisions import Decision
from mainspring.events import TERMINAL_EVENT_TYPES
from mainspring.stores import InMemoryCheckpointStore
from mainspring.tools import Tool

pytestmark = pytest.mark.slow

TOOL_KINDS = ["read_a", "read_b", "auto_write", "confirm_write", "client_sign"]
WRITES = {"auto_write", "confirm_write"}


@dataclass
class World:
    log: list[tuple[str, str, str]] = field(default_factory=list)  # (phase, tool, call id)
    approved: set[str] = field(default_factory=set)
    rejected: set[str] = field(default_factory=set)

    def tools(self) -> list[Tool]:
        world = self

        @tool(read_only=True)
        async def read_a(tag: str) -> str:
            """A read."""
            world.log.append(("start", "read_a", tag))
            await anyio.lowlevel.checkpoint()
            world.log.append(("end", "read_a", tag))
            return "a"

        @tool(read_only=True)
        async def read_b(tag: str) -> str:
            """Another read."""
            world.log.append(("start", "read_b", tag))
            world.log.append(("end", "read_b", tag))
            return "b"

        @tool
        async def auto_write(tag: str) -> str:
            """An auto-tier write."""
            world.log.append(("start", "auto_write", tag))
            await anyio.lowlevel.checkpoint()
            world.log.append(("end", "auto_write", tag))
            return "w"

        @tool(permission="confirm")
        async def confirm_write(tag: str) -> str:
            """A confirm-tier write."""
            assert tag in world.approved, f"{tag} ran before its approval"
            world.log.append(("start", "confirm_write", tag))
            await anyio.lowlevel.checkpoint()
            world.log.append(("end", "confirm_write", tag))
            return "c"

        sign = client_tool(
            "client_sign",
            description="Signed by the client.",
            input_schema={"type": "object", "properties": {"tag": {"type": "string"}}},
        )
        return [read_a, read_b, auto_write, confirm_write, sign]


steps_strategy = st.lists(
    st.lists(st.sampled_from(TOOL_KINDS), min_size=1, max_size=4), min_size=1, max_size=4
)
decisions_strategy = st.lists(
    st.sampled_from(["approve", "reject", "client_ok", "client_err"]), min_size=12, max_size=12
)


def check_grammar(events: list[Event], checkpointed: bool) -> None:
    terminals = [e for e in events if e.type in TERMINAL_EVENT_TYPES]
    assert len(terminals) == 1 and events[-1] is terminals[0]
    if checkpointed:
        assert events[0].type == "stream_started"
        assert all(e.type != "stream_started" for e in events[1:])


def provider_id(style: str, i: int, j: int) -> str | None:
    """The id the model gives a call: its own, one shared by every call, or none."""
    return {"unique": f"s{i}c{j}", "duplicate": "same", "empty": ""}.get(style)


async def scenario(
    steps: list[list[str]], decisions: list[str], checkpointed: bool, ids: list[str]
) -> None:
    world = World()
    responses: list[ScriptedResponse | str] = []
    for i, kinds in enumerate(steps):
        calls = [
            ScriptedCall(k, {"tag": f"s{i}c{j}"}, id=provider_id(ids[(i + j) % len(ids)], i, j))
            for j, k in enumerate(kinds)
        ]
        responses.append(ScriptedResponse(tool_calls=calls))
    responses.append("finished")
    agent = Agent(model=ScriptedModel(responses), tools=world.tools(), limits=Limits(max_steps=50))
    store = InMemoryCheckpointStore() if checkpointed else None
    session = Session(agent, checkpoint_store=store)

    events = [e async for e in session.send("go")]
    check_grammar(events, checkpointed)
    pauses = 0
    while session.pending is not None:
        pending = session.pending
        assert isinstance(events[-2], PendingAction) and events[-2] == pending
        choice = decisions[pauses % len(decisions)]
        pauses += 1
        decision: Decision
        tag = str(pending.input["tag"])  # the decision is for exactly this call
        if pending.client_executed:
            decision = ClientResult("signed", is_error=choice == "client_err")
        elif choice == "reject":
            decision = Reject("no")
            world.rejected.add(tag)
        else:
            decision = Approve()
            world.approved.add(tag)
        events = [e async for e in session.resume(pending.attempt_id, decision)]
        check_grammar(events, checkpointed)
    assert events[-1].type == "turn_complete"

    # Writes at most once; rejected or client-executed calls never ran on the server.
    started = [tag for phase, _name, tag in world.log if phase == "start"]
    assert len(started) == len(set(started))
    assert not (set(started) & world.rejected)
    assert not any(name == "client_sign" for _p, name, _t in world.log)
    # Every call of every step ran, unless it waited for a decision that said no.
    for i, kinds in enumerate(steps):
        for j, kind in enumerate(kinds):
            tag = f"s{i}c{j}"
            expected = kind != "client_sign" and tag not in world.rejected
            assert (tag in started) == expected, (tag, kind)
    # Order rules within each step.
    for i in range(len(steps)):
        entries = [(p, n, t) for p, n, t in world.log if t.startswith(f"s{i}c")]
        write_entries = [(p, n, t) for p, n, t in entries if n in WRITES]
        read_ends = [k for k, (p, n, _t) in enumerate(entries) if n not in WRITES and p == "end"]
        first_write = next((k for k, (_p, n, _t) in enumerate(entries) if n in WRITES), None)
        if first_write is not None and read_ends:
            assert max(read_ends) < first_write, "a write started before the step's reads finished"
        pairs = [write_entries[k : k + 2] for k in range(0, len(write_entries), 2)]
        for pair in pairs:
            assert pair[0][0] == "start" and pair[1][0] == "end" and pair[0][2] == pair[1][2]
        order = [t for p, _n, t in write_entries if p == "start"]
        assert order == sorted(order, key=lambda t: int(t.split("c")[1]))
    # The transcript is valid: every call answered, in order.
    messages = session.messages
    for k, message in enumerate(messages):
        ids = [c.id for c in message.tool_calls]
        if ids:
            assert [p.tool_use_id for p in messages[k + 1].tool_results_parts] == ids


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=steps_strategy,
    decisions=decisions_strategy,
    checkpointed=st.booleans(),
    backend=st.sampled_from(["asyncio", "trio"]),
    ids=st.lists(st.sampled_from(["unique", "duplicate", "empty", "scripted"]), min_size=1),
)
def test_safety_contracts_hold_for_random_runs(
    steps: list[list[str]], decisions: list[str], checkpointed: bool, backend: str, ids: list[str]
) -> None:
    anyio.run(scenario, steps, decisions, checkpointed, ids, backend=backend)
