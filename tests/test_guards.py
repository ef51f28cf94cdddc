"""Tests for guards: checks before a call, hints after it."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import JsonValue

from mainspring import (
    Agent,
    Approve,
    Hooks,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    ToolResult,
)
from mainspring.events import Finding
from mainspring.guards import Guard, GuardReport, check_after, check_before
from mainspring.tools import Tool, ToolOutput, tool
from mainspring.tools.policy import ToolInput
from tests.helpers import pending_of, resume, send

Action = Literal["block", "confirm", "hint"]
Tier = Literal["safety", "financial", "ux"]


@tool
def transfer(to: str, amount: float) -> str:
    """Move money."""
    return to


def fixed(name: str, tier: Tier, action: Action, message: str) -> Guard:
    def before(t: Tool, args: ToolInput) -> tuple[Action, str] | None:
        return action, message

    return Guard(name=name, tier=tier, before=before)


def finding(name: str, tier: Tier, action: Action, message: str) -> Finding:
    return Finding(source=name, message=message, tier=tier, action=action)


ARGS: dict[str, JsonValue] = {"to": "bob", "amount": 10.0}


def test_no_guards_empty_report() -> None:
    report = check_before([], transfer, ARGS)
    assert report == GuardReport()
    assert report.blocked is None
    assert report.needs_confirm is False
    assert report.hints == ()


def test_findings_sorted_by_tier() -> None:
    guards = [
        fixed("ux1", "ux", "hint", "u1"),
        fixed("fin1", "financial", "confirm", "f1"),
        fixed("ux2", "ux", "hint", "u2"),
        fixed("safe1", "safety", "hint", "s1"),
        fixed("fin2", "financial", "hint", "f2"),
    ]
    report = check_before(guards, transfer, ARGS)
    assert report.findings == (
        finding("safe1", "safety", "hint", "s1"),
        finding("fin1", "financial", "confirm", "f1"),
        finding("fin2", "financial", "hint", "f2"),
        finding("ux1", "ux", "hint", "u1"),
        finding("ux2", "ux", "hint", "u2"),
    )
    # Hints keep the tier order; the single confirm is noticed.
    assert report.hints == ("s1", "f2", "u1", "u2")
    assert report.needs_confirm is True
    assert report.blocked is None


def test_blocked_is_highest_tier_block() -> None:
    guards = [
        fixed("ux_block", "ux", "block", "too many calls"),
        fixed("fin_block", "financial", "block", "insufficient funds"),
        fixed("safe_hint", "safety", "hint", "double check"),
    ]
    report = check_before(guards, transfer, ARGS)
    assert report.blocked == finding("fin_block", "financial", "block", "insufficient funds")
    assert report.needs_confirm is False
    assert report.hints == ("double check",)


def test_default_tier_is_safety() -> None:
    def before(t: Tool, args: ToolInput) -> tuple[Action, str] | None:
        return "block", "unsafe"

    guards = [fixed("ux", "ux", "block", "ux says no"), Guard(name="plain", before=before)]
    report = check_before(guards, transfer, ARGS)
    assert report.blocked == finding("plain", "safety", "block", "unsafe")


def test_guards_see_tool_and_input_and_may_pass() -> None:
    seen: list[tuple[str, ToolInput]] = []

    def limit(t: Tool, args: ToolInput) -> tuple[Action, str] | None:
        seen.append((t.name, args))
        amount = args["amount"]
        if isinstance(amount, float) and amount > 100:
            return "confirm", "large transfer"
        return None

    guards = [Guard(name="limit", tier="financial", before=limit)]
    small = check_before(guards, transfer, ARGS)
    assert small.findings == ()
    assert small.needs_confirm is False
    big_args: dict[str, JsonValue] = {"to": "bob", "amount": 500.0}
    big = check_before(guards, transfer, big_args)
    assert big.findings == (finding("limit", "financial", "confirm", "large transfer"),)
    assert big.needs_confirm is True
    assert seen == [("transfer", ARGS), ("transfer", big_args)]


def test_guards_without_before_are_skipped() -> None:
    def after(t: Tool, args: ToolInput, out: ToolOutput) -> str | None:
        return "after only"

    report = check_before([Guard(name="a", after=after)], transfer, ARGS)
    assert report.findings == ()


def test_check_after_hints_in_tier_order() -> None:
    calls: list[str] = []

    def hint(name: str, text: str | None) -> Guard:
        tier: Tier = "ux" if name.startswith("ux") else "safety"

        def after(t: Tool, args: ToolInput, out: ToolOutput) -> str | None:
            calls.append(name)
            assert t is transfer
            assert args == ARGS
            return f"{text}: {out.content}" if text else text

        return Guard(name=name, tier=tier, after=after)

    guards = [
        hint("ux_a", "consider a summary"),
        Guard(name="before_only", before=lambda t, a: None),
        hint("safe_a", "verify recipient"),
        hint("safe_none", None),
        hint("ux_empty", ""),
    ]
    hints = check_after(guards, transfer, ARGS, ToolOutput(content="sent"))
    assert hints == ["verify recipient: sent", "consider a summary: sent"]
    # Empty and None hints are dropped; every guard with an `after` still ran.
    assert sorted(calls) == ["safe_a", "safe_none", "ux_a", "ux_empty"]


def test_check_after_financial_between_safety_and_ux() -> None:
    def make(name: str, tier: Tier) -> Guard:
        return Guard(name=name, tier=tier, after=lambda t, a, o: name)

    guards = [make("ux", "ux"), make("fin", "financial"), make("safe", "safety")]
    assert check_after(guards, transfer, ARGS, ToolOutput(content="")) == ["safe", "fin", "ux"]


def test_check_after_no_guards() -> None:
    assert check_after([], transfer, ARGS, ToolOutput(content="x")) == []


# --- through the engine: pre-execution hints reach the model and the host ----------


@tool(read_only=True)
def balance(account: str) -> str:
    """Read a balance."""
    return "$12"


@tool(permission="confirm")
def pay(to: str, amount: float) -> str:
    """Pay."""
    return "paid"


def hinting(message: str) -> Guard:
    def before(t: Tool, args: ToolInput) -> tuple[Action, str] | None:
        return "hint", f"{message} ({t.name})"

    return Guard(name="ux-hint", tier="ux", before=before)


@pytest.mark.anyio
async def test_a_pre_execution_hint_reaches_the_model_and_the_host_without_a_pause() -> None:
    fired: list[tuple[str, Finding]] = []

    def on_guard(t: Tool, args: ToolInput, f: Finding) -> None:
        fired.append((t.name, f))

    model = ScriptedModel(
        [ScriptedResponse(tool_calls=[ScriptedCall("balance", {"account": "main"})]), "ok"]
    )
    agent = Agent(
        model=model,
        tools=[balance],
        guards=[hinting("balances lag by a day")],
        hooks=Hooks(guard_fired=on_guard),
    )
    events = await send(Session(agent), "balance?")
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.content == "$12\n\n[hint] balances lag by a day (balance)"
    sent = model.requests[-1].messages[-1].tool_results_parts[0].content
    assert "[hint] balances lag by a day" in sent
    assert fired == [
        ("balance", Finding(source="ux-hint", message="balances lag by a day (balance)",
                            tier="ux", action="hint"))
    ]  # fmt: skip


@pytest.mark.anyio
async def test_a_hint_on_a_paused_write_reaches_the_model_once_approved() -> None:
    fired: list[Finding] = []
    model = ScriptedModel(
        [ScriptedResponse(tool_calls=[ScriptedCall("pay", {"to": "bo", "amount": 3})]), "ok"]
    )
    agent = Agent(
        model=model,
        tools=[pay],
        guards=[hinting("check the payee")],
        hooks=Hooks(guard_fired=lambda t, a, f: fired.append(f)),
    )
    session = Session(agent)
    pending = pending_of(await send(session, "pay"))
    assert any(f.action == "hint" for f in pending.findings)
    events = await resume(session, pending.attempt_id, Approve())
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.content == "paid\n\n[hint] check the payee (pay)"
    assert [f.action for f in fired] == ["hint"]


@pytest.mark.anyio
async def test_a_blocking_guard_fires_the_hook_and_the_call_never_runs() -> None:
    fired: list[Finding] = []
    ran: list[str] = []

    @tool
    def wipe(path: str) -> str:
        """Delete."""
        ran.append(path)
        return "gone"

    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("wipe", {"path": "/"})]), ""])
    agent = Agent(
        model=model,
        tools=[wipe],
        guards=[fixed("no-root", "safety", "block", "never the root")],
        hooks=Hooks(guard_fired=lambda t, a, f: fired.append(f)),
    )
    events = await send(Session(agent), "wipe")
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.is_error and "never the root" in result.content
    assert ran == [] and [f.action for f in fired] == ["block"]
