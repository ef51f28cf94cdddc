"""Guards: checks before a tool runs, hints after it.

A guard looks at a validated call and may block it (the model gets an error
result), ask for confirmation (the call pauses even if it would auto-run), or
add a hint (appended to the result the model sees). Findings are ordered by
tier: safety before financial before UX.

A guard's checks may be ``async`` (a guard that reads a database goes to a
worker thread, never blocking the event loop); the engine awaits them through
:func:`run_before` and :func:`run_after`. :func:`check_before` and
:func:`check_after` are their synchronous forms, for sync checks only.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from mainspring.events import Finding
from mainspring.tools.define import Tool, ToolOutput
from mainspring.tools.policy import ToolInput

__all__ = [
    "AfterCheck",
    "BeforeCheck",
    "Guard",
    "GuardReport",
    "after_findings",
    "check_after",
    "check_before",
    "run_after",
    "run_before",
]

_TIER_ORDER = {"safety": 0, "financial": 1, "ux": 2, "policy": 3}

Verdict: TypeAlias = tuple[Literal["block", "confirm", "hint"], str] | None
BeforeCheck: TypeAlias = Callable[[Tool, ToolInput], "Verdict | Awaitable[Verdict]"]
"""``(tool, input) -> (action, message) | None``, sync or async."""
AfterCheck: TypeAlias = Callable[
    [Tool, ToolInput, ToolOutput], "str | Awaitable[str | None] | None"
]
"""``(tool, input, output) -> hint | None``, sync or async."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Guard:
    """A named check with a priority tier.

    ``before(tool, input)`` returns ``None`` or ``(action, message)`` with action
    ``"block"``, ``"confirm"`` or ``"hint"``; ``after(tool, input, output)``
    returns a hint for the model or ``None``.
    """

    name: str
    tier: Literal["safety", "financial", "ux"] = "safety"
    before: BeforeCheck | None = None
    after: AfterCheck | None = None


@dataclass(frozen=True, slots=True)
class GuardReport:
    """All findings for one call, most important first."""

    findings: tuple[Finding, ...] = ()

    @property
    def blocked(self) -> Finding | None:
        """The first blocking finding, if any."""
        return next((f for f in self.findings if f.action == "block"), None)

    @property
    def needs_confirm(self) -> bool:
        """Whether any guard asks for confirmation."""
        return any(f.action == "confirm" for f in self.findings)

    @property
    def hints(self) -> tuple[str, ...]:
        """Messages of hint findings."""
        if not self.findings:  # (the common report: asked of every call that runs)
            return ()
        return tuple(f.message for f in self.findings if f.action == "hint")


def check_before(guards: Sequence[Guard], tool: Tool, args: ToolInput) -> GuardReport:
    """Run every guard's ``before`` check; findings sorted by tier (sync checks only).

    Raises:
        TypeError: A check is async (use :func:`run_before`).
    """
    findings: list[Finding] = []
    for guard in guards:
        if guard.before is not None:
            result = guard.before(tool, args)
            if inspect.isawaitable(result):
                _close(result)
                raise TypeError(f"guard {guard.name!r} is async: use run_before")
            _add(findings, guard, result)
    return _report(findings)


async def run_before(guards: Sequence[Guard], tool: Tool, args: ToolInput) -> GuardReport:
    """Run every guard's ``before`` check, awaiting async ones; findings sorted by tier."""
    findings: list[Finding] = []
    for guard in guards:
        if guard.before is not None:
            result = guard.before(tool, args)
            if inspect.isawaitable(result):
                result = await result
            _add(findings, guard, result)
    return _report(findings)


def _add(findings: list[Finding], guard: Guard, result: Verdict) -> None:
    if result is not None:
        action, message = result
        findings.append(Finding(source=guard.name, message=message, tier=guard.tier, action=action))


def _report(findings: list[Finding]) -> GuardReport:
    findings.sort(key=lambda f: _TIER_ORDER[f.tier])
    return GuardReport(tuple(findings))


def _close(result: object) -> None:
    close = getattr(result, "close", None)
    if close is not None:
        close()  # a coroutine never awaited would warn


def _after_ordered(guards: Sequence[Guard]) -> list[Guard]:
    return sorted((g for g in guards if g.after is not None), key=lambda g: _TIER_ORDER[g.tier])


def check_after(
    guards: Sequence[Guard], tool: Tool, args: ToolInput, output: ToolOutput
) -> list[str]:
    """Hints from every guard's ``after`` check, in tier order (sync checks only)."""
    return [f.message for f in after_findings(guards, tool, args, output)]


def after_findings(
    guards: Sequence[Guard], tool: Tool, args: ToolInput, output: ToolOutput
) -> list[Finding]:
    """Every guard's ``after`` hint as a finding (``action="hint"``), in tier order.

    Raises:
        TypeError: A check is async (use :func:`run_after`).
    """
    found: list[Finding] = []
    for guard in _after_ordered(guards):
        assert guard.after is not None
        hint = guard.after(tool, args, output)
        if inspect.isawaitable(hint):
            _close(hint)
            raise TypeError(f"guard {guard.name!r} is async: use run_after")
        if hint:
            found.append(Finding(source=guard.name, message=hint, tier=guard.tier, action="hint"))
    return found


async def run_after(
    guards: Sequence[Guard], tool: Tool, args: ToolInput, output: ToolOutput
) -> list[Finding]:
    """:func:`after_findings`, awaiting async checks."""
    found: list[Finding] = []
    for guard in _after_ordered(guards):
        assert guard.after is not None
        hint = guard.after(tool, args, output)
        if inspect.isawaitable(hint):
            hint = await hint
        if hint:
            found.append(Finding(source=guard.name, message=hint, tier=guard.tier, action="hint"))
    return found
