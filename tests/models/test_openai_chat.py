"""OpenAIChatModel against recorded Chat Completions traffic, through the real SDK.

Every ``openai/chat_*`` and ``openai_compatible/*`` recording is used twice:

- **Request building**: the recorded conversation is turned back into its
  neutral equivalent (:func:`neutral_request`), the adapter builds its body,
  and the two are compared after :func:`comparable` removes what legitimately
  differs (``stream``/``stream_options``: the adapter always streams; the
  ``strict`` flag of recorded tools; ``response_format`` beyond its schema;
  a part-level cache mark on a user text part, which has no neutral form).
- **Response parsing**: SSE recordings are served as recorded. JSON (non-stream)
  recordings are served as a *synthetic* SSE stream derived from the recorded
  body (:func:`sse_from_completion`: reasoning, text and tool-call arguments in
  fragments, the finish chunk, then the recorded ``usage`` in a
  ``choices: []`` chunk), since the adapter always streams. Usage and stop
  reason are also checked with the pure functions on the recorded body.

Error bodies are served as recorded (status and JSON). Headers or statuses not
in a recording (``retry-after``, 401, 500, 503, cut streams) are synthetic and
say so.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx2
import pytest

from mainspring import Agent, Session, tool
from mainspring.errors import (
    AuthenticationError,
    BadRequest,
    ContextTooLong,
    ModelError,
    ModelNotFound,
    ModelOutputError,
    ModelUnreachable,
    Overloaded,
    RateLimited,
    ServerError,
)
from mainspring.events import TextDelta, ThinkingDelta, ThinkingDone, ToolCallDelta
from mainspring.messages import (
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from mainspring.models.base import (
    ModelEvent,
    ModelRequest,
    ModelSettings,
    ModelStop,
    ModelUsage,
    SystemBlock,
    ToolCallEnd,
    ToolSpec,
)
from mainspring.models.openai import (
    OpenAIChatModel,
    build_chat_request,
    stop_reason,
    usage_from_openai,
)
from mainspring.models.retry import RetryPolicy
from mainspring.usage import Usage
from tests.helpers import send
from tests.models.wire import WIRE, Recorded, as_provider_ids, load, recorded

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


FAST = RetryPolicy(max_attempts=3, initial_backoff=0, max_backoff=0, jitter=0, deadline=5)
ONCE = RetryPolicy(max_attempts=1)

CHAT = sorted(p.stem for p in (WIRE / "openai").glob("chat_*.json"))
COMPAT = sorted(p.stem for p in (WIRE / "openai_compatible").glob("*.json"))
ALL = [("openai", n) for n in CHAT] + [("openai_compatible", n) for n in COMPAT]
ERRORS = {"chat_error_404", "groq_error_400_tool_use_failed", "openrouter_error_429"}

HOSTS = {
    "api.openai.com": ("openai", "https://api.openai.com/v1"),
    "api.deepseek.com": ("deepseek", "https://api.deepseek.com"),
    "api.groq.com": ("groq", "https://api.groq.com/openai/v1"),
    "openrouter.ai": ("openrouter", "https://openrouter.ai/api/v1"),
    "localhost:11434": ("ollama", "http://localhost:11434/v1"),
    "generativelanguage.googleapis.com": (
        "gemini",
        "https://generativelanguage.googleapis.com/v1beta/openai",
    ),
}


def model_for(
    exchange: dict[str, Any], rec: Recorded, *, retry: RetryPolicy = FAST
) -> OpenAIChatModel:
    provider, base_url = HOSTS[exchange["request"]["host"]]
    return OpenAIChatModel(
        exchange["request"]["body"]["model"],
        api_key="sk-test",
        base_url=base_url,
        http_client=rec.client(),
        retry=retry,
        provider=provider,
    )


async def collect(stream: AsyncIterator[ModelEvent]) -> list[ModelEvent]:
    return [event async for event in stream]


def of_type(events: list[ModelEvent], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


# ------------------------------------------------- recorded body -> neutral request


def _assistant_parts(m: dict[str, Any], provider: str) -> list[Part]:
    parts: list[Part] = []
    if "reasoning_content" in m:
        parts.append(ThinkingPart(text=m["reasoning_content"], provider=provider))
    if m.get("content"):
        parts.append(TextPart(text=m["content"]))
    parts.extend(
        ToolCallPart(
            id=c["id"],
            name=c["function"]["name"],
            arguments=json.loads(c["function"]["arguments"]),
        )
        for c in m.get("tool_calls") or ()
    )
    return parts


def _user_parts(content: str | list[dict[str, Any]]) -> tuple[Part, ...]:
    if isinstance(content, str):
        return (TextPart(text=content),)
    return tuple(TextPart(text=p["text"]) for p in content)


def neutral_messages(
    recorded_messages: list[dict[str, Any]], provider: str
) -> tuple[tuple[SystemBlock, ...], list[Message]]:
    system: list[SystemBlock] = []
    messages: list[Message] = []
    names: dict[str, str] = {}
    for m in recorded_messages:
        if m["role"] == "system":
            system.append(SystemBlock(text=m["content"]))
        elif m["role"] == "user":
            messages.append(Message(role="user", parts=_user_parts(m["content"])))
        elif m["role"] == "assistant":
            parts = _assistant_parts(m, provider)
            names.update({p.id: p.name for p in parts if isinstance(p, ToolCallPart)})
            messages.append(Message(role="assistant", parts=tuple(parts)))
        else:
            result = ToolResultPart(
                tool_use_id=m["tool_call_id"], name=names[m["tool_call_id"]], content=m["content"]
            )
            if messages and messages[-1].role == "tool":
                messages[-1] = Message.tool_results((*messages[-1].parts, result))  # type: ignore[arg-type]  # all parts are results
            else:
                messages.append(Message.tool_results([result]))
    return tuple(system), messages


NEUTRAL_KEYS = {"model", "messages", "tools", "tool_choice", "response_format", "stream"}
NEUTRAL_KEYS |= {"stream_options", "reasoning_effort"}


def neutral_request(body: dict[str, Any], provider: str) -> ModelRequest:
    system, messages = neutral_messages(body["messages"], provider)
    tools = tuple(
        ToolSpec(
            name=t["function"]["name"],
            description=t["function"]["description"],
            input_schema=t["function"]["parameters"],
        )
        for t in body.get("tools", ())
    )
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        choice = choice["function"]["name"]
    schema = body.get("response_format", {}).get("json_schema", {}).get("schema")
    settings = ModelSettings(
        tool_choice=choice,
        output_schema=schema,
        effort=body.get("reasoning_effort"),
        extra={k: v for k, v in body.items() if k not in NEUTRAL_KEYS},
    )
    return ModelRequest(system=system, messages=messages, tools=tools, settings=settings)


def comparable(body: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
    messages = []
    for m in body["messages"]:
        m = dict(m)
        if m["role"] == "assistant":
            m.setdefault("content", None)
            if m.get("tool_calls") and m["content"] is None:
                # These recordings sent null, which OpenAI takes; the adapter sends
                # "" (local servers refuse null): see test_request_matches_the_recording.
                m["content"] = ""
            m["tool_calls"] = [  # any JSON spelling of the same arguments
                {
                    **c,
                    "function": {
                        **c["function"],
                        "arguments": json.loads(c["function"]["arguments"]),
                    },
                }
                for c in m.get("tool_calls", ())
            ] or None
        if m["role"] == "user" and isinstance(m["content"], list):
            if all(p["type"] == "text" for p in m["content"]):
                m["content"] = "".join(p["text"] for p in m["content"])
        messages.append(m)
    out["messages"] = messages
    if "tools" in out:
        out["tools"] = [
            {"type": "function", "function": {**t["function"], "strict": None}}
            for t in out["tools"]
        ]
        for t in out["tools"]:
            t["function"].pop("strict")
    if "response_format" in out:
        fmt = out["response_format"]
        out["response_format"] = {"type": fmt["type"], "schema": fmt["json_schema"]["schema"]}
    return out


@pytest.mark.parametrize(("provider", "name"), ALL)
async def test_request_matches_the_recording(provider: str, name: str) -> None:
    exchange = load(provider, name)
    recorded_body = exchange["request"]["body"]
    rec = recorded(exchange if name in ERRORS else as_stream(exchange))
    model = model_for(exchange, rec, retry=ONCE)
    request = neutral_request(recorded_body, model.provider)
    built = model.build_request(request)
    assert built["stream"] is True
    assert built["stream_options"] == {"include_usage": True}
    assert comparable(built) == comparable(recorded_body)
    for message in built["messages"]:
        if message["role"] == "assistant" and message.get("tool_calls"):
            assert isinstance(message["content"], str), "null content is refused by local servers"
    # and that body is exactly what went over the wire through the SDK
    with pytest.raises(ModelError) if name in ERRORS else contextlib.nullcontext():
        await collect(model.stream(request))
    assert rec.sent_json() == built


# ------------------------------------------------- responses -> neutral events


def sse_from_completion(body: dict[str, Any]) -> str:
    """A synthetic SSE stream carrying exactly what a recorded JSON completion holds."""
    base = {k: body[k] for k in ("id", "created", "model")}
    base["object"] = "chat.completion.chunk"
    choice = body["choices"][0]
    message = choice["message"]
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    for key in ("reasoning_content", "reasoning"):
        if message.get(key):
            text = message[key]
            deltas += [{key: text[: len(text) // 2]}, {key: text[len(text) // 2 :]}]
    if message.get("content"):
        text = message["content"]
        deltas += [{"content": text[: len(text) // 2]}, {"content": text[len(text) // 2 :]}]
    for index, call in enumerate(message.get("tool_calls") or ()):
        args = call["function"]["arguments"]
        head = {"index": index, "id": call["id"], "type": "function"}
        head["function"] = {"name": call["function"]["name"], "arguments": args[:3]}
        deltas += [
            {"tool_calls": [head]},
            {"tool_calls": [{"index": index, "function": {"arguments": args[3:]}}]},
        ]
    chunks = [
        {**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas
    ]
    finish = {"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}
    chunks.append({**base, "choices": [finish]})
    chunks.append({**base, "choices": [], "usage": body["usage"]})
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"


def as_stream(exchange: dict[str, Any]) -> dict[str, Any]:
    response = exchange["response"]
    if "sse" in response:
        return exchange
    return {**exchange, "response": {"status": 200, "sse": sse_from_completion(response["body"])}}


def completion_usage(exchange: dict[str, Any]) -> dict[str, Any]:
    response = exchange["response"]
    if "body" in response:
        usage: dict[str, Any] = response["body"]["usage"]
        return usage
    for line in reversed(response["sse"].splitlines()):
        if line.startswith("data: {") and '"usage":{' in line:
            usage = json.loads(line[6:])["usage"]
            return usage
    raise AssertionError("no usage in the recording")


SUCCESSES = [(p, n) for p, n in ALL if n not in ERRORS]


@pytest.mark.parametrize(("provider", "name"), SUCCESSES)
async def test_every_recorded_response_becomes_neutral_events(provider: str, name: str) -> None:
    exchange = load(provider, name)
    rec = recorded(as_stream(exchange))
    model = model_for(exchange, rec)
    events = await collect(model.stream(neutral_request(exchange["request"]["body"], "x")))
    stop = events[-1]
    assert isinstance(stop, ModelStop)
    assert len(of_type(events, ModelStop)) == 1
    usage = of_type(events, ModelUsage)
    assert [u.usage for u in usage] == [usage_from_openai(completion_usage(exchange))]
    ends = of_type(events, ToolCallEnd)
    if "body" in exchange["response"]:  # the recorded message, reassembled
        body = exchange["response"]["body"]
        message = body["choices"][0]["message"]
        assert stop.model == body["model"]
        assert stop.stop_reason == stop_reason(body["choices"][0]["finish_reason"])
        text = "".join(e.text for e in of_type(events, TextDelta))
        assert text == (message.get("content") or "")
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if reasoning:
            (done,) = of_type(events, ThinkingDone)
            assert done.text == reasoning
            assert done.provider == model.provider
        calls = message.get("tool_calls") or []
        assert [(e.name, e.arguments) for e in ends] == [
            (c["function"]["name"], c["function"]["arguments"]) for c in calls
        ]
        assert [e.tool_use_id for e in ends] == [
            c["id"] or e.tool_use_id for c, e in zip(calls, ends, strict=True)
        ]
        assert all(e.tool_use_id for e in ends)
    for end in ends:  # fragments add up to each call's arguments
        pieces = [d.args_delta for d in of_type(events, ToolCallDelta) if d.index == end.index]
        assert "".join(pieces) == end.arguments or end.arguments == "{}"


# ------------------------------------------------- specific recordings


async def test_text_stream() -> None:
    exchange = load("openai", "chat_text_stream")
    rec = recorded(exchange)
    model = model_for(exchange, rec)
    events = await collect(model.stream(ModelRequest(system=(), messages=[Message.user("hi")])))
    assert "".join(e.text for e in of_type(events, TextDelta)) == (
        "The capital of Mexico is Mexico City."
    )
    assert of_type(events, ModelUsage) == [
        ModelUsage(usage=Usage(input_tokens=14, output_tokens=8, requests=1))
    ]
    assert events[-1] == ModelStop(stop_reason="end_turn", model="gpt-4o-2024-08-06")
    assert model.name == "openai:gpt-4o"


async def test_tool_call_stream_fragments() -> None:
    exchange = load("openai", "chat_tool_call_stream")
    model = model_for(exchange, recorded(exchange))
    events = await collect(model.stream(ModelRequest(system=(), messages=[Message.user("x")])))
    deltas = of_type(events, ToolCallDelta)
    assert [d.args_delta for d in deltas] == ['{"', "country", '":"', "UK", '"}']
    assert {(d.tool_use_id, d.name, d.index) for d in deltas} == {
        ("call_ZR5UUuTt3pf61kjwAJIYdVMj", "get_capital", 0)
    }
    assert of_type(events, ToolCallEnd) == [
        ToolCallEnd(
            tool_use_id="call_ZR5UUuTt3pf61kjwAJIYdVMj",
            name="get_capital",
            index=0,
            arguments='{"country":"UK"}',
        )
    ]
    # the call ends at finish_reason, before usage and stop
    assert [type(e).__name__ for e in events[-3:]] == ["ToolCallEnd", "ModelUsage", "ModelStop"]
    assert events[-1] == ModelStop(stop_reason="tool_use", model="gpt-4o-mini-2024-07-18")
    assert of_type(events, ModelUsage)[0].usage == Usage(
        input_tokens=53, output_tokens=15, requests=1
    )


async def test_parallel_tool_call_stream() -> None:
    exchange = load("openai", "chat_parallel_tool_calls_stream")
    model = model_for(exchange, recorded(exchange))
    events = await collect(model.stream(ModelRequest(system=(), messages=[Message.user("x")])))
    assert [
        (e.tool_use_id, e.name, e.index, e.arguments) for e in of_type(events, ToolCallEnd)
    ] == [
        ("call_q2UyBRP7eXNTzAoR8lEhjc9Z", "get_country", 0, "{}"),
        ("call_b51ijcpFkDiTQG1bQzsrmtW5", "get_product_name", 1, "{}"),
    ]
    stop = events[-1]
    assert isinstance(stop, ModelStop)
    assert stop.stop_reason == "tool_use"


async def test_openrouter_reasoning_stream_with_comment_lines() -> None:
    exchange = load("openai_compatible", "openrouter_stream_reasoning")
    model = model_for(exchange, recorded(exchange))
    events = await collect(model.stream(ModelRequest(system=(), messages=[Message.user("x")])))
    thinking = "".join(e.text for e in of_type(events, ThinkingDelta))
    assert thinking == "This is a simple arithmetic question. 2+2 equals 4."
    (done,) = of_type(events, ThinkingDone)
    assert done.text == thinking
    assert done.provider == "openrouter"
    assert done.signature is not None and done.signature.startswith("Et0BCkgIChAC")
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("ThinkingDone") < kinds.index("TextDelta")
    assert "".join(e.text for e in of_type(events, TextDelta)) == "2 + 2 = 4"
    assert of_type(events, ModelUsage)[0].usage == Usage(
        input_tokens=43, output_tokens=36, reasoning_tokens=13, requests=1
    )
    assert events[-1] == ModelStop(stop_reason="end_turn", model="anthropic/claude-sonnet-4.5")


async def test_gemini_compat_empty_tool_id_gets_a_unique_id() -> None:
    exchange = load("openai_compatible", "gemini_openai_compat_tool_call")
    model = model_for(exchange, recorded(as_stream(exchange), as_stream(exchange)))
    request = ModelRequest(system=(), messages=[Message.user("x")])
    first = of_type(await collect(model.stream(request)), ToolCallEnd)
    second = of_type(await collect(model.stream(request)), ToolCallEnd)
    assert [e.name for e in first] == ["get_current_time"]
    assert first[0].tool_use_id.startswith("call_") and len(first[0].tool_use_id) > 10
    # Unique even across processes: a resumed session never sees an id twice.
    assert second[0].tool_use_id != first[0].tool_use_id


def test_usage_normalization_never_double_counts_cache() -> None:
    cached = load("openai", "chat_cached_tokens")["response"]["body"]["usage"]
    assert usage_from_openai(cached) == Usage(
        input_tokens=8, cache_read_tokens=4012, output_tokens=4, requests=1
    )
    reasoning = load("openai", "chat_reasoning_tokens")["response"]["body"]["usage"]
    assert usage_from_openai(reasoning) == Usage(
        input_tokens=577, output_tokens=2320, reasoning_tokens=1792, requests=1
    )
    deepseek = load("openai_compatible", "deepseek_cached_tool_result")["response"]["body"]
    usage = usage_from_openai(deepseek["usage"])
    assert usage == Usage(
        input_tokens=80, cache_read_tokens=896, output_tokens=61, reasoning_tokens=25, requests=1
    )
    assert usage.total_input_tokens == deepseek["usage"]["prompt_tokens"]
    groq = load("openai_compatible", "groq_parallel_tool_calls")["response"]["body"]["usage"]
    assert usage_from_openai(groq) == Usage(input_tokens=779, output_tokens=65, requests=1)


def test_stop_reasons() -> None:
    assert stop_reason("stop") == "end_turn"
    assert stop_reason("tool_calls") == "tool_use"
    assert stop_reason("length") == "max_tokens"
    assert stop_reason("content_filter") == "refusal"
    assert stop_reason("stop", has_tool_calls=True) == "tool_use"


# ------------------------------------------------- request details


def _request(**settings: Any) -> ModelRequest:
    return ModelRequest(
        system=(
            SystemBlock(text="stable rules", cache_breakpoint=True),
            SystemBlock(text="today"),
        ),
        messages=[Message.user("hi")],
        tools=(ToolSpec(name="get", description="d", input_schema={"type": "object"}),),
        settings=ModelSettings(**settings),
    )


def test_settings_map_to_chat_fields() -> None:
    body = build_chat_request(
        "o3-mini",
        _request(
            tool_choice="get",
            effort="max",
            max_tokens=100,
            temperature=0.5,
            output_schema={"title": "City Info", "type": "object"},
            extra={"seed": 7},
        ),
    )
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get"}}
    assert body["reasoning_effort"] == "high"
    assert body["max_completion_tokens"] == 100
    assert body["temperature"] == 0.5
    assert body["seed"] == 7
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "City_Info",
            "schema": {"title": "City Info", "type": "object"},
            "strict": False,  # an open object: strict mode would refuse the schema
        },
    }
    assert body["messages"][:2] == [
        {"role": "system", "content": "stable rules"},
        {"role": "system", "content": "today"},
    ]
    assert "reasoning_effort" not in build_chat_request("gpt-4o", _request(effort="low"))
    compat = build_chat_request("llama", _request(effort="minimal", max_tokens=5), provider="vllm")
    assert compat["reasoning_effort"] == "minimal"
    assert compat["max_tokens"] == 5


def test_openrouter_cache_marks_and_effort() -> None:
    body = build_chat_request(
        "anthropic/claude-sonnet-4.5",
        _request(effort="medium"),
        provider="openrouter",
        openrouter=True,
    )
    assert body["messages"][0] == {
        "role": "system",
        "content": [
            {"type": "text", "text": "stable rules", "cache_control": {"type": "ephemeral"}}
        ],
    }
    assert body["messages"][1] == {"role": "system", "content": "today"}
    assert body["reasoning"] == {"effort": "medium"}


def test_thinking_is_dropped_for_openai_and_echoed_to_its_own_server() -> None:
    history = [
        Message.user("q"),
        Message(
            role="assistant",
            parts=(
                ThinkingPart(text="mine", provider="deepseek"),
                ThinkingPart(text="signed", signature="sig", provider="anthropic"),
                TextPart(text="a"),
            ),
        ),
    ]
    request = ModelRequest(system=(), messages=history)
    openai_msg = build_chat_request("gpt-4o", request)["messages"][1]
    assert openai_msg == {"role": "assistant", "content": "a"}
    deepseek_msg = build_chat_request("deepseek-chat", request, provider="deepseek")["messages"][1]
    assert deepseek_msg == {"role": "assistant", "content": "a", "reasoning_content": "mine"}


def test_images_become_content_parts() -> None:
    from mainspring.messages import ImagePart

    message = Message(
        role="user",
        parts=(TextPart(text="what?"), ImagePart(media_type="image/png", data="AAAA")),
    )
    body = build_chat_request("gpt-4o", ModelRequest(system=(), messages=[message]))
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        }
    ]


# ------------------------------------------------- errors and retries


def plain(req: ModelRequest | None = None) -> ModelRequest:
    return req or ModelRequest(system=(), messages=[Message.user("hello")])


def synthetic(status: int, body: dict[str, Any], **headers: str) -> dict[str, Any]:
    """A hand-written (not recorded) error exchange."""
    return {
        "request": {"host": "api.openai.com", "body": {"model": "gpt-4o"}},
        "response": {"status": status, "headers_subset": headers, "body": body},
    }


async def test_recorded_404_is_model_not_found_and_not_retried() -> None:
    exchange = load("openai", "chat_error_404")
    rec = recorded(exchange)
    model = model_for(exchange, rec)
    with pytest.raises(ModelNotFound, match="does not exist") as info:
        await collect(model.stream(plain()))
    assert info.value.status == 404
    assert info.value.provider == "openai"
    assert not info.value.retryable
    assert "model_not_found" in info.value.body
    assert len(rec.requests) == 1


async def test_recorded_groq_tool_use_failed_is_bad_request() -> None:
    exchange = load("openai_compatible", "groq_error_400_tool_use_failed")
    rec = recorded(exchange)
    model = model_for(exchange, rec)
    with pytest.raises(BadRequest, match="Tool call validation failed") as info:
        await collect(model.stream(plain()))
    assert not isinstance(info.value, ContextTooLong)
    assert info.value.provider == "groq"
    assert not info.value.retryable
    assert "failed_generation" in info.value.body
    assert len(rec.requests) == 1


async def test_recorded_openrouter_429_is_rate_limited() -> None:
    exchange = load("openai_compatible", "openrouter_error_429")
    rec = recorded(exchange)
    model = model_for(exchange, rec, retry=ONCE)
    with pytest.raises(RateLimited, match="temporarily rate-limited upstream") as info:
        await collect(model.stream(plain()))
    assert info.value.retryable
    assert info.value.retry_after is None  # the recording has no retry-after
    assert info.value.provider == "openrouter"


async def test_429_with_retry_after_is_retried_then_succeeds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    limited = load("openai_compatible", "openrouter_error_429")
    limited = {**limited, "response": {**limited["response"]}}
    limited["response"]["headers_subset"] = {"retry-after": "3"}  # synthetic header
    rec = recorded(limited, load("openai", "chat_text_stream"))
    slept: list[float] = []
    real_sleep = anyio.sleep

    async def fake_sleep(delay: float) -> None:
        slept.append(delay)
        await real_sleep(0)

    monkeypatch.setattr(anyio, "sleep", fake_sleep)
    model = model_for(limited, rec)
    events = await collect(model.stream(plain()))
    assert slept == [3.0]
    assert len(rec.requests) == 2
    assert "".join(e.text for e in of_type(events, TextDelta)).startswith("The capital")


@pytest.mark.parametrize(
    ("status", "body", "error", "retryable"),
    [
        (
            401,
            {"error": {"message": "Incorrect API key", "code": "invalid_api_key"}},
            AuthenticationError,
            False,
        ),
        (
            400,
            {"error": {"message": "too long", "code": "context_length_exceeded"}},
            ContextTooLong,
            False,
        ),
        (500, {"error": {"message": "boom"}}, ServerError, True),
        (503, {"error": {"message": "busy"}}, Overloaded, True),
        (529, {"error": {"message": "overloaded"}}, Overloaded, True),
    ],
)
async def test_synthetic_statuses_map_to_typed_errors(
    status: int, body: dict[str, Any], error: type[ModelError], retryable: bool
) -> None:
    exchange = synthetic(status, body)
    rec = recorded(exchange)
    with pytest.raises(error) as info:
        await collect(model_for(exchange, rec).stream(plain()))
    assert info.value.retryable is retryable
    assert len(rec.requests) == (FAST.max_attempts if retryable else 1)


async def test_server_error_then_success_is_retried() -> None:
    rec = recorded(
        synthetic(500, {"error": {"message": "boom"}}), load("openai", "chat_text_stream")
    )
    events = await collect(model_for(synthetic(500, {}), rec).stream(plain()))
    assert isinstance(events[-1], ModelStop)
    assert len(rec.requests) == 2


def _stream_model(handler: Callable[[httpx2.Request], httpx2.Response]) -> OpenAIChatModel:
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    return OpenAIChatModel("gpt-4o", api_key="sk-test", http_client=client, retry=ONCE)


def _cut(sse: str, marker: str) -> str:
    return sse[: sse.index(marker)]


async def test_stream_cut_before_finish_is_retryable_output_error() -> None:
    sse = _cut(load("openai", "chat_text_stream")["response"]["sse"], '"finish_reason":"stop"')
    sse = sse[: sse.rindex("data: ")]

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=sse)

    events: list[ModelEvent] = []
    with pytest.raises(ModelOutputError, match="without a finish_reason") as info:
        async for event in _stream_model(handler).stream(plain()):
            events.append(event)  # noqa: PERF401  # keep what streamed before the error
    assert info.value.retryable
    assert of_type(events, TextDelta)
    assert not of_type(events, ModelStop)


async def test_truncated_stream_with_nothing_yielded_is_retried() -> None:
    calls = 0
    full = load("openai", "chat_text_stream")["response"]["sse"]

    def handler(request: httpx2.Request) -> httpx2.Response:
        nonlocal calls
        calls += 1
        content = "data: [DONE]\n\n" if calls == 1 else full  # synthetic: empty first stream
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=content)

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    model = OpenAIChatModel("gpt-4o", api_key="sk-test", http_client=client, retry=FAST)
    events = await collect(model.stream(plain()))
    assert calls == 2
    assert isinstance(events[-1], ModelStop)


async def test_malformed_sse_frame_is_output_error() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content="data: {not json\n\n"
        )

    with pytest.raises(ModelOutputError) as info:
        await collect(_stream_model(handler).stream(plain()))
    assert info.value.retryable


async def test_a_refused_connection_is_a_retryable_unreachable_server() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused", request=request)

    with pytest.raises(ModelUnreachable) as info:
        await collect(_stream_model(handler).stream(plain()))
    assert info.value.retryable
    assert info.value.provider == "openai"
    assert "could not reach openai" in str(info.value) and "connection refused" in str(info.value)


def test_openai_without_key_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from mainspring.errors import ConfigError

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError):
        OpenAIChatModel("gpt-4o")
    OpenAIChatModel("llama3.2", base_url="http://localhost:11434/v1", provider="ollama")


# ------------------------------------------------- end to end


async def test_session_runs_one_tool_round_on_recorded_traffic() -> None:
    call = load("openai", "chat_tool_call_stream")
    followup = load("openai", "chat_tool_result_followup_stream")
    rec = recorded(call, followup)
    seen: list[str] = []

    @tool
    def get_capital(country: str) -> str:
        """The capital of a country."""
        seen.append(country)
        return "London"

    model = model_for(call, rec)
    session = Session(Agent(model=model, tools=[get_capital]))
    started = time.monotonic()
    events = await send(session, "What is the capital of the UK? Use the tool, then answer.")
    assert time.monotonic() - started < 10
    assert seen == ["UK"]
    assert events[-1].type == "turn_complete"
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "The capital of the UK is London."
    second = as_provider_ids(rec.sent_json(1)["messages"], session.messages)
    assert second[1]["tool_calls"][0]["id"] == "call_ZR5UUuTt3pf61kjwAJIYdVMj"
    assert second[2] == {
        "role": "tool",
        "tool_call_id": "call_ZR5UUuTt3pf61kjwAJIYdVMj",
        "content": "London",
    }


def tool_turn_with_images() -> list[Message]:
    from mainspring.messages import ImagePart, ToolCallPart, ToolResultPart

    return [
        Message.user("look"),
        Message(
            role="assistant",
            parts=(
                ToolCallPart(id="c1", name="shot", arguments={}),
                ToolCallPart(id="c2", name="plain", arguments={}),
            ),
        ),
        Message(
            role="tool",
            parts=(
                ToolResultPart(
                    tool_use_id="c1",
                    name="shot",
                    content="a chart",
                    images=(ImagePart(media_type="image/png", data="AAAA"),),
                ),
                ToolResultPart(tool_use_id="c2", name="plain", content="text only"),
            ),
        ),
    ]


def test_tool_result_images_follow_the_tool_messages() -> None:
    request = ModelRequest(system=(), messages=tool_turn_with_images())
    messages = build_chat_request("gpt-4o", request)["messages"]
    assert messages[2:] == [
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": (
                "a chart\n[the tool also returned 1 image (image/png): shown in the next message]"
            ),
        },
        {"role": "tool", "tool_call_id": "c2", "content": "text only"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Images returned by shot (c1):"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
    ]


def test_tool_result_images_become_a_note_for_a_text_only_server() -> None:
    model = OpenAIChatModel("llama3.2", base_url="http://127.0.0.1:9/v1", tool_images="note")
    body = model.build_request(ModelRequest(system=(), messages=tool_turn_with_images()))
    assert body["messages"][2]["content"] == (
        "a chart\n[the tool also returned 1 image (image/png), "
        "which could not be shown to you here]"
    )
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool", "tool"]
