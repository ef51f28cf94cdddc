from __future__ import annotations

import builtins
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mainspring.context.sinks import (
    InMemorySink,
    JsonlSink,
    OpenTelemetrySink,
    SinkSet,
    SnapshotSink,
)
from mainspring.context.snapshot import CallSnapshot, CostEstimate, Segment, TurnSnapshot
from mainspring.errors import ConfigError, TelemetryError
from mainspring.usage import Usage

SECRET = "TOP-SECRET-PROMPT-TEXT"


def seg(source: str, tokens: int, *, content: str | None = None) -> Segment:
    return Segment(
        source=source,
        module="transcript",
        processor="base",
        slot="history",
        chars=tokens * 4,
        tokens=tokens,
        share=0.0,
        content=content,
    )


def call(step: int, *, model: str = "gpt-test", content: str | None = None) -> CallSnapshot:
    segments = (
        seg("system", 100, content=content),
        seg("user", 40 * step, content=content),
        seg("tool_result", 10, content=content),
        seg("user", 5, content=content),
    )
    tokens = sum(s.tokens for s in segments)
    return CallSnapshot(
        step=step,
        model=model,
        tokenizer="o200k_base",
        exact=True,
        segments=segments,
        chars=tokens * 4,
        tokens=tokens,
        prefix_tokens=100 if step > 1 else 0,
        stable_tokens=100,
        usage=Usage(
            input_tokens=50 * step,
            cache_read_tokens=100 if step > 1 else 0,
            cache_write_tokens=100 if step == 1 else 0,
            output_tokens=20 + step,
            reasoning_tokens=3,
            requests=1,
        ),
        cost=CostEstimate(usd=0.001 * step, priced=True, price_source="configured"),
    )


def snapshot(
    turn: int = 0,
    *,
    calls: int = 2,
    content: str | None = None,
    started_at: float | None = None,
    session_id: str = "sess-1",
) -> TurnSnapshot:
    return TurnSnapshot(
        session_id=session_id,
        turn_index=turn,
        calls=tuple(call(i + 1, content=content) for i in range(calls)),
        started_at=time.time() - 2.0 if started_at is None else started_at,
        meta={"note": "é ünïcode"},
    )


# InMemorySink


def test_in_memory_sink_keeps_order() -> None:
    sink = InMemorySink()
    snaps = [snapshot(i) for i in range(5)]
    for s in snaps:
        sink.emit(s)
    sink.close()
    assert sink.snapshots == snaps


def test_in_memory_sink_maxlen_is_a_ring_buffer() -> None:
    sink = InMemorySink(maxlen=3)
    snaps = [snapshot(i) for i in range(5)]
    for s in snaps:
        sink.emit(s)
    assert [s.turn_index for s in sink.snapshots] == [2, 3, 4]


@pytest.mark.parametrize("maxlen", [0, -1])
def test_in_memory_sink_rejects_bad_maxlen(maxlen: int) -> None:
    with pytest.raises(ConfigError):
        InMemorySink(maxlen=maxlen)


def test_sinks_satisfy_the_protocol(tmp_path: Path) -> None:
    sinks: list[SnapshotSink] = [
        InMemorySink(),
        JsonlSink(tmp_path / "t.jsonl"),
        OpenTelemetrySink(tracer=TracerProvider().get_tracer("t")),
        SinkSet(),
    ]
    assert all(isinstance(s, SnapshotSink) for s in sinks)


# JsonlSink


def read_lines(path: Path) -> list[TurnSnapshot]:
    with path.open(encoding="utf-8") as f:
        return [TurnSnapshot.from_dict(json.loads(line)) for line in f]


def test_jsonl_lines_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "turns.jsonl"
    sink = JsonlSink(path)
    assert not path.exists()  # opened lazily
    snaps = [snapshot(0, content=SECRET), snapshot(1)]
    for s in snaps:
        sink.emit(s)
        # flushed per line: readable before close
        assert path.read_text(encoding="utf-8").endswith("\n")
    assert read_lines(path) == snaps
    sink.close()
    sink.close()  # twice is harmless
    raw = path.read_text(encoding="utf-8")
    assert "é ünïcode" in raw  # ensure_ascii=False
    assert ", " not in raw and '": ' not in raw  # compact separators
    assert len(raw.splitlines()) == 2


def test_jsonl_reopen_appends(tmp_path: Path) -> None:
    path = tmp_path / "turns.jsonl"
    first = JsonlSink(path)
    first.emit(snapshot(0))
    first.close()
    second = JsonlSink(path, fsync=True)
    second.emit(snapshot(1))
    second.emit(snapshot(2))
    second.close()
    assert [s.turn_index for s in read_lines(path)] == [0, 1, 2]


def test_jsonl_missing_directory_is_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        JsonlSink(tmp_path / "nope" / "turns.jsonl")
    assert not (tmp_path / "nope").exists()


def test_jsonl_path_that_is_a_directory_is_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="directory"):
        JsonlSink(tmp_path)


def test_jsonl_emit_after_close_is_refused(tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path / "t.jsonl")
    sink.emit(snapshot(0))
    sink.close()
    with pytest.raises(ConfigError, match="closed"):
        sink.emit(snapshot(1))
    assert len(read_lines(tmp_path / "t.jsonl")) == 1


def test_jsonl_unencodable_meta_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    sink = JsonlSink(path)
    bad = TurnSnapshot(session_id="s", turn_index=0, calls=(), started_at=1.0, meta={"x": object()})
    with pytest.raises(TypeError):
        sink.emit(bad)
    sink.emit(snapshot(1))
    sink.close()
    assert [s.turn_index for s in read_lines(path)] == [1]


# OpenTelemetrySink


@pytest.fixture
def otel() -> tuple[OpenTelemetrySink, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OpenTelemetrySink(tracer=provider.get_tracer("test")), exporter


def only_span(exporter: InMemorySpanExporter) -> ReadableSpan:
    spans = exporter.get_finished_spans()
    assert len(spans) == 1
    return spans[0]


def test_otel_span_attributes_match_the_snapshot(
    otel: tuple[OpenTelemetrySink, InMemorySpanExporter],
) -> None:
    sink, exporter = otel
    snap = snapshot(3)
    sink.emit(snap)
    sink.close()
    span = only_span(exporter)
    assert span.name == "mainspring.turn"
    attrs = dict(span.attributes or {})
    usage = snap.usage
    assert attrs["gen_ai.usage.input_tokens"] == usage.total_input_tokens == (50 + 100) + 100 + 100
    assert attrs["gen_ai.usage.output_tokens"] == usage.output_tokens == 21 + 22
    assert attrs["gen_ai.conversation.id"] == "sess-1"
    assert attrs["gen_ai.request.model"] == "gpt-test"
    assert attrs["mainspring.session_id"] == "sess-1"
    assert attrs["mainspring.turn_index"] == 3
    assert attrs["mainspring.tokens_sent"] == snap.tokens
    assert attrs["mainspring.prefix_reuse"] == pytest.approx(snap.prefix_reuse)
    assert attrs["mainspring.cache_hit_rate"] == pytest.approx(snap.cache_hit_rate)
    assert attrs["mainspring.cost_usd"] == pytest.approx(snap.cost_usd)
    assert attrs["mainspring.cache_read_tokens"] == usage.cache_read_tokens == 100
    assert attrs["mainspring.cache_write_tokens"] == usage.cache_write_tokens == 100
    assert attrs["mainspring.calls"] == 2
    assert span.start_time == int(snap.started_at * 1_000_000_000)
    assert span.end_time is not None and span.end_time >= span.start_time


def test_otel_one_event_per_call(otel: tuple[OpenTelemetrySink, InMemorySpanExporter]) -> None:
    sink, exporter = otel
    snap = snapshot(0, calls=2)
    sink.emit(snap)
    events = only_span(exporter).events
    assert [e.name for e in events] == ["mainspring.call", "mainspring.call"]
    for event, c in zip(events, snap.calls, strict=True):
        attrs = dict(event.attributes or {})
        assert attrs["mainspring.step"] == c.step
        assert attrs["gen_ai.request.model"] == c.model
        assert attrs["mainspring.tokens_sent"] == c.tokens
        assert attrs["gen_ai.usage.input_tokens"] == c.usage.total_input_tokens
        assert attrs["gen_ai.usage.output_tokens"] == c.usage.output_tokens
        assert attrs["mainspring.prefix_reuse"] == pytest.approx(c.prefix_reuse)
        assert attrs["mainspring.cost_usd"] == pytest.approx(c.cost.usd)
        assert attrs["mainspring.source.system.tokens"] == 100
        assert attrs["mainspring.source.user.tokens"] == 40 * c.step + 5  # summed per source
        assert attrs["mainspring.source.tool_result.tokens"] == 10


def test_otel_omits_cache_hit_rate_when_none(
    otel: tuple[OpenTelemetrySink, InMemorySpanExporter],
) -> None:
    sink, exporter = otel
    empty = TurnSnapshot(session_id="s", turn_index=0, calls=(), started_at=time.time())
    assert empty.cache_hit_rate is None
    sink.emit(empty)
    attrs = dict(only_span(exporter).attributes or {})
    assert "mainspring.cache_hit_rate" not in attrs
    assert "gen_ai.request.model" not in attrs
    assert attrs["mainspring.tokens_sent"] == 0


@pytest.mark.parametrize("started_at", [0.0, time.time() + 3600], ids=["zero", "in-an-hour"])
def test_otel_unusable_start_time_falls_back_to_now(
    otel: tuple[OpenTelemetrySink, InMemorySpanExporter], started_at: float
) -> None:
    sink, exporter = otel
    before = time.time_ns()
    sink.emit(snapshot(0, started_at=started_at))
    span = only_span(exporter)
    assert span.start_time is not None and span.start_time >= before


def test_otel_never_records_content(otel: tuple[OpenTelemetrySink, InMemorySpanExporter]) -> None:
    sink, exporter = otel
    snap = snapshot(0, content=SECRET)
    snap.meta["prompt"] = SECRET
    sink.emit(snap)
    span = only_span(exporter)
    dumped = span.to_json()
    assert "gen_ai.usage.input_tokens" in dumped
    assert SECRET not in dumped
    assert "é ünïcode" not in dumped  # meta is never exported


def test_otel_without_the_extra_is_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_otel(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_otel)
    with pytest.raises(ConfigError, match=r"mainspring\[otel\]"):
        OpenTelemetrySink()


def test_importing_sinks_does_not_import_opentelemetry() -> None:
    import subprocess

    code = (
        "import sys, mainspring, mainspring.context.sinks; "
        "print(any(m.startswith('opentelemetry') for m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.strip() == "False"


# SinkSet


class Exploding:
    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = False

    def emit(self, snapshot: TurnSnapshot) -> None:
        raise RuntimeError(f"{self.name} boom")

    def close(self) -> None:
        self.closed = True
        raise OSError(f"{self.name} close boom")

    def __repr__(self) -> str:
        return f"Exploding({self.name!r})"


def test_sink_set_fails_open(caplog: pytest.LogCaptureFixture) -> None:
    before, after = InMemorySink(), InMemorySink()
    sinks = SinkSet([before, Exploding("bad")])
    sinks.add(after)
    snap = snapshot(0)
    with caplog.at_level(logging.ERROR, logger="mainspring.telemetry"):
        sinks.emit(snap)
    assert before.snapshots == [snap]
    assert after.snapshots == [snap]
    [record] = caplog.records
    assert record.name == "mainspring.telemetry"
    assert "Exploding('bad')" in record.getMessage()
    assert record.exc_info is not None and isinstance(record.exc_info[1], RuntimeError)


def test_sink_set_strict_raises_after_every_sink_got_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    first, last = InMemorySink(), InMemorySink()
    sinks = SinkSet([first, Exploding("a"), Exploding("b"), last], strict=True)
    snap = snapshot(0)
    with (
        caplog.at_level(logging.ERROR, logger="mainspring.telemetry"),
        pytest.raises(TelemetryError, match=r"2 telemetry sink\(s\) failed to emit") as info,
    ):
        sinks.emit(snap)
    assert first.snapshots == [snap]
    assert last.snapshots == [snap]
    assert isinstance(info.value.__cause__, RuntimeError)
    assert "a boom" in str(info.value.__cause__)
    assert "Exploding('a')" in str(info.value) and "Exploding('b')" in str(info.value)
    assert len(caplog.records) == 2


def test_sink_set_close_fails_open(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    bad = Exploding("bad")
    jsonl = JsonlSink(tmp_path / "t.jsonl")
    jsonl.emit(snapshot(0))
    sinks = SinkSet([bad, jsonl])
    with caplog.at_level(logging.ERROR, logger="mainspring.telemetry"):
        sinks.close()
    assert bad.closed
    with pytest.raises(ConfigError, match="closed"):
        jsonl.emit(snapshot(1))  # the jsonl sink was closed despite the failure before it
    assert "failed to close" in caplog.records[0].getMessage()


def test_sink_set_strict_close_raises(tmp_path: Path) -> None:
    jsonl = JsonlSink(tmp_path / "t.jsonl")
    sinks = SinkSet([Exploding("bad"), jsonl], strict=True)
    with pytest.raises(TelemetryError, match="failed to close") as info:
        sinks.close()
    assert isinstance(info.value.__cause__, OSError)
    with pytest.raises(ConfigError):
        jsonl.emit(snapshot(0))


def test_sink_sets_nest() -> None:
    inner = InMemorySink()
    outer = SinkSet([SinkSet([inner])])
    outer.emit(snapshot(0))
    outer.close()
    assert len(inner.snapshots) == 1
