"""OpenTelemetry spans of a run, per the GenAI semantic conventions.

A run is one ``invoke_agent {agent}`` span (a child of the request that
started it), with one ``chat {model}`` span per model call — from the step's
start to its ``usage`` event, carrying the tokens — and one
``execute_tool {tool}`` span per tool call, from ``tool_start`` to
``tool_result``. Times are when the server saw the events. No content is
recorded: no prompt, no arguments, no results. A no-op without the ``otel``
extra.
"""

from __future__ import annotations

import time
from typing import Any

from mainspring.events import (
    ErrorEvent,
    Event,
    GuardrailVerdict,
    StreamStarted,
    TextDelta,
    ThinkingDelta,
    ThinkingDone,
    ToolCallDelta,
    ToolResult,
    ToolStart,
    TurnComplete,
    UsageEvent,
)

__all__ = ["RunSpans", "tracer_of"]

_MODEL_OUTPUT = (TextDelta, ThinkingDelta, ThinkingDone, ToolCallDelta)


def tracer_of(provider: Any = None) -> Any:
    """A tracer from ``provider`` (or the global one), or ``None`` without OpenTelemetry."""
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    if provider is not None:
        return provider.get_tracer("mainspring.server")
    return trace.get_tracer("mainspring.server")


class RunSpans:
    """Turns a run's events into spans as they pass."""

    def __init__(self, tracer: Any, *, agent: str, session_id: str) -> None:
        """Record under ``tracer`` (the request's span, current now, becomes the parent)."""
        from opentelemetry import context, trace

        self._trace = trace
        self._tracer = tracer
        self._parent = context.get_current()
        self._agent = agent
        self._session_id = session_id
        self._run: Any = None
        self._chat: Any = None
        self._tools: dict[str, Any] = {}
        self._step_at: int | None = None

    def _start(
        self, name: str, attributes: dict[str, Any], *, parent: Any = None, at: int | None = None
    ) -> Any:
        ctx = self._trace.set_span_in_context(parent) if parent is not None else self._parent
        return self._tracer.start_span(name, context=ctx, attributes=attributes, start_time=at)

    def _begin_run(self) -> None:
        self._run = self._start(
            f"invoke_agent {self._agent}",
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": self._agent,
                "gen_ai.conversation.id": self._session_id,
            },
        )

    def _step_boundary(self) -> None:
        self._step_at = time.time_ns()  # a model call, if one comes, started here

    def _begin_chat(self) -> None:
        if self._chat is None and self._run is not None:
            self._chat = self._start(
                "chat",
                {"gen_ai.operation.name": "chat", "gen_ai.conversation.id": self._session_id},
                parent=self._run,
                at=self._step_at,
            )

    def observe(self, event: Event) -> None:
        """Account for one event of the run."""
        if isinstance(event, StreamStarted):
            self._begin_run()
            self._step_boundary()
            return
        if self._run is None:
            self._begin_run()
            self._step_boundary()
        if isinstance(event, _MODEL_OUTPUT):
            self._begin_chat()
        elif isinstance(event, GuardrailVerdict):
            self._guardrail(event)
        elif isinstance(event, UsageEvent) and event.model.startswith("guardrail:"):
            pass  # a guardrail's own model call: on its guardrail's span, not a chat step
        elif isinstance(event, UsageEvent):
            self._begin_chat()
            chat = self._chat
            chat.update_name(f"chat {event.model}")
            chat.set_attribute("gen_ai.request.model", event.model)
            chat.set_attribute("gen_ai.usage.input_tokens", event.usage.total_input_tokens)
            chat.set_attribute("gen_ai.usage.output_tokens", event.usage.output_tokens)
            chat.set_attribute(
                "gen_ai.usage.cache_read.input_tokens", event.usage.cache_read_tokens
            )
            chat.set_attribute("mainspring.cost_usd", event.cost_usd)
            chat.end()
            self._chat = None
            self._step_boundary()
        elif isinstance(event, ToolStart):
            self._tools[event.tool_use_id] = self._start(
                f"execute_tool {event.name}",
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": event.name,
                    "gen_ai.tool.call.id": event.tool_use_id,
                },
                parent=self._run,
            )
        elif isinstance(event, ToolResult):
            span = self._tools.pop(event.tool_use_id, None)
            if span is not None:
                if event.is_error:
                    span.set_attribute("error.type", "tool_error")
                span.end()
            self._step_boundary()
        elif isinstance(event, TurnComplete | ErrorEvent):
            self.close(event)

    def _guardrail(self, event: GuardrailVerdict) -> None:
        """A guardrail's verdict: a span under the run (at the verdict: its start is not sent)."""
        span = self._start(
            f"guardrail {event.name}",
            {
                "mainspring.guardrail.name": event.name,
                "mainspring.guardrail.stage": event.stage,
                "mainspring.guardrail.tripwire": event.tripwire,
            },
            parent=self._run,
        )
        if event.error:
            span.set_attribute("error.type", "guardrail_failed")
        span.end()

    def close(self, terminal: Event | None = None) -> None:
        """End every open span (the run's last)."""
        if self._chat is not None:  # cut mid-call (a cancel, a failure)
            self._chat.set_attribute("error.type", "interrupted")
            self._chat.end()
            self._chat = None
        for span in self._tools.values():
            span.set_attribute("error.type", "interrupted")
            span.end()
        self._tools.clear()
        if self._run is not None:
            if isinstance(terminal, TurnComplete):
                self._run.set_attribute("mainspring.stop_reason", terminal.stop_reason)
            elif isinstance(terminal, ErrorEvent):
                self._run.set_attribute("error.type", terminal.code)
            self._run.end()
            self._run = None
