"""The request and response bodies of the REST API (they make its OpenAPI document)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

__all__ = [
    "ApproveBody",
    "ClientResultBody",
    "DecisionBody",
    "ErrorBody",
    "ErrorDetail",
    "ExpireBody",
    "MessageBody",
    "PendingBody",
    "RejectBody",
    "SessionInfo",
    "SessionList",
    "StateBody",
    "SteerBody",
]

_STRICT = ConfigDict(extra="forbid")


class ErrorDetail(BaseModel):
    """What went wrong: a stable ``type`` and a sentence."""

    type: str
    message: str
    details: list[Any] | None = None


class ErrorBody(BaseModel):
    """Every 4xx and 5xx answer."""

    error: ErrorDetail


class MessageBody(BaseModel):
    """``POST /sessions/{id}/messages``: a user message, or a stream to resume."""

    model_config = _STRICT
    message: Annotated[str, Field(min_length=1, max_length=200_000)] | None = None
    resume_stream_id: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    after: Annotated[int, Field(ge=-1)] = -1
    """With ``resume_stream_id``: the position of the last event the client has."""


class SteerBody(BaseModel):
    """``POST /sessions/{id}/steer``: a message for the running turn."""

    model_config = _STRICT
    message: Annotated[str, Field(min_length=1, max_length=200_000)]
    mode: Literal["next_step", "follow_up"] = "next_step"


class ApproveBody(BaseModel):
    """Run the action, with ``edits`` of its modifiable fields."""

    model_config = _STRICT
    decision: Literal["approve"]
    edits: dict[str, JsonValue] = Field(default_factory=dict)


class RejectBody(BaseModel):
    """Do not run it; ``reason`` is told to the model."""

    model_config = _STRICT
    decision: Literal["reject"]
    reason: Annotated[str, Field(max_length=10_000)] = "The user declined."


class ClientResultBody(BaseModel):
    """The client ran a client-executed tool; this is its result."""

    model_config = _STRICT
    decision: Literal["client_result"]
    content: Annotated[str, Field(max_length=500_000)]
    is_error: bool = False


class ExpireBody(BaseModel):
    """Settle an action whose approval expired: it never runs; the model is told."""

    model_config = _STRICT
    decision: Literal["expire"]


DecisionBody = Annotated[
    ApproveBody | RejectBody | ClientResultBody | ExpireBody, Field(discriminator="decision")
]


class SessionInfo(BaseModel):
    """A session at a glance."""

    session_id: str
    agent: str
    turn_index: int
    messages: int
    running: bool
    pending: dict[str, JsonValue] | None
    usage: dict[str, JsonValue]
    cost_usd: float
    active_stream: str | None
    last_stream: str | None


class SessionList(BaseModel):
    """The caller's own sessions."""

    sessions: list[str]


class PendingBody(BaseModel):
    """The action awaiting a decision (``null`` when none is)."""

    pending: dict[str, JsonValue] | None


class StateBody(BaseModel):
    """The session's durable state: transcript, usage, the turn, decisions and writes."""

    session_id: str
    agent: str
    turn_index: int
    messages: list[dict[str, JsonValue]]
    usage: dict[str, JsonValue]
    cost_usd: float
    auto_spent_usd: float
    turn: JsonValue
    decided: dict[str, str]
    writes: dict[str, JsonValue]
    pending: dict[str, JsonValue] | None
