"""Approvals with a lifetime, an approver and a policy version (AISVS 9.2.3, 9.2.5, 14.2.2).

Time is the approval policy's clock, a plain object the tests move: nothing
sleeps, nothing races an expiry.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from mainspring import (
    Agent,
    ApprovalError,
    ApprovalExpired,
    ApprovalExpiring,
    ApprovalPolicy,
    ApprovalRule,
    Approve,
    ApproverRefused,
    DecisionConflict,
    Expire,
    PendingAction,
    PermissionRules,
    PolicyChanged,
    Reject,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    StreamStarted,
    ToolResult,
    TurnComplete,
    UnknownAttempt,
    tool,
    usd,
)
from mainspring.approvals import DEFAULT_TTL_S
from mainspring.decisions import decision_record
from mainspring.errors import ConfigError
from mainspring.messages import Message
from mainspring.models.base import ToolSpec
from mainspring.state import SessionState
from mainspring.stores import InMemoryCheckpointStore, InMemorySessionStore
from mainspring.testing import collect
from tests.helpers import pending_of, resume, send, types

pytestmark = pytest.mark.anyio

T0 = 1_800_000_000.0


class Clock:
    """Now, as the tests set it (Unix seconds)."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


paid: list[tuple[str, float]] = []


@tool(permission=usd(lambda args: float(str(args["amount_usd"]))))
def pay(to: str, amount_usd: float) -> str:
    """Send money to someone."""
    paid.append((to, amount_usd))
    return f"paid {to} ${amount_usd:g}"


@tool(permission="confirm")
def delete_account(name: str) -> str:
    """Close an account for good."""
    paid.append((f"deleted {name}", 0.0))
    return f"deleted {name}"


asked: list[int] = []
"""How many times a scripted model was asked (appended to on each call)."""


def scripted(*calls: ScriptedCall) -> ScriptedModel:
    """All ``calls`` in one step; then it answers with what the last tool result said."""

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
        asked.append(len(messages))
        last = messages[-1]
        if last.role == "tool":
            return ScriptedResponse(text="told: " + last.tool_results_parts[-1].content)
        return ScriptedResponse(tool_calls=list(calls))

    return ScriptedModel(answer)


def agent(
    clock: Clock,
    *calls: ScriptedCall,
    policy: ApprovalPolicy | None = None,
    version: str = "",
) -> Agent:
    approvals = policy or ApprovalPolicy(clock=clock)
    return Agent(
        model=scripted(*(calls or (ScriptedCall("pay", {"to": "bob", "amount_usd": 250}),))),
        tools=[pay, delete_account],
        permissions=PermissionRules(approvals=approvals, version=version),
    )


async def paused(clock: Clock, **kwargs: object) -> tuple[Session, PendingAction]:
    paid.clear()
    session = Session(agent(clock, **kwargs))  # type: ignore[arg-type]  # the test's keyword arguments, of every shape
    pending = pending_of(await send(session, "pay bob"))
    assert paid == []
    return session, pending


# ------------------------------------------------------------------ lifetime


async def test_aisvs_9_2_5_every_pending_action_carries_a_bounded_lifetime() -> None:
    clock = Clock()
    session, pending = await paused(clock)
    assert pending.expires_at == T0 + DEFAULT_TTL_S == T0 + 3600
    assert session.pending == pending  # on record in the state, not only in the event
    # Per tool and per USD tier: the tool's rule wins, else the highest tier reached.
    policy = ApprovalPolicy(
        clock=clock,
        tools={"delete_account": ApprovalRule(ttl_s=60)},
        usd_tiers=((100.0, ApprovalRule(ttl_s=600)), (1000.0, ApprovalRule(ttl_s=120))),
    )
    assert policy.rule_for("delete_account", None).ttl_s == 60
    assert policy.rule_for("pay", 250.0).ttl_s == 600
    assert policy.rule_for("pay", 5000.0).ttl_s == 120
    assert policy.rule_for("pay", None).ttl_s == DEFAULT_TTL_S
    _, big = await paused_with(clock, policy, "pay", {"to": "bob", "amount_usd": 5000})
    assert big.expires_at == T0 + 120
    _, gone = await paused_with(clock, policy, "delete_account", {"name": "bob"})
    assert gone.expires_at == T0 + 60


async def paused_with(
    clock: Clock, policy: ApprovalPolicy, name: str, args: dict[str, object]
) -> tuple[Session, PendingAction]:
    paid.clear()
    session = Session(agent(clock, ScriptedCall(name, args), policy=policy))  # type: ignore[arg-type]  # the test's keyword arguments, of every shape
    return session, pending_of(await send(session, "go"))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ttl_s": 0}, "ttl_s must be positive"),
        ({"ttl_s": float("nan")}, "ttl_s must be positive"),
        ({"quorum": 0}, "quorum"),
        ({"quorum": True}, "quorum"),
    ],
)
def test_a_bad_approval_rule_is_refused_when_built(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ApprovalRule(**kwargs)  # type: ignore[arg-type]  # the bad input under test


def test_a_bad_usd_tier_is_refused_when_built() -> None:
    with pytest.raises(ConfigError, match="usd_tiers"):
        ApprovalPolicy(usd_tiers=((-1.0, ApprovalRule()),))


async def test_a_rule_without_expiry_never_expires() -> None:
    clock = Clock()
    policy = ApprovalPolicy(clock=clock, default=ApprovalRule(ttl_s=float("inf")))
    session, pending = await paused_with(clock, policy, "pay", {"to": "bob", "amount_usd": 250})
    assert pending.expires_at is None
    clock.now += 10 * 365 * 86400
    with pytest.raises(ApprovalError, match="has not expired"):
        session.resume(pending.attempt_id, Expire())
    await resume(session, pending.attempt_id, Approve())
    assert paid == [("bob", 250.0)]


async def test_aisvs_14_2_2_an_expired_approval_fails_closed() -> None:
    clock = Clock()
    session, pending = await paused(clock)
    clock.now = pending.expires_at or 0  # the very second it expires
    with pytest.raises(ApprovalExpired, match="expired at") as caught:
        session.resume(pending.attempt_id, Approve())
    assert caught.value.expires_at == pending.expires_at
    assert caught.value.attempt_id == pending.attempt_id
    with pytest.raises(ApprovalExpired):
        session.resume(pending.attempt_id, Reject())
    assert paid == [] and session.pending == pending  # nothing ran, nothing moved
    # Expire settles it: the write never runs; the model is told it expired.
    events = await resume(session, pending.attempt_id, Expire())
    results = [e for e in events if isinstance(e, ToolResult)]
    assert len(results) == 1 and results[0].is_error
    assert "expired" in results[0].content and "did not run" in results[0].content
    assert "rejected this action" not in results[0].content  # its own outcome, not a reject
    assert session.messages[-1].text.startswith("told: ") and "expired" in session.messages[-1].text
    assert json.loads(session.state.decided[pending.attempt_id])["kind"] == "expired"
    assert isinstance(events[-1], TurnComplete) and events[-1].stop_reason == "end_turn"
    assert paid == []
    assert session.state.pending is None
    # A decision arriving afterwards is refused; still nothing runs.
    with pytest.raises(DecisionConflict):
        session.resume(pending.attempt_id, Approve())
    assert paid == []


async def test_expire_before_the_expiry_is_refused_and_the_approval_still_works() -> None:
    clock = Clock()
    session, pending = await paused(clock)
    clock.now = (pending.expires_at or 0) - 1
    with pytest.raises(ApprovalError, match="has not expired"):
        session.resume(pending.attempt_id, Expire())
    await resume(session, pending.attempt_id, Approve())
    assert paid == [("bob", 250.0)]


async def test_an_expiry_is_checked_again_when_the_run_takes_the_session() -> None:
    """Validated before the expiry, started after it: the run's own check refuses it."""
    clock = Clock()
    session, pending = await paused(clock)
    stream = session.resume(pending.attempt_id, Approve())
    clock.now = pending.expires_at or 0
    with pytest.raises(ApprovalExpired):
        await collect(stream)
    assert paid == [] and session.pending == pending
    assert pending.attempt_id not in session.state.decided  # not claimed: Expire still can


async def test_an_expired_action_cannot_be_regenerated_back_to_life() -> None:
    clock = Clock()
    quotes = iter((10.0, 11.0))

    @tool(permission="confirm", regenerate=lambda args: {**args, "price": next(quotes)})
    def buy(item: str, price: float) -> str:
        """Buy at a quoted price."""
        return "bought"

    session = Session(
        Agent(
            model=scripted(ScriptedCall("buy", {"item": "x", "price": 9.0})),
            tools=[buy],
            permissions=PermissionRules(approvals=ApprovalPolicy(clock=clock)),
        )
    )
    pending = pending_of(await send(session, "buy"))
    clock.now = pending.expires_at or 0
    with pytest.raises(ApprovalExpired):
        session.regenerate(pending.attempt_id)


async def test_an_expired_action_survives_a_new_process_and_is_still_refused() -> None:
    clock = Clock()
    store = InMemorySessionStore()
    paid.clear()
    first = Session(agent(clock), session_store=store)
    pending = pending_of(await send(first, "pay bob"))
    clock.now = T0 + 7200
    again = await Session.load(agent(clock), store, first.session_id)
    assert again.pending is not None and again.pending.expires_at == pending.expires_at
    with pytest.raises(ApprovalExpired):
        again.resume(pending.attempt_id, Approve())
    await resume(again, pending.attempt_id, Expire())
    assert paid == []
    stored = await store.load(first.session_id)
    assert stored is not None and stored.pending is None


# ------------------------------------------------------------------ warning


async def test_a_followed_paused_stream_warns_before_the_expiry() -> None:
    clock = Clock()
    policy = ApprovalPolicy(clock=clock, warn_before_s=300)
    paid.clear()
    checkpoints = InMemoryCheckpointStore()
    session = Session(agent(clock, policy=policy), checkpoint_store=checkpoints)
    events = await send(session, "pay bob")
    stream_id = next(e.stream_id for e in events if isinstance(e, StreamStarted))
    pending = pending_of(events)
    expires_at = pending.expires_at or 0

    # Before the lead time: the replay is the log as it was, no warning.
    quiet = await collect(session.send(resume_stream_id=stream_id))
    assert types(quiet) == types(events)

    clock.now = expires_at - 120
    warned = await collect(session.send(resume_stream_id=stream_id))
    warning = warned[-3]
    assert types(warned) == [*types(events)[:-2], "approval_expiring", *types(events)[-2:]]
    assert isinstance(warning, ApprovalExpiring)
    assert warning.attempt_id == pending.attempt_id and warning.seconds_left == 120
    assert warning.expires_at == expires_at
    assert len(await checkpoints.load(stream_id)) == len(events)  # transient: not logged

    clock.now = expires_at  # expired: no warning any more (a decision is refused)
    assert types(await collect(session.send(resume_stream_id=stream_id))) == types(events)


# ------------------------------------------------------------------ approver, policy


async def test_aisvs_9_2_3_the_approver_and_the_policy_version_are_bound() -> None:
    clock = Clock()
    session, pending = await paused(clock, version="2026-12-01")
    assert pending.policy_version == "2026-12-01"
    # A decision made under another policy version is refused; nothing runs.
    with pytest.raises(PolicyChanged) as caught:
        session.resume(pending.attempt_id, Approve(principal="ann", policy_version="2026-11-01"))
    assert (caught.value.expected, caught.value.given) == ("2026-12-01", "2026-11-01")
    assert paid == []
    # The approver and the version are on the decision's record in the store.
    decision = Approve(principal="ann", policy_version="2026-12-01")
    await resume(session, pending.attempt_id, decision)
    record = json.loads(session.state.decided[pending.attempt_id])
    assert record["principal"] == "ann" and record["policy_version"] == "2026-12-01"
    assert paid == [("bob", 250.0)]
    # Decisions without them are recorded as before they existed.
    assert decision_record(Approve()) == '{"edits":{},"kind":"approved"}'


async def test_a_policy_changed_while_paused_refuses_every_approval() -> None:
    clock = Clock()
    store = InMemorySessionStore()
    paid.clear()
    first = Session(agent(clock, version="v1"), session_store=store)
    pending = pending_of(await send(first, "pay bob"))
    deployed = await Session.load(agent(clock, version="v2"), store, first.session_id)
    with pytest.raises(PolicyChanged, match="'v1'"):
        deployed.resume(pending.attempt_id, Approve())
    with pytest.raises(PolicyChanged):
        deployed.resume(pending.attempt_id, Reject())
    assert paid == []


async def test_self_approval_is_refused_where_the_rule_says_so() -> None:
    clock = Clock()
    policy = ApprovalPolicy(clock=clock, default=ApprovalRule(allow_self_approval=False))
    paid.clear()
    # A server sets the session's principal to its caller's.
    state = SessionState(session_id="s-1", agent_name="agent", principal="requester")
    session = Session(agent(clock, policy=policy), state=state)
    pending = pending_of(await send(session, "pay bob"))
    assert pending.requested_by == "requester" and not pending.allow_self_approval
    with pytest.raises(ApproverRefused, match="may not approve") as caught:
        session.resume(pending.attempt_id, Approve(principal="requester"))
    assert caught.value.principal == "requester"
    with pytest.raises(ApproverRefused, match="needs the approving principal"):
        session.resume(pending.attempt_id, Approve())
    assert paid == []
    await resume(session, pending.attempt_id, Approve(principal="auditor"))
    assert paid == [("bob", 250.0)]


# ------------------------------------------------------------------ partial batches


async def test_a_partial_batch_leaves_the_rest_pending_and_the_turn_waits_for_all() -> None:
    clock = Clock()
    calls = [ScriptedCall("pay", {"to": name, "amount_usd": 250}) for name in ("a", "b", "c", "d")]
    paid.clear()
    session = Session(agent(clock, *calls))
    asked.clear()
    first = pending_of(await send(session, "pay four"))
    assert len(asked) == 1
    # Deciding one leaves the next pending; the model is not asked until all are decided.
    second = pending_of(await resume(session, first.attempt_id, Approve()))
    assert second.input["to"] == "b" and paid == [("a", 250.0)]
    third = pending_of(await resume(session, second.attempt_id, Reject("not b")))
    assert third.input["to"] == "c"
    # One of them expires: only it is settled as expired; the last one still waits.
    clock.now = third.expires_at or 0
    with pytest.raises(ApprovalExpired):
        session.resume(third.attempt_id, Approve())
    fourth = pending_of(await resume(session, third.attempt_id, Expire()))
    assert fourth.input["to"] == "d" and len(asked) == 1
    assert fourth.expires_at is not None and fourth.expires_at > clock.now  # its own lifetime
    # Every decided attempt stays decided; none is orphaned or decided twice.
    for done in (first, second, third):
        with pytest.raises((DecisionConflict, UnknownAttempt)):
            session.resume(done.attempt_id, Approve())
    events = await resume(session, fourth.attempt_id, Approve())
    assert paid == [("a", 250.0), ("d", 250.0)]
    assert len(asked) == 2
    assert isinstance(events[-1], TurnComplete) and events[-1].stop_reason == "end_turn"
    outcomes = [json.loads(v)["kind"] for v in session.state.decided.values()]
    assert outcomes == ["approved", "rejected", "expired", "approved"]
    results = session.messages[-2].tool_results_parts
    assert [r.is_error for r in results] == [False, True, True, False]


# ------------------------------------------------------------------ the engine door


@tool(permission="confirm")
def order(sku: str, qty: int) -> str:
    """Order stock."""
    paid.append((sku, float(qty)))
    return f"ordered {qty} of {sku}"


async def test_the_engine_door_binds_the_caller_and_fails_closed_on_expiry() -> None:
    from mainspring.engine import Caller, Engine, ManagementPolicy, ToolCallResult

    clock = Clock()
    bob = Caller("bob")
    paid.clear()

    def shop(rule: ApprovalRule) -> Engine:
        approvals = ApprovalPolicy(clock=clock, default=rule)
        rules = PermissionRules(approvals=approvals, version="v2")
        policy = ManagementPolicy(controller=Caller("ops"), visibility="protected")
        return Engine("shop", policy=policy, permissions=rules).add_tool(order, export=True)

    strict = shop(ApprovalRule(allow_self_approval=False))
    first = await strict.tool_call(bob, "order", {"sku": "A1", "qty": 5})
    assert first.pending is not None and first.pending.requested_by == "bob"
    # The caller is the approver: bob may not approve his own call under this rule.
    with pytest.raises(ApproverRefused, match="may not approve"):
        await strict.decide(bob, first.pending.attempt_id, Approve())
    assert await strict.pending(bob) == (first.pending,) and paid == []

    engine = shop(ApprovalRule(ttl_s=60))
    call = await engine.tool_call(bob, "order", {"sku": "A1", "qty": 5})
    assert call.pending is not None and call.pending.expires_at == T0 + 60
    assert call.pending.policy_version == "v2"
    with pytest.raises(PolicyChanged):
        await engine.decide(bob, call.pending.attempt_id, Approve(policy_version="v1"))
    clock.now = T0 + 60
    with pytest.raises(ApprovalExpired):
        await engine.decide(bob, call.pending.attempt_id, Approve())
    assert await engine.pending(bob) == (call.pending,) and paid == []  # still waiting
    done = await engine.decide(bob, call.pending.attempt_id, Expire())
    assert isinstance(done, ToolCallResult) and not done.ran and done.is_error
    assert "expired" in done.content and paid == []
    assert await engine.pending(bob) == ()
