"""Segments: a request's rows, read as Segment objects built once, equal to their tuple."""

from __future__ import annotations

import copy
import json
import pickle
from dataclasses import replace

import pytest

from mainspring.context import Accounting, BaseSystemPrompt, ContextBlock, ContextCompiler
from mainspring.context.snapshot import (
    CostEstimate,
    Segment,
    SegmentRow,
    Segments,
    TurnSnapshot,
    segment_tokens_by_source,
)
from mainspring.messages import Message
from mainspring.tokens import EstimateTokenizer
from mainspring.usage import Usage

ROWS: list[SegmentRow] = [
    ("system", "engine", "base-system", "system", 40, 10, None),
    ("user", "transcript", "transcript", "history", 0, 0, None),  # empty: dropped
    ("user", "transcript", "transcript", "history", 12, 3, "hi there"),
    ("tool_result", "engine", "tool-result-budget", "history", 30, 7, None),
]


def as_tuple() -> tuple[Segment, ...]:
    return (
        Segment(
            source="system",
            module="engine",
            processor="base-system",
            slot="system",
            chars=40,
            tokens=10,
            share=0.5,
        ),
        Segment(
            source="user",
            module="transcript",
            processor="transcript",
            slot="history",
            chars=12,
            tokens=3,
            share=0.15,
            content="hi there",
        ),
        Segment(
            source="tool_result",
            module="engine",
            processor="tool-result-budget",
            slot="history",
            chars=30,
            tokens=7,
            share=0.35,
        ),
    )


def test_segments_read_like_the_tuple_of_their_segments() -> None:
    segments = Segments(ROWS)
    assert (segments.tokens, segments.chars, len(segments)) == (20, 82, 3)
    assert segments == as_tuple()
    assert as_tuple() == segments
    assert hash(segments) == hash(as_tuple())
    assert list(segments) == list(as_tuple())
    assert segments[-1] == as_tuple()[-1]
    assert segments[1:] == as_tuple()[1:]
    assert segments != list(as_tuple())  # a tuple stand-in, as the tuple was
    assert segments[0] is segments[0]  # built once
    assert segments.by_source() == {"system": 10, "user": 3, "tool_result": 7}


def test_plus_appends_rows_and_recomputes_the_shares() -> None:
    head = Segments(ROWS[:1])
    joined = head.plus(ROWS[1:])
    assert joined == Segments(ROWS)
    assert head == (replace(as_tuple()[0], share=1.0),)
    assert [s.share for s in joined] == [0.5, 0.15, 0.35]


def test_tokens_by_source_reads_rows_or_segments_alike() -> None:
    from_rows: dict[str, int] = {"user": 1}
    from_tuple: dict[str, int] = {"user": 1}
    segment_tokens_by_source(Segments(ROWS), from_rows)
    segment_tokens_by_source(as_tuple(), from_tuple)
    assert from_rows == from_tuple == {"user": 4, "system": 10, "tool_result": 7}


@pytest.mark.parametrize(
    "row",
    [
        ("user", "transcript", "transcript", "history", 3, 1),
        ("user", "transcript", "transcript", "history", 3, 1, None, "extra"),
    ],
)
def test_a_malformed_row_is_refused(row: tuple[object, ...]) -> None:
    with pytest.raises(ValueError, match="a segment row is"):
        Segments([ROWS[0], row])  # type: ignore[list-item]  # the bad input under test
    head = Segments(ROWS[:1])
    with pytest.raises(ValueError, match="a segment row is"):
        head.plus([row])  # type: ignore[list-item]  # the bad input under test
    assert head == Segments(ROWS[:1])  # untouched


def test_segments_survive_pickle_and_deepcopy() -> None:
    segments = Segments(ROWS)
    assert pickle.loads(pickle.dumps(segments)) == segments
    assert copy.deepcopy(segments) == segments


@pytest.mark.anyio
async def test_a_compiled_call_round_trips_through_its_json_line() -> None:
    engine: ContextCompiler[Message] = ContextCompiler(
        messages=[Message.user("Where is the tide table?"), Message.assistant("In the harbour.")],
        processors=[BaseSystemPrompt("You are terse."), ContextBlock("Port: Brest")],
        accounting=Accounting(tokenizer=EstimateTokenizer("test")),
    )
    engine.append([Message.user("And tomorrow?")])
    compiled = await engine.compile(turn_index=1)
    assert isinstance(compiled.segments, Segments)
    call = engine.record_call(
        compiled,
        model="m",
        usage=Usage(input_tokens=9, output_tokens=2, requests=1),
        cost=CostEstimate(usd=0.25, priced=True, price_source="configured"),
    )
    snapshot = engine.end_turn()
    assert call is not None and snapshot is not None
    line = json.dumps(snapshot.to_dict())
    again = TurnSnapshot.from_dict(json.loads(line))
    assert again == snapshot
    assert again.calls[0] == call
    plain = replace(call, segments=tuple(call.segments))  # what a compile used to hand over
    assert plain == call
    assert plain.to_dict() == call.to_dict()
    assert snapshot.by_source() == {
        "system": sum(s.tokens for s in call.segments if s.source == "system"),
        "context": sum(s.tokens for s in call.segments if s.source == "context"),
        "user": sum(s.tokens for s in call.segments if s.source == "user"),
        "assistant": sum(s.tokens for s in call.segments if s.source == "assistant"),
    }
    assert engine.session_summary().by_source == snapshot.by_source()
