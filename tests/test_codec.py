"""The JSON codec: events, messages and session state survive a trip through JSON."""

from __future__ import annotations

import json
from typing import get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import JsonValue, ValidationError

from mainspring.codec import (
    decode,
    encode,
    event_from_dict,
    event_from_json,
    event_to_dict,
    event_to_json,
    is_plain_event,
    is_plain_message,
    message_from_dict,
    message_to_dict,
)
from mainspring.errors import StoreError
from mainspring.events import Event, Finding, PendingAction, TextDelta, ToolProgress
from mainspring.messages import (
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from mainspring.state import Call, SessionState, Turn, TurnStatus, WriteRecord, state_from_stored
from mainspring.usage import Usage
from tests.strategies import (
    EVENT_STRATEGIES,
    ONE_OF_EACH_EVENT,
    PART_STRATEGIES,
    PROPERTY,
    depths,
    events,
    ids,
    json_objects,
    messages,
    texts,
    usages,
)

EVENT_TYPES: tuple[type[Event], ...] = get_args(Event)

WIRE_NAMES = {
    "StreamStarted": "stream_started",
    "TextDelta": "text_delta",
    "ThinkingDelta": "thinking_delta",
    "ThinkingDone": "thinking_done",
    "ToolCallDelta": "tool_call_delta",
    "ToolStart": "tool_start",
    "ToolProgress": "tool_progress",
    "ToolResult": "tool_result",
    "PendingAction": "pending_action",
    "PermissionDenied": "permission_denied",
    "Canvas": "canvas",
    "UsageEvent": "usage",
    "SteeringQueued": "steering_queued",
    "SteeringTaken": "steering_taken",
    "OutputPartial": "output_partial",
    "OutputRetry": "output_retry",
    "FinalOutput": "final_output",
    "ApprovalAdded": "approval_added",
    "ApprovalExpiring": "approval_expiring",
    "GuardrailVerdict": "guardrail_verdict",
    "TurnComplete": "turn_complete",
    "ErrorEvent": "error",
}
"""Wire names are forever: a rename must break this test."""

PENDING = next(e for e in ONE_OF_EACH_EVENT if isinstance(e, PendingAction))

EVERY_PART_MESSAGE = Message(
    role="assistant",
    parts=(
        TextPart(text="Hi 👋\r\n\u05e9\u05dc\u05d5\u05dd"),
        ImagePart(data="iVBORw0KGgo=", media_type="image/png"),
        ImagePart(url="https://example.com/a.jpg", media_type="image/jpeg"),
        ToolCallPart(id="tu_1", name="read", arguments={"path": "a", "opts": {"n": [1, 2.5]}}),
        ToolResultPart(
            tool_use_id="tu_1",
            name="read",
            content="line\x00",
            is_error=True,
            images=(ImagePart(data="AAAA"),),
        ),
        ThinkingPart(text="because", signature="sig+/="),
        ThinkingPart(text="", signature="opaque", redacted=True),
    ),
    meta={"turn": 1, "source": "test", "tags": ["a", None]},
)


def _pending(attempt_id: str = "att-1") -> PendingAction:
    return PendingAction(
        attempt_id=attempt_id,
        tool_use_id="tu_9",
        turn_index=4,
        name="delete",
        input={"path": "/tmp/x"},
        description="Delete /tmp/x",
        findings=(Finding(source="permission", message="writes need approval"),),
    )


# --- events ----------------------------------------------------------------------------


def test_wire_names() -> None:
    assert {t.__name__: t.__dataclass_fields__["type"].default for t in EVENT_TYPES} == WIRE_NAMES
    assert {type(e).__name__: event_to_dict(e)["type"] for e in ONE_OF_EACH_EVENT} == WIRE_NAMES


@pytest.mark.parametrize("event", ONE_OF_EACH_EVENT, ids=lambda e: e.type)
def test_hand_written_event_round_trips(event: Event) -> None:
    assert event_from_dict(event_to_dict(event)) == event
    assert event_from_json(event_to_json(event)) == event
    assert event_from_json(event_to_json(event).encode("utf-8")) == event


@pytest.mark.parametrize("event_type", EVENT_TYPES, ids=lambda t: t.__name__)
@PROPERTY
@given(data=st.data())
def test_round_trip_each_event_type(event_type: type[Event], data: st.DataObject) -> None:
    event = data.draw(EVENT_STRATEGIES[event_type])
    as_dict = event_to_dict(event)
    assert as_dict["type"] == event.type
    back = event_from_dict(as_dict)
    assert type(back) is event_type
    assert back == event
    text = event_to_json(event)
    assert event_from_json(text) == event
    assert event_from_json(text.encode("utf-8")) == event


@PROPERTY
@given(event=events)
def test_event_dict_is_plain_json_and_matches_event_json(event: Event) -> None:
    as_dict = event_to_dict(event)
    # Plain JSON data: a trip through the json module changes nothing.
    assert json.loads(json.dumps(as_dict)) == as_dict
    assert json.loads(event_to_json(event)) == as_dict
    assert event_from_dict(json.loads(json.dumps(as_dict))) == event


@PROPERTY
@given(event=events)
def test_a_plain_event_is_encoded_field_by_field_by_reference(event: Event) -> None:
    # An in-memory store keeps a plain event itself and encodes it when loaded:
    # the same data as encoding it at once, since its fields are taken as they are.
    if is_plain_event(event):
        as_dict = event_to_dict(event)
        assert all(
            value is getattr(event, name) or name == "usage" for name, value in as_dict.items()
        )
        assert event_from_dict(as_dict) == event


@PROPERTY
@given(event=events)
def test_encode_decode_agree_with_event_codec(event: Event) -> None:
    assert encode(event) == event_to_dict(event)
    assert decode(type(event), encode(event)) == event


def test_event_to_json_is_compact_and_keeps_non_ascii() -> None:
    assert event_to_json(TextDelta(text="é 😀\n")) == '{"text":"é 😀\\n","type":"text_delta"}'


def test_event_to_dict_exact_shape() -> None:
    assert event_to_dict(ToolProgress(tool_use_id="t", name="n", message="m")) == {
        "tool_use_id": "t",
        "name": "n",
        "message": "m",
        "pct": None,
        "type": "tool_progress",
    }
    assert event_to_dict(_pending()) == {
        "attempt_id": "att-1",
        "tool_use_id": "tu_9",
        "turn_index": 4,
        "name": "delete",
        "input": {"path": "/tmp/x"},
        "description": "Delete /tmp/x",
        "modifiable_fields": [],
        "reason": "",
        "findings": [
            {
                "source": "permission",
                "message": "writes need approval",
                "tier": "policy",
                "action": "confirm",
            }
        ],
        "client_executed": False,
        "amount_usd": None,
        "nested": None,
        "approval_id": "att-1",
        "input_hash": "",
        "details": {},
        "can_regenerate": False,
        "regenerate_input": None,
        "expires_at": None,
        "quorum": 1,
        "allow_self_approval": True,
        "requested_by": "",
        "policy_version": "",
        "type": "pending_action",
    }


def test_event_from_dict_fills_defaults() -> None:
    assert event_from_dict({"type": "text_delta", "text": "x"}) == TextDelta(text="x")


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        "not json",
        "{",
        b"\xff\xfe\x00",
        "null",
        "42",
        "[]",
        '"text_delta"',
        "{}",
        '{"type": "nope"}',
        '{"type": "text_delta"}',
        '{"type": "text_delta", "text": 1}',
        '{"type": "turn_complete", "stop_reason": "because"}',
        '{"type": "finding", "source": "s", "message": "m"}',
    ],
)
def test_event_from_json_garbage_raises_store_error(garbage: str | bytes) -> None:
    with pytest.raises(StoreError):
        event_from_json(garbage)


def test_event_from_json_deeply_nested_raises_store_error() -> None:
    depth = 100_000
    with pytest.raises(StoreError):
        event_from_json("[" * depth + "]" * depth)


@PROPERTY
@given(garbage=st.one_of(st.text(max_size=40), st.binary(max_size=40)))
def test_event_from_json_arbitrary_input_is_an_event_or_store_error(garbage: str | bytes) -> None:
    try:
        event = event_from_json(garbage)
    except StoreError:
        return
    assert isinstance(event, EVENT_TYPES)


# --- PendingAction.approval_id ---------------------------------------------------------


def test_approval_id_equals_attempt_id_and_survives_json() -> None:
    pa = _pending("8c1e2f4a-1111-4222-8333-944455556666")
    assert pa.approval_id == pa.attempt_id
    assert event_to_dict(pa)["approval_id"] == pa.attempt_id
    back = event_from_json(event_to_json(pa))
    assert isinstance(back, PendingAction)
    assert back.approval_id == back.attempt_id == pa.attempt_id
    assert back.findings == pa.findings


@PROPERTY
@given(pa=EVENT_STRATEGIES[PendingAction])
def test_approval_id_survives_json_for_any_pending_action(pa: Event) -> None:
    assert isinstance(pa, PendingAction)
    back = event_from_json(event_to_json(pa))
    assert isinstance(back, PendingAction)
    assert back.approval_id == pa.attempt_id


def test_approval_id_missing_from_json_is_filled_in() -> None:
    data = event_to_dict(_pending())
    del data["approval_id"]
    back = event_from_dict(data)
    assert isinstance(back, PendingAction)
    assert back.approval_id == "att-1"


def test_an_approval_id_defaults_to_the_attempt_and_a_signed_one_round_trips() -> None:
    assert _pending().approval_id == _pending().attempt_id
    data = event_to_dict(_pending())
    data["approval_id"] = "att-1.signed-by-a-server"  # what mainspring.server hands out
    event = event_from_json(json.dumps(data))
    assert isinstance(event, PendingAction)
    assert event.approval_id == "att-1.signed-by-a-server" and event.attempt_id == "att-1"


# --- messages --------------------------------------------------------------------------


def test_message_exact_shape() -> None:
    assert message_to_dict(Message.user("hi")) == {
        "role": "user",
        "parts": [{"text": "hi", "type": "text"}],
        "meta": {},
    }


def test_message_with_every_part_type_round_trips() -> None:
    assert {type(p) for p in EVERY_PART_MESSAGE.parts} == set(PART_STRATEGIES)
    data = message_to_dict(EVERY_PART_MESSAGE)
    parts = data["parts"]
    assert isinstance(parts, list)
    assert [p["type"] for p in parts if isinstance(p, dict)] == [
        "text",
        "image",
        "image",
        "tool_call",
        "tool_result",
        "thinking",
        "thinking",
    ]
    assert message_from_dict(data) == EVERY_PART_MESSAGE
    assert message_from_dict(json.loads(json.dumps(data))) == EVERY_PART_MESSAGE


def test_a_message_of_known_parts_is_plain_and_one_of_another_part_is_not() -> None:
    # An in-memory store keeps a plain message itself and encodes it when loaded.
    assert is_plain_message(EVERY_PART_MESSAGE)
    odd = Message(role="user", parts=(object(),))  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
    assert not is_plain_message(odd)


@PROPERTY
@given(message=messages)
def test_message_round_trip(message: Message) -> None:
    data = message_to_dict(message)
    back = message_from_dict(json.loads(json.dumps(data)))
    assert back == message
    assert [type(p) for p in back.parts] == [type(p) for p in message.parts]
    assert isinstance(back.parts, tuple)


def test_thinking_part_is_not_read_back_as_text_part() -> None:
    # Same "text" field; only the tag tells them apart.
    msg = Message(role="assistant", parts=(ThinkingPart(text="x"), TextPart(text="x")))
    back = message_from_dict(message_to_dict(msg))
    assert [type(p) for p in back.parts] == [ThinkingPart, TextPart]


def test_message_from_dict_rejects_unknown_part() -> None:
    with pytest.raises(ValidationError):
        message_from_dict({"role": "user", "parts": [{"type": "video", "url": "x"}], "meta": {}})
    with pytest.raises(ValidationError):
        message_from_dict({"role": "system", "parts": [], "meta": {}})


# --- session state ---------------------------------------------------------------------


def _state() -> SessionState:
    pending = _pending("f00dfeed-0000-4000-8000-000000000001")
    calls = [
        Call(
            id="tu_7",
            index=0,
            provider_id="toolu_same",
            name="read",
            input={"path": "a.txt"},
            result=ToolResultPart(tool_use_id="tu_7", name="read", content="A"),
            parallel=True,
        ),
        Call(
            id="tu_8",
            index=1,
            provider_id="toolu_same",
            name="write",
            input=None,
            result=ToolResultPart(
                tool_use_id="tu_8", name="write", content="bad input", is_error=True
            ),
        ),
        Call(id="tu_9", index=2, name="delete", input={"path": "/tmp/x"}, started=True),
        Call(id="tu_10", index=3, name="read", input={"path": "b"}),
    ]
    return SessionState(
        session_id="ses_1",
        agent_name="assistant",
        messages=[
            Message.user("delete /tmp/x, please 🙏"),
            EVERY_PART_MESSAGE,
            Message.tool_results([ToolResultPart(tool_use_id="tu_1", name="read", content="ok")]),
        ],
        turn_index=4,
        usage=Usage(input_tokens=100, output_tokens=20, requests=3),
        cost_usd=0.125,
        auto_spent_usd=0.5,
        turn=Turn(
            index=4,
            status="paused",
            steps=2,
            calls=calls,
            position=2,
            pending=pending,
            usage=Usage(input_tokens=40, requests=1),
            cost_usd=0.01,
        ),
        decided={"earlier-attempt": "approved"},
        writes={
            "k1": WriteRecord(key="k1", tool="write", status="done", attempt_id="earlier-attempt"),
            "k2": WriteRecord(key="k2", tool="write", status="unknown"),
        },
    )


def test_session_state_round_trip() -> None:
    state = _state()
    data = encode(state)
    text = json.dumps(data)
    back = decode(SessionState, json.loads(text))
    assert back == state
    assert back.pending is not None and state.pending is not None
    assert back.pending.approval_id == back.pending.attempt_id
    assert back.pending.findings == state.pending.findings
    assert len(back.pending.findings) == 1
    assert back.turn is not None
    assert [c.provider_id for c in back.turn.calls] == ["toolu_same", "toolu_same", "", ""]
    assert [c.input for c in back.turn.calls] == [
        {"path": "a.txt"},
        None,
        {"path": "/tmp/x"},
        {"path": "b"},
    ]
    assert back.messages[1] == EVERY_PART_MESSAGE


def test_session_state_encode_shape() -> None:
    data = encode(_state())
    assert isinstance(data, dict)
    assert data["session_id"] == "ses_1"
    turn = data["turn"]
    assert isinstance(turn, dict) and turn["status"] == "paused"
    pending = turn["pending"]
    assert isinstance(pending, dict)
    assert pending["type"] == "pending_action"
    assert pending["approval_id"] == "f00dfeed-0000-4000-8000-000000000001"


def test_session_state_without_pause_round_trips() -> None:
    state = SessionState(session_id="s", agent_name="a")
    assert decode(SessionState, encode(state)) == state


def test_decode_rejects_data_that_does_not_fit() -> None:
    with pytest.raises(ValidationError):
        decode(SessionState, {"agent_name": "a"})
    with pytest.raises(ValidationError):
        decode(Usage, {"input_tokens": "many"})


call_records: st.SearchStrategy[Call] = st.builds(
    Call,
    id=ids,
    index=st.integers(min_value=0, max_value=50),
    provider_id=st.just("") | ids,
    started=st.booleans(),
    name=texts,
    input=st.none() | json_objects,
    result=st.none() | PART_STRATEGIES[ToolResultPart],
    parallel=st.booleans(),
)


@st.composite
def session_states(draw: st.DrawFn) -> SessionState:
    pending = draw(EVENT_STRATEGIES[PendingAction])
    assert isinstance(pending, PendingAction)
    calls = draw(st.lists(call_records, min_size=1, max_size=4))
    status: TurnStatus = draw(st.sampled_from(("streaming", "executing", "paused")))
    turn = Turn(
        index=draw(st.integers(min_value=0, max_value=100)),
        status=status,
        steps=draw(st.integers(min_value=0, max_value=100)),
        calls=calls,
        position=draw(st.integers(min_value=0, max_value=len(calls) - 1)),
        pending=pending if status == "paused" else None,
        usage=draw(usages),
        cost_usd=draw(st.floats(min_value=0, max_value=1e6)),
    )
    return SessionState(
        session_id=draw(ids),
        agent_name=draw(texts),
        messages=draw(st.lists(messages, max_size=3)),
        turn_index=turn.index,
        usage=draw(usages),
        cost_usd=draw(st.floats(min_value=0, max_value=1e6)),
        turn=draw(st.none() | st.just(turn)),
        decided=draw(
            st.dictionaries(ids, st.sampled_from(("approved", "rejected", "client_result")))
        ),
        writes={},
    )


@depths(quick=25, nightly=100)
def test_session_state_round_trip_property(examples: int) -> None:
    @settings(parent=PROPERTY, max_examples=examples)
    @given(state=session_states())
    def check(state: SessionState) -> None:
        data: JsonValue = json.loads(json.dumps(encode(state)))
        assert decode(SessionState, data) == state

    check()


@depths(quick=40, nightly=200)
def test_the_fast_encoding_path_matches_the_adapter(examples: int) -> None:
    from pydantic import TypeAdapter

    from mainspring.events import Event as EventUnion

    @settings(parent=PROPERTY, max_examples=examples)
    @given(event=events)
    def check(event: Event) -> None:
        expected = TypeAdapter(EventUnion).dump_python(event, mode="json")
        assert event_to_dict(event) == expected
        assert list(event_to_dict(event)) == list(expected)  # same key order on the wire

    check()


@depths(quick=40, nightly=200)
def test_the_fast_message_encoding_matches_the_adapter(examples: int) -> None:
    from pydantic import TypeAdapter

    @settings(parent=PROPERTY, max_examples=examples)
    @given(message=messages)
    def check(message: Message) -> None:
        expected = TypeAdapter(Message).dump_python(message, mode="json")
        assert message_to_dict(message) == expected
        assert json.dumps(message_to_dict(message)) == json.dumps(expected)  # key order too

    check()


def test_the_fast_message_encoding_matches_the_adapter_for_every_part() -> None:
    from pydantic import TypeAdapter

    expected = TypeAdapter(Message).dump_python(EVERY_PART_MESSAGE, mode="json")
    assert json.dumps(message_to_dict(EVERY_PART_MESSAGE)) == json.dumps(expected)
    assert message_from_dict(message_to_dict(EVERY_PART_MESSAGE)) == EVERY_PART_MESSAGE


@pytest.mark.parametrize("cost", [float("inf"), float("nan")])
def test_usage_events_with_a_non_finite_cost_encode_as_the_adapter_does(cost: float) -> None:
    """(The fast path for events with a Usage, beside the property test of finite ones.)"""
    from pydantic import TypeAdapter

    from mainspring.events import Event as EventUnion
    from mainspring.events import TurnComplete, UsageEvent

    usage = Usage(input_tokens=3, output_tokens=1, requests=1)
    for event in (
        UsageEvent(model="m", usage=usage, cost_usd=cost),
        TurnComplete(stop_reason="end_turn", usage=usage, cost_usd=cost),
    ):
        expected = TypeAdapter(EventUnion).dump_python(event, mode="json")
        assert repr(event_to_dict(event)) == repr(expected)  # (nan != nan)


def test_a_version_1_state_is_upgraded_on_load() -> None:
    """mainspring 0.1 stored a pause as ``paused`` and keyed the ledger ``"<turn>:<id>"``."""
    pending = encode(_pending("f00dfeed-0000-4000-8000-000000000002"))
    v1 = {
        "session_id": "s",
        "agent_name": "a",
        "turn_index": 3,
        "paused": {
            "turn_index": 3,
            "steps": 1,
            "calls": [{"index": 0, "tool_use_id": "toolu_1", "name": "pay", "input": {"x": 1}}],
            "position": 0,
            "pending": pending,
            "turn_usage": {"input_tokens": 7},
            "turn_cost_usd": 0.5,
        },
        "version": 1,
    }
    ledger = [("2:toolu_0", {"key": "2:toolu_0", "tool": "pay", "status": "done"})]
    state = state_from_stored(v1, ledger)
    assert state.turn is not None and state.turn.status == "paused"
    assert state.turn.calls[0].id == "toolu_1" and state.turn.calls[0].provider_id == "toolu_1"
    assert state.pending is not None and state.pending.attempt_id.endswith("0002")
    assert state.turn.usage.input_tokens == 7 and state.turn.cost_usd == 0.5
    assert state.writes["toolu_0"].turn_index == 2 and state.writes["toolu_0"].key == "toolu_0"
    executing = {**v1, "paused": None, "in_flight": v1["paused"]["calls"]}  # type: ignore[index]  # v1 is a JSON object read back: mypy sees any JSON value
    upgraded = state_from_stored(executing, [])
    assert upgraded.turn is not None and upgraded.turn.status == "executing"
    assert state_from_stored(encode(state), []).turn == state.turn  # version 2 is kept as is


@st.composite
def headed_states(draw: st.DrawFn) -> SessionState:
    """States with every header field drawn: a turn paused or not (or none), a last terminal."""
    from mainspring.events import ErrorEvent, TurnComplete

    state = draw(session_states())
    turn = state.turn
    if turn is not None and turn.status == "paused" and draw(st.booleans()):
        turn.status, turn.pending = "executing", None  # the fast path's case, mostly
    state.active_stream = draw(st.none() | ids)
    state.last_stream = draw(st.none() | ids)
    terminal = draw(st.none() | EVENT_STRATEGIES[TurnComplete] | EVENT_STRATEGIES[ErrorEvent])
    assert terminal is None or isinstance(terminal, TurnComplete | ErrorEvent)
    state.last_terminal = terminal
    state.principal = draw(st.none() | texts)
    state.auto_spent_usd = draw(st.floats(allow_nan=False))
    return state


@depths(quick=25, nightly=200)
def test_the_fast_header_encoding_matches_the_adapter(examples: int) -> None:
    from mainspring.codec import encode_without
    from mainspring.stores._transcript import header

    @settings(parent=PROPERTY, max_examples=examples)
    @given(state=headed_states())
    def check(state: SessionState) -> None:
        expected = encode_without(state, {"messages", "decided", "writes"})
        assert header(state) == expected
        assert json.dumps(header(state)) == json.dumps(expected)  # key order too

    check()


@pytest.mark.parametrize("cost", [float("inf"), float("nan")])
def test_a_header_with_a_non_finite_cost_encodes_as_the_adapter_does(cost: float) -> None:
    from mainspring.codec import encode_without
    from mainspring.stores._transcript import header

    state = SessionState(session_id="s", agent_name="a", cost_usd=cost, turn=Turn(index=1))
    state.turn.calls.append(Call(id="c", index=0, name="t", input={"x": 1}))  # type: ignore[union-attr]  # the state was built with a turn
    expected = encode_without(state, {"messages", "decided", "writes"})
    assert repr(header(state)) == repr(expected)


def test_fields_dict_reads_the_named_fields_in_order_and_refuses_other_names() -> None:
    from mainspring.codec import fields_dict

    part = ToolCallPart(id="c1", name="f", arguments={"a": 1}, provider_id="p")
    names = ("name", "id", "arguments")
    fields = fields_dict(ToolCallPart, names)
    assert fields is fields_dict(ToolCallPart, names)  # made once
    data = fields(part)
    assert list(data.items()) == [("name", "f"), ("id", "c1"), ("arguments", {"a": 1})]
    assert data["arguments"] is part.arguments  # by reference, as the comprehension was
    with pytest.raises(ValueError, match="not attribute names"):
        fields_dict(ToolCallPart, ("id", "x): pass\n"))
