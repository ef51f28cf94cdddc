"""The one JSON codec for messages and events.

Built on pydantic ``TypeAdapter`` over the discriminated unions, created (and
pydantic imported) on first use so that ``import mainspring`` stays cheap. Every wire format
(SSE, checkpoints, session stores) goes through these functions.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from mainspring._lowlevel.frozen import generate
from mainspring._lowlevel.json_value import JsonValue
from mainspring.errors import StoreError
from mainspring.events import (
    ErrorEvent,
    Event,
    FinalOutput,
    OutputPartial,
    OutputRetry,
    StreamStarted,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolProgress,
    ToolResult,
    ToolStart,
    TurnComplete,
    UsageEvent,
)
from mainspring.messages import (
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from mainspring.usage import Usage

if TYPE_CHECKING:
    from pydantic import TypeAdapter

__all__ = [
    "PLAIN_EVENTS",
    "decode",
    "encode",
    "encode_without",
    "event_from_dict",
    "event_from_json",
    "event_to_dict",
    "event_to_json",
    "fields_dict",
    "is_plain_event",
    "is_plain_message",
    "message_from_dict",
    "message_to_dict",
    "part_to_dict",
]

T = TypeVar("T")


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def _adapter(tp: Any) -> TypeAdapter[Any]:
    adapter = _ADAPTERS.get(tp)
    if adapter is None:
        from pydantic import TypeAdapter  # lazy: pydantic loads with the first codec use

        adapter = _ADAPTERS[tp] = TypeAdapter(tp)
    return adapter


@functools.cache
def _event_adapter() -> TypeAdapter[Any]:
    from pydantic import Field

    return _adapter(Annotated[Event, Field(discriminator="type")])


def encode(value: object) -> JsonValue:
    """Any codec-known value (message, event, usage, dataclass tree) to JSON data."""
    data: JsonValue = _adapter(type(value)).dump_python(value, mode="json")
    return data


def encode_without(value: object, fields: set[str]) -> dict[str, JsonValue]:
    """A dataclass as a JSON object, leaving ``fields`` out (never encoded)."""
    data: dict[str, JsonValue] = _adapter(type(value)).dump_python(
        value, mode="json", exclude=fields
    )
    return data


def decode(tp: type[T], data: object) -> T:
    """JSON data back to ``tp``; raises ``pydantic.ValidationError`` when it does not fit."""
    value: T = _adapter(tp).validate_python(data)
    return value


def _flat_fields(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


FieldsDict = Callable[[Any], dict[str, JsonValue]]

_FIELDS_DICTS: dict[tuple[type, tuple[str, ...]], FieldsDict] = {}


def fields_dict(cls: type, names: tuple[str, ...]) -> FieldsDict:
    """A function of an object of ``cls``: ``{name: obj.<name> for name in names}``.

    Generated once per class and names: one dict display of attribute reads,
    which the interpreter specializes for the class's slots; a comprehension of
    ``getattr`` calls costs more than twice as much. ``names`` are attribute
    names of ``cls`` (a dataclass's fields), in the order the dict gets them.
    """
    made = _FIELDS_DICTS.get((cls, names))
    if made is None:
        if not all(name.isidentifier() for name in names):
            raise ValueError(f"not attribute names: {names!r}")
        items = ", ".join(f"{name!r}: obj.{name}" for name in names)
        name = f"fields_of_{cls.__name__}"
        made = generate(f"def {name}(obj):\n    return {{{items}}}\n", {}, name)
        _FIELDS_DICTS[(cls, names)] = made
    return made


# Events whose fields are all JSON already (str, int, float, bool, None, or a
# JSON object): encoded field by field, several times faster than the adapter.
# tests/test_codec.py checks this path gives exactly what the adapter gives.
_FLAT: dict[type, tuple[str, ...]] = {
    cls: _flat_fields(cls)
    for cls in (
        StreamStarted,
        TextDelta,
        ThinkingDelta,
        ToolCallDelta,
        ToolStart,
        ToolProgress,
        ToolResult,
        ErrorEvent,
        OutputPartial,
        OutputRetry,
        FinalOutput,
    )
}


_USAGE_FIELDS = _flat_fields(Usage)

# Events whose fields are JSON scalars or a Usage (every field an int): a run
# emits two usage events and a turn_complete, so they too skip the adapter.
_WITH_USAGE: dict[type, tuple[str, ...]] = {
    cls: _flat_fields(cls) for cls in (UsageEvent, TurnComplete)
}


PLAIN_EVENTS: frozenset[type] = frozenset(_FLAT) | frozenset(_WITH_USAGE)
"""The event classes :func:`event_to_dict` encodes field by field (see :func:`is_plain_event`)."""


def is_plain_event(event: object) -> bool:
    """Whether :func:`event_to_dict` encodes ``event`` field by field (it cannot fail).

    Such an event's fields are stored by reference either way, so an in-memory
    store may keep the (immutable) event itself and encode it when it is loaded.
    """
    return type(event) in PLAIN_EVENTS


_PLAIN_ENCODERS: dict[type, FieldsDict] = {}
"""The encoder of each plain event class met so far (:func:`_plain_encoder`)."""


def event_to_dict(event: Event) -> dict[str, JsonValue]:
    """An event as a JSON object (its ``type`` included)."""
    encoder = _PLAIN_ENCODERS.get(type(event))
    if encoder is not None:
        return encoder(event)
    if type(event) in PLAIN_EVENTS:
        return _plain_encoder(type(event))(event)
    data: dict[str, JsonValue] = _event_adapter().dump_python(event, mode="json")
    return data


def _plain_encoder(kind: type) -> FieldsDict:
    """The field-by-field encoder of a plain event class (made on first use)."""
    fields = _FLAT.get(kind)
    if fields is not None:
        encoder = fields_dict(kind, fields)
    else:
        fields = _WITH_USAGE[kind]
        usages = tuple(f.name for f in dataclasses.fields(kind) if "Usage" in str(f.type))
        encoder = functools.partial(_with_usage, fields_dict(kind, fields), usages)
    _PLAIN_ENCODERS[kind] = encoder
    return encoder


def _with_usage(fields: FieldsDict, usages: tuple[str, ...], event: Event) -> dict[str, JsonValue]:
    """``event`` field by field, its Usage fields (``usages``) as objects."""
    data = fields(event)
    for name in usages:
        value: object = data[name]  # (an object: fields() gave it as read)
        if type(value) is Usage:
            data[name] = _usage_dict()(value)
    return data


@functools.cache
def _usage_dict() -> FieldsDict:
    return fields_dict(Usage, _USAGE_FIELDS)


def event_from_dict(data: object) -> Event:
    """Rebuild an event from :func:`event_to_dict` output."""
    event: Event = _event_adapter().validate_python(data)
    return event


def event_to_json(event: Event) -> str:
    """Compact JSON text of an event, non-ASCII kept as is."""
    return json.dumps(event_to_dict(event), ensure_ascii=False, separators=(",", ":"))


def event_from_json(text: str | bytes) -> Event:
    """Parse :func:`event_to_json` output.

    Raises:
        StoreError: The text is not JSON or not a known event.
    """
    try:
        return event_from_dict(json.loads(text))
    except (ValueError, RecursionError) as exc:  # pydantic's ValidationError is a ValueError
        raise StoreError(f"not a valid event: {exc}") from exc


# Message parts, encoded field by field (a store encodes every new message once):
# their fields are JSON already, but for a tool result's images (image parts).
# tests/test_codec.py checks this path gives exactly what the adapter gives.
_PARTS: dict[type, tuple[str, ...]] = {
    cls: _flat_fields(cls)
    for cls in (TextPart, ImagePart, ToolCallPart, ToolResultPart, ThinkingPart)
}


_PART_ENCODERS: dict[type, FieldsDict] = {}
"""The encoder of each part class met so far (:func:`_part_encoder`)."""


def _part_encoder(kind: type) -> FieldsDict | None:
    """The field-by-field encoder of a part class (made on first use), else ``None``."""
    fields = _PARTS.get(kind)
    if fields is None:
        return None
    encoder = fields_dict(kind, fields)
    if kind is ToolResultPart:
        encoder = functools.partial(_with_images, encoder)
    _PART_ENCODERS[kind] = encoder
    return encoder


def _with_images(fields: FieldsDict, part: ToolResultPart) -> dict[str, JsonValue]:
    data = fields(part)
    data["images"] = [part_to_dict(image) for image in part.images]
    return data


def message_to_dict(message: Message) -> dict[str, JsonValue]:
    """A message as a JSON object."""
    parts: list[JsonValue] = []
    for part in message.parts:
        encoder = _PART_ENCODERS.get(type(part)) or _part_encoder(type(part))
        if encoder is None:  # (not a part: the adapter says what is wrong)
            data: dict[str, JsonValue] = _adapter(Message).dump_python(message, mode="json")
            return data
        parts.append(encoder(part))
    return {"role": message.role, "parts": parts, "meta": message.meta}


def is_plain_message(message: Message) -> bool:
    """Whether :func:`message_to_dict` encodes ``message`` field by field (it cannot fail).

    As for :func:`is_plain_event`: an in-memory store may keep such a message
    itself and encode it when it is loaded.
    """
    for part in message.parts:
        if type(part) not in _PARTS:
            return False
        if isinstance(part, ToolResultPart) and not all(type(i) in _PARTS for i in part.images):
            return False
    return True


def part_to_dict(part: object) -> JsonValue:
    """A message part (or any codec-known value) as JSON data; parts field by field."""
    encoder = _PART_ENCODERS.get(type(part)) or _part_encoder(type(part))
    if encoder is None:
        dumped: JsonValue = _adapter(type(part)).dump_python(part, mode="json")
        return dumped
    return encoder(part)


def message_from_dict(data: object) -> Message:
    """Rebuild a message from :func:`message_to_dict` output."""
    message: Message = _adapter(Message).validate_python(data)
    return message
