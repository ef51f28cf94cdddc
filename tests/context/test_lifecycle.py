"""A session's one context compiler: registry ownership, aclose, retain_turns, the summary."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from mainspring import Agent, ContextOptions, ScriptedModel, Session
from mainspring.context import (
    Accounting,
    CompilerRegistry,
    ContextCompiler,
    InMemorySink,
    JsonlSink,
    Module,
    SinkSet,
    SystemProcessor,
    TurnSnapshot,
)
from mainspring.context.compiler import Compilation
from mainspring.context.snapshot import SessionSummary
from mainspring.devtools import read_snapshots
from mainspring.errors import CompilerActiveError, ConfigError, SessionClosed
from mainspring.events import TurnComplete
from mainspring.messages import Message
from mainspring.tokens import EstimateTokenizer
from mainspring.usage import Usage
from tests.helpers import send

pytestmark = pytest.mark.anyio


def accounting(*sinks: InMemorySink | JsonlSink) -> Accounting:
    return Accounting(tokenizer=EstimateTokenizer("test"), sinks=sinks)


class Recorder(Module):
    """A module whose setup and teardown append to a shared log."""

    def __init__(self, name: str, log: list[str]) -> None:
        super().__init__(name, [])
        self.log = log

    async def setup(self, services: Mapping[str, Any], config: Mapping[str, Any]) -> None:
        self.log.append(f"setup {self.name}")

    async def teardown(self) -> None:
        self.log.append(f"teardown {self.name}")


class Blocking(SystemProcessor):
    """A session-scoped processor that waits until released (or cancelled)."""

    def __init__(self) -> None:
        super().__init__(id="blocking")
        self.entered = anyio.Event()
        self.release = anyio.Event()
        self.cancelled = False

    async def process(self, ctx: Compilation[Any]) -> None:
        self.entered.set()
        try:
            await self.release.wait()
        except anyio.get_cancelled_exc_class():
            self.cancelled = True
            raise
        ctx.contribute("released")


def agent(*, model: ScriptedModel | None = None, **context: Any) -> Agent:
    return Agent(
        model=model or ScriptedModel(["one", "two", "three", "four", "five"]),
        context=ContextOptions(**context),
    )


async def test_a_session_owns_its_compiler_through_the_registry() -> None:
    registry: CompilerRegistry[Message] = CompilerRegistry()
    first = Session(agent(), session_id="s1", context_registry=registry)
    assert "s1" in registry and len(registry) == 1
    with pytest.raises(CompilerActiveError, match="already has an active context compiler"):
        Session(agent(), session_id="s1", context_registry=registry)
    await send(first, "hi")
    await first.aclose()
    assert "s1" not in registry and first.closed
    again = Session(agent(), session_id="s1", context_registry=registry)  # the id is free again
    assert "s1" in registry
    await again.aclose()


async def test_aclose_tears_modules_down_in_reverse_and_later_calls_fail_clearly() -> None:
    log: list[str] = []
    modules = [Recorder("a", log), Recorder("b", log), Recorder("c", log)]
    session = Session(agent(modules=modules))
    await send(session, "hi")
    assert log == ["setup a", "setup b", "setup c"]
    await session.aclose()
    assert log[3:] == ["teardown c", "teardown b", "teardown a"]
    await session.aclose()  # a second close does nothing
    assert len(log) == 6
    with pytest.raises(SessionClosed, match="was closed"):
        await session.run("again")
    with pytest.raises(SessionClosed):
        async for _ in session.send("and again"):
            pass


async def test_aclose_aborts_a_running_compilation_and_flushes_the_summary() -> None:
    sink = InMemorySink()
    blocking = Blocking()
    registry: CompilerRegistry[Message] = CompilerRegistry()
    session = Session(
        agent(modules=[Module("slow", [blocking])], accounting=accounting(sink)),
        context_registry=registry,
    )
    blocking.release.set()
    with anyio.fail_after(10):
        await send(session, "first")  # one finished turn
    blocking.release = anyio.Event()
    events: list[object] = []

    async def second() -> None:
        events.extend([event async for event in session.send("second")])

    compiler = registry.get(session.session_id)
    assert compiler is not None
    compiler.invalidate("blocking")  # recompute it: the next compile blocks in it
    blocking.entered = anyio.Event()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(second)
            await blocking.entered.wait()
            await session.aclose()
    assert blocking.cancelled
    assert compiler.destroyed and session.session_id not in registry
    terminal = [e for e in events if isinstance(e, TurnComplete)]
    assert len(terminal) <= 1
    (summary,) = sink.summaries
    assert summary.session_id == session.session_id
    assert summary.turns == len(sink.snapshots) >= 1
    assert summary.calls == sum(len(s.calls) for s in sink.snapshots)


async def test_retain_turns_bounds_what_a_session_keeps_and_the_summary_counts_all(
    tmp_path: Path,
) -> None:
    sink = InMemorySink()
    jsonl = JsonlSink(tmp_path / "telemetry.jsonl")
    registry: CompilerRegistry[Message] = CompilerRegistry()
    session = Session(
        agent(accounting=accounting(sink, jsonl), retain_turns=2), context_registry=registry
    )
    for text in ("a", "b", "c", "d", "e"):
        await send(session, text)
    compiler = registry.get(session.session_id)
    assert compiler is not None
    assert [s.turn_index for s in compiler.summary] == [4, 5]  # the newest two
    assert len(sink.snapshots) == 5  # sinks still get every turn
    live = compiler.session_summary()
    assert live.turns == 5 and live.retained_turns == 2
    await session.aclose()
    (summary,) = sink.summaries
    assert summary.turns == 5 and summary.retained_turns == 2
    assert summary.calls == 5
    assert summary.tokens == sum(s.tokens for s in sink.snapshots)
    total = Usage()
    for snapshot in sink.snapshots:
        total = total + snapshot.usage
    assert summary.usage == total
    assert summary.by_source == _by_source(sink.snapshots)
    assert summary.started_at == sink.snapshots[0].started_at
    # the JSONL file holds five turn lines and the summary line; the report reads the turns
    lines = (tmp_path / "telemetry.jsonl").read_text().splitlines()
    assert len(lines) == 6 and '"type":"session_summary"' in lines[-1]
    assert [s.turn_index for s in read_snapshots(tmp_path / "telemetry.jsonl")] == [1, 2, 3, 4, 5]


def _by_source(snapshots: list[TurnSnapshot]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for snapshot in snapshots:
        for source, tokens in snapshot.by_source().items():
            totals[source] = totals.get(source, 0) + tokens
    return totals


def test_retain_turns_below_one_is_refused() -> None:
    with pytest.raises(ConfigError, match="retain_turns"):
        ContextOptions(retain_turns=0)
    with pytest.raises(ConfigError, match="retain_turns"):
        ContextCompiler(retain_turns=0)


def test_the_summary_round_trips_through_a_dict() -> None:
    summary = ContextCompiler[Message](session_id="x").session_summary()
    assert summary.turns == 0 and summary.started_at is None
    assert SessionSummary.from_dict(summary.to_dict()) == summary


async def test_a_sink_without_emit_summary_still_works_and_a_failing_one_is_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Old:
        def __init__(self) -> None:
            self.snapshots: list[TurnSnapshot] = []

        def emit(self, snapshot: TurnSnapshot) -> None:
            self.snapshots.append(snapshot)

        def close(self) -> None:
            pass

    class Broken(InMemorySink):
        def emit_summary(self, summary: SessionSummary) -> None:
            raise RuntimeError("disk full")

    old, broken, good = Old(), Broken(), InMemorySink()
    sinks = SinkSet([old, broken, good])
    summary = ContextCompiler[Message](session_id="x").session_summary()
    sinks.emit_summary(summary)
    assert good.summaries == [summary] and broken.summaries == []
    assert "failed to emit the summary" in caplog.text


async def test_a_reset_session_keeps_one_compiler_and_its_totals() -> None:
    """A session that reloads its state (another worker moved it on) swaps compilers in place."""
    from mainspring.stores.memory import InMemoryRunLock, InMemorySessionStore

    store = InMemorySessionStore()
    lock = InMemoryRunLock()
    sink = InMemorySink()
    registry: CompilerRegistry[Message] = CompilerRegistry()
    model = ScriptedModel(["one", "two", "three"])
    a = Session(
        agent(model=model, accounting=accounting(sink)),
        session_id="shared",
        session_store=store,
        run_lock=lock,
        context_registry=registry,
    )
    await send(a, "first")
    other = await Session.load(agent(model=model), store, "shared", run_lock=lock)
    await send(other, "elsewhere")  # the stored state moves on without `a`
    await other.aclose()
    before = registry.get("shared")
    await send(a, "back")  # `a` reloads the state: a new compiler under the same id
    after = registry.get("shared")
    assert after is not None and after is not before and before is not None and before.destroyed
    assert len(registry) == 1
    assert after.session_summary().turns == 2  # totals carried over from the old compiler
    assert sink.summaries == []  # the session did not end
    await a.aclose()
    assert len(sink.summaries) == 1 and sink.summaries[0].turns == 2
