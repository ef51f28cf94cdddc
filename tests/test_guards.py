"""Tests for guards: checks before a call, hints after it."""

from __future__ import annotations

from typing import Literal

from pydantic import JsonValue

from mainspring.events import Finding
from mainspring.guards import Guard, GuardReport, check_after, check_before
from mainspring.tools import Tool, ToolOutput, tool
from mainspring.tools.policy import ToolInput

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
