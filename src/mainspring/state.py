"""The durable state of a session, as plain data a SessionStore can persist.

Everything a new process needs to continue a session paused on a pending
action: the transcript, the step that paused (every call of it, in the
model's order, with the results gathered so far), decided attempts, the
write ledger, usage and spend.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import JsonValue

from mainspring.events import ErrorEvent, PendingAction, TurnComplete
from mainspring.messages import Message, ToolResultPart
from mainspring.usage import Usage

__all__ = ["CallRecord", "PausedStep", "SessionState", "WriteRecord"]


@dataclass(slots=True, kw_only=True)
class CallRecord:
    """One tool call of a model step and what became of it."""

    index: int
    tool_use_id: str
    name: str
    input: dict[str, JsonValue] | None = None
    """Validated input; ``None`` when validation failed (then ``result`` says why)."""
    result: ToolResultPart | None = None
    parallel: bool = False
    """Started mid-stream as a concurrency-safe read."""


@dataclass(slots=True, kw_only=True)
class PausedStep:
    """A model step waiting for a decision on ``pending``."""

    turn_index: int
    steps: int
    """Model calls made so far in this turn (for ``max_turns``)."""
    calls: list[CallRecord]
    position: int
    """Index into ``calls`` of the pending call; later calls have not been evaluated."""
    pending: PendingAction
    turn_usage: Usage = Usage()
    turn_cost_usd: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteRecord:
    """The write ledger: recorded before and after a write runs."""

    key: str
    tool: str
    status: Literal["started", "done", "unknown"]
    attempt_id: str | None = None
    result: ToolResultPart | None = None
    """What the write returned (with ``done``), so a crash before the result
    reached the transcript does not lose it."""


@dataclass(slots=True, kw_only=True)
class SessionState:
    """Everything persisted for one session."""

    session_id: str
    agent_name: str
    messages: list[Message] = field(default_factory=list[Message])
    turn_index: int = 0
    usage: Usage = Usage()
    cost_usd: float = 0.0
    auto_spent_usd: float = 0.0
    paused: PausedStep | None = None
    in_flight: list[CallRecord] | None = None
    """The calls of the step being executed, with the results gathered so far."""
    decided: dict[str, str] = field(default_factory=dict[str, str])
    """attempt id -> what was decided (``approved``, ``rejected``, ``client_result``)."""
    writes: dict[str, WriteRecord] = field(default_factory=dict[str, WriteRecord])
    """The write ledger by key (``"<turn>:<tool_use_id>"``)."""
    active_stream: str | None = None
    """The stream id of a run in progress; set when a run starts, cleared when it ends.
    Found set on load (with no live run holding the session's lock), it means the
    process running it died."""
    last_stream: str | None = None
    """The id of the last stream that ended, and its terminal event below: a
    client resuming a stream whose log was already cleared still learns how it ended."""
    last_terminal: TurnComplete | ErrorEvent | None = None
    version: int = 1
