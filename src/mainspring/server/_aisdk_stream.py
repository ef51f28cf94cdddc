"""The AI SDK UI message stream (v1) chunks of one mainspring stream: a pure mapper.

:class:`UIMessageStream` turns the events of a run into the chunks ``useChat``
reads (``start``, text and reasoning parts, ``tool-*`` parts, data parts,
``finish``); the routes in :mod:`._aisdk` serve them.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import JsonValue

from mainspring.codec import encode, event_to_dict
from mainspring.decisions import Decision, Reject
from mainspring.events import (
    ApprovalAdded,
    ApprovalExpiring,
    Canvas,
    ErrorEvent,
    Event,
    FinalOutput,
    GuardrailVerdict,
    OutputPartial,
    OutputRetry,
    PendingAction,
    PermissionDenied,
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
from mainspring.server._aisdk_history import tool_output
from mainspring.server._typed_output import output_value

__all__ = ["UI_MESSAGE_STREAM_HEADERS", "Chunk", "UIMessageStream"]

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


def _guardrail_chunk(event: GuardrailVerdict) -> Chunk:
    """A guardrail's verdict (a data part; a tripped one is followed by ``finish``)."""
    return {"type": "data-guardrail", "id": f"guardrail-{event.name}", "data": encode(event)}


def _side_chunk(event: SteeringQueued | SteeringTaken | ApprovalAdded | ApprovalExpiring) -> Chunk:
    """A steering message, or an approval added or expiring: a transient data part."""
    if isinstance(event, ApprovalAdded | ApprovalExpiring):
        fields = event_to_dict(event)
        name = f"data-{str(fields.pop('type')).replace('_', '-')}"
        return {"type": name, "id": event.attempt_id, "data": fields, "transient": True}
    data: dict[str, JsonValue] = {
        "steeringId": event.steering_id,
        "state": "queued" if isinstance(event, SteeringQueued) else "taken",
    }
    return {"type": "data-steering", "id": event.steering_id, "data": data, "transient": True}


class UIMessageStream:
    """Turns one mainspring stream into AI SDK UI message chunks (a pure mapper).

    ``decided`` is the tool call a decision continues, with what was decided:
    the client already shows it (no new ``tool-input-*``) unless ``shown`` is
    false (a new message rejected it: announced again from ``calls``), and a
    rejection ends it with ``tool-output-denied``. ``showing`` marks the
    approval ids of a stream that shows a waiting approval again. ``replay`` is a resume: the SDK
    starts from an empty message, so a call first seen by its result is
    announced again from ``calls`` (the session's tool calls). ``message_id``
    is the assistant message's id, named in the ``start`` chunk (the SDK
    adopts it): the id the conversation route gives the same message.
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
        message_id: str | None = None,
    ) -> None:
        """A mapper for one stream of ``session_id``."""
        self.session_id = session_id
        self.message_id = message_id
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
        start: Chunk = {"type": "start", "messageMetadata": meta}
        if self.message_id is not None:
            start["messageId"] = self.message_id
        return [start]

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
        elif isinstance(event, ToolProgress | Canvas | PermissionDenied):
            out.append(self._data(event))
        elif isinstance(event, SteeringQueued | SteeringTaken | ApprovalAdded | ApprovalExpiring):
            out.append(_side_chunk(event))
        elif isinstance(event, GuardrailVerdict):
            out.append(_guardrail_chunk(event))
        elif isinstance(event, OutputPartial | OutputRetry | FinalOutput):
            out.append({"type": "data-output", "id": "output", "data": output_value(event)})
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

    def _data(self, event: ToolProgress | Canvas | PermissionDenied) -> Chunk:
        if isinstance(event, PermissionDenied):  # (the call's error output follows)
            denied: dict[str, JsonValue] = {"toolCallId": event.tool_use_id, "toolName": event.name}
            denied |= {"reason": event.reason, "source": event.source}
            return {"type": "data-permission-denied", "data": denied, "transient": True}
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
