"""The context pipeline inside real sessions: layers, cache marks, accounting."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio
import pytest
from pydantic import JsonValue

from mainspring import (
    Agent,
    ContextOptions,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    tool,
)
from mainspring.context import (
    Accounting,
    InMemorySink,
    JsonlSink,
    Module,
    TurnSnapshot,
    VirtualTailProcessor,
)
from mainspring.context.compiler import Compilation
from mainspring.devtools import read_snapshots, render_html
from mainspring.events import ErrorEvent, TurnComplete
from mainspring.memory import InMemoryMemoryStore, MemoryItem
from mainspring.messages import TextPart
from mainspring.principals import Caller, data_scope
from mainspring.tokens import EstimateTokenizer
from mainspring.usage import Usage
from tests.helpers import send

pytestmark = pytest.mark.anyio

REPORT = "quarterly report: revenue up 12%, costs flat, headcount 42, churn 3%"
BIG_REPORT = REPORT + "\n" + "line item: flat\n" * 100


@tool(read_only=True)
async def report(quarter: str, detail: str = "summary") -> str:
    """Fetch a report."""
    if quarter != "q3":
        return f"no data for {quarter}"
    return BIG_REPORT if detail == "full" else REPORT


def _user_texts(message_parts: Sequence[object]) -> list[str]:
    return [p.text for p in message_parts if isinstance(p, TextPart)]


async def test_the_five_layers_reach_the_model_in_cache_order() -> None:
    memory = InMemoryMemoryStore()
    own = data_scope(Caller("local", kind="service"), "agent")  # the caller's own, by default
    await memory.remember("The user's base currency is EUR.", scope=own)
    await memory.remember("The user dislikes phone calls.", scope=own)
    await memory.remember("Another caller's EUR phone secret.")  # the shared "default" scope
    model = ScriptedModel(["hello", "again"])
    agent = Agent(
        model=model,
        instructions="You are a careful finance assistant.",
        context_block="Balance: 1,200 EUR",
        skill_recipe="To pay an invoice: check the balance first.",
        memory=memory,
    )
    session = Session(agent)
    await send(session, "What currency do I use?")
    await send(session, "Should you phone me?")
    first, second = model.requests
    assert [b.source for b in first.system] == ["system", "context", "skill"]
    assert [b.cache_breakpoint for b in first.system] == [False, False, True]
    assert first.system == second.system  # the breakpoint never moves
    # Memory rides on the latest user message, not in the system prompt.
    last_user = [m for m in first.messages if m.role == "user"][-1]
    texts = _user_texts(last_user.parts)
    assert texts[0] == "What currency do I use?"
    assert "base currency is EUR" in texts[1]
    assert "Another caller" not in texts[1]  # only the caller's own scope is recalled
    # The transcript is untouched: memory is compiled in, never committed.
    assert _user_texts(session.messages[0].parts) == ["What currency do I use?"]
    # Turn 2 sends turn 1's user message without the old recall.
    assert _user_texts(second.messages[0].parts) == ["What currency do I use?"]
    assert "phone calls" in _user_texts(second.messages[-1].parts)[1]


class BrokenMemory:
    """A memory store whose backend is down."""

    calls = 0

    async def remember(
        self, text: str, *, scope: str = "default", meta: Mapping[str, JsonValue] | None = None
    ) -> MemoryItem:
        raise ConnectionError("memory backend down")

    async def recall(
        self,
        query: str,
        *,
        k: int = 5,
        scope: str = "default",
        where: Mapping[str, JsonValue] | None = None,
    ) -> list[MemoryItem]:
        self.calls += 1
        raise ConnectionError("memory backend down")

    async def forget(self, item_id: str, *, scope: str = "default") -> bool:
        return False

    async def aclose(self) -> None:
        return None


async def test_a_failing_memory_store_degrades_honestly(caplog: pytest.LogCaptureFixture) -> None:
    call = ScriptedCall("report", {"quarter": "q3"})
    model = ScriptedModel([ScriptedResponse(tool_calls=[call]), "done"])
    broken = BrokenMemory()
    session = Session(Agent(model=model, tools=[report], memory=broken))
    with caplog.at_level(logging.WARNING, logger="mainspring.context"):
        events = await send(session, "show q3")
    assert isinstance(events[-1], TurnComplete)
    assert events[-1].stop_reason == "end_turn"
    assert "memory recall failed" in caplog.text
    assert broken.calls == 1  # once per turn, though the turn made two model calls
    for request in model.requests:
        assert all(len(_user_texts(m.parts)) <= 1 for m in request.messages if m.role == "user")


class HangingMemory(BrokenMemory):
    """A store whose recall never answers (a dead connection without a timeout)."""

    async def recall(
        self,
        query: str,
        *,
        k: int = 5,
        scope: str = "default",
        where: Mapping[str, JsonValue] | None = None,
    ) -> list[MemoryItem]:
        self.calls += 1
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


async def test_a_hanging_memory_store_is_timed_out_and_the_turn_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = ScriptedModel(["done"])
    hanging = HangingMemory()
    agent = Agent(model=model, memory=hanging, context=ContextOptions(memory_timeout=0.05))
    session = Session(agent)
    with caplog.at_level(logging.WARNING, logger="mainspring.context"):
        events = await send(session, "anything to recall?")
    assert isinstance(events[-1], TurnComplete)
    assert events[-1].stop_reason == "end_turn"
    assert hanging.calls == 1
    assert "memory recall failed" in caplog.text


async def test_accounting_snapshots_each_turn_with_usage_and_cost(tmp_path: Path) -> None:
    sink = InMemorySink()
    path = tmp_path / "session.jsonl"
    jsonl = JsonlSink(path)
    model = ScriptedModel(
        [
            ScriptedResponse(
                tool_calls=[ScriptedCall("report", {"quarter": "q3"})],
                usage=Usage(input_tokens=100, cache_read_tokens=0, output_tokens=10, requests=1),
            ),
            ScriptedResponse(
                text="revenue is up",
                usage=Usage(input_tokens=20, cache_read_tokens=90, output_tokens=5, requests=1),
            ),
        ]
    )
    agent = Agent(
        model=model,
        tools=[report],
        instructions="Be brief.",
        context=ContextOptions(
            accounting=Accounting(tokenizer=EstimateTokenizer("test"), sinks=[sink, jsonl])
        ),
    )
    session = Session(agent)
    await send(session, "show q3")
    jsonl.close()
    assert len(sink.snapshots) == 1
    snap = sink.snapshots[0]
    assert snap.turn_index == 1 and len(snap.calls) == 2
    first, second = snap.calls
    assert first.usage.input_tokens == 100 and second.usage.cache_read_tokens == 90
    assert snap.cache_hit_rate == pytest.approx(90 / 210)
    for call in snap.calls:
        assert call.tokens == sum(s.tokens for s in call.segments)
        assert all(s.content is None for s in call.segments)
    sources = {s.source for s in second.segments}
    assert {"system", "tools", "user", "tool_call", "tool_result"} <= sources
    # The second call resends the first call's request unchanged before its new messages.
    assert second.prefix_tokens == first.tokens
    assert second.prefix_reuse > 0.5
    assert read_snapshots(path) == [snap]
    html = render_html([snap])
    assert "tool_result" in html


async def test_microcompact_sends_the_fresh_result_and_collapses_the_older_one() -> None:
    call = ScriptedCall("report", {"quarter": "q3", "detail": "full"})
    model = ScriptedModel(
        [
            ScriptedResponse(tool_calls=[call]),
            "first look",
            ScriptedResponse(tool_calls=[call]),
            "second look",
        ]
    )
    # A small context budget: the history passes the compaction trigger, where
    # microcompact starts to collapse (below it, repeats cost fewer than cache misses).
    session = Session(Agent(model=model, tools=[report], context=ContextOptions(budget=600)))
    await send(session, "show q3")
    await send(session, "show it again")
    results = [p for m in model.requests[-1].messages for p in m.tool_results_parts]
    assert results[1].content == BIG_REPORT  # the call just made: its fresh result
    assert results[0].content.startswith("[same result as the repeat of this call in turn 2")


async def test_below_the_compaction_trigger_repeats_are_sent_as_they_are() -> None:
    call = ScriptedCall("report", {"quarter": "q3", "detail": "full"})
    model = ScriptedModel(
        [ScriptedResponse(tool_calls=[call]), "one", ScriptedResponse(tool_calls=[call]), "two"]
    )
    session = Session(Agent(model=model, tools=[report]))  # 200k-token budget
    await send(session, "show q3")
    await send(session, "again")
    results = [p for m in model.requests[-1].messages for p in m.tool_results_parts]
    assert [p.content for p in results] == [BIG_REPORT, BIG_REPORT]  # the prefix stays cached
    stored = [p for m in session.messages for p in m.tool_results_parts]
    assert [p.content for p in stored] == [BIG_REPORT, BIG_REPORT]


async def test_disabled_microcompact_sends_everything() -> None:
    call = ScriptedCall("report", {"quarter": "q3"})
    model = ScriptedModel(
        [ScriptedResponse(tool_calls=[call]), ScriptedResponse(tool_calls=[call]), "done"]
    )
    session = Session(
        Agent(model=model, tools=[report], context=ContextOptions(microcompact=False))
    )
    await send(session, "go")
    results = [p for m in model.requests[-1].messages for p in m.tool_results_parts]
    assert [p.content for p in results] == [REPORT, REPORT]


class Reminder(VirtualTailProcessor):
    async def text(self, ctx: Compilation[object]) -> str:
        return f"(step {ctx.step} of turn {ctx.turn_index})"


async def test_agent_modules_add_a_virtual_tail_that_is_never_committed() -> None:
    model = ScriptedModel(["ok"])
    agent = Agent(
        model=model, context=ContextOptions(modules=[lambda: Module("reminders", [Reminder()])])
    )
    session = Session(agent)
    await send(session, "hi")
    sent = model.requests[0].messages
    assert _user_texts(sent[-1].parts) == ["(step 1 of turn 1)"]
    assert all("step 1" not in m.text for m in session.messages)


class FailingSink:
    def emit(self, snapshot: TurnSnapshot) -> None:
        raise OSError("disk full")

    def close(self) -> None:
        return None


async def test_a_failing_sink_fails_open_unless_strict(caplog: pytest.LogCaptureFixture) -> None:
    relaxed = Agent(
        model=ScriptedModel(["ok"]),
        context=ContextOptions(
            accounting=Accounting(tokenizer=EstimateTokenizer("t"), sinks=[FailingSink()])
        ),
    )
    with caplog.at_level(logging.ERROR, logger="mainspring.telemetry"):
        events = await send(Session(relaxed), "hi")
    assert isinstance(events[-1], TurnComplete)
    assert "disk full" in caplog.text or "FailingSink" in caplog.text
    strict = Agent(
        model=ScriptedModel(["ok"]),
        context=ContextOptions(
            accounting=Accounting(
                tokenizer=EstimateTokenizer("t"), sinks=[FailingSink()], strict=True
            )
        ),
    )
    events = await send(Session(strict), "hi")  # exactly one terminal event, checked by send
    assert isinstance(events[-1], ErrorEvent)


async def test_events_are_the_same_with_accounting_on() -> None:
    script = [ScriptedResponse(text="x", usage=Usage(input_tokens=7, output_tokens=1, requests=1))]
    plain = await send(Session(Agent(model=ScriptedModel(list(script)))), "hi")
    counted = await send(
        Session(
            Agent(
                model=ScriptedModel(list(script)),
                context=ContextOptions(accounting=Accounting(tokenizer=EstimateTokenizer("t"))),
            )
        ),
        "hi",
    )
    assert [e.type for e in plain] == [e.type for e in counted]
    assert plain[-1] == counted[-1]


async def test_the_demo_pays_the_same_contact_twice_in_one_session() -> None:
    from mainspring import Approve, PendingAction, TurnComplete
    from mainspring.demo import demo_agent

    session = Session(demo_agent(balance_usd=500.0))
    for _ in range(2):
        events = [e async for e in session.send("pay alice $120")]
        pending = next(e for e in events if isinstance(e, PendingAction))
        done = [e async for e in session.resume(pending.attempt_id, Approve())]
        assert isinstance(done[-1], TurnComplete) and done[-1].stop_reason == "end_turn"
    assert session.messages[-1].text.endswith("Your new balance is $260.00.")
    lookups = [
        p for m in session.messages for p in m.tool_results_parts if p.name == "lookup_contact"
    ]
    assert len(lookups) == 2 and lookups[0].content == lookups[1].content
