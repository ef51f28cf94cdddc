"""Subagents as engine members: scoped sessions, nested approvals that pause the host, spend."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from pydantic import JsonValue

from mainspring import (
    Agent,
    ModelPrice,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    ToolResult,
    Usage,
    tool,
)
from mainspring.codec import event_from_dict, event_to_dict
from mainspring.decisions import Approve, Decision, Reject
from mainspring.engine import AgentRun, Caller, Engine, ManagementPolicy
from mainspring.engine import members as members_module
from mainspring.engine.members import MEMBER_KIND
from mainspring.errors import AccessDenied, CallerBusy, SessionBusy, StoreError, UnknownAttempt
from mainspring.events import PendingAction
from mainspring.messages import Message
from mainspring.models.base import ToolSpec
from mainspring.stores import SQLiteSessionStore
from mainspring.testing import collect, pending_of
from mainspring.tools.context import ToolContext

pytestmark = pytest.mark.anyio

BOB = Caller("bob")
published: list[str] = []


@tool(permission="confirm", modifiable_fields=("title",))
def publish(title: str) -> str:
    """Publish a post."""
    published.append(title)
    return f"published {title!r}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    published.clear()


# ------------------------------------------------------- the loop's suspension


INNER = PendingAction(
    attempt_id="inner-1",
    tool_use_id="t",
    turn_index=0,
    name="inner_write",
    input={"x": 1},
    description="a nested write",
    modifiable_fields=("x",),
    reason="needs a yes",
)
seen: list[Decision | None] = []


@tool(read_only=True, concurrency_safe=False)
def nesting(ctx: ToolContext) -> str:
    """Wait on a nested decision once."""
    seen.append(ctx.decision)
    if ctx.decision is None:
        ctx.suspend(INNER)
    return f"nested run got {type(ctx.decision).__name__}"


@tool(read_only=True)
def parallel_nesting(ctx: ToolContext) -> str:
    """A parallel read that tries to suspend."""
    ctx.suspend(INNER)


def two_steps(name: str) -> ScriptedModel:
    return ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall(name)]), "done"])


@pytest.mark.parametrize("decision", [Approve(edits={"x": 2}), Reject("no")])
async def test_a_suspended_call_pauses_the_turn_and_gets_the_decision(decision: Decision) -> None:
    seen.clear()
    session = Session(Agent(model=two_steps("nesting"), tools=[nesting]))
    outer = pending_of(await collect(session.send("go")))
    assert outer.name == "nesting" and outer.nested == INNER
    assert outer.modifiable_fields == ("x",) and "needs a yes" in outer.reason
    assert event_from_dict(event_to_dict(outer)) == outer  # the wire keeps the nested action
    older = {k: v for k, v in event_to_dict(INNER).items() if k != "nested"}
    assert event_from_dict(older) == INNER  # a stored action from before the field reads as is
    events = await collect(session.resume(outer.attempt_id, decision))
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.content == f"nested run got {type(decision).__name__}" and not result.is_error
    assert seen == [None, decision]
    assert session.messages[-1].text == "done" and session.pending is None


async def test_a_parallel_read_cannot_suspend() -> None:
    session = Session(Agent(model=two_steps("parallel_nesting"), tools=[parallel_nesting]))
    events = await collect(session.send("go"))
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.is_error and "parallel" in result.content and session.pending is None


# ------------------------------------------------------------- engine members


def researcher_model() -> ScriptedModel:
    """Publishes when asked to; otherwise says how many tasks it has seen."""

    def respond(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
        last = messages[-1]
        if last.role == "tool":
            return ScriptedResponse(
                text=f"after the decision: {last.tool_results_parts[0].content}"
            )
        tasks = [m.text for m in messages if m.role == "user"]
        if "publish" in last.text:
            return ScriptedResponse(tool_calls=[ScriptedCall("publish", {"title": "Hello"})])
        return ScriptedResponse(text=f"tasks so far: {tasks}", usage=Usage(input_tokens=1000))

    return ScriptedModel(respond, name="sub")


def host_model(calls: list[dict[str, JsonValue]]) -> ScriptedModel:
    """Calls the researcher with each of ``calls`` in turn (one per user message)."""

    def respond(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
        last = messages[-1]
        if last.role == "tool":
            return ScriptedResponse(text=f"host saw: {last.tool_results_parts[0].content}")
        return ScriptedResponse(tool_calls=[ScriptedCall("researcher", calls.pop(0))])

    return ScriptedModel(respond, name="host")


def newsroom(calls: list[dict[str, JsonValue]]) -> Engine:
    prices = {"sub": ModelPrice(input=1.0, output=0.0), "host": ModelPrice(input=0.0, output=0.0)}
    researcher = Agent(model=researcher_model(), name="researcher", tools=[publish], prices=prices)
    host = Agent(model=host_model(calls), name="editor", prices=prices)
    engine = Engine("news", policy=ManagementPolicy(visibility="protected"))
    engine.add_agent(researcher, description="Researches and publishes.")
    return engine.add_agent(host, export=True, default=True, uses=["researcher"])


async def test_a_subagents_approval_pauses_the_host_and_its_decision_goes_through() -> None:
    engine = newsroom([{"task": "publish it", "alias": "r"}])
    run = await engine.agent_run(BOB, "publish the post")
    assert run.pending is not None and run.pending.name == "researcher"
    nested = run.pending.nested
    assert nested is not None and nested.name == "publish" and nested.input == {"title": "Hello"}
    assert published == [] and run.stop_reason == "pending_action"
    done = await engine.decide(BOB, run.pending.attempt_id, Approve(edits={"title": "Hi"}))
    assert isinstance(done, AgentRun) and done.pending is None
    assert published == ["Hi"]
    assert done.text == (
        "host saw: after the decision: [the approver edited the arguments: the call ran with "
        '{"title": "Hi"} instead of {"title": "Hello"}]\n\npublished \'Hi\''
    )


async def test_a_rejected_nested_action_never_runs() -> None:
    engine = newsroom([{"task": "publish it", "alias": "r"}])
    run = await engine.agent_run(BOB, "publish")
    assert run.pending is not None
    done = await engine.decide(BOB, run.pending.attempt_id, Reject("not today"))
    assert isinstance(done, AgentRun) and published == []
    assert "not today" in done.text


async def test_subagent_sessions_continue_in_their_scope_only() -> None:
    engine = newsroom(
        [
            {"task": "one", "alias": "r"},
            {"task": "two", "alias": "r"},
            {"task": "three", "alias": "r"},
        ]
    )
    scope = await engine.new_scope(BOB)
    await engine.agent_run(BOB, "first", scope=scope)
    second = await engine.agent_run(BOB, "second", scope=scope)
    assert second.text == "host saw: tasks so far: ['one', 'two']"
    elsewhere = await engine.agent_run(BOB, "third", scope=await engine.new_scope(BOB))
    assert elsewhere.text == "host saw: tasks so far: ['three']"
    keys = await engine.members.keys(BOB.key)
    assert len(keys) == 2 and scope in {k[1] for k in keys} and keys[0][1] != keys[1][1]


async def test_a_subagents_spend_is_the_hosts() -> None:
    engine = newsroom([{"task": "count", "alias": ""}])
    run = await engine.agent_run(BOB, "count")
    assert run.cost_usd == pytest.approx(1000 / 1_000_000)


# ------------------------------------------------ how long subagent sessions live


async def test_an_unnamed_subagents_session_goes_when_its_call_returns() -> None:
    engine = newsroom([{"task": "count"}, {"task": "publish it"}])
    scope = await engine.new_scope(BOB)
    run = await engine.agent_run(BOB, "count", scope=scope)
    assert run.text == "host saw: tasks so far: ['count']"
    assert await engine.members.keys(BOB.key) == ()  # nobody can name it again: gone
    run = await engine.agent_run(BOB, "publish", scope=scope)
    assert run.pending is not None  # waiting: the decision calls it again
    assert [k[3][:5] for k in await engine.members.keys(BOB.key)] == ["call:"]
    done = await engine.decide(BOB, run.pending.attempt_id, Approve())
    assert isinstance(done, AgentRun) and published == ["Hello"]
    assert await engine.members.keys(BOB.key) == ()


async def test_a_run_without_a_scope_leaves_no_subagent_sessions_behind() -> None:
    engine = newsroom([{"task": f"t{i}", "alias": "r"} for i in range(3)])
    for i in range(3):
        run = await engine.agent_run(BOB, "go")
        assert run.text == f"host saw: tasks so far: ['t{i}']"  # a fresh scope each time
        assert await engine.members.keys(BOB.key) == ()
    paused = newsroom([{"task": "publish it", "alias": "r"}])
    run = await paused.agent_run(BOB, "publish")
    kept = await paused.members.keys(BOB.key)
    assert run.pending is not None and len(kept) == 1  # kept while it waits
    done = await paused.decide(BOB, run.pending.attempt_id, Approve())
    assert isinstance(done, AgentRun) and done.pending is None and published == ["Hello"]
    assert await paused.members.keys(BOB.key) == ()


async def test_closing_a_scope_drops_its_sessions_and_only_its_caller_may() -> None:
    engine = newsroom([{"task": "one", "alias": "r"}, {"task": "publish it", "alias": "p"}])
    scope, other = await engine.new_scope(BOB), await engine.new_scope(BOB)
    await engine.agent_run(BOB, "first", scope=scope)
    assert {k[1] for k in await engine.members.keys(BOB.key)} == {scope}
    with pytest.raises(AccessDenied):
        await engine.close_scope(Caller("mallory"), scope)
    await engine.close_scope(BOB, scope)
    assert await engine.members.keys(BOB.key) == ()
    with pytest.raises(AccessDenied):  # closed: neither usable nor closable again
        await engine.agent_run(BOB, "again", scope=scope)
    with pytest.raises(AccessDenied):
        await engine.close_scope(BOB, scope)
    run = await engine.agent_run(BOB, "publish", scope=other)
    assert run.pending is not None
    with pytest.raises(SessionBusy, match="decide it first"):
        await engine.close_scope(BOB, other)
    assert len(await engine.members.keys(BOB.key)) == 1  # refused: nothing dropped
    await engine.decide(BOB, run.pending.attempt_id, Reject("no"))
    await engine.close_scope(BOB, other)
    assert await engine.members.keys(BOB.key) == () and published == []


async def test_a_caller_holds_a_bounded_number_of_open_scopes() -> None:
    engine = newsroom([])
    engine.max_scopes_per_caller = 3
    scopes = [await engine.new_scope(BOB) for _ in range(3)]
    with pytest.raises(CallerBusy, match="close one"):
        await engine.new_scope(BOB)
    await engine.new_scope(Caller("carol"))  # each caller has a bound of its own
    await engine.close_scope(BOB, scopes[0])
    assert await engine.new_scope(BOB) not in scopes


# ------------------------------------------- sessions in the engine's shared records


async def test_a_run_paused_on_one_worker_goes_on_with_its_subagents_history_on_another(
    tmp_path: Path,
) -> None:
    """Two engines on one SQLite file are two workers: the decision reaches the other one."""
    one = await SQLiteSessionStore.open(tmp_path / "shared.db")
    other = await SQLiteSessionStore.open(tmp_path / "shared.db")
    try:
        a = newsroom([{"task": "publish it", "alias": "r"}])
        b = newsroom([])
        a.share(one)
        b.share(other)
        run = await a.agent_run(BOB, "publish the post")
        assert run.pending is not None and published == []
        (key,) = await b.members.keys(BOB.key)  # the subagent's session is on record
        assert key[2:] == ("researcher", "r")
        with pytest.raises(UnknownAttempt):  # another caller cannot decide it
            await b.decide(Caller("mallory"), run.pending.attempt_id, Approve())
        done = await b.decide(BOB, run.pending.attempt_id, Approve())
        assert isinstance(done, AgentRun) and done.pending is None
        assert published == ["Hello"]  # the subagent went on from its paused write
        assert done.text == "host saw: after the decision: published 'Hello'"
        with pytest.raises(UnknownAttempt):
            await a.decide(BOB, run.pending.attempt_id, Approve())
        assert await a.members.keys(BOB.key) == ()  # the run's own scope ended: dropped
    finally:
        await one.aclose()
        await other.aclose()


async def test_a_callers_subagent_sessions_are_bounded_with_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(members_module, "MAX_MEMBER_SESSIONS", 2)
    engine = newsroom([{"task": f"t{i}", "alias": f"a{i}"} for i in range(3)])
    scope = await engine.new_scope(BOB)
    for i in range(2):
        run = await engine.agent_run(BOB, "go", scope=scope)
        assert run.text == f"host saw: tasks so far: ['t{i}']"
    third = await engine.agent_run(BOB, "go", scope=scope)
    assert "holds 2 subagent sessions" in third.text and "close a scope" in third.text
    assert len(await engine.members.keys(BOB.key)) == 2  # the refused one made nothing
    assert await engine.members.keys("user:carol") == ()


async def test_a_stored_subagent_session_that_cannot_be_decoded_is_a_store_error() -> None:
    engine = newsroom([{"task": "go", "alias": "r"}])
    scope = await engine.new_scope(BOB)
    key = (BOB.key, scope, "researcher", "r")
    record = json.dumps([engine.name, *key])
    await engine.records.put_record(MEMBER_KIND, record, "{nope", owner=record, ttl=60)
    with pytest.raises(StoreError, match="cannot be decoded"):
        await engine.members.get(key, Agent(model=ScriptedModel([])))


async def test_a_scope_opened_on_one_worker_is_used_and_closed_on_another(
    tmp_path: Path,
) -> None:
    one = await SQLiteSessionStore.open(tmp_path / "shared.db")
    other = await SQLiteSessionStore.open(tmp_path / "shared.db")
    try:
        calls: list[dict[str, JsonValue]] = [
            {"task": "one", "alias": "r"},
            {"task": "two", "alias": "r"},
            {"task": "publish it", "alias": "p"},
        ]
        a, b = newsroom(calls), newsroom(calls)  # (one list: each call is taken once)
        a.share(one)
        b.share(other)
        a.max_scopes_per_caller = b.max_scopes_per_caller = 2
        scope = await a.new_scope(BOB)
        assert await b.scopes(BOB) == (scope,) and await b.scopes(Caller("mallory")) == ()
        with pytest.raises(AccessDenied):  # still another caller's, on every worker
            await b.agent_run(Caller("mallory"), "first", scope=scope)
        await b.agent_run(BOB, "first", scope=scope)
        second = await a.agent_run(BOB, "second", scope=scope)
        assert second.text == "host saw: tasks so far: ['one', 'two']"  # one history
        await b.new_scope(BOB)
        with pytest.raises(CallerBusy, match="holds 2 open scopes"):  # counted across workers
            await a.new_scope(BOB)
        paused = await b.agent_run(BOB, "publish", scope=scope)
        assert paused.pending is not None
        with pytest.raises(SessionBusy, match="decide it first"):  # paused on the other worker
            await a.close_scope(BOB, scope)
        await a.decide(BOB, paused.pending.attempt_id, Reject("no"))
        await a.close_scope(BOB, scope)
        assert scope not in await b.scopes(BOB)
        assert {k[1] for k in await b.members.keys(BOB.key)} == set()  # its sessions went
        with pytest.raises(AccessDenied):
            await b.agent_run(BOB, "again", scope=scope)
    finally:
        await one.aclose()
        await other.aclose()
