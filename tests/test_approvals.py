"""Writes never run unapproved; decisions apply exactly once."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from pydantic import BaseModel

from mainspring import (
    Agent,
    Allow,
    ApprovalError,
    Approve,
    ClientResult,
    DecisionConflict,
    Deny,
    Event,
    FieldNotModifiable,
    Guard,
    Hooks,
    PendingAction,
    PermissionRules,
    Reject,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    SessionBusy,
    ToolInputError,
    ToolResult,
    TurnComplete,
    UnknownAttempt,
    UsdTiers,
    client_tool,
    tool,
    usd,
)
from mainspring.stores import InMemoryCheckpointStore, InMemorySessionStore
from mainspring.tools import Tool, ToolOutput
from mainspring.tools.context import ToolContext
from tests.helpers import pending_of, resume, send, types

pytestmark = pytest.mark.anyio


def payment_tool(log: list[tuple[str, float]]) -> Tool:
    @tool(
        permission=usd(lambda args: float(str(args["amount_usd"]))),
        modifiable_fields=("amount_usd", "memo"),
    )
    async def pay(to: str, amount_usd: float, memo: str = "") -> str:
        """Send money to someone.

        Args:
            to: Recipient.
            amount_usd: Amount in USD.
            memo: A note.
        """
        log.append((to, amount_usd))
        return f"paid {to} ${amount_usd:g}"

    return pay


def pay_model(*amounts: float) -> ScriptedModel:
    calls = [ScriptedCall("pay", {"to": "alice", "amount_usd": a}) for a in amounts]
    return ScriptedModel(
        lambda messages, tools: (
            "all done" if messages[-1].role == "tool" else ScriptedResponse(tool_calls=calls)
        )
    )


async def paused_session(
    amount: float = 250.0,
) -> tuple[Session, PendingAction, list[tuple[str, float]]]:
    log: list[tuple[str, float]] = []
    session = Session(Agent(model=pay_model(amount), tools=[payment_tool(log)]))
    events = await send(session, "pay alice")
    assert log == []
    return session, pending_of(events), log


async def test_confirm_tier_write_pauses_with_a_complete_pending_action() -> None:
    session, pending, log = await paused_session()
    assert log == []
    assert pending.name == "pay" and pending.input == {
        "to": "alice",
        "amount_usd": 250.0,
        "memo": "",
    }
    assert pending.approval_id == pending.attempt_id
    assert len(pending.attempt_id) == 36 and pending.attempt_id.count("-") == 4
    assert pending.tool_use_id.startswith("call_")
    assert pending.turn_index == 1
    assert pending.description.startswith("Send money")
    assert pending.modifiable_fields == ("amount_usd", "memo")
    assert pending.amount_usd == 250.0
    assert "auto-approve limit" in pending.reason
    assert pending.findings and pending.findings[0].tier == "financial"
    assert session.pending == pending


async def test_paused_turn_ends_with_pending_action_then_turn_complete() -> None:
    log: list[tuple[str, float]] = []
    session = Session(Agent(model=pay_model(500), tools=[payment_tool(log)]))
    events = await send(session, "pay")
    assert types(events)[-2:] == ["pending_action", "turn_complete"]
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.stop_reason == "pending_action"


async def test_approve_runs_the_write_once_and_continues_the_turn() -> None:
    session, pending, log = await paused_session()
    events = await resume(session, pending.attempt_id, Approve())
    assert log == [("alice", 250.0)]
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.content == "paid alice $250" and not result.is_error
    assert isinstance(events[-1], TurnComplete) and events[-1].stop_reason == "end_turn"
    assert session.messages[-1].text == "all done"
    assert session.pending is None


async def test_second_decision_is_rejected_and_nothing_runs_twice() -> None:
    session, pending, log = await paused_session()
    await resume(session, pending.attempt_id, Approve())
    with pytest.raises(DecisionConflict, match="already decided"):
        session.resume(pending.attempt_id, Approve())
    with pytest.raises(DecisionConflict):
        session.resume(pending.attempt_id, Reject("changed my mind"))
    assert log == [("alice", 250.0)]


async def test_two_racing_decisions_apply_once() -> None:
    session, pending, log = await paused_session()
    first = session.resume(pending.attempt_id, Approve())
    second = session.resume(pending.attempt_id, Approve())  # validated before either runs
    events = [e async for e in first]
    assert isinstance(events[-1], TurnComplete)
    with pytest.raises(DecisionConflict):
        await second.__anext__()
    assert log == [("alice", 250.0)]


async def test_unknown_attempt_id_is_rejected() -> None:
    session, _pending, log = await paused_session()
    with pytest.raises(UnknownAttempt, match="no pending action"):
        session.resume("not-an-attempt", Approve())
    assert log == []
    assert session.pending is not None


async def test_edit_of_modifiable_field_is_applied() -> None:
    session, pending, log = await paused_session()
    await resume(session, pending.attempt_id, Approve(edits={"amount_usd": 99.5, "memo": "tix"}))
    assert log == [("alice", 99.5)]


async def test_edit_of_non_modifiable_field_is_rejected_and_nothing_runs() -> None:
    session, pending, log = await paused_session()
    with pytest.raises(FieldNotModifiable) as info:
        session.resume(pending.attempt_id, Approve(edits={"to": "mallory"}))
    assert info.value.fields == ("to",)
    assert log == []
    # The attempt is still open: a valid decision still works.
    await resume(session, pending.attempt_id, Approve())
    assert log == [("alice", 250.0)]


async def test_invalid_edit_is_rejected_and_nothing_runs() -> None:
    session, pending, log = await paused_session()
    with pytest.raises(ToolInputError, match="amount_usd"):
        session.resume(pending.attempt_id, Approve(edits={"amount_usd": "lots"}))
    assert log == [] and session.pending == pending


async def test_reject_gives_the_reason_to_the_model() -> None:
    session, pending, log = await paused_session()
    events = await resume(session, pending.attempt_id, Reject("too expensive"))
    assert log == []
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.is_error and "too expensive" in result.content
    tool_msg = session.messages[-2]
    assert tool_msg.tool_results_parts[0].content == result.content


async def test_send_while_paused_is_refused() -> None:
    session, pending, _log = await paused_session()
    with pytest.raises(SessionBusy, match=pending.attempt_id):
        session.send("something else")


async def test_small_amounts_auto_run_until_the_session_cap() -> None:
    log: list[tuple[str, float]] = []
    tiers = UsdTiers(auto_below_usd=50, session_auto_cap_usd=100)
    agent = Agent(
        model=pay_model(40, 40, 40),
        tools=[payment_tool(log)],
        permissions=PermissionRules(usd_tiers=tiers),
    )
    auto_runs: list[float] = []

    def audit(t: Tool, args: Mapping[str, object], out: ToolOutput) -> None:
        auto_runs.append(float(str(args["amount_usd"])))

    agent = Agent(
        model=agent.model,
        tools=[payment_tool(log)],
        permissions=agent.permissions,
        on_auto_executed=audit,
    )
    session = Session(agent)
    events = await send(session, "pay three times")
    # 40 + 40 run automatically; the third would pass the $100 cap and asks.
    assert log == [("alice", 40.0), ("alice", 40.0)]
    pending = pending_of(events)
    assert "cap" in pending.reason
    await resume(session, pending.attempt_id, Approve())
    assert log == [("alice", 40.0)] * 3
    assert auto_runs == [40.0, 40.0]  # the approved one is not "auto"
    assert session.state.auto_spent_usd == 80.0


async def test_writes_after_a_paused_write_wait_for_it() -> None:
    log: list[tuple[str, float]] = []
    session = Session(Agent(model=pay_model(500, 5), tools=[payment_tool(log)]))
    events = await send(session, "pay twice")
    assert log == []  # the $5 write comes after the paused one, so it waits too
    pending = pending_of(events)
    await resume(session, pending.attempt_id, Approve())
    assert log == [("alice", 500.0), ("alice", 5.0)]


async def test_deny_list_and_callback_rewrite() -> None:
    log: list[tuple[str, float]] = []

    def policy(name: str, args: Mapping[str, object]) -> Allow | Deny | None:
        if float(str(args["amount_usd"])) > 1000:
            return Deny("amounts over $1,000 are never allowed")
        return Allow(updated_input={**args, "memo": "audited"})  # type: ignore[dict-item]  # the policy's arguments are JSON; its signature says object

    calls = [
        ScriptedCall("pay", {"to": "a", "amount_usd": 5000}),
        ScriptedCall("pay", {"to": "b", "amount_usd": 500}),
    ]
    model = ScriptedModel([ScriptedResponse(tool_calls=calls), "ok"])
    agent = Agent(
        model=model, tools=[payment_tool(log)], permissions=PermissionRules(can_use_tool=policy)
    )
    events = await send(Session(agent), "go")
    results = [e for e in events if isinstance(e, ToolResult)]
    assert results[0].is_error and "never allowed" in results[0].content
    assert log == [("b", 500.0)]  # allowed by the callback: no confirmation

    denied_agent = Agent(
        model=ScriptedModel([ScriptedResponse(tool_calls=calls[1:]), "ok"]),
        tools=[payment_tool(log)],
        permissions=PermissionRules(deny=("pa*",), allow=("pay",)),
    )
    events = await send(Session(denied_agent), "go")
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.is_error and "deny list" in result.content
    assert log == [("b", 500.0)]


async def test_preflight_error_skips_the_approval() -> None:
    ran: list[int] = []

    @tool(
        permission="confirm", preflight=lambda args: "too big" if int(str(args["n"])) > 10 else None
    )
    async def act(n: int) -> str:
        """Do it."""
        ran.append(n)
        return "ok"

    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("act", {"n": 11})]), "fine"])
    events = await send(Session(Agent(model=model, tools=[act])), "go")
    assert not any(isinstance(e, PendingAction) for e in events)
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.is_error and result.content == "too big" and ran == []


async def test_guard_forces_confirmation_and_blocks() -> None:
    ran: list[str] = []

    @tool
    async def shell(cmd: str) -> str:
        """Run a command."""
        ran.append(cmd)
        return "ok"

    def check(t: Tool, args: Mapping[str, object]) -> tuple[str, str] | None:
        cmd = str(args["cmd"])
        if "rm -rf /" in cmd:
            return ("block", "refusing to wipe the disk")
        if cmd.startswith("sudo"):
            return ("confirm", "runs as root")
        return None

    guard = Guard(name="shell-safety", before=check)  # type: ignore[arg-type]  # a guard may answer with a (decision, reason) tuple
    calls = [ScriptedCall("shell", {"cmd": "rm -rf /"}), ScriptedCall("shell", {"cmd": "sudo ls"})]
    model = ScriptedModel([ScriptedResponse(tool_calls=calls), "ok"])
    session = Session(Agent(model=model, tools=[shell], guards=[guard]))
    events = await send(session, "go")
    blocked = next(e for e in events if isinstance(e, ToolResult))
    assert blocked.is_error and "refusing to wipe" in blocked.content
    pending = pending_of(events)
    assert pending.reason == "runs as root"
    assert any(f.source == "shell-safety" and f.tier == "safety" for f in pending.findings)
    assert ran == []
    await resume(session, pending.attempt_id, Approve())
    assert ran == ["sudo ls"]


async def test_hooks_can_deny_a_tool_call_and_replace_a_result() -> None:
    @tool(read_only=True)
    async def peek(key: str) -> str:
        """Read a key."""
        return f"value of {key}"

    def before(t: Tool, args: Mapping[str, object]) -> str | None:
        return "secrets are off limits" if args["key"] == "secret" else None

    async def after(t: Tool, args: Mapping[str, object], out: ToolOutput) -> ToolOutput | None:
        return ToolOutput(content=out.content.upper())

    calls = [ScriptedCall("peek", {"key": "secret"}), ScriptedCall("peek", {"key": "name"})]
    model = ScriptedModel([ScriptedResponse(tool_calls=calls), "ok"])
    hooks = Hooks(before_tool_call=before, after_tool_call=after)
    events = await send(Session(Agent(model=model, tools=[peek], hooks=hooks)), "go")
    results = [e for e in events if isinstance(e, ToolResult)]
    by_content = sorted(r.content for r in results)
    assert by_content == ["VALUE OF NAME", "secrets are off limits"]


async def test_client_executed_tool_always_pauses_and_takes_the_client_result() -> None:
    class SignInput(BaseModel):
        to: str
        amount_usd: float

    sign = client_tool(
        "sign_transaction",
        description="Sign in the user's wallet.",
        input_schema=SignInput,
        modifiable_fields=("amount_usd",),
    )
    calls = [ScriptedCall("sign_transaction", {"to": "0xabc", "amount_usd": 1})]
    model = ScriptedModel([ScriptedResponse(tool_calls=calls), "signed!"])
    agent = Agent(model=model, tools=[sign], permissions=PermissionRules(allow=("*",)))
    session = Session(agent)
    events = await send(session, "sign")
    pending = pending_of(events)
    assert pending.client_executed and pending.reason == "executed by the client"
    with pytest.raises(ApprovalError, match="ClientResult"):
        session.resume(pending.attempt_id, Approve())
    events = await resume(session, pending.attempt_id, ClientResult("tx 0xdeadbeef"))
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.content == "tx 0xdeadbeef" and not result.is_error
    assert session.messages[-1].text == "signed!"


async def test_client_result_for_a_server_tool_is_refused() -> None:
    session, pending, log = await paused_session()
    with pytest.raises(ApprovalError, match="runs on the server"):
        session.resume(pending.attempt_id, ClientResult("fake"))
    assert log == []


async def test_paused_session_survives_a_new_process_through_the_store() -> None:
    store = InMemorySessionStore()
    log: list[tuple[str, float]] = []
    session = Session(Agent(model=pay_model(300), tools=[payment_tool(log)]), session_store=store)
    pending = pending_of(await send(session, "pay"))
    # A new "process": a new agent object and a session loaded from the store.
    agent2 = Agent(model=pay_model(300), tools=[payment_tool(log)])
    loaded = await Session.load(agent2, store, session.session_id)
    assert loaded.pending == pending
    assert loaded.messages == session.messages
    await resume(loaded, pending.attempt_id, Approve())
    assert log == [("alice", 300.0)]
    again = await Session.load(agent2, store, session.session_id)
    with pytest.raises(DecisionConflict):
        again.resume(pending.attempt_id, Approve())
    (record,) = again.state.writes.values()
    assert record.status == "done" and record.attempt_id == pending.attempt_id


async def test_checkpoint_store_logs_every_event_after_stream_started() -> None:
    store = InMemoryCheckpointStore()
    session = Session(Agent(model=pay_model(300), tools=[payment_tool([])]), checkpoint_store=store)
    events: list[Event] = []
    logged: list[Event] = []
    async for event in session.send("pay"):
        events.append(event)
        if event.type == "turn_complete":
            logged = await store.load(events[0].stream_id)  # type: ignore[union-attr]  # the first event is StreamStarted, which has a stream_id
    assert events[0].type == "stream_started"
    assert logged == events
    assert await store.load(events[0].stream_id) == events


async def test_a_paused_call_shows_its_tools_preview_and_a_running_one_computes_none() -> None:
    from mainspring.tools.policy import PREVIEW_SOURCE

    previews: list[dict[str, object]] = []

    def show(args: Mapping[str, object]) -> str:
        previews.append(dict(args))
        if args["to"] == "nobody":
            raise ValueError("no such contact")
        return f"send ${args['amount']} to {args['to']}"

    @tool(permission="confirm", preview=show)
    def transfer(to: str, amount: int) -> str:
        """Move money."""
        return "sent"

    def run(to: str, rules: PermissionRules | None = None) -> Agent:
        call = ScriptedCall("transfer", {"to": to, "amount": 5})
        model = ScriptedModel([ScriptedResponse(tool_calls=[call]), "ok"])
        return Agent(model=model, tools=[transfer], permissions=rules or PermissionRules())

    pending = pending_of(await send(Session(run("ada")), "pay"))
    shown = next(f for f in pending.findings if f.source == PREVIEW_SOURCE)
    assert shown.message == "send $5 to ada"
    broken = pending_of(await send(Session(run("nobody")), "pay"))
    failed = next(f for f in broken.findings if f.source == PREVIEW_SOURCE)
    assert failed.message.startswith("preview unavailable: no such contact")
    previews.clear()
    events = await send(Session(run("ada", PermissionRules(allow=("transfer",)))), "pay")
    assert "pending_action" not in types(events) and previews == []  # ran: no preview


async def test_an_approved_write_that_suspends_on_a_nested_decision_pauses_again() -> None:
    """Approval first, then the tool waits on a nested run; a new store-backed session resumes."""
    ran: list[str] = []

    @tool(permission="confirm")
    async def transfer(amount: int, ctx: ToolContext) -> str:
        """Move money; the bank asks the user for a code first."""
        if ctx.decision is None:
            ctx.suspend(
                PendingAction(
                    attempt_id="bank",
                    tool_use_id=ctx.tool_use_id,
                    turn_index=ctx.turn_index,
                    name="bank_code",
                    input={},
                    description="the bank's code",
                    modifiable_fields=("code",),
                    details={"asked": "code"},
                )
            )
        assert ctx.suspended_on is not None and ctx.suspended_on.details == {"asked": "code"}
        assert isinstance(ctx.decision, Approve)
        ran.append(f"{amount} with {ctx.decision.edits['code']}")
        return "moved"

    def agent() -> Agent:
        model = ScriptedModel(
            [ScriptedResponse(tool_calls=[ScriptedCall("transfer", {"amount": 5})]), "ok"]
        )
        return Agent(model=model, tools=[transfer])

    store = InMemorySessionStore()
    session = Session(agent(), session_store=store)
    first = pending_of(await send(session, "pay"))
    assert first.nested is None
    nested = pending_of(await resume(session, first.attempt_id, Approve()))
    assert nested.nested is not None and nested.modifiable_fields == ("code",)
    assert ran == [], "it waits on the nested decision"
    again = await Session.load(agent(), store, session.session_id)
    events = await resume(again, nested.attempt_id, Approve(edits={"code": "1234"}))
    assert [e.content for e in events if isinstance(e, ToolResult)] == ["moved"]
    assert ran == ["5 with 1234"]


async def test_a_write_parked_on_a_nested_decision_survives_crash_recovery() -> None:
    """A crash while a write waits on a nested decision: recovery keeps it ``started``.

    The write stopped itself to wait (it was not cut off mid-run), so it is
    not a write of unknown outcome: the decision runs it again, and the ledger
    moves ``started`` → ``started`` → ``done``, never back from ``unknown``.
    """
    ran: list[str] = []

    @tool(permission="confirm")
    async def transfer(amount: int, ctx: ToolContext) -> str:
        """Move money; the bank asks the user for a code first."""
        if ctx.decision is None:
            ctx.suspend(
                PendingAction(
                    attempt_id="bank",
                    tool_use_id=ctx.tool_use_id,
                    turn_index=ctx.turn_index,
                    name="bank_code",
                    input={},
                    description="the bank's code",
                )
            )
        ran.append(str(amount))
        return "moved"

    def agent() -> Agent:
        call = ScriptedResponse(tool_calls=[ScriptedCall("transfer", {"amount": 5})])
        model = ScriptedModel(lambda messages, tools: "ok" if messages[-1].role == "tool" else call)
        return Agent(model=model, tools=[transfer])

    store = InMemorySessionStore()
    session = Session(agent(), session_store=store)
    first = pending_of(await send(session, "pay"))
    nested = pending_of(await resume(session, first.attempt_id, Approve()))
    parked = await store.load(session.session_id)
    assert parked is not None and parked.writes[nested.tool_use_id].status == "started"
    parked.active_stream = "a-stream-whose-process-died"  # what a crash leaves on record
    await store.save(parked)

    again = await Session.load(agent(), store, session.session_id)
    events = await resume(again, nested.attempt_id, Approve())
    assert [e.content for e in events if isinstance(e, ToolResult)] == ["moved"]
    assert ran == ["5"]
    assert again.state.writes[nested.tool_use_id].status == "done"
    assert again.state.active_stream is None and again.state.turn is None
