"""Judging a call before it runs: permissions, guards, the preflight check.

A call with nothing to decide (the common read) is judged at once
(:func:`unjudged`); any other goes through :func:`judge`, which may give it
an error result instead (denied, blocked, a failed preflight). What comes out
is a :class:`Judgement`: the permission verdict and the guards' report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from mainspring._lowlevel.json_value import JsonValue
from mainspring.errors import ToolError, ToolInputError
from mainspring.events import Event, PermissionDenied
from mainspring.guards import Guard, GuardReport, run_before
from mainspring.hooks import Hooks, call_hook
from mainspring.permissions import PermissionRules, Verdict, evaluate, evaluate_static
from mainspring.state import Call, SessionState
from mainspring.tools.context import current_scope
from mainspring.tools.define import Tool
from mainspring.tools.policy import run_preflight

if TYPE_CHECKING:
    from mainspring.audit.log import AuditTrail

__all__ = ["AUTO", "Deny", "Judgement", "Refusal", "judge", "unjudged"]

_NO_REPORT = GuardReport()


@dataclass(frozen=True, slots=True)
class Judgement:
    """What judging a call decided: the permission verdict and the guards' report."""

    verdict: Verdict
    report: GuardReport = _NO_REPORT

    @property
    def outcome(self) -> Literal["run", "confirm", "deny"]:
        """``run``, ``confirm`` (ask a human) or ``deny``."""
        return self.verdict.outcome

    @property
    def hints(self) -> tuple[str, ...]:
        """The guards' hints, added to the result the model sees."""
        return self.report.hints

    @property
    def amount_usd(self) -> float | None:
        """The USD amount the call moves, when its permission is priced."""
        return self.verdict.amount_usd

    def asking(self, reason: str) -> Judgement:
        """The same call, to be confirmed by a human for ``reason``."""
        return Judgement(replace(self.verdict, outcome="confirm", reason=reason), self.report)


Deny = Callable[[Call, str, str], None]
"""Reports a call refused by policy: ``(call, reason, source)`` (its error result is ``fail``'s)."""


class Refusal:
    """A dispatcher's :data:`Deny`: the ``permission_denied`` event of a refused call.

    It holds the state and the emitter, never the dispatcher (no reference cycle:
    what a run made is freed when the run ends, without the cyclic collector).
    """

    __slots__ = ("_emit", "_state")

    def __init__(self, state: SessionState, emit: Callable[[Event], None]) -> None:
        self._state, self._emit = state, emit

    def __call__(self, call: Call, reason: str, source: str) -> None:
        principal = self._state.principal
        if principal is None:  # a session of no one: the engine scope's caller, if any
            scope = current_scope()
            principal = scope.caller.key if scope is not None else None
        self._emit(
            PermissionDenied(
                tool_use_id=call.id,
                name=call.name,
                reason=reason,
                source=source,
                principal=principal,
            )
        )


AUTO = Judgement(Verdict(outcome="run", input={}))
"""The judgement of a call with nothing to decide."""


def unjudged(rules: PermissionRules, guards: Sequence[Guard], tool: Tool) -> Judgement | None:
    """The judgement of a call with nothing to decide (the common read), else ``None``.

    :func:`judge` gives the same without awaiting anything.
    """
    if (
        tool.policy.permission == "auto"
        and not (rules.can_use_tool or rules.deny or rules.allow or guards)
        and tool.policy.preflight is None
        and not tool.client_executed
    ):
        return AUTO
    return None


async def judge(
    rules: PermissionRules,
    guards: Sequence[Guard],
    hooks: Hooks,
    tool: Tool,
    call: Call,
    *,
    auto_spent: float,
    fail: Callable[[Call, str], None],
    deny: Deny,
    audit: AuditTrail | None = None,
) -> Judgement | None:
    """Permissions, guards and preflight; ``None`` when ``fail`` gave the call an error result.

    ``rules``, ``guards`` and ``hooks`` are the agent's. A permission callback
    that rewrites the input replaces ``call.input``. ``auto_spent`` is what
    auto-approved writes of the session spent so far. A call refused by policy
    (a permission rule, a guard's block) goes to ``deny`` (reason and source),
    then to ``fail`` (its error result), as any other failure does. ``audit``
    records a denial, a guard's block and every guard finding.
    """
    assert call.input is not None
    nothing = unjudged(rules, guards, tool)
    if nothing is not None:
        return nothing
    verdict = await _verdict(rules, tool, call, auto_spent, fail)
    if verdict is None:
        return None
    if verdict.outcome == "deny":
        if audit is not None:
            await audit.denied(tool.name, call.input, verdict.amount_usd, verdict.reason)
        deny(call, verdict.reason, verdict.source)
        fail(call, f"permission denied: {verdict.reason}")
        return None
    if verdict.rewritten:
        call.input = verdict.input
    report = await _report(guards, hooks, tool, call.input, audit) if guards else _NO_REPORT
    blocked = report.blocked
    if blocked is not None:
        if audit is not None:
            await audit.blocked(tool.name, call.input, verdict.amount_usd, blocked)
        hints = "".join(f"\n\n[hint] {h}" for h in report.hints)
        deny(call, blocked.message, blocked.source)
        fail(call, f"blocked by {blocked.source}: {blocked.message}{hints}")
        return None
    if tool.policy.preflight is not None:
        problem = await run_preflight(tool.policy, call.input)
        if problem:
            fail(call, problem)
            return None
    if report.needs_confirm and verdict.outcome == "run":
        reasons = "; ".join(f.message for f in report.findings if f.action == "confirm")
        verdict = replace(verdict, outcome="confirm", reason=reasons, source="default")
    return Judgement(verdict, report)


async def _report(
    guards: Sequence[Guard],
    hooks: Hooks,
    tool: Tool,
    args: dict[str, JsonValue],
    audit: AuditTrail | None,
) -> GuardReport:
    """The guards' report on a call, each finding seen by the hook and put on record."""
    report = await run_before(guards, tool, args)
    fired = hooks.guard_fired
    if fired is not None:
        for finding in report.findings:
            await call_hook(fired(tool, args, finding))
    if audit is not None and report.findings:
        await audit.findings(tool.name, args, report.findings)
    return report


async def _verdict(
    rules: PermissionRules, tool: Tool, call: Call, spent: float, fail: Callable[[Call, str], None]
) -> Verdict | None:
    """The permission verdict; ``None`` when working it out gave the call an error result."""
    assert call.input is not None
    try:
        if rules.can_use_tool is None:
            return evaluate_static(rules, tool, call.input, auto_spent=spent)
        return await evaluate(rules, tool, call.input, auto_spent=spent)
    except ToolInputError as exc:
        fail(call, f"the permission callback rewrote the input badly: {exc}")
    except ToolError as exc:  # its permission (a USD amount) failed on this input
        fail(call, str(exc))
    return None
