"""An audit entry: what happened, where it sits in the chain, and its canonical bytes.

An entry records one act of the dispatch path: a decision on a pending action,
a write that ran, a call refused, a guard's finding. Its fields are plain JSON
values; its bytes are *canonical* (keys sorted, compact separators, UTF-8, no
ASCII escaping), so the same entry always has the same bytes and any change to
any field changes them. The chain links entries by hash: an entry carries the
hash of the one before it (``prev``; the first carries :data:`GENESIS`) and its
own ``hash``, the SHA-256 of its canonical bytes without the ``hash`` field —
which include ``prev``: each hash covers the previous hash and the entry.

``kind`` is an open set of names: :data:`KINDS` lists those this version writes;
a reader accepts any other (a later version may add kinds, as ``expired``
slots in beside ``approved`` and ``rejected``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

__all__ = [
    "APPROVED",
    "AUTO_EXECUTED",
    "BLOCKED",
    "CLIENT_RESULT",
    "DENIED",
    "EDITED",
    "EXECUTED",
    "EXPIRED",
    "FORMAT",
    "GENESIS",
    "GUARD_FINDING",
    "KINDS",
    "REJECTED",
    "AuditEntry",
    "canonical",
    "decode_entry",
    "timestamp",
]

FORMAT = 1
"""The entry layout's version (field ``v``)."""
GENESIS = "0" * 64
"""The ``prev`` of the first entry of a log."""

APPROVED = "approved"
"""A pending action approved as shown."""
EDITED = "edited"
"""A pending action approved with edits (``args_hash`` is the edited input's)."""
REJECTED = "rejected"
"""A pending action rejected (the write never runs)."""
CLIENT_RESULT = "client_result"
"""A client-executed action's result posted by the host."""
EXPIRED = "expired"
"""A pending action that expired undecided (fail-closed: the write never runs)."""
AUTO_EXECUTED = "auto_executed"
"""A write that ran without a human decision (its tier allowed it)."""
EXECUTED = "executed"
"""An approved write that ran."""
DENIED = "denied"
"""A call refused by the permission rules."""
BLOCKED = "blocked"
"""A call refused by a guard."""
GUARD_FINDING = "guard_finding"
"""One finding of a guard's check before a call (block, confirm or hint)."""

KINDS = frozenset(
    {
        APPROVED,
        EDITED,
        REJECTED,
        CLIENT_RESULT,
        EXPIRED,
        AUTO_EXECUTED,
        EXECUTED,
        DENIED,
        BLOCKED,
        GUARD_FINDING,
    }
)
"""The kinds this version writes (an open set: readers accept others)."""


_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def canonical(data: dict[str, object]) -> bytes:
    """The canonical bytes of a JSON object: sorted keys, compact, UTF-8."""
    return _CANONICAL.encode(data).encode("utf-8")


def timestamp(seconds: float) -> str:
    """Unix ``seconds`` as RFC 3339 UTC with microseconds (``2026-12-07T19:53:01.123456Z``)."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEntry:
    """One entry of an audit log, as stored and exported (see the module docstring)."""

    v: int = FORMAT
    """The layout version (:data:`FORMAT`)."""
    seq: int
    """Its place in the log: 1, 2, 3… with no gaps."""
    prev: str
    """The previous entry's ``hash`` (:data:`GENESIS` for the first)."""
    time: str
    """When it was appended (RFC 3339, UTC)."""
    kind: str
    """What happened: one of :data:`KINDS`, or a kind a later version added."""
    session_id: str | None
    principal: str | None
    """Who: the caller the run was for (``kind:id``; for a decision, who decided), else
    the session's owner."""
    tool: str | None
    args_hash: str | None
    """SHA-256 of the call's canonical arguments (``decisions.canonical_input_hash``)."""
    amount_usd: float | None
    """The USD amount the call moves, where its permission is priced."""
    outcome: str
    """How it ended: ``approved``, ``rejected``, ``ok``, ``error``, ``unknown``, ``denied``…"""
    policy_version: str
    attempt_id: str | None = None
    """The pending action's attempt id (decisions, approved writes)."""
    detail: str | None = None
    """A reason or a finding's message (bounded)."""
    hash: str
    """SHA-256 (hex) of the canonical bytes of every other field."""

    def body(self) -> dict[str, object]:
        """Every field but ``hash``: what ``hash`` is the SHA-256 of."""
        data = asdict(self)
        del data["hash"]
        return data

    def to_json(self) -> str:
        """The entry as one canonical JSON line (``hash`` included): what is stored."""
        return canonical(asdict(self)).decode("utf-8")

    def computed_hash(self) -> str:
        """The hash its fields have now (equal to ``hash`` unless it was changed)."""
        return hashlib.sha256(canonical(self.body())).hexdigest()


_FIELDS = frozenset(AuditEntry.__dataclass_fields__)


def decode_entry(text: str) -> AuditEntry:
    """The entry a stored line holds, exactly as written.

    Raises:
        ValueError: Not JSON, not an object of the entry's fields and types, or
            not in canonical form (any byte changed since it was written).
    """
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("an audit entry is a JSON object")
    keys = set(data)
    if keys != _FIELDS:
        raise ValueError(f"unexpected fields: {sorted(keys ^ _FIELDS)}")
    _check_types(data)
    entry = AuditEntry(**data)
    if entry.to_json() != text:
        raise ValueError("not in canonical form")
    return entry


def _check_types(data: dict[str, object]) -> None:
    for name in ("v", "seq"):
        value = data[name]
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{name} must be an integer")
    for name in ("prev", "time", "kind", "outcome", "policy_version", "hash"):
        if not isinstance(data[name], str):
            raise ValueError(f"{name} must be a string")
    for name in ("session_id", "principal", "tool", "args_hash", "attempt_id", "detail"):
        value = data.get(name)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{name} must be a string or null")
    amount = data["amount_usd"]
    if amount is not None and (not isinstance(amount, int | float) or isinstance(amount, bool)):
        raise ValueError("amount_usd must be a number or null")
