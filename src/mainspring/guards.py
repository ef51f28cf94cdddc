"""Guards: checks before a tool runs, hints after it.

A guard looks at a validated call and may block it (the model gets an error
result), ask for confirmation (the call pauses even if it would auto-run), or
add a hint (appended to the result the model sees). Findings are ordered by
tier: safety before financial before UX.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from mainspring.events import Finding
from mainspring.tools.define import Tool, ToolOutput
from mainspring.tools.policy import ToolInput

__all__ = ["Guard", "GuardReport", "after_findings", "check_after", "check_before"]

_TIER_ORDER = {"safety": 0, "financial": 1, "ux": 2, "policy": 3}


@dataclass(frozen=True, slots=True, kw_only=True)
class Guard:
    """A named check with a priority tier.

    ``before(tool, input)`` returns ``None`` or ``(action, message)`` with action
    ``"block"``, ``"confirm"`` or ``"hint"``; ``after(tool, input, output)``
    returns a hint for the model or ``None``.
    """

    name: str
    tier: Literal["safety", "financial", "ux"] = "safety"
    before: (
        Callable[[Tool, ToolInput], tuple[Literal["block", "confirm", "hint"], str] | None] | None
    ) = None
    after: Callable[[Tool, ToolInput, ToolOutput], str | None] | None = None


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
        return tuple(f.message for f in self.findings if f.action == "hint")


def check_before(guards: Sequence[Guard], tool: Tool, args: ToolInput) -> GuardReport:
    """Run every guard's ``before`` check; findings sorted by tier."""
    findings: list[Finding] = []
    for guard in guards:
        if guard.before is None:
            continue
        result = guard.before(tool, args)
        if result is not None:
            action, message = result
            findings.append(
                Finding(source=guard.name, message=message, tier=guard.tier, action=action)
            )
    findings.sort(key=lambda f: _TIER_ORDER[f.tier])
    return GuardReport(tuple(findings))


def check_after(
    guards: Sequence[Guard], tool: Tool, args: ToolInput, output: ToolOutput
) -> list[str]:
    """Hints from every guard's ``after`` check, in tier order."""
    return [f.message for f in after_findings(guards, tool, args, output)]


def after_findings(
    guards: Sequence[Guard], tool: Tool, args: ToolInput, output: ToolOutput
) -> list[Finding]:
    """Every guard's ``after`` hint as a finding (``action="hint"``), in tier order."""
    ordered = sorted((g for g in guards if g.after is not None), key=lambda g: _TIER_ORDER[g.tier])
    found: list[Finding] = []
    for guard in ordered:
        assert guard.after is not None
        hint = guard.after(tool, args, output)
        if hint:
            found.append(Finding(source=guard.name, message=hint, tier=guard.tier, action="hint"))
    return found
