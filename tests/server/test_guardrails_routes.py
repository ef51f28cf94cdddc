"""Guardrail trips through the server: REST/SSE, the AI SDK chat and AG-UI (real uvicorn)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

import httpx
import pytest
from ag_ui.core import RunAgentInput

from mainspring import (
    Agent,
    GuardrailContext,
    GuardrailResult,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    tool,
)
from mainspring.messages import Message
from mainspring.models import ToolSpec
from mainspring.sse import parse_sse
from mainspring.testing import check_events
from tests.server.conftest import Frame, client_for, read_sse

pytestmark = pytest.mark.anyio


def no_secrets(ctx: GuardrailContext, text: str) -> GuardrailResult:
    return GuardrailResult(tripwire="secret" in text, reason="mentions a secret")


def guarded_agent(ledger: list[float]) -> Agent:
    """An auto-tier write the model asks for at once; guardrails on input and output."""

    @tool
    def pay(amount: float) -> str:
        """Pay an amount."""
        ledger.append(amount)
        return "paid; the secret is 42"

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
        if messages[-1].role == "user":
            return ScriptedResponse(tool_calls=[ScriptedCall("pay", {"amount": 5.0})])
        return ScriptedResponse(text=f"done: {messages[-1].parts[0]}")

    return Agent(
        name="guarded",
        model=ScriptedModel(script),
        tools=[pay],
        input_guardrails=[no_secrets],
        output_guardrails=[no_secrets],
    )


async def _session(client: httpx.AsyncClient) -> str:
    response = await client.post("/v1/sessions", json={})
    assert response.status_code == 201, response.text
    sid: str = response.json()["session_id"]
    return sid


def _events(frames: list[Frame]) -> list[Any]:
    text = "".join(f"event: {f.event}\ndata: {json.dumps(f.data)}\n\n" for f in frames)
    return list(parse_sse(text))


async def test_an_input_trip_over_rest_sse_ends_the_stream_and_no_write_runs(
    server_for: Any,
) -> None:
    ledger: list[float] = []
    base = server_for(guarded_agent(ledger))
    async with client_for(base) as client:
        sid = await _session(client)
        frames = await read_sse(
            client, "POST", f"/v1/sessions/{sid}/messages", json_body={"message": "pay the secret"}
        )
        state = (await client.get(f"/v1/sessions/{sid}/state")).json()
    check_events(_events(frames))
    (verdict,) = [f.data for f in frames if f.event == "guardrail_verdict"]
    assert verdict["tripwire"] is True and verdict["stage"] == "input"
    assert verdict["reason"] == "mentions a secret"
    assert frames[-1].event == "turn_complete"
    assert frames[-1].data["stop_reason"] == "guardrail_tripped"
    assert not [f for f in frames if f.event == "tool_start"]
    assert ledger == [] and state["writes"] == {}


async def test_an_output_trip_over_rest_sse(server_for: Any) -> None:
    ledger: list[float] = []
    base = server_for(guarded_agent(ledger))
    async with client_for(base) as client:
        sid = await _session(client)
        frames = await read_sse(
            client, "POST", f"/v1/sessions/{sid}/messages", json_body={"message": "pay five"}
        )
    check_events(_events(frames))
    assert ledger == [5.0]
    stages = [
        (f.data["stage"], f.data["tripwire"]) for f in frames if f.event == "guardrail_verdict"
    ]
    assert stages == [("input", False), ("output", True)]
    assert frames[-1].data["stop_reason"] == "guardrail_tripped"


async def _lines(client: httpx.AsyncClient, url: str, body: Any) -> list[str]:
    async with client.stream("POST", url, json=body) as response:
        assert response.status_code == 200, await response.aread()
        return [line[6:] async for line in response.aiter_lines() if line.startswith("data: ")]


async def test_an_input_trip_over_the_ai_sdk_chat_finishes_as_content_filter(
    server_for: Any,
) -> None:
    ledger: list[float] = []
    base = server_for(guarded_agent(ledger))
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "a secret"}]}
    async with client_for(base) as client:
        data = await _lines(client, "/v1/aisdk/chat", {"id": "chat-g", "messages": [message]})
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    (guardrail,) = [c for c in chunks if c["type"] == "data-guardrail"]
    assert guardrail["data"]["tripwire"] is True and guardrail["data"]["name"] == "no_secrets"
    (finish,) = [c for c in chunks if c["type"] == "finish"]
    assert finish["finishReason"] == "content-filter"
    assert ledger == []


async def test_an_input_trip_over_ag_ui_is_a_custom_event_then_run_finished(
    server_for: Any,
) -> None:
    ledger: list[float] = []
    base = server_for(guarded_agent(ledger))
    body = RunAgentInput(
        thread_id="thread-g",
        run_id=str(uuid.uuid4()),
        state={},
        tools=[],
        context=[],
        forwarded_props={},
        messages=[{"id": "u1", "role": "user", "content": "a secret"}],  # type: ignore[list-item]  # validated by pydantic
    ).model_dump(mode="json", by_alias=True)
    async with client_for(base) as client:
        events = [json.loads(d) for d in await _lines(client, "/v1/agui", body)]
    (custom,) = [e for e in events if e["type"] == "CUSTOM" and e["name"] == "mainspring.guardrail"]
    assert custom["value"]["tripwire"] is True
    assert events[-1]["type"] == "RUN_FINISHED"
    assert events[-1]["result"]["stopReason"] == "guardrail_tripped"
    assert ledger == []
