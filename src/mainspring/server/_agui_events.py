"""AG-UI events of a mainspring run: the mapper behind ``POST /v1/agui``.

:class:`AguiRun` turns one stream into the ``ag-ui-protocol`` package's own
event models; :func:`interrupt_of` is a pending action as an interrupt (its
id the server's signed approval id); :func:`messages_of` is the session's
conversation as AG-UI messages, for the ``MESSAGES_SNAPSHOT`` a run ends with.

Message ids are derived from the stored transcript, never kept in a
process, so every worker of a thread, and every later run, names a message
the same way (``@ag-ui/client`` merges a snapshot into the messages it
streamed by id: an id that changes replaces the message, and a reasoning
message missing from a snapshot is moved):

* a user message keeps the id the client gave it (``meta["client_id"]``),
  else ``m{index}`` (its position in the transcript, which only grows);
* an assistant message at ``index`` is split as it streamed, in part order:
  each thinking block with text is a reasoning message, each run of text an
  assistant message, and its tool calls ride the last text before them (or a
  message of their own); the pieces are ``m{index}.0``, ``m{index}.1``, …;
* a tool result is ``{tool_use_id}.result``.

While streaming, :class:`AguiRun` counts the transcript's positions as the
run appends to it (from the length it had when the run started): one
assistant message per model step (a step ends at its ``usage`` event), one
tool message after a step whose calls have results, one per steering
message taken.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import JsonValue

from mainspring.codec import encode, event_to_dict
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
from mainspring.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from mainspring.server._threads import CLIENT_ID
from mainspring.server._typed_output import output_value

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
        ReasoningMessage,
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

__all__ = ["AguiRun", "interrupt_of", "messages_of", "result_id"]

_OUTPUT = (OutputPartial, OutputRetry, FinalOutput)
"""Typed output's events: one ``mainspring.output`` custom event each."""

_CUSTOM = (
    GuardrailVerdict,
    ToolProgress,
    Canvas,
    PermissionDenied,
    ApprovalAdded,
    ApprovalExpiring,
    OutputPartial,
    OutputRetry,
    FinalOutput,
)
"""Events that become one ``CUSTOM`` event each."""

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


class _Pieces:
    """How one assistant message splits into AG-UI messages (streamed or stored).

    The stream and the snapshot walk the same parts in the same order, so
    they name the same pieces.
    """

    __slots__ = ("count", "index", "parent", "texting")

    def __init__(self, index: int) -> None:
        self.index = index
        self.count = 0
        self.texting = False
        self.parent: str | None = None

    def _new(self) -> str:
        piece = f"m{self.index}.{self.count}"
        self.count += 1
        return piece

    def reasoning(self) -> str:
        """A thinking block's reasoning message."""
        self.texting = False
        return self._new()

    def pause(self) -> None:
        """Something other than text: the next text is a new message."""
        self.texting = False

    def text(self) -> str:
        """The message text goes to (a new one unless text came just before)."""
        if not self.texting or self.parent is None:
            self.texting = True
            self.parent = self._new()
        return self.parent

    def call(self) -> str:
        """The message a tool call rides: the last text's, or one of its own."""
        self.texting = False
        if self.parent is None:
            self.parent = self._new()
        return self.parent


class AguiRun:
    """Turns one mainspring stream into AG-UI events (a pure mapper, one run)."""

    def __init__(
        self, *, thread_id: str, run_id: str, decided: str | None = None, base: int = 0
    ) -> None:
        """A mapper for the run ``run_id`` of ``thread_id``.

        ``decided`` is the tool call a resume continues: announced by the run
        it interrupted, so this one sends only its result. ``base`` is the
        number of messages the session held before the run (a new message's
        run appends the user's message there; a resume, the results).
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
        self._next = base if decided is not None else base + 1
        """The transcript position the run appends its next message at."""
        self._results = False
        """The last step's calls have results: a tool message comes before the next step."""
        self._pieces: _Pieces | None = None
        """The current (or last) step's assistant message."""
        self._stepping = False
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

    def _step(self) -> _Pieces:
        """The current model step's assistant message (a new step begins here)."""
        pieces = self._pieces
        if self._stepping and pieces is not None:
            return pieces
        if self._results:
            self._next += 1
            self._results = False
        pieces = self._pieces = _Pieces(self._next)
        self._next += 1
        self._stepping = True
        return pieces

    def _pieces_of_calls(self) -> _Pieces:
        """Where a tool call announced by the dispatch (not the model's stream) rides."""
        if self._pieces is None:
            return self._step()
        return self._pieces

    def _close(self) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        if self._pieces is not None:
            self._pieces.pause()
        if self._text is not None:
            out.append(TextMessageEndEvent(message_id=self._text))
            self._text = None
        if self._reasoning is not None:
            out.append(ReasoningMessageEndEvent(message_id=self._reasoning))
            out.append(ReasoningEndEvent(message_id=self._reasoning))
            self._reasoning = None
        return out

    def _start_call(self, tool_use_id: str, name: str, pieces: _Pieces) -> ToolCallStartEvent:
        self._calls_open.add(tool_use_id)
        return ToolCallStartEvent(
            tool_call_id=tool_use_id, tool_call_name=name, parent_message_id=pieces.call()
        )

    def _call(self, tool_use_id: str, name: str, args: str | None) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        if tool_use_id not in self._calls_open:
            out.append(self._start_call(tool_use_id, name, self._pieces_of_calls()))
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
        if isinstance(event, _CUSTOM):
            return [self._custom(event)]
        if isinstance(event, SteeringQueued | SteeringTaken):
            return [self._steering(event)]
        if isinstance(event, UsageEvent):
            self._used(event)
            return []
        streamed = self._reasoning is not None
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
            if not streamed:
                out += self._unstreamed(event)
        return out

    def _steering(self, event: SteeringQueued | SteeringTaken) -> CustomEvent:
        taken = "queued" if isinstance(event, SteeringQueued) else "taken"
        if isinstance(event, SteeringTaken):
            self._steered()
        steering: dict[str, JsonValue] = {"steeringId": event.steering_id, "state": taken}
        return CustomEvent(name="mainspring.steering", value=steering)

    def _used(self, event: UsageEvent) -> None:
        """A model step's usage ends the step (its message is in the transcript)."""
        if not event.model.startswith(("tool:", "guardrail:")):  # a model step's spend
            self._step()
            self._stepping = False
        entry = _usage(event)
        previous = self._usage.get(event.model)
        self._usage[event.model] = entry if previous is None else _add(previous, entry)

    def _steered(self) -> None:
        """A steering message joined the transcript (after the last step's results)."""
        if self._results:
            self._next += 1
            self._results = False
        self._next += 1
        self._stepping = False
        self._pieces = None

    def _unstreamed(self, event: ThinkingDone) -> list[BaseEvent]:
        """A thinking block that closed without deltas: its reasoning, whole."""
        pieces = self._step()
        if event.redacted or not event.text:
            return []
        reasoning = pieces.reasoning()
        return [
            ReasoningStartEvent(message_id=reasoning),
            ReasoningMessageStartEvent(message_id=reasoning, role="reasoning"),
            ReasoningMessageContentEvent(message_id=reasoning, delta=event.text),
            ReasoningMessageEndEvent(message_id=reasoning),
            ReasoningEndEvent(message_id=reasoning),
        ]

    def _delta(self, event: TextDelta | ThinkingDelta) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        pieces = self._step()
        if isinstance(event, TextDelta):
            if self._reasoning is not None:
                out += self._close()
            if self._text is None:
                self._text = pieces.text()
                out.append(TextMessageStartEvent(message_id=self._text, role="assistant"))
            out.append(TextMessageContentEvent(message_id=self._text, delta=event.text))
            return out
        if self._text is not None:
            out += self._close()
        if self._reasoning is None:
            self._reasoning = pieces.reasoning()
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
            self._results = True
            out.append(
                ToolCallResultEvent(
                    message_id=result_id(tool_use_id),
                    tool_call_id=tool_use_id,
                    content=event.content,
                    role="tool",
                    metadata={"isError": True} if event.is_error else None,
                )
            )
            return out
        if tool_use_id not in self._calls_open:
            out.append(self._start_call(tool_use_id, event.name, self._step()))
        if event.args_delta and tool_use_id not in self._calls_ended:
            out.append(ToolCallArgsEvent(tool_call_id=tool_use_id, delta=event.args_delta))
        return out

    def _custom(
        self,
        event: GuardrailVerdict
        | ToolProgress
        | Canvas
        | PermissionDenied
        | ApprovalAdded
        | ApprovalExpiring
        | OutputPartial
        | OutputRetry
        | FinalOutput,
    ) -> CustomEvent:
        if isinstance(event, GuardrailVerdict):
            return _guardrail(event)
        if isinstance(event, _OUTPUT):
            return CustomEvent(name="mainspring.output", value=output_value(event))
        if isinstance(event, ApprovalAdded | ApprovalExpiring):
            approval = event_to_dict(event)
            return CustomEvent(name=f"mainspring.{approval.pop('type')}", value=approval)
        if isinstance(event, PermissionDenied):  # (the call's error result follows)
            denied: dict[str, JsonValue] = {"toolCallId": event.tool_use_id, "toolName": event.name}
            denied |= {"reason": event.reason, "source": event.source}
            return CustomEvent(name="mainspring.permission_denied", value=denied)
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


def _guardrail(event: GuardrailVerdict) -> CustomEvent:
    """A guardrail's verdict (a tripped one is followed by ``RUN_FINISHED``)."""
    return CustomEvent(name="mainspring.guardrail", value=encode(event))


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


def result_id(tool_use_id: str) -> str:
    """The id of the AG-UI tool message holding a call's result."""
    return f"{tool_use_id}.result"


def messages_of(messages: Sequence[Message]) -> list[Any]:
    """The conversation as AG-UI messages, named as they were streamed (see the module)."""
    out: list[Any] = []
    for index, message in enumerate(messages):
        if message.role == "user":
            client_id = message.meta.get(CLIENT_ID)
            own = client_id if isinstance(client_id, str) and client_id else f"m{index}"
            out.append(UserMessage(id=own, content=message.text))
        elif message.role == "assistant":
            out.extend(_assistant(index, message))
        else:
            out.extend(
                ToolMessage(
                    id=result_id(p.tool_use_id),
                    tool_call_id=p.tool_use_id,
                    content=p.content,
                    error=p.content if p.is_error else None,
                )
                for p in message.parts
                if isinstance(p, ToolResultPart)
            )
    return out


def _assistant(index: int, message: Message) -> list[Any]:
    """An assistant message in the pieces it streamed as (reasoning, text, calls)."""
    pieces = _Pieces(index)
    made: dict[str, AssistantMessage | ReasoningMessage] = {}
    for part in message.parts:
        if isinstance(part, ThinkingPart):
            if part.redacted or not part.text:
                pieces.pause()
            else:
                reasoning = pieces.reasoning()
                made[reasoning] = ReasoningMessage(id=reasoning, content=part.text)
        elif isinstance(part, TextPart):
            said = made.setdefault(pieces.text(), AssistantMessage(id=pieces.text()))
            assert isinstance(said, AssistantMessage)
            said.content = (said.content or "") + part.text
        elif isinstance(part, ToolCallPart):
            parent = pieces.call()
            asked = made.setdefault(parent, AssistantMessage(id=parent))
            assert isinstance(asked, AssistantMessage)
            call = ToolCall(
                id=part.id,
                function=FunctionCall(name=part.name, arguments=json.dumps(part.arguments)),
            )
            asked.tool_calls = [*(asked.tool_calls or ()), call]
    return list(made.values())
