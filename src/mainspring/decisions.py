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
    """

    edits: dict[str, JsonValue] = field(default_factory=dict)
    input_hash: str | None = None


@dataclass(frozen=True, slots=True)
class Reject:
    """Do not run it; ``reason`` is given to the model."""

    reason: str = "The user declined."


@dataclass(frozen=True, slots=True)
class ClientResult:
    """The host executed a client-executed tool; this is its result.

    ``input_hash`` binds it to the input the host executed, as :class:`Approve`'s does.
    """

    content: str
    is_error: bool = False
    input_hash: str | None = None


Decision: TypeAlias = Approve | Reject | ClientResult
"""What ``Session.resume`` takes for a pending action."""


def decision_kind(decision: Decision) -> str:
    """``"approved"``, ``"rejected"`` or ``"client_result"``."""
    if isinstance(decision, Approve):
        return "approved"
    if isinstance(decision, Reject):
        return "rejected"
    return "client_result"


def decision_record(decision: Decision) -> str:
    """The decision as the store records it: its kind and everything it carries.

    A decision claimed in the store but not yet consumed (the process died in
    between) is recognised by this record when the host posts it again, so the
    paused turn can go on instead of staying stuck on a claimed attempt.
    """
    body = {"kind": decision_kind(decision), **asdict(decision)}
    if body.get("input_hash", "") is None:
        del body["input_hash"]  # the record of a decision without one, as before it existed
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
