"""What a run yields: one discriminated union of frozen event dataclasses.

Every event has a ``type`` whose spelling is part of the wire format (SSE,
checkpoints) and therefore forever. A stream starts with ``stream_started``
when a checkpoint store is configured and always ends with exactly one
terminal event: ``turn_complete`` or ``error``. A paused turn ends with
``pending_action`` followed by ``turn_complete(stop_reason="pending_action")``.
"""

from __future__ import annotations

from dataclasses import field
from typing import Literal, TypeAlias

from mainspring._lowlevel.frozen import dataclass, fast_init
from mainspring._lowlevel.json_value import JsonValue
from mainspring.thinking import EvalItem
from mainspring.usage import Usage

__all__ = [
    "TERMINAL_EVENT_TYPES",
    "ApprovalAdded",
    "ApprovalExpiring",
    "Canvas",
    "ErrorEvent",
    "Event",
    "FinalOutput",
    "Finding",
    "GuardrailVerdict",
    "OutputPartial",
    "OutputRetry",
    "PendingAction",
    "PermissionDenied",
    "SteeringQueued",
    "SteeringTaken",
    "StopReason",
    "StreamStarted",
    "TextDelta",
    "ThinkingDelta",
    "ThinkingDone",
    "ToolCallDelta",
    "ToolProgress",
    "ToolResult",
    "ToolStart",
    "TurnComplete",
    "UsageEvent",
]

StopReason: TypeAlias = Literal[
    "end_turn",
    "pending_action",
    "max_turns",
    "budget_exceeded",
    "cancelled",
    "max_tokens",
    "refusal",
    "interrupted",
    "steered",
    "guardrail_tripped",
]
"""Why a turn ended (``TurnComplete.stop_reason``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamStarted:
    """First event of a checkpointed stream; ``stream_id`` is the resume key."""

    stream_id: str
    session_id: str
    type: Literal["stream_started"] = "stream_started"


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta:
    """A piece of the assistant's visible text."""

    text: str
    type: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, slots=True, kw_only=True)
class ThinkingDelta:
    """A piece of the model's reasoning."""

    text: str
    index: int = 0
    """Which thinking block of the turn it belongs to (0, 1, …, in order)."""
    type: Literal["thinking_delta"] = "thinking_delta"


@dataclass(frozen=True, slots=True, kw_only=True)
class ThinkingDone:
    """A thinking block closed; ``signature`` must go back to the provider unchanged."""

    text: str
    signature: str | None = None
    redacted: bool = False
    provider: str | None = None
    index: int = 0
    """Which thinking block of the turn closed (the ``index`` of its deltas)."""
    summary_mode: str | None = None
    """The ``mode`` of the block's ``<eval_summary>`` marker (``"default"`` without
    one); ``None`` when the block has no marker."""
    evaluation: tuple[EvalItem, ...] = ()
    """The marker's items (see :mod:`mainspring.thinking`)."""
    type: Literal["thinking_done"] = "thinking_done"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDelta:
    """A fragment of a tool call's JSON arguments, as the model streams it."""

    tool_use_id: str
    name: str
    index: int
    """Position of the call within the model step."""
    args_delta: str
    type: Literal["tool_call_delta"] = "tool_call_delta"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolStart:
    """A tool begins executing with this (validated) input."""

    tool_use_id: str
    name: str
    input: dict[str, JsonValue]
    type: Literal["tool_start"] = "tool_start"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolProgress:
    """A running tool reported progress; ``pct`` is 0-100 when known."""

    tool_use_id: str
    name: str
    message: str
    pct: float | None = None
    type: Literal["tool_progress"] = "tool_progress"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """A call's result as the model will see it (errors included)."""

    tool_use_id: str
    name: str
    content: str
    is_error: bool = False
    type: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionDenied:
    """A call was refused by policy (a permission rule or a guard) and never ran.

    Emitted just before the call's ``tool_result`` (``is_error``), which is what
    the model sees, unchanged. A person's rejection of a pending action is not a
    denial: that is the decision (``Reject``) the host sent.
    """

    tool_use_id: str
    name: str
    reason: str
    """Why, in words (the rule's or the guard's message)."""
    source: str = "permission"
    """What refused it: ``"deny_list"``, ``"callback"`` (``can_use_tool``), ``"default"``,
    or the name of the guard that blocked it."""
    principal: str | None = None
    """Who the call was made for: the session's owner (``SessionState.principal``),
    else the caller of the engine scope it ran in (``kind:id``), else ``None``."""
    type: Literal["permission_denied"] = "permission_denied"


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """Why a guard or permission rule stepped in."""

    source: str
    """The guard or rule that produced it (``"permission"``, ``"usd_tier"``, a guard name)."""
    message: str
    tier: Literal["safety", "financial", "ux", "policy"] = "policy"
    action: Literal["block", "confirm", "hint"] = "confirm"


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingAction:
    """A write waits for a decision; the turn is paused until ``resume``."""

    attempt_id: str
    """UUID4; the stable join key for the decision."""
    tool_use_id: str
    turn_index: int
    name: str
    input: dict[str, JsonValue]
    description: str
    modifiable_fields: tuple[str, ...] = ()
    reason: str = ""
    findings: tuple[Finding, ...] = ()
    client_executed: bool = False
    """The host executes it and reports the result via ``resume``."""
    amount_usd: float | None = None
    nested: PendingAction | None = None
    """The action a nested run (a subagent, a remote agent) waits on, when this call
    suspended on it: deciding this action decides that one (edits included)."""
    approval_id: str = ""
    """The id a client decides by: the engine fills in :attr:`attempt_id`; the
    application server (:mod:`mainspring.server`) hands out a signed token
    instead, binding the session, the attempt and the hash of this exact input."""
    input_hash: str = ""
    """SHA-256 of :attr:`input`'s canonical JSON
    (:func:`~mainspring.decisions.canonical_input_hash`): a decision that names
    the hash it approved (``Approve(input_hash=…)``) is refused for any other."""
    details: dict[str, JsonValue] = field(default_factory=dict)
    """What the tool adds for the approver (``ToolPolicy.details``): by convention
    ``quote``, ``route``, ``projected`` (values after the action) and
    ``quote_age_s``; any other JSON key is kept as is."""
    can_regenerate: bool = False
    """The tool can produce a fresh input (a new quote) before it is decided:
    ``Session.regenerate(attempt_id)``."""
    regenerate_input: dict[str, JsonValue] | None = None
    """What a regeneration starts from: the call's input as the model asked for it
    (``input`` is the latest regenerated one)."""
    expires_at: float | None = None
    """When it expires (Unix seconds; ``None``: never): past it, no decision but
    ``Expire`` is accepted and the call never runs (see :mod:`mainspring.approvals`)."""
    quorum: int = 1
    """Distinct approving principals needed before it runs."""
    allow_self_approval: bool = True
    """Whether :attr:`requested_by` may approve it."""
    requested_by: str = ""
    """The principal whose session asked for it (``""``: none)."""
    policy_version: str = ""
    """The policy version (``PermissionRules.version``) it was asked for under."""
    type: Literal["pending_action"] = "pending_action"

    def __post_init__(self) -> None:
        if not self.approval_id:
            object.__setattr__(self, "approval_id", self.attempt_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class Canvas:
    """Rich content for the host to render (a chart, a table, a form)."""

    kind: str
    data: JsonValue
    title: str = ""
    tool_use_id: str | None = None
    type: Literal["canvas"] = "canvas"


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageEvent:
    """Usage and cost of one model call, with the turn's running total."""

    model: str
    usage: Usage
    cost_usd: float = 0.0
    total_cost_usd: float = 0.0
    estimated: bool = False
    """The provider reported no usage (or not all of it): ``usage`` and
    ``cost_usd`` are estimated with an offline tokenizer, not the provider's count."""
    type: Literal["usage"] = "usage"


@dataclass(frozen=True, slots=True, kw_only=True)
class SteeringQueued:
    """A message sent while a run was active was queued for that run to take.

    The stream ``send`` returned then ends with ``turn_complete(stop_reason="steered")``;
    the active run's own stream says when it takes it (``steering_taken``).
    """

    steering_id: str
    mode: Literal["next_step", "follow_up"]
    turn_index: int = 0
    """The turn running when it was queued."""
    type: Literal["steering_queued"] = "steering_queued"


@dataclass(frozen=True, slots=True, kw_only=True)
class SteeringTaken:
    """The active run took a queued message into the conversation.

    ``next_step``: appended before the turn's next model call; ``follow_up``:
    the user message of a new turn (``turn_index``) that follows the one that ended.
    """

    steering_id: str
    mode: Literal["next_step", "follow_up"]
    text: str
    turn_index: int
    step: int = 0
    """Model calls the turn had made when it was taken."""
    type: Literal["steering_taken"] = "steering_taken"


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputPartial:
    """The typed output so far, while the model streams it (for a UI to render).

    Best effort: the JSON parsed from the answer (or the final-answer tool's
    arguments) streamed so far, not validated; a later ``output_retry`` means
    it was refused. Only agents with an ``output_type`` other than ``str``.
    """

    output: JsonValue
    type: Literal["output_partial"] = "output_partial"


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputRetry:
    """The model's answer was refused and goes back to it with ``reason``.

    It did not validate against the agent's ``output_type``, or an output
    validator rejected it; ``retries`` counts the answers sent back this turn.
    """

    reason: str
    retries: int
    type: Literal["output_retry"] = "output_retry"


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalOutput:
    """The turn's validated typed output, as JSON data; just before its ``turn_complete``.

    ``RunResult.output`` is the same value as an instance of the agent's
    ``output_type``.
    """

    output: JsonValue
    turn_index: int = 0
    type: Literal["final_output"] = "final_output"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalAdded:
    """One principal's approval of a quorum is on record; the action still waits.

    The stream of a ``resume`` that adds an approval short of the quorum is
    this, the unchanged ``pending_action`` and ``turn_complete(stop_reason=
    "pending_action")``: nothing ran.
    """

    attempt_id: str
    principal: str
    approvals: tuple[str, ...]
    """Every principal whose approval is on record (sorted)."""
    quorum: int
    type: Literal["approval_added"] = "approval_added"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalExpiring:
    """A pending action will expire soon (its warning lead time has begun).

    A paused session runs nothing, so nothing can emit this on a timer: it is
    emitted when the paused stream is followed (``Session.send(resume_stream_id=...)``)
    inside the warning lead time, just before its ``pending_action``. A host
    that needs a push notice asks :func:`mainspring.approvals.expiring` itself.
    """

    attempt_id: str
    expires_at: float
    seconds_left: float
    type: Literal["approval_expiring"] = "approval_expiring"


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardrailVerdict:
    """A guardrail (:mod:`mainspring.guardrails`) judged the turn's input or its final answer.

    One per guardrail that finished. A tripped one (``tripwire=True``) is followed
    by ``turn_complete(stop_reason="guardrail_tripped")``, or by an ``error`` event
    (``code="guardrail_failed"``) when the guardrail raised (``error`` says what).
    """

    name: str
    stage: Literal["input", "output"]
    tripwire: bool
    reason: str = ""
    info: JsonValue = None
    error: str = ""
    """What the guardrail raised (it then counts as tripped: guardrails fail closed)."""
    turn_index: int = 0
    type: Literal["guardrail_verdict"] = "guardrail_verdict"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnComplete:
    """Terminal: the turn ended (or paused) for ``stop_reason``."""

    stop_reason: StopReason
    turn_index: int = 0
    usage: Usage = Usage()
    cost_usd: float = 0.0
    type: Literal["turn_complete"] = "turn_complete"


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorEvent:
    """Terminal: the run failed; ``code`` is stable, ``message`` is for people."""

    code: str
    message: str
    retryable: bool = False
    attempt_id: str | None = None
    type: Literal["error"] = "error"


Event: TypeAlias = (
    StreamStarted
    | TextDelta
    | ThinkingDelta
    | ThinkingDone
    | ToolCallDelta
    | ToolStart
    | ToolProgress
    | ToolResult
    | PermissionDenied
    | PendingAction
    | Canvas
    | UsageEvent
    | SteeringQueued
    | SteeringTaken
    | OutputPartial
    | OutputRetry
    | FinalOutput
    | ApprovalAdded
    | ApprovalExpiring
    | GuardrailVerdict
    | TurnComplete
    | ErrorEvent
)
"""Any event a run yields; ``type`` tells them apart."""

TERMINAL_EVENT_TYPES = frozenset({"turn_complete", "error"})
"""The ``type`` of the event every stream ends with, exactly once."""

# Built on every step: a faster constructor (the same instances).
fast_init(TextDelta)
fast_init(ThinkingDelta)
fast_init(ToolCallDelta)
fast_init(ToolStart)
fast_init(ToolResult)
fast_init(UsageEvent)
fast_init(TurnComplete)
