"""AG-UI 1.0 over a mainspring run, through the ``ag-ui-protocol`` package.

``POST /v1/agui`` takes a ``RunAgentInput`` and streams the run as AG-UI
events (the package's own models and ``EventEncoder``; the mapping is
:mod:`._agui_events`). ``threadId`` is the session's id (created on first use,
owned by the caller). The session keeps the conversation, so of ``messages``
only the end is read:

* a user message last: its text starts a turn (the message keeps its ``id``:
  the ``MESSAGES_SNAPSHOT`` a run ends with names every message as the
  client and the stream did, see :mod:`._agui_events`);
* a run that paused for approval finished with an ``interrupt`` outcome (one
  interrupt per open pending action, ``reason: "tool_call"``, its ``id`` the
  server's signed approval id); the next input carries ``resume``, one entry
  per open interrupt — ``resolved`` with ``payload`` ``{"approved": true,
  "edits": {…}}`` (or ``true``) / ``{"approved": false, "reason": …}`` (or
  ``false``), or ``cancelled`` (a rejection);
* a run that stopped on a client-executed (frontend) tool finished as
  ``success`` naming it in ``pendingToolCallIds``; the next input carries its
  result as a tool message (``role: "tool"``, ``toolCallId``, ``content``,
  ``error`` when it failed).

An input that leaves an open interrupt unanswered, answers one twice or names
one that is not open is refused with a 4xx (400/403/404/409) before anything
runs, so nothing is decided by a malformed resume. ``tools`` and ``state`` of
the input are accepted but not used: the agent's tools run on the server, and
the session's state is the server's (``STATE_SNAPSHOT``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Body, Depends
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError
from sse_starlette import EventSourceResponse

from mainspring.codec import encode
from mainspring.decisions import Approve, ClientResult, Decision, Reject
from mainspring.errors import ConfigError, SessionBusy
from mainspring.events import (
    PendingAction,
    TurnComplete,
)
from mainspring.messages import Message, TextPart
from mainspring.server._agui_events import AguiRun
from mainspring.server._auth import Principal
from mainspring.server._deps import authenticated, host_of
from mainspring.server._host import NotFound, SessionHost
from mainspring.server._runs import LiveRun
from mainspring.server._schemas import ErrorBody
from mainspring.server._threads import CLIENT_ID, check_thread_id, open_thread
from mainspring.session import Session

try:
    from ag_ui.core import ResumeEntry, RunAgentInput, ToolMessage
    from ag_ui.encoder import EventEncoder
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError('the AG-UI route needs: pip install "mainspring[server]"') from exc

__all__ = ["agui_router", "decision_of"]


class ApprovalAnswer(BaseModel):
    """The ``payload`` answering a tool approval interrupt."""

    model_config = ConfigDict(extra="forbid", strict=True)

    approved: bool
    """Strictly a JSON boolean: ``"yes"`` or ``1`` approves nothing."""
    edits: dict[str, JsonValue] = Field(default_factory=dict)
    reason: str | None = Field(default=None, max_length=4000)


def decision_of(entry: ResumeEntry) -> Decision:
    """What a resume entry decides for the tool call its interrupt asked about.

    Raises:
        ConfigError: A payload that does not answer this kind of interrupt.
    """
    if entry.status == "cancelled":
        return Reject(reason="The user cancelled.")
    payload = entry.payload
    try:
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


def _state(host: SessionHost, session: Session) -> dict[str, JsonValue]:
    state = session.state
    pending = session.pending
    return {
        "sessionId": session.session_id,
        "turnIndex": state.turn_index,
        "messages": len(state.messages),
        "usage": encode(state.usage),
        "costUsd": state.cost_usd,
        "pending": (
            host.wire_dict(session.session_id, pending, principal=session.state.principal or "")
            if pending
            else None
        ),
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
    if pending is not None and pending.client_executed:
        raise ConfigError(
            "the thread waits on a client tool's result: send it as a tool message, not resume"
        )
    owner = session.state.principal or ""
    open_id = (
        host.approval_id(session.session_id, pending, principal=owner)
        if pending is not None
        else None
    )
    for entry in resume:
        if entry.interrupt_id != open_id:
            host.pending_for(session, entry.interrupt_id)  # says why: forged, decided, stale
            raise NotFound(f"no open interrupt {entry.interrupt_id[:60]!r}")
    if pending is None or open_id is None or open_id not in ids:
        raise ConfigError("resume must answer every open interrupt")
    return open_id, decision_of(resume[ids.index(open_id)])


def _client_result(pending: PendingAction, run_input: RunAgentInput) -> ClientResult | None:
    """The result of the frontend tool ``pending`` in the input's messages, if any."""
    for message in reversed(run_input.messages):
        if isinstance(message, ToolMessage) and message.tool_call_id == pending.tool_use_id:
            content = _text_of(message.content)
            if message.error is not None:
                return ClientResult(content=message.error or content, is_error=True)
            return ClientResult(content=content)
    return None


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    assert isinstance(content, list)
    return "\n".join(str(getattr(part, "text", "")) for part in content if part.type == "text")


def _user_message(run_input: RunAgentInput) -> Message:
    """The input's last message, the user's, keeping the id the client gave it."""
    if not run_input.messages:
        raise ConfigError("messages is empty: the last one must be the user's")
    last = run_input.messages[-1]
    if getattr(last, "role", None) != "user":
        raise ConfigError("the last message must be the user's (or send resume)")
    text = _text_of(getattr(last, "content", ""))
    if not text.strip():
        raise ConfigError("the last user message has no text")
    if not 1 <= len(last.id) <= 200:
        raise ConfigError("the last user message's id must be 1-200 characters")
    return Message(role="user", parts=(TextPart(text=text),), meta={CLIENT_ID: last.id})


async def _start(
    host: SessionHost, session: Session, run_input: RunAgentInput
) -> tuple[LiveRun, str | None]:
    """Start the run the input asks for; the tool call it continues, if any."""
    thread_id = session.session_id
    pending = session.pending
    if run_input.resume:
        approval_id, decision = _resumed(host, session, run_input.resume)
        decided = host.pending_for(session, approval_id).tool_use_id
        return await host.decide(session, approval_id, decision), decided
    if pending is not None and pending.client_executed:
        result = _client_result(pending, run_input)
        if result is None:
            raise SessionBusy(
                f"thread {thread_id!r} waits on the result of tool call {pending.tool_use_id!r}"
            )
        approval_id = host.approval_id(thread_id, pending, principal=session.state.principal or "")
        return await host.decide(session, approval_id, result), pending.tool_use_id
    if pending is not None:
        raise SessionBusy(f"thread {thread_id!r} waits on an interrupt: answer it with resume")
    return await host.send(session, _user_message(run_input)), None


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
    base = len(session.messages)  # where the run's messages go: their ids count from it
    live, decided = await _start(host, session, run_input)
    mapper = AguiRun(thread_id=thread_id, run_id=run_input.run_id, decided=decided, base=base)
    encoder = EventEncoder()

    async def frames() -> AsyncIterator[bytes]:
        for out in mapper.started():
            yield encoder.encode(out).encode()
        async for _position, event in live.follow():
            wired = host.wire(thread_id, event, principal=caller.id)
            if isinstance(event, TurnComplete):
                ending = mapper.events(wired, _state(host, live.session), live.session.messages)
            else:
                ending = mapper.events(wired)
            for out in ending:
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
