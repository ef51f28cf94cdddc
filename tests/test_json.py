"""JsonValue: pydantic's own, without importing pydantic until a schema needs it."""

from __future__ import annotations

import typing
from dataclasses import dataclass, field

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mainspring import PendingAction, ToolResult
from mainspring._lowlevel.json_value import JsonValue
from mainspring.codec import decode, encode


@dataclass(frozen=True)
class Ours:
    data: JsonValue = None
    maybe: JsonValue | None = None
    items: dict[str, JsonValue] = field(default_factory=dict)
    seq: list[JsonValue] | None = None


@dataclass(frozen=True)
class Theirs:
    data: pydantic.JsonValue = None
    maybe: pydantic.JsonValue | None = None
    items: dict[str, pydantic.JsonValue] = field(default_factory=dict)
    seq: list[pydantic.JsonValue] | None = None


def test_the_schema_is_pydantics() -> None:
    ours = pydantic.TypeAdapter(Ours).json_schema()
    theirs = pydantic.TypeAdapter(Theirs).json_schema()
    assert ours == {**theirs, "title": "Ours"}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


@given(json_values)
def test_validation_is_pydantics(value: object) -> None:
    data = {"data": value, "maybe": value, "items": {"k": value}, "seq": [value]}
    ours = pydantic.TypeAdapter(Ours).validate_python(data)
    theirs = pydantic.TypeAdapter(Theirs).validate_python(data)
    assert (ours.data, ours.maybe, ours.items, ours.seq) == (
        theirs.data,
        theirs.maybe,
        theirs.items,
        theirs.seq,
    )


@pytest.mark.parametrize("bad", [{1, 2}, object(), b"bytes", {"k": (1j,)}])
def test_a_value_that_is_not_json_is_refused(bad: object) -> None:
    with pytest.raises(pydantic.ValidationError, match="valid JSON value"):
        pydantic.TypeAdapter(Ours).validate_python({"data": bad})
    with pytest.raises(pydantic.ValidationError):
        decode(PendingAction, {**_pending(), "input": {"x": bad}})


def _pending() -> dict[str, JsonValue]:
    event = PendingAction(
        attempt_id="a",
        tool_use_id="t",
        turn_index=0,
        name="pay",
        input={"to": "alice", "amount": 5, "memo": [None, {"x": 1.5}]},
        description="Pay",
    )
    data = encode(event)
    assert isinstance(data, dict)
    return data


def test_events_round_trip_through_the_codec() -> None:
    data = _pending()
    assert encode(decode(PendingAction, data)) == data
    result = ToolResult(tool_use_id="t", name="pay", content="ok", is_error=False)
    assert decode(ToolResult, encode(result)) == result


def test_annotations_resolve_at_run_time() -> None:
    hints = typing.get_type_hints(PendingAction)
    assert hints["input"] == dict[str, JsonValue]
    assert repr(typing.get_type_hints(Ours)["maybe"]) == "typing.Optional[JsonValue]"


def test_it_is_not_a_constructor() -> None:
    with pytest.raises(TypeError, match="not a constructor"):
        typing.cast(typing.Any, JsonValue)()
