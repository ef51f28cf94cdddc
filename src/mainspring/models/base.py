"""The Model protocol: one streaming interface for every provider.

A model turns a :class:`ModelRequest` into an async stream of
:data:`ModelEvent`: text and thinking deltas, tool-call argument fragments,
a :class:`ToolCallEnd` as soon as each call's arguments are complete (so the
engine can start reads mid-stream), usage, and exactly one final
:class:`ModelStop`. A stream that ends without ``ModelStop`` is an error.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import field
from typing import Literal, Protocol, TypeAlias, runtime_checkable

from mainspring._lowlevel.frozen import dataclass, fast_init
from mainspring._lowlevel.json_value import JsonValue
from mainspring.events import TextDelta, ThinkingDelta, ThinkingDone, ToolCallDelta
from mainspring.messages import Message
from mainspring.usage import Usage

__all__ = [
    "Effort",
    "Model",
    "ModelEvent",
    "ModelRequest",
    "ModelSettings",
    "ModelStop",
    "ModelUsage",
    "SystemBlock",
    "ToolCallEnd",
    "ToolSpec",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemBlock:
    """A piece of the system prompt, attributed to its source."""

    text: str
    source: str = "system"
    cache_breakpoint: bool = False
    """The stable, cacheable prefix ends after this block."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """What a model is told about a tool."""

    name: str
    description: str
    input_schema: dict[str, JsonValue]


Effort: TypeAlias = Literal["minimal", "low", "medium", "high", "max"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSettings:
    """Per-request generation settings; ``None`` leaves the provider default."""

    max_tokens: int | None = None
    temperature: float | None = None
    tool_choice: Literal["auto", "none", "required"] | str | None = None
    """``"auto"``, ``"none"``, ``"required"`` (some tool), or a tool's name."""
    effort: Effort | None = None
    """One neutral reasoning setting, mapped to each provider's thinking controls."""
    output_schema: dict[str, JsonValue] | None = None
    """JSON schema the answer must follow, where the API offers structured output."""
    extra: dict[str, JsonValue] = field(default_factory=dict)
    """Provider-specific request fields, merged into the request body as is."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequest:
    """Everything one model call needs."""

    system: tuple[SystemBlock, ...]
    messages: Sequence[Message]
    tools: tuple[ToolSpec, ...] = ()
    settings: ModelSettings = ModelSettings()

    @property
    def system_text(self) -> str:
        """The system blocks joined with blank lines."""
        return "\n\n".join(b.text for b in self.system if b.text)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallEnd:
    """A tool call's arguments are complete (raw JSON text, parsed by the engine)."""

    tool_use_id: str
    name: str
    index: int
    arguments: str
    type: Literal["tool_call_end"] = "tool_call_end"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelUsage:
    """Usage of this call: what the provider reported, or an estimate.

    An adapter whose server reports no usage counts the request and estimates
    its tokens with an offline tokenizer (``estimated=True``) rather than
    leaving the call at zero.
    """

    usage: Usage
    estimated: bool = False
    """The tokens are the adapter's estimate, not the provider's count."""
    type: Literal["model_usage"] = "model_usage"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelStop:
    """The call finished; always the last event of a model stream."""

    stop_reason: Literal["end_turn", "tool_use", "max_tokens", "refusal"] = "end_turn"
    model: str = ""
    type: Literal["model_stop"] = "model_stop"


ModelEvent: TypeAlias = (
    TextDelta | ThinkingDelta | ThinkingDone | ToolCallDelta | ToolCallEnd | ModelUsage | ModelStop
)
"""Any event a model streams; the last is always ``ModelStop``."""


@runtime_checkable
class Model(Protocol):
    """Anything that can stream a response to a request."""

    @property
    def name(self) -> str:
        """A label for logs, usage and prices (e.g. ``"anthropic:claude-sonnet-4-5"``)."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream the response; raises :class:`~mainspring.errors.ModelError` on failure."""
        ...


# Built on every step: a faster constructor (the same instances).
fast_init(ModelRequest)
fast_init(ToolCallEnd)
fast_init(ModelUsage)
fast_init(ModelStop)
