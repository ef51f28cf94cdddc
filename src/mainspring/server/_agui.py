"""AG-UI 1.0 over a mainspring run, through the ``ag-ui-protocol`` package.

``POST /v1/agui`` takes a ``RunAgentInput`` and streams the run as AG-UI
events (the package's own models, encoded like its ``EventEncoder``):
``RUN_STARTED``; ``TEXT_MESSAGE_START/CONTENT/END``; ``REASONING_START``,
``REASONING_MESSAGE_START/CONTENT/END``, ``REASONING_END``;
``TOOL_CALL_START/ARGS/END/RESULT``; tool progress and canvases as
``CUSTOM`` events; ``STATE_SNAPSHOT`` of the session; and ``RUN_FINISHED``
— ``outcome`` ``success``, ``cancelled``, or ``interrupt`` carrying every open
pending action, each interrupt's ``id`` the server's signed approval id — or
``RUN_ERROR``.

``threadId`` is the session's id (created on first use, owned by the caller).
The session keeps the conversation: of ``messages`` only the last is read, a
user message whose text starts the turn. A run that continues an interrupt
sends ``resume``: one entry per open interrupt (``status`` ``resolved`` with a
``payload`` of ``{"approved": true, "edits": {…}}`` / ``{"approved": false,
"reason": …}``, or ``{"content": …, "isError": …}`` for a client-executed tool;
``cancelled`` rejects). A resume that leaves an open interrupt unanswered,
or answers one that is not open, is refused (400/403/404/409) before anything
runs. ``tools`` and ``state`` of the input are accepted but not used: the
agent's tools run on the server, and the session's state is the server's.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError
from sse_starlette import EventSourceResponse

from mainspring.codec import encode
from mainspring.decisions import Approve, ClientResult, Decision, Reject
from mainspring.errors import ConfigError, SessionBusy
from mainspring.events import (
    Canvas,
    ErrorEvent,
    Event,
    PendingAction,
    StreamStarted,
    TextDelta,
    ThinkingDelta,
    ThinkingDone,
    ToolCallDelta,
    ToolProgress,
    ToolResult,
    ToolStart,
    TurnComplete,
    UsageEvent,
)
from mainspring.server._auth import Principal
from mainspring.server._deps import authenticated, host_of
from mainspring.server._host import NotFound, SessionHost
from mainspring.server._schemas import ErrorBody
from mainspring.server._threads import check_thread_id, open_thread
from mainspring.session import Session

try:
    from ag_ui.core import (
        PROTOCOL_VERSION,
        BaseEvent,
        CustomEvent,
        Interrupt,
        ReasoningEndEvent,
        ReasoningMessageContentEvent,
        ReasoningMessageEndEvent,
        ReasoningMessageStartEvent,
        ReasoningStartEvent,
        ResumeEntry,
        RunAgentInput,
        RunErrorEvent,
        RunFinishedCancelledOutcome,
        RunFinishedEvent,
        RunFinishedInterruptOutcome,
        RunFinishedSuccessOutcome,
        RunStartedEvent,
        StateSnapshotEvent,
        TextMessageContentEvent,
        TextMessageEndEvent,
        TextMessageStartEvent,
        TokenUsage,
        ToolCallArgsEvent,
        ToolCallEndEvent,
        ToolCallResultEvent,
        ToolCallStartEvent,
    )
    from ag_ui.encoder import EventEncoder
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError('the AG-UI route needs: pip install "mainspring[server]"') from exc

__all__ = ["AguiRun", "agui_router", "decision_of"]

_CANCELLED = frozenset({"cancelled", "interrupted"})


class ApprovalAnswer(BaseModel):
    """The ``payload`` answering a tool approval interrupt."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    approved: bool
    edits: dict[str, JsonValue] = Field(default_factory=dict)
    reason: str | None = Field(default=None, max_length=4000)


class ClientToolAnswer(BaseModel):
    """The ``payload`` answering a client-executed tool's interrupt: its result."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    content: str = Field(max_length=1_000_000)
    is_error: bool = Field(default=False, alias="isError")


_APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "edits": {"type": "object", "description": "new values of modifiable fields"},
        "reason": {"type": "string", "description": "why it was declined (to the model)"},
    },
    "required": ["approved"],
    "additionalProperties": False,
}
_CLIENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"content": {"type": "string"}, "isError": {"type": "boolean"}},
    "required": ["content"],
    "additionalProperties": False,
}


def interrupt_of(pending: PendingAction) -> Interrupt:
    """``pending`` (its approval id already signed) as an AG-UI interrupt."""
    client = pending.client_executed
    message = pending.description
    if pending.reason:
        message = f"{message} ({pending.reason})" if message else pending.reason
    return Interrupt(
        id=pending.approval_id,
        reason="client_tool" if client else "tool_approval",
        message=message or None,
        tool_call_id=pending.tool_use_id,
        response_schema=_CLIENT_SCHEMA if client else _APPROVAL_SCHEMA,
        metadata={
            "toolName": pending.name,
            "input": pending.input,
            "modifiableFields": list(pending.modifiable_fields),
            "amountUsd": pending.amount_usd,
            "findings": [encode(f) for f in pending.findings],
        },
    )


def decision_of(pending: PendingAction, entry: ResumeEntry) -> Decision:
    """What a resume entry decides for ``pending``.

    Raises:
        ConfigError: A payload that does not answer this kind of interrupt.
    """
    if entry.status == "cancelled":
        return Reject(reason="The user cancelled.")
    payload = entry.payload
    try:
        if pending.client_executed:
            answer = ClientToolAnswer.model_validate(payload)
            return ClientResult(content=answer.content, is_error=answer.is_error)
        if isinstance(payload, bool):
            payload = {"approved": payload}
        approval = ApprovalAnswer.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "payload"
        raise ConfigError(
            f"resume payload for {entry.interrupt_id[:40]!r}: {where}: {first.get('msg')}"
        ) from exc
    if approval.approved:
        return Approve(edits=dict(approval.edits))
    return Reject(reason=approval.reason or "The user declined.")


def _usage(event: UsageEvent) -> TokenUsage:
    usage = event.usage
    total_in = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    return TokenUsage(
        model=event.model,
        input_tokens=total_in,
        output_tokens=usage.output_tokens,
        total_tokens=total_in + usage.output_tokens,
        reasoning_tokens=usage.reasoning_tokens or None,
        cached_input_tokens=usage.cache_read_tokens or None,
        cache_write_input_tokens=usage.cache_write_tokens or None,
    )


class AguiRun:
    """Turns one mainspring stream into AG-UI events (a pure mapper, one run)."""

    def __init__(self, *, thread_id: str, run_id: str, decided: str | None = None) -> None:
        """A mapper for the run ``run_id`` of ``thread_id``.

        ``decided`` is the tool call a resume continues: announced by the run
        it interrupted, so this one sends only its result.
        """
        self.thread_id = thread_id
        self.run_id = run_id
        self.stream_id: str | None = None
        self.finished = False
        self._text: str | None = None
        self._reasoning: str | None = None
        self._calls_open: set[str] = set()
        self._calls_ended: set[str] = set()
        self._interrupts: list[Interrupt] = []
        self._usage: dict[str, TokenUsage] = {}
        if decided is not None:
            self._calls_open.add(decided)
            self._calls_ended.add(decided)

    def started(self) -> list[BaseEvent]:
        """The run's first event."""
        return [
            RunStartedEvent(
                thread_id=self.thread_id, run_id=self.run_id, protocol_version=PROTOCOL_VERSION
            )
        ]

    def _close(self) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        if self._text is not None:
            out.append(TextMessageEndEvent(message_id=self._text))
            self._text = None
        if self._reasoning is not None:
            out.append(ReasoningMessageEndEvent(message_id=self._reasoning))
            out.append(ReasoningEndEvent(message_id=self._reasoning))
            self._reasoning = None
        return out

    def _call(self, tool_use_id: str, name: str, args: str | None) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        if tool_use_id not in self._calls_open:
            self._calls_open.add(tool_use_id)
            out.append(ToolCallStartEvent(tool_call_id=tool_use_id, tool_call_name=name))
            if args is not None:
                out.append(ToolCallArgsEvent(tool_call_id=tool_use_id, delta=args))
        if tool_use_id not in self._calls_ended:
            self._calls_ended.add(tool_use_id)
            out.append(ToolCallEndEvent(tool_call_id=tool_use_id))
        return out

    def events(self, event: Event, state: dict[str, JsonValue] | None = None) -> list[BaseEvent]:
        """The AG-UI events ``event`` becomes; ``state`` is the session's, for the end."""
        if isinstance(event, StreamStarted):
            self.stream_id = event.stream_id
            return []
        if isinstance(event, TextDelta | ThinkingDelta):
            return self._delta(event)
        if isinstance(event, ToolCallDelta | ToolStart | PendingAction | ToolResult):
            return [*self._close(), *self._tool(event)]
        if isinstance(event, ToolProgress | Canvas):
            return [self._custom(event)]
        if isinstance(event, UsageEvent):
            entry = _usage(event)
            previous = self._usage.get(event.model)
            self._usage[event.model] = entry if previous is None else _add(previous, entry)
            return []
        out = self._close()
        if isinstance(event, TurnComplete):
            if state is not None:
                out.append(StateSnapshotEvent(snapshot=state))
            out.append(self._finished(event))
        elif isinstance(event, ErrorEvent):
            self.finished = True
            out.append(RunErrorEvent(message=event.message, code=event.code))
        else:
            assert isinstance(event, ThinkingDone)
        return out

    def _delta(self, event: TextDelta | ThinkingDelta) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        if isinstance(event, TextDelta):
            if self._reasoning is not None:
                out += self._close()
            if self._text is None:
                self._text = str(uuid.uuid4())
                out.append(TextMessageStartEvent(message_id=self._text, role="assistant"))
            out.append(TextMessageContentEvent(message_id=self._text, delta=event.text))
            return out
        if self._text is not None:
            out += self._close()
        if self._reasoning is None:
            self._reasoning = str(uuid.uuid4())
            out.append(ReasoningStartEvent(message_id=self._reasoning))
            out.append(ReasoningMessageStartEvent(message_id=self._reasoning, role="reasoning"))
        out.append(ReasoningMessageContentEvent(message_id=self._reasoning, delta=event.text))
        return out

    def _tool(
        self, event: ToolCallDelta | ToolStart | PendingAction | ToolResult
    ) -> list[BaseEvent]:
        tool_use_id = event.tool_use_id
        if isinstance(event, ToolStart):
            return self._call(tool_use_id, event.name, json.dumps(event.input))
        if isinstance(event, PendingAction):
            self._interrupts.append(interrupt_of(event))
            return self._call(tool_use_id, event.name, json.dumps(event.input))
        out: list[BaseEvent] = []
        if isinstance(event, ToolResult):
            if tool_use_id in self._calls_open and tool_use_id not in self._calls_ended:
                out.append(ToolCallEndEvent(tool_call_id=tool_use_id))
            self._calls_ended.add(tool_use_id)
            out.append(
                ToolCallResultEvent(
                    message_id=str(uuid.uuid4()),
                    tool_call_id=tool_use_id,
                    content=event.content,
                    role="tool",
                    metadata={"isError": True} if event.is_error else None,
                )
            )
            return out
        if tool_use_id not in self._calls_open:
            self._calls_open.add(tool_use_id)
            out.append(ToolCallStartEvent(tool_call_id=tool_use_id, tool_call_name=event.name))
        if event.args_delta and tool_use_id not in self._calls_ended:
            out.append(ToolCallArgsEvent(tool_call_id=tool_use_id, delta=event.args_delta))
        return out

    def _custom(self, event: ToolProgress | Canvas) -> CustomEvent:
        if isinstance(event, ToolProgress):
            value: dict[str, JsonValue] = {
                "toolCallId": event.tool_use_id,
                "toolName": event.name,
                "message": event.message,
                "pct": event.pct,
            }
            return CustomEvent(name="mainspring.tool_progress", value=value)
        canvas: dict[str, JsonValue] = {
            "kind": event.kind,
            "title": event.title,
            "data": event.data,
            "toolCallId": event.tool_use_id,
        }
        return CustomEvent(name="mainspring.canvas", value=canvas)

    def _finished(self, event: TurnComplete) -> RunFinishedEvent:
        self.finished = True
        outcome: (
            RunFinishedSuccessOutcome | RunFinishedInterruptOutcome | RunFinishedCancelledOutcome
        )
        if event.stop_reason == "pending_action" and self._interrupts:
            outcome = RunFinishedInterruptOutcome(interrupts=self._interrupts)
        elif event.stop_reason in _CANCELLED:
            outcome = RunFinishedCancelledOutcome()
        else:
            outcome = RunFinishedSuccessOutcome()
        return RunFinishedEvent(
            thread_id=self.thread_id,
            run_id=self.run_id,
            outcome=outcome,
            result={"stopReason": event.stop_reason, "costUsd": event.cost_usd},
            usage=list(self._usage.values()) or None,
            metadata={"streamId": self.stream_id} if self.stream_id else None,
        )

    def end(self) -> list[BaseEvent]:
        """What closes a stream cut short of its terminal event."""
        if self.finished:
            return []
        self.finished = True
        return [
            *self._close(),
            RunErrorEvent(message="the stream ended before the run did", code="stream_cut"),
        ]


def _add(a: TokenUsage, b: TokenUsage) -> TokenUsage:
    def plus(x: int | None, y: int | None) -> int | None:
        return None if x is None and y is None else (x or 0) + (y or 0)

    return TokenUsage(
        model=a.model,
        input_tokens=plus(a.input_tokens, b.input_tokens),
        output_tokens=plus(a.output_tokens, b.output_tokens),
        total_tokens=plus(a.total_tokens, b.total_tokens),
        reasoning_tokens=plus(a.reasoning_tokens, b.reasoning_tokens),
        cached_input_tokens=plus(a.cached_input_tokens, b.cached_input_tokens),
        cache_write_input_tokens=plus(a.cache_write_input_tokens, b.cache_write_input_tokens),
    )


def _state(host: SessionHost, session: Session) -> dict[str, JsonValue]:
    state = session.state
    pending = session.pending
    return {
        "sessionId": session.session_id,
        "turnIndex": state.turn_index,
        "messages": len(state.messages),
        "usage": encode(state.usage),
        "costUsd": state.cost_usd,
        "pending": host.wire_dict(session.session_id, pending) if pending else None,
    }


# ------------------------------------------------------------------------ routes

agui_router = APIRouter(
    prefix="/v1",
    tags=["ag-ui"],
    responses={
        400: {"model": ErrorBody, "description": "A resume that does not answer the interrupts"},
        401: {"model": ErrorBody, "description": "No valid credential"},
        403: {"model": ErrorBody, "description": "An interrupt id this server did not sign"},
        404: {"model": ErrorBody, "description": "No such thread (of yours)"},
        409: {"model": ErrorBody, "description": "Busy, interrupted, or already decided"},
        422: {"model": ErrorBody, "description": "Not a RunAgentInput"},
    },
)

Caller = Annotated[Principal, Depends(authenticated)]
Host = Annotated[SessionHost, Depends(host_of)]


def _resumed(
    host: SessionHost, session: Session, resume: list[ResumeEntry]
) -> tuple[str, Decision]:
    """The approval id and decision a resume answers the open interrupt with.

    Raises:
        ConfigError: An open interrupt unanswered, or an entry twice.
        BadApproval / NotFound / DecisionConflict: An entry for no open interrupt.
    """
    ids = [entry.interrupt_id for entry in resume]
    if len(set(ids)) != len(ids):
        raise ConfigError("resume answers an interrupt more than once")
    pending = session.pending
    open_id = host.signer.sign(session.session_id, pending) if pending is not None else None
    for entry in resume:
        if entry.interrupt_id != open_id:
            host.pending_for(session, entry.interrupt_id)  # says why: forged, decided, stale
            raise NotFound(f"no open interrupt {entry.interrupt_id[:60]!r}")
    if pending is None or open_id is None:
        raise NotFound("the thread has no open interrupt to resume")
    if open_id not in ids:
        raise ConfigError("resume must answer every open interrupt; unanswered: " + open_id)
    entry = resume[ids.index(open_id)]
    return open_id, decision_of(pending, entry)


@agui_router.post(
    "/agui",
    responses={200: {"content": {"text/event-stream": {}}, "description": "AG-UI events"}},
    response_class=EventSourceResponse,
)
async def run_agent(
    caller: Caller, host: Host, run_input: Annotated[RunAgentInput, Body()]
) -> EventSourceResponse:
    """Run the agent on a thread (``RunAgentInput``), or resume it past its interrupts."""
    thread_id = check_thread_id(run_input.thread_id)
    if not run_input.run_id or len(run_input.run_id) > 200:
        raise ConfigError("runId must be 1-200 characters")
    session = await open_thread(host, caller, thread_id)
    if host.runs.active(thread_id) is not None:
        raise SessionBusy(f"thread {thread_id!r} already has an active run")
    decided: str | None = None
    if run_input.resume:
        approval_id, decision = _resumed(host, session, run_input.resume)
        decided = host.pending_for(session, approval_id).tool_use_id
        live = await host.decide(session, approval_id, decision)
    else:
        if session.pending is not None:
            raise SessionBusy(f"thread {thread_id!r} waits on an interrupt: answer it with resume")
        live = await host.send(session, _user_text(run_input))
    mapper = AguiRun(thread_id=thread_id, run_id=run_input.run_id, decided=decided)
    encoder = EventEncoder()

    async def frames() -> AsyncIterator[bytes]:
        for out in mapper.started():
            yield encoder.encode(out).encode()
        async for _position, event in live.follow():
            wired = host.wire(thread_id, event)
            state = _state(host, live.session) if isinstance(event, TurnComplete) else None
            for out in mapper.events(wired, state):
                yield encoder.encode(out).encode()
        for out in mapper.end():
            yield encoder.encode(out).encode()

    return EventSourceResponse(
        frames(),
        ping=15,
        sep="\n",
        media_type=encoder.get_content_type(),
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        shutdown_event=host.stopping,
        shutdown_grace_period=host.config.shutdown_grace,
    )


def _user_text(run_input: RunAgentInput) -> str:
    if not run_input.messages:
        raise ConfigError("messages is empty: the last one must be the user's")
    last = run_input.messages[-1]
    if getattr(last, "role", None) != "user":
        raise ConfigError("the last message must be the user's (or send resume)")
    content = getattr(last, "content", "")
    if isinstance(content, str):
        text = content
    else:
        text = "\n".join(getattr(part, "text", "") for part in content if part.type == "text")
    if not text.strip():
        raise ConfigError("the last user message has no text")
    return text
