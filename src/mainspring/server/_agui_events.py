"""AG-UI events of a mainspring run: the mapper behind ``POST /v1/agui``.

:class:`AguiRun` turns one stream into the ``ag-ui-protocol`` package's own
event models; :func:`interrupt_of` is a pending action as an interrupt (its
id the server's signed approval id); :func:`messages_of` is the session's
conversation as AG-UI messages, for the ``MESSAGES_SNAPSHOT`` a run ends with.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from pydantic import JsonValue

from mainspring.codec import encode
from mainspring.events import (
    Canvas,
    ErrorEvent,
    Event,
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
from mainspring.messages import Message, TextPart, ToolCallPart, ToolResultPart

try:
    from ag_ui.core import (
        PROTOCOL_VERSION,
        AssistantMessage,
        BaseEvent,
        CustomEvent,
        FunctionCall,
        Interrupt,
        MessagesSnapshotEvent,
        ReasoningEndEvent,
        ReasoningMessageContentEvent,
        ReasoningMessageEndEvent,
        ReasoningMessageStartEvent,
        ReasoningStartEvent,
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
        ToolCall,
        ToolCallArgsEvent,
        ToolCallEndEvent,
        ToolCallResultEvent,
        ToolCallStartEvent,
        ToolMessage,
        UserMessage,
    )
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError('the AG-UI route needs: pip install "mainspring[server]"') from exc

__all__ = ["AguiRun", "interrupt_of", "messages_of"]

_CANCELLED = frozenset({"cancelled", "interrupted"})

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


def interrupt_of(pending: PendingAction) -> Interrupt:
    """``pending`` (its approval id already signed) as an AG-UI interrupt."""
    message = pending.description
    if pending.reason:
        message = f"{message} ({pending.reason})" if message else pending.reason
    return Interrupt(
        id=pending.approval_id,
        reason="tool_call",
        message=message or None,
        tool_call_id=pending.tool_use_id,
        response_schema=_APPROVAL_SCHEMA,
        metadata={
            "toolName": pending.name,
            "input": pending.input,
            "modifiableFields": list(pending.modifiable_fields),
            "amountUsd": pending.amount_usd,
            "findings": [encode(f) for f in pending.findings],
        },
    )


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
        self._frontend: list[str] = []
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

    def events(
        self,
        event: Event,
        state: dict[str, JsonValue] | None = None,
        messages: Sequence[Message] | None = None,
    ) -> list[BaseEvent]:
        """The AG-UI events ``event`` becomes.

        ``state`` and ``messages`` are the session's as the run ends, sent as
        ``STATE_SNAPSHOT`` and ``MESSAGES_SNAPSHOT`` before ``RUN_FINISHED``
        (what a resume needs is on the wire before the interrupt).
        """
        if isinstance(event, StreamStarted):
            self.stream_id = event.stream_id
            return []
        if isinstance(event, TextDelta | ThinkingDelta):
            return self._delta(event)
        if isinstance(event, ToolCallDelta | ToolStart | PendingAction | ToolResult):
            return [*self._close(), *self._tool(event)]
        if isinstance(event, ToolProgress | Canvas):
            return [self._custom(event)]
        if isinstance(event, SteeringQueued | SteeringTaken):
            taken = "queued" if isinstance(event, SteeringQueued) else "taken"
            steering: dict[str, JsonValue] = {"steeringId": event.steering_id, "state": taken}
            return [CustomEvent(name="mainspring.steering", value=steering)]
        if isinstance(event, UsageEvent):
            entry = _usage(event)
            previous = self._usage.get(event.model)
            self._usage[event.model] = entry if previous is None else _add(previous, entry)
            return []
        out = self._close()
        if isinstance(event, TurnComplete):
            if messages is not None:
                out.append(MessagesSnapshotEvent(messages=messages_of(messages)))
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
            if event.client_executed:  # a frontend tool: its result rides the next input
                self._frontend.append(event.tool_use_id)
            else:
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
            outcome = RunFinishedSuccessOutcome(pending_tool_call_ids=self._frontend or None)
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


def messages_of(messages: Sequence[Message]) -> list[Any]:
    """The conversation as AG-UI messages (ids by position: stable across runs)."""
    out: list[Any] = []
    for index, message in enumerate(messages):
        text = "".join(p.text for p in message.parts if isinstance(p, TextPart))
        if message.role == "user":
            out.append(UserMessage(id=f"m{index}", content=text))
        elif message.role == "assistant":
            calls = [
                ToolCall(
                    id=p.id, function=FunctionCall(name=p.name, arguments=json.dumps(p.arguments))
                )
                for p in message.parts
                if isinstance(p, ToolCallPart)
            ]
            out.append(
                AssistantMessage(id=f"m{index}", content=text or None, tool_calls=calls or None)
            )
        else:
            out.extend(
                ToolMessage(
                    id=f"m{index}-{n}",
                    tool_call_id=p.tool_use_id,
                    content=p.content,
                    error=p.content if p.is_error else None,
                )
                for n, p in enumerate(message.parts)
                if isinstance(p, ToolResultPart)
            )
    return out
