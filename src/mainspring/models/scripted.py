"""ScriptedModel: an offline, deterministic model for tests, demos and benchmarks.

Give it a list of canned responses (plain strings for text, or
:class:`ScriptedResponse` for thinking and tool calls), or one function of
``(messages, tools)`` that decides each response. It streams everything in
small deltas, exactly like a provider adapter would, and records every
request it received in :attr:`ScriptedModel.requests` for assertions.

```python
model = ScriptedModel([
    ScriptedResponse(tool_calls=[ScriptedCall("get_balance", {})]),
    "You have $42.",
])
```
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import field
from typing import Literal, TypeAlias

from mainspring._lowlevel.frozen import dataclass
from mainspring._lowlevel.json_value import JsonValue
from mainspring.errors import ConfigError, ModelError, ModelOutputError
from mainspring.events import TextDelta, ThinkingDelta, ThinkingDone, ToolCallDelta
from mainspring.messages import (
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from mainspring.models.base import (
    ModelEvent,
    ModelRequest,
    ModelStop,
    ModelUsage,
    ToolCallEnd,
    ToolSpec,
)
from mainspring.usage import Usage

__all__ = ["ScriptFunction", "ScriptedCall", "ScriptedModel", "ScriptedResponse"]


@dataclass(frozen=True, slots=True)
class ScriptedCall:
    """One tool call the scripted model will make.

    ``args`` may be a dict (sent as JSON) or raw text (sent verbatim, so a
    test can send malformed JSON).
    """

    name: str
    args: dict[str, JsonValue] | str = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptedResponse:
    """One model step: optional thinking, text, tool calls; or a failure."""

    text: str = ""
    thinking: str = ""
    thinking_signature: str | None = None
    tool_calls: Sequence[ScriptedCall] = ()
    usage: Usage | None = None
    """Reported usage; by default estimated at four characters a token."""
    stop_reason: Literal["end_turn", "tool_use", "max_tokens", "refusal"] | None = None
    error: ModelError | None = None
    """Raised after ``error_after`` deltas have streamed."""
    error_after: int = 0
    delay: float = 0.0
    """Seconds to wait before each delta (to exercise cancellation and timing)."""


ScriptItem: TypeAlias = "str | ScriptedResponse"
ScriptFunction: TypeAlias = Callable[
    [Sequence[Message], Sequence[ToolSpec]],
    "ScriptItem | Awaitable[ScriptItem]",
]


def _chars(message: Message) -> int:
    total = 0
    for part in message.parts:
        if isinstance(part, TextPart | ThinkingPart):
            total += len(part.text)
        elif isinstance(part, ToolResultPart):
            total += len(part.content)
        elif isinstance(part, ToolCallPart):
            total += len(part.name) + 2 * len(part.arguments)
    return total


class ScriptedModel:
    """An offline model that plays a script; see the module docstring."""

    def __init__(
        self,
        script: Sequence[ScriptItem] | ScriptFunction,
        *,
        name: str = "scripted",
        chunk_size: int = 8,
        native_output: bool = True,
    ) -> None:
        """Create a model from a list of responses or a function deciding each one.

        Args:
            script: Responses in order, or ``fn(messages, tools)`` returning one
                (sync or async).
            name: The model name reported in usage and prices.
            chunk_size: Characters per streamed delta.
            native_output: Whether an agent's typed output is asked for as a
                schema (the script answers with the JSON as text) or, ``False``,
                through the final-answer tool (the script calls ``final_result``),
                to exercise both paths of :mod:`mainspring.output`.
        """
        if chunk_size < 1:
            raise ConfigError("chunk_size must be at least 1")
        self._name = name
        self._chunk = chunk_size
        self.native_output = native_output
        """Whether a typed output is asked for as a schema (see :mod:`mainspring.output`)."""
        self._fn: ScriptFunction | None = None
        self._items: list[ScriptItem] = []
        if callable(script):
            self._fn = script
        else:
            self._items = list(script)
        self.requests: list[ModelRequest] = []
        """Every request received, in order."""
        self._next_call_id = 0
        self._seen: Sequence[Message] = ()
        self._seen_chars = 0

    @property
    def name(self) -> str:
        """The model's name."""
        return self._name

    @property
    def remaining(self) -> int:
        """Canned responses not yet played (0 for a function script)."""
        return max(0, len(self._items) - len(self.requests))

    async def _next(self, request: ModelRequest) -> ScriptedResponse:
        index = len(self.requests) - 1
        if self._fn is not None:
            item = self._fn(request.messages, request.tools)
            if inspect.isawaitable(item):
                item = await item
        elif index < len(self._items):
            item = self._items[index]
        else:
            raise ModelOutputError(
                f"ScriptedModel has no response left for request #{index + 1} "
                f"(its script holds {len(self._items)})",
                provider="scripted",
            )
        if isinstance(item, str):
            return ScriptedResponse(text=item)
        if isinstance(item, ScriptedResponse):
            return item
        raise ConfigError(f"a script item must be a str or ScriptedResponse, not {item!r}")

    def _input_chars(self, request: ModelRequest) -> int:
        # Incremental over an append-only history: only new messages are counted.
        msgs, seen = request.messages, self._seen
        if seen and len(msgs) >= len(seen) and msgs[len(seen) - 1] is seen[-1]:
            total = self._seen_chars + sum(_chars(m) for m in msgs[len(seen) :])
        else:
            total = sum(_chars(m) for m in msgs)
        self._seen, self._seen_chars = msgs, total
        return total + sum(len(b.text) for b in request.system)

    def _pieces(self, text: str) -> list[str]:
        n = self._chunk
        return [text[i : i + n] for i in range(0, len(text), n)]

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream the next scripted response."""
        import anyio.lowlevel  # lazy: importing the scripted model does not load anyio

        self.requests.append(request)
        response = await self._next(request)
        emitted = 0
        out_chars = 0
        for event in self._events(response):
            if response.error is not None and emitted >= response.error_after:
                raise response.error
            if response.delay:
                await anyio.sleep(response.delay)
            if isinstance(event, TextDelta | ThinkingDelta):
                out_chars += len(event.text)
            elif isinstance(event, ToolCallDelta):
                out_chars += len(event.args_delta)
            yield event
            emitted += 1
            if type(event) is ToolCallEnd:
                # Like a network stream, let a read the engine just started begin.
                await anyio.lowlevel.checkpoint()
        if response.error is not None:
            raise response.error
        usage = response.usage or Usage(
            input_tokens=-(-self._input_chars(request) // 4),
            output_tokens=-(-out_chars // 4),
            reasoning_tokens=-(-len(response.thinking) // 4),
            requests=1,
        )
        yield ModelUsage(usage=usage)
        stop = response.stop_reason or ("tool_use" if response.tool_calls else "end_turn")
        yield ModelStop(stop_reason=stop, model=self._name)

    def _events(self, response: ScriptedResponse) -> list[ModelEvent]:
        import json

        events: list[ModelEvent] = []
        if response.thinking:
            events.extend(ThinkingDelta(text=p) for p in self._pieces(response.thinking))
            events.append(
                ThinkingDone(text=response.thinking, signature=response.thinking_signature)
            )
        events.extend(TextDelta(text=p) for p in self._pieces(response.text))
        for index, call in enumerate(response.tool_calls):
            if call.id is None:
                self._next_call_id += 1
                call_id = f"call_{self._next_call_id}"
            else:
                call_id = call.id
            raw = call.args if isinstance(call.args, str) else json.dumps(call.args)
            events.extend(
                ToolCallDelta(tool_use_id=call_id, name=call.name, index=index, args_delta=p)
                for p in self._pieces(raw)
            )
            events.append(
                ToolCallEnd(tool_use_id=call_id, name=call.name, index=index, arguments=raw)
            )
        return events
