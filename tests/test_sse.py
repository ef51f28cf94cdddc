"""The SSE wire format: serialize_sse / parse_sse / aparse_sse and the frame decoder."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Iterable, Sequence
from contextlib import aclosing
from dataclasses import replace
from itertools import pairwise
from typing import get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mainspring.codec import event_to_dict, event_to_json
from mainspring.errors import WireFormatError
from mainspring.events import (
    Canvas,
    ErrorEvent,
    Event,
    Finding,
    PendingAction,
    TextDelta,
    ToolResult,
    TurnComplete,
)
from mainspring.sse import (
    SSEDecoder,
    SSEFrame,
    aparse_sse,
    frame_to_event,
    parse_sse,
    serialize_sse,
)
from mainspring.usage import Usage
from tests.strategies import EVENT_STRATEGIES, PROPERTY, depths, events

pytestmark = pytest.mark.anyio

EVENT_TYPES: tuple[type[Event], ...] = get_args(Event)

NON_ASCII_TEXT = (
    "emoji 😀👩\u200d👩\u200d👧 CJK 漢字かな RTL עברית مرحبا\u200f"
    "\r\nline\u2028sep\u2029nul\x00end\x85"
)

SAMPLE_EVENTS: list[Event] = [
    TextDelta(text=NON_ASCII_TEXT),
    ToolResult(tool_use_id="tu_1", name="read", content="a\nb\r\nc\rd", is_error=True),
    PendingAction(
        attempt_id="8f0c1b2e-0000-4000-8000-000000000001",
        tool_use_id="tu_2",
        turn_index=3,
        name="transfer",
        input={"amount": 12.5, "to": "Zoë", "tags": ["a", None, True]},
        description="Send €12.50",
        findings=(Finding(source="usd_tier", message="over 10 USD", tier="financial"),),
        amount_usd=12.5,
    ),
    Canvas(kind="table", data={"rows": [[1, "漢"], [2, "😀"]]}, title="t"),
    TurnComplete(stop_reason="end_turn", usage=Usage(input_tokens=3, output_tokens=4)),
]


def _split(text: str, cuts: Iterable[int]) -> list[str]:
    points = [0, *sorted(cuts), len(text)]
    return [text[a:b] for a, b in pairwise(points)]


def _split_bytes(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    points = [0, *sorted(cuts), len(data)]
    return [data[a:b] for a, b in pairwise(points)]


def _stream(evs: Sequence[Event]) -> str:
    return "".join(serialize_sse(e) for e in evs)


async def _achunks(chunks: Iterable[str | bytes]) -> AsyncGenerator[str | bytes, None]:
    for chunk in chunks:
        yield chunk


async def _aparse_all(chunks: Iterable[str | bytes], into: list[Event]) -> list[Event]:
    """Collect aparse_sse output into ``into`` (kept when it raises), closing both generators."""
    # aparse_sse finishes itself (exhausted or raised); the source may be left suspended.
    async with aclosing(_achunks(chunks)) as source:
        async for event in aparse_sse(source):
            into.append(event)  # noqa: PERF401  # keeps the events seen before an error
    return into


def _frame(data: str, *, event: str | None = None) -> str:
    head = f"event: {event}\n" if event is not None else ""
    return f"{head}data: {data}\n\n"


# --- round trips -----------------------------------------------------------------------


def test_every_event_type_has_a_strategy() -> None:
    assert set(EVENT_STRATEGIES) == set(EVENT_TYPES)
    assert len(EVENT_TYPES) == 22


@pytest.mark.parametrize("event_type", EVENT_TYPES, ids=lambda t: t.__name__)
@PROPERTY
@given(data=st.data())
def test_round_trip_each_event_type(event_type: type[Event], data: st.DataObject) -> None:
    event = data.draw(EVENT_STRATEGIES[event_type])
    assert type(event) is event_type
    frame = serialize_sse(event)
    assert list(parse_sse(frame)) == [event]
    assert list(parse_sse(frame.encode("utf-8"))) == [event]


@PROPERTY
@given(event=events)
def test_serialized_frame_is_one_event_line_and_one_data_line(event: Event) -> None:
    frame = serialize_sse(event)
    # Raw CR or LF inside the payload would split the data line; JSON escapes them.
    assert "\r" not in frame
    assert frame.endswith("\n\n")
    lines = frame[:-2].split("\n")
    assert lines == [f"event: {event.type}", f"data: {event_to_json(event)}"]


def test_serialize_sse_exact_frame_keeps_non_ascii_raw() -> None:
    frame = serialize_sse(TextDelta(text="é\n😀\u2028"))
    assert frame == 'event: text_delta\ndata: {"text":"é\\n😀\u2028","type":"text_delta"}\n\n'


def test_serialize_sse_with_id_sets_frame_id() -> None:
    event = ErrorEvent(code="boom", message="x\ny", retryable=True, attempt_id="a1")
    frame = serialize_sse(event, id="42")
    assert frame.startswith("id: 42\n")
    decoder = SSEDecoder()
    frames = decoder.feed(frame)
    assert frames == [SSEFrame(event="error", data=event_to_json(event), id="42", retry=None)]
    assert frame_to_event(frames[0]) == event
    assert list(parse_sse(frame)) == [event]


@pytest.mark.parametrize("event", SAMPLE_EVENTS, ids=lambda e: e.type)
def test_round_trip_hand_written_non_ascii_events(event: Event) -> None:
    assert list(parse_sse(serialize_sse(event))) == [event]
    assert list(parse_sse(serialize_sse(event).encode())) == [event]


def test_stream_fed_one_byte_at_a_time_splits_every_multibyte_char() -> None:
    data = _stream(SAMPLE_EVENTS).encode("utf-8")
    assert len(data) > len(_stream(SAMPLE_EVENTS))  # there are multi-byte characters to split
    chunks = [data[i : i + 1] for i in range(len(data))]
    assert list(parse_sse(chunks)) == SAMPLE_EVENTS


def test_stream_fed_one_char_at_a_time() -> None:
    text = _stream(SAMPLE_EVENTS)
    assert list(parse_sse(list(text))) == SAMPLE_EVENTS


@PROPERTY
@given(evs=st.lists(events, max_size=6), data=st.data())
def test_stream_in_random_str_chunks(evs: list[Event], data: st.DataObject) -> None:
    text = _stream(evs)
    cuts = data.draw(st.lists(st.integers(min_value=0, max_value=len(text)), max_size=12))
    assert list(parse_sse(_split(text, cuts))) == evs


@PROPERTY
@given(evs=st.lists(events, max_size=6), data=st.data())
def test_stream_in_random_byte_chunks(evs: list[Event], data: st.DataObject) -> None:
    raw = _stream(evs).encode("utf-8")
    cuts = data.draw(st.lists(st.integers(min_value=0, max_value=len(raw)), max_size=12))
    assert list(parse_sse(_split_bytes(raw, cuts))) == evs


@PROPERTY
@given(evs=st.lists(events, min_size=1, max_size=4), data=st.data())
def test_stream_in_mixed_str_and_byte_chunks(evs: list[Event], data: st.DataObject) -> None:
    text = _stream(evs)
    cuts = data.draw(st.lists(st.integers(min_value=0, max_value=len(text)), max_size=8))
    pieces = _split(text, cuts)
    as_bytes = data.draw(st.lists(st.booleans(), min_size=len(pieces), max_size=len(pieces)))
    chunks: list[str | bytes] = [
        p.encode("utf-8") if b else p for p, b in zip(pieces, as_bytes, strict=True)
    ]
    assert list(parse_sse(chunks)) == evs


@pytest.mark.parametrize("eol", ["\n", "\r", "\r\n"], ids=["LF", "CR", "CRLF"])
@PROPERTY
@given(evs=st.lists(events, max_size=4), data=st.data())
def test_stream_with_any_line_ending_in_random_byte_chunks(
    eol: str, evs: list[Event], data: st.DataObject
) -> None:
    # serialize_sse writes LF only and the JSON payload has no raw CR/LF, so this swap is safe.
    raw = _stream(evs).replace("\n", eol).encode("utf-8")
    cuts = data.draw(st.sets(st.integers(min_value=1, max_value=max(1, len(raw) - 1))))
    assert list(parse_sse(_split_bytes(raw, cuts))) == evs


async def test_aparse_sse_async_byte_chunks() -> None:
    raw = _stream(SAMPLE_EVENTS).encode("utf-8")
    chunks = [raw[i : i + 7] for i in range(0, len(raw), 7)]
    assert await _aparse_all(chunks, []) == SAMPLE_EVENTS


async def test_aparse_sse_async_str_chunks_with_crlf() -> None:
    text = _stream(SAMPLE_EVENTS).replace("\n", "\r\n")
    # Cut between every CR and its LF.
    chunks = text.split("\n")
    chunks = [c + "\n" if i else c for i, c in enumerate(chunks)]
    assert any(c.endswith("\r") for c in chunks)
    assert await _aparse_all(chunks, []) == SAMPLE_EVENTS


async def test_aparse_sse_truncated_stream_raises_after_complete_events() -> None:
    text = _stream(SAMPLE_EVENTS[:2]) + "event: text_delta\ndata: {"
    got: list[Event] = []
    with pytest.raises(WireFormatError):
        await _aparse_all([text], got)
    assert got == SAMPLE_EVENTS[:2]


async def test_aparse_sse_bad_frame_raises_wire_format_error() -> None:
    got: list[Event] = []
    with pytest.raises(WireFormatError):
        await _aparse_all([serialize_sse(TextDelta(text="ok")), b"data: not json\n\n"], got)
    assert got == [TextDelta(text="ok")]


# --- decoder line rules ----------------------------------------------------------------


@pytest.mark.parametrize("eol", ["\n", "\r", "\r\n"], ids=["LF", "CR", "CRLF"])
def test_line_endings(eol: str) -> None:
    text = (
        f"event: text_delta{eol}data: {{{eol}data: {eol}"
        f'data: "type": "text_delta",{eol}data: "text": "hi"}}{eol}{eol}'
    )
    frames = SSEDecoder().feed(text)
    assert len(frames) == 1
    assert frames[0].event == "text_delta"
    assert frames[0].data == '{\n\n"type": "text_delta",\n"text": "hi"}'
    assert list(parse_sse(text)) == [TextDelta(text="hi")]


def test_crlf_split_across_chunks_is_one_line_ending() -> None:
    decoder = SSEDecoder()
    assert decoder.feed("data: a\r") == []
    # The LF completes the CRLF; it must not count as a second (blank) line.
    assert decoder.feed("\n") == []
    assert decoder.feed("data: b\r") == []
    # "\n" ends the CRLF after "b"; the lone CR after it is the blank line.
    assert [f.data for f in decoder.feed("\n\r")] == ["a\nb"]
    # This LF belongs to the CR before it: no extra line, no error on close.
    assert decoder.feed("\n") == []
    decoder.close()


def test_crlf_split_across_byte_chunks() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: x\r") == []
    assert decoder.feed(b"\ndata: y\r") == []
    assert decoder.feed(b"\n") == []
    assert [f.data for f in decoder.feed(b"\r\n")] == ["x\ny"]


def test_cr_at_chunk_end_followed_by_cr_is_two_line_endings() -> None:
    decoder = SSEDecoder()
    assert decoder.feed("data: a\r") == []
    assert [f.data for f in decoder.feed("\r")] == ["a"]


def test_empty_chunk_between_cr_and_lf_does_not_split_the_crlf() -> None:
    # An HTTP client may hand over an empty chunk at any point.
    decoder = SSEDecoder()
    frames = decoder.feed("data: a\r")
    frames += decoder.feed("")
    frames += decoder.feed("\ndata: b\r\n\r\n")
    assert [f.data for f in frames] == ["a\nb"]


def test_empty_byte_chunk_between_cr_and_lf_does_not_split_the_crlf() -> None:
    decoder = SSEDecoder()
    frames = decoder.feed(b"event: text_delta\r")
    frames += decoder.feed(b"")
    frames += decoder.feed(b"\ndata: x\r\n\r\n")
    assert frames == [SSEFrame(event="text_delta", data="x")]


def test_comments_are_ignored() -> None:
    event = TextDelta(text="hi")
    payload = event_to_json(event)
    text = f": keep-alive\n\n:\nevent: text_delta\n: in the middle\ndata: {payload}\n:tail\n\n"
    frames = SSEDecoder().feed(text)
    assert frames == [SSEFrame(event="text_delta", data=payload)]
    assert list(parse_sse(text)) == [event]


def test_multi_line_data_is_joined_with_lf() -> None:
    frames = SSEDecoder().feed("data: one\ndata:two\ndata:  three\ndata\ndata:\n\n")
    # One leading space is dropped, a second one is kept; a bare field name is an empty value.
    assert [f.data for f in frames] == ["one\ntwo\n three\n\n"]


def test_blank_lines_without_data_dispatch_nothing_and_reset_event_name() -> None:
    payload = event_to_json(TextDelta(text="x"))
    frames = SSEDecoder().feed(f"\n\nevent: bogus\n\ndata: {payload}\n\n")
    assert frames == [SSEFrame(event="message", data=payload)]


def test_event_name_defaults_to_message_and_is_accepted() -> None:
    event = ToolResult(tool_use_id="t", name="n", content="c")
    assert list(parse_sse(_frame(event_to_json(event)))) == [event]


def test_unknown_fields_are_ignored() -> None:
    payload = event_to_json(TextDelta(text="x"))
    frames = SSEDecoder().feed(f"foo: bar\nDATA: nope\ndata : nope\ndata: {payload}\n\n")
    assert [f.data for f in frames] == [payload]


def test_id_field_is_reported_and_persists_as_last_event_id() -> None:
    decoder = SSEDecoder()
    frames = decoder.feed("id: 7\ndata: a\n\ndata: b\n\nid: 8\ndata: c\n\nid\ndata: d\n\n")
    assert [(f.data, f.id) for f in frames] == [("a", "7"), ("b", "7"), ("c", "8"), ("d", "")]


def test_id_with_nul_is_ignored() -> None:
    frames = SSEDecoder().feed("id: 1\n\nid: 2\x003\ndata: a\n\n")
    assert [f.id for f in frames] == ["1"]


def test_retry_field() -> None:
    decoder = SSEDecoder()
    frames = decoder.feed("retry: 1500\ndata: a\n\nretry: soon\ndata: b\n\nretry:-5\ndata: c\n\n")
    assert [(f.data, f.retry) for f in frames] == [("a", 1500), ("b", None), ("c", None)]


@pytest.mark.parametrize(
    "value",
    ["²", "\u0661\u0662", "1.5", "1e3", " 10", ""],
    ids=["superscript-two", "arabic-indic-digits", "decimal", "exponent", "two-spaces", "empty"],
)
def test_retry_that_is_not_ascii_digits_is_ignored(value: str) -> None:
    # The SSE rules: retry is used only when it consists of ASCII digits.
    frames = SSEDecoder().feed(f"retry: {value}\ndata: a\n\n")
    assert [(f.data, f.retry) for f in frames] == [("a", None)]


def test_feed_returns_frames_as_they_complete() -> None:
    decoder = SSEDecoder()
    assert decoder.feed("event: a\ndata: 1") == []
    assert decoder.feed("\n") == []
    assert decoder.feed("\ndata: 2\n\ndata: 3") == [
        SSEFrame(event="a", data="1"),
        SSEFrame(event="message", data="2"),
    ]
    with pytest.raises(WireFormatError):
        decoder.close()


# --- errors ----------------------------------------------------------------------------


def test_event_name_disagreeing_with_payload_type_raises() -> None:
    text = _frame(event_to_json(TextDelta(text="x")), event="thinking_delta")
    with pytest.raises(WireFormatError, match="thinking_delta"):
        list(parse_sse(text))


@pytest.mark.parametrize(
    "data",
    ["not json", "{", "{'type': 'text_delta'}", "", "[1, 2"],
    ids=["word", "open-brace", "single-quotes", "empty", "open-list"],
)
def test_non_json_data_raises(data: str) -> None:
    with pytest.raises(WireFormatError):
        list(parse_sse(_frame(data)))


@pytest.mark.parametrize(
    "data",
    [
        '{"type": "text_deltas", "text": "x"}',
        '{"type": "message_start"}',
        '{"text": "x"}',
        '{"type": "text_delta"}',
        '{"type": "text_delta", "text": 5}',
        '"text_delta"',
        "[]",
        "null",
        "42",
    ],
)
def test_unknown_or_invalid_event_raises(data: str) -> None:
    with pytest.raises(WireFormatError):
        list(parse_sse(_frame(data)))


def test_pending_action_with_a_signed_approval_id_round_trips() -> None:
    payload = event_to_dict(SAMPLE_EVENTS[2])
    payload["approval_id"] = "signed-by-a-server"
    (event,) = parse_sse(_frame(json.dumps(payload)))
    sample = SAMPLE_EVENTS[2]
    assert isinstance(sample, PendingAction)
    assert event == replace(sample, approval_id="signed-by-a-server")


def test_deeply_nested_json_raises_wire_format_error() -> None:
    depth = 100_000
    with pytest.raises(WireFormatError):
        list(parse_sse(_frame("[" * depth + "]" * depth)))


def test_events_before_a_bad_frame_are_yielded() -> None:
    good = SAMPLE_EVENTS[:3]
    stream = parse_sse(_stream(good) + _frame("garbage") + _stream(good))
    got = [next(stream) for _ in good]
    assert got == good
    with pytest.raises(WireFormatError):
        next(stream)


def test_every_truncation_of_a_frame_raises() -> None:
    frame = serialize_sse(SAMPLE_EVENTS[2])
    for cut in range(1, len(frame)):
        with pytest.raises(WireFormatError):
            list(parse_sse(frame[:cut]))


def test_stream_cut_after_the_id_line_of_a_frame_raises() -> None:
    # serialize_sse(event, id=...) writes "id: ..." first; a cut right after it loses the event.
    frame = serialize_sse(SAMPLE_EVENTS[0], id="9")
    cut = frame.index("\n") + 1
    assert frame[:cut] == "id: 9\n"
    with pytest.raises(WireFormatError):
        list(parse_sse(frame[:cut]))


def test_truncated_stream_raises_after_complete_events() -> None:
    text = _stream(SAMPLE_EVENTS) + "data: {}"
    stream = parse_sse(text)
    got = [next(stream) for _ in SAMPLE_EVENTS]
    assert got == SAMPLE_EVENTS
    with pytest.raises(WireFormatError, match="middle of a frame"):
        next(stream)


def test_stream_ending_after_event_line_only_raises() -> None:
    with pytest.raises(WireFormatError):
        list(parse_sse("event: text_delta\n"))


def test_empty_and_comment_only_streams_yield_nothing() -> None:
    assert list(parse_sse("")) == []
    assert list(parse_sse(b"")) == []
    assert list(parse_sse([])) == []
    assert list(parse_sse(": ping\n\n: ping\r\n")) == []


@pytest.mark.parametrize(
    "chunks",
    [
        [b"data: \xff\n\n"],
        [b"data: \xc3\x28\n\n"],
        [b"data: \xe2\x82", b"\x28\n\n"],
        [b"data: \xed\xa0\x80\n\n"],
        [b"data: \xc0\xaf\n\n"],
    ],
    ids=["ff", "bad-continuation", "bad-continuation-split", "surrogate", "overlong"],
)
def test_invalid_utf8_raises(chunks: list[bytes]) -> None:
    with pytest.raises(WireFormatError):
        list(parse_sse(chunks))


def test_incomplete_utf8_at_end_of_stream_raises() -> None:
    # A multi-byte character cut off by the end of the stream is invalid UTF-8 too.
    raw = serialize_sse(TextDelta(text="x")).encode() + "€".encode()[:2]
    with pytest.raises(WireFormatError):
        list(parse_sse([raw]))


# --- fuzz ------------------------------------------------------------------------------

SSE_PIECES = (
    "data:",
    "data: ",
    "event:",
    "event: ",
    "id:",
    "id: ",
    "retry:",
    "retry: ",
    ":",
    " ",
    "\n",
    "\r",
    "\r\n",
    "\x00",
    "0",
    "7",
    "²",
    "\u0661",
    "{",
    "}",
    "[",
    "]",
    '"',
    '"type"',
    '"text"',
    '"text_delta"',
    '"pending_action"',
    ",",
    "null",
    "😀",
    "\u2028",
    "text_delta",
    "error",
)

_frames_text: st.SearchStrategy[str] = st.builds("".join, st.lists(st.sampled_from(SSE_PIECES)))


def _consume(stream: Iterable[Event]) -> list[Event]:
    got: list[Event] = []
    try:
        got.extend(stream)
    except WireFormatError:
        pass
    return got


@PROPERTY
@given(chunks=st.lists(st.one_of(st.text(), st.binary()), max_size=6))
def test_fuzz_arbitrary_chunks_yield_events_or_wire_format_error(
    chunks: list[str | bytes],
) -> None:
    for event in _consume(parse_sse(chunks)):
        assert isinstance(event, EVENT_TYPES)


@PROPERTY
@given(
    chunks=st.lists(
        st.one_of(_frames_text, _frames_text.map(lambda s: s.encode()), st.binary(max_size=4)),
        max_size=6,
    ),
    evs=st.lists(events, max_size=2),
)
def test_fuzz_sse_shaped_chunks_yield_events_or_wire_format_error(
    chunks: list[str | bytes], evs: list[Event]
) -> None:
    stream: list[str | bytes] = [_stream(evs), *chunks, _stream(evs)]
    for event in _consume(parse_sse(stream)):
        assert isinstance(event, EVENT_TYPES)


_FIELD_VALUE_PIECES = ("0", "1", "9", "²", "\u0661", "x", " ", ":", "\x00", "{", "}", '"', "😀")

_sse_lines: st.SearchStrategy[str] = st.builds(
    "{}{}{}{}".format,
    st.sampled_from(("data", "event", "id", "retry", "", "x")),
    st.sampled_from((":", ": ", "")),
    st.lists(st.sampled_from(_FIELD_VALUE_PIECES), max_size=4).map("".join),
    st.sampled_from(("\n", "\r", "\r\n", "\n\n")),
)


@settings(parent=PROPERTY, max_examples=200, derandomize=True)
@given(lines=st.lists(_sse_lines, max_size=8), data=st.data())
def test_fuzz_field_lines_yield_events_or_wire_format_error(
    lines: list[str], data: st.DataObject
) -> None:
    raw = "".join(lines).encode()
    cuts = data.draw(st.lists(st.integers(min_value=0, max_value=len(raw)), max_size=4))
    for event in _consume(parse_sse(_split_bytes(raw, cuts))):
        assert isinstance(event, EVENT_TYPES)


_FRAME = serialize_sse(TextDelta(text="x"))
_GROWTH_SHAPES = {
    "many-frames": lambda n: _FRAME * (n // len(_FRAME)),
    "many-data-lines": lambda n: (
        'event: text_delta\ndata: {"type":"text_delta",\n' + "data: \n" * (n // 7)
        + 'data: "text":"x"}\n\n'
    ),
    "one-frame-in-1kb-chunks": lambda n: [
        frame[i : i + 1024]
        for frame in ['event: text_delta\ndata: {"type":"text_delta","text":"' + "x" * n + '"}\n\n']
        for i in range(0, len(frame), 1024)
    ],
    "comments": lambda n: ":c\n" * (n // 3) + _FRAME,
    "bytes-in-7-byte-chunks": lambda n: [
        data[i : i + 7] for data in [(_FRAME * (n // len(_FRAME))).encode()]
        for i in range(0, len(data), 7)
    ],
    "unterminated-lines": lambda n: "x" * n,
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(_GROWTH_SHAPES))
def test_parsing_grows_linearly_with_the_stream(shape: str) -> None:
    from tests.growth import assert_linear

    assert_linear(lambda stream: _consume(parse_sse(stream)), _GROWTH_SHAPES[shape])


@pytest.mark.slow
@depths(quick=1, nightly=20)  # the named shapes above run always; random ones are depth
def test_any_repeated_stream_shape_parses_in_linear_time(examples: int) -> None:
    from tests.growth import assert_linear

    @settings(max_examples=examples, deadline=None, derandomize=True)
    @given(unit=st.lists(st.sampled_from(SSE_PIECES), min_size=1, max_size=8).map("".join))
    def check(unit: str) -> None:
        assert_linear(
            lambda stream: _consume(parse_sse(stream)),
            lambda n: unit * max(1, n // len(unit.encode())),
        )

    check()


def test_a_leading_bom_is_stripped_even_when_split_across_byte_chunks() -> None:
    frame = serialize_sse(TextDelta(text="x")).encode()
    assert list(parse_sse("\ufeff" + frame.decode())) == [TextDelta(text="x")]
    assert list(parse_sse([b"\xef\xbb", b"\xbf" + frame])) == [TextDelta(text="x")]
    # Only the first one is stripped: later, "\ufeffdata" is an unknown field, ignored.
    assert list(
        parse_sse([frame, "\ufeff".encode() + frame.replace(b"event: text_delta\n", b"")])
    ) == [TextDelta(text="x")]


@pytest.mark.parametrize("chunk", [1024, 4093, None], ids=["1KB", "odd", "whole"])
def test_a_multi_megabyte_frame_decodes_whole_however_it_is_chunked(chunk: int | None) -> None:
    data = "x" * (3 * 1024 * 1024)
    text = "event: big\r\nid: 7\r\ndata: " + data + "\r\ndata: tail\r\n\r\n" + "data: next\n\n"
    pieces = [text] if chunk is None else [text[i : i + chunk] for i in range(0, len(text), chunk)]
    decoder = SSEDecoder()
    frames = [f for piece in pieces for f in decoder.feed(piece.encode())]
    decoder.close()
    assert [(f.event, f.id, len(f.data)) for f in frames] == [
        ("big", "7", len(data) + len("\ntail")),
        ("message", "7", 4),
    ]
    assert frames[0].data.endswith("x\ntail")


def test_many_small_frames_in_one_chunk_all_decode() -> None:
    text = "".join(f"data: {i}\n\n" for i in range(200_000))
    frames = SSEDecoder().feed(text)
    assert len(frames) == 200_000 and frames[-1].data == "199999"
