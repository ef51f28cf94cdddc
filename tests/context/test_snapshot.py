"""Segments: a request's rows, read as Segment objects built once, equal to their tuple."""

from __future__ import annotations

import copy
import gc
import json
import pickle
import weakref
from dataclasses import replace

import anyio
import pytest

from mainspring.context import Accounting, BaseSystemPrompt, ContextBlock, ContextCompiler
from mainspring.context.snapshot import (
    CallSnapshot,
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

COST = CostEstimate(usd=0.25, priced=True, price_source="configured")
ROWS: list[SegmentRow] = [
    ("system", "core", "base-system", "system", 40, 10, None),
    ("user", "transcript", "transcript", "history", 0, 0, None),  # empty: dropped
    ("user", "transcript", "transcript", "history", 12, 3, "hi there"),
    ("tool_result", "core", "tool-result-budget", "history", 30, 7, None),
]


def as_tuple() -> tuple[Segment, ...]:
    return (
        Segment(
            source="system",
            module="core",
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
            module="core",
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
    compiler: ContextCompiler[Message] = ContextCompiler(
        messages=[Message.user("Where is the tide table?"), Message.assistant("In the harbour.")],
        processors=[BaseSystemPrompt("You are terse."), ContextBlock("Port: Brest")],
        accounting=Accounting(tokenizer=EstimateTokenizer("test")),
    )
    compiler.append([Message.user("And tomorrow?")])
    compiled = await compiler.compile(turn_index=1)
    assert isinstance(compiled.segments, Segments)
    call = compiler.record_call(
        compiled,
        model="m",
        usage=Usage(input_tokens=9, output_tokens=2, requests=1),
        cost=CostEstimate(usd=0.25, priced=True, price_source="configured"),
    )
    snapshot = compiler.end_turn()
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
    assert compiler.session_summary().by_source == snapshot.by_source()


class OnDemand:
    """A pending source that gives fixed rows, and counts how often it was asked."""

    def __init__(self) -> None:
        self.asked = 0

    def settle(self, segments: Segments) -> None:
        self.asked += 1
        segments.fill(ROWS, prefix_tokens=4, stable_tokens=10)


def test_deferred_segments_are_worked_out_once_on_first_read() -> None:
    source = OnDemand()
    segments = Segments.deferred(source)
    assert not segments.settled and source.asked == 0
    assert segments.tokens == 20
    assert (segments.settled, source.asked) == (True, 1)
    assert segments == Segments(ROWS) == as_tuple()
    assert (segments.prefix_tokens, segments.stable_tokens, segments.chars) == (4, 10, 82)
    assert source.asked == 1


def test_filling_settled_segments_again_is_refused_and_changes_nothing() -> None:
    segments = Segments(ROWS)
    with pytest.raises(ValueError, match="already have their figures"):
        segments.fill(ROWS[:1])
    assert segments == Segments(ROWS)
    deferred = Segments.deferred(OnDemand())
    assert len(deferred) == 3
    with pytest.raises(ValueError, match="already have their figures"):
        deferred.fill(ROWS[:1])
    assert deferred == Segments(ROWS)


def test_deferred_segments_and_calls_pickle_settled() -> None:
    segments = Segments.deferred(OnDemand())
    again = pickle.loads(pickle.dumps(segments))
    assert again == Segments(ROWS) and again.settled
    assert (again.prefix_tokens, again.stable_tokens) == (4, 10)
    call = CallSnapshot.deferred(
        step=1,
        model="m",
        tokenizer="t",
        exact=False,
        segments=Segments.deferred(OnDemand()),
        usage=Usage(input_tokens=1),
        cost=CostEstimate(usd=0.0, priced=False, price_source="none"),
    )
    copied = pickle.loads(pickle.dumps(call))
    assert copied == call == copy.deepcopy(call)
    assert (copied.tokens, copied.chars, copied.prefix_tokens, copied.stable_tokens) == (
        20,
        82,
        4,
        10,
    )


def test_an_unknown_attribute_of_a_deferred_object_is_an_attribute_error() -> None:
    segments = Segments.deferred(OnDemand())
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = segments.nope  # type: ignore[attr-defined]  # the bad read under test
    assert not segments.settled


def test_a_view_length_out_of_range_is_refused() -> None:
    compiler: ContextCompiler[Message] = ContextCompiler(messages=[Message.user("hi")])
    with pytest.raises(IndexError, match="out of range"):
        compiler.view.totals_upto(2)
    with pytest.raises(IndexError, match="out of range"):
        compiler.view.totals_upto(-1)
    assert compiler.view.totals_upto(1) == {("user", "transcript", "transcript"): (2, 1)}


def accounted() -> ContextCompiler[Message]:
    return ContextCompiler(
        messages=[Message.user("Where is the tide table?"), Message.assistant("In the harbour.")],
        processors=[BaseSystemPrompt("You are terse."), ContextBlock("Port: Brest")],
        accounting=Accounting(tokenizer=EstimateTokenizer("test")),
    )


@pytest.mark.anyio
async def test_a_snapshot_read_in_another_thread_reads_as_in_the_loop() -> None:
    compilers = accounted(), accounted()
    snapshots = []
    for compiler in compilers:
        compiler.append([Message.user("And tomorrow?")])
        compiled = await compiler.compile(turn_index=1)
        compiler.record_call(compiled, model="m", usage=Usage(input_tokens=9), cost=COST)
        snapshot = compiler.end_turn()
        assert snapshot is not None
        compiler.append([Message.assistant("Same place."), Message.user("Thanks")])
        snapshots.append(snapshot)
    here = snapshots[0].to_dict()
    there = await anyio.to_thread.run_sync(snapshots[1].to_dict)
    assert there == {**here, "started_at": there["started_at"]}


@pytest.mark.anyio
async def test_requests_nobody_keeps_are_not_kept_for_their_figures() -> None:
    compiler = accounted()
    refs = []
    for step in range(1, 201):  # steps of one turn: only the latest is the turn's pending call
        compiler.append([Message.user(f"question {step}")])
        compiled = await compiler.compile(turn_index=0, step=step)
        refs.append(weakref.ref(compiled.segments))
        del compiled
    gc.collect()
    assert [ref() is not None for ref in refs] == [False] * 199 + [True]
    snapshot = compiler.end_turn()  # the pending compile is flushed with empty usage
    assert snapshot is not None and snapshot.calls[0].step == 200
    assert snapshot.calls[0].tokens == sum(s.tokens for s in snapshot.calls[0].segments) > 0
