"""OpenAIChatModel against the quirks of OpenAI-compatible servers.

The SSE bodies here are hand-built, not recorded: no local server's traffic is
in the shared wire fixtures yet. They follow what llama-cpp-python's server
sends (a ``content: null`` first delta, the call's id and name repeated on
every tool-call delta, no ``usage`` chunk although ``include_usage`` was
asked) and what OpenRouter sends when a generation fails mid-stream (an
``error`` object in a ``data:`` event after ``finish_reason: length``). Each
body is served through the real SDK by an ``httpx`` mock transport.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from mainspring import Agent, Session, tool
from mainspring.codec import event_from_dict, event_to_dict
from mainspring.cost import ModelPrice
from mainspring.errors import BadRequest
from mainspring.events import TextDelta, TurnComplete, UsageEvent
from mainspring.messages import Message
from mainspring.models.base import ModelEvent, ModelRequest, ModelStop, ModelUsage, ToolCallEnd
from mainspring.models.openai import OpenAIChatModel
from mainspring.models.retry import RetryPolicy
from mainspring.tokens import TiktokenTokenizer
from mainspring.usage import Usage
from tests.helpers import send

pytestmark = pytest.mark.anyio

ONCE = RetryPolicy(max_attempts=1)
MODEL = "smollm2-360m-instruct"
QUESTION = "What is the capital of France?"
ANSWER = "The capital of France is Paris."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    """One ``chat.completion.chunk`` the way llama-cpp-python's server writes it."""
    choices = (
        []
        if delta is None
        else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    )
    body = {
        "id": "chatcmpl-5e1c",
        "object": "chat.completion.chunk",
        "created": 1765000000,
        "model": MODEL,
        "choices": choices,
    }
    return {**body, **extra}


def sse(*chunks: dict[str, Any], done: bool = True) -> str:
    text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    return text + ("data: [DONE]\n\n" if done else "")


def plain_answer() -> str:
    """A text answer and no usage chunk."""
    return sse(
        chunk({"role": "assistant", "content": None}),
        chunk({"content": "The capital of France"}),
        chunk({"content": " is Paris."}),
        chunk({}, "stop"),
    )


def tool_call_answer() -> str:
    """A tool call whose id and name come again on every delta; no usage chunk."""
    head = {"index": 0, "id": "call__0_get_weather_cmpl-5e1c", "type": "function"}
    pieces = ['{"city": ', '"Paris"', "}"]
    return sse(
        chunk({"role": "assistant", "content": None}),
        *(
            chunk({"tool_calls": [{**head, "function": {"name": "get_weather", "arguments": p}}]})
            for p in pieces
        ),
        chunk({}, "tool_calls"),
    )


class Server:
    """Answers each request with the next body; keeps what it was sent."""

    def __init__(self, *bodies: str) -> None:
        self.bodies = list(bodies)
        self.sent: list[dict[str, Any]] = []

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        self.sent.append(json.loads(request.content))
        body = self.bodies[min(len(self.sent), len(self.bodies)) - 1]
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    def model(self, name: str = MODEL, *, provider: str = "llama-cpp") -> OpenAIChatModel:
        client = httpx2.AsyncClient(transport=httpx2.MockTransport(self.handler))
        return OpenAIChatModel(
            name,
            base_url="http://127.0.0.1:8000/v1",
            http_client=client,
            retry=ONCE,
            provider=provider,
        )


def ask(text: str = QUESTION) -> ModelRequest:
    return ModelRequest(system=(), messages=[Message.user(text)])


async def collect(stream: AsyncIterator[ModelEvent]) -> list[ModelEvent]:
    return [event async for event in stream]


def of_type(events: list[ModelEvent], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def chars(text: str) -> int:
    """The labelled estimate's count for a model without a tokenizer: 4 characters a token."""
    return -(-len(text) // 4)


# ------------------------------------------------------------- no usage reported


async def test_a_stream_without_usage_is_one_request_with_estimated_tokens() -> None:
    server = Server(plain_answer())
    events = await collect(server.model().stream(ask()))
    assert "".join(e.text for e in of_type(events, TextDelta)) == ANSWER
    [usage] = of_type(events, ModelUsage)
    assert usage.estimated
    # One user message: its text, plus 3 framing tokens and 3 that prime the reply.
    assert usage.usage == Usage(
        input_tokens=chars(QUESTION) + 3 + 3, output_tokens=chars(ANSWER), requests=1
    )
    assert isinstance(events[-1], ModelStop) and events[-1].stop_reason == "end_turn"
    assert events.index(usage) < len(events) - 1, "usage comes before the stop"


async def test_an_openai_model_is_estimated_with_its_own_encoding() -> None:
    server = Server(plain_answer())
    events = await collect(server.model("gpt-4o", provider="openai").stream(ask()))
    [usage] = of_type(events, ModelUsage)
    encoding = TiktokenTokenizer("o200k_base")
    assert usage.estimated
    assert usage.usage.output_tokens == encoding.count(ANSWER) != chars(ANSWER)
    assert usage.usage.input_tokens == encoding.count(QUESTION) + 6


async def test_reported_usage_is_taken_once_even_when_repeated_as_running_totals() -> None:
    # Servers with continuous usage stats put a running total on every chunk.
    def totals(output: int) -> dict[str, int]:
        return {"prompt_tokens": 12, "completion_tokens": output, "total_tokens": 12 + output}

    server = Server(
        sse(
            chunk({"role": "assistant", "content": "The capital"}, usage=totals(2)),
            chunk({"content": " is Paris."}, usage=totals(5)),
            chunk({}, "stop", usage=totals(5)),
        )
    )
    events = await collect(server.model().stream(ask()))
    [usage] = of_type(events, ModelUsage)
    assert not usage.estimated
    assert usage.usage == Usage(input_tokens=12, output_tokens=5, requests=1)


async def test_a_refusal_with_null_content_is_text_and_counted() -> None:
    refusal = "I can't help with that."
    server = Server(
        sse(
            chunk({"role": "assistant", "content": None, "refusal": None}),
            chunk({"content": None, "refusal": refusal}),
            chunk({}, "stop"),
        )
    )
    events = await collect(server.model().stream(ask()))
    assert [e.text for e in of_type(events, TextDelta)] == [refusal]
    assert isinstance(events[-1], ModelStop) and events[-1].stop_reason == "refusal"
    [usage] = of_type(events, ModelUsage)
    assert usage.estimated and usage.usage.requests == 1
    assert usage.usage.output_tokens == chars(refusal)


async def test_repeated_ids_and_names_in_tool_call_deltas_make_one_call() -> None:
    server = Server(tool_call_answer())
    events = await collect(server.model().stream(ask("Weather in Paris?")))
    [end] = of_type(events, ToolCallEnd)
    assert end.name == "get_weather"
    assert end.tool_use_id == "call__0_get_weather_cmpl-5e1c"
    assert json.loads(end.arguments) == {"city": "Paris"}
    [usage] = of_type(events, ModelUsage)
    assert usage.estimated
    assert usage.usage.output_tokens == chars('get_weather{"city": "Paris"}')
    assert isinstance(events[-1], ModelStop) and events[-1].stop_reason == "tool_use"


# ------------------------------------------------------------- a whole tool turn


async def test_a_tool_turn_on_a_server_without_usage_sends_empty_content_and_counts() -> None:
    server = Server(tool_call_answer(), plain_answer())
    cities: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        cities.append(city)
        return "sunny"

    price = ModelPrice(input=1.0, output=2.0)
    session = Session(Agent(model=server.model(), tools=[get_weather], prices={MODEL: price}))
    events = await send(session, "Weather in Paris?")

    assert cities == ["Paris"]
    followup = server.sent[1]["messages"]
    assert followup[1]["role"] == "assistant"
    assert followup[1]["content"] == ""  # never null: llama-cpp-python refuses null
    assert followup[1]["tool_calls"][0]["function"]["name"] == "get_weather"

    usages = [e for e in events if isinstance(e, UsageEvent)]
    assert len(usages) == 2
    assert all(u.estimated and u.usage.requests == 1 for u in usages)
    assert all(u.cost_usd == price.cost(u.usage) > 0 for u in usages)
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.usage.requests == 2
    assert done.usage == usages[0].usage + usages[1].usage
    assert session.cost_usd == pytest.approx(sum(u.cost_usd for u in usages))


def test_the_estimated_mark_is_on_the_wire_and_old_events_read_as_reported() -> None:
    event = UsageEvent(model=MODEL, usage=Usage(input_tokens=5, requests=1), estimated=True)
    data = event_to_dict(event)
    assert data["estimated"] is True
    assert event_from_dict(data) == event
    del data["estimated"]  # an event written before the field existed
    old = event_from_dict(data)
    assert isinstance(old, UsageEvent) and old.estimated is False


# ------------------------------------------------------------- errors inside the stream


def length_then_error(*, usage_first: bool) -> str:
    """OpenRouter's shape: the generation hits max_tokens, then an in-stream 400."""
    usage = {"prompt_tokens": 43, "completion_tokens": 10, "total_tokens": 53}
    error = {"code": 400, "message": "Provider returned error"}
    chunks = [
        chunk({"role": "assistant", "content": "Once upon a time there"}),
        chunk({"content": " was"}, "length"),
    ]
    if usage_first:
        chunks += [chunk(None, usage=usage), chunk(None, error=error)]
    else:  # the error object and the usage in one event: the SDK keeps only the error
        chunks.append(chunk({"content": ""}, "error", usage=usage, error=error))
    return sse(*chunks, done=False)


async def test_an_in_stream_error_keeps_the_usage_reported_before_it() -> None:
    server = Server(length_then_error(usage_first=True))
    events: list[ModelEvent] = []
    with pytest.raises(BadRequest, match="Provider returned error"):
        async for event in server.model("openai/gpt-4o", provider="openrouter").stream(ask()):
            events.append(event)  # noqa: PERF401  # keep what came before the error
    [usage] = of_type(events, ModelUsage)
    assert not usage.estimated
    assert usage.usage == Usage(input_tokens=43, output_tokens=10, requests=1)


async def test_an_error_that_swallows_the_usage_leaves_an_estimate_not_zero() -> None:
    server = Server(length_then_error(usage_first=False))
    events: list[ModelEvent] = []
    with pytest.raises(BadRequest):
        async for event in server.model().stream(ask()):
            events.append(event)  # noqa: PERF401  # keep what came before the error
    [usage] = of_type(events, ModelUsage)
    assert usage.estimated
    assert usage.usage == Usage(
        input_tokens=chars(QUESTION) + 6,
        output_tokens=chars("Once upon a time there was"),
        requests=1,
    )


async def test_a_turn_that_fails_in_stream_still_charges_what_was_reported() -> None:
    server = Server(length_then_error(usage_first=True))
    price = ModelPrice(input=1.0, output=2.0)
    model = server.model("openai/gpt-4o", provider="openrouter")
    # A failed call is charged under the adapter's name (no stop event named the model).
    session = Session(Agent(model=model, prices={model.name: price}))
    events = await send(session, QUESTION)
    [usage] = [e for e in events if isinstance(e, UsageEvent)]
    assert usage.model == model.name
    assert usage.usage == Usage(input_tokens=43, output_tokens=10, requests=1)
    assert not usage.estimated
    assert session.cost_usd == pytest.approx(price.cost(usage.usage))
