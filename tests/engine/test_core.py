"""Engine: visibility, exported vs private, direct calls through the dispatcher, caller contexts."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from mainspring import Agent, ScriptedCall, ScriptedModel, ScriptedResponse, tool
from mainspring.decisions import Approve, Reject
from mainspring.engine import (
    ANONYMOUS,
    Caller,
    Engine,
    ManagementPolicy,
    ToolCallResult,
    agent_storage,
)
from mainspring.errors import AccessDenied, CallerBusy, ConfigError, UnknownAttempt
from mainspring.events import ToolResult
from mainspring.guards import Guard
from mainspring.messages import Message
from mainspring.models.base import ToolSpec
from mainspring.permissions import PermissionRules
from mainspring.tools.context import ToolContext

pytestmark = pytest.mark.anyio

ALICE = Caller("alice")
BOB = Caller("bob")
OPS = Caller("ops", kind="service")

ran: list[str] = []


@tool(read_only=True)
def lookup(sku: str) -> str:
    """Look a product up."""
    ran.append("lookup")
    return f"{sku}: 3 in stock"


@tool(read_only=True)
def secret_report() -> str:
    """An internal report."""
    ran.append("secret_report")
    return "margins"


@tool(permission="confirm", modifiable_fields=("qty",))
def order(sku: str, qty: int) -> str:
    """Order stock."""
    ran.append(f"order {sku} {qty}")
    return f"ordered {qty} of {sku}"


@tool(read_only=True)
def whoami(ctx: ToolContext) -> str:
    """Who calls."""
    return f"{ctx.caller.key} via {ctx.metadata.get('client', '-')}"


@tool
def remember(text: str, ctx: ToolContext) -> str:
    """Store a note in this tool's storage."""
    ctx.storage.put("note", text)
    ctx.component_cache["calls"] = ctx.component_cache.get("calls", 0) + 1
    return "ok"


@tool(read_only=True)
def recall(ctx: ToolContext) -> str:
    """Read "note" from this tool's own storage."""
    return repr(ctx.storage.get("note"))


def shop(visibility: str = "protected", **options: object) -> Engine:
    policy = ManagementPolicy(controller=ALICE, managers=frozenset({OPS}), visibility=visibility)  # type: ignore[arg-type]  # the tests pass the visibility's literal as a str
    return (
        Engine("shop", policy=policy, **options)  # type: ignore[arg-type]  # keywords passed through from the caller
        .add_tool(lookup, export=True)
        .add_tool(order, export=True)
        .add_tool(whoami, export=True)
        .add_tool(remember, export=True)
        .add_tool(recall, export=True)
        .add_tool(secret_report)
    )


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


async def test_a_private_engine_serves_only_its_managers() -> None:
    engine = shop("private")
    for caller in (ANONYMOUS, BOB):
        with pytest.raises(AccessDenied, match="private"):
            await engine.tool_call(caller, "lookup", {"sku": "A1"})
        with pytest.raises(AccessDenied, match="private"):
            engine.information(caller)
    assert ran == []
    result = await engine.tool_call(OPS, "secret_report", {})
    assert result.content == "margins" and ran == ["secret_report"]


async def test_protected_refuses_anonymous_and_public_admits_it_to_exported_only() -> None:
    with pytest.raises(AccessDenied, match="identified"):
        await shop("protected").tool_call(ANONYMOUS, "lookup", {"sku": "A1"})
    public = shop("public")
    assert (await public.tool_call(ANONYMOUS, "lookup", {"sku": "A1"})).content == "A1: 3 in stock"
    with pytest.raises(AccessDenied, match="exports no tool 'secret_report'"):
        await public.tool_call(ANONYMOUS, "secret_report", {})
    assert ran == ["lookup"]


async def test_unexported_and_missing_members_are_refused_alike() -> None:
    engine = shop()
    with pytest.raises(AccessDenied) as hidden:
        await engine.tool_call(BOB, "secret_report", {})
    with pytest.raises(AccessDenied) as missing:
        await engine.tool_call(BOB, "nothing", {})
    assert str(hidden.value).replace("secret_report", "X") == str(missing.value).replace(
        "nothing", "X"
    )
    assert ran == []


async def test_information_lists_what_the_caller_may_call() -> None:
    engine = shop()
    seen = {t["name"] for t in engine.information(BOB).tools}
    assert "secret_report" not in seen and {"lookup", "order"} <= seen
    assert "secret_report" in {t["name"] for t in engine.information(ALICE).tools}


async def test_metadata_is_never_identity() -> None:
    engine = shop("private")
    with pytest.raises(AccessDenied):
        await engine.tool_call(BOB, "lookup", {"sku": "A"}, metadata={"caller": "alice"})


async def test_a_confirm_tier_direct_call_pauses_until_the_caller_decides() -> None:
    engine = shop()
    first = await engine.tool_call(BOB, "order", {"sku": "A1", "qty": 5})
    assert first.pending is not None and first.pending.name == "order" and ran == []
    assert await engine.pending(BOB) == (first.pending,)
    with pytest.raises(UnknownAttempt):  # another caller cannot decide it
        await engine.decide(ALICE, first.pending.attempt_id, Approve())
    done = await engine.decide(BOB, first.pending.attempt_id, Approve(edits={"qty": 2}))
    assert isinstance(done, ToolCallResult)
    assert done.content.endswith("\n\nordered 2 of A1") and done.ran and ran == ["order A1 2"]
    assert '{"qty": 2} instead of {"qty": 5}' in done.content  # the result says what ran
    with pytest.raises(UnknownAttempt):  # never applied twice
        await engine.decide(BOB, first.pending.attempt_id, Approve())
    assert await engine.pending(BOB) == ()


async def test_a_rejected_direct_call_does_not_run() -> None:
    engine = shop()
    first = await engine.tool_call(BOB, "order", {"sku": "A1", "qty": 5})
    assert first.pending is not None
    done = await engine.decide(BOB, first.pending.attempt_id, Reject("no"))
    assert isinstance(done, ToolCallResult) and done.is_error and not done.ran and ran == []


async def test_a_bad_edit_is_refused_and_the_call_still_waits() -> None:
    engine = shop()
    first = await engine.tool_call(BOB, "order", {"sku": "A1", "qty": 5})
    assert first.pending is not None
    with pytest.raises(Exception, match="not modifiable"):
        await engine.decide(BOB, first.pending.attempt_id, Approve(edits={"sku": "B"}))
    assert await engine.pending(BOB) == (first.pending,) and ran == []


async def test_direct_calls_meet_the_engines_rules_and_guards() -> None:
    guard = Guard(
        name="no-z", before=lambda t, a: ("block", "no Z") if a.get("sku") == "Z" else None
    )
    engine = shop(permissions=PermissionRules(deny=("whoami",)), guards=[guard])
    denied = await engine.tool_call(BOB, "whoami", {})
    assert denied.is_error and "permission denied" in denied.content and not denied.ran
    blocked = await engine.tool_call(BOB, "lookup", {"sku": "Z"})
    assert blocked.is_error and "no Z" in blocked.content and ran == []


async def test_bad_arguments_give_an_error_result() -> None:
    result = await shop().tool_call(BOB, "lookup", {"sku": 5, "extra": 1})
    assert result.is_error and not result.ran and ran == []


async def test_a_tool_sees_the_verified_caller_and_metadata() -> None:
    engine = shop()
    result = await engine.tool_call(BOB, "whoami", {}, metadata={"client": "cli"})
    assert result.content == "user:bob via cli"


async def test_each_tool_has_its_own_storage_namespace() -> None:
    engine = shop()
    await engine.tool_call(BOB, "remember", {"text": "mine"})
    assert (await engine.tool_call(BOB, "recall", {})).content == "None"
    assert engine.storage.get(("tool", "remember", "user", "bob"), "note") == "mine"
    assert engine.storage.keys(("tool", "recall", "user", "bob")) == []
    assert engine.storage.keys(("tool", "remember")) == []  # nothing shared by default


async def test_a_tools_storage_is_per_caller_unless_shared_on_purpose() -> None:
    @tool
    def keep(text: str, ctx: ToolContext) -> str:
        """Keep a text for this caller, and count it for everyone."""
        ctx.storage.put("mine", text)
        ctx.shared_storage.put("count", (ctx.shared_storage.get("count") or 0) + 1)
        return "kept"

    @tool(read_only=True)
    def peek(ctx: ToolContext) -> str:
        """This caller's text."""
        return repr(ctx.storage.get("mine"))

    engine = Engine("kv", policy=ManagementPolicy(visibility="public"))
    engine.add_tool(keep, export=True).add_tool(peek, export=True)
    await engine.tool_call(ALICE, "keep", {"text": "alice's secret"})
    await engine.tool_call(BOB, "keep", {"text": "bob's"})
    assert engine.storage.get(("tool", "keep"), "count") == 2
    assert engine.storage.get(("tool", "keep", "user", "alice"), "mine") == "alice's secret"
    assert engine.storage.get(("tool", "keep", "user", "bob"), "mine") == "bob's"


async def test_one_run_per_caller() -> None:
    started, release = anyio.Event(), anyio.Event()

    @tool(read_only=True)
    async def slow() -> str:
        """Wait."""
        started.set()
        await release.wait()
        return "done"

    engine = Engine("e", policy=ManagementPolicy(visibility="protected"), one_run_per_caller=True)
    engine.add_tool(slow, export=True).add_tool(lookup, export=True)
    results: list[str] = []

    async def first() -> None:
        results.append((await engine.tool_call(BOB, "slow", {})).content)

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        await started.wait()
        with pytest.raises(CallerBusy):
            await engine.tool_call(BOB, "lookup", {"sku": "A"})
        assert (await engine.tool_call(ALICE, "lookup", {"sku": "A"})).ran
        release.set()
    assert results == ["done"]
    assert (await engine.tool_call(BOB, "lookup", {"sku": "A"})).ran  # free again


async def test_agent_runs_are_checked_and_paused_like_tool_calls() -> None:
    model = ScriptedModel(
        [ScriptedResponse(tool_calls=[ScriptedCall("order", {"sku": "A1", "qty": 1})]), "Ordered."]
    )
    clerk = Agent(model=model, name="clerk", tools=[order])
    engine = shop().add_agent(clerk, export=True, description="Orders stock.")
    hidden = Agent(model=ScriptedModel(["x"]), name="auditor")
    engine.add_agent(hidden)
    with pytest.raises(AccessDenied, match="exports no agent 'auditor'"):
        await engine.agent_run(BOB, "audit", agent="auditor")
    assert [a["name"] for a in engine.information(BOB).agents] == ["clerk"]
    run = await engine.agent_run(BOB, "order one A1")
    assert run.pending is not None and run.stop_reason == "pending_action" and ran == []
    done = await engine.decide(BOB, run.pending.attempt_id, Approve())
    assert done.pending is None and ran == ["order A1 1"]
    assert getattr(done, "text", "") == "Ordered."


async def test_an_agent_has_its_own_storage_per_caller() -> None:
    @tool
    def note(text: str) -> str:
        """Keep a note in the agent's storage; say what this caller kept before."""
        before = agent_storage().get("last")
        agent_storage().put("last", text)
        agent_storage(shared=True).put("last", text)  # the one every caller shares
        return repr(before)

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
        if messages[-1].role == "user":
            return ScriptedResponse(tool_calls=[ScriptedCall("note", {"text": "hi"})])
        return ScriptedResponse(text="ok")

    engine = Engine("e", policy=ManagementPolicy(visibility="public"))
    scribe = Agent(model=ScriptedModel(script), name="scribe", tools=[note])
    engine.add_agent(scribe, export=True)
    await engine.agent_run(ALICE, "note hi")
    bob = await engine.agent_run(BOB, "note hi")
    assert "None" in [e.content for e in bob.events if isinstance(e, ToolResult)]
    assert engine.storage.get(("agent", "scribe", "user", "alice"), "last") == "hi"
    assert engine.storage.get(("agent", "scribe", "user", "bob"), "last") == "hi"
    assert engine.storage.get(("agent", "scribe"), "last") == "hi"
    with pytest.raises(ConfigError):
        agent_storage()


async def test_scopes_belong_to_their_caller() -> None:
    engine = shop().add_agent(Agent(model=ScriptedModel(["hi"]), name="a"), export=True)
    scope = await engine.new_scope(BOB)
    with pytest.raises(AccessDenied, match="scope"):
        await engine.agent_run(ALICE, "hello", scope=scope)
    assert (await engine.agent_run(BOB, "hello", scope=scope)).text == "hi"


def test_misuse_is_refused_at_construction() -> None:
    with pytest.raises(ConfigError):
        ManagementPolicy(visibility="open")  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
    with pytest.raises(ConfigError, match="anonymous"):
        ManagementPolicy(controller=ANONYMOUS)
    with pytest.raises(ConfigError, match="already has"):
        shop().add_tool(lookup)
    with pytest.raises(ValueError):
        Caller("")
    with pytest.raises(ValueError):
        Caller("anonymous")


async def test_cancel_stops_the_callers_runs() -> None:
    started = anyio.Event()
    seen: list[bool] = []

    @tool(read_only=True)
    async def wait(ctx: ToolContext) -> str:
        """Wait until cancelled."""
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            seen.append(ctx.cancelled)
        return "never"

    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("wait")]), "after"])
    engine = Engine("e", policy=ManagementPolicy(controller=ALICE))
    engine.add_agent(Agent(model=model, name="waiter", tools=[wait]))
    runs: list[str | None] = []

    async def run() -> None:
        runs.append((await engine.agent_run(ALICE, "wait")).stop_reason)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await started.wait()
        engine.cancel(BOB)  # another caller's cancel reaches nothing
        engine.cancel(ALICE)
    assert runs == ["cancelled"] and seen == [True]


def test_agents_that_use_each_other_in_a_cycle_are_refused() -> None:
    engine = Engine("e", policy=ManagementPolicy(controller=ALICE))
    engine.add_agent(Agent(model=ScriptedModel(["a"]), name="a"), uses=["b"])
    engine.add_agent(Agent(model=ScriptedModel(["b"]), name="b"), uses=["a"])
    with pytest.raises(ConfigError, match="cycle"):
        anyio.run(engine.agent_run, ALICE, "hi")
