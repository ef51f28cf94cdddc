"""Chat Completions chunks as neutral model events."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from openai.types.chat import ChatCompletionChunk

from mainspring.events import TextDelta, ThinkingDelta, ThinkingDone, ToolCallDelta
from mainspring.models.base import ModelEvent, ToolCallEnd
from mainspring.usage import Usage

__all__ = ["ChunkReader", "StopReason", "stop_reason", "usage_from_openai"]

StopReason = Literal["end_turn", "tool_use", "max_tokens", "refusal"]

_STOP: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def stop_reason(finish_reason: str | None, *, has_tool_calls: bool = False) -> StopReason:
    """The neutral stop reason for a Chat Completions ``finish_reason``.

    A server that says ``stop`` after emitting tool calls (some local ones do)
    still stopped to use tools.
    """
    if has_tool_calls and finish_reason in (None, "stop"):
        return "tool_use"
    return _STOP.get(finish_reason or "stop", "end_turn")


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def usage_from_openai(raw: Mapping[str, Any]) -> Usage:
    """Normalize a Chat Completions ``usage`` object (a parsed JSON mapping).

    ``prompt_tokens`` includes cached tokens, so cache reads (and OpenAI's
    ``cache_write_tokens``) are subtracted to leave uncached input. DeepSeek's
    ``prompt_cache_hit_tokens`` stands in when ``cached_tokens`` is absent.
    """
    prompt_details = raw.get("prompt_tokens_details") or {}
    completion_details = raw.get("completion_tokens_details") or {}
    prompt = _int(raw.get("prompt_tokens"))
    cached = _int(prompt_details.get("cached_tokens")) or _int(raw.get("prompt_cache_hit_tokens"))
    written = _int(prompt_details.get("cache_write_tokens"))
    return Usage(
        input_tokens=max(prompt - cached - written, 0),
        cache_read_tokens=cached,
        cache_write_tokens=written,
        output_tokens=_int(raw.get("completion_tokens")),
        reasoning_tokens=_int(completion_details.get("reasoning_tokens")),
        requests=1,
    )


@dataclass(slots=True)
class _Call:
    id: str
    name: str
    index: int
    args: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ChunkReader:
    """Turns Chat Completions chunks into neutral events (one choice, index 0).

    The stream's usage is kept, not emitted: a server may repeat it (running
    totals on several chunks) or send none, so the adapter emits one
    :class:`~mainspring.models.base.ModelUsage` when the stream ends or fails (see :attr:`usage`).
    """

    provider: str
    new_call_id: Callable[[], str]
    thinking: list[str] = field(default_factory=list)
    signature: str | None = None
    thinking_open: bool = False
    calls: dict[int, _Call] = field(default_factory=dict)
    finish: str | None = None
    refused: bool = False
    had_calls: bool = False
    model: str = ""
    usage: Usage | None = None
    """The last usage the stream reported (its running total); ``None`` for none."""
    output: list[str] = field(default_factory=list)
    """What came back (text, reasoning, tool names and arguments): to estimate usage."""
    emitted: bool = False
    """Some chunk gave events: the caller has seen part of the answer."""

    def read(self, chunk: ChatCompletionChunk) -> list[ModelEvent]:
        """The events one chunk carries."""
        self.model = chunk.model or self.model
        events: list[ModelEvent] = []
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            events.extend(self._delta(choice.delta))
            if choice.finish_reason is not None:
                events.extend(self._close_thinking())
                events.extend(self.end_calls())
                self.finish = choice.finish_reason
        if chunk.usage is not None:
            self.usage = usage_from_openai(chunk.usage.model_dump())
        if events:
            self.emitted = True
        return events

    def _delta(self, delta: Any) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        extra: dict[str, Any] = delta.model_extra or {}
        reasoning = extra.get("reasoning_content") or extra.get("reasoning")
        for detail in extra.get("reasoning_details") or ():
            if isinstance(detail, dict) and detail.get("signature"):
                self.signature = str(detail["signature"])
        if isinstance(reasoning, str) and reasoning:
            self.thinking.append(reasoning)
            self.output.append(reasoning)
            self.thinking_open = True
            events.append(ThinkingDelta(text=reasoning))
        text = delta.content or delta.refusal
        if delta.refusal:
            self.refused = True
        if text or delta.tool_calls:
            events.extend(self._close_thinking())
        if text:
            self.output.append(text)
            events.append(TextDelta(text=text))
        for fragment in delta.tool_calls or ():
            events.extend(self._tool_fragment(fragment))
        return events

    def _close_thinking(self) -> list[ModelEvent]:
        if not self.thinking_open:
            return []
        self.thinking_open = False
        text, self.thinking = "".join(self.thinking), []
        signature, self.signature = self.signature, None
        return [ThinkingDone(text=text, signature=signature, provider=self.provider)]

    def _tool_fragment(self, fragment: Any) -> list[ModelEvent]:
        index: int = fragment.index
        function = fragment.function
        call = self.calls.get(index)
        if call is None:
            call_id = fragment.id or self.new_call_id()
            call = self.calls[index] = _Call(
                id=call_id, name=(function.name if function else None) or "", index=index
            )
        elif function is not None and function.name and not call.name:
            call.name = function.name
        piece = function.arguments if function is not None else None
        if not piece:
            return []
        call.args.append(piece)
        return [ToolCallDelta(tool_use_id=call.id, name=call.name, index=index, args_delta=piece)]

    def end_calls(self) -> list[ModelEvent]:
        """A ToolCallEnd for every open call (at finish_reason, or the stream's end)."""
        events: list[ModelEvent] = [
            ToolCallEnd(
                tool_use_id=call.id,
                name=call.name,
                index=call.index,
                arguments="".join(call.args) or "{}",
            )
            for _, call in sorted(self.calls.items())
        ]
        self.had_calls = self.had_calls or bool(self.calls)
        for call in self.calls.values():
            self.output.append(call.name)
            self.output.extend(call.args)
        self.calls = {}
        return events
