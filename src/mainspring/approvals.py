"""How long a pending action waits, who may approve it, and how many must.

Every pending action carries an expiry (``PendingAction.expires_at``): the
:class:`ApprovalRule` that applies to it sets its time-to-live, its quorum (k
distinct approving principals) and whether the requester may approve it. The
rule comes from :class:`ApprovalPolicy`: the tool's own rule if it has one,
else the highest USD tier the amount reaches, else the default rule
(:data:`DEFAULT_TTL_S`, one hour; a quorum of one).

Expiry fails closed. Once ``expires_at`` has passed, an approval (or any other
decision) is refused with :class:`~mainspring.errors.ApprovalExpired` and
nothing runs; ``Session.resume(attempt_id, Expire())`` settles the call as
``expired``: it never runs, the model is told with a tool result saying the
approval expired, and the turn goes on.

A quorum's approvals are claimed in the session store one per principal
(:func:`approval_key`), so two workers adding approvals at once neither lose
one nor both complete the quorum (the attempt itself is claimed once, by the
approval that completes it).

A paused session runs nothing, so no timer can warn of an expiry: the
``approval_expiring`` event (:func:`expiring`) is emitted when the paused
stream is followed (``Session.send(resume_stream_id=...)``) inside the
warning lead time, just before its ``pending_action``. A host that
wants a push notice asks :func:`expiring` on its own schedule.

Time is :attr:`ApprovalPolicy.clock` (Unix seconds, ``time.time`` by
default): tests pass their own clock and never sleep.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import field
from types import MappingProxyType
from typing import Any

from mainspring._lowlevel.frozen import dataclass
from mainspring.errors import ConfigError
from mainspring.events import ApprovalExpiring, PendingAction

__all__ = [
    "DEFAULT_TTL_S",
    "DEFAULT_WARN_BEFORE_S",
    "ApprovalPolicy",
    "ApprovalRule",
    "approval_key",
    "approvers",
    "expiring",
]

DEFAULT_TTL_S = 3600.0
"""A pending action expires one hour after it was asked for, unless a rule says otherwise."""

DEFAULT_WARN_BEFORE_S = 300.0
"""``approval_expiring`` is due five minutes before the expiry."""

_APPROVAL_MARK = "/approval/"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRule:
    """What one kind of pending action needs: a lifetime, a quorum, who may approve."""

    ttl_s: float = DEFAULT_TTL_S
    """Seconds from the pause to the expiry (``math.inf``: never expires)."""
    quorum: int = 1
    """Distinct approving principals needed before the write runs (k of n)."""
    allow_self_approval: bool = True
    """Whether the session's principal (the requester) may approve its own request."""

    def __post_init__(self) -> None:
        if not self.ttl_s > 0:  # (NaN too)
            raise ConfigError(f"an approval's ttl_s must be positive, not {self.ttl_s!r}")
        if type(self.quorum) is not int or self.quorum < 1:  # (a bool is no quorum)
            raise ConfigError(f"an approval quorum is a whole number ≥ 1, not {self.quorum!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalPolicy:
    """Approval rules per tool and per USD tier, the warning lead time and the clock.

    ```python
    policy = ApprovalPolicy(
        tools={"delete_account": ApprovalRule(ttl_s=600, quorum=2, allow_self_approval=False)},
        usd_tiers=((1000.0, ApprovalRule(ttl_s=900, quorum=2)),),
    )
    ```
    """

    default: ApprovalRule = ApprovalRule()
    """The rule of a pending action no tool rule or USD tier names."""
    tools: Mapping[str, ApprovalRule] = field(default_factory=dict)
    """Rules by tool name (they win over the USD tiers)."""
    usd_tiers: tuple[tuple[float, ApprovalRule], ...] = ()
    """``(minimum USD, rule)`` pairs: an amount at or above a minimum takes that rule
    (the highest minimum it reaches)."""
    warn_before_s: float = DEFAULT_WARN_BEFORE_S
    """Seconds before the expiry from which ``approval_expiring`` is due."""
    clock: Callable[[], float] = time.time
    """Now, in Unix seconds (inject one in tests)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "tools", MappingProxyType(dict(self.tools)))
        tiers = tuple(sorted(self.usd_tiers, key=lambda tier: tier[0]))
        for minimum, rule in tiers:
            if not math.isfinite(minimum) or minimum < 0 or not isinstance(rule, ApprovalRule):
                raise ConfigError(
                    "usd_tiers holds (minimum USD ≥ 0, ApprovalRule) pairs, "
                    f"not ({minimum!r}, {rule!r})"
                )
        object.__setattr__(self, "usd_tiers", tiers)
        if math.isnan(self.warn_before_s) or self.warn_before_s < 0:
            raise ConfigError(f"warn_before_s must not be negative, not {self.warn_before_s!r}")

    def rule_for(self, tool: str, amount_usd: float | None) -> ApprovalRule:
        """The rule of a pending action of ``tool`` for ``amount_usd`` (``None``: no amount)."""
        rule = self.tools.get(tool)
        if rule is not None:
            return rule
        if amount_usd is not None and not math.isnan(amount_usd):
            for minimum, tier in reversed(self.usd_tiers):
                if amount_usd >= minimum:
                    return tier
        return self.default

    def expiry(self, rule: ApprovalRule, now: float) -> float | None:
        """When a pending action asked for at ``now`` under ``rule`` expires (``None``: never)."""
        return None if math.isinf(rule.ttl_s) else now + rule.ttl_s

    def terms(self, pending: PendingAction, requester: str, version: str) -> dict[str, Any]:
        """The approval fields of ``pending``, asked for now by ``requester`` under ``version``.

        ``expires_at`` (no later than a nested action's own, which its run
        refuses after), ``quorum``, ``allow_self_approval``, ``requested_by``
        and ``policy_version``.
        """
        rule = self.rule_for(pending.name, pending.amount_usd)
        expires_at = self.expiry(rule, self.clock())
        until = pending.nested.expires_at if pending.nested is not None else None
        if until is not None and (expires_at is None or until < expires_at):
            expires_at = until
        return {
            "expires_at": expires_at,
            "quorum": rule.quorum,
            "allow_self_approval": rule.allow_self_approval,
            "requested_by": requester,
            "policy_version": version,
        }


def expiring(pending: PendingAction | None, policy: ApprovalPolicy) -> ApprovalExpiring | None:
    """The warning due now for ``pending``: inside its lead time and not yet expired."""
    if pending is None or pending.expires_at is None:
        return None
    now = policy.clock()
    left = pending.expires_at - now
    if left <= 0 or left > policy.warn_before_s:
        return None
    return ApprovalExpiring(
        attempt_id=pending.attempt_id, expires_at=pending.expires_at, seconds_left=left
    )


def approval_key(attempt_id: str, principal: str) -> str:
    """The key one principal's approval of a quorum is claimed under in the session store."""
    return f"{attempt_id}{_APPROVAL_MARK}{principal}"


def approvers(decided: Mapping[str, str], attempt_id: str) -> tuple[str, ...]:
    """The principals whose approval of ``attempt_id`` is on record, sorted."""
    prefix = f"{attempt_id}{_APPROVAL_MARK}"
    return tuple(sorted(key[len(prefix) :] for key in decided if key.startswith(prefix)))
