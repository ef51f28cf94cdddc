"""Typed output through each adapter, on recorded structured-output traffic.

An agent with an ``output_type`` runs a session whose model is the real
adapter over the real SDK, answered from ``../shared/fixtures/wire/`` (JSON
recordings served as the stream the adapter asks for, as each adapter's own
tests do). The request carries the output type's schema where the recording
carried one, and the recorded answer becomes a validated instance.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from mainspring import Agent, OutputPartial, Session, tool
from mainspring.messages import Message
from mainspring.models.base import ModelRequest
from mainspring.models.retry import RetryPolicy
from mainspring.output import FINAL_RESULT_TOOL, OutputSpec
from tests.models.test_openai_chat import HOSTS, sse_from_completion
from tests.models.wire import load, recorded

pytestmark = pytest.mark.anyio

ONCE = RetryPolicy(max_attempts=1)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def without_titles(schema: Any) -> Any:
    """A schema without its ``title`` keys (pydantic names what a recorder left unnamed)."""
    if isinstance(schema, dict):
        return {k: without_titles(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [without_titles(v) for v in schema]
    return schema


# ------------------------------------------------------------- OpenAI Chat Completions


class CityLocation(BaseModel):
    city: str
    country: str


@tool
def get_user_country() -> str:
    """The user's country."""
    return "Mexico"


def chat_model(exchange: dict[str, Any]) -> tuple[Any, Any]:
    from mainspring.models.openai import OpenAIChatModel

    provider, base_url = HOSTS[exchange["request"]["host"]]
    body = exchange["response"]["body"]
    rec = recorded({**exchange, "response": {"status": 200, "sse": sse_from_completion(body)}})
    model = OpenAIChatModel(
        exchange["request"]["body"]["model"],
        api_key="sk-test",
        base_url=base_url,
        http_client=rec.client(),
        retry=ONCE,
        provider=provider,
    )
    return model, rec


async def test_openai_chat_structured_output_with_tools_offered() -> None:
    exchange = load("openai", "chat_structured_output")
    model, rec = chat_model(exchange)
    agent = Agent(model=model, tools=[get_user_country], output_type=CityLocation)
    result = await Session(agent).run("What is the largest city in the user country?")
    assert result.output == CityLocation(city="Mexico City", country="Mexico")
    sent = rec.sent_json()
    recorded_format = exchange["request"]["body"]["response_format"]
    fmt = sent["response_format"]
    assert fmt["type"] == recorded_format["type"] == "json_schema"
    assert without_titles(fmt["json_schema"]["schema"]) == recorded_format["json_schema"]["schema"]
    assert fmt["json_schema"]["strict"] is False  # as recorded: an open object
    assert [t["function"]["name"] for t in sent["tools"]] == ["get_user_country"]
    assert [e for e in result.events if isinstance(e, OutputPartial)][-1].output == {
        "city": "Mexico City",
        "country": "Mexico",
    }


class CityData(BaseModel):
    city: str
    country: str


class LanguageData(BaseModel):
    country: str
    language: str


class CityKind(BaseModel):
    kind: Literal["CityLocation"]
    data: CityData


class LanguageKind(BaseModel):
    kind: Literal["CountryLanguage"]
    data: LanguageData


class FinalResult(BaseModel):
    result: CityKind | LanguageKind


async def test_openai_chat_structured_output_with_a_union_inside() -> None:
    exchange = load("openai", "chat_structured_output_2")
    model, rec = chat_model(exchange)
    agent = Agent(model=model, tools=[get_user_country], output_type=FinalResult)
    result = await Session(agent).run("What is the largest city in the user country?")
    output = result.output_as(FinalResult)
    assert output.result == CityKind(
        kind="CityLocation", data=CityData(city="Mexico City", country="Mexico")
    )
    assert "anyOf" in json.dumps(rec.sent_json()["response_format"]["json_schema"]["schema"])


async def test_ollama_json_schema_answer() -> None:
    exchange = load("openai_compatible", "ollama_json_schema")
    model, rec = chat_model(exchange)
    result = await Session(Agent(model=model, output_type=CityLocation)).run(
        "What is the capital of France?"
    )
    assert result.output == CityLocation(city="Paris", country="France")
    sent = rec.sent_json()["response_format"]["json_schema"]
    assert sent["name"] == "CityLocation"
    recorded_schema = exchange["request"]["body"]["response_format"]["json_schema"]["schema"]
    assert without_titles(sent["schema"]) == without_titles(recorded_schema)


# -------------------------------------------------------------------- OpenAI Responses


class Payment(BaseModel):
    amount: Decimal


async def test_openai_responses_text_format_answer() -> None:
    from mainspring.models.openai_responses import OpenAIResponsesModel

    exchange = load("openai", "responses_structured_output")
    body = exchange["response"]["body"]
    (message,) = [item for item in body["output"] if item["type"] == "message"]
    text = message["content"][0]["text"]
    events = [
        {"type": "response.output_text.delta", "output_index": 0, "delta": text[:5]},
        {"type": "response.output_text.delta", "output_index": 0, "delta": text[5:]},
        {"type": "response.completed", "response": body},
    ]
    sse = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    rec = recorded({**exchange, "response": {"status": 200, "sse": sse}})
    model = OpenAIResponsesModel(
        "gpt-5.4-mini", api_key="sk-test", http_client=rec.client(), retry=ONCE
    )
    result = await Session(Agent(model=model, output_type=Payment)).run(
        "Return exactly this payment amount: 12.34"
    )
    assert result.output == Payment(amount=Decimal("12.34"))
    sent = rec.sent_json()["text"]["format"]
    recorded_format = exchange["request"]["body"]["text"]["format"]
    assert sent["type"] == "json_schema" and sent["name"] == recorded_format["name"] == "Payment"
    # pydantic's Decimal schema, as recorded (the recorder moved the pattern to a description).
    assert sent["schema"]["properties"]["amount"]["anyOf"][0] == {"type": "number"}


# ----------------------------------------------------------------------------- Gemini


class NestedModel(BaseModel):
    """Represents the deepest nested level."""

    name: str = Field(description="Name of the item")
    value: int = Field(description="Value of the item")


class MiddleModel(BaseModel):
    """Represents the middle nested level."""

    title: str = Field(description="Title of the page")
    items: list[NestedModel] = Field(description="List of nested items")


class TopModel(BaseModel):
    """Represents the top-level structure."""

    name: str = Field(description="Name of the collection")
    pages: list[MiddleModel] = Field(description="List of pages")


async def test_gemini_response_json_schema_answer() -> None:
    from mainspring.models.gemini import GeminiModel

    exchange = load("gemini", "structured_output_2")
    body = exchange["response"]["body"]
    rec = recorded(
        {**exchange, "response": {"status": 200, "sse": f"data: {json.dumps(body)}\r\n\r\n"}}
    )
    model = GeminiModel("gemini-2.5-flash", api_key="test-key", http_client=rec.client())
    agent = Agent(
        model=model,
        instructions="You are a helpful assistant that creates structured data.",
        output_type=TopModel,
    )
    result = await Session(agent).run("Create a simple example with 2 pages, each with 2 items")
    top = result.output_as(TopModel)
    assert top.name == "My Collection" and [p.title for p in top.pages] == ["Page One", "Page Two"]
    assert top.pages[1].items[1] == NestedModel(name="Item D", value=40)
    config = rec.sent_json()["generationConfig"]
    recorded_config = exchange["request"]["body"]["generationConfig"]
    assert without_titles(config["responseJsonSchema"]) == without_titles(
        recorded_config["responseJsonSchema"]
    )
    assert config["responseMimeType"] == "application/json"


def test_gemini_before_3_with_tools_answers_through_the_final_answer_tool() -> None:
    from mainspring.models.gemini import GeminiModel

    old = GeminiModel("gemini-2.5-flash", api_key="test-key")
    new = GeminiModel("gemini-3-flash-preview", api_key="test-key")
    with_tools = Agent(model=old, tools=[get_user_country], output_type=TopModel)
    assert FINAL_RESULT_TOOL in [t.name for t in with_tools.request_tools]
    assert with_tools.request_settings.output_schema is None
    alone = Agent(model=old, output_type=TopModel)
    assert alone.request_settings.output_schema == TopModel.model_json_schema()
    newer = Agent(model=new, tools=[get_user_country], output_type=TopModel)
    assert newer.request_settings.output_schema == TopModel.model_json_schema()
    assert FINAL_RESULT_TOOL not in [t.name for t in newer.request_tools]


# -------------------------------------------------------------------------- Anthropic


def test_anthropic_takes_the_schema_natively_beside_its_tools() -> None:
    from mainspring.models.anthropic import AnthropicModel, request_body

    model = AnthropicModel("claude-sonnet-4-5", api_key="sk-ant-test")
    agent = Agent(model=model, tools=[get_user_country], output_type=CityLocation)
    request = ModelRequest(
        system=(),
        messages=[Message.user("Largest city?")],
        tools=agent.request_tools,
        settings=agent.request_settings,
    )
    body: dict[str, Any] = dict(request_body(request, model="claude-sonnet-4-5", max_tokens=1024))
    assert body["output_config"] == {
        "format": {"type": "json_schema", "schema": CityLocation.model_json_schema()}
    }
    assert [t["name"] for t in body["tools"]] == ["get_user_country"]


def test_a_model_without_the_flag_gets_the_final_answer_tool() -> None:
    class Plain:
        name = "plain"

        def stream(self, request: ModelRequest) -> Any:
            raise NotImplementedError

    agent = Agent(model=Plain(), output_type=CityLocation)
    (spec,) = agent.request_tools
    assert spec == OutputSpec(CityLocation).tool_spec()
    assert agent.request_settings.output_schema is None
