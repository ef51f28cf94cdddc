"""The server's trace recorder: its recent runs, their model calls and activities.

A bounded, in-memory record the trace inspector (``/trace``) reads. A *run*
is one stream the server pumps (a message, or a decision that continues a
turn); it collects

- the token-accounting snapshots of its turns (the recorder is a
  :class:`~mainspring.context.sinks.SnapshotSink` the server adds to its
  agent's accounting), one per model call: composition, stable prefix,
  provider cache figures, prefix reuse;
- activities: tool calls (with their duration and outcome), pending actions,
  canvases, errors, retries and rate limits of model calls, prefix mutations,
  warnings logged under ``mainspring``, and the application's own
  :func:`trace_event` calls.

The recorder keeps at most ``max_runs`` runs (the oldest go first) and
``max_activities`` activities per run (the oldest go first, counted as
dropped). Raw text (messages, tool inputs and results, segment content) is
kept only with ``include_content``; otherwise a run holds names and figures.
"""

from __future__ import annotations

import contextvars
import dataclasses
import logging
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from typing import Any

from pydantic import JsonValue

from mainspring.agent import Agent
from mainspring.context.accounting import Accounting
from mainspring.context.snapshot import TurnSnapshot
from mainspring.errors import ConfigError
from mainspring.events import (
    Canvas,
    ErrorEvent,
    Event,
    GuardrailVerdict,
    PendingAction,
    PermissionDenied,
    StreamStarted,
    TextDelta,
    ThinkingDelta,
    ToolProgress,
    ToolResult,
    ToolStart,
    TurnComplete,
)
from mainspring.session import Session

__all__ = ["RunTrace", "TraceRecorder", "trace_event"]

_current: contextvars.ContextVar[RunTrace | None] = contextvars.ContextVar(
    "mainspring_trace_run", default=None
)
_PREVIEW = 200
"""Characters of raw text kept per item (with ``include_content``)."""


def trace_event(name: str, **data: JsonValue) -> None:
    """Record an application event on the server run this code runs in (else nothing).

    Call it from a tool or hook of an agent the server runs; it shows on the
    run's activities in the trace inspector. ``data`` must be JSON; it is kept
    only where the server includes raw content, its keys always.
    """
    run = _current.get()
    if run is not None:
        run.activity("event", name, data=dict(data))


class RunTrace:
    """One run the server pumped: what it streamed, called and spent."""

    def __init__(self, recorder: TraceRecorder, *, session_id: str, principal: str, kind: str):
        """A run of ``session_id`` for ``principal`` (``kind``: message or decision)."""
        self.recorder = recorder
        self.run_id = str(uuid.uuid4())
        self.session_id = session_id
        self.principal = principal
        self.kind = kind
        self.stream_id: str | None = None
        self.started_at = time.time()
        self.ended_at: float | None = None
        self.status = "running"
        self.stop_reason: str | None = None
        self.turn_index: int | None = None
        self.events = 0
        self.text_chars = 0
        self.thinking_chars = 0
        self.snapshots: list[TurnSnapshot] = []
        self.activities: deque[dict[str, JsonValue]] = deque(maxlen=recorder.max_activities)
        self.dropped = 0
        self._seq = 0
        self._tool_started: dict[str, float] = {}

    def activity(
        self, kind: str, name: str, *, data: Mapping[str, JsonValue] | None = None, **fields: Any
    ) -> None:
        """Append one activity (``data`` is raw content: kept only with ``include_content``)."""
        if self.activities.maxlen is not None and len(self.activities) == self.activities.maxlen:
            self.dropped += 1
        self._seq += 1
        item: dict[str, JsonValue] = {
            "seq": self._seq,
            "at": round(time.time() - self.started_at, 4),
            "kind": kind,
            "name": name,
        }
        item.update({k: v for k, v in fields.items() if v is not None})
        if data:
            item["keys"] = list[JsonValue](sorted(data))
            if self.recorder.include_content:
                item["data"] = dict(data)
        self.activities.append(item)

    def observe(self, event: Event) -> None:
        """Account for one event of the run's stream."""
        self.events += 1
        match event:
            case StreamStarted():
                self.stream_id = event.stream_id
            case TextDelta():
                self.text_chars += len(event.text)
            case ThinkingDelta():
                self.thinking_chars += len(event.text)
            case ToolStart():
                self._tool_started[event.tool_use_id] = time.monotonic()
                self.activity("tool", event.name, data=event.input, phase="start")
            case ToolProgress():
                self.activity("tool", event.name, phase="progress", pct=event.pct)
            case ToolResult():
                began = self._tool_started.pop(event.tool_use_id, None)
                took = round(time.monotonic() - began, 4) if began is not None else None
                self.activity(
                    "tool",
                    event.name,
                    phase="result",
                    is_error=event.is_error,
                    chars=len(event.content),
                    seconds=took,
                    content=self._text(event.content),
                )
            case PendingAction():
                findings: list[JsonValue] = [
                    {"source": f.source, "tier": f.tier, "action": f.action} for f in event.findings
                ]
                self.activity(
                    "pending",
                    event.name,
                    reason=event.reason,
                    client_executed=event.client_executed,
                    findings=findings,
                )
            case Canvas() | PermissionDenied() | GuardrailVerdict():
                self._noted(event)
            case ErrorEvent():
                self.status = "error"
                self.activity("error", event.code, retryable=event.retryable)
            case TurnComplete():
                self.stop_reason = event.stop_reason
                self.turn_index = event.turn_index
                if self.status == "running":
                    self.status = "complete"
            case _:
                pass

    def _noted(self, event: Canvas | PermissionDenied | GuardrailVerdict) -> None:
        """An activity without a duration: a canvas, a refusal, a guardrail's verdict."""
        if isinstance(event, Canvas):
            self.activity("canvas", event.kind, title=event.title)
        elif isinstance(event, PermissionDenied):  # a call refused by policy
            self.activity("denied", event.name, reason=event.reason, source=event.source)
        else:
            self.activity(
                "guardrail",
                event.name,
                stage=event.stage,
                tripwire=event.tripwire,
                reason=self._text(event.reason),
                error=event.error or None,
            )

    def _text(self, text: str) -> str | None:
        return text[:_PREVIEW] if self.recorder.include_content else None

    def end(self) -> None:
        """The stream ended (or was abandoned)."""
        self.ended_at = time.time()
        if self.status == "running":
            self.status = "interrupted"

    def summary(self) -> dict[str, JsonValue]:
        """The run's line in the run rail."""
        calls = [c for s in self.snapshots for c in s.calls]
        tokens = sum(c.tokens for c in calls)
        read = sum(c.usage.cache_read_tokens for c in calls)
        total_input = sum(c.usage.total_input_tokens for c in calls)
        tools = sorted({str(a["name"]) for a in self.activities if a["kind"] == "tool"})
        return {
            "run_id": self.run_id,
            "stream_id": self.stream_id,
            "session_id": self.session_id,
            "kind": self.kind,
            "status": self.status,
            "stop_reason": self.stop_reason,
            "turn_index": self.turn_index,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "events": self.events,
            "text_chars": self.text_chars,
            "thinking_chars": self.thinking_chars,
            "calls": len(calls),
            "tokens": tokens,
            "cost_usd": sum(c.cost.usd for c in calls),
            "cache_hit_rate": read / total_input if total_input else None,
            "models": list[JsonValue](sorted({c.model for c in calls})),
            "tools": list[JsonValue](tools),
            "activities": len(self.activities),
            "dropped_activities": self.dropped,
        }


class TraceRecorder:
    """The server's recent runs, bounded; a snapshot sink for its agent's accounting."""

    def __init__(
        self, *, max_runs: int = 200, max_activities: int = 500, include_content: bool = False
    ) -> None:
        """Keep ``max_runs`` runs of ``max_activities`` activities each.

        Raises:
            ConfigError: A bound below 1.
        """
        if max_runs < 1 or max_activities < 1:
            raise ConfigError("a trace recorder keeps at least one run and one activity")
        self.max_runs = max_runs
        self.max_activities = max_activities
        self.include_content = include_content
        self._runs: OrderedDict[str, RunTrace] = OrderedDict()
        self._live: dict[str, RunTrace] = {}
        """The running run of each session (snapshots are matched to it)."""
        _install_log_capture()

    def __len__(self) -> int:
        return len(self._runs)

    # --------------------------------------------------------------- wiring

    def instrument(self, agent: Agent) -> Agent:
        """``agent`` with token accounting on and this recorder among its sinks."""
        accounting = agent.context.accounting
        if accounting is None:
            accounting = Accounting(sinks=(self,), include_content=self.include_content)
        elif self not in accounting.sinks:
            accounting = dataclasses.replace(accounting, sinks=(*accounting.sinks, self))
        return dataclasses.replace(
            agent, context=dataclasses.replace(agent.context, accounting=accounting)
        )

    async def observe(
        self, session: Session, stream: AsyncGenerator[Event, None]
    ) -> AsyncGenerator[Event, None]:
        """``stream`` (a run of ``session``), recorded as it is pumped."""
        kind = "decision" if session.pending is not None else "message"
        run = RunTrace(
            self, session_id=session.session_id, principal=session.state.principal or "", kind=kind
        )
        self._add(run)
        _current.set(run)  # the pump's own task: its children (the engine) inherit it
        try:
            async with aclosing(stream) as events:
                async for event in events:
                    run.observe(event)
                    yield event
        except Exception as exc:
            if run.events == 0:
                self._runs.pop(run.run_id, None)  # refused before it began: no run
            run.status = "error"
            run.activity("error", type(exc).__name__)
            raise
        finally:
            run.end()
            if self._live.get(run.session_id) is run:
                del self._live[run.session_id]

    def _add(self, run: RunTrace) -> None:
        self._runs[run.run_id] = run
        self._live[run.session_id] = run
        while len(self._runs) > self.max_runs:
            self._runs.popitem(last=False)

    # ------------------------------------------------------------ the sink

    def emit(self, snapshot: TurnSnapshot) -> None:
        """A turn's snapshot: kept on the run of its session going on now."""
        run = _current.get() or self._live.get(snapshot.session_id)
        if run is None or run.recorder is not self or run.session_id != snapshot.session_id:
            return
        if not self.include_content:
            snapshot = _without_content(snapshot)
        run.snapshots.append(snapshot)

    def close(self) -> None:
        """Nothing to release; the runs stay readable."""

    # ------------------------------------------------------------- reading

    def runs(self, principal: str, *, query: str = "", limit: int = 100) -> list[RunTrace]:
        """``principal``'s runs, newest first, matching ``query`` (all of its words)."""
        words = query.lower().split()
        found: list[RunTrace] = []
        for run in reversed(self._runs.values()):
            if run.principal != principal:
                continue
            if words:
                haystack = " ".join(str(v) for v in run.summary().values()).lower()
                if not all(w in haystack for w in words):
                    continue
            found.append(run)
            if len(found) >= limit:
                break
        return found

    def run(self, principal: str, run_id: str) -> RunTrace | None:
        """One of ``principal``'s runs."""
        run = self._runs.get(run_id)
        return run if run is not None and run.principal == principal else None


def _without_content(snapshot: TurnSnapshot) -> TurnSnapshot:
    if all(seg.content is None for call in snapshot.calls for seg in call.segments):
        return snapshot
    calls = tuple(
        dataclasses.replace(
            call, segments=tuple(dataclasses.replace(s, content=None) for s in call.segments)
        )
        for call in snapshot.calls
    )
    return dataclasses.replace(snapshot, calls=calls)


class _RunLogs(logging.Handler):
    """Mainspring's log records, on the run whose task logged them."""

    def emit(self, record: logging.LogRecord) -> None:
        run = _current.get()
        if run is None:
            return
        retry = getattr(record, "retry", None)
        if isinstance(retry, dict):
            kind = "rate_limit" if retry.get("rate_limited") else "retry"
            run.activity(
                kind,
                str(retry.get("error", "")),
                attempt=retry.get("attempt"),
                wait_seconds=retry.get("wait_seconds"),
            )
        elif getattr(record, "prefix_change", None) is not None or record.getMessage().startswith(
            "transcript prefix changed"
        ):
            change = getattr(record, "prefix_change", None)
            generation = change.get("generation") if isinstance(change, dict) else None
            run.activity("prefix_mutation", record.getMessage()[:_PREVIEW], generation=generation)
        elif record.levelno >= logging.WARNING:
            run.activity("log", record.name, level=record.levelname)


_HANDLER = _RunLogs(level=logging.INFO)


def _install_log_capture() -> None:
    logger = logging.getLogger("mainspring")
    if _HANDLER not in logger.handlers:
        logger.addHandler(_HANDLER)
