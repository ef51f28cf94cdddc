"""OpenAIResponsesModel on recorded Responses API traffic, through the real openai SDK."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal, TypeAlias, TypeVar

import pytest
from pydantic import JsonValue

from mainspring.agent import Agent
from mainspring.errors import (
    AuthenticationError,
    BadRequest,
    ContextTooLong,
    ModelError,
    ModelOutputError,
    ModelTimeout,
    Overloaded,
    RateLimited,
    ServerError,
)
from mainspring.events import TextDelta, ThinkingDelta, ThinkingDone, ToolCallDelta, TurnComplete
from mainspring.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from mainspring.models.base import (
    Model,
    ModelEvent,
    ModelRequest,
    ModelSettings,
    ModelStop,
    ModelUsage,
    SystemBlock,
    ToolCallEnd,
    ToolSpec,
)
from mainspring.models.openai_responses import (
    OpenAIResponsesModel,
    build_params,
    strict_compatible,
    usage_from_responses,
)
from mainspring.models.retry import RetryPolicy
from mainspring.session import Session
from mainspring.tools import tool
from mainspring.usage import Usage
from tests.models.wire import Recorded, as_provider_ids, load, recorded

pytestmark = pytest.mark.anyio

T = TypeVar("T")
StopReason: TypeAlias = Literal["end_turn", "tool_use", "max_tokens", "refusal"]
NO_WAIT = RetryPolicy(initial_backoff=0, max_backoff=0, jitter=0)
ONCE = RetryPolicy(max_attempts=1)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def of_type(events: Sequence[object], kind: type[T]) -> list[T]:
    return [e for e in events if isinstance(e, kind)]


def model_for(rec: Recorded, *, retry: RetryPolicy = NO_WAIT) -> OpenAIResponsesModel:
    return OpenAIResponsesModel(
        "gpt-test", api_key="sk-test", http_client=rec.client(), retry=retry
    )


def request(*messages: Message, **settings: Any) -> ModelRequest:
    return ModelRequest(system=(), messages=list(messages), settings=ModelSettings(**settings))


async def collect(model: Model, req: ModelRequest) -> list[ModelEvent]:
    return [e async for e in model.stream(req)]


def sse_events(exchange: dict[str, Any]) -> list[dict[str, Any]]:
    sse: str = exchange["response"]["sse"]
    return [json.loads(line[5:]) for line in sse.splitlines() if line.startswith("data:")]


def completed(exchange: dict[str, Any]) -> dict[str, Any]:
    (event,) = [e for e in sse_events(exchange) if e["type"] == "response.completed"]
    response: dict[str, Any] = event["response"]
    return response


def synthetic(status: int, body: object, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """A hand-written exchange (no recorded OpenAI 429/401/5xx exists)."""
    return {"response": {"status": status, "headers_subset": headers or {}, "body": body}}


def synthetic_sse(*events: dict[str, Any]) -> dict[str, Any]:
    text = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return {"response": {"status": 200, "headers_subset": {}, "sse": text}}


def error_body(message: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": code}}


def without_ids(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Recorded input items minus server item ids (a stateless request sends none)."""
    return [{k: v for k, v in item.items() if k != "id"} for item in items]


# --- streams -------------------------------------------------------------------------------


STREAMS = [
    "responses_text_stream",
    "responses_function_call_stream",
    "responses_function_call_output_stream",
    "responses_reasoning_function_call_stream",
]


@pytest.mark.parametrize("name", STREAMS)
async def test_recorded_stream_becomes_neutral_events(name: str) -> None:
    exchange = load("openai", name)
    rec = recorded(exchange)
    events = await collect(model_for(rec), request(Message.user("hi")))
    wire = sse_events(exchange)
    final = completed(exchange)

    text = "".join(e["delta"] for e in wire if e["type"] == "response.output_text.delta")
    assert "".join(e.text for e in of_type(events, TextDelta)) == text

    calls = [
        e["item"]
        for e in wire
        if e["type"] == "response.output_item.done" and e["item"]["type"] == "function_call"
    ]
    ends = of_type(events, ToolCallEnd)
    assert [(e.tool_use_id, e.name, e.arguments) for e in ends] == [
        (c["call_id"], c["name"], c["arguments"]) for c in calls
    ]
    assert [e.index for e in ends] == list(range(len(calls)))
    for end in ends:
        fragments = [d for d in of_type(events, ToolCallDelta) if d.tool_use_id == end.tool_use_id]
        assert len(fragments) > 1
        assert {(d.name, d.index) for d in fragments} == {(end.name, end.index)}
        assert "".join(d.args_delta for d in fragments) == end.arguments
        assert events.index(end) > events.index(fragments[-1])

    reasoning = [
        e["item"]
        for e in wire
        if e["type"] == "response.output_item.done" and e["item"]["type"] == "reasoning"
    ]
    assert of_type(events, ThinkingDone) == [
        ThinkingDone(
            text="\n\n".join(s["text"] for s in r.get("summary") or []),
            signature=r["encrypted_content"],
            provider="openai",
        )
        for r in reasoning
    ]

    usage = final["usage"]
    cached = usage["input_tokens_details"]["cached_tokens"]
    assert events[-2] == ModelUsage(
        usage=Usage(
            input_tokens=usage["input_tokens"] - cached,
            cache_read_tokens=cached,
            output_tokens=usage["output_tokens"],
            reasoning_tokens=usage["output_tokens_details"]["reasoning_tokens"],
            requests=1,
        )
    )
    stop: StopReason = "tool_use" if calls else "end_turn"
    assert events[-1] == ModelStop(stop_reason=stop, model=final["model"])
    assert sum(isinstance(e, ModelStop) for e in events) == 1

    sent = rec.sent_json()
    assert rec.requests[0].url.path == "/v1/responses"
    assert sent["stream"] is True and sent["store"] is False
    assert sent["input"] == [{"role": "user", "content": "hi"}]


async def test_text_stream_exact_events() -> None:
    events = await collect(
        model_for(recorded(load("openai", "responses_text_stream"))), request(Message.user("q"))
    )
    assert [e.text for e in of_type(events, TextDelta)][:3] == ["The", " capital", " of"]
    assert events[-2:] == [
        ModelUsage(usage=Usage(input_tokens=25, output_tokens=10, requests=1)),
        ModelStop(stop_reason="end_turn", model="gpt-4o-mini-2024-07-18"),
    ]


async def test_reasoning_stream_keeps_encrypted_content_and_reasoning_tokens() -> None:
    exchange = load("openai", "responses_reasoning_function_call_stream")
    events = await collect(model_for(recorded(exchange)), request(Message.user("q")))
    (done,) = of_type(events, ThinkingDone)
    assert done.provider == "openai" and done.signature and done.signature.startswith("gAAAA")
    assert events.index(done) < events.index(of_type(events, ToolCallDelta)[0])
    usage = of_type(events, ModelUsage)[0].usage
    assert (usage.output_tokens, usage.reasoning_tokens, usage.input_tokens) == (469, 448, 53)
    assert of_type(events, ToolCallEnd) == [
        ToolCallEnd(
            tool_use_id="call_CWXgs68YprAjp6t0371hiPOI",
            name="final_result",
            index=0,
            arguments='{"result":6666}',
        )
    ]


async def test_reasoning_summary_deltas_and_done() -> None:
    rec = recorded(
        synthetic_sse(
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {"type": "reasoning", "id": "rs_1", "summary": []},
            },
            {
                "type": "response.reasoning_summary_text.delta",
                "output_index": 0,
                "item_id": "rs_1",
                "summary_index": 0,
                "delta": "Plan",
            },
            {
                "type": "response.reasoning_summary_part.added",
                "output_index": 0,
                "item_id": "rs_1",
                "summary_index": 1,
                "part": {"type": "summary_text", "text": ""},
            },
            {
                "type": "response.reasoning_summary_text.delta",
                "output_index": 0,
                "item_id": "rs_1",
                "summary_index": 1,
                "delta": "Act",
            },
            {
                "type": "response.output_item.done",
                "output_index": 0,
                "item": {
                    "type": "reasoning",
                    "id": "rs_1",
                    "encrypted_content": "enc",
                    "summary": [
                        {"type": "summary_text", "text": "Plan"},
                        {"type": "summary_text", "text": "Act"},
                    ],
                },
            },
            {"type": "response.output_text.delta", "output_index": 1, "delta": "ok"},
            {
                "type": "response.completed",
                "response": {"model": "gpt-x", "status": "completed", "output": []},
            },
        )
    )
    events = await collect(model_for(rec), request(Message.user("q"), effort="max"))
    assert events == [
        ThinkingDelta(text="Plan"),
        ThinkingDelta(text="\n\n"),
        ThinkingDelta(text="Act"),
        ThinkingDone(text="Plan\n\nAct", signature="enc", provider="openai"),
        TextDelta(text="ok"),
        ModelUsage(usage=Usage(requests=1)),
        ModelStop(stop_reason="end_turn", model="gpt-x"),
    ]
    sent = rec.sent_json()
    assert sent["reasoning"] == {"effort": "high", "summary": "auto"}
    assert sent["include"] == ["reasoning.encrypted_content"]


@pytest.mark.parametrize(
    ("details", "stop"),
    [({"reason": "max_output_tokens"}, "max_tokens"), ({"reason": "content_filter"}, "refusal")],
)
async def test_incomplete_response_stop_reasons(details: dict[str, str], stop: StopReason) -> None:
    rec = recorded(
        synthetic_sse(
            {"type": "response.output_text.delta", "output_index": 0, "delta": "par"},
            {
                "type": "response.incomplete",
                "response": {
                    "model": "m",
                    "status": "incomplete",
                    "incomplete_details": details,
                    "usage": {"input_tokens": 3, "output_tokens": 1},
                },
            },
        )
    )
    events = await collect(model_for(rec), request(Message.user("q")))
    assert events[-1] == ModelStop(stop_reason=stop, model="m")
    assert events[-2] == ModelUsage(usage=Usage(input_tokens=3, output_tokens=1, requests=1))


# --- request building ----------------------------------------------------------------------


def recorded_body(name: str) -> dict[str, Any]:
    body: dict[str, Any] = load("openai", name)["request"]["body"]
    return body


def spec(recorded_tool: dict[str, Any]) -> ToolSpec:
    return ToolSpec(
        name=recorded_tool["name"],
        description=recorded_tool["description"] or "",
        input_schema=recorded_tool["parameters"],
    )


def assert_tools_match(params: dict[str, Any], body: dict[str, Any]) -> None:
    def norm(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**t, "description": t["description"] or ""} for t in tools]

    assert norm(params["tools"]) == norm(body["tools"])
    assert params["tool_choice"] == body["tool_choice"]


async def test_request_text_basic() -> None:
    body = recorded_body("responses_text_basic")
    params = build_params("gpt-4o", request(Message.user("What is the capital of France?")))
    assert params["input"] == body["input"]
    assert params["model"] == body["model"]
    assert params["store"] is False and params["stream"] is True
    assert not {"tools", "instructions", "reasoning", "include", "text"} & set(params)


async def test_request_function_call_tools() -> None:
    body = recorded_body("responses_function_call")
    req = ModelRequest(
        system=(),
        messages=[Message.user("What is the capital of PotatoLand?")],
        tools=tuple(spec(t) for t in body["tools"]),
        settings=ModelSettings(tool_choice="auto"),
    )
    params = build_params("gpt-4o", req)
    assert params["input"] == body["input"]
    assert_tools_match(params, body)


async def test_request_parallel_function_calls_tools() -> None:
    body = recorded_body("responses_parallel_function_calls")
    req = ModelRequest(
        system=(SystemBlock(text=""),),
        messages=[Message.user(body["input"][0]["content"])],
        tools=tuple(spec(t) for t in body["tools"]),
        settings=ModelSettings(tool_choice="auto"),
    )
    params = build_params("gpt-4o", req)
    assert params["input"] == body["input"]
    assert_tools_match(params, body)


async def test_request_function_call_output_pairs_with_reasoning_replayed() -> None:
    body = recorded_body("responses_function_call_output_2")
    user, reasoning, call, output = body["input"]
    history = [
        Message.user(user["content"]),
        Message(
            role="assistant",
            parts=(
                ThinkingPart(text="", signature=reasoning["encrypted_content"], provider="openai"),
                ToolCallPart(id=call["call_id"], name=call["name"], arguments={"city": "Paris"}),
            ),
        ),
        Message.tool_results(
            [
                ToolResultPart(
                    tool_use_id=output["call_id"], name="get_weather", content=output["output"]
                )
            ]
        ),
    ]
    req = ModelRequest(
        system=(),
        messages=history,
        tools=tuple(spec(t) for t in body["tools"]),
        settings=ModelSettings(tool_choice="auto", effort="medium"),
    )
    params = build_params("gpt-5-mini", req)
    assert params["input"] == without_ids(body["input"])
    assert params["include"] == body["include"]
    assert_tools_match(params, body)


async def test_request_function_call_output_stream_history() -> None:
    body = recorded_body("responses_function_call_output_stream")
    user, call, output = body["input"]
    history = [
        Message.user(user["content"]),
        Message(
            role="assistant",
            parts=(
                ToolCallPart(
                    id=call["call_id"], name=call["name"], arguments={"country": "France"}
                ),
            ),
        ),
        Message.tool_results(
            [ToolResultPart(tool_use_id=output["call_id"], name=call["name"], content="Paris")]
        ),
    ]
    params = build_params("gpt-4o", request(*history))
    assert params["input"] == body["input"]


async def test_request_reasoning_summary_instructions_and_effort() -> None:
    body = recorded_body("responses_reasoning_summary")
    req = ModelRequest(
        system=(SystemBlock(text=body["instructions"]),),
        messages=[Message.user(body["input"][0]["content"])],
        settings=ModelSettings(effort="high"),
    )
    params = build_params("gpt-5.2", req)
    assert params["instructions"] == body["instructions"]
    assert params["input"] == body["input"]
    assert params["reasoning"] == body["reasoning"]
    assert params["include"] == body["include"]


async def test_request_structured_output_text_format() -> None:
    body = recorded_body("responses_structured_output")
    schema: dict[str, JsonValue] = {"title": "Payment", **body["text"]["format"]["schema"]}
    params = build_params(
        "gpt-5.4-mini",
        request(Message.user(body["input"][0]["content"]), output_schema=schema),
    )
    assert params["text"] == body["text"]
    assert params["input"] == body["input"]


async def test_request_drops_foreign_thinking_and_unsigned_reasoning() -> None:
    history = [
        Message.user("q"),
        Message(
            role="assistant",
            parts=(
                ThinkingPart(text="claude thought", signature="sig", provider="anthropic"),
                ThinkingPart(text="no blob", provider="openai"),
                TextPart(text="a"),
                TextPart(text="b"),
            ),
        ),
        Message.tool_results([ToolResultPart(tool_use_id="orphan", name="t", content="x")]),
    ]
    assert build_params("m", request(*history))["input"] == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "ab"},
    ]


async def test_request_tool_choice_extra_and_limits() -> None:
    params = build_params(
        "m",
        request(
            Message.user("q"),
            tool_choice="get_capital",
            max_tokens=50,
            temperature=0.2,
            extra={"service_tier": "flex", "store": True},
        ),
    )
    assert params["tool_choice"] == {"type": "function", "name": "get_capital"}
    assert params["max_output_tokens"] == 50 and params["temperature"] == 0.2
    assert params["service_tier"] == "flex"
    assert params["store"] is False


async def test_non_strict_schema_is_sent_without_strict() -> None:
    assert strict_compatible({"type": "object", "properties": {}, "additionalProperties": False})
    assert not strict_compatible({"type": "object", "properties": {"a": {"type": "string"}}})
    assert not strict_compatible(
        {
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "required": [],
            "additionalProperties": False,
        }
    )


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("responses_cached_tokens", Usage(input_tokens=8, cache_read_tokens=4012, output_tokens=5)),
        ("responses_text_basic", Usage(input_tokens=14, output_tokens=8)),
        ("responses_function_call", Usage(input_tokens=40, output_tokens=18)),
        ("responses_function_call_output_2", Usage(input_tokens=149, output_tokens=17)),
        ("responses_parallel_function_calls", Usage()),
        ("responses_structured_output", Usage(input_tokens=72, output_tokens=14)),
        ("responses_reasoning_summary", None),
    ],
)
async def test_usage_parsing_on_recorded_bodies(name: str, expected: Usage | None) -> None:
    usage = load("openai", name)["response"]["body"]["usage"]
    got = usage_from_responses(usage)
    if expected is None:
        cached = usage["input_tokens_details"]["cached_tokens"]
        expected = Usage(
            input_tokens=usage["input_tokens"] - cached,
            cache_read_tokens=cached,
            output_tokens=usage["output_tokens"],
            reasoning_tokens=usage["output_tokens_details"]["reasoning_tokens"],
        )
    assert got == expected + Usage(requests=1)
    assert got.total_input_tokens == usage["input_tokens"]


# --- errors and retries --------------------------------------------------------------------


async def test_recorded_400_reasoning_history_is_bad_request() -> None:
    exchange = load("openai", "responses_error_400_reasoning")
    body = exchange["request"]["body"]
    user, reasoning, answer, again = body["input"]
    history = [
        Message.user(user["content"]),
        Message(
            role="assistant",
            parts=(
                ThinkingPart(
                    text=reasoning["summary"][0]["text"],
                    signature=reasoning["encrypted_content"],
                    provider="openai",
                ),
                TextPart(text=answer["content"]),
            ),
        ),
        Message.user(again["content"]),
    ]
    rec = recorded(exchange)
    with pytest.raises(BadRequest) as info:
        await collect(model_for(rec), request(*history, effort="low"))
    err = info.value
    assert not isinstance(err, ContextTooLong)
    assert (err.status, err.provider, err.retryable) == (400, "openai", False)
    assert "required following item" in str(err) and "rs_68c42" in err.body
    assert len(rec.requests) == 1
    assert rec.sent_json()["input"] == without_ids(body["input"])


async def test_context_length_400_is_context_too_long() -> None:
    rec = recorded(
        synthetic(
            400,
            error_body(
                "Your input exceeds the context window of this model.", "context_length_exceeded"
            ),
        )
    )
    with pytest.raises(ContextTooLong):
        await collect(model_for(rec), request(Message.user("q")))


async def test_429_with_retry_after_is_retried_then_succeeds() -> None:
    rec = recorded(
        synthetic(
            429, error_body("Rate limit reached", "rate_limit_exceeded"), {"retry-after": "0"}
        ),
        load("openai", "responses_text_stream"),
    )
    events = await collect(model_for(rec), request(Message.user("q")))
    assert len(rec.requests) == 2
    assert isinstance(events[-1], ModelStop) and events[-1].stop_reason == "end_turn"


async def test_429_carries_retry_after() -> None:
    rec = recorded(synthetic(429, error_body("slow down"), {"retry-after": "7"}))
    with pytest.raises(RateLimited) as info:
        await collect(model_for(rec, retry=ONCE), request(Message.user("q")))
    assert info.value.retry_after == 7.0 and info.value.retryable


async def test_401_is_not_retried() -> None:
    rec = recorded(synthetic(401, error_body("Incorrect API key provided")))
    with pytest.raises(AuthenticationError) as info:
        await collect(model_for(rec), request(Message.user("q")))
    assert not info.value.retryable and info.value.provider == "openai"
    assert len(rec.requests) == 1


@pytest.mark.parametrize(("status", "kind"), [(500, ServerError), (503, Overloaded)])
async def test_5xx_retried_until_attempts_run_out(status: int, kind: type[ModelError]) -> None:
    rec = recorded(synthetic(status, error_body("oops")))
    with pytest.raises(kind) as info:
        await collect(
            model_for(
                rec, retry=RetryPolicy(max_attempts=2, initial_backoff=0, max_backoff=0, jitter=0)
            ),
            request(Message.user("q")),
        )
    assert info.value.retryable
    assert len(rec.requests) == 2


def truncated(name: str) -> dict[str, Any]:
    exchange = load("openai", name)
    sse: str = exchange["response"]["sse"]
    cut = sse.index("event: response.completed")
    return {**exchange, "response": {**exchange["response"], "sse": sse[:cut]}}


async def test_truncated_stream_is_retryable_output_error() -> None:
    rec = recorded(truncated("responses_text_stream"))
    with pytest.raises(ModelOutputError) as info:
        await collect(model_for(rec, retry=ONCE), request(Message.user("q")))
    assert info.value.retryable and info.value.provider == "openai"


async def test_truncated_stream_after_deltas_is_not_replayed() -> None:
    rec = recorded(truncated("responses_text_stream"), load("openai", "responses_text_stream"))
    got: list[ModelEvent] = []
    stream = model_for(rec).stream(request(Message.user("q")))
    with pytest.raises(ModelOutputError):
        while True:
            got.append(await anext(stream))
    assert len(rec.requests) == 1
    assert got and all(isinstance(e, TextDelta) for e in got)


async def test_stream_cut_before_any_event_is_retried() -> None:
    rec = recorded(
        synthetic_sse({"type": "response.created", "response": {}}),
        load("openai", "responses_text_stream"),
    )
    events = await collect(model_for(rec), request(Message.user("q")))
    assert len(rec.requests) == 2
    assert isinstance(events[-1], ModelStop)


async def test_response_failed_event_is_typed() -> None:
    rec = recorded(
        synthetic_sse(
            {
                "type": "response.failed",
                "response": {
                    "status": "failed",
                    "error": {"code": "server_error", "message": "boom"},
                },
            },
        )
    )
    with pytest.raises(ServerError) as info:
        await collect(model_for(rec, retry=ONCE), request(Message.user("q")))
    assert info.value.retryable


async def test_error_event_is_typed() -> None:
    rec = recorded(
        synthetic_sse(
            {
                "type": "error",
                "code": "context_length_exceeded",
                "message": "too many tokens",
                "param": None,
                "sequence_number": 1,
            },
        )
    )
    with pytest.raises(ContextTooLong):
        await collect(model_for(rec, retry=ONCE), request(Message.user("q")))


async def test_malformed_sse_json_is_retryable_output_error() -> None:
    rec = recorded(
        {
            "response": {
                "status": 200,
                "headers_subset": {},
                "sse": "event: response.created\ndata: {not json\n\n",
            }
        }
    )
    with pytest.raises(ModelOutputError) as info:
        await collect(model_for(rec, retry=ONCE), request(Message.user("q")))
    assert info.value.retryable


async def test_timeout_is_model_timeout() -> None:
    import httpx2

    def handler(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ReadTimeout("slow", request=request)

    model = OpenAIResponsesModel(
        "m",
        api_key="k",
        retry=ONCE,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    with pytest.raises(ModelTimeout) as info:
        await collect(model, request(Message.user("q")))
    assert info.value.retryable


async def test_name_and_protocol() -> None:
    model: object = OpenAIResponsesModel("gpt-5", api_key="k")
    assert isinstance(model, Model)
    assert model.name == "openai:gpt-5"


# --- end to end ----------------------------------------------------------------------------


async def test_session_runs_one_tool_round_on_recorded_traffic() -> None:
    first = load("openai", "responses_function_call_stream")
    second = load("openai", "responses_function_call_output_stream")
    rec = recorded(first, second)
    seen: list[str] = []

    @tool(read_only=True)
    async def get_capital(country: str) -> str:
        """The capital of a country."""
        seen.append(country)
        return "Paris"

    model = OpenAIResponsesModel("gpt-4o", api_key="sk-test", http_client=rec.client())
    session = Session(Agent(model=model, instructions="Be brief.", tools=[get_capital]))
    events = [e async for e in session.send("What is the capital of France?")]

    assert seen == ["France"]
    assert isinstance(events[-1], TurnComplete)
    assert session.messages[-1].text == "The capital of France is Paris."
    assert len(rec.requests) == 2
    sent = as_provider_ids(rec.sent_json(1), session.messages)
    assert sent["store"] is False and sent["instructions"] == "Be brief."
    call_id = "call_kL0PCQV7M2WMoVX8V8OtYSAL"
    assert sent["input"][1:] == [
        {
            "type": "function_call",
            "call_id": call_id,
            "name": "get_capital",
            "arguments": '{"country":"France"}',
        },
        {"type": "function_call_output", "call_id": call_id, "output": "Paris"},
    ]
    assert sent["tools"][0]["name"] == "get_capital"


def test_tool_result_images_go_in_the_function_call_output() -> None:
    from mainspring.messages import ImagePart

    history = [
        Message.user("look"),
        Message(role="assistant", parts=(ToolCallPart(id="c1", name="shot", arguments={}),)),
        Message(
            role="tool",
            parts=(
                ToolResultPart(
                    tool_use_id="c1",
                    name="shot",
                    content="a chart",
                    images=(ImagePart(media_type="image/png", data="AAAA"),),
                ),
            ),
        ),
    ]
    body = build_params("gpt-5", ModelRequest(system=(), messages=history))
    assert body["input"][-1] == {
        "type": "function_call_output",
        "call_id": "c1",
        "output": [
            {"type": "input_text", "text": "a chart"},
            {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
        ],
    }
