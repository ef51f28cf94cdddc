"""Calls are identified by the engine, never by the provider's id.

A model (or a hostile provider) may give two calls of one step the same id,
or none at all. Each call is still judged, approved and executed on its own
arguments, and every hook sees exactly the arguments that run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from pydantic import JsonValue

from mainspring import (
    Agent,
    Allow,
    Approve,
    Hooks,
    PermissionRules,
    Reject,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    ToolResult,
    ToolStart,
    tool,
)
from mainspring.events import ToolCallDelta
from mainspring.messages import ToolCallPart
from mainspring.tools import Tool
from tests.helpers import pending_of, resume, send

pytestmark = pytest.mark.anyio


def step(*calls: ScriptedCall) -> ScriptedResponse:
    return ScriptedResponse(tool_calls=list(calls))


@pytest.mark.parametrize("provider_id", ["dup", ""], ids=["same-id", "no-id"])
async def test_two_writes_with_one_provider_id_are_two_decisions(provider_id: str) -> None:
    ran: list[dict[str, Any]] = []
    hooked: list[dict[str, Any]] = []
    asked: list[dict[str, Any]] = []

    @tool(permission="confirm")
    def pay(to: str, amount_usd: float) -> str:
        """Pay someone."""
        ran.append({"to": to, "amount_usd": amount_usd})
        return f"paid {to} ${amount_usd}"

    def before(t: Tool, args: Mapping[str, JsonValue]) -> None:
        hooked.append(dict(args))

    def can_use(name: str, args: Any) -> None:
        asked.append(dict(args))

    model = ScriptedModel(
        [
            step(
                ScriptedCall("pay", {"to": "alice", "amount_usd": 5}, id=provider_id),
                ScriptedCall("pay", {"to": "mallory", "amount_usd": 500}, id=provider_id),
            ),
            "Done.",
        ]
    )
    agent = Agent(
        model=model,
        tools=[pay],
        hooks=Hooks(before_tool_call=before),
        permissions=PermissionRules(can_use_tool=can_use),
    )
    session = Session(agent)
    first = pending_of(await send(session, "pay both"))
    assert first.input == {"to": "alice", "amount_usd": 5.0}
    second = pending_of(await resume(session, first.attempt_id, Approve()))
    assert second.input == {"to": "mallory", "amount_usd": 500.0}
    assert second.tool_use_id != first.tool_use_id
    assert second.attempt_id != first.attempt_id
    events = await resume(session, second.attempt_id, Reject(reason="no"))

    assert ran == [{"to": "alice", "amount_usd": 5.0}]  # the rejected one never ran
    assert hooked == ran  # the hook saw exactly what ran
    assert asked == [{"to": "alice", "amount_usd": 5.0}, {"to": "mallory", "amount_usd": 500.0}]
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [r.tool_use_id for r in results] == [second.tool_use_id]
    # The transcript joins each result to its own call, by the engine's ids.
    calls = [p for m in session.messages for p in m.tool_calls]
    assert [c.provider_id for c in calls] == [provider_id, provider_id]
    assert len({c.id for c in calls}) == 2
    tool_results = session.messages[2].tool_results_parts
    assert [r.tool_use_id for r in tool_results] == [c.id for c in calls]
    assert "paid alice" in tool_results[0].content
    assert "rejected" in tool_results[1].content
    # The next request the model gets has two distinct ids, each answered once.
    sent = model.requests[-1].messages
    sent_calls = [p for m in sent for p in m.tool_calls]
    assert len({c.id for c in sent_calls}) == 2


async def test_parallel_reads_with_one_provider_id_each_get_their_own_result() -> None:
    @tool(read_only=True)
    def look(key: str) -> str:
        """Look a key up."""
        return f"value of {key}"

    model = ScriptedModel(
        [
            step(*(ScriptedCall("look", {"key": k}, id="same") for k in ("a", "b", "c"))),
            "ok",
        ]
    )
    session = Session(Agent(model=model, tools=[look]))
    events = await send(session, "look up three")
    starts = [e for e in events if isinstance(e, ToolStart)]
    results = [e for e in events if isinstance(e, ToolResult)]
    assert len({s.tool_use_id for s in starts}) == 3
    by_id = {r.tool_use_id: r.content for r in results}
    assert {s.tool_use_id: f"value of {s.input['key']}" for s in starts} == by_id
    message = session.messages[2]
    assert [r.content for r in message.tool_results_parts] == [
        "value of a",
        "value of b",
        "value of c",
    ]


async def test_tool_call_deltas_carry_the_engine_id_of_their_call() -> None:
    @tool(read_only=True)
    def look(key: str) -> str:
        """Look a key up."""
        return key

    model = ScriptedModel(
        [step(ScriptedCall("look", {"key": "x"}, id="p1"), ScriptedCall("look", {"key": "y"})), ""]
    )
    events = await send(Session(Agent(model=model, tools=[look])), "go")
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    starts = [e for e in events if isinstance(e, ToolStart)]
    assert {d.tool_use_id for d in deltas} == {s.tool_use_id for s in starts}
    assert "p1" not in {d.tool_use_id for d in deltas}


async def test_a_rewritten_input_is_what_runs_for_each_duplicate() -> None:
    ran: list[str] = []

    @tool
    def note(text: str) -> str:
        """Write a note."""
        ran.append(text)
        return "noted"

    def shout(name: str, args: Any) -> Allow:
        return Allow(updated_input={"text": str(args["text"]).upper()})

    model = ScriptedModel(
        [
            step(
                ScriptedCall("note", {"text": "a"}, id="x"),
                ScriptedCall("note", {"text": "b"}, id="x"),
            ),
            "",
        ]
    )
    agent = Agent(model=model, tools=[note], permissions=PermissionRules(can_use_tool=shout))
    await send(Session(agent), "two notes")
    assert ran == ["A", "B"]


def test_a_tool_call_part_keeps_the_provider_id_apart() -> None:
    part = ToolCallPart(id="call_x", name="t", arguments={}, provider_id="toolu_1")
    assert part.provider_id == "toolu_1" and part.id == "call_x"
