"""Decisions a host sends back for a pending action."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TypeAlias

from mainspring._lowlevel.json_value import JsonValue

__all__ = [
    "Approve",
    "ClientResult",
    "Decision",
    "Expire",
    "Reject",
    "canonical_input_hash",
    "decision_kind",
    "decision_record",
    "recorded_kind",
]


@dataclass(frozen=True, slots=True)
class Approve:
    """Run the action; ``edits`` may change only the tool's modifiable fields.

    ``input_hash``, when given, is the :attr:`~mainspring.events.PendingAction.input_hash`
    of the input the user saw: the approval is refused (``InputChanged``) if the
    pending input is no longer that one (regenerated meanwhile, say).

    ``principal`` is who approves (the authenticated principal behind a
    server; required where the rule forbids self-approval or needs a quorum
    of more than one). ``policy_version``, when given, is the policy version
    the approver saw: the approval is refused (``PolicyChanged``) under any
    other. Both are on the decision's record in the store.
    """

    edits: dict[str, JsonValue] = field(default_factory=dict)
    input_hash: str | None = None
    principal: str = ""
    policy_version: str | None = None


@dataclass(frozen=True, slots=True)
class Reject:
    """Do not run it; ``reason`` is given to the model."""

    reason: str = "The user declined."
    principal: str = ""
    """Who rejected it (one principal's rejection ends a quorum's wait)."""
    policy_version: str | None = None
    """The policy version the rejecter saw (refused under another, as for :class:`Approve`)."""


@dataclass(frozen=True, slots=True)
class ClientResult:
    """The host executed a client-executed tool; this is its result.

    ``input_hash`` binds it to the input the host executed, as :class:`Approve`'s does.
    """

    content: str
    is_error: bool = False
    input_hash: str | None = None


@dataclass(frozen=True, slots=True)
class Expire:
    """Settle a pending action whose expiry has passed: it never runs; the model is told.

    Accepted only once ``PendingAction.expires_at`` has passed (before that it
    is refused with ``ApprovalError``): the call gets a tool result saying the
    approval expired, and the turn goes on. Any other decision after the
    expiry is refused with ``ApprovalExpired``.
    """

    principal: str = ""
    """Who settled it (a host's sweeper, say); recorded with the decision."""


Decision: TypeAlias = Approve | Reject | ClientResult | Expire
"""What ``Session.resume`` takes for a pending action."""


def decision_kind(decision: Decision) -> str:
    """``"approved"``, ``"rejected"``, ``"client_result"`` or ``"expired"``."""
    if isinstance(decision, Approve):
        return "approved"
    if isinstance(decision, Reject):
        return "rejected"
    if isinstance(decision, Expire):
        return "expired"
    return "client_result"


def decision_record(decision: Decision) -> str:
    """The decision as the store records it: its kind and everything it carries.

    A decision claimed in the store but not yet consumed (the process died in
    between) is recognised by this record when the host posts it again, so the
    paused turn can go on instead of staying stuck on a claimed attempt.
    """
    body = {"kind": decision_kind(decision), **asdict(decision)}
    # A decision without these is recorded as before they existed.
    for name, unset in (("input_hash", None), ("principal", ""), ("policy_version", None)):
        if name in body and body[name] == unset:
            del body[name]
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def recorded_kind(record: str) -> str:
    """The kind in a stored record (older stores recorded only the kind)."""
    if record.startswith("{"):
        try:
            kind = json.loads(record).get("kind")
        except ValueError:
            return record
        return str(kind)
    return record


def canonical_input_hash(input: dict[str, JsonValue]) -> str:
    """SHA-256 (hex) of a tool input's canonical JSON: what an approval binds to.

    Keys sorted, compact separators, UTF-8: two inputs that are equal as JSON
    hash the same, and any change to a value changes the hash. A decision made
    for one hash must be refused for an input with another (the input changed
    after it was shown).
    """
    import hashlib  # lazy: loads OpenSSL, and only a paused call needs it

    text = json.dumps(input, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
