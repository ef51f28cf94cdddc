"""Messages and events are immutable values; Message helpers pick parts out in order."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections.abc import Callable
from typing import Any, get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mainspring import Agent, Session
from mainspring._lowlevel.json_value import JsonValue
from mainspring.events import (
    TERMINAL_EVENT_TYPES,
    Event,
    Finding,
    PendingAction,
    TextDelta,
    TurnComplete,
)
from mainspring.messages import (
    EMPTY_META,
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from mainspring.models.scripted import ScriptedModel
from mainspring.usage import Usage
from tests.strategies import ONE_OF_EACH_EVENT, PROPERTY, events, messages

CALL_A = ToolCallPart(id="call_a", name="read", arguments={"path": "a.txt"})
CALL_B = ToolCallPart(id="call_b", name="write", arguments={"path": "b.txt", "text": "hi"})
RESULT_A = ToolResultPart(tool_use_id="call_a", name="read", content="contents of a")
RESULT_B = ToolResultPart(
    tool_use_id="call_b",
    name="write",
    content="denied",
    is_error=True,
    images=(ImagePart(data="iVBORw0KGgo="),),
)

MIXED = Message(
    role="assistant",
    parts=(
        ThinkingPart(text="let me think", signature="sig=="),
        TextPart(text="Hello, "),
        CALL_A,
        ImagePart(url="https://example.com/x.png", media_type="image/jpeg"),
        TextPart(text="wörld 😀"),
        RESULT_A,
        CALL_B,
        RESULT_B,
        ThinkingPart(text="", signature="enc", redacted=True),
        TextPart(text="!"),
    ),
    meta={"turn": 3},
)

ALL_PARTS: list[Part] = [
    TextPart(text="t"),
    ImagePart(),
    CALL_A,
    RESULT_B,
    ThinkingPart(text="th"),
]


# --- helpers ---------------------------------------------------------------------------


def test_user_helper() -> None:
    m = Message.user("hi there")
    assert m == Message(role="user", parts=(TextPart(text="hi there"),))
    assert m.role == "user"
    assert m.meta == {}
    assert m.text == "hi there"
    assert m.tool_calls == ()
    assert m.tool_results_parts == ()


def test_assistant_helper() -> None:
    m = Message.assistant("done.")
    assert m == Message(role="assistant", parts=(TextPart(text="done."),))
    assert m.text == "done."


def test_user_and_assistant_with_same_text_differ() -> None:
    assert Message.user("x") != Message.assistant("x")


def test_tool_results_helper_keeps_order_and_accepts_any_iterable() -> None:
    m = Message.tool_results(r for r in (RESULT_B, RESULT_A))
    assert m.role == "tool"
    assert m.parts == (RESULT_B, RESULT_A)
    assert isinstance(m.parts, tuple)
    assert m.tool_results_parts == (RESULT_B, RESULT_A)
    assert m.text == ""


def test_tool_results_helper_with_no_results() -> None:
    m = Message.tool_results([])
    assert m == Message(role="tool", parts=())


def test_text_joins_only_text_parts_in_order() -> None:
    # Thinking text, tool output and tool arguments are not visible text.
    assert MIXED.text == "Hello, wörld 😀!"


def test_tool_calls_in_order() -> None:
    assert MIXED.tool_calls == (CALL_A, CALL_B)


def test_tool_results_parts_in_order() -> None:
    assert MIXED.tool_results_parts == (RESULT_A, RESULT_B)


def test_empty_message() -> None:
    m = Message(role="assistant", parts=())
    assert m.text == ""
    assert m.tool_calls == ()
    assert m.tool_results_parts == ()


@PROPERTY
@given(message=messages)
def test_helpers_partition_parts(message: Message) -> None:
    texts = [p.text for p in message.parts if type(p) is TextPart]
    calls = [p for p in message.parts if type(p) is ToolCallPart]
    results = [p for p in message.parts if type(p) is ToolResultPart]
    assert message.text == "".join(texts)
    assert list(message.tool_calls) == calls
    assert list(message.tool_results_parts) == results


def test_part_defaults() -> None:
    assert ImagePart() == ImagePart(media_type="image/png", data=None, url=None)
    assert ToolResultPart(tool_use_id="i", name="n", content="c").is_error is False
    assert ToolResultPart(tool_use_id="i", name="n", content="c").images == ()
    assert ThinkingPart(text="x").signature is None
    assert ThinkingPart(text="x").redacted is False


def test_part_type_tags() -> None:
    assert [p.type for p in ALL_PARTS] == ["text", "image", "tool_call", "tool_result", "thinking"]


def test_a_default_meta_is_shared_and_read_only() -> None:
    a = Message(role="user", parts=())
    b = Message.user("hi")
    assert a.meta is b.meta is EMPTY_META
    assert a.meta == {} and not a.meta and list(a.meta.items()) == []
    with pytest.raises(TypeError):
        a.meta["k"] = 1
    assert b.meta == {} and EMPTY_META == {}


MUTATIONS: list[tuple[str, Callable[[dict[str, JsonValue]], object]]] = [
    ("setitem", lambda m: m.__setitem__("k", 1)),
    ("delitem", lambda m: m.__delitem__("k")),
    ("ior", lambda m: m.__ior__({"k": 1})),
    ("setdefault", lambda m: m.setdefault("k", 1)),
    ("update", lambda m: m.update(k=1)),
    ("update_pairs", lambda m: m.update([("k", 1)])),
    ("pop", lambda m: m.pop("k", None)),
    ("popitem", lambda m: m.popitem()),
    ("clear", lambda m: m.clear()),
]


@pytest.mark.parametrize("mutate", [f for _, f in MUTATIONS], ids=[n for n, _ in MUTATIONS])
def test_no_way_to_change_the_shared_empty_meta(
    mutate: Callable[[dict[str, JsonValue]], object],
) -> None:
    with pytest.raises(TypeError):
        mutate(Message.user("a").meta)
    assert EMPTY_META == {} and Message.user("b").meta == {}


def test_a_meta_in_place_update_raises_instead_of_writing_shared_state() -> None:
    meta = Message.user("a").meta
    with pytest.raises(TypeError):
        meta |= {"k": 1}
    assert EMPTY_META == {}


def test_dicts_made_from_the_shared_meta_are_plain_and_writable() -> None:
    message = Message.user("a")
    for made in (
        dict(message.meta),
        {**message.meta},
        message.meta | {"k": 1},
        message.meta.copy(),
        dataclasses.asdict(message)["meta"],
    ):
        assert type(made) is dict
        made["x"] = 2  # (its own: the shared one stays empty)
    assert EMPTY_META == {}


def test_copies_and_pickles_of_a_message_keep_the_shared_meta() -> None:
    message = Message.user("a")
    for again in (
        copy.copy(message),
        copy.deepcopy(message),
        pickle.loads(pickle.dumps(message)),
        dataclasses.replace(message, parts=()),
    ):
        assert again.meta is EMPTY_META


def test_a_meta_of_its_own_is_an_ordinary_dict() -> None:
    own = Message(role="user", parts=(), meta={"source": "x"})
    own.meta["n"] = 1  # (still possible: the dict is this message's)
    assert own.meta == {"source": "x", "n": 1}
    assert Message(role="user", parts=()).meta == {}


@PROPERTY
@given(key=st.text(max_size=8), value=st.integers())
def test_no_session_can_change_another_sessions_messages(key: str, value: int) -> None:
    # Two sessions' transcripts share the one empty meta; a write through one must fail.
    theirs = Session(Agent(name="a", model=ScriptedModel(["ok"])), messages=[Message.user("x")])
    mine = Session(Agent(name="b", model=ScriptedModel(["ok"])), messages=[Message.user("y")])
    with pytest.raises(TypeError):
        mine.messages[0].meta[key] = value
    with pytest.raises(TypeError):
        mine.messages[0].meta.update({key: value})
    assert theirs.messages[0].meta == {} and mine.messages[0].meta == {}


def test_equality_is_by_value_and_type() -> None:
    assert TextPart(text="x") == TextPart(text="x")
    text: Part = TextPart(text="x")
    thinking: Part = ThinkingPart(text="x")
    assert text != thinking
    assert Message.user("x") == Message.user("x")
    assert Message.user("x") != Message(role="user", parts=(TextPart(text="x"),), meta={"a": 1})


# --- immutability ----------------------------------------------------------------------


@pytest.mark.parametrize("part", ALL_PARTS, ids=lambda p: p.type)
def test_parts_are_frozen(part: Part) -> None:
    before = dataclasses.replace(part)
    for field in dataclasses.fields(part):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(part, field.name, "changed")
    # Slotted: no new attributes either (CPython raises TypeError here for frozen+slots).
    name = "not_a_field"
    with pytest.raises((dataclasses.FrozenInstanceError, AttributeError, TypeError)):
        setattr(part, name, "changed")
    assert not hasattr(part, name)
    assert part == before


def test_message_is_frozen() -> None:
    m = Message.user("hi")
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.role = "assistant"  # type: ignore[misc]  # asserting the runtime guard
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.parts = ()  # type: ignore[misc]  # asserting the runtime guard
    with pytest.raises(dataclasses.FrozenInstanceError):
        del m.parts
    assert m == Message.user("hi")


def test_parts_tuple_cannot_be_mutated() -> None:
    m = Message.user("hi")
    parts: Any = m.parts
    with pytest.raises(TypeError):
        parts[0] = TextPart(text="bye")


@pytest.mark.parametrize("event", ONE_OF_EACH_EVENT, ids=lambda e: e.type)
def test_events_are_frozen(event: Event) -> None:
    for field in dataclasses.fields(event):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(event, field.name, None)


def test_one_of_each_event_covers_the_union() -> None:
    assert [type(e) for e in ONE_OF_EACH_EVENT] == list(get_args(Event))


def test_nested_values_are_frozen() -> None:
    finding = Finding(source="permission", message="m")
    with pytest.raises(dataclasses.FrozenInstanceError):
        finding.action = "block"  # type: ignore[misc]  # asserting the runtime guard
    done = TurnComplete(stop_reason="end_turn")
    with pytest.raises(dataclasses.FrozenInstanceError):
        done.usage.input_tokens = 5  # type: ignore[misc]  # asserting the runtime guard
    assert done.usage == Usage()


def test_constructors_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        TextPart("x")  # type: ignore[call-arg]  # asserting kw_only at runtime
    with pytest.raises(TypeError):
        Message("user", ())  # type: ignore[call-arg]  # asserting kw_only at runtime
    with pytest.raises(TypeError):
        TextDelta("x")  # type: ignore[call-arg]  # asserting kw_only at runtime


# --- events ----------------------------------------------------------------------------


def test_terminal_event_types() -> None:
    assert frozenset({"turn_complete", "error"}) == TERMINAL_EVENT_TYPES
    wire_names = {t.__dataclass_fields__["type"].default for t in get_args(Event)}
    assert wire_names >= TERMINAL_EVENT_TYPES


@PROPERTY
@given(event=events)
def test_event_type_tag_is_the_class_default(event: Event) -> None:
    assert event.type == type(event).__dataclass_fields__["type"].default


def test_pending_action_approval_id_defaults_to_attempt_id() -> None:
    pa = PendingAction(
        attempt_id="att-1", tool_use_id="t", turn_index=0, name="n", input={}, description="d"
    )
    assert pa.approval_id == "att-1"
    same = PendingAction(
        attempt_id="att-1",
        tool_use_id="t",
        turn_index=0,
        name="n",
        input={},
        description="d",
        approval_id="att-1",
    )
    assert same == pa


def test_pending_action_keeps_an_approval_id_other_than_its_attempt() -> None:
    signed = PendingAction(
        attempt_id="att-1",
        tool_use_id="t",
        turn_index=0,
        name="n",
        input={},
        description="d",
        approval_id="att-1.hash.signature",  # what mainspring.server hands a client
    )
    assert signed.approval_id == "att-1.hash.signature" and signed.attempt_id == "att-1"
