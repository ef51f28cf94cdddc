"""Decisions a host sends back for a pending action."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

from pydantic import JsonValue

__all__ = ["Approve", "ClientResult", "Decision", "Reject"]


@dataclass(frozen=True, slots=True)
class Approve:
    """Run the action; ``edits`` may change only the tool's modifiable fields."""

    edits: dict[str, JsonValue] = field(default_factory=dict[str, JsonValue])


@dataclass(frozen=True, slots=True)
class Reject:
    """Do not run it; ``reason`` is given to the model."""

    reason: str = "The user declined."


@dataclass(frozen=True, slots=True)
class ClientResult:
    """The host executed a client-executed tool; this is its result."""

    content: str
    is_error: bool = False


Decision: TypeAlias = Approve | Reject | ClientResult
