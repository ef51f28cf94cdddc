"""Tests for ScriptedModel, the offline model that plays a script."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Literal, TypeVar

import pytest
from pydantic import JsonValue

from mainspring.errors import ConfigError, ModelError, ModelHTTPError, ModelOutputError
from mainspring.events import TextDelta, ThinkingDelta, ThinkingDone, ToolCallDelta
from mainspring.messages import Message
from mainspring.models.base import (
    Model,
    ModelEvent,
    ModelRequest,
    ModelStop,
    ModelUsage,
    SystemBlock,
    ToolCallEnd,
    ToolSpec,
)
from mainspring.models.scripted import ScriptedCall, ScriptedModel, ScriptedResponse
from mainspring.usage import Usage

pytestmark = pytest.mark.anyio

T = TypeVar("T")
E = TypeVar("E", bound=BaseException)
StopReason = Literal["end_turn", "tool_use", "max_tokens", "refusal"]

SPEC = ToolSpec(name="get_balance", description="Balance.", input_schema={"type": "object"})


def request(*texts: str, tools: tuple[ToolSpec, ...] = ()) -> ModelRequest:
    return ModelRequest(
        system=(SystemBlock(text="sys"),),
        messages=[Message.user(t) for t in texts],
        tools=tools,
    )


async def collect(model: ScriptedModel, req: ModelRequest | None = None) -> list[ModelEvent]:
    return [e async for e in model.stream(req or request("hi"))]


def of_type(events: Sequence[object], kind: type[T]) -> list[T]:
    return [e for e in events if isinstance(e, kind)]


async def until_error(model: ScriptedModel, error_type: type[E]) -> tuple[list[ModelEvent], E]:
    """The events streamed before the stream raised ``error_type``."""
    got: list[ModelEvent] = []
    stream = model.stream(request("hi"))
    with pytest.raises(error_type) as info:
        while True:
            got.append(await anext(stream))
    return got, info.value


def assert_tail(events: list[ModelEvent], stop_reason: StopReason, model: str = "scripted") -> None:
    assert isinstance(events[-2], ModelUsage)
    assert events[-1] == ModelStop(stop_reason=stop_reason, model=model)
    assert sum(isinstance(e, ModelStop) for e in events) == 1
    assert sum(isinstance(e, ModelUsage) for e in events) == 1


async def test_is_a_model() -> None:
    model = ScriptedModel(["x"], name="demo")
    assert isinstance(model, Model)
    assert model.name == "demo"


async def test_text_streams_in_chunks() -> None:
    model = ScriptedModel(["hello world!"], chunk_size=4, name="s1")
    events = await collect(model)
    assert events[:3] == [
        TextDelta(text="hell"),
        TextDelta(text="o wo"),
        TextDelta(text="rld!"),
    ]
    assert len(events) == 5
    assert_tail(events, "end_turn", model="s1")


async def test_last_chunk_may_be_shorter() -> None:
    model = ScriptedModel([ScriptedResponse(text="abcdefg")], chunk_size=3)
    events = await collect(model)
    assert [e.text for e in of_type(events, TextDelta)] == ["abc", "def", "g"]


async def test_default_chunk_size_is_eight() -> None:
    text = "x" * 20
    events = await collect(ScriptedModel([text]))
    assert [len(e.text) for e in of_type(events, TextDelta)] == [8, 8, 4]


async def test_empty_text_has_no_deltas() -> None:
    events = await collect(ScriptedModel([""]))
    assert len(events) == 2
    assert_tail(events, "end_turn")


async def test_thinking_then_done_with_signature_then_text() -> None:
    model = ScriptedModel(
        [ScriptedResponse(thinking="let me think", thinking_signature="sig-1", text="ok")],
        chunk_size=5,
    )
    events = await collect(model)
    assert events[:5] == [
        ThinkingDelta(text="let m"),
        ThinkingDelta(text="e thi"),
        ThinkingDelta(text="nk"),
        ThinkingDone(text="let me think", signature="sig-1"),
        TextDelta(text="ok"),
    ]
    assert_tail(events, "end_turn")


async def test_thinking_without_signature() -> None:
    events = await collect(ScriptedModel([ScriptedResponse(thinking="hm")]))
    assert of_type(events, ThinkingDone) == [ThinkingDone(text="hm", signature=None)]


async def test_one_tool_call() -> None:
    args: dict[str, JsonValue] = {"account": "checking", "currency": "USD", "n": [1, 2]}
    model = ScriptedModel(
        [ScriptedResponse(tool_calls=[ScriptedCall("get_balance", args)])], chunk_size=5
    )
    events = await collect(model)
    raw = json.dumps(args)
    deltas = of_type(events, ToolCallDelta)
    assert len(deltas) == -(-len(raw) // 5)
    assert all(len(d.args_delta) <= 5 for d in deltas)
    assert "".join(d.args_delta for d in deltas) == raw
    assert {(d.tool_use_id, d.name, d.index) for d in deltas} == {("call_1", "get_balance", 0)}
    assert events[len(deltas)] == ToolCallEnd(
        tool_use_id="call_1", name="get_balance", index=0, arguments=raw
    )
    assert json.loads(raw) == args
    assert len(events) == len(deltas) + 3
    assert_tail(events, "tool_use")


async def test_text_then_several_tool_calls() -> None:
    calls = [
        ScriptedCall("get_balance", {"account": "a"}),
        ScriptedCall("get_price", {"symbol": "BTC"}),
        ScriptedCall("noop"),
    ]
    model = ScriptedModel(
        [ScriptedResponse(text="Checking.", tool_calls=calls)],
        chunk_size=4,
    )
    events = await collect(model)
    kinds = [type(e).__name__ for e in events]
    # Text first, then each call's fragments followed by its end, then usage and stop.
    first_call = kinds.index("ToolCallDelta")
    assert set(kinds[:first_call]) == {"TextDelta"}
    ends = of_type(events, ToolCallEnd)
    assert ends == [
        ToolCallEnd(
            tool_use_id="call_1", name="get_balance", index=0, arguments='{"account": "a"}'
        ),
        ToolCallEnd(tool_use_id="call_2", name="get_price", index=1, arguments='{"symbol": "BTC"}'),
        ToolCallEnd(tool_use_id="call_3", name="noop", index=2, arguments="{}"),
    ]
    for end in ends:
        fragments = [d for d in of_type(events, ToolCallDelta) if d.index == end.index]
        assert {(d.tool_use_id, d.name) for d in fragments} == {(end.tool_use_id, end.name)}
        assert "".join(d.args_delta for d in fragments) == end.arguments
        # All of a call's fragments come before its end, and after the previous end.
        end_pos = events.index(end)
        positions = [events.index(d) for d in fragments]
        assert max(positions) < end_pos
        if end.index > 0:
            assert min(positions) > events.index(ends[end.index - 1])
    assert_tail(events, "tool_use")


async def test_call_ids_continue_across_requests_and_explicit_ids_kept() -> None:
    model = ScriptedModel(
        [
            ScriptedResponse(
                tool_calls=[ScriptedCall("a"), ScriptedCall("b", id="mine"), ScriptedCall("c")]
            ),
            ScriptedResponse(tool_calls=[ScriptedCall("d")]),
        ]
    )
    first = of_type(await collect(model), ToolCallEnd)
    second = of_type(await collect(model), ToolCallEnd)
    assert [e.tool_use_id for e in first] == ["call_1", "mine", "call_2"]
    assert [e.tool_use_id for e in second] == ["call_3"]


async def test_ids_are_deterministic_per_model() -> None:
    def script() -> list[str | ScriptedResponse]:
        return [ScriptedResponse(tool_calls=[ScriptedCall("a"), ScriptedCall("b")])]

    one = await collect(ScriptedModel(script()))
    two = await collect(ScriptedModel(script()))
    assert one == two
    assert [e.tool_use_id for e in of_type(one, ToolCallEnd)] == ["call_1", "call_2"]


async def test_raw_string_args_are_sent_verbatim() -> None:
    raw = '{"account": "a", '  # malformed on purpose
    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("x", raw)])], chunk_size=3)
    events = await collect(model)
    assert "".join(d.args_delta for d in of_type(events, ToolCallDelta)) == raw
    assert of_type(events, ToolCallEnd)[0].arguments == raw


async def test_explicit_stop_reason_and_usage() -> None:
    usage = Usage(input_tokens=7, output_tokens=3, requests=1)
    model = ScriptedModel(
        [
            ScriptedResponse(text="cut", stop_reason="max_tokens", usage=usage),
            ScriptedResponse(tool_calls=[ScriptedCall("x")], stop_reason="end_turn"),
        ]
    )
    first = await collect(model)
    assert first[-2] == ModelUsage(usage=usage)
    assert_tail(first, "max_tokens")
    assert_tail(await collect(model), "end_turn")


async def test_estimated_usage() -> None:
    model = ScriptedModel(
        [ScriptedResponse(thinking="t" * 9, text="y" * 10, tool_calls=[ScriptedCall("f", "ab")])]
    )
    req = ModelRequest(
        system=(SystemBlock(text="s" * 3),), messages=[Message.user("u" * 6)], tools=()
    )
    events = await collect(model, req)
    # Four characters a token, rounded up: input 3+6=9 -> 3, output 9+10+2=21 -> 6.
    assert events[-2] == ModelUsage(
        usage=Usage(input_tokens=3, output_tokens=6, reasoning_tokens=3, requests=1)
    )


async def test_plain_strings_and_responses_mix() -> None:
    model = ScriptedModel(["one", ScriptedResponse(text="two")])
    assert model.remaining == 2
    first = await collect(model)
    assert model.remaining == 1
    second = await collect(model)
    assert model.remaining == 0
    assert [e.text for e in of_type(first, TextDelta)] == ["one"]
    assert [e.text for e in of_type(second, TextDelta)] == ["two"]


async def test_requests_are_recorded() -> None:
    model = ScriptedModel(["a", "b"])
    r1, r2 = request("first"), request("first", "second", tools=(SPEC,))
    await collect(model, r1)
    assert model.requests == [r1]
    await collect(model, r2)
    assert model.requests == [r1, r2]
    assert model.requests[1] is r2


async def test_running_out_of_script_names_request_number() -> None:
    model = ScriptedModel(["only"])
    await collect(model)
    with pytest.raises(ModelOutputError, match=r"request #2 \(its script holds 1\)") as info:
        await collect(model)
    assert info.value.provider == "scripted"
    assert len(model.requests) == 2


async def test_empty_script_fails_first_request() -> None:
    with pytest.raises(ModelOutputError, match="request #1"):
        await collect(ScriptedModel([]))


async def test_sync_function_script() -> None:
    seen: list[tuple[list[str], list[str]]] = []

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str | ScriptedResponse:
        seen.append(([m.text for m in messages], [t.name for t in tools]))
        if len(messages) == 1:
            return ScriptedResponse(tool_calls=[ScriptedCall("get_balance", {})])
        return f"seen {len(messages)}"

    model = ScriptedModel(script)
    assert model.remaining == 0
    first = await collect(model, request("hi", tools=(SPEC,)))
    second = await collect(model, request("hi", "more", "again"))
    assert of_type(first, ToolCallEnd)[0].name == "get_balance"
    assert_tail(first, "tool_use")
    assert "".join(e.text for e in of_type(second, TextDelta)) == "seen 3"
    assert seen == [(["hi"], ["get_balance"]), (["hi", "more", "again"], [])]
    assert len(model.requests) == 2


async def test_async_function_script() -> None:
    async def script(
        messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> str | ScriptedResponse:
        return ScriptedResponse(text=messages[-1].text.upper(), thinking="hmm")

    model = ScriptedModel(script, chunk_size=100)
    events = await collect(model, request("shout"))
    assert of_type(events, TextDelta) == [TextDelta(text="SHOUT")]
    assert of_type(events, ThinkingDone) == [ThinkingDone(text="hmm")]


async def test_function_script_bad_item_is_config_error() -> None:
    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str | ScriptedResponse:
        return 42  # type: ignore[return-value]  # deliberately wrong

    with pytest.raises(ConfigError, match="must be a str or ScriptedResponse"):
        await collect(ScriptedModel(script))


async def test_error_after_some_deltas() -> None:
    error = ModelHTTPError("overloaded", provider="scripted", status=529, retryable=True)
    model = ScriptedModel(
        [ScriptedResponse(text="abcdefgh", error=error, error_after=2)], chunk_size=2
    )
    got, raised = await until_error(model, ModelHTTPError)
    assert raised is error
    assert got == [TextDelta(text="ab"), TextDelta(text="cd")]


async def test_error_counts_deltas_across_kinds() -> None:
    error = ModelOutputError("cut off", provider="scripted")
    model = ScriptedModel(
        [
            ScriptedResponse(
                thinking="ab",
                text="cd",
                tool_calls=[ScriptedCall("f", "{}")],
                error=error,
                error_after=4,
            )
        ],
        chunk_size=2,
    )
    got, raised = await until_error(model, ModelOutputError)
    assert raised is error
    assert got == [
        ThinkingDelta(text="ab"),
        ThinkingDone(text="ab"),
        TextDelta(text="cd"),
        ToolCallDelta(tool_use_id="call_1", name="f", index=0, args_delta="{}"),
    ]


async def test_error_immediately() -> None:
    error = ModelError("down", provider="scripted")
    model = ScriptedModel([ScriptedResponse(text="never", error=error)])
    got, raised = await until_error(model, ModelError)
    assert raised is error
    assert got == []


async def test_error_after_all_deltas_comes_before_usage_and_stop() -> None:
    error = ModelError("late", provider="scripted")
    model = ScriptedModel([ScriptedResponse(text="abc", error=error, error_after=99)])
    got, raised = await until_error(model, ModelError)
    assert raised is error
    assert got == [TextDelta(text="abc")]


async def test_error_response_is_consumed() -> None:
    error = ModelError("flaky", provider="scripted", retryable=True)
    model = ScriptedModel([ScriptedResponse(error=error), "recovered"])
    with pytest.raises(ModelError):
        await collect(model)
    events = await collect(model)
    assert "".join(e.text for e in of_type(events, TextDelta)) == "recovered"
    assert len(model.requests) == 2


@pytest.mark.parametrize("chunk_size", [0, -1])
async def test_chunk_size_below_one_is_config_error(chunk_size: int) -> None:
    with pytest.raises(ConfigError, match="chunk_size must be at least 1"):
        ScriptedModel(["x"], chunk_size=chunk_size)


async def test_chunk_size_one() -> None:
    events = await collect(ScriptedModel(["abc"], chunk_size=1))
    assert of_type(events, TextDelta) == [TextDelta(text=c) for c in "abc"]
