"""OpenTelemetry spans per request and per model and tool call, with no content in them."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

pytest.importorskip(
    "opentelemetry.sdk", reason='needs opentelemetry-sdk (pip install -e ".[test]")'
)

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.server.conftest import client_for, config, read_sse

pytestmark = pytest.mark.anyio


async def test_a_turn_is_an_agent_span_with_chat_and_tool_spans_under_its_request(
    server_for: Any,
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    base = server_for(None, config(tracer_provider=provider))
    async with client_for(base) as client:
        sid = (await client.post("/v1/sessions")).json()["session_id"]
        frames = await read_sse(
            client, "POST", f"/v1/sessions/{sid}/messages", json_body={"message": "Pay Alice $20"}
        )
    assert frames[-1].event == "turn_complete"
    request_span = "POST /v1/sessions/{session_id}/messages"
    # the server ends the request's span after its last byte (60 s: only a hang)
    for _ in range(6000):
        if request_span in {span.name for span in exporter.get_finished_spans()}:
            break
        await anyio.sleep(0.01)
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert "chat" not in spans  # no model call without a model
    request = spans[request_span]
    request = spans["POST /v1/sessions/{session_id}/messages"]
    assert request.attributes is not None
    assert request.attributes["http.response.status_code"] == 200
    run = spans["invoke_agent wallet"]
    assert run.parent is not None and run.parent.span_id == request.context.span_id
    assert run.attributes is not None
    assert run.attributes["gen_ai.conversation.id"] == sid
    assert run.attributes["mainspring.stop_reason"] == "pending_action"
    chats = [s for s in exporter.get_finished_spans() if s.name == "chat scripted-demo"]
    usages = [f.data for f in frames if f.event == "usage"]
    assert len(chats) == len(usages) == 2
    for chat, usage in zip(chats, usages, strict=True):
        assert chat.parent is not None and chat.parent.span_id == run.context.span_id
        assert chat.attributes is not None
        assert chat.attributes["gen_ai.usage.output_tokens"] == usage["usage"]["output_tokens"]
    tools = sorted(s.name for s in exporter.get_finished_spans() if s.name.startswith("execute"))
    assert tools == ["execute_tool get_balance", "execute_tool lookup_contact"]
    # Figures only: no prompt, argument or result text in any span.
    for span in exporter.get_finished_spans():
        for value in (span.attributes or {}).values():
            assert "Alice" not in str(value) and "acct_alice" not in str(value)
