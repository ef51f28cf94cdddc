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
from collections.abc import AsyncIterator, Mapping
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Body, Depends, Path, Query
from fastapi.responses import Response
from pydantic import JsonValue
from sse_starlette import EventSourceResponse, ServerSentEvent

from mainspring.codec import encode
from mainspring.decisions import Decision, Reject
from mainspring.errors import ConfigError, SessionBusy
from mainspring.events import (
    Canvas,
    ErrorEvent,
    Event,
    GuardrailVerdict,
    PendingAction,
    SteeringQueued,
    SteeringTaken,
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
from mainspring.server._aisdk_body import (
    SHOWN_AGAIN,
    ChatRequest,
    answering,
    decision_of,
    user_text,
)
from mainspring.server._aisdk_history import tool_output, ui_messages
from mainspring.server._auth import Principal
from mainspring.server._deps import authenticated, host_of
from mainspring.server._host import SessionHost
from mainspring.server._schemas import ErrorBody
from mainspring.server._threads import THREAD_ID, find_thread, open_thread, tool_calls_of
from mainspring.session import Session

__all__ = ["UI_MESSAGE_STREAM_HEADERS", "ChatRequest", "UIMessageStream", "aisdk_router"]

UI_MESSAGE_STREAM_HEADERS = {
    "x-vercel-ai-ui-message-stream": "v1",
    "Cache-Control": "no-store",
    "X-Accel-Buffering": "no",
}
"""The response headers of a UI message stream."""

_FINISH: dict[str, str] = {
    "end_turn": "stop",
    "pending_action": "tool-calls",
    "max_tokens": "length",
    "refusal": "content-filter",
    "guardrail_tripped": "content-filter",
}

Chunk = dict[str, JsonValue]


def _steering_chunk(event: SteeringQueued | SteeringTaken) -> Chunk:
    """A steering message queued for, or taken by, the running turn (a transient data part)."""
    data: dict[str, JsonValue] = {
        "steeringId": event.steering_id,
        "state": "queued" if isinstance(event, SteeringQueued) else "taken",
    }
    return {"type": "data-steering", "id": event.steering_id, "data": data, "transient": True}


def _guardrail_chunk(event: GuardrailVerdict) -> Chunk:
    """A guardrail's verdict (a data part; a tripped one is followed by ``finish``)."""
    return {"type": "data-guardrail", "id": f"guardrail-{event.name}", "data": encode(event)}


class UIMessageStream:
    """Turns one mainspring stream into AI SDK UI message chunks (a pure mapper).

    ``decided`` is the tool call a decision continues, with what was decided:
    the client already shows it (no new ``tool-input-*``) unless ``shown`` is
    false (a new message rejected it: announced again from ``calls``), and a
    rejection ends it with ``tool-output-denied``. ``showing`` marks the
    approval ids of a stream that shows a waiting approval again. ``replay`` is a resume: the SDK
    starts from an empty message, so a call first seen by its result is
    announced again from ``calls`` (the session's tool calls).
    """

    def __init__(
        self,
        *,
        session_id: str,
        decided: tuple[str, Decision] | None = None,
        replay: bool = False,
        calls: Mapping[str, tuple[str, Mapping[str, JsonValue]]] | None = None,
        shown: bool = True,
        showing: str = "",
    ) -> None:
        """A mapper for one stream of ``session_id``."""
        self.session_id = session_id
        self.stream_id: str | None = None
        self._decided = decided
        self._showing = showing
        self._replay = replay
        self._calls = calls or {}
        self._started = False
        self._text: str | None = None
        self._reasoning: str | None = None
        self._parts = 0
        self._input_started: set[str] = set()
        self._input_done: set[str] = set()
        self._ran: set[str] = set()
        self._streamed: set[str] = set()
        self._in_step = False
        self._model_done = False
        if decided is not None and shown and not replay:
            self._input_started.add(decided[0])
            self._input_done.add(decided[0])

    def _next_id(self, kind: str) -> str:
        self._parts += 1
        return f"{kind}-{self._parts}"

    def _close(self) -> list[Chunk]:
        out: list[Chunk] = []
        if self._text is not None:
            out.append({"type": "text-end", "id": self._text})
            self._text = None
        if self._reasoning is not None:
            out.append({"type": "reasoning-end", "id": self._reasoning})
            self._reasoning = None
        return out

    def _start(self) -> list[Chunk]:
        if self._started:
            return []
        self._started = True
        meta: dict[str, JsonValue] = {"sessionId": self.session_id}
        if self.stream_id is not None:
            meta["streamId"] = self.stream_id
        return [{"type": "start", "messageMetadata": meta}]

    def _announce(
        self, tool_use_id: str, name: str, arguments: Mapping[str, JsonValue] | None
    ) -> list[Chunk]:
        out: list[Chunk] = []
        if tool_use_id not in self._input_started:
            self._input_started.add(tool_use_id)
            out.append({"type": "tool-input-start", "toolCallId": tool_use_id, "toolName": name})
        if tool_use_id not in self._input_done:
            self._input_done.add(tool_use_id)
            out.append(
                {
                    "type": "tool-input-available",
                    "toolCallId": tool_use_id,
                    "toolName": name,
                    "input": dict(arguments or {}),
                }
            )
        return out

    def chunks(self, event: Event) -> list[Chunk]:
        """The chunks ``event`` becomes (signed approval ids are the caller's job)."""
        if isinstance(event, StreamStarted):
            self.stream_id = event.stream_id
            return self._start()
        out = self._start() + self._step(event)
        if isinstance(event, TextDelta | ThinkingDelta):
            out += self._delta(event)
        elif isinstance(event, ThinkingDone):
            out += self._thinking_done(event)
        elif isinstance(event, ToolCallDelta | ToolStart | ToolResult | PendingAction):
            out += self._close()
            out += self._tool(event)
        elif isinstance(event, ToolProgress | Canvas):
            out.append(self._data(event))
        elif isinstance(event, SteeringQueued | SteeringTaken):
            out.append(_steering_chunk(event))
        elif isinstance(event, GuardrailVerdict):
            out.append(_guardrail_chunk(event))
        elif isinstance(event, TurnComplete | ErrorEvent):
            out += self._end_step()
            out.append(self._terminal(event))
        else:
            assert isinstance(event, UsageEvent)  # the turn's total is on ``finish``
            self._model_done = self._in_step
        return out

    def _step(self, event: Event) -> list[Chunk]:
        """``start-step`` / ``finish-step`` around each model call and its tools.

        A step opens with the model's output (text, reasoning, a call) and
        ends when the next model call starts or the stream ends; a model
        call ends at its ``usage``. The SDK reads the last step's tool parts
        (``sendAutomaticallyWhen``), so the answer after a tool is a step of
        its own. A decision's continuation begins outside a step: the
        decided call's output belongs to the step that asked for it.
        """
        fresh_call = (
            isinstance(event, ToolStart | PendingAction)
            and event.tool_use_id not in self._input_started
        )
        if not (
            isinstance(event, TextDelta | ThinkingDelta | ToolCallDelta)
            or (isinstance(event, ThinkingDone) and event.text and not event.redacted)
            or fresh_call
        ):
            return []
        if self._in_step and not self._model_done:
            return []
        out = self._end_step()
        self._in_step = True
        out.append({"type": "start-step"})
        return out

    def _end_step(self) -> list[Chunk]:
        out = self._close()
        if self._in_step:
            out.append({"type": "finish-step"})
        self._in_step = False
        self._model_done = False
        return out

    def _delta(self, event: TextDelta | ThinkingDelta) -> list[Chunk]:
        out: list[Chunk] = []
        if isinstance(event, TextDelta):
            if self._reasoning is not None:
                out += self._close()
            if self._text is None:
                self._text = self._next_id("text")
                out.append({"type": "text-start", "id": self._text})
            out.append({"type": "text-delta", "id": self._text, "delta": event.text})
            return out
        if self._text is not None:
            out += self._close()
        if self._reasoning is None:
            self._reasoning = self._next_id("reasoning")
            out.append({"type": "reasoning-start", "id": self._reasoning})
        out.append({"type": "reasoning-delta", "id": self._reasoning, "delta": event.text})
        return out

    def _thinking_done(self, event: ThinkingDone) -> list[Chunk]:
        if self._reasoning is not None:
            return self._close()
        if not event.text or event.redacted:
            return []
        out = self._close()
        part = self._next_id("reasoning")
        return [
            *out,
            {"type": "reasoning-start", "id": part},
            {"type": "reasoning-delta", "id": part, "delta": event.text},
            {"type": "reasoning-end", "id": part},
        ]

    def _tool(self, event: ToolCallDelta | ToolStart | ToolResult | PendingAction) -> list[Chunk]:
        tool_use_id = event.tool_use_id
        if isinstance(event, ToolResult):
            return self._result(event)
        if isinstance(event, ToolStart):
            self._ran.add(tool_use_id)
            return self._announce(tool_use_id, event.name, event.input)
        if isinstance(event, PendingAction):
            out = self._announce(tool_use_id, event.name, event.input)
            if not event.client_executed:
                request: Chunk = {
                    "type": "tool-approval-request",
                    "approvalId": event.approval_id + self._showing,
                    "toolCallId": tool_use_id,
                }
                if event.modifiable_fields:
                    request["approvalDescriptor"] = {
                        "modifiableFields": list(event.modifiable_fields)
                    }
                out.append(request)
            return out
        out = []
        self._streamed.add(tool_use_id)
        if tool_use_id not in self._input_started:
            self._input_started.add(tool_use_id)
            out.append(
                {"type": "tool-input-start", "toolCallId": tool_use_id, "toolName": event.name}
            )
        if tool_use_id not in self._input_done and event.args_delta:
            out.append(
                {
                    "type": "tool-input-delta",
                    "toolCallId": tool_use_id,
                    "inputTextDelta": event.args_delta,
                }
            )
        return out

    def _data(self, event: ToolProgress | Canvas) -> Chunk:
        if isinstance(event, ToolProgress):
            progress: dict[str, JsonValue] = {
                "toolCallId": event.tool_use_id,
                "toolName": event.name,
                "message": event.message,
                "pct": event.pct,
            }
            return {
                "type": "data-tool-progress",
                "id": f"progress-{event.tool_use_id}",
                "data": progress,
                "transient": True,
            }
        canvas: dict[str, JsonValue] = {
            "kind": event.kind,
            "title": event.title,
            "data": event.data,
            "toolCallId": event.tool_use_id,
        }
        return {"type": "data-canvas", "data": canvas}

    def _terminal(self, event: TurnComplete | ErrorEvent) -> Chunk:
        if isinstance(event, ErrorEvent):
            return {"type": "error", "errorText": f"{event.code}: {event.message}"}
        meta: dict[str, JsonValue] = {
            "sessionId": self.session_id,
            "streamId": self.stream_id,
            "stopReason": event.stop_reason,
            "usage": encode(event.usage),
            "costUsd": event.cost_usd,
        }
        finish = _FINISH.get(event.stop_reason, "other")
        return {"type": "finish", "finishReason": finish, "messageMetadata": meta}

    def _result(self, event: ToolResult) -> list[Chunk]:
        out: list[Chunk] = []
        tool_use_id = event.tool_use_id
        if tool_use_id not in self._input_done:
            name, arguments = self._calls.get(tool_use_id, (event.name, {}))
            out += self._announce(tool_use_id, name, arguments)
        if self._denied(event):
            out.append({"type": "tool-output-denied", "toolCallId": tool_use_id})
        elif event.is_error:
            out.append(
                {"type": "tool-output-error", "toolCallId": tool_use_id, "errorText": event.content}
            )
        else:
            out.append(
                {
                    "type": "tool-output-available",
                    "toolCallId": tool_use_id,
                    "output": tool_output(event.content),
                }
            )
        return out

    def _denied(self, event: ToolResult) -> bool:
        if self._decided is not None and self._decided[0] == event.tool_use_id:
            return isinstance(self._decided[1], Reject)
        # A replayed continuation: the decided call's result arrives with no call
        # streamed and no run in this stream, an error only when it was rejected.
        return (
            self._replay
            and event.is_error
            and event.tool_use_id not in self._ran
            and event.tool_use_id not in self._streamed
        )

    def end(self) -> list[Chunk]:
        """What closes a stream cut short of its terminal event."""
        return self._end_step()


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
                for chunk in mapper.chunks(host.wire(mapper.session_id, event)):
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
    if last.role == "assistant":
        answer = decision_of(session, last)
        if answer is None:
            raise ConfigError(
                "the last message is the assistant's but answers no approval or tool call"
            )
        approval_id, decision = answer
        if not approval_id:  # a client tool's result: for the call the client was shown
            assert session.pending is not None
            approval_id = host.signer.sign(session.session_id, session.pending)
        pending = host.pending_for(session, approval_id)
        run = await host.decide(session, approval_id, decision)
        decided = (pending.tool_use_id, decision)
    elif last.role == "user":
        text = user_text(last)
        waiting = session.pending
        if waiting is not None and host.config.aisdk_while_pending == "show":
            showing = f"{SHOWN_AGAIN}{secrets.token_hex(4)}"
            mapper = UIMessageStream(session_id=session.session_id, showing=showing)
            return _sse(host, mapper, _waiting(host, session))
        if waiting is not None:
            rejected = Reject(reason=text)
            approval_id = host.signer.sign(session.session_id, waiting)
            run = await host.decide(session, approval_id, rejected)
            decided, shown = (waiting.tool_use_id, rejected), False
        else:
            run = await host.send(session, text)
    else:
        raise ConfigError("the last message must be the user's or the assistant's")
    calls = tool_calls_of(session) if not shown else None
    mapper = UIMessageStream(
        session_id=session.session_id, decided=decided, calls=calls, shown=shown
    )
    cancel = body.cancelOnAbort
    if cancel is None:
        cancel = host.config.aisdk_abort_cancels
    return _sse(host, mapper, run.follow(), cancel_on_abort=cancel)


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
        wired = host.wire(chat_id, pending)
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
    mapper = UIMessageStream(session_id=chat_id, replay=True, calls=tool_calls_of(session))
    cancel = host.config.aisdk_abort_cancels if cancelOnAbort is None else cancelOnAbort
    mapper.stream_id = stream_id
    return _sse(host, mapper, items, cancel_on_abort=cancel)
