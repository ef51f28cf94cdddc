"""AnthropicModel against recorded Messages API traffic, through the real ``anthropic`` SDK.

Every recorded exchange in ``shared/fixtures/wire/anthropic`` is replayed by an
``httpx2.MockTransport``. Expected values are read straight from the recording
(a tiny independent SSE reader below), and the request the adapter sent is
compared with the recorded request built from the neutral equivalent of the
same conversation. Error cases the recordings lack (429, 401, 5xx, broken
streams) are synthetic responses, labelled as such.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, cast

import httpx2
import pytest
from pydantic import JsonValue

from mainspring import Agent, Session, ToolResult, TurnComplete, tool
from mainspring.errors import (
    AuthenticationError,
    BadRequest,
    ContextTooLong,
    ModelError,
    ModelNotFound,
    ModelOutputError,
    ModelTimeout,
    Overloaded,
    RateLimited,
    ServerError,
)
from mainspring.events import TextDelta, ThinkingDelta, ThinkingDone, ToolCallDelta
from mainspring.messages import (
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from mainspring.models.anthropic import (
    THINKING_BUDGETS,
    AnthropicModel,
    anthropic_usage,
    request_body,
)
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
from mainspring.models.retry import RetryPolicy
from mainspring.usage import Usage
from tests.models.wire import Recorded, as_provider_ids, load, recorded

pytestmark = [
    pytest.mark.anyio,
    # The SDK warns about the recorded (now deprecated) model names; that is not under test.
    pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning"),
]

T = TypeVar("T")

FAST = RetryPolicy(max_attempts=3, initial_backoff=0, max_backoff=0, jitter=0, deadline=5)
ONCE = RetryPolicy(max_attempts=1)

STREAMS = [
    "text_stream",
    "thinking_stream",
    "tool_use_stream_args",
    "parallel_tool_use_stream",
    "thinking_tool_use_stream",
    "tool_result_followup_stream",
    "thinking_tool_result_stream",
    "redacted_thinking_stream",
    "server_tool_web_search_stream",
]
JSON_REPLIES = [
    "text_basic",
    "tool_use",
    "parallel_tool_use",
    "thinking_tool_use",
    "tool_result_followup",
    "thinking_tool_result",
    "redacted_thinking",
    "cache_read_write",
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- helpers -------------------------------------------------------------------


def of_type(events: Sequence[object], kind: type[T]) -> list[T]:
    return [e for e in events if isinstance(e, kind)]


def adapter(rec: Recorded, *, retry: RetryPolicy = FAST, model: str = "m") -> AnthropicModel:
    return AnthropicModel(model, api_key="test-key", http_client=rec.client(), retry=retry)


async def collect(model: Model, request: ModelRequest) -> list[ModelEvent]:
    return [e async for e in model.stream(request)]


def hello() -> ModelRequest:
    return ModelRequest(system=(), messages=[Message.user("hi")])


def _block_to_part(block: dict[str, Any]) -> Part:
    kind = block["type"]
    if kind == "text":
        return TextPart(text=block["text"])
    if kind == "tool_use":
        return ToolCallPart(id=block["id"], name=block["name"], arguments=block["input"])
    if kind == "tool_result":
        return ToolResultPart(
            tool_use_id=block["tool_use_id"],
            name="",
            content=block["content"],
            is_error=block.get("is_error", False),
        )
    if kind == "thinking":
        return ThinkingPart(
            text=block["thinking"], signature=block["signature"], provider="anthropic"
        )
    assert kind == "redacted_thinking", kind
    return ThinkingPart(text="", signature=block["data"], redacted=True, provider="anthropic")


def neutral(body: dict[str, Any]) -> ModelRequest:
    """The neutral request equivalent to a recorded Messages API body."""
    messages: list[Message] = []
    for m in body["messages"]:
        content = m["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        parts = tuple(_block_to_part(b) for b in blocks)
        role: Literal["user", "assistant"] = "assistant" if m["role"] == "assistant" else "user"
        if role == "user" and all(isinstance(p, ToolResultPart) for p in parts):
            messages.append(Message(role="tool", parts=parts))
        else:
            messages.append(Message(role=role, parts=parts))
    extra: dict[str, JsonValue] = {}
    tools = [
        ToolSpec(name=t["name"], description=t["description"], input_schema=t["input_schema"])
        for t in body.get("tools", [])
        if "type" not in t and "defer_loading" not in t
    ]
    if len(tools) != len(body.get("tools", [])):
        extra["tools"] = body["tools"]  # server tools: passed through settings.extra
    if "thinking" in body:
        extra["thinking"] = body["thinking"]  # exact recorded budget, not an effort level
    system = body.get("system")
    return ModelRequest(
        system=(SystemBlock(text=system),) if system else (),
        messages=messages,
        tools=tuple(tools),
        settings=ModelSettings(
            max_tokens=body["max_tokens"],
            temperature=body.get("temperature"),
            tool_choice=body.get("tool_choice", {}).get("type"),
            extra=extra,
        ),
    )


def comparable(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Recorded messages as the adapter writes them (string content as a text block)."""
    out = []
    for m in messages:
        content = m["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        blocks = [{k: v for k, v in b.items() if (k, v) != ("is_error", False)} for b in content]
        out.append({"role": m["role"], "content": blocks})
    return out


@dataclass
class Expected:
    """What a recorded SSE stream says, read without the SDK."""

    text: str = ""
    thinking: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])
    redacted: list[str] = field(default_factory=list[str])
    calls: list[tuple[str, str, str]] = field(default_factory=list[tuple[str, str, str]])
    usage: dict[str, Any] = field(default_factory=dict[str, Any])
    stop_reason: str = ""
    model: str = ""


def _on_delta(exp: Expected, block: dict[str, Any], delta: dict[str, Any]) -> None:
    fields = {
        "text_delta": ("text", None),
        "thinking_delta": ("thinking", "thinking"),
        "signature_delta": ("signature", "signature"),
        "input_json_delta": ("partial_json", "json"),
    }
    if delta["type"] not in fields:
        return  # citations
    source, target = fields[delta["type"]]
    if target is None:
        exp.text += delta[source]
    else:
        block[target] += delta[source]


def _on_stop(exp: Expected, block: dict[str, Any]) -> None:
    if block["type"] == "thinking":
        exp.thinking.append((block["thinking"], block["signature"]))
    elif block["type"] == "redacted_thinking":
        exp.redacted.append(block["data"])
    elif block["type"] == "tool_use":
        exp.calls.append((block["id"], block["name"], block["json"] or "{}"))


def expected(sse: str) -> Expected:
    exp = Expected()
    blocks: dict[int, dict[str, Any]] = {}
    for line in sse.splitlines():
        if not line.startswith("data:"):
            continue
        ev = json.loads(line[5:])
        if ev["type"] == "message_start":
            exp.usage, exp.model = dict(ev["message"]["usage"]), ev["message"]["model"]
        elif ev["type"] == "content_block_start":
            blocks[ev["index"]] = dict(ev["content_block"], json="", thinking="", signature="")
        elif ev["type"] == "content_block_delta":
            _on_delta(exp, blocks[ev["index"]], ev["delta"])
        elif ev["type"] == "content_block_stop":
            _on_stop(exp, blocks[ev["index"]])
        elif ev["type"] == "message_delta":
            exp.usage.update({k: v for k, v in ev["usage"].items() if v is not None})
            exp.stop_reason = ev["delta"]["stop_reason"]
    return exp


def synthetic(*responses: httpx2.Response | Exception) -> tuple[Recorded, list[httpx2.Request]]:
    """A transport answering hand-made (synthetic, not recorded) responses in order."""
    rec = Recorded([])
    sent = rec.requests

    def handler(request: httpx2.Request) -> httpx2.Response:
        answer = responses[min(len(sent), len(responses) - 1)]
        sent.append(request)
        if isinstance(answer, Exception):
            raise answer
        return answer

    rec.handler = handler  # type: ignore[method-assign]  # swap in the synthetic script
    return rec, sent


def sse_response(name: str, *, cut: Callable[[str], str] = lambda s: s) -> httpx2.Response:
    sse = cut(load("anthropic", name)["response"]["sse"])
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=sse.encode())


def error_response(status: int, kind: str, message: str, **headers: str) -> httpx2.Response:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return httpx2.Response(status, headers=headers, json=body)


# --- every recorded stream -----------------------------------------------------


@pytest.mark.parametrize("name", STREAMS)
async def test_recorded_stream_becomes_neutral_events(name: str) -> None:
    exchange = load("anthropic", name)
    rec = recorded(exchange)
    exp = expected(exchange["response"]["sse"])
    events = await collect(adapter(rec), neutral(exchange["request"]["body"]))

    assert "".join(e.text for e in of_type(events, TextDelta)) == exp.text
    done = of_type(events, ThinkingDone)
    assert [(d.text, d.signature) for d in done if not d.redacted] == exp.thinking
    assert [d.signature for d in done if d.redacted] == exp.redacted
    assert all(d.provider == "anthropic" for d in done)
    for thought, _ in exp.thinking:
        assert "".join(e.text for e in of_type(events, ThinkingDelta)).startswith(thought[:20])
    ends = of_type(events, ToolCallEnd)
    assert [(e.tool_use_id, e.name, e.arguments) for e in ends] == exp.calls
    assert [e.index for e in ends] == list(range(len(exp.calls)))
    for end in ends:
        fragments = [d.args_delta for d in of_type(events, ToolCallDelta) if d.index == end.index]
        assert "".join(fragments) in (end.arguments, "")  # "" when the input was empty
    [usage] = of_type(events, ModelUsage)
    assert usage.usage == Usage(
        input_tokens=exp.usage["input_tokens"],
        cache_read_tokens=exp.usage["cache_read_input_tokens"],
        cache_write_tokens=exp.usage["cache_creation_input_tokens"],
        output_tokens=exp.usage["output_tokens"],
        reasoning_tokens=exp.usage.get("output_tokens_details", {}).get("thinking_tokens", 0),
        requests=1,
    )
    assert events[-1] == ModelStop(stop_reason=exp.stop_reason, model=exp.model)  # type: ignore[arg-type]  # recorded reasons are all neutral ones
    assert sum(isinstance(e, ModelStop) for e in events) == 1


@pytest.mark.parametrize("name", STREAMS + JSON_REPLIES)
async def test_request_matches_the_recorded_one(name: str) -> None:
    exchange = load("anthropic", name)
    body = exchange["request"]["body"]
    rec, _ = synthetic(sse_response("text_stream"))
    await collect(adapter(rec, model=body["model"]), neutral(body))
    sent = rec.sent_json()

    assert sent["model"] == body["model"]
    assert sent["max_tokens"] == body["max_tokens"]
    assert sent["stream"] is True
    assert sent["messages"] == comparable(body["messages"])
    assert sent.get("tools", []) == body.get("tools", [])
    for key in ("thinking", "temperature", "tool_choice"):
        assert sent.get(key) == body.get(key)
    if "system" in body:
        assert sent["system"] == [{"type": "text", "text": body["system"]}]
    assert rec.requests[0].url.path == "/v1/messages"
    headers = rec.requests[0].headers
    assert "test-key" in headers.get("x-api-key", headers.get("authorization", ""))
    assert "anthropic-version" in headers


# --- specific recordings ---------------------------------------------------------


async def test_text_stream() -> None:
    events = await collect(adapter(recorded(load("anthropic", "text_stream"))), hello())
    text = "".join(e.text for e in of_type(events, TextDelta))
    assert text == "- Captain\n- Scoop"
    assert events[-2:] == [
        ModelUsage(usage=Usage(input_tokens=17, output_tokens=10, requests=1)),
        ModelStop(stop_reason="end_turn", model="claude-sonnet-4-5-20250929"),
    ]


async def test_client_tool_args_assemble_and_server_tool_is_skipped() -> None:
    events = await collect(adapter(recorded(load("anthropic", "tool_use_stream_args"))), hello())
    [end] = of_type(events, ToolCallEnd)
    assert end.tool_use_id == "toolu_01EFn5wTNBYA8Reni8rbmnHT"
    assert json.loads(end.arguments) == {"from_currency": "USD", "to_currency": "EUR"}
    deltas = of_type(events, ToolCallDelta)
    assert {d.tool_use_id for d in deltas} == {end.tool_use_id}  # no srvtoolu_ call
    assert [d.args_delta for d in deltas][:3] == ["", '{"from_', "curre"]
    assert events[-1] == ModelStop(stop_reason="tool_use", model="claude-sonnet-4-6")


async def test_parallel_calls_with_empty_input() -> None:
    events = await collect(
        adapter(recorded(load("anthropic", "parallel_tool_use_stream"))), hello()
    )
    ends = of_type(events, ToolCallEnd)
    assert [(e.index, e.name, e.arguments) for e in ends] == [
        (0, "pelican_name_generator", "{}"),
        (1, "pelican_name_generator", "{}"),
    ]


async def test_web_search_server_blocks_pass_without_breaking_the_turn() -> None:
    exchange = load("anthropic", "server_tool_web_search_stream")
    events = await collect(adapter(recorded(exchange)), hello())
    assert not of_type(events, ToolCallDelta)
    assert not of_type(events, ToolCallEnd)
    assert "San Francisco" in "".join(e.text for e in of_type(events, TextDelta))
    [usage] = of_type(events, ModelUsage)
    assert usage.usage.input_tokens == 10423  # the final message_delta total
    assert isinstance(events[-1], ModelStop)
    assert events[-1].stop_reason == "end_turn"


async def test_redacted_thinking_keeps_its_data_as_signature() -> None:
    events = await collect(
        adapter(recorded(load("anthropic", "redacted_thinking_stream"))), hello()
    )
    done = of_type(events, ThinkingDone)
    assert len(done) == 2
    assert all(d.redacted and d.text == "" and d.provider == "anthropic" for d in done)
    assert done[0].signature is not None
    assert done[0].signature.startswith("EqkECkYIBxgCKkA8")


async def test_thinking_tool_use_reports_reasoning_tokens() -> None:
    events = await collect(
        adapter(recorded(load("anthropic", "thinking_tool_use_stream"))), hello()
    )
    [usage] = of_type(events, ModelUsage)
    assert usage.usage == Usage(input_tokens=598, output_tokens=92, reasoning_tokens=53, requests=1)


async def test_thinking_round_trips_unchanged_into_the_followup() -> None:
    """Our own events from one recording rebuild the next recording's request."""
    first = load("anthropic", "thinking_tool_use_stream")
    second = load("anthropic", "thinking_tool_result_stream")
    rec = recorded(first, second)
    model = adapter(rec)
    opening = neutral(first["request"]["body"])
    events = await collect(model, opening)
    [done] = of_type(events, ThinkingDone)
    [end] = of_type(events, ToolCallEnd)
    assistant = Message(
        role="assistant",
        parts=(
            ThinkingPart(text=done.text, signature=done.signature, provider=done.provider),
            ToolCallPart(id=end.tool_use_id, name=end.name, arguments=json.loads(end.arguments)),
        ),
    )
    result = ToolResultPart(tool_use_id=end.tool_use_id, name=end.name, content="0.32a0")
    followup = ModelRequest(
        system=(),
        messages=[*opening.messages, assistant, Message.tool_results([result])],
        tools=opening.tools,
        settings=opening.settings,
    )
    events = await collect(model, followup)
    assert rec.sent_json()["messages"] == second["request"]["body"]["messages"]
    assert "0.32a0" in "".join(e.text for e in of_type(events, TextDelta))


# --- non-streamed recordings: usage and cache placement --------------------------


@pytest.mark.parametrize(
    ("name", "usage"),
    [
        ("cache_read", Usage(input_tokens=2, cache_read_tokens=1590, output_tokens=4, requests=1)),
        (
            "cache_read_write",
            Usage(
                input_tokens=3,
                cache_read_tokens=1111,
                cache_write_tokens=418,
                output_tokens=33,
                requests=1,
            ),
        ),
        ("tool_use", Usage(input_tokens=572, output_tokens=53, requests=1)),
    ],
)
def test_usage_normalized_from_recorded_json(name: str, usage: Usage) -> None:
    raw = load("anthropic", name)["response"]["body"]["usage"]
    assert anthropic_usage(raw) == usage
    assert anthropic_usage(raw).total_input_tokens == (
        raw["input_tokens"] + raw["cache_read_input_tokens"] + raw["cache_creation_input_tokens"]
    )


def test_cache_control_marks_the_stable_prefix_end() -> None:
    body = load("anthropic", "cache_read_write")["request"]["body"]
    request = neutral(body)
    request = ModelRequest(
        system=(
            SystemBlock(text=body["system"], cache_breakpoint=True),
            SystemBlock(text="Today is Tuesday.", source="volatile"),
        ),
        messages=request.messages,
    )
    sent = request_body(request, model=body["model"], max_tokens=4096)
    assert sent["system"] == [
        {
            "type": "text",
            "text": "You are a helpful assistant.",
            "cache_control": {"type": "ephemeral"},
        },
        {"type": "text", "text": "Today is Tuesday."},
    ]
    assert sent["messages"] == comparable(body["messages"])


# --- request building ---------------------------------------------------------


def _build(settings: ModelSettings, *messages: Message) -> dict[str, Any]:
    request = ModelRequest(
        system=(SystemBlock(text=""),),
        messages=list(messages) or [Message.user("hi")],
        settings=settings,
    )
    return cast("dict[str, Any]", request_body(request, model="m", max_tokens=4096))


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        ("get_weather", {"type": "tool", "name": "get_weather"}),
    ],
)
def test_tool_choice(choice: str, wire: dict[str, str]) -> None:
    assert _build(ModelSettings(tool_choice=choice))["tool_choice"] == wire


def test_effort_maps_to_a_thinking_budget() -> None:
    assert "thinking" not in _build(ModelSettings(effort="minimal"))
    assert "system" not in _build(ModelSettings())  # empty blocks are not sent
    low = _build(ModelSettings(effort="low"))
    assert low["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert low["max_tokens"] == 4096
    high = _build(ModelSettings(effort="high"))
    assert high["thinking"]["budget_tokens"] == THINKING_BUDGETS["high"] == 16384
    assert high["max_tokens"] > 16384


def test_output_schema_and_extra() -> None:
    schema: dict[str, JsonValue] = {"type": "object", "properties": {"a": {"type": "integer"}}}
    body = _build(ModelSettings(output_schema=schema, extra={"top_k": 5, "max_tokens": 7}))
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": schema}}
    assert body["top_k"] == 5
    assert body["max_tokens"] == 7  # extra wins


def test_history_conversion() -> None:
    call = ToolCallPart(id="t1", name="look", arguments={"q": "x"})
    body = _build(
        ModelSettings(),
        Message.user("hi"),
        Message(
            role="assistant",
            parts=(
                ThinkingPart(text="hmm", signature="sig-openai", provider="openai"),
                ThinkingPart(text="", signature="enc", redacted=True, provider="anthropic"),
                call,
                ToolCallPart(id="t2", name="look", arguments={}),
            ),
        ),
        Message.tool_results([ToolResultPart(tool_use_id="t1", name="look", content="one")]),
        Message.tool_results(
            [
                ToolResultPart(
                    tool_use_id="t2",
                    name="look",
                    content="bad",
                    is_error=True,
                    images=(ImagePart(data="AAAA"),),
                )
            ]
        ),
        Message(role="user", parts=(TextPart(text="and?"), ImagePart(url="https://x/y.png"))),
    )
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"][:2] == [
        {"type": "redacted_thinking", "data": "enc"},  # openai thinking dropped
        {"type": "tool_use", "id": "t1", "name": "look", "input": {"q": "x"}},
    ]
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "one"},
        {
            "type": "tool_result",
            "tool_use_id": "t2",
            "content": [
                {"type": "text", "text": "bad"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                },
            ],
            "is_error": True,
        },
        {"type": "text", "text": "and?"},
        {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
    ]


# --- errors ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "error"), [("error_400", BadRequest), ("error_404", ModelNotFound)]
)
async def test_recorded_errors_are_typed_and_not_retried(
    name: str, error: type[ModelError]
) -> None:
    exchange = load("anthropic", name)
    rec = recorded(exchange)
    with pytest.raises(error) as info:
        await collect(adapter(rec), neutral(exchange["request"]["body"]))
    assert type(info.value) is error
    assert info.value.provider == "anthropic"
    assert not info.value.retryable
    assert info.value.status == exchange["response"]["status"]  # type: ignore[attr-defined]  # ModelHTTPError
    assert exchange["response"]["body"]["error"]["message"] in str(info.value)
    assert len(rec.requests) == 1


async def test_rate_limit_is_retried_then_succeeds() -> None:
    """Synthetic 429 (no recorded Anthropic 429 exists), then the recorded text stream."""
    rec, sent = synthetic(
        error_response(429, "rate_limit_error", "slow down", **{"retry-after": "0"}),
        sse_response("text_stream"),
    )
    events = await collect(adapter(rec), hello())
    assert len(sent) == 2
    assert isinstance(events[-1], ModelStop)


async def test_rate_limit_carries_retry_after() -> None:
    rec, _ = synthetic(
        error_response(429, "rate_limit_error", "slow down", **{"retry-after": "31"})
    )
    with pytest.raises(RateLimited) as info:
        await collect(adapter(rec, retry=ONCE), hello())
    assert info.value.retry_after == 31
    assert info.value.retryable


async def test_authentication_error_is_not_retried() -> None:
    rec, sent = synthetic(error_response(401, "authentication_error", "invalid x-api-key"))
    with pytest.raises(AuthenticationError) as info:
        await collect(adapter(rec), hello())
    assert not info.value.retryable
    assert len(sent) == 1


@pytest.mark.parametrize(
    ("status", "kind", "message", "error", "retryable"),
    [
        (529, "overloaded_error", "Overloaded", Overloaded, True),
        (503, "api_error", "unavailable", Overloaded, True),
        (500, "api_error", "Internal server error", ServerError, True),
        (400, "invalid_request_error", "prompt is too long: 210000 tokens", ContextTooLong, False),
    ],
)
async def test_status_mapping(
    status: int, kind: str, message: str, error: type[ModelError], retryable: bool
) -> None:
    rec, sent = synthetic(error_response(status, kind, message))
    with pytest.raises(error) as info:
        await collect(adapter(rec, retry=ONCE), hello())
    assert info.value.retryable is retryable
    assert len(sent) == 1  # the SDK's own retries are off


async def test_sdk_retries_are_off_even_for_a_given_client() -> None:
    import anthropic

    rec, sent = synthetic(error_response(500, "api_error", "boom"))
    client = anthropic.AsyncAnthropic(api_key="k", http_client=rec.client(), max_retries=5)
    with pytest.raises(ServerError):
        await collect(AnthropicModel("m", client=client, retry=ONCE), hello())
    assert len(sent) == 1


async def test_server_errors_are_retried_then_succeed() -> None:
    rec, sent = synthetic(
        error_response(529, "overloaded_error", "Overloaded"),
        httpx2.ReadTimeout("slow"),
        sse_response("text_stream"),
    )
    events = await collect(adapter(rec), hello())
    assert len(sent) == 3
    assert isinstance(events[-1], ModelStop)


async def test_timeout_is_retryable() -> None:
    rec, _ = synthetic(httpx2.ConnectTimeout("slow"))
    with pytest.raises(ModelTimeout) as info:
        await collect(adapter(rec, retry=ONCE), hello())
    assert info.value.retryable


def _cut_before_stop(sse: str) -> str:
    return sse[: sse.index("event: message_stop")]


async def test_stream_cut_before_message_stop_is_a_retryable_output_error() -> None:
    rec, _ = synthetic(sse_response("tool_use_stream_args", cut=_cut_before_stop))
    events: list[ModelEvent] = []
    stream = adapter(rec).stream(hello())
    with pytest.raises(ModelOutputError) as info:
        while True:
            events.append(await anext(stream))
    assert info.value.retryable
    assert of_type(events, ToolCallEnd)  # content streamed, but no ModelStop
    assert not of_type(events, ModelStop)


async def test_stream_cut_before_any_event_is_retried() -> None:
    rec, sent = synthetic(
        sse_response("text_stream", cut=lambda s: s[: s.index("event: content_block_start")]),
        sse_response("text_stream"),
    )
    events = await collect(adapter(rec), hello())
    assert len(sent) == 2
    assert isinstance(events[-1], ModelStop)


async def test_error_event_mid_stream_is_typed() -> None:
    """Synthetic: an ``event: error`` overloaded frame after the first text delta."""

    def inject(sse: str) -> str:
        at = sse.index("event: content_block_stop")
        frame = (
            'event: error\ndata: {"type": "error", "error": '
            '{"type": "overloaded_error", "message": "Overloaded"}}\n\n'
        )
        return sse[:at] + frame

    rec, _ = synthetic(sse_response("text_stream", cut=inject))
    with pytest.raises(Overloaded) as info:
        await collect(adapter(rec), hello())
    assert info.value.retryable
    assert info.value.status == 529


async def test_malformed_sse_frame_is_an_output_error() -> None:
    def corrupt(sse: str) -> str:
        at = sse.index("event: content_block_stop")
        return sse[:at] + "event: content_block_delta\ndata: {not json\n\n" + sse[at:]

    rec, _ = synthetic(sse_response("text_stream", cut=corrupt))
    with pytest.raises(ModelOutputError) as info:
        await collect(adapter(rec), hello())
    assert info.value.retryable


async def test_connection_reset_mid_stream_is_a_retryable_output_error() -> None:
    """Synthetic: the body breaks off with a transport error after a few frames."""
    sse = load("anthropic", "text_stream")["response"]["sse"].encode()

    async def body() -> AsyncIterator[bytes]:
        yield sse[: sse.index(b"event: content_block_stop")]
        raise httpx2.ReadError("connection reset by peer")

    response = httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body())
    rec, _ = synthetic(response)
    events: list[ModelEvent] = []
    stream = adapter(rec).stream(hello())
    with pytest.raises(ModelOutputError) as info:
        while True:
            events.append(await anext(stream))
    assert info.value.retryable
    assert of_type(events, TextDelta)
    assert not of_type(events, ModelStop)


# --- end to end ---------------------------------------------------------------------


async def test_session_runs_one_tool_round_on_recorded_traffic() -> None:
    first = load("anthropic", "parallel_tool_use_stream")
    second = load("anthropic", "tool_result_followup_stream")
    rec = recorded(first, second)
    names = iter(["Charles", "Sammy"])

    @tool(name="pelican_name_generator", description="A name for a pelican.")
    def pelican_name_generator() -> str:
        return next(names)

    model = AnthropicModel("claude-haiku-4-5-20251001", api_key="k", http_client=rec.client())
    session = Session(Agent(model=model, tools=[pelican_name_generator]))
    events = [e async for e in session.send("Two names for a pet pelican")]

    assert [e.content for e in of_type(events, ToolResult)] == ["Charles", "Sammy"]
    assert isinstance(events[-1], TurnComplete)
    expected_text = expected(second["response"]["sse"]).text
    assert "".join(e.text for e in of_type(events, TextDelta)) == expected_text
    assert len(rec.requests) == 2
    sent = as_provider_ids(rec.sent_json(1)["messages"], session.messages)
    recorded_messages = second["request"]["body"]["messages"]
    assert sent[0] == recorded_messages[0]
    # The recorded assistant turn also held a whitespace-only text block we never saw.
    assert sent[1]["content"] == recorded_messages[1]["content"][1:]
    assert sent[2] == recorded_messages[2]
    assert [t["name"] for t in rec.sent_json(1)["tools"]] == ["pelican_name_generator"]


def test_name() -> None:
    assert AnthropicModel("claude-x", api_key="k").name == "anthropic:claude-x"
