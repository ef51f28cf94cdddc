"""The faster constructors of the hot dataclasses build exactly what the dataclass would."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mainspring._frozen import ORIGINAL, fast_init
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


def _original(cls: type, **kwargs: Any) -> Any:
    made: Any = object.__new__(cls)
    ORIGINAL[cls](made, **kwargs)
    return made


def test_every_hot_class_has_its_original_kept() -> None:
    assert set(HOT) <= set(ORIGINAL)


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
    fast = Message(role=role, parts=(part,))  # type: ignore[arg-type]
    slow = _original(Message, role=role, parts=(part,))
    assert fast == slow and repr(fast) == repr(slow)
    assert fast.meta == {} and fast.meta is not Message(role="user", parts=()).meta  # a factory


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
        Usage(input_tokens=1).input_tokens = 2  # type: ignore[misc]


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
