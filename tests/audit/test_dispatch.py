"""The dispatch path records decisions, writes, refusals and findings in the audit log."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from mainspring import (
    Agent,
    Approve,
    Guard,
    PermissionRules,
    Reject,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    ToolResult,
    UsdTiers,
    tool,
    usd,
)
from mainspring._lowlevel.json_value import JsonValue
from mainspring.audit import AuditEntry, AuditLog, InMemoryAuditStore, verify_log
from mainspring.decisions import canonical_input_hash
from mainspring.engine.signing import SigningKey
from mainspring.tools import Tool
from mainspring.tools.policy import ToolInput
from tests.helpers import pending_of, resume, send

pytestmark = pytest.mark.anyio

KEY = SigningKey.generate("audit-test")


def pay_tool(paid: list[float]) -> Tool:
    @tool(permission=usd(lambda args: float(str(args["amount_usd"]))), modifiable_fields=("memo",))
    async def pay(to: str, amount_usd: float, memo: str = "") -> str:
        """Send money.

        Args:
            to: Recipient.
            amount_usd: Amount in USD.
            memo: A note.
        """
        paid.append(amount_usd)
        return f"paid {to} ${amount_usd:g}"

    return pay


def pay_model(*amounts: float) -> ScriptedModel:
    calls = [ScriptedCall("pay", {"to": "alice", "amount_usd": a}) for a in amounts]
    return ScriptedModel(
        lambda messages, tools: (
            "done" if messages[-1].role == "tool" else ScriptedResponse(tool_calls=calls)
        )
    )


def audited(
    amounts: tuple[float, ...], paid: list[float], **kwargs: object
) -> tuple[Agent, InMemoryAuditStore]:
    store = InMemoryAuditStore()
    log = AuditLog(store, KEY, policy_version="policy-7")
    agent = Agent(model=pay_model(*amounts), tools=[pay_tool(paid)], audit=log, **kwargs)  # type: ignore[arg-type]  # the test passes Agent's own fields
    return agent, store


async def entries(store: InMemoryAuditStore) -> list[AuditEntry]:
    verified = await verify_log(store, "audit", {KEY.key_id: KEY.public_key})
    assert verified.ok, verified.reason
    return await AuditLog(store, KEY).entries()


async def test_an_auto_executed_write_is_on_record_before_its_result_is_reported() -> None:
    paid: list[float] = []
    agent, store = audited((5.0,), paid)
    session = Session(agent)
    session._state.principal = "user:ann"  # as a server sets the session's owner
    seen_before_result = [
        len(store.entries.get("audit", {}))
        async for event in session.send("pay alice")
        if isinstance(event, ToolResult)
    ]
    assert paid == [5.0] and seen_before_result == [1]
    (entry,) = await entries(store)
    assert entry.kind == "auto_executed" and entry.outcome == "ok"
    assert entry.tool == "pay" and entry.amount_usd == 5.0
    assert entry.principal == "user:ann" and entry.session_id == session.session_id
    assert entry.args_hash == canonical_input_hash({"to": "alice", "amount_usd": 5.0, "memo": ""})
    assert entry.policy_version == "policy-7" and entry.seq == 1


async def test_an_approval_is_recorded_then_the_write_it_allowed() -> None:
    paid: list[float] = []
    agent, store = audited((500.0,), paid)
    session = Session(agent)
    pending = pending_of(await send(session, "pay alice"))
    assert store.entries == {}  # a pause decides nothing yet
    await resume(session, pending.attempt_id, Approve(edits={"memo": "rent"}))
    decided, executed = await entries(store)
    assert decided.kind == "edited" and decided.outcome == "approved"
    assert decided.attempt_id == executed.attempt_id == pending.attempt_id
    edited: dict[str, JsonValue] = {"to": "alice", "amount_usd": 500.0, "memo": "rent"}
    assert decided.args_hash == executed.args_hash == canonical_input_hash(edited)
    assert decided.amount_usd == 500.0
    assert executed.kind == "executed" and executed.outcome == "ok"
    assert paid == [500.0]


async def test_a_rejection_is_recorded_and_nothing_runs() -> None:
    paid: list[float] = []
    agent, store = audited((500.0,), paid)
    session = Session(agent)
    pending = pending_of(await send(session, "pay alice"))
    await resume(session, pending.attempt_id, Reject("not today"))
    (entry,) = await entries(store)
    assert entry.kind == "rejected" and entry.outcome == "rejected"
    assert entry.detail == "not today" and paid == []
    assert entry.args_hash == pending.input_hash


async def test_a_permission_denial_is_recorded() -> None:
    paid: list[float] = []
    agent, store = audited((5.0,), paid, permissions=PermissionRules(deny=("pay",)))
    await send(Session(agent), "pay alice")
    (entry,) = await entries(store)
    assert entry.kind == "denied" and entry.outcome == "denied" and paid == []
    assert entry.tool == "pay"


async def test_a_guard_block_is_recorded_with_its_finding() -> None:
    def no_alice(t: Tool, args: ToolInput) -> tuple[str, str] | None:
        return ("block", "alice is on a sanctions list") if args.get("to") == "alice" else None

    guard = Guard(name="sanctions", tier="safety", before=no_alice)  # type: ignore[arg-type]  # the literal action
    paid: list[float] = []
    agent, store = audited((5.0,), paid, guards=[guard])
    await send(Session(agent), "pay alice")
    finding, blocked = await entries(store)
    assert finding.kind == "guard_finding" and finding.outcome == "block"
    assert "sanctions" in (finding.detail or "")
    assert blocked.kind == "blocked" and blocked.amount_usd == 5.0 and paid == []


async def test_a_guard_confirm_is_a_finding_then_the_decision() -> None:
    def big(t: Tool, args: ToolInput) -> tuple[str, str] | None:
        return ("confirm", "check the payee") if t.name == "pay" else None

    guard = Guard(name="payee", tier="financial", before=big)  # type: ignore[arg-type]  # the literal action
    paid: list[float] = []
    agent, store = audited((5.0,), paid, guards=[guard])
    session = Session(agent)
    pending = pending_of(await send(session, "pay alice"))
    await resume(session, pending.attempt_id, Approve())
    kinds = [e.kind for e in await entries(store)]
    assert kinds == ["guard_finding", "approved", "executed"]


async def test_without_an_audit_log_nothing_changes() -> None:
    paid: list[float] = []
    session = Session(Agent(model=pay_model(5.0), tools=[pay_tool(paid)]))
    events = await send(session, "pay alice")
    assert paid == [5.0] and any(isinstance(e, ToolResult) for e in events)


async def test_many_sessions_share_one_chain() -> None:
    paid: list[float] = []
    tiers = UsdTiers(auto_below_usd=50, session_auto_cap_usd=1000)
    agent, store = audited((1.0, 2.0), paid, permissions=PermissionRules(usd_tiers=tiers))
    sessions = [Session(agent) for _ in range(3)]
    for session in sessions:
        await send(session, "pay")
    got = await entries(store)
    assert [e.seq for e in got] == [1, 2, 3, 4, 5, 6]
    by_session: Mapping[str | None, int] = {
        s.session_id: sum(e.session_id == s.session_id for e in got) for s in sessions
    }
    assert set(by_session.values()) == {2}


async def test_an_expiry_slots_in_as_its_own_kind() -> None:
    paid: list[float] = []
    agent, store = audited((500.0,), paid)
    session = Session(agent)
    pending = pending_of(await send(session, "pay alice"))
    assert agent.audit is not None
    await agent.audit.trail(session.session_id, None).expired(pending)
    (entry,) = await entries(store)
    assert (entry.kind, entry.outcome, entry.attempt_id) == (
        "expired",
        "expired",
        pending.attempt_id,
    )
    assert entry.args_hash == pending.input_hash and paid == []


async def test_the_principal_is_the_caller_the_run_is_for() -> None:
    from mainspring.principals import Caller
    from mainspring.tools.context import RunScope, run_scope

    paid: list[float] = []
    agent, store = audited((500.0,), paid)
    session = Session(agent)
    session._state.principal = "owner"
    with run_scope(RunScope(caller=Caller("bob"))):
        pending = pending_of(await send(session, "pay alice"))
    with run_scope(RunScope(caller=Caller("carol"))):  # who decided, not who asked
        await resume(session, pending.attempt_id, Approve())
    decided, executed = await entries(store)
    assert decided.principal == executed.principal == "user:carol"


async def test_an_engine_s_direct_calls_are_on_record_under_their_caller() -> None:
    from mainspring.engine import Engine, ManagementPolicy
    from mainspring.principals import Caller

    paid: list[float] = []
    store = InMemoryAuditStore()
    engine = Engine(
        "shop",
        policy=ManagementPolicy(visibility="public"),
        audit=AuditLog(store, KEY),
    ).add_tool(pay_tool(paid), export=True)
    dana = Caller("dana")
    result = await engine.tool_call(dana, "pay", {"to": "bob", "amount_usd": 3.0})
    assert paid == [3.0] and result.pending is None
    (entry,) = await entries(store)
    assert (entry.kind, entry.principal, entry.amount_usd) == ("auto_executed", "user:dana", 3.0)
