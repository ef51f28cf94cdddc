"""CaseTrace: the facts of one case's run, read from its events.

The harness drives a case through the public session API (``send``, then
``resume`` for each pending action) and keeps every event. What evaluators
check is worked out here, once, from those events and the decisions the
harness made:

- ``calls``: every tool call the model asked for, in order, with its
  arguments (``tool_call_delta`` events joined per call id);
- ``ran``: the calls that started (``tool_start``), with the input they ran on;
- ``asked``: the calls that paused the turn for a decision (``pending_action``),
  and what the harness decided for each (``approved`` / ``rejected``);
- ``blocked`` and ``denied``: calls a guard blocked or a permission rule
  denied before anyone was asked (their ``tool_result`` is an error naming it);
- the final answer, the stop reason, usage and cost.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from mainspring._lowlevel.json_value import JsonValue
from mainspring.events import (
    ErrorEvent,
    Event,
    PendingAction,
    StopReason,
    ToolCallDelta,
    ToolResult,
    ToolStart,
    TurnComplete,
)
from mainspring.usage import Usage

__all__ = ["BLOCKED_PREFIX", "DENIED_PREFIX", "CaseTrace", "ToolCall", "trace_of"]

BLOCKED_PREFIX = "blocked by "
"""How the dispatcher's error result for a call a guard blocked begins."""
DENIED_PREFIX = "permission denied: "
"""How the dispatcher's error result for a call a permission rule denied begins."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call: its tool's name and the arguments it was given."""

    name: str
    args: dict[str, JsonValue] = field(default_factory=dict)
    id: str = ""
    """The engine's call id (empty for an expected call)."""

    def as_json(self) -> dict[str, JsonValue]:
        """The call as a JSON object (``{"name": …, "args": …}``)."""
        return {"name": self.name, "args": self.args}


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseTrace:
    """What one case's run did; see the module docstring."""

    inputs: tuple[str, ...] = ()
    """The user messages the case sent, in order."""
    events: tuple[Event, ...] = ()
    calls: tuple[ToolCall, ...] = ()
    """Every call the model asked for, in the order it asked."""
    ran: tuple[ToolCall, ...] = ()
    """The calls that started, with the input they ran on (an approver's edits in)."""
    asked: tuple[str, ...] = ()
    """The tools whose calls asked for a decision, in order."""
    approved: tuple[str, ...] = ()
    """The asked tools the harness approved."""
    rejected: tuple[str, ...] = ()
    """The asked tools the harness rejected."""
    blocked: tuple[str, ...] = ()
    """The tools whose calls a guard blocked (never run, nobody asked)."""
    denied: tuple[str, ...] = ()
    """The tools whose calls a permission rule denied."""
    failed: tuple[str, ...] = ()
    """The tools whose calls ended in any other error result."""
    output: str = ""
    """The final answer: the text of the last assistant message."""
    stop_reason: StopReason | None = None
    """The last turn's stop reason (``None`` when the run ended in an error)."""
    error: str | None = None
    """The ``error`` event's code and message, when the run ended in one."""
    usage: Usage = Usage()
    cost_usd: float = 0.0
    """What the case's session spent (model calls, priced)."""


def _args(raw: str) -> dict[str, JsonValue]:
    try:
        value = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_raw": raw}


def trace_of(
    events: Sequence[Event],
    *,
    inputs: Sequence[str] = (),
    decisions: Sequence[tuple[str, bool]] = (),
    output: str = "",
    usage: Usage = Usage(),
    cost_usd: float = 0.0,
) -> CaseTrace:
    """The facts of a case from its events and the harness's ``decisions``.

    ``decisions`` are ``(tool name, approved)`` in the order they were made.
    """
    raw: dict[str, str] = {}
    names: dict[str, str] = {}
    ran: list[ToolCall] = []
    asked: list[str] = []
    blocked: list[str] = []
    denied: list[str] = []
    failed: list[str] = []
    stop: StopReason | None = None
    error: str | None = None
    for event in events:
        match event:
            case ToolCallDelta():
                names.setdefault(event.tool_use_id, event.name)
                raw[event.tool_use_id] = raw.get(event.tool_use_id, "") + event.args_delta
            case ToolStart():
                ran.append(ToolCall(event.name, dict(event.input), event.tool_use_id))
            case PendingAction():
                asked.append(event.name)
            case ToolResult(is_error=True):
                if event.content.startswith(BLOCKED_PREFIX):
                    blocked.append(event.name)
                elif event.content.startswith(DENIED_PREFIX):
                    denied.append(event.name)
                elif not event.content.startswith("the user rejected"):
                    failed.append(event.name)
            case TurnComplete():
                stop = event.stop_reason
            case ErrorEvent():
                stop, error = None, f"{event.code}: {event.message}"
            case _:
                pass
    calls = tuple(ToolCall(names[i], _args(raw[i]), i) for i in names)
    return CaseTrace(
        inputs=tuple(inputs),
        events=tuple(events),
        calls=calls,
        ran=tuple(ran),
        asked=tuple(asked),
        approved=tuple(name for name, yes in decisions if yes),
        rejected=tuple(name for name, yes in decisions if not yes),
        blocked=tuple(blocked),
        denied=tuple(denied),
        failed=tuple(failed),
        output=output,
        stop_reason=stop,
        error=error,
        usage=usage,
        cost_usd=cost_usd,
    )
