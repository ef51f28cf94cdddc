"""Telemetry sinks: where a turn's :class:`~mainspring.context.snapshot.TurnSnapshot` goes.

A sink receives one snapshot at the end of each turn (when accounting is on).
Sinks are synchronous: a snapshot is small and is emitted once per turn. Its
figures are worked out when first read (a sink that only keeps it pays
nothing for them); they are those of the turn as it ended whenever they are
read, from any thread. Until then the snapshot holds what they need (at most
until the compiler next edits its history view or is destroyed).

- :class:`InMemorySink` keeps the snapshots in a list (optionally a ring buffer),
  for tests and dashboards in the same process.
- :class:`JsonlSink` appends one JSON object per line to a file, the format
  ``mainspring report`` reads back.
- :class:`OpenTelemetrySink` records one ``mainspring.turn`` span per snapshot,
  with one ``mainspring.call`` event per model call; figures only, never content.
  It needs the ``otel`` extra and imports OpenTelemetry only when built.
- :class:`SinkSet` fans a snapshot out to several sinks; a failing sink is
  logged and skipped unless the set is strict.

When a session's context pipeline closes, its
:class:`~mainspring.context.snapshot.SessionSummary` goes to every sink that
has an ``emit_summary`` method (:class:`SummarySink`; all the sinks here
do). A sink written before that method existed keeps working: it is skipped.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol, runtime_checkable

from mainspring.context.snapshot import CallSnapshot, SessionSummary, TurnSnapshot
from mainspring.errors import ConfigError, TelemetryError

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer
    from opentelemetry.util.types import AttributeValue

__all__ = [
    "InMemorySink",
    "JsonlSink",
    "OpenTelemetrySink",
    "SinkSet",
    "SnapshotSink",
    "SummarySink",
]

logger = logging.getLogger("mainspring.telemetry")

_OTEL_HINT = 'pip install "mainspring[otel]"'


@runtime_checkable
class SnapshotSink(Protocol):
    """Receives each turn's token-accounting snapshot."""

    def emit(self, snapshot: TurnSnapshot) -> None:
        """Record one turn's snapshot."""
        ...

    def close(self) -> None:
        """Release what the sink holds (files, buffers); calling it twice is harmless."""
        ...


@runtime_checkable
class SummarySink(Protocol):
    """A sink that also records the session summary taken when a session closes."""

    def emit_summary(self, summary: SessionSummary) -> None:
        """Record one session's totals."""
        ...


class InMemorySink:
    """Keeps snapshots in memory, oldest first.

    Args:
        maxlen: Keep only the newest ``maxlen`` snapshots (a ring buffer);
            ``None`` keeps them all.

    Raises:
        ConfigError: ``maxlen`` is below 1.
    """

    def __init__(self, *, maxlen: int | None = None) -> None:
        if maxlen is not None and maxlen < 1:
            raise ConfigError(f"InMemorySink maxlen must be at least 1, got {maxlen}")
        self.maxlen = maxlen
        """The most snapshots kept, or ``None`` for no limit."""
        self.snapshots: list[TurnSnapshot] = []
        """The kept snapshots, in the order they were emitted."""
        self.summaries: list[SessionSummary] = []
        """Session summaries, one per closed session (``maxlen`` bounds them too)."""

    def emit(self, snapshot: TurnSnapshot) -> None:
        """Append the snapshot, dropping the oldest past ``maxlen``."""
        self.snapshots.append(snapshot)
        if self.maxlen is not None and len(self.snapshots) > self.maxlen:
            del self.snapshots[: len(self.snapshots) - self.maxlen]

    def emit_summary(self, summary: SessionSummary) -> None:
        """Append the summary, dropping the oldest past ``maxlen``."""
        self.summaries.append(summary)
        if self.maxlen is not None and len(self.summaries) > self.maxlen:
            del self.summaries[: len(self.summaries) - self.maxlen]

    def close(self) -> None:
        """Nothing to release; the snapshots stay readable."""

    def __repr__(self) -> str:
        return f"InMemorySink(maxlen={self.maxlen!r}, snapshots={len(self.snapshots)})"


class JsonlSink:
    """Appends one compact JSON object per snapshot to a file.

    The file is opened lazily, in append mode, on the first snapshot; every
    line is flushed as it is written, so a crash loses at most the line being
    written. Lines are ``json.dumps(snapshot.to_dict())`` and read back with
    :meth:`TurnSnapshot.from_dict`.

    Args:
        path: The JSONL file; created if missing, appended to if present.
        fsync: Also ``os.fsync`` after each line, to survive an OS crash too.

    Raises:
        ConfigError: The parent directory does not exist, or ``path`` is a directory.
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = Path(path)
        """Where the lines go."""
        self.fsync = fsync
        """Whether each line is also fsynced."""
        if not self.path.parent.is_dir():
            raise ConfigError(
                f"JsonlSink: directory {str(self.path.parent)!r} does not exist; create it first"
            )
        if self.path.is_dir():
            raise ConfigError(f"JsonlSink: {str(self.path)!r} is a directory, not a file")
        self._file: IO[str] | None = None
        self._closed = False
        self._lock = threading.Lock()

    def emit(self, snapshot: TurnSnapshot) -> None:
        """Write the snapshot as one line and flush it.

        Raises:
            ConfigError: The sink was closed.
            TypeError: The snapshot's ``meta`` holds something JSON cannot encode
                (nothing is written then).
        """
        self._write(json.dumps(snapshot.to_dict(), separators=(",", ":"), ensure_ascii=False))

    def emit_summary(self, summary: SessionSummary) -> None:
        """Write the session summary as one line (``"type": "session_summary"``)."""
        self._write(json.dumps(summary.to_dict(), separators=(",", ":"), ensure_ascii=False))

    def _write(self, line: str) -> None:
        with self._lock:
            if self._closed:
                raise ConfigError(f"JsonlSink({str(self.path)!r}) is closed")
            if self._file is None:
                self._file = self.path.open("a", encoding="utf-8", newline="\n")
            self._file.write(line + "\n")
            self._file.flush()
            if self.fsync:
                os.fsync(self._file.fileno())

    def close(self) -> None:
        """Close the file; later snapshots are refused. Safe to call twice."""
        with self._lock:
            self._closed = True
            file, self._file = self._file, None
        if file is not None:
            file.close()

    def __repr__(self) -> str:
        return f"JsonlSink({str(self.path)!r})"


class OpenTelemetrySink:
    """Records each snapshot as an OpenTelemetry span, figures only.

    Each snapshot becomes one ``mainspring.turn`` span, started at the turn's
    ``started_at`` and ended when emitted, whose attributes follow the GenAI
    semantic conventions where they fit (``gen_ai.usage.input_tokens`` counts
    every input token, cached or not) plus ``mainspring.*`` figures. Each model
    call becomes one ``mainspring.call`` span event with its step, model,
    tokens, usage, cost and ``mainspring.source.<source>.tokens`` per source.
    Segment content and snapshot ``meta`` are never recorded.

    Args:
        tracer: The tracer to use; defaults to
            ``opentelemetry.trace.get_tracer("mainspring")`` (the global provider).

    Raises:
        ConfigError: OpenTelemetry is not installed (``pip install "mainspring[otel]"``).
    """

    def __init__(self, *, tracer: Tracer | None = None) -> None:
        try:
            from opentelemetry import trace
        except ImportError as exc:
            raise ConfigError(f"OpenTelemetrySink needs: {_OTEL_HINT}") from exc
        self.tracer: Tracer = tracer if tracer is not None else trace.get_tracer("mainspring")
        """Where the spans go."""

    def emit(self, snapshot: TurnSnapshot) -> None:
        """Record one ``mainspring.turn`` span with one event per model call."""
        span = self.tracer.start_span(
            "mainspring.turn",
            attributes=_turn_attributes(snapshot),
            start_time=_start_time_ns(snapshot.started_at),
        )
        try:
            for call in snapshot.calls:
                span.add_event("mainspring.call", attributes=_call_attributes(call))
        finally:
            span.end()

    def emit_summary(self, summary: SessionSummary) -> None:
        """Record one ``mainspring.session`` span with the session's totals."""
        usage = summary.usage
        attributes: dict[str, AttributeValue] = {
            "gen_ai.conversation.id": summary.session_id,
            "gen_ai.usage.input_tokens": usage.total_input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
            "mainspring.turns": summary.turns,
            "mainspring.calls": summary.calls,
            "mainspring.tokens": summary.tokens,
            "mainspring.cost_usd": summary.cost_usd,
            "mainspring.retained_turns": summary.retained_turns,
        }
        for source, tokens in summary.by_source.items():
            attributes[f"mainspring.source.{source}.tokens"] = tokens
        start = summary.started_at if summary.started_at is not None else summary.ended_at
        self.tracer.start_span(
            "mainspring.session", attributes=attributes, start_time=_start_time_ns(start)
        ).end()

    def close(self) -> None:
        """Nothing to release; the tracer provider owns the exporters."""

    def __repr__(self) -> str:
        return f"OpenTelemetrySink(tracer={self.tracer!r})"


def _turn_attributes(snapshot: TurnSnapshot) -> dict[str, AttributeValue]:
    """The span attributes for a turn: figures only, no content or ``meta``."""
    usage = snapshot.usage
    attributes: dict[str, AttributeValue] = {
        "gen_ai.conversation.id": snapshot.session_id,
        "gen_ai.usage.input_tokens": usage.total_input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": usage.cache_read_tokens,
        "gen_ai.usage.cache_creation.input_tokens": usage.cache_write_tokens,
        "gen_ai.usage.reasoning.output_tokens": usage.reasoning_tokens,
        "mainspring.session_id": snapshot.session_id,
        "mainspring.turn_index": snapshot.turn_index,
        "mainspring.snapshot_version": snapshot.version,
        "mainspring.calls": len(snapshot.calls),
        "mainspring.requests": usage.requests,
        "mainspring.tokens_sent": snapshot.tokens,
        "mainspring.chars_sent": snapshot.chars,
        "mainspring.prefix_reuse": snapshot.prefix_reuse,
        "mainspring.cache_read_tokens": usage.cache_read_tokens,
        "mainspring.cache_write_tokens": usage.cache_write_tokens,
        "mainspring.cost_usd": snapshot.cost_usd,
    }
    if snapshot.cache_hit_rate is not None:
        attributes["mainspring.cache_hit_rate"] = snapshot.cache_hit_rate
    models = sorted({call.model for call in snapshot.calls})
    if len(models) == 1:
        attributes["gen_ai.request.model"] = models[0]
    return attributes


def _call_attributes(call: CallSnapshot) -> dict[str, AttributeValue]:
    """The span event attributes for one model call: figures only, no content."""
    usage = call.usage
    attributes: dict[str, AttributeValue] = {
        "mainspring.step": call.step,
        "gen_ai.request.model": call.model,
        "gen_ai.usage.input_tokens": usage.total_input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "mainspring.tokenizer": call.tokenizer,
        "mainspring.tokens_exact": call.exact,
        "mainspring.tokens_sent": call.tokens,
        "mainspring.chars_sent": call.chars,
        "mainspring.prefix_tokens": call.prefix_tokens,
        "mainspring.prefix_reuse": call.prefix_reuse,
        "mainspring.stable_tokens": call.stable_tokens,
        "mainspring.cache_read_tokens": usage.cache_read_tokens,
        "mainspring.cache_write_tokens": usage.cache_write_tokens,
        "mainspring.reasoning_tokens": usage.reasoning_tokens,
        "mainspring.cost_usd": call.cost.usd,
        "mainspring.cost_priced": call.cost.priced,
        "mainspring.price_source": call.cost.price_source,
    }
    if call.cache_hit_rate is not None:
        attributes["mainspring.cache_hit_rate"] = call.cache_hit_rate
    by_source: dict[str, int] = {}
    for segment in call.segments:
        by_source[segment.source] = by_source.get(segment.source, 0) + segment.tokens
    for source, tokens in by_source.items():
        attributes[f"mainspring.source.{source}.tokens"] = tokens
    return attributes


def _start_time_ns(started_at: float) -> int | None:
    """The turn's start in ns, or ``None`` (now) if it is unset or in the future."""
    if 0 < started_at <= time.time():
        return int(started_at * 1_000_000_000)
    return None


class SinkSet:
    """Gives each snapshot to several sinks; one failing sink never stops the others.

    A sink that raises is logged (logger ``"mainspring.telemetry"``, naming the
    sink) and skipped. With ``strict=True`` every sink still gets the snapshot,
    then :class:`~mainspring.errors.TelemetryError` is raised, chained to the
    first failure. A :class:`SinkSet` is itself a :class:`SnapshotSink`.

    Args:
        sinks: The sinks, in the order they are called.
        strict: Raise after a sink failed instead of only logging it.
    """

    def __init__(self, sinks: Iterable[SnapshotSink] = (), *, strict: bool = False) -> None:
        self.sinks: list[SnapshotSink] = list(sinks)
        """The sinks, called in this order."""
        self.strict = strict
        """Whether a failing sink raises :class:`~mainspring.errors.TelemetryError`."""

    def add(self, sink: SnapshotSink) -> None:
        """Append a sink."""
        self.sinks.append(sink)

    def emit(self, snapshot: TurnSnapshot) -> None:
        """Give the snapshot to every sink.

        Raises:
            TelemetryError: A sink failed and the set is strict.
        """
        failures: list[tuple[SnapshotSink, Exception]] = []
        for sink in self.sinks:
            try:
                sink.emit(snapshot)
            except Exception as exc:
                logger.exception(
                    "telemetry sink %r failed to emit turn %d of session %r",
                    sink,
                    snapshot.turn_index,
                    snapshot.session_id,
                )
                failures.append((sink, exc))
        if failures:
            self._raise_if_strict("emit", failures)

    def emit_summary(self, summary: SessionSummary) -> None:
        """Give the session summary to every sink that takes one (see :class:`SummarySink`).

        Raises:
            TelemetryError: A sink failed and the set is strict.
        """
        failures: list[tuple[SnapshotSink, Exception]] = []
        for sink in self.sinks:
            emit = getattr(sink, "emit_summary", None)
            if emit is None:
                continue
            try:
                emit(summary)
            except Exception as exc:
                logger.exception(
                    "telemetry sink %r failed to emit the summary of session %r",
                    sink,
                    summary.session_id,
                )
                failures.append((sink, exc))
        self._raise_if_strict("emit the session summary", failures)

    def close(self) -> None:
        """Close every sink.

        Raises:
            TelemetryError: A sink failed to close and the set is strict.
        """
        failures: list[tuple[SnapshotSink, Exception]] = []
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:
                logger.exception("telemetry sink %r failed to close", sink)
                failures.append((sink, exc))
        self._raise_if_strict("close", failures)

    def _raise_if_strict(self, action: str, failures: list[tuple[SnapshotSink, Exception]]) -> None:
        if not failures or not self.strict:
            return
        names = ", ".join(repr(sink) for sink, _ in failures)
        raise TelemetryError(
            f"{len(failures)} telemetry sink(s) failed to {action}: {names}"
        ) from failures[0][1]

    def __repr__(self) -> str:
        return f"SinkSet({self.sinks!r}, strict={self.strict!r})"
