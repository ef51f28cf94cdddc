"""A conversation started on one provider continues on another.

Each provider's thinking (and its signature) only means something to that
provider: the others drop it. Tool calls and their results stay paired by id.
"""

from __future__ import annotations

import json

import pytest

from mainspring.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from mainspring.models.base import ModelRequest, SystemBlock

pytest.importorskip("anthropic")
pytest.importorskip("openai")
pytest.importorskip("google.genai")

from mainspring.models.anthropic import request_body
from mainspring.models.gemini import build_contents
from mainspring.models.openai.convert import build_chat_request
from mainspring.models.openai_responses import build_params


def history(thinking_from: str) -> list[Message]:
    return [
        Message.user("What's the weather in Paris?"),
        Message(
            role="assistant",
            parts=(
                ThinkingPart(
                    text="I should look it up.", signature="SIG-SECRET", provider=thinking_from
                ),
                TextPart(text="Let me check."),
                ToolCallPart(id="toolu_01", name="weather", arguments={"city": "Paris"}),
            ),
        ),
        Message.tool_results(
            [ToolResultPart(tool_use_id="toolu_01", name="weather", content="sunny, 21C")]
        ),
        Message.assistant("It is sunny and 21C."),
        Message.user("And tomorrow?"),
    ]


def request(thinking_from: str) -> ModelRequest:
    return ModelRequest(system=(SystemBlock(text="Be brief."),), messages=history(thinking_from))


def dumped(value: object) -> str:
    return json.dumps(value, default=lambda o: o.model_dump(mode="json", exclude_none=True))


@pytest.mark.parametrize("origin", ["anthropic", "gemini"])
def test_openai_chat_drops_foreign_thinking_and_pairs_tool_calls(origin: str) -> None:
    body = build_chat_request("gpt-4.1", request(origin), provider="openai")
    text = dumped(body)
    assert "SIG-SECRET" not in text and "I should look it up" not in text
    messages = body["messages"]
    call = next(m for m in messages if m.get("tool_calls"))
    result = next(m for m in messages if m["role"] == "tool")
    assert call["tool_calls"][0]["id"] == result["tool_call_id"] == "toolu_01"
    assert json.loads(call["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}


@pytest.mark.parametrize("origin", ["anthropic", "gemini"])
def test_openai_responses_drops_foreign_thinking_and_pairs_tool_calls(origin: str) -> None:
    params = build_params("gpt-5", request(origin))
    text = dumped(params)
    assert "SIG-SECRET" not in text
    items = params["input"]
    call = next(i for i in items if i.get("type") == "function_call")
    output = next(i for i in items if i.get("type") == "function_call_output")
    assert call["call_id"] == output["call_id"] == "toolu_01"


@pytest.mark.parametrize("origin", ["openai", "gemini"])
def test_anthropic_drops_foreign_thinking_and_pairs_tool_calls(origin: str) -> None:
    body = request_body(request(origin), model="claude-sonnet-4-5", max_tokens=1024)
    text = dumped(body)
    assert "SIG-SECRET" not in text and '"thinking"' not in text
    assert "toolu_01" in text and text.count("toolu_01") == 2  # the call and its result


def test_anthropic_sends_its_own_thinking_back_unchanged() -> None:
    body = request_body(request("anthropic"), model="claude-sonnet-4-5", max_tokens=1024)
    assert "SIG-SECRET" in dumped(body)


@pytest.mark.parametrize("origin", ["anthropic", "openai"])
def test_gemini_drops_foreign_thinking_and_pairs_tool_calls(origin: str) -> None:
    contents = build_contents(history(origin))
    text = dumped(contents)
    assert "SIG-SECRET" not in text and "I should look it up" not in text
    assert "toolu_01" in text and '"weather"' in text
