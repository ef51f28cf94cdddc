"""The Vercel AI SDK UI message stream (v1): ``useChat`` against a mainspring run.

``POST /v1/aisdk/chat`` takes the body the SDK's ``DefaultChatTransport``
sends (``id``, ``messages`` of UI message parts, ``trigger``) and streams the
run as UI message chunks over SSE (header ``x-vercel-ai-ui-message-stream:
v1``, ending with ``data: [DONE]``). The chat ``id`` is the session's id:
created on first use, owned by the caller. The session keeps the
conversation, so of ``messages`` only the last one is read:

* a user message: its text parts start a new turn (``regenerate-message``
  asks the same question again as a new turn; history is never rewritten).
  While an approval waits, the waiting approval is streamed again instead
  (or, with ``aisdk_while_pending="reject"``, rejected with the text as the
  reason, and the turn goes on);
* the assistant message with a tool part in state ``approval-responded``:
  ``approval: {id, approved, reason}`` decides the pending action by its
  signed approval id (the ``approvalId`` of the ``tool-approval-request``
  chunk), and the rest of the turn streams on — ``tool-output-available``
  when approved, ``tool-output-denied`` when not; a ``data-approval-edits``
  part approves with edits (see ``_aisdk_body``). The SDK names that message
  in ``messageId`` when it is not the last one;
* the assistant message with the output of a client-executed tool (state
  ``output-available`` / ``output-error``): the tool's result.

``GET /v1/aisdk/chat/{id}/stream`` is the SDK's ``resume``: the running
stream replayed from its start and followed live (the SDK resets its message
on a resume), on this worker or another; 204 when nothing runs (or the
chat id is new: a chat mounted with ``resume: true`` asks before it posts).
``GET /v1/aisdk/chat/{id}/messages`` is the conversation as ``UIMessage[]``.

A request closed mid-stream (``stop()``) cancels its run, on whichever
worker runs it (``aisdk_abort_cancels``; ``cancelOnAbort`` per request).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Body, Depends, Path, Query
from fastapi.responses import Response
from pydantic import JsonValue
from sse_starlette import EventSourceResponse, ServerSentEvent

from mainspring.decisions import Decision, Reject
from mainspring.errors import ConfigError, SessionBusy
from mainspring.events import (
    Event,
    PendingAction,
    TurnComplete,
)
from mainspring.messages import Message, TextPart
from mainspring.server._aisdk_body import (
    SHOWN_AGAIN,
    ChatRequest,
    answering,
    decision_of,
    user_text,
)
from mainspring.server._aisdk_history import last_reply_id, reply_to, ui_messages
from mainspring.server._aisdk_stream import UI_MESSAGE_STREAM_HEADERS, Chunk, UIMessageStream
from mainspring.server._auth import Principal
from mainspring.server._deps import authenticated, host_of
from mainspring.server._host import SessionHost
from mainspring.server._schemas import ErrorBody
from mainspring.server._threads import (
    CLIENT_ID,
    THREAD_ID,
    find_thread,
    open_thread,
    tool_calls_of,
)
from mainspring.session import Session

__all__ = ["UI_MESSAGE_STREAM_HEADERS", "ChatRequest", "UIMessageStream", "aisdk_router"]


# ------------------------------------------------------------------------ routes

aisdk_router = APIRouter(
    prefix="/v1/aisdk",
    tags=["ai-sdk"],
    responses={
        401: {"model": ErrorBody, "description": "No valid credential"},
        404: {"model": ErrorBody, "description": "No such chat (of yours)"},
        409: {"model": ErrorBody, "description": "Busy, or already decided"},
        422: {"model": ErrorBody, "description": "Invalid body"},
    },
)

Caller = Annotated[Principal, Depends(authenticated)]
Host = Annotated[SessionHost, Depends(host_of)]
_STREAM: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/event-stream": {}}, "description": "UI message chunks"}
}


async def _cancel_if_running(host: SessionHost, session_id: str, stream_id: str | None) -> None:
    """Cancel ``stream_id``'s run (here or on another worker) if it still goes on.

    The cancel route's path (:meth:`SessionHost.request_cancel`), but only for
    the stream the closed request followed, never a newer run of the chat.
    """
    if stream_id is None:
        return
    run = host.runs.active(session_id)
    if run is not None:
        if run.stream_id != stream_id:
            return
    else:
        assert host.stores.sessions is not None
        state = await host.stores.sessions.load(session_id)
        if state is None or state.active_stream != stream_id:
            return
    await host.request_cancel(session_id)


def _sse(
    host: SessionHost,
    mapper: UIMessageStream,
    items: AsyncIterator[tuple[int, Event]],
    *,
    principal: str,
    cancel_on_abort: bool = False,
) -> EventSourceResponse:
    async def frames() -> AsyncIterator[ServerSentEvent]:
        def frame(chunk: Chunk) -> ServerSentEvent:
            return ServerSentEvent(
                data=json.dumps(chunk, ensure_ascii=False, separators=(",", ":"))
            )

        ended = False
        try:
            async for _position, event in items:
                wired = host.wire(mapper.session_id, event, principal=principal)
                for chunk in mapper.chunks(wired):
                    yield frame(chunk)
            ended = True
            for chunk in mapper.end():
                yield frame(chunk)
            yield ServerSentEvent(data="[DONE]")
        finally:
            # The client went away mid-stream (``stop()``, a closed tab): not a shutdown.
            if cancel_on_abort and not ended and not host.stopping.is_set():
                with anyio.CancelScope(shield=True):
                    await _cancel_if_running(host, mapper.session_id, mapper.stream_id)

    return EventSourceResponse(
        frames(),
        ping=15,
        sep="\n",
        headers=UI_MESSAGE_STREAM_HEADERS,
        shutdown_event=host.stopping,
        shutdown_grace_period=host.config.shutdown_grace,
    )


async def _waiting(host: SessionHost, session: Session) -> AsyncIterator[tuple[int, Event]]:
    """The waiting action once more, as the pause that asked for it ended."""
    pending = session.pending
    assert pending is not None
    yield 0, pending
    turn = TurnComplete(stop_reason="pending_action", turn_index=session.state.turn_index)
    yield 1, turn


@aisdk_router.post("/chat", responses=_STREAM, response_class=EventSourceResponse)
async def chat(
    caller: Caller, host: Host, body: Annotated[ChatRequest, Body()]
) -> EventSourceResponse:
    """Send the chat's last message (a question, an approval, a tool result); stream the run.

    A question while an action waits for its approval is not refused: by
    default the waiting approval is streamed again (the chat can answer it);
    with ``aisdk_while_pending="reject"`` the action is rejected with the
    question as the reason and the turn goes on.
    """
    session = await open_thread(host, caller, body.id)
    if host.runs.active(session.session_id) is not None:
        raise SessionBusy(f"chat {body.id!r} already has an active run")
    last = answering(body)
    decided: tuple[str, Decision] | None = None
    shown = True
    message_id: str | None = None
    if last.role == "assistant":
        answer = decision_of(session, last)
        if answer is None:
            raise ConfigError(
                "the last message is the assistant's but answers no approval or tool call"
            )
        approval_id, decision = answer
        if not approval_id:  # a client tool's result: for the call the client was shown
            assert session.pending is not None
            approval_id = host.approval_id(session.session_id, session.pending, principal=caller.id)
        pending = host.pending_for(session, approval_id)
        run = await host.decide(session, approval_id, decision)
        decided = (pending.tool_use_id, decision)
        message_id = last.id or None  # the message the client goes on with
    elif last.role == "user":
        text = user_text(last)
        waiting = session.pending
        if waiting is not None and host.config.aisdk_while_pending == "show":
            showing = f"{SHOWN_AGAIN}{secrets.token_hex(4)}"
            mapper = UIMessageStream(session_id=session.session_id, showing=showing)
            return _sse(host, mapper, _waiting(host, session), principal=caller.id)
        if waiting is not None:
            rejected = Reject(reason=text)
            approval_id = host.approval_id(session.session_id, waiting, principal=caller.id)
            run = await host.decide(session, approval_id, rejected)
            decided, shown = (waiting.tool_use_id, rejected), False
        else:
            message_id = reply_to(session.state.messages, last.id)
            meta: dict[str, JsonValue] = {CLIENT_ID: last.id} if last.id else {}
            message = Message(role="user", parts=(TextPart(text=text),), meta=meta)
            run = await host.send(session, message)
    else:
        raise ConfigError("the last message must be the user's or the assistant's")
    calls = tool_calls_of(session) if not shown else None
    mapper = UIMessageStream(
        session_id=session.session_id,
        decided=decided,
        calls=calls,
        shown=shown,
        message_id=message_id,
    )
    cancel = body.cancelOnAbort
    if cancel is None:
        cancel = host.config.aisdk_abort_cancels
    return _sse(host, mapper, run.follow(), principal=caller.id, cancel_on_abort=cancel)


@aisdk_router.get("/chat/{chat_id}/messages", tags=["ai-sdk"])
async def chat_messages(
    caller: Caller, host: Host, chat_id: Annotated[str, Path(pattern=THREAD_ID)]
) -> list[JsonValue]:
    """The chat as ``UIMessage[]``: ``useChat({id, messages})``'s initial messages.

    ``[]`` for a chat id not used yet. A waiting approval is
    ``approval-requested`` with its signed approval id.
    """
    session = await find_thread(host, caller, chat_id)
    if session is None:
        return []
    pending = session.pending
    if pending is not None:
        wired = host.wire(chat_id, pending, principal=caller.id)
        assert isinstance(wired, PendingAction)
        pending = wired
    return ui_messages(session.state.messages, pending)


@aisdk_router.get(
    "/chat/{chat_id}/stream",
    responses={**_STREAM, 204: {"description": "Nothing is running"}},
    response_class=EventSourceResponse,
)
async def resume_chat(
    caller: Caller,
    host: Host,
    chat_id: Annotated[str, Path(pattern=THREAD_ID)],
    cancelOnAbort: Annotated[bool | None, Query()] = None,
) -> Response:
    """The SDK's ``resume``: the chat's running stream from its start, followed live.

    204 when nothing runs — also for a chat id not used yet (a new chat mounts
    with ``resume: true`` before its first message). Closing it mid-stream
    cancels the run (on whichever worker runs it) as for the POST:
    ``?cancelOnAbort=false`` or the server's ``aisdk_abort_cancels`` turn that off.
    """
    session = await find_thread(host, caller, chat_id)
    stream_id = session.state.active_stream if session is not None else None
    if session is None or stream_id is None:
        return Response(status_code=204)
    items = await host.follow(caller, chat_id, stream_id, -1)
    mapper = UIMessageStream(
        session_id=chat_id,
        replay=True,
        calls=tool_calls_of(session),
        message_id=last_reply_id(session.state.messages),
    )
    cancel = host.config.aisdk_abort_cancels if cancelOnAbort is None else cancelOnAbort
    mapper.stream_id = stream_id
    return _sse(host, mapper, items, principal=caller.id, cancel_on_abort=cancel)
