"""Who may run what: deny list, allow list, a callback, then the tool's default.

Evaluation order for every call:

1. ``deny`` patterns: a match denies (the model sees why).
2. ``allow`` patterns: a match runs without asking.
3. ``can_use_tool(name, input)``: :class:`Allow` (optionally with rewritten
   input), :class:`Deny` with a message, or ``None`` for no opinion.
4. The default: the tool's own permission (``auto``, ``confirm``, a resolver,
   or USD tiers resolved by :class:`UsdTiers` with a per-session auto-spend cap).

Client-executed tools always pause, whatever the verdict, unless denied.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable
from typing import Literal, TypeAlias

from mainspring._lowlevel.frozen import dataclass
from mainspring._lowlevel.json_value import JsonValue
from mainspring.approvals import ApprovalPolicy
from mainspring.errors import ConfigError, ToolError
from mainspring.events import Finding
from mainspring.tools.define import Tool
from mainspring.tools.policy import Permission, ToolInput, resolve_permission
from mainspring.tools.registry import matches_any

__all__ = [
    "Allow",
    "CanUseTool",
    "Deny",
    "PermissionRules",
    "UsdTiers",
    "Verdict",
    "evaluate",
    "evaluate_static",
]


@dataclass(frozen=True, slots=True)
class Allow:
    """Run the call; ``updated_input`` replaces the model's input (re-validated)."""

    updated_input: ToolInput | None = None


@dataclass(frozen=True, slots=True)
class Deny:
    """Do not run the call; ``message`` goes back to the model."""

    message: str


CanUseTool: TypeAlias = Callable[
    [str, ToolInput], "Allow | Deny | Awaitable[Allow | Deny | None] | None"
]


@dataclass(frozen=True, slots=True, kw_only=True)
class UsdTiers:
    """Auto-approve money-moving calls under a threshold, up to a per-session cap."""

    name: str = "custom"
    auto_below_usd: float
    """Amounts strictly below this run without asking."""
    session_auto_cap_usd: float
    """Total auto-approved spend allowed in one session; past it, every call asks."""

    def __post_init__(self) -> None:
        for value in (self.auto_below_usd, self.session_auto_cap_usd):
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(
                    f"USD tier thresholds must be finite and must not be negative: {value!r}"
                )

    @classmethod
    def conservative(cls) -> UsdTiers:
        """Ask above $10; at most $50 auto-approved per session."""
        return cls(name="conservative", auto_below_usd=10.0, session_auto_cap_usd=50.0)

    @classmethod
    def balanced(cls) -> UsdTiers:
        """Ask above $100; at most $500 auto-approved per session."""
        return cls(name="balanced", auto_below_usd=100.0, session_auto_cap_usd=500.0)

    @classmethod
    def aggressive(cls) -> UsdTiers:
        """Ask above $1,000; at most $5,000 auto-approved per session."""
        return cls(name="aggressive", auto_below_usd=1000.0, session_auto_cap_usd=5000.0)

    @classmethod
    def preset(cls, name: str) -> UsdTiers:
        """One of ``conservative``, ``balanced``, ``aggressive``."""
        presets = {
            "conservative": cls.conservative,
            "balanced": cls.balanced,
            "aggressive": cls.aggressive,
        }
        if name not in presets:
            raise ConfigError(f"unknown USD tier preset {name!r}; choose one of {sorted(presets)}")
        return presets[name]()

    def resolve(self, amount: float | None, *, auto_spent: float) -> tuple[Permission, str]:
        """The tier for ``amount`` given what was auto-approved so far, with the reason."""
        if amount is None or math.isnan(amount) or math.isnan(auto_spent):
            return "confirm", "the amount could not be determined"
        if amount < 0:
            return "confirm", f"negative amount ${amount:,.2f}"
        if amount >= self.auto_below_usd:
            return "confirm", (
                f"${amount:,.2f} is at or above the auto-approve limit "
                f"${self.auto_below_usd:,.2f} ({self.name})"
            )
        if auto_spent + amount > self.session_auto_cap_usd:
            return "confirm", (
                f"auto-approved spend would reach ${auto_spent + amount:,.2f}, over the "
                f"session cap ${self.session_auto_cap_usd:,.2f} ({self.name})"
            )
        return "auto", f"${amount:,.2f} is under the auto-approve limit ({self.name})"


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionRules:
    """An agent's permission configuration."""

    deny: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()
    can_use_tool: CanUseTool | None = None
    usd_tiers: UsdTiers = UsdTiers.balanced()
    approvals: ApprovalPolicy = ApprovalPolicy()
    """How long a pending action waits, its quorum and who may approve it."""
    version: str = ""
    """The policy's version: stamped on every pending action; a decision made
    under another version is refused (``PolicyChanged``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """The outcome of evaluating one call."""

    outcome: Literal["run", "confirm", "deny"]
    input: dict[str, JsonValue]
    reason: str = ""
    source: Literal["deny_list", "allow_list", "callback", "default"] = "default"
    amount_usd: float | None = None
    """Set when USD tiers decided; an auto run adds it to the session's spend."""
    rewritten: bool = False

    @property
    def finding(self) -> Finding:
        """The verdict as a finding for a pending action."""
        tier: Literal["financial", "policy"] = (
            "financial" if self.amount_usd is not None else "policy"
        )
        return Finding(source=self.source, message=self.reason, tier=tier, action="confirm")


async def evaluate(
    rules: PermissionRules, tool: Tool, args: dict[str, JsonValue], *, auto_spent: float
) -> Verdict:
    """Decide whether a validated call runs, asks, or is denied."""
    verdict = await _evaluate(rules, tool, args, auto_spent=auto_spent)
    return _client_override(tool, verdict)


def evaluate_static(
    rules: PermissionRules, tool: Tool, args: dict[str, JsonValue], *, auto_spent: float
) -> Verdict:
    """:func:`evaluate` without awaiting, for rules that have no ``can_use_tool`` callback."""
    if rules.can_use_tool is not None:
        raise ConfigError("rules with a can_use_tool callback need evaluate()")
    verdict = _lists(rules, tool.name, args) or _default(rules, tool, args, auto_spent=auto_spent)
    return _client_override(tool, verdict)


def _client_override(tool: Tool, verdict: Verdict) -> Verdict:
    if tool.client_executed and verdict.outcome == "run":
        return Verdict(
            outcome="confirm",
            input=verdict.input,
            reason="executed by the client",
            source=verdict.source,
            rewritten=verdict.rewritten,
        )
    return verdict


async def _evaluate(
    rules: PermissionRules, tool: Tool, args: dict[str, JsonValue], *, auto_spent: float
) -> Verdict:
    name = tool.name
    listed = _lists(rules, name, args)
    if listed is not None:
        return listed
    if rules.can_use_tool is not None:
        answer = rules.can_use_tool(name, args)
        if inspect.isawaitable(answer):
            answer = await answer
        if isinstance(answer, Deny):
            return Verdict(outcome="deny", input=args, reason=answer.message, source="callback")
        if isinstance(answer, Allow):
            if answer.updated_input is not None:
                new = tool.validate(answer.updated_input)
                return Verdict(
                    outcome="run",
                    input=new,
                    reason="allowed by callback",
                    source="callback",
                    rewritten=True,
                )
            return Verdict(
                outcome="run", input=args, reason="allowed by callback", source="callback"
            )
        if answer is not None:
            raise ConfigError(f"can_use_tool must return Allow, Deny or None, not {answer!r}")
    return _default(rules, tool, args, auto_spent=auto_spent)


def _lists(rules: PermissionRules, name: str, args: dict[str, JsonValue]) -> Verdict | None:
    if rules.deny and matches_any(rules.deny, name):
        return Verdict(
            outcome="deny", input=args, reason=f"{name!r} is on the deny list", source="deny_list"
        )
    if rules.allow and matches_any(rules.allow, name):
        return Verdict(
            outcome="run", input=args, reason=f"{name!r} is on the allow list", source="allow_list"
        )
    return None


def _default(
    rules: PermissionRules, tool: Tool, args: dict[str, JsonValue], *, auto_spent: float
) -> Verdict:
    name = tool.name
    try:
        static, amount = resolve_permission(tool.policy, args)
    except Exception as exc:  # the tool's own permission code, run on the model's input
        raise ToolError(
            f"the permission of {name!r} could not be resolved from its input "
            f"({type(exc).__name__}: {exc}); check the arguments",
            tool=name,
        ) from exc
    if amount is not None and (isinstance(amount, bool) or not isinstance(amount, int | float)):
        raise ToolError(
            f"the USD amount of {name!r} is {type(amount).__name__}, not a number",
            tool=name,
        )
    if static is not None:
        outcome: Literal["run", "confirm"] = "run" if static == "auto" else "confirm"
        reason = "" if static == "auto" else f"{name!r} requires confirmation"
        return Verdict(outcome=outcome, input=args, reason=reason)
    tier, reason = rules.usd_tiers.resolve(amount, auto_spent=auto_spent)
    return Verdict(
        outcome="run" if tier == "auto" else "confirm", input=args, reason=reason, amount_usd=amount
    )
