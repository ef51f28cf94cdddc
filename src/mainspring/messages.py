"""Provider-neutral, immutable conversation items.

A :class:`Message` has a role and a tuple of parts. Parts are text, images,
tool calls, tool results and thinking (with the provider's signature kept
verbatim so it can be sent back unchanged). Everything is a frozen, slotted
dataclass: cheap to create, safe to share between a transcript, a request and
a store. JSON goes through :mod:`mainspring.codec`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import field
from typing import Any, Literal, NoReturn, TypeAlias

from mainspring._lowlevel.frozen import dataclass, fast_init
from mainspring._lowlevel.json_value import JsonValue

__all__ = [
    "EMPTY_META",
    "ImagePart",
    "Message",
    "Part",
    "Role",
    "TextPart",
    "ThinkingPart",
    "ToolCallPart",
    "ToolResultPart",
]

Role: TypeAlias = Literal["user", "assistant", "tool"]
"""Who a message is from."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TextPart:
    """Plain text."""

    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True, kw_only=True)
class ImagePart:
    """An image, inline (base64 ``data``) or by ``url``."""

    media_type: str = "image/png"
    data: str | None = None
    """Base64-encoded bytes."""
    url: str | None = None
    type: Literal["image"] = "image"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallPart:
    """The model asks for a tool to run."""

    id: str
    """The call's id; results are joined to calls by it. In a transcript the
    engine wrote, the engine's own id (unique even when a model repeats one)."""
    name: str
    arguments: dict[str, JsonValue]
    provider_id: str = ""
    """The id the model gave the call, when the engine assigned ``id``."""
    type: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultPart:
    """What a tool returned (or why it did not run) for one call."""

    tool_use_id: str
    name: str
    content: str
    is_error: bool = False
    images: tuple[ImagePart, ...] = ()
    type: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True, slots=True, kw_only=True)
class ThinkingPart:
    """Model reasoning; ``signature`` is opaque and must go back unchanged."""

    text: str
    signature: str | None = None
    redacted: bool = False
    """The provider withheld the text; ``signature`` carries the encrypted payload."""
    provider: str | None = None
    """Who produced it (``"anthropic"``, ``"openai"``, ``"gemini"``…): a signature only
    means something to its own provider, so other adapters drop or convert the part."""
    type: Literal["thinking"] = "thinking"


Part: TypeAlias = TextPart | ImagePart | ToolCallPart | ToolResultPart | ThinkingPart
"""Any part of a message; ``type`` tells them apart."""


class _EmptyMeta(dict[str, JsonValue]):
    """The empty ``meta`` every message made without one shares: it refuses changes.

    A dict each would cost a message 64 bytes (a session 0.25 KiB a turn);
    one shared dict must not be writable, or one session could change
    another's messages. Reading, iterating, ``dict(meta)``, ``{**meta}`` and
    ``meta | {...}`` work as on any empty dict (the last three give a new,
    plain dict); a copy or a pickle of it is the shared one again.
    """

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> dict[str, JsonValue]:  # type: ignore[misc]
        return dict(*args, **kwargs)  # (a dict built from it, e.g. by asdict: a plain one)

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(
            "this message's meta is the shared empty one and cannot change:"
            " make the message with meta={...}, or dataclasses.replace(message, meta={...})"
        )

    def __setitem__(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse()

    def __delitem__(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse()

    def __ior__(self, *args: Any, **kwargs: Any) -> NoReturn:  # type: ignore[misc]
        self._refuse()

    def setdefault(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse()

    def update(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse()

    def pop(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse()

    def popitem(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse()

    def clear(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse()

    def __reduce__(self) -> tuple[Callable[[], dict[str, JsonValue]], tuple[()]]:
        return _empty_meta, ()

    def __copy__(self) -> dict[str, JsonValue]:
        return self

    def __deepcopy__(self, memo: object) -> dict[str, JsonValue]:
        return self

    def __repr__(self) -> str:
        return "{}"


EMPTY_META: dict[str, JsonValue] = dict.__new__(_EmptyMeta)
"""The ``meta`` of every message made without one (shared, and read-only)."""


def _empty_meta() -> dict[str, JsonValue]:
    return EMPTY_META


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One conversation item: a role and its parts."""

    role: Role
    parts: tuple[Part, ...]
    meta: dict[str, JsonValue] = field(default_factory=_empty_meta)
    """Free-form annotations (turn index, source); never sent to a model.

    A message made without ``meta`` shares one read-only empty dict
    (:data:`EMPTY_META`): to annotate it, make it (or ``replace`` it) with a
    dict of its own.
    """

    @classmethod
    def user(cls, text: str) -> Message:
        """A user message holding one text part."""
        return cls(role="user", parts=(TextPart(text=text),))

    @classmethod
    def assistant(cls, text: str) -> Message:
        """An assistant message holding one text part."""
        return cls(role="assistant", parts=(TextPart(text=text),))

    @classmethod
    def tool_results(cls, results: Iterable[ToolResultPart]) -> Message:
        """A tool message carrying results, in the order given."""
        return cls(role="tool", parts=tuple(results))

    @property
    def text(self) -> str:
        """The concatenated text parts."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        """The tool calls in this message, in order."""
        return tuple(p for p in self.parts if isinstance(p, ToolCallPart))

    @property
    def tool_results_parts(self) -> tuple[ToolResultPart, ...]:
        """The tool results in this message, in order."""
        return tuple(p for p in self.parts if isinstance(p, ToolResultPart))


# Built on every step: a faster constructor (the same instances).
fast_init(TextPart)
fast_init(ToolCallPart)
fast_init(ToolResultPart)
fast_init(Message)
