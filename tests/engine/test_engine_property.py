"""Property: no sequence of direct calls and model calls reaches an unexported tool or another
component's storage, and no subagent session is reached from another scope."""

from __future__ import annotations

import json
from collections.abc import Sequence

import anyio
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from pydantic import JsonValue

from mainspring import Agent, ScriptedCall, ScriptedModel, ScriptedResponse, tool
from mainspring.decisions import Approve, Reject
from mainspring.engine import (
    ANONYMOUS,
    AgentRun,
    Caller,
    Engine,
    ManagementPolicy,
    ToolCallResult,
)
from mainspring.errors import AccessDenied
from mainspring.messages import Message
from mainspring.models.base import ToolSpec
from mainspring.tools.context import ToolContext

MANAGER = Caller("ops")
CALLERS = (MANAGER, Caller("bob"), Caller("eve"), ANONYMOUS)
TOOL_NAMES = ("put", "get", "hidden", "confirm_put", "memo", "missing")


def build(hidden_calls: list[str], memo_seen: list[list[str]]) -> Engine:
    @tool
    def put(key: str, value: str, ctx: ToolContext) -> str:
        """Store a value in this tool's storage."""
        ctx.storage.put(key, value)
        return "stored"

    @tool(permission="confirm")
    def confirm_put(key: str, value: str, ctx: ToolContext) -> str:
        """Store a value, once approved."""
        ctx.storage.put(key, value)
        return "stored"

    @tool(read_only=True)
    def get(key: str, ctx: ToolContext) -> str:
        """Read a value from this tool's own storage."""
        return repr(ctx.storage.get(key))

    @tool(read_only=True)
    def hidden(ctx: ToolContext) -> str:
        """Not exported, used by no exported agent."""
        hidden_calls.append(ctx.caller.key)
        return "secret"

    def memo_model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
        memo_seen.append([m.text for m in messages if m.role == "user"])
        return ScriptedResponse(text="noted")

    def host_model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
        plan = json.loads(next(m.text for m in reversed(messages) if m.role == "user"))
        step = len([m for m in messages if m.role == "tool"]) - plan_start(messages)
        if step >= len(plan):
            return ScriptedResponse(text="finished")
        name, args = plan[step]
        return ScriptedResponse(tool_calls=[ScriptedCall(name, args)])

    memo = Agent(model=ScriptedModel(memo_model), name="memo")
    host = Agent(model=ScriptedModel(host_model), name="host")
    return (
        Engine("prop", policy=ManagementPolicy(controller=MANAGER, visibility="public"))
        .add_tool(put, export=True)
        .add_tool(get, export=True)
        .add_tool(confirm_put, export=True)
        .add_tool(hidden)
        .add_agent(memo)
        .add_agent(host, export=True, default=True, uses=["put", "get", "confirm_put", "memo"])
    )


def plan_start(messages: Sequence[Message]) -> int:
    """Tool results before the last user message (earlier turns' calls)."""
    last_user = max(i for i, m in enumerate(messages) if m.role == "user")
    return len([m for m in messages[:last_user] if m.role == "tool"])


def args_for(name: str, key: str, value: str, task: str, alias: str) -> dict[str, JsonValue]:
    if name in ("put", "confirm_put"):
        return {"key": key, "value": value}
    if name == "get":
        return {"key": key}
    if name == "memo":
        return {"task": task, "alias": alias}
    return {}


keys = st.sampled_from(["k", "note", "x"])
calls = st.tuples(st.sampled_from(TOOL_NAMES), keys, st.sampled_from(["a", "b"]))
operations = st.lists(
    st.tuples(
        st.sampled_from(["direct", "model"]),
        st.integers(0, len(CALLERS) - 1),
        st.integers(0, 1),  # which of the caller's scopes
        st.lists(calls, min_size=1, max_size=3),
        st.booleans(),  # approve or reject what pauses
    ),
    max_size=6,
)


async def open_scopes(engine: Engine) -> dict[tuple[str, int], str]:
    """Two scopes for each caller."""
    return {(c.key, i): await engine.new_scope(c) for c in CALLERS for i in (0, 1)}


@settings(max_examples=40)
@given(operations)
def test_no_sequence_reaches_an_unexported_tool_or_another_namespace(
    ops: list[tuple[str, int, int, list[tuple[str, str, str]], bool]],
) -> None:
    hidden_calls: list[str] = []
    memo_seen: list[list[str]] = []
    engine = build(hidden_calls, memo_seen)
    sent: dict[tuple[str, str, str], list[str]] = {}
    scopes: dict[tuple[str, int], str] = {}

    async def run() -> None:
        scopes.update(await open_scopes(engine))
        for n, (door, who, scope_i, plan, approve) in enumerate(ops):
            caller = CALLERS[who]
            scope = scopes[(caller.key, scope_i)]
            steps = []
            for k, (name, key, alias) in enumerate(plan):
                task = f"{caller.key}|{scope}|{alias}|{n}.{k}"
                steps.append((name, args_for(name, key, "v", task, alias)))
                if door == "model" and name == "memo":
                    sent.setdefault((caller.key, scope, alias), []).append(task)
            result: AgentRun | ToolCallResult
            try:
                if door == "direct":
                    result = await engine.tool_call(caller, steps[0][0], steps[0][1])
                else:
                    result = await engine.agent_run(caller, json.dumps(steps), scope=scope)
            except AccessDenied:
                continue
            while result.pending is not None:
                decision = Approve() if approve else Reject("no")
                result = await engine.decide(caller, result.pending.attempt_id, decision)

    anyio.run(run)

    async def member_keys() -> list[tuple[str, str, str, str]]:
        return [k for c in CALLERS for k in await engine.members.keys(c.key)]

    members = anyio.run(member_keys)
    event(f"memo sessions: {min(len(members), 2)}")
    stored = [engine.storage.keys(("tool", "put", c.kind, c.id)) for c in CALLERS]
    event(f"stored: {any(stored)}")
    assert engine.storage.keys(("tool", "put")) == []  # per caller, never shared
    event(f"hidden ran: {bool(hidden_calls)}")
    assert all(key == MANAGER.key for key in hidden_calls)  # only a manager's direct call
    for namespace in (("tool", "get"), ("tool", "hidden"), ("agent", "host"), ("agent", "memo")):
        assert engine.storage.keys(namespace) == []  # nobody wrote into a namespace not its own
    for seen in memo_seen:  # a subagent session only ever held one scope's tasks
        prefixes = {task.rsplit("|", 1)[0] for task in seen}
        assert len(prefixes) == 1
        (prefix,) = prefixes
        caller, scope, alias = prefix.split("|")
        assert seen == sent[(caller, scope, alias)][: len(seen)]
    owner = {scope: caller_key for (caller_key, _), scope in scopes.items()}
    for caller_key, scope, _agent, _alias in members:
        assert owner[scope] == caller_key  # every subagent session lives in its caller's scope


@pytest.mark.anyio
async def test_an_unexported_tool_is_refused_to_non_managers_through_every_door() -> None:
    hidden_calls: list[str] = []
    engine = build(hidden_calls, [])
    for caller in CALLERS[1:]:
        with pytest.raises(AccessDenied):
            await engine.tool_call(caller, "hidden", {})
        run = await engine.agent_run(caller, json.dumps([["hidden", {}]]))
        assert run.text == "finished"
    assert hidden_calls == []
    assert "hidden" not in {t["name"] for t in engine.information(CALLERS[1]).tools}
