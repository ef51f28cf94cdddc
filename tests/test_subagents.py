"""Subagents: an agent as a tool of another, its events, limits, cancellation and approvals."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest
from pydantic import JsonValue

from mainspring import (
    Agent,
    Limits,
    ModelPrice,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    ToolResult,
    TurnComplete,
    Usage,
    UsageEvent,
    tool,
)
from mainspring import subagents as subagents_module
from mainspring.decisions import Approve
from mainspring.errors import (
    ApprovalError,
    CallerBusy,
    ConfigError,
    StoreError,
    UnknownAttempt,
)
from mainspring.events import Canvas, Event
from mainspring.messages import Message
from mainspring.models.base import ToolSpec
from mainspring.principals import Caller
from mainspring.stores import SQLiteSessionStore
from mainspring.subagents import (
    PAUSED_SUBAGENT_KIND,
    SUBAGENT_EVENT,
    SUBAGENT_PENDING_ACTION,
    SubagentHandle,
    subagent_tool,
)
from mainspring.tools.context import RunScope, run_scope
from mainspring.tools.define import Tool
from tests.helpers import send

pytestmark = pytest.mark.anyio


@tool(read_only=True)
async def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"{topic}: 42"


def host_agent(sub: Tool, *script: str | ScriptedResponse) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(list(script))
    return Agent(model=model, name="host", tools=[sub]), model


def call_sub(task: str, name: str = "researcher") -> ScriptedResponse:
    return ScriptedResponse(tool_calls=[ScriptedCall(name, {"task": task})])


def tool_results(events: list[Event], name: str = "researcher") -> list[ToolResult]:
    return [e for e in events if isinstance(e, ToolResult) and e.name == name]


def forwarded(events: list[Event], kind: str = SUBAGENT_EVENT) -> list[dict[str, JsonValue]]:
    found: list[dict[str, JsonValue]] = []
    for e in events:
        if isinstance(e, Canvas) and e.kind == kind:
            assert isinstance(e.data, dict)
            found.append(e.data)
    return found


async def test_host_gets_the_subagent_final_text_and_its_tagged_events() -> None:
    sub_model = ScriptedModel(
        [ScriptedResponse(tool_calls=[ScriptedCall("lookup", {"topic": "life"})]), "It is 42."]
    )
    sub = subagent_tool(
        Agent(model=sub_model, name="researcher", tools=[lookup]), description="Research."
    )
    agent, model = host_agent(sub, call_sub("find the answer"), "The researcher says 42.")
    session = Session(agent)
    events = await send(session, "what is the answer?")

    assert [r.content for r in tool_results(events)] == ["It is 42."]
    assert not tool_results(events)[0].is_error
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.stop_reason == "end_turn"
    # The host model saw the subagent's answer as the tool result.
    last = model.requests[-1].messages[-1]
    assert [p.content for p in last.tool_results_parts] == ["It is 42."]
    # The subagent got the task as its user message, and ran its own tool.
    assert sub_model.requests[0].messages[0].text == "find the answer"
    tagged = forwarded(events)
    assert tagged and all(d["agent"] == "researcher" for d in tagged)
    inner = [d["event"] for d in tagged]
    assert all(isinstance(e, dict) for e in inner)
    inner_types = [e["type"] for e in inner if isinstance(e, dict)]
    assert "tool_start" in inner_types and inner_types[-1] == "turn_complete"
    starts = [e for e in inner if isinstance(e, dict) and e["type"] == "tool_start"]
    assert starts[0]["name"] == "lookup"
    canvases = [e for e in events if isinstance(e, Canvas) and e.kind == SUBAGENT_EVENT]
    call_id = tool_results(events)[0].tool_use_id
    assert all(c.tool_use_id == call_id for c in canvases)


async def test_max_turns_of_the_subagent_applies() -> None:
    def always_lookup(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
        return ScriptedResponse(tool_calls=[ScriptedCall("lookup", {"topic": "x"})])

    sub_model = ScriptedModel(always_lookup)
    sub = subagent_tool(
        Agent(model=sub_model, name="researcher", tools=[lookup]),
        description="Research.",
        max_steps=2,
    )
    agent, _ = host_agent(sub, call_sub("loop"), "It gave up.")
    events = await send(Session(agent), "go")
    (result,) = tool_results(events)
    assert result.is_error and "max_turns" in result.content
    assert len(sub_model.requests) == 2


async def test_budget_of_the_subagent_applies() -> None:
    big = Usage(input_tokens=1_000_000, requests=1)
    sub_model = ScriptedModel(
        [ScriptedResponse(tool_calls=[ScriptedCall("lookup", {"topic": "x"})], usage=big), "no"],
        name="m",
    )
    sub_agent = Agent(
        model=sub_model,
        name="researcher",
        tools=[lookup],
        prices={"m": ModelPrice(input=2.0, output=10.0)},
    )
    handle = SubagentHandle(sub_agent, description="Research.", budget_usd=1.0)
    assert handle.agent.limits.budget_usd == 1.0 and sub_agent.limits.budget_usd is None
    agent, _ = host_agent(handle.tool, call_sub("spend"), "Too costly.")
    events = await send(Session(agent), "go")
    (result,) = tool_results(events)
    assert result.is_error and "budget_exceeded" in result.content
    assert len(sub_model.requests) == 1


async def test_cancelling_the_host_stops_the_subagent_and_leaves_the_host_usable() -> None:
    started = anyio.Event()
    stopped: list[str] = []

    @tool(read_only=True)
    async def wait_forever() -> str:
        """Never returns."""
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            stopped.append("stopped")
        return "unreachable"  # pragma: no cover

    sub_model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("wait_forever")])])
    sub = subagent_tool(
        Agent(model=sub_model, name="researcher", tools=[wait_forever]), description="Research."
    )
    agent, model = host_agent(sub, call_sub("wait"), "Still here.")
    session = Session(agent)
    events: list[Event] = []
    with anyio.fail_after(60):
        async for event in session.send("go"):
            events.append(event)
            if isinstance(event, Canvas) and event.kind == SUBAGENT_EVENT:
                data = event.data
                assert isinstance(data, dict)
                inner = data["event"]
                if isinstance(inner, dict) and inner["type"] == "tool_start":
                    await started.wait()
                    session.cancel()
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.stop_reason == "cancelled"
    assert stopped == ["stopped"]
    assert not session.running and session.pending is None
    # The host goes on.
    again = await send(session, "and now?")
    assert isinstance(again[-1], TurnComplete) and again[-1].stop_reason == "end_turn"
    assert session.messages[-1].text == "Still here."
    assert len(model.requests) == 2


async def test_subagent_approval_surfaces_to_the_host_and_resumes_once() -> None:
    sent: list[str] = []

    @tool(permission="confirm")
    async def send_email(to: str) -> str:
        """Send an email."""
        sent.append(to)
        return f"sent to {to}"

    sub_model = ScriptedModel(
        [ScriptedResponse(tool_calls=[ScriptedCall("send_email", {"to": "bob"})]), "Email sent."]
    )
    handle = SubagentHandle(
        Agent(model=sub_model, name="mailer", tools=[send_email]), description="Send mail."
    )
    assert SubagentHandle.of(handle.tool) is handle
    agent, model = host_agent(
        handle.tool, call_sub("email bob", "mailer"), "Waiting for approval.", "Bob was emailed."
    )
    host = Session(agent)
    events = await send(host, "email bob")

    # The host turn ends normally; the model was told the subagent waits.
    assert isinstance(events[-1], TurnComplete) and events[-1].stop_reason == "end_turn"
    (result,) = tool_results(events, "mailer")
    assert not result.is_error and "approval" in result.content
    assert sent == []
    # The pending action reached the host application, tagged with the subagent.
    (surfaced,) = forwarded(events, SUBAGENT_PENDING_ACTION)
    assert surfaced["agent"] == "mailer"
    action = surfaced["action"]
    assert isinstance(action, dict) and action["name"] == "send_email"
    attempt_id = action["attempt_id"]
    assert isinstance(attempt_id, str)
    assert [p.attempt_id for p in await handle.pending()] == [attempt_id]

    outcome = await handle.resume(attempt_id, Approve())
    assert sent == ["bob"]
    assert outcome.ok and outcome.text == "Email sent." and outcome.pending is None
    assert await handle.pending() == ()
    with pytest.raises(UnknownAttempt):
        await handle.resume(attempt_id, Approve())
    assert sent == ["bob"]

    # Feed it back to the host.
    after = await send(host, outcome.followup())
    assert isinstance(after[-1], TurnComplete) and after[-1].stop_reason == "end_turn"
    told = model.requests[-1].messages[-1].text
    assert "mailer" in told and "Email sent." in told
    assert host.messages[-1].text == "Bob was emailed."


async def test_handle_of_rejects_other_tools_and_description_is_required() -> None:
    with pytest.raises(ConfigError):
        SubagentHandle.of(lookup)
    with pytest.raises(ConfigError):
        subagent_tool(Agent(model=ScriptedModel([])), description="")


async def test_a_subagents_spend_counts_toward_the_hosts_budget() -> None:
    big = Usage(input_tokens=300_000, requests=1)  # $0.60 at $2 per million
    sub_model = ScriptedModel([ScriptedResponse(text="found it", usage=big)], name="m")
    sub_agent = Agent(
        model=sub_model, name="researcher", prices={"m": ModelPrice(input=2.0, output=10.0)}
    )
    handle = SubagentHandle(sub_agent, description="Research.")
    host_model = ScriptedModel([call_sub("look"), "never asked"], name="host")
    host = Agent(
        model=host_model,
        tools=[handle.tool],
        limits=Limits(budget_usd=0.5),
        prices={"host": ModelPrice(input=0.0, output=0.0)},
    )
    session = Session(host)
    events = await send(session, "research it")
    charged = [e for e in events if isinstance(e, UsageEvent) and e.model.startswith("tool:")]
    assert [round(e.cost_usd, 2) for e in charged] == [0.6]
    assert round(session.cost_usd, 2) == 0.6
    last = events[-1]
    assert isinstance(last, TurnComplete) and last.stop_reason == "budget_exceeded"
    assert len(host_model.requests) == 1  # the host stopped before spending more
    assert round(last.cost_usd, 2) == 0.6


def spendthrift(name: str = "researcher") -> tuple[Agent, ScriptedModel]:
    """A subagent without a budget of its own: ten steps at $0.02 each, then an answer."""
    step = Usage(input_tokens=10_000, requests=1)  # $0.02 at $2 per million
    look = ScriptedResponse(tool_calls=[ScriptedCall("lookup", {"topic": "x"})], usage=step)
    model = ScriptedModel([look] * 10 + ["spent it all"], name="m")
    prices = {"m": ModelPrice(input=2.0, output=10.0)}
    return Agent(model=model, name=name, tools=[lookup], prices=prices), model


async def test_a_subagent_without_a_budget_is_bounded_by_the_hosts_remaining_budget() -> None:
    sub_agent, sub_model = spendthrift()
    handle = SubagentHandle(sub_agent, description="Research.")
    host_model = ScriptedModel([call_sub("look"), "never asked"], name="host")
    host = Agent(
        model=host_model,
        tools=[handle.tool],
        limits=Limits(budget_usd=0.05),
        prices={"host": ModelPrice(input=0.0, output=0.0)},
    )
    session = Session(host)
    events = await send(session, "research it")
    # $0.02, $0.04, $0.06: the third step passes the $0.05 left; no fourth starts.
    assert len(sub_model.requests) == 3
    result = tool_results(events)[0]
    assert result.is_error and "budget_exceeded" in result.content
    assert round(session.cost_usd, 2) == 0.06  # not the $0.20 of ten steps
    assert isinstance(events[-1], TurnComplete) and events[-1].stop_reason == "budget_exceeded"


async def test_a_subagents_own_budget_still_applies_when_it_is_the_lower() -> None:
    sub_agent, sub_model = spendthrift()
    handle = SubagentHandle(sub_agent, description="Research.", budget_usd=0.03)
    host_model = ScriptedModel([call_sub("look"), "done"], name="host")
    host = Agent(
        model=host_model,
        tools=[handle.tool],
        limits=Limits(budget_usd=5.0),
        prices={"host": ModelPrice(input=0.0, output=0.0)},
    )
    events = await send(Session(host), "research it")
    assert len(sub_model.requests) == 2  # $0.02, $0.04 >= its own $0.03
    assert "budget_exceeded" in tool_results(events)[0].content


async def test_an_engine_member_agent_is_bounded_by_the_hosts_remaining_budget() -> None:
    from mainspring.engine import Caller, Engine, ManagementPolicy

    sub_agent, sub_model = spendthrift("helper")
    host_model = ScriptedModel([call_sub("look", "helper"), "never asked"], name="host")
    host = Agent(
        model=host_model,
        name="boss",
        limits=Limits(budget_usd=0.05),
        prices={"host": ModelPrice(input=0.0, output=0.0)},
    )
    alice = Caller("alice")
    engine = (
        Engine("e", policy=ManagementPolicy(controller=alice))
        .add_agent(host, default=True, uses=["helper"])
        .add_agent(sub_agent)
    )
    run = await engine.agent_run(alice, "go")
    assert len(sub_model.requests) == 3
    assert run.stop_reason == "budget_exceeded" and round(run.cost_usd, 2) == 0.06


# ------------------------------------------- paused runs: per caller, once, bounded

mailed: list[str] = []


@tool(permission="confirm")
async def mail(to: str) -> str:
    """Send an email."""
    mailed.append(to)
    return f"mailed {to}"


def mailer_model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
    if messages[-1].role == "tool":
        return ScriptedResponse(text=f"done: {messages[-1].tool_results_parts[0].content}")
    return ScriptedResponse(tool_calls=[ScriptedCall("mail", {"to": messages[-1].text})])


def mailer(records: SQLiteSessionStore | None = None) -> SubagentHandle:
    agent = Agent(model=ScriptedModel(mailer_model), name="mailer", tools=[mail])
    return SubagentHandle(agent, description="Send mail.", records=records)


async def pause_as(handle: SubagentHandle, caller: Caller, to: str) -> list[Event]:
    host, _ = host_agent(handle.tool, call_sub(to, "mailer"), "Waiting.")
    with run_scope(RunScope(caller=caller)):
        return await send(Session(host), to)


ALICE, BOB = Caller("alice"), Caller("bob")


@pytest.fixture(autouse=True)
def _no_mail() -> None:
    mailed.clear()


async def test_a_paused_subagent_is_its_callers_alone() -> None:
    handle = mailer()
    await pause_as(handle, ALICE, "carol")
    (pending,) = await handle.pending(caller=ALICE)
    assert await handle.pending(caller=BOB) == () and await handle.pending() == ()
    with pytest.raises(UnknownAttempt):
        await handle.resume(pending.attempt_id, Approve(), caller=BOB)
    with pytest.raises(UnknownAttempt):  # outside any run: the local caller, not alice
        await handle.resume(pending.attempt_id, Approve())
    assert mailed == []
    done = await handle.resume(pending.attempt_id, Approve(), caller=ALICE)
    assert done.text == "done: mailed carol" and mailed == ["carol"]


async def test_a_refused_decision_leaves_the_subagent_waiting() -> None:
    handle = mailer()
    await pause_as(handle, ALICE, "carol")
    (pending,) = await handle.pending(caller=ALICE)
    with pytest.raises(ApprovalError, match="not modifiable"):
        await handle.resume(pending.attempt_id, Approve(edits={"to": "eve"}), caller=ALICE)
    assert await handle.pending(caller=ALICE) == (pending,) and mailed == []
    await handle.resume(pending.attempt_id, Approve(), caller=ALICE)
    assert mailed == ["carol"]


async def test_a_callers_paused_subagent_runs_are_bounded_with_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(subagents_module, "MAX_PAUSED_SUBAGENTS", 2)
    handle = mailer()
    for to in ("c1", "c2"):
        await pause_as(handle, ALICE, to)
    events = await pause_as(handle, ALICE, "c3")
    (result,) = tool_results(events, "mailer")
    assert result.is_error and "holds 2 paused runs" in result.content
    assert "'mail' will not run" in result.content
    assert forwarded(events, SUBAGENT_PENDING_ACTION) == []  # nothing to decide was announced
    assert len(await handle.pending(caller=ALICE)) == 2
    await pause_as(handle, BOB, "c4")  # per caller
    with pytest.raises(CallerBusy, match="holds 2 paused runs"):
        with run_scope(RunScope(caller=ALICE)):
            await handle.run("c5")
    assert mailed == []


async def test_a_paused_subagent_in_a_store_survives_its_handle_and_is_taken_once(
    tmp_path: Path,
) -> None:
    one = await SQLiteSessionStore.open(tmp_path / "shared.db")
    other = await SQLiteSessionStore.open(tmp_path / "shared.db")
    try:
        await pause_as(mailer(one), ALICE, "carol")
        second = mailer(other)  # another worker's handle, on the same file
        (pending,) = await second.pending(caller=ALICE)
        outcomes: list[str] = []

        async def decide(handle: SubagentHandle) -> None:
            try:
                await handle.resume(pending.attempt_id, Approve(), caller=ALICE)
                outcomes.append("ran")
            except UnknownAttempt:
                outcomes.append("unknown")

        async with anyio.create_task_group() as tg:
            for handle in (second, mailer(one), second):
                tg.start_soon(decide, handle)
        assert sorted(outcomes) == ["ran", "unknown", "unknown"] and mailed == ["carol"]
    finally:
        await one.aclose()
        await other.aclose()


async def test_a_parked_subagent_run_that_cannot_be_decoded_is_a_store_error() -> None:
    handle = mailer()
    key = json.dumps(["mailer", ALICE.key, "a1"])
    owner = json.dumps(["mailer", ALICE.key])
    await handle.records.put_record(PAUSED_SUBAGENT_KIND, key, "{nope", owner=owner, ttl=60)
    with pytest.raises(StoreError, match="cannot be decoded"):
        await handle.pending(caller=ALICE)
    with pytest.raises(StoreError, match="cannot be decoded"):
        await handle.resume("a1", Approve(), caller=ALICE)
    assert await handle.records.owned_records(PAUSED_SUBAGENT_KIND, owner) == [(key, "{nope")]
