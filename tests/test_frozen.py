"""The package's dataclasses are what the standard decorator makes, built and defined faster.

Classes :func:`mainspring._lowlevel.frozen.dataclass` makes without compiling (all the
frozen, slotted ones of the modules a program imports) are checked against a
twin the standard decorator makes of the same fields: signature, fields,
equality, hashing, ``repr``, immutability, copying and pickling.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from functools import cache
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import mainspring
import mainspring._run.dispatch  # (their records are checked too)
import mainspring._run.loop
import mainspring.context.compiler
from mainspring._lowlevel.frozen import ORIGINAL, RECORDS, fast_init
from mainspring.context.accounting import Piece
from mainspring.context.compiler import CompiledContext
from mainspring.context.snapshot import TurnSnapshot
from mainspring.events import TextDelta, ToolResult, TurnComplete, UsageEvent
from mainspring.messages import Message, TextPart, ToolCallPart, ToolResultPart
from mainspring.models.base import ModelRequest, ModelStop, ModelUsage, ToolCallEnd
from mainspring.usage import Usage

HOT = [
    Usage,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Message,
    TextDelta,
    ToolResult,
    UsageEvent,
    TurnComplete,
    ModelRequest,
    ToolCallEnd,
    ModelUsage,
    ModelStop,
    CompiledContext,
    Piece,
    TurnSnapshot,
]


@cache
def twin(cls: type) -> type:
    """The class the standard decorator makes of ``cls``'s fields."""
    spec = []
    for f in dataclasses.fields(cls):
        options: dict[str, Any] = {
            "repr": f.repr,
            "hash": f.hash,
            "compare": f.compare,
            "kw_only": f.kw_only,
        }
        if f.default is not dataclasses.MISSING:
            options["default"] = f.default
        if f.default_factory is not dataclasses.MISSING:
            options["default_factory"] = f.default_factory
        spec.append((f.name, f.type, dataclasses.field(**options)))
    namespace = {"__post_init__": cls.__post_init__} if hasattr(cls, "__post_init__") else {}
    made = dataclasses.make_dataclass(
        cls.__name__, spec, frozen=True, slots=True, namespace=namespace
    )
    made.__qualname__ = cls.__qualname__
    return made


def _original(cls: type, **kwargs: Any) -> Any:
    made: Any = object.__new__(cls)
    init = ORIGINAL[cls] if cls in ORIGINAL else vars(twin(cls))["__init__"]
    init(made, **kwargs)
    return made


def test_every_hot_class_is_fast_to_build() -> None:
    assert all(cls in ORIGINAL or cls in RECORDS for cls in HOT)


def test_the_event_and_message_classes_are_made_without_compiling() -> None:
    made = {mainspring.TextDelta, mainspring.TurnComplete, mainspring.Message, mainspring.Usage}
    assert made <= set(RECORDS)


@pytest.mark.parametrize("cls", RECORDS, ids=lambda cls: cls.__qualname__)
def test_each_record_has_the_standard_shape(cls: type) -> None:
    standard = twin(cls)
    assert str(inspect.signature(cls)) == str(inspect.signature(standard))
    assert [f.name for f in dataclasses.fields(cls)] == [
        f.name for f in dataclasses.fields(standard)
    ]
    assert cls.__match_args__ == standard.__match_args__  # type: ignore[attr-defined]  # set by the dataclass machinery, not declared on the class
    params = cls.__dataclass_params__  # type: ignore[attr-defined]  # set by the dataclass machinery, not declared on the class
    assert params.frozen and params.eq and params.init and params.repr
    assert cls.__slots__ == standard.__slots__  # type: ignore[attr-defined]  # set by the dataclass machinery, not declared on the class


@pytest.mark.parametrize("cls", [c for c in HOT if c in RECORDS], ids=lambda c: c.__qualname__)
def test_each_record_behaves_as_the_standard_twin(cls: type) -> None:
    kwargs = SAMPLES[cls]
    ours, theirs = cls(**kwargs), twin(cls)(**kwargs)
    assert repr(ours) == repr(theirs)
    assert ours == cls(**kwargs) and ours != theirs and ours != object()
    try:
        expected: int | type = hash(theirs)
    except TypeError:
        expected = TypeError
    try:
        got: int | type = hash(ours)
    except TypeError:
        got = TypeError
    assert got == expected
    first = dataclasses.fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(ours, first, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        delattr(ours, first)
    assert copy.copy(ours) == ours and copy.deepcopy(ours) == ours
    assert pickle.loads(pickle.dumps(ours)) == ours
    assert dataclasses.replace(ours) == ours and dataclasses.asdict(ours) == dataclasses.asdict(
        theirs
    )


def test_a_record_compares_and_hashes_only_the_fields_that_count() -> None:
    from mainspring._lowlevel.frozen import dataclass

    @dataclass(frozen=True, slots=True, kw_only=True)
    class Tagged:
        value: int
        note: str = dataclasses.field(default="", compare=False)

    assert Tagged in RECORDS
    assert Tagged(value=1, note="a") == Tagged(value=1, note="b")
    assert hash(Tagged(value=1, note="a")) == hash(Tagged(value=1, note="b"))
    assert Tagged(value=1) != Tagged(value=2)
    assert repr(Tagged(value=1, note="n")) == repr(twin(Tagged)(value=1, note="n"))
    nan = float("nan")
    assert Tagged(value=nan) == Tagged(value=nan)  # type: ignore[arg-type]  # same object: equal, as a tuple compares


@given(
    st.builds(
        dict,
        input_tokens=st.integers(0, 10**9),
        output_tokens=st.integers(0, 10**9),
        cache_read_tokens=st.integers(0, 10**6),
        requests=st.integers(0, 9),
    )
)
def test_usage_is_built_as_the_dataclass_builds_it(kwargs: dict[str, int]) -> None:
    fast, slow = Usage(**kwargs), _original(Usage, **kwargs)
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)


@given(st.text(max_size=50), st.sampled_from(["user", "assistant"]))
def test_messages_and_parts_are_built_as_the_dataclass_builds_them(text: str, role: str) -> None:
    part = TextPart(text=text)
    assert part == _original(TextPart, text=text)
    fast = Message(role=role, parts=(part,))  # type: ignore[arg-type]  # the role is sampled from the two literals
    slow = _original(Message, role=role, parts=(part,))
    assert fast == slow and repr(fast) == repr(slow)
    # The factory gives the one shared, read-only empty meta (see test_messages).
    assert fast.meta == {} and fast.meta is slow.meta is Message(role="user", parts=()).meta


SAMPLES: dict[type, dict[str, Any]] = {
    Usage: {"input_tokens": 3, "requests": 1},
    TextPart: {"text": "t"},
    ToolCallPart: {"id": "c", "name": "n", "arguments": {"a": 1}},
    ToolResultPart: {"tool_use_id": "c", "name": "n", "content": "x"},
    Message: {"role": "user", "parts": ()},
    TextDelta: {"text": "t"},
    ToolResult: {"tool_use_id": "c", "name": "n", "content": "x"},
    UsageEvent: {"model": "m", "usage": Usage(), "cost_usd": 0.0, "total_cost_usd": 0.0},
    TurnComplete: {"stop_reason": "end_turn", "turn_index": 1},
    ModelRequest: {"system": (), "messages": ()},
    ToolCallEnd: {"tool_use_id": "c", "name": "n", "index": 0, "arguments": "{}"},
    ModelUsage: {"usage": Usage()},
    ModelStop: {"stop_reason": "end_turn"},
    CompiledContext: {
        "system": (),
        "messages": (),
        "contributions": (),
        "turn_index": 1,
        "step": 1,
        "generation": 0,
        "stable_blocks": 0,
    },
    Piece: {
        "source": "user",
        "module": "transcript",
        "processor": "transcript",
        "slot": "history",
        "chars": 5,
        "tokens": 2,
    },
    TurnSnapshot: {"session_id": "s", "turn_index": 1, "calls": (), "started_at": 1.0},
}


def _outcome(cls: type, factory: bool, kwargs: dict[str, Any]) -> Any:
    try:
        return cls(**kwargs) if factory else _original(cls, **kwargs)
    except TypeError:
        return TypeError


@pytest.mark.parametrize("cls", HOT)
def test_each_class_builds_and_fails_as_the_dataclass_does(cls: type) -> None:
    kwargs = SAMPLES[cls]
    fast, slow = cls(**kwargs), _original(cls, **kwargs)
    assert fast == slow and repr(fast) == repr(slow)
    unknown = {**kwargs, "not_a_field": 1}
    assert _outcome(cls, True, unknown) is _outcome(cls, False, unknown) is TypeError
    first_missing = dict(list(kwargs.items())[1:])
    assert _outcome(cls, True, first_missing) == _outcome(cls, False, first_missing)


def test_instances_stay_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Usage(input_tokens=1).input_tokens = 2  # type: ignore[misc]  # a write to a frozen field on purpose


def test_only_frozen_slotted_dataclasses_are_accepted() -> None:
    @dataclasses.dataclass
    class Plain:
        a: int = 0

    with pytest.raises(TypeError, match="frozen"):
        fast_init(Plain)

    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int = 0

    with pytest.raises(TypeError, match="slots"):
        fast_init(NoSlots)
