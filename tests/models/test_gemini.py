"""GeminiModel on recorded Gemini traffic, through the real ``google-genai`` SDK.

Every fixture under ``wire/gemini`` is used. Streamed recordings are replayed
as is; JSON recordings (``generateContent``) are replayed as a one-event SSE
stream, so their reply runs through the same decoder. For each, the request
the adapter builds from the neutral equivalent of the recorded conversation is
compared with the recorded request body. Error bodies for 401, 403 and 429 are
synthetic (no recording has them) and say so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TypeVar

import httpx2 as httpx
import pytest
from pydantic import JsonValue

from mainspring import Agent, Session, TextDelta, tool
from mainspring.errors import (
    AuthenticationError,
    ContextTooLong,
    ModelNotFound,
    ModelOutputError,
    ModelTimeout,
    Overloaded,
    PermissionDenied,
    RateLimited,
)
from mainspring.events import ThinkingDelta, ThinkingDone, ToolCallDelta
from mainspring.messages import Message, Role, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
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
from mainspring.models.gemini import GeminiModel, thinking_config, usage_from_metadata
from mainspring.models.retry import RetryPolicy
from mainspring.usage import Usage
from tests.helpers import send
from tests.models.wire import Recorded, as_provider_ids, load, recorded

pytestmark = pytest.mark.anyio

T = TypeVar("T")
FAST = RetryPolicy(initial_backoff=0, max_backoff=0, jitter=0)
ONCE = RetryPolicy(max_attempts=1)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def of_type(events: Sequence[object], kind: type[T]) -> list[T]:
    return [e for e in events if isinstance(e, kind)]


def as_stream(exchange: dict[str, Any]) -> dict[str, Any]:
    """A JSON ``generateContent`` reply served as one ``?alt=sse`` event."""
    body = exchange["response"]["body"]
    return {**exchange, "response": {"status": 200, "sse": f"data: {json.dumps(body)}\r\n\r\n"}}


def model_for(rec: Recorded, name: str = "gemini-2.5-flash", **kw: Any) -> GeminiModel:
    return GeminiModel(name, api_key="test-key", http_client=rec.client(), **kw)


async def run(model: Model, request: ModelRequest) -> list[ModelEvent]:
    return [e async for e in model.stream(request)]


# ------------------------------------------------ neutral equivalents of recorded requests


def std_b64(signature: str) -> str:
    """Recorded requests carry url-safe base64 (as the SDK sends); replies use standard."""
    return signature.replace("-", "+").replace("_", "/")


def neutral_messages(contents: list[dict[str, Any]]) -> list[Message]:
    """The neutral conversation a recorded ``contents`` list stands for."""
    messages: list[Message] = []
    for content in contents:
        parts: list[Any] = []
        results: list[ToolResultPart] = []
        for part in content["parts"]:
            if "thoughtSignature" in part:
                sig = std_b64(part["thoughtSignature"])
                parts.append(ThinkingPart(text="", signature=sig, provider="gemini"))
            if "text" in part:
                parts.append(TextPart(text=part["text"]))
            elif "functionCall" in part:
                call = part["functionCall"]
                parts.append(ToolCallPart(id=call["id"], name=call["name"], arguments=call["args"]))
            elif "functionResponse" in part:
                resp = part["functionResponse"]
                results.append(
                    ToolResultPart(
                        tool_use_id=resp["id"],
                        name=resp["name"],
                        content=resp["response"]["return_value"],
                    )
                )
        if results:
            messages.append(Message.tool_results(results))
        else:
            role: Role = "assistant" if content["role"] == "model" else "user"
            messages.append(Message(role=role, parts=tuple(parts)))
    return messages


def neutral_request(body: dict[str, Any], settings: ModelSettings) -> ModelRequest:
    system = tuple(
        SystemBlock(text=p["text"]) for p in body.get("systemInstruction", {}).get("parts", [])
    )
    tools: list[ToolSpec] = []
    for group in body.get("tools", []):
        for decl in group["functionDeclarations"]:
            schema = decl.get("parameters_json_schema") or lower_types(decl.get("parameters"))
            tools.append(
                ToolSpec(name=decl["name"], description=decl["description"], input_schema=schema)
            )
    return ModelRequest(
        system=system,
        messages=neutral_messages(body["contents"]),
        tools=tuple(tools),
        settings=settings,
    )


def lower_types(schema: Any) -> Any:
    """Old SDKs sent OpenAPI ``parameters`` with upper-case types."""
    if isinstance(schema, dict):
        return {k: v.lower() if k == "type" else lower_types(v) for k, v in schema.items()}
    return schema


KEY_SPELLING = {
    "includeThoughts": "include_thoughts",
    "thinkingBudget": "thinking_budget",
    "parametersJsonSchema": "parameters_json_schema",
}


def normalized(body: dict[str, Any]) -> dict[str, Any]:
    """A request body without the recording client's own defaults and spellings."""

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {KEY_SPELLING.get(k, k): walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    out: dict[str, Any] = walk(body)
    config = out.get("generationConfig", {})
    config.pop("responseModalities", None)  # pydantic-ai's default, not a neutral setting
    if not config:
        out.pop("generationConfig", None)
    for group in out.get("tools", []):
        for decl in group["functionDeclarations"]:
            if "parameters" in decl:
                decl["parameters_json_schema"] = lower_types(decl.pop("parameters"))
    calling = out.get("toolConfig", {}).get("functionCallingConfig", {})
    declared = [d["name"] for g in out.get("tools", []) for d in g["functionDeclarations"]]
    if calling.get("mode") == "ANY" and calling.get("allowedFunctionNames") == declared:
        del calling["allowedFunctionNames"]  # "any of all tools" is plain ANY
    return out


SETTINGS: dict[str, ModelSettings] = {
    "text_stream": ModelSettings(temperature=0.0),
    "function_call_stream": ModelSettings(),
    "function_response_followup_stream": ModelSettings(),
    "thought_parts_stream": ModelSettings(extra={"thinking_config": {"include_thoughts": True}}),
    "thought_parts": ModelSettings(extra={"thinking_config": {"include_thoughts": True}}),
    "parallel_function_calls": ModelSettings(tool_choice="required"),
    "parallel_function_responses": ModelSettings(tool_choice="required"),
    "function_response_followup": ModelSettings(tool_choice="auto"),
    "structured_output_2": ModelSettings(),  # output_schema filled in from the recording
    "implicit_cache": ModelSettings(
        extra={"tool_config": {"function_calling_config": {"mode": "VALIDATED"}}}
    ),
    "explicit_cached_content": ModelSettings(
        extra={"cached_content": "cachedContents/7lf5him5ev4iemi1yjv2gwli5bhpz3yidzejwllo"}
    ),
}
STREAMS = [
    "text_stream",
    "function_call_stream",
    "function_response_followup_stream",
    "thought_parts_stream",
]
JSONS = [name for name in SETTINGS if name not in STREAMS]


def settings_for(name: str, body: dict[str, Any]) -> ModelSettings:
    settings = SETTINGS[name]
    schema = body.get("generationConfig", {}).get("responseJsonSchema")
    if schema is not None:
        return ModelSettings(output_schema=schema)
    return settings


async def replay(name: str) -> tuple[Recorded, list[ModelEvent], dict[str, Any]]:
    exchange = load("gemini", name)
    rec = recorded(exchange if name in STREAMS else as_stream(exchange))
    body = exchange["request"]["body"]
    model_name = exchange["request"]["url_path"].split("/models/")[1].split(":")[0]
    request = neutral_request(body, settings_for(name, body))
    events = await run(model_for(rec, model_name, retry=ONCE), request)
    return rec, events, exchange


@pytest.mark.parametrize("name", STREAMS + JSONS)
async def test_request_matches_the_recorded_body(name: str) -> None:
    rec, _, exchange = await replay(name)
    assert normalized(rec.sent_json()) == normalized(exchange["request"]["body"])
    path = exchange["request"]["url_path"]
    sent = rec.requests[0].url
    if name in STREAMS:
        assert f"{sent.path}?{sent.query.decode()}" == path
    else:
        assert sent.path == path.replace(":generateContent", ":streamGenerateContent")
    assert rec.requests[0].headers["x-goog-api-key"] == "test-key"


@pytest.mark.parametrize("name", STREAMS + JSONS)
async def test_every_stream_ends_with_usage_then_stop(name: str) -> None:
    _, events, exchange = await replay(name)
    *_, usage, stop = events
    assert isinstance(usage, ModelUsage)
    assert isinstance(stop, ModelStop)
    response = exchange["response"]
    if "sse" in response:
        chunks = [json.loads(e[6:]) for e in response["sse"].split("\r\n\r\n") if e.strip()]
        last = chunks[-1]
    else:
        last = response["body"]
    assert usage.usage == usage_from_metadata(last["usageMetadata"])
    assert stop.model == last["modelVersion"]


# ------------------------------------------------------------------ streamed replies


async def test_text_stream() -> None:
    _, events, _ = await replay("text_stream")
    assert [type(e) for e in events] == [TextDelta] * 3 + [ModelUsage, ModelStop]
    assert (
        "".join(e.text for e in of_type(events, TextDelta)) == "The capital of France is Paris.\n"
    )
    assert events[-2] == ModelUsage(usage=Usage(input_tokens=13, output_tokens=8, requests=1))
    assert events[-1] == ModelStop(stop_reason="end_turn", model="gemini-2.0-flash-exp")


async def test_function_call_stream_keeps_the_signature_before_the_call() -> None:
    _, events, exchange = await replay("function_call_stream")
    sig = json.loads(exchange["response"]["sse"].split("\r\n\r\n")[0][6:])["candidates"][0][
        "content"
    ]["parts"][0]["thoughtSignature"]
    assert events[:3] == [
        ThinkingDone(text="", signature=sig, provider="gemini"),
        ToolCallDelta(tool_use_id="call_0", name="get_country", index=0, args_delta="{}"),
        ToolCallEnd(tool_use_id="call_0", name="get_country", index=0, arguments="{}"),
    ]
    # candidates (10) exclude thoughts (202): 29 + 10 + 202 = totalTokenCount 241
    assert events[-2] == ModelUsage(
        usage=Usage(input_tokens=29, output_tokens=212, reasoning_tokens=202, requests=1)
    )
    assert events[-1] == ModelStop(stop_reason="tool_use", model="gemini-3-pro-preview")


async def test_thought_parts_stream() -> None:
    _, events, exchange = await replay("thought_parts_stream")
    chunks = [json.loads(e[6:]) for e in exchange["response"]["sse"].split("\r\n\r\n") if e.strip()]
    parts = [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]
    thoughts = [p["text"] for p in parts if p.get("thought")]
    answer = [p for p in parts if not p.get("thought")]
    assert [e.text for e in of_type(events, ThinkingDelta)] == thoughts
    # the signature rides on the first answer part; it closes the thinking block
    assert of_type(events, ThinkingDone) == [
        ThinkingDone(
            text="".join(thoughts), signature=answer[0]["thoughtSignature"], provider="gemini"
        )
    ]
    done = next(i for i, e in enumerate(events) if isinstance(e, ThinkingDone))
    assert all(isinstance(e, ThinkingDelta) for e in events[:done])
    assert "".join(e.text for e in of_type(events, TextDelta)) == "".join(p["text"] for p in answer)
    assert events[-2] == ModelUsage(
        usage=Usage(input_tokens=34, output_tokens=469 + 787, reasoning_tokens=787, requests=1)
    )


async def test_followup_stream_uses_the_last_usage_metadata() -> None:
    _, events, _ = await replay("function_response_followup_stream")
    assert (
        "".join(e.text for e in of_type(events, TextDelta))
        == "The capital of Mexico is Mexico City."
    )
    assert events[-2] == ModelUsage(usage=Usage(input_tokens=257, output_tokens=8, requests=1))


# ------------------------------------------------------------------ JSON replies


async def test_thought_parts_reply() -> None:
    _, events, exchange = await replay("thought_parts")
    thought, answer = exchange["response"]["body"]["candidates"][0]["content"]["parts"]
    assert events[:3] == [
        ThinkingDelta(text=thought["text"]),
        ThinkingDone(text=thought["text"], signature=answer["thoughtSignature"], provider="gemini"),
        TextDelta(text=answer["text"]),
    ]
    assert events[-2] == ModelUsage(
        usage=Usage(input_tokens=29, output_tokens=736 + 1001, reasoning_tokens=1001, requests=1)
    )


async def test_parallel_function_calls_get_distinct_synthesized_ids() -> None:
    _, events, _ = await replay("parallel_function_calls")
    ends = of_type(events, ToolCallEnd)
    assert [(e.tool_use_id, e.name, e.index, e.arguments) for e in ends] == [
        ("call_0", "generate_topic", 0, "{}"),
        ("call_1", "generate_topic", 1, "{}"),
        ("call_2", "generate_topic", 2, "{}"),
    ]
    assert len(of_type(events, ToolCallDelta)) == 3
    assert isinstance(events[0], ThinkingDone) and events[0].signature
    assert events[-1] == ModelStop(stop_reason="tool_use", model="gemini-3-flash-preview")


async def test_synthesized_ids_continue_after_the_calls_in_history() -> None:
    _, events, _ = await replay("parallel_function_responses")
    assert [e.tool_use_id for e in of_type(events, ToolCallEnd)] == ["call_3"]


async def test_structured_output_reply_is_json_text() -> None:
    _, events, _ = await replay("structured_output_2")
    data = json.loads("".join(e.text for e in of_type(events, TextDelta)))
    assert data["name"] == "My Collection" and len(data["pages"]) == 2


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # promptTokenCount includes cachedContentTokenCount: 859 - 594 uncached
        ("implicit_cache", Usage(input_tokens=265, cache_read_tokens=594, output_tokens=28)),
        (
            "explicit_cached_content",
            Usage(input_tokens=8, cache_read_tokens=3512, output_tokens=44, reasoning_tokens=42),
        ),
        ("function_response_followup", Usage(input_tokens=88, output_tokens=15)),
        (
            "structured_output_2",
            Usage(input_tokens=26, output_tokens=424, reasoning_tokens=360),
        ),
    ],
)
async def test_usage_from_recorded_metadata(name: str, expected: Usage) -> None:
    meta = load("gemini", name)["response"]["body"]["usageMetadata"]
    usage = usage_from_metadata(meta)
    assert usage == Usage(
        input_tokens=expected.input_tokens,
        cache_read_tokens=expected.cache_read_tokens,
        output_tokens=expected.output_tokens,
        reasoning_tokens=expected.reasoning_tokens,
        requests=1,
    )
    assert usage.total_tokens == meta["totalTokenCount"]  # nothing counted twice


def test_function_response_followup_by_hand() -> None:
    """The neutral conversation, written out, builds the recorded contents."""
    from mainspring.models.gemini import build_contents

    exchange = load("gemini", "function_response_followup")
    recorded_contents = exchange["request"]["body"]["contents"]
    sig = std_b64(recorded_contents[1]["parts"][0]["thoughtSignature"])
    call_id = "pyd_ai_631cce761e7a447c931ccc129fe40f08"
    messages = [
        Message.user("What's the weather in Paris?"),
        Message(
            role="assistant",
            parts=(
                ThinkingPart(text="summary not sent back", signature=sig, provider="gemini"),
                ToolCallPart(id=call_id, name="get_weather", arguments={"city": "Paris"}),
            ),
        ),
        Message.tool_results(
            [ToolResultPart(tool_use_id=call_id, name="", content="Sunny, 22C in Paris")]
        ),
    ]
    built = [
        c.model_dump(mode="json", by_alias=True, exclude_none=True)
        for c in build_contents(messages)
    ]
    assert built == recorded_contents


def test_other_providers_thinking_is_dropped() -> None:
    from mainspring.models.gemini import build_contents

    messages = [
        Message.user("hi"),
        Message(
            role="assistant",
            parts=(
                ThinkingPart(text="hmm", signature="c2ln", provider="anthropic"),
                TextPart(text="hello"),
            ),
        ),
    ]
    built = [c.model_dump(mode="json", exclude_none=True) for c in build_contents(messages)]
    assert built[1] == {"role": "model", "parts": [{"text": "hello"}]}


# ------------------------------------------------------------------ settings


async def test_effort_and_tool_choice_by_name() -> None:
    rec = recorded(load("gemini", "text_stream"))
    settings = ModelSettings(effort="low", tool_choice="get_weather", max_tokens=100)
    spec = ToolSpec(name="get_weather", description="d", input_schema={"type": "object"})
    request = ModelRequest(
        system=(), messages=[Message.user("hi")], tools=(spec,), settings=settings
    )
    await run(model_for(rec, "gemini-2.5-flash"), request)
    body = rec.sent_json()
    assert body["generationConfig"] == {
        "maxOutputTokens": 100,
        "thinkingConfig": {"include_thoughts": True, "thinking_budget": 1024},
    }
    assert body["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}
    }


def test_effort_mapping() -> None:
    assert thinking_config("gemini-2.5-flash", "minimal").thinking_budget == 0
    assert thinking_config("gemini-2.5-flash", "minimal").include_thoughts is False
    assert thinking_config("gemini-2.5-pro", "minimal").thinking_budget == 128
    assert thinking_config("gemini-2.5-flash", "max").thinking_budget == 24576
    assert thinking_config("gemini-2.5-pro", "max").thinking_budget == 32768
    level = thinking_config("gemini-3-pro-preview", "medium").thinking_level
    assert level is not None and level.value == "HIGH"
    level = thinking_config("gemini-3-flash-preview", "minimal").thinking_level
    assert level is not None and level.value == "MINIMAL"


# ------------------------------------------------------------------ errors and retries


def error_exchange(status: int, reason: str, message: str, **headers: str) -> dict[str, Any]:
    """A synthetic Google error body (no recording has this status)."""
    body = {"error": {"code": status, "message": message, "status": reason}}
    return {"response": {"status": status, "headers_subset": headers, "body": body}}


def hello() -> ModelRequest:
    return ModelRequest(system=(), messages=[Message.user("hi")])


async def test_error_404_is_model_not_found() -> None:
    rec = recorded(load("gemini", "error_404"))
    with pytest.raises(ModelNotFound) as info:
        await run(model_for(rec, "gemini-3.6-flahs", retry=FAST), hello())
    assert info.value.status == 404 and info.value.provider == "gemini"
    assert not info.value.retryable
    assert "NOT_FOUND" in info.value.body
    assert len(rec.requests) == 1


async def test_429_is_retried_then_succeeds() -> None:
    limited = error_exchange(429, "RESOURCE_EXHAUSTED", "quota", **{"retry-after": "0"})
    rec = recorded(limited, load("gemini", "text_stream"))
    events = await run(model_for(rec, retry=FAST), hello())
    assert len(rec.requests) == 2
    assert isinstance(events[-1], ModelStop)


async def test_429_retry_delay_from_the_body() -> None:
    limited = error_exchange(429, "RESOURCE_EXHAUSTED", "quota")
    limited["response"]["body"]["error"]["details"] = [
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "17s"}
    ]
    rec = recorded(limited)
    with pytest.raises(RateLimited) as info:
        await run(model_for(rec, retry=ONCE), hello())
    assert info.value.retry_after == 17.0


@pytest.mark.parametrize(
    ("status", "reason", "error"),
    [(401, "UNAUTHENTICATED", AuthenticationError), (403, "PERMISSION_DENIED", PermissionDenied)],
)
async def test_auth_errors_are_not_retried(
    status: int, reason: str, error: type[Exception]
) -> None:
    rec = recorded(error_exchange(status, reason, "no"), load("gemini", "text_stream"))
    with pytest.raises(error):
        await run(model_for(rec, retry=FAST), hello())
    assert len(rec.requests) == 1


async def test_invalid_api_key_400_is_an_authentication_error() -> None:
    exchange = error_exchange(400, "INVALID_ARGUMENT", "API key not valid.")
    exchange["response"]["body"]["error"]["details"] = [{"reason": "API_KEY_INVALID"}]
    with pytest.raises(AuthenticationError):
        await run(model_for(recorded(exchange), retry=FAST), hello())


async def test_context_too_long() -> None:
    message = "The input token count (1200000) exceeds the maximum number of tokens allowed."
    rec = recorded(error_exchange(400, "INVALID_ARGUMENT", message))
    with pytest.raises(ContextTooLong):
        await run(model_for(rec, retry=FAST), hello())


async def test_503_is_overloaded_and_retried() -> None:
    rec = recorded(error_exchange(503, "UNAVAILABLE", "overloaded"))
    with pytest.raises(Overloaded) as info:
        await run(model_for(rec, retry=RetryPolicy(max_attempts=3, initial_backoff=0)), hello())
    assert info.value.retryable
    assert len(rec.requests) == 3


async def test_truncated_stream_is_a_retryable_output_error() -> None:
    exchange = load("gemini", "text_stream")
    events = exchange["response"]["sse"].split("\r\n\r\n")
    cut = {**exchange, "response": {**exchange["response"], "sse": "\r\n\r\n".join(events[:2])}}
    rec = recorded(cut)
    got: list[ModelEvent] = []
    stream = model_for(rec, retry=FAST).stream(hello())
    with pytest.raises(ModelOutputError) as info:
        while True:
            got.append(await anext(stream))
    assert info.value.retryable
    assert [e.text for e in of_type(got, TextDelta)] == ["The", " capital of France"]
    assert len(rec.requests) == 1  # text was already streamed: surfaced, not replayed


async def test_timeout_is_retried() -> None:
    calls: list[httpx.Request] = []
    ok = recorded(load("gemini", "text_stream"))

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) == 1:
            raise httpx.ReadTimeout("slow", request=request)
        return ok.handler(request)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    model = GeminiModel("gemini-2.5-flash", api_key="k", http_client=client, retry=FAST)
    events = await run(model, hello())
    assert len(calls) == 2 and isinstance(events[-1], ModelStop)

    calls.clear()
    transport = httpx.MockTransport(handler)
    model = GeminiModel("gemini-2.5-flash", api_key="k", transport=transport, retry=ONCE)
    with pytest.raises(ModelTimeout):
        await run(model, hello())


# ------------------------------------------------------------------ end to end


async def test_session_runs_one_tool_round_on_recorded_traffic() -> None:
    first = load("gemini", "function_call_stream")
    second = load("gemini", "function_response_followup_stream")
    rec = recorded(first, second)

    @tool(read_only=True)
    def get_country() -> str:
        """The user's country."""
        return "Mexico"

    model = model_for(rec, "gemini-3-pro-preview")
    session = Session(Agent(model=model, tools=[get_country]))
    events = await send(session, "What is the capital of the user country? Call the tool")

    assert events[-1].type == "turn_complete"
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "The capital of Mexico is Mexico City."
    assert len(rec.requests) == 2
    # The follow-up request is the recorded one, up to the call id we synthesized.
    sent: list[JsonValue] = as_provider_ids(rec.sent_json(1)["contents"], session.messages)
    expected = json.loads(
        json.dumps(second["request"]["body"]["contents"]).replace(
            "pyd_ai_29bf73b69e02448588e15893d47a3e7e", "call_0"
        )
    )
    assert sent == expected
    assert session.usage.reasoning_tokens == 202


def test_the_timeout_of_a_given_client_is_kept() -> None:
    import httpx2

    from mainspring.models.gemini import DEFAULT_TIMEOUT, _timeout_seconds

    assert _timeout_seconds(None, httpx2.AsyncClient(timeout=0.2)) == pytest.approx(0.2)
    assert _timeout_seconds(3.0, httpx2.AsyncClient(timeout=0.2)) == 3.0
    assert _timeout_seconds(None, None) == DEFAULT_TIMEOUT
