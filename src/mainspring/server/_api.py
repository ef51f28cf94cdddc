"""The REST and SSE routes of mainspring's own wire format.

``/v1/sessions`` and below: create, list (the caller's own), get, delete;
``POST …/messages`` streams a turn's events as SSE (each with an ``id`` of
``<stream id>:<position>``), ``GET …/stream`` (or ``Last-Event-ID`` on the
POST) follows a stream from a position; ``POST …/decisions/{approval_id}``
decides the pending action and streams the rest of the turn; ``POST
…/cancel``; ``GET …/pending`` and ``GET …/state`` as JSON.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Header, Query
from fastapi.responses import Response
from pydantic import JsonValue
from sse_starlette import EventSourceResponse, ServerSentEvent

from mainspring.codec import encode, event_to_dict, message_to_dict
from mainspring.decisions import Approve, ClientResult, Decision, Expire, Reject
from mainspring.errors import ConfigError, SessionBusy
from mainspring.events import Event
from mainspring.server._auth import Principal
from mainspring.server._deps import authenticated, host_of
from mainspring.server._host import NotFound, SessionHost, positions_from
from mainspring.server._runs import LiveRun
from mainspring.server._schemas import (
    ApproveBody,
    ClientResultBody,
    DecisionBody,
    ErrorBody,
    ExpireBody,
    MessageBody,
    PendingBody,
    RejectBody,
    SessionInfo,
    SessionList,
    StateBody,
    SteerBody,
)
from mainspring.session import Session

__all__ = ["router", "sse_of"]

_ERRORS: dict[int | str, dict[str, object]] = {
    401: {"model": ErrorBody, "description": "No valid credential"},
    404: {"model": ErrorBody, "description": "No such session (of yours)"},
    409: {"model": ErrorBody, "description": "Busy, or already decided"},
    413: {"model": ErrorBody, "description": "Body too large"},
    422: {"model": ErrorBody, "description": "Invalid input"},
    429: {"model": ErrorBody, "description": "Rate limited"},
}
_SSE: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/event-stream": {}}, "description": "The run's events as SSE"}
}

router = APIRouter(prefix="/v1", responses=_ERRORS)

Caller = Annotated[Principal, Depends(authenticated)]
Host = Annotated[SessionHost, Depends(host_of)]


def _info(host: SessionHost, session: Session) -> SessionInfo:
    state = session.state
    pending = session.pending
    return SessionInfo(
        session_id=session.session_id,
        agent=state.agent_name,
        turn_index=state.turn_index,
        messages=len(state.messages),
        running=host.runs.active(session.session_id) is not None,
        pending=(
            host.wire_dict(session.session_id, pending, principal=session.state.principal or "")
            if pending
            else None
        ),
        usage=_json_object(encode(state.usage)),
        cost_usd=state.cost_usd,
        active_stream=state.active_stream,
        last_stream=state.last_stream,
    )


def _json_object(value: JsonValue) -> dict[str, JsonValue]:
    assert isinstance(value, dict)
    return value


def sse_of(
    host: SessionHost,
    session_id: str,
    stream_id: str,
    items: AsyncIterator[tuple[int, Event]],
    *,
    principal: str,
) -> EventSourceResponse:
    """The SSE response of a stream: each event with ``id: <stream id>:<position>``.

    A pending action's approval id is signed for ``principal`` (the caller).
    """

    async def frames() -> AsyncIterator[ServerSentEvent]:
        async for position, event in items:
            data = event_to_dict(host.wire(session_id, event, principal=principal))
            yield ServerSentEvent(
                data=json.dumps(data, ensure_ascii=False, separators=(",", ":")),
                event=event.type,
                id=f"{stream_id}:{position}",
            )

    return EventSourceResponse(
        frames(),
        ping=15,
        sep="\n",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        shutdown_event=host.stopping,
        shutdown_grace_period=host.config.shutdown_grace,
    )


def _check_idle(host: SessionHost, session_id: str) -> None:
    """Refuse (409) a new run of a session already running on this worker."""
    if host.runs.active(session_id) is not None:
        raise SessionBusy(f"session {session_id!r} already has an active run")


def _live(host: SessionHost, run: LiveRun) -> EventSourceResponse:
    assert run.stream_id is not None
    owner = run.session.state.principal or ""
    return sse_of(host, run.session_id, run.stream_id, run.follow(), principal=owner)


@router.post("/sessions", status_code=201, response_model=SessionInfo, tags=["sessions"])
async def create_session(caller: Caller, host: Host) -> SessionInfo:
    """Start a session owned by the caller."""
    return _info(host, await host.create(caller))


@router.get("/sessions", response_model=SessionList, tags=["sessions"])
async def list_sessions(
    caller: Caller, host: Host, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> SessionList:
    """The caller's own sessions."""
    return SessionList(sessions=await host.list(caller, limit=limit))


@router.get("/sessions/{session_id}", response_model=SessionInfo, tags=["sessions"])
async def get_session(session_id: str, caller: Caller, host: Host) -> SessionInfo:
    """One of the caller's sessions."""
    return _info(host, await host.open(caller, session_id))


@router.delete("/sessions/{session_id}", status_code=204, tags=["sessions"])
async def delete_session(session_id: str, caller: Caller, host: Host) -> Response:
    """Forget a session (refused with 409 while it runs)."""
    await host.delete(caller, session_id)
    return Response(status_code=204)


@router.get("/sessions/{session_id}/pending", response_model=PendingBody, tags=["sessions"])
async def get_pending(session_id: str, caller: Caller, host: Host) -> PendingBody:
    """The action awaiting a decision, its approval id signed."""
    session = await host.open(caller, session_id)
    pending = session.pending
    return PendingBody(
        pending=host.wire_dict(session_id, pending, principal=caller.id) if pending else None
    )


@router.get("/sessions/{session_id}/state", response_model=StateBody, tags=["sessions"])
async def get_state(session_id: str, caller: Caller, host: Host) -> StateBody:
    """The session's durable state as JSON."""
    session = await host.open(caller, session_id)
    state = session.state
    pending = session.pending
    turn = state.turn
    return StateBody(
        session_id=session_id,
        agent=state.agent_name,
        turn_index=state.turn_index,
        messages=[message_to_dict(m) for m in state.messages],
        usage=_json_object(encode(state.usage)),
        cost_usd=state.cost_usd,
        auto_spent_usd=state.auto_spent_usd,
        turn=encode(turn) if turn is not None else None,
        decided=dict(state.decided),
        writes={key: encode(record) for key, record in state.writes.items()},
        pending=host.wire_dict(session_id, pending, principal=caller.id) if pending else None,
    )


@router.post(
    "/sessions/{session_id}/messages",
    responses=_SSE,
    response_class=EventSourceResponse,
    tags=["runs"],
)
async def post_message(
    session_id: str,
    caller: Caller,
    host: Host,
    body: Annotated[MessageBody, Body()],
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> EventSourceResponse:
    """Send a user message and stream the turn; or resume a stream where it was cut.

    A reconnect carries ``Last-Event-ID`` (or ``resume_stream_id`` and ``after``)
    and gets every later event exactly once, on this worker or another.
    """
    resume = positions_from(last_event_id)
    if last_event_id and resume is None:
        raise ConfigError(f"Last-Event-ID {last_event_id[:80]!r} is not one this server sent")
    if resume is None and body.resume_stream_id is not None:
        resume = (body.resume_stream_id, body.after)
    if resume is not None:
        stream_id, after = resume
        items = await host.follow(caller, session_id, stream_id, after)
        return sse_of(host, session_id, stream_id, items, principal=caller.id)
    if body.message is None:
        raise ConfigError("the body needs a message (or resume_stream_id)")
    session = await host.open(caller, session_id)
    _check_idle(host, session_id)
    return _live(host, await host.send(session, body.message))


@router.get(
    "/sessions/{session_id}/stream",
    responses=_SSE,
    response_class=EventSourceResponse,
    tags=["runs"],
)
async def follow_stream(
    session_id: str,
    caller: Caller,
    host: Host,
    stream_id: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    after: Annotated[int, Query(ge=-1)] = -1,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> EventSourceResponse:
    """Follow a stream (an ``EventSource`` reconnects here with ``Last-Event-ID``).

    Without a stream id: the session's running stream, else its last one.
    """
    resume = positions_from(last_event_id)
    if resume is None:
        if stream_id is None:
            session = await host.open(caller, session_id)
            stream_id = session.state.active_stream or session.state.last_stream
            if stream_id is None:
                raise NotFound(f"session {session_id!r} has no stream yet")
        resume = (stream_id, after)
    items = await host.follow(caller, session_id, *resume)
    return sse_of(host, session_id, resume[0], items, principal=caller.id)


def _decision(body: ApproveBody | RejectBody | ClientResultBody | ExpireBody) -> Decision:
    """The decision a body asks for (the host adds the principal and the policy version)."""
    if isinstance(body, ApproveBody):
        return Approve(edits=dict(body.edits))
    if isinstance(body, RejectBody):
        return Reject(reason=body.reason)
    if isinstance(body, ExpireBody):
        return Expire()
    return ClientResult(content=body.content, is_error=body.is_error)


@router.post(
    "/sessions/{session_id}/decisions/{approval_id}",
    responses=_SSE,
    response_class=EventSourceResponse,
    tags=["runs"],
)
async def post_decision(
    session_id: str,
    approval_id: str,
    caller: Caller,
    host: Host,
    body: Annotated[DecisionBody, Body()],
) -> EventSourceResponse:
    """Decide the pending action (by its signed approval id) and stream the rest of the turn."""
    session = await host.open(caller, session_id)
    _check_idle(host, session_id)
    return _live(host, await host.decide(session, approval_id, _decision(body)))


@router.post(
    "/sessions/{session_id}/regenerate/{approval_id}",
    responses=_SSE,
    response_class=EventSourceResponse,
    tags=["runs"],
)
async def post_regenerate(
    session_id: str, approval_id: str, caller: Caller, host: Host
) -> EventSourceResponse:
    """Ask for a fresh input (a new quote) for the pending action before deciding it.

    Streams the turn to a new ``pending_action`` with a new approval id; the old
    one is refused from then on. 422 when the tool cannot regenerate.
    """
    session = await host.open(caller, session_id)
    _check_idle(host, session_id)
    return _live(host, await host.regenerate(session, approval_id))


@router.post("/sessions/{session_id}/steer", status_code=202, tags=["runs"])
async def post_steer(
    session_id: str, caller: Caller, host: Host, body: Annotated[SteerBody, Body()]
) -> dict[str, str]:
    """Queue a message for the running turn (``next_step``) or as its next turn (``follow_up``).

    The turn's stream says when it took it (``steering_taken``). 409 when no
    turn runs, or it runs on another worker (steering is held by the worker
    that runs the turn); 429 when the principal has ``max_steering_per_principal``
    messages waiting already.
    """
    await host.open(caller, session_id)
    run = host.runs.active(session_id)
    if run is None:
        assert host.stores.locks is not None
        if await host.stores.locks.holder(session_id) is not None:
            raise SessionBusy(f"session {session_id!r} runs on another worker; steer it there")
        raise SessionBusy(f"session {session_id!r} has no running turn: send the message")
    host.admit_steering(run.session)
    return {"steering_id": run.session.steer(body.message, mode=body.mode)}


@router.post("/sessions/{session_id}/cancel", status_code=202, tags=["runs"])
async def cancel_run(session_id: str, caller: Caller, host: Host) -> dict[str, bool]:
    """Cancel the session's running turn, on whichever worker runs it.

    Its stream ends with a ``turn_complete(stop_reason="cancelled")`` (within
    half a second when another worker runs it). ``{"cancelled": false}``: no
    turn was running.
    """
    await host.open(caller, session_id)
    return {"cancelled": await host.request_cancel(session_id)}
