"""Compiling: slots, cache placement, layers, history processors, compaction, accounting."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from pydantic import JsonValue

from mainspring.context.accounting import Accounting, message_segments
from mainspring.context.compaction import SUMMARY_HEADING, Compaction
from mainspring.context.compiler import Compilation, CompiledMessages, ContextCompiler
from mainspring.context.history import Microcompact, ToolResultBudget
from mainspring.context.layers import BaseSystemPrompt, ContextBlock, MemoryRecall, SkillRecipe
from mainspring.context.pipeline import (
    FirstUserProcessor,
    LastUserProcessor,
    Processor,
    SystemProcessor,
    VirtualTailProcessor,
)
from mainspring.context.sinks import InMemorySink
from mainspring.context.snapshot import CostEstimate, TurnSnapshot
from mainspring.errors import TelemetryError
from mainspring.memory import InMemoryMemoryStore, MemoryItem
from mainspring.messages import Message, TextPart, ToolCallPart, ToolResultPart
from mainspring.tokens import EstimateTokenizer, TiktokenTokenizer
from mainspring.usage import Usage

pytestmark = pytest.mark.anyio


class Text(SystemProcessor):
    """A system block with fixed text (or a changing one via ``texts``)."""

    def __init__(self, id: str, text: str, **kwargs: Any) -> None:
        super().__init__(id, **kwargs)
        self.value = text

    async def text(self, ctx: Compilation[Any]) -> str:
        return self.value


class PerTurn(SystemProcessor):
    scope = "turn"

    async def text(self, ctx: Compilation[Any]) -> str:
        return f"turn {ctx.turn_index} step {ctx.step}"


class First(FirstUserProcessor):
    async def text(self, ctx: Compilation[Any]) -> str:
        return "FIRST-USER NOTE"


class Last(LastUserProcessor):
    async def text(self, ctx: Compilation[Any]) -> str:
        return f"LAST-USER NOTE {ctx.turn_index}"


class Tail(VirtualTailProcessor):
    async def text(self, ctx: Compilation[Any]) -> str:
        return "remember the rules"


class Empty(LastUserProcessor):
    async def text(self, ctx: Compilation[Any]) -> str:
        return ""


def conversation() -> list[Message]:
    return [
        Message.user("first question"),
        Message.assistant("first answer"),
        Message.user("second question"),
    ]


def call(call_id: str, name: str = "read", **arguments: Any) -> Message:
    return Message(
        role="assistant", parts=(ToolCallPart(id=call_id, name=name, arguments=arguments),)
    )


def result(call_id: str, content: str, name: str = "read", *, is_error: bool = False) -> Message:
    return Message.tool_results(
        [ToolResultPart(tool_use_id=call_id, name=name, content=content, is_error=is_error)]
    )


def texts(message: Message) -> list[str]:
    return [p.text for p in message.parts if isinstance(p, TextPart)]


# -- slots and cache placement -------------------------------------------------


async def test_system_blocks_session_first_and_the_breakpoint_on_the_last_session_block() -> None:
    compiler = ContextCompiler(
        messages=conversation(),
        processors=[
            PerTurn("per-turn"),
            Text("base", "You are helpful.", source="system"),
            Text("ctx", "Account: 42", source="context"),
        ],
    )
    out = await compiler.compile(turn_index=0)
    assert [(b.text, b.source, b.cache_breakpoint) for b in out.system] == [
        ("You are helpful.", "system", False),
        ("Account: 42", "context", True),
        ("turn 0 step 1", "system", False),
    ]
    assert out.stable_blocks == 2
    assert sum(b.cache_breakpoint for b in out.system) == 1


async def test_the_breakpoint_block_does_not_move_across_turns() -> None:
    compiler = ContextCompiler(
        messages=conversation(),
        processors=[PerTurn("per-turn"), Text("base", "You are helpful."), Last("last")],
    )
    seen = []
    for turn in range(4):
        out = await compiler.compile(turn_index=turn)
        seen.append(out)
        compiler.append([Message.assistant(f"answer {turn}"), Message.user(f"question {turn}")])
    for out in seen:
        marked = [i for i, b in enumerate(out.system) if b.cache_breakpoint]
        assert marked == [0]
        assert out.system[0].text == "You are helpful."
    assert len({out.system[1].text for out in seen}) == 4
    assert len({texts(out.messages[-1])[-1] for out in seen}) == 4


async def test_no_session_block_means_no_breakpoint() -> None:
    compiler = ContextCompiler(messages=conversation(), processors=[PerTurn("per-turn")])
    out = await compiler.compile(turn_index=0)
    assert [b.cache_breakpoint for b in out.system] == [False]
    assert out.stable_blocks == 0


async def test_user_slots_and_virtual_tail_are_not_committed() -> None:
    original = conversation()
    compiler = ContextCompiler(
        messages=original, processors=[Tail("tail"), Last("last"), First("first"), Empty("empty")]
    )
    out = await compiler.compile(turn_index=3)
    msgs = list(out.messages)
    assert len(msgs) == 4
    assert texts(msgs[0]) == ["first question", "FIRST-USER NOTE"]
    assert msgs[1] == original[1]
    assert texts(msgs[2]) == ["second question", "LAST-USER NOTE 3"]
    assert msgs[3] == Message.user("remember the rules")
    assert list(compiler.transcript.messages) == original
    assert list(compiler.view) == original
    assert {c.processor for c in out.contributions} == {"tail", "last", "first"}
    slots = {c.processor: (c.slot, c.source, c.scope, c.module) for c in out.contributions}
    assert slots == {
        "first": ("first-user", "system", "session", "core"),
        "last": ("last-user", "system", "turn", "core"),
        "tail": ("virtual-tail", "reminder", "turn", "core"),
    }


async def test_a_single_user_message_gets_both_first_and_last_text() -> None:
    compiler = ContextCompiler(messages=[Message.user("only")], processors=[First("f"), Last("l")])
    out = await compiler.compile(turn_index=1)
    assert texts(out.messages[0]) == ["only", "FIRST-USER NOTE", "LAST-USER NOTE 1"]


async def test_empty_contributions_are_skipped() -> None:
    class EmptyContribute(Processor):
        async def process(self, ctx: Compilation[Any]) -> None:
            ctx.contribute("", slot="system")

    compiler = ContextCompiler(
        messages=conversation(),
        processors=[Empty("empty"), Text("blank", ""), EmptyContribute("ec"), ContextBlock("  ")],
    )
    out = await compiler.compile(turn_index=0)
    assert out.contributions == ()
    assert out.system == ()
    assert list(out.messages) == conversation()


async def test_compiled_messages_behave_like_a_sequence() -> None:
    compiler = ContextCompiler(messages=conversation(), processors=[Tail("tail"), Last("last")])
    out = await compiler.compile(turn_index=0)
    msgs = out.messages
    assert isinstance(msgs, CompiledMessages)
    as_list = list(msgs)
    assert len(msgs) == len(as_list) == 4
    assert [msgs[i] for i in range(4)] == as_list
    assert msgs[-1] == as_list[-1] == Message.user("remember the rules")
    assert msgs[-4] == as_list[0]
    assert msgs[1:3] == as_list[1:3]
    assert msgs[::-1] == as_list[::-1]
    assert list(reversed(msgs)) == as_list[::-1]  # the override and the tail included
    assert msgs[10:] == []
    assert msgs == as_list
    assert msgs == tuple(as_list)
    assert msgs != as_list[:-1]
    assert msgs != "not messages"
    with pytest.raises(IndexError):
        msgs[4]
    with pytest.raises(IndexError):
        msgs[-5]
    with pytest.raises(TypeError):
        hash(msgs)
    compiler.append([Message.assistant("later")])
    assert len(msgs) == 4  # later appends do not show through


# -- layers --------------------------------------------------------------------


class CountingStore(InMemoryMemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.recalls: list[str] = []

    async def recall(
        self,
        query: str,
        *,
        k: int = 5,
        scope: str = "default",
        where: Mapping[str, JsonValue] | None = None,
    ) -> Sequence[MemoryItem]:
        self.recalls.append(query)
        return await super().recall(query, k=k, scope=scope, where=where)


class BrokenStore(InMemoryMemoryStore):
    async def recall(
        self,
        query: str,
        *,
        k: int = 5,
        scope: str = "default",
        where: Mapping[str, JsonValue] | None = None,
    ) -> Sequence[MemoryItem]:
        raise ConnectionError("store is down")


async def test_the_five_layers() -> None:
    store = CountingStore()
    await store.remember("the user likes tea")
    compiler = ContextCompiler(
        messages=[Message.user("hello"), Message.assistant("hi"), Message.user("what about tea")],
        processors=[
            MemoryRecall(scope="default"),
            SkillRecipe("Recipe: brew for 3 minutes"),
            ContextBlock("balance 10", title="Account"),
            BaseSystemPrompt(lambda: "You are a butler."),
        ],
        services={"memory": store},
    )
    out = await compiler.compile(turn_index=0)
    assert [(b.source, b.text) for b in out.system] == [
        ("system", "You are a butler."),
        ("context", "## Account\n\nbalance 10"),
        ("skill", "Recipe: brew for 3 minutes"),
    ]
    assert out.system[-1].cache_breakpoint
    assert texts(out.messages[2]) == ["what about tea", "Relevant memories:\n- the user likes tea"]
    assert texts(out.messages[0]) == ["hello"]
    assert store.recalls == ["what about tea"]
    memory = [c for c in out.contributions if c.source == "memory"]
    assert [(c.slot, c.scope, c.processor) for c in memory] == [
        ("last-user", "turn", "memory-recall")
    ]


async def test_async_text_sources() -> None:
    async def block() -> str:
        return "async block"

    compiler = ContextCompiler(messages=conversation(), processors=[ContextBlock(block)])
    out = await compiler.compile(turn_index=0)
    assert [b.text for b in out.system] == ["async block"]


async def test_memory_is_recalled_once_per_turn() -> None:
    store = CountingStore()
    await store.remember("tea is good")
    recall = MemoryRecall(store, scope="default")
    compiler = ContextCompiler(messages=[Message.user("tea please")], processors=[recall])
    one = await compiler.compile(turn_index=1, step=1)
    compiler.append([call("c1"), result("c1", "done")])
    two = await compiler.compile(turn_index=1, step=2)
    assert store.recalls == ["tea please"]
    assert texts(one.messages[0]) == texts(two.messages[0])
    compiler.append([Message.assistant("ok"), Message.user("more tea")])
    three = await compiler.compile(turn_index=2)
    assert store.recalls == ["tea please", "more tea"]
    assert texts(three.messages[-1])[-1] == "Relevant memories:\n- tea is good"


async def test_a_failing_store_drops_the_memory_layer(caplog: pytest.LogCaptureFixture) -> None:
    recall = MemoryRecall(BrokenStore())
    compiler = ContextCompiler(
        messages=conversation(), processors=[BaseSystemPrompt("base"), recall]
    )
    with caplog.at_level(logging.WARNING, logger="mainspring.context"):
        out = await compiler.compile(turn_index=0)
    assert recall.failures == 1
    assert [c.source for c in out.contributions] == ["system"]
    assert list(out.messages) == conversation()
    assert any(
        r.levelno == logging.WARNING and "memory recall failed" in r.message for r in caplog.records
    )


async def test_empty_layers_contribute_nothing() -> None:
    store = CountingStore()  # empty: recalls nothing
    compiler = ContextCompiler(
        messages=conversation(),
        processors=[
            BaseSystemPrompt(""),
            ContextBlock(lambda: "   "),
            SkillRecipe(""),
            MemoryRecall(store),
        ],
    )
    out = await compiler.compile(turn_index=0)
    assert out.system == ()
    assert out.contributions == ()
    assert list(out.messages) == conversation()


# -- history processors ----------------------------------------------------------


async def test_microcompact_keeps_the_newest_result_whole_and_collapses_the_older() -> None:
    big = "file contents " * 100
    messages = [
        Message.user("read it"),
        call("c1", path="a.txt"),
        result("c1", big),
        Message.assistant("read"),
        Message.user("read it again"),
        call("c2", path="a.txt"),
        result("c2", big),
        call("c3", path="b.txt"),
        result("c3", big),
    ]
    compiler = ContextCompiler(messages=messages, processors=[Microcompact()])
    out = await compiler.compile(turn_index=1)
    view = list(out.messages)
    note = "[same result as the repeat of this call in turn 2, shown later]"
    assert view[2].tool_results_parts[0].content == note
    assert view[6] == messages[6]  # the newest copy: the model reads the fresh result
    assert view[8] == messages[8]  # other arguments: not a repeat
    assert compiler.transcript.messages[2].tool_results_parts[0].content == big
    assert compiler.view.owner(2) == ("core", "microcompact")


async def test_microcompact_never_replaces_the_result_of_the_call_just_made() -> None:
    big = "balance: 100 " * 100
    messages = [Message.user("go"), call("c1", path="x"), result("c1", big)]
    compiler = ContextCompiler(messages=messages, processors=[Microcompact()])
    for n in range(2, 6):  # the same call again and again: the last one is always whole
        compiler.append([call(f"c{n}", path="x"), result(f"c{n}", big)])
        out = await compiler.compile(turn_index=0)
        view = list(out.messages)
        assert view[-1].tool_results_parts[0].content == big
        collapsed = [m for m in view[:-1] if m.role == "tool"]
        assert all(m.tool_results_parts[0].content.startswith("[same result") for m in collapsed)


async def test_microcompact_waits_until_the_view_passes_its_threshold() -> None:
    big = "rows " * 400
    messages = [Message.user("go"), call("c1", path="x"), result("c1", big)]
    mc = Microcompact(over_tokens=10_000)
    compiler = ContextCompiler(messages=messages, processors=[mc])
    compiler.append([call("c2", path="x"), result("c2", big)])
    out = await compiler.compile(turn_index=0)
    assert [m.tool_results_parts[0].content for m in out.messages if m.role == "tool"] == [big, big]
    mc.over_tokens = 10  # the view grows past it: the older copy goes, the newest stays
    out = await compiler.compile(turn_index=0)
    contents = [m.tool_results_parts[0].content for m in out.messages if m.role == "tool"]
    assert contents[0].startswith("[same result") and contents[1] == big


async def test_microcompact_leaves_small_results_alone() -> None:
    small = "ok"
    messages = [
        Message.user("go"),
        call("c1", path="x"),
        result("c1", small),
        call("c2", path="x"),
        result("c2", small),
    ]
    compiler = ContextCompiler(messages=messages, processors=[Microcompact()])
    out = await compiler.compile(turn_index=0)
    assert list(out.messages) == messages


async def test_microcompact_never_compacts_errors() -> None:
    err = "error: permission denied for this path, please try another one " * 20
    messages = [
        Message.user("go"),
        call("c1", path="x"),
        result("c1", err, is_error=True),
        call("c2", path="x"),
        result("c2", err, is_error=True),
    ]
    compiler = ContextCompiler(messages=messages, processors=[Microcompact()])
    out = await compiler.compile(turn_index=0)
    assert list(out.messages) == messages


async def test_tool_result_budget_keeps_head_and_tail() -> None:
    content = "H" * 500 + "M" * 1000 + "T" * 500
    messages = [Message.user("go"), call("c1"), result("c1", content), result("c1", "short")]
    compiler = ContextCompiler(messages=messages, processors=[ToolResultBudget(300)])
    out = await compiler.compile(turn_index=0)
    cut = out.messages[2].tool_results_parts[0].content
    assert len(cut) <= 300
    assert cut.startswith("H" * 100)
    assert cut.endswith("T" * 50)
    assert "characters left out" in cut
    assert out.messages[3] == messages[3]
    assert compiler.transcript.messages[2].tool_results_parts[0].content == content


async def test_tool_result_budget_per_tool() -> None:
    content = "x" * 1000
    messages = [
        call("c1", name="big"),
        result("c1", content, name="big"),
        call("c2", name="small"),
        result("c2", content, name="small"),
    ]
    compiler = ContextCompiler(
        messages=messages, processors=[ToolResultBudget(5000, per_tool={"small": 200})]
    )
    out = await compiler.compile(turn_index=0)
    assert out.messages[1] == messages[1]
    assert len(out.messages[3].tool_results_parts[0].content) <= 200


# -- compaction ------------------------------------------------------------------


def long_session(turns: int, *, answer: str = "done", result_chars: int = 2_000) -> list[Message]:
    messages: list[Message] = []
    for t in range(turns):
        messages += [
            Message.user(f"question {t}"),
            call(f"c{t}", n=t),
            result(f"c{t}", f"{t}:" + "x" * result_chars),
            Message.assistant(f"{answer} {t}"),
        ]
    return messages


def assert_tool_pairs_intact(view: Sequence[Message]) -> None:
    calls = {p.id for m in view for p in m.tool_calls}
    results = {p.tool_use_id for m in view for p in m.tool_results_parts}
    assert calls <= results


def estimate() -> Accounting:
    return Accounting(tokenizer=EstimateTokenizer("test"))


async def test_compaction_prunes_old_tool_results_under_the_target() -> None:
    messages = long_session(12, result_chars=1_500)
    compaction = Compaction(2_000, keep_recent_turns=2)
    compiler = ContextCompiler(
        messages=messages,
        processors=[compaction],
        accounting=estimate(),
    )
    assert compiler.view.tokens > 2_000
    out = await compiler.compile(turn_index=12)
    assert compaction.runs == 1
    assert compiler.view.tokens <= 0.6 * 2_000
    assert out.tokens <= 0.6 * 2_000
    view = list(out.messages)
    assert len(view) == len(messages)
    assert_tool_pairs_intact(view)
    assert view[-8:] == messages[-8:]  # the last two turns
    assert view[2].tool_results_parts[0].content.startswith("[tool result pruned")
    assert list(compiler.transcript.messages) == messages


async def test_compaction_summarizes_when_pruning_is_not_enough() -> None:
    messages = long_session(12, answer="a long answer " * 60)
    seen: list[list[Message]] = []

    async def summarizer(old: Sequence[Message]) -> str:
        seen.append(list(old))
        return "they talked about files"

    compaction = Compaction(2_000, keep_recent_turns=2, summarizer=summarizer)
    compiler = ContextCompiler(
        messages=messages,
        processors=[compaction],
        accounting=estimate(),
    )
    out = await compiler.compile(turn_index=12)
    view = list(out.messages)
    assert compaction.summaries == 1
    assert len(seen) == 1
    assert view[0] == Message.user(f"{SUMMARY_HEADING}\nthey talked about files")
    assert sum(SUMMARY_HEADING in m.text for m in view) == 1
    assert view[1].role == "user"  # the summary replaced whole turns
    assert len(view) == len(messages) - len(seen[0]) + 1
    assert view[-8:] == messages[-8:]
    assert_tool_pairs_intact(view)
    assert list(compiler.transcript.messages) == messages


async def test_a_failing_summarizer_keeps_the_pruned_history(
    caplog: pytest.LogCaptureFixture,
) -> None:
    messages = long_session(12, answer="a long answer " * 60)

    async def summarizer(old: Sequence[Message]) -> str:
        raise RuntimeError("model down")

    compaction = Compaction(2_000, keep_recent_turns=2, summarizer=summarizer)
    compiler = ContextCompiler(
        messages=messages,
        processors=[compaction],
        accounting=estimate(),
    )
    with caplog.at_level(logging.WARNING, logger="mainspring.context"):
        out = await compiler.compile(turn_index=12)
    view = list(out.messages)
    assert compaction.summaries == 0
    assert len(view) == len(messages)
    assert all(SUMMARY_HEADING not in m.text for m in view)
    assert view[2].tool_results_parts[0].content.startswith("[tool result pruned")
    assert_tool_pairs_intact(view)
    assert "compaction summary failed" in caplog.text


async def test_compaction_counts_tool_results_with_the_default_adapter() -> None:
    compaction = Compaction(2_000)
    compiler = ContextCompiler(
        messages=long_session(12), processors=[compaction], accounting=estimate()
    )
    await compiler.compile(turn_index=12)
    assert compaction.runs == 1


async def test_default_accounting_counts_tool_results() -> None:
    compiler = ContextCompiler(messages=long_session(1), accounting=estimate())
    out = await compiler.compile(turn_index=0)
    assert "tool_result" in {s.source for s in out.segments}


# -- accounting ------------------------------------------------------------------


def tiktoken_accounting(**kwargs: Any) -> Accounting:
    return Accounting(tokenizer=TiktokenTokenizer("o200k_base"), **kwargs)


async def test_segments_match_an_independent_count() -> None:
    tok = TiktokenTokenizer("o200k_base")
    messages = [
        Message.user("What's the weather in Paris?"),
        call("c1", name="weather", city="Paris"),
        result("c1", "Sunny, 21°C", name="weather"),
        Message.assistant("It is sunny."),
        Message.user("And tomorrow?"),
    ]
    compiler = ContextCompiler(
        messages=messages,
        processors=[BaseSystemPrompt("You are a weather bot."), Last("last"), Tail("tail")],
        accounting=tiktoken_accounting(),
    )
    out = await compiler.compile(turn_index=0)
    assert out.tokens == sum(s.tokens for s in out.segments)
    by_source: dict[str, int] = {}
    for s in out.segments:
        by_source[s.source] = by_source.get(s.source, 0) + s.tokens
    expected: dict[str, int] = {}
    for m in messages:
        for source, text in message_segments(m):
            expected[source] = expected.get(source, 0) + tok.count(text)
    expected["system"] = tok.count("You are a weather bot.") + tok.count("LAST-USER NOTE 0")
    expected["reminder"] = tok.count("remember the rules")
    assert by_source == expected
    assert abs(sum(s.share for s in out.segments) - 1.0) < 1e-9
    assert all(s.content is None for s in out.segments)
    assert out.stable_tokens == tok.count("You are a weather bot.")


async def test_include_content_keeps_text() -> None:
    compiler = ContextCompiler(
        messages=conversation(),
        processors=[BaseSystemPrompt("base prompt")],
        accounting=tiktoken_accounting(include_content=True),
    )
    out = await compiler.compile(turn_index=0)
    contents = {(s.source, s.slot): s.content for s in out.segments}
    assert contents[("system", "system")] == "base prompt"
    assert contents[("user", "history")] == "first question\nsecond question"
    assert all(s.content is not None for s in out.segments)


async def test_no_accounting_means_no_segments() -> None:
    compiler = ContextCompiler(messages=conversation(), processors=[BaseSystemPrompt("base")])
    out = await compiler.compile(turn_index=0)
    assert out.segments == ()
    assert out.tokens == 0
    assert compiler.end_turn() is None


async def test_prefix_reuse_within_a_turn() -> None:
    tok = TiktokenTokenizer("o200k_base")
    compiler = ContextCompiler(
        messages=conversation(),
        processors=[BaseSystemPrompt("base prompt"), Last("last")],
        accounting=tiktoken_accounting(),
        strict=False,  # invalidate_prefix below starts a new generation
    )
    first = await compiler.compile(turn_index=0, step=1)
    assert first.prefix_tokens == 0
    compiler.append([call("c1", q="x"), result("c1", "the result")])
    second = await compiler.compile(turn_index=0, step=2)
    # Unchanged: the system block and the two messages before the latest user message
    # (which carries the last-user note, but the note is identical this step).
    unchanged = tok.count("base prompt") + tok.count("first question") + tok.count("first answer")
    assert second.prefix_tokens > 0
    assert second.prefix_tokens == unchanged + tok.count("second question")
    compiler.invalidate_prefix("host changed")
    third = await compiler.compile(turn_index=0, step=3)
    assert third.prefix_tokens == 0


async def test_prefix_reuse_stops_at_a_changed_last_user_note() -> None:
    tok = TiktokenTokenizer("o200k_base")
    compiler = ContextCompiler(
        messages=conversation(),
        processors=[BaseSystemPrompt("base prompt"), Last("last")],
        accounting=tiktoken_accounting(),
    )
    await compiler.compile(turn_index=0)
    compiler.append([Message.assistant("a"), Message.user("third question")])
    out = await compiler.compile(turn_index=1)  # the note moved and changed
    assert out.prefix_tokens == tok.count("base prompt") + tok.count("first question") + tok.count(
        "first answer"
    )


async def test_a_replaced_message_is_accounted_as_sent() -> None:
    class Replace(Processor):
        async def process(self, ctx: Compilation[Any]) -> None:
            ctx.replace_message(0, Message.user("a much much longer replacement " * 10))

    tok = TiktokenTokenizer("o200k_base")
    compiler = ContextCompiler(
        messages=conversation(), processors=[Replace("replace")], accounting=tiktoken_accounting()
    )
    out = await compiler.compile(turn_index=0)
    sent = sum(tok.count(t) for m in out.messages for t in texts(m))
    assert out.tokens == sent


class Broken:
    def emit(self, snapshot: TurnSnapshot) -> None:
        raise OSError("disk full")

    def close(self) -> None:
        pass


async def test_record_call_and_end_turn_emit_a_snapshot() -> None:
    sink = InMemorySink()
    compiler = ContextCompiler(
        messages=conversation(),
        processors=[BaseSystemPrompt("base")],
        accounting=tiktoken_accounting(sinks=[sink]),
        session_id="sess",
        model="gpt-4o",
    )
    compiled = await compiler.compile(turn_index=0)
    usage = Usage(input_tokens=100, output_tokens=7, requests=1)
    cost = CostEstimate(usd=0.01, priced=True, price_source="configured")
    call_snap = compiler.record_call(compiled, model="gpt-4o", usage=usage, cost=cost)
    assert call_snap is not None
    snap = compiler.end_turn()
    assert snap is not None
    assert sink.snapshots == [snap]
    assert compiler.summary == [snap]
    assert snap.session_id == "sess"
    assert snap.turn_index == 0
    assert len(snap.calls) == 1
    only = snap.calls[0]
    assert (only.usage, only.cost, only.model) == (usage, cost, "gpt-4o")
    assert only.tokens == compiled.tokens > 0
    assert only.segments == compiled.segments
    assert compiler.end_turn() is None  # nothing open


async def test_an_unreported_compile_is_flushed_with_empty_usage() -> None:
    sink = InMemorySink()
    compiler = ContextCompiler(
        messages=conversation(), accounting=tiktoken_accounting(sinks=[sink])
    )
    await compiler.compile(turn_index=0)
    await compiler.compile(turn_index=1)  # a new turn closes the previous one
    assert [s.turn_index for s in sink.snapshots] == [0]
    assert sink.snapshots[0].calls[0].usage == Usage()
    await compiler.destroy()  # flushes the open turn
    assert [s.turn_index for s in sink.snapshots] == [0, 1]


async def test_a_failing_sink_is_logged_when_not_strict(caplog: pytest.LogCaptureFixture) -> None:
    sink = InMemorySink()
    compiler = ContextCompiler(
        messages=conversation(), accounting=tiktoken_accounting(sinks=[Broken(), sink])
    )
    compiled = await compiler.compile(turn_index=0)
    compiler.record_call(
        compiled,
        model="m",
        usage=Usage(),
        cost=CostEstimate(usd=0, priced=False, price_source="none"),
    )
    with caplog.at_level(logging.ERROR):
        snap = compiler.end_turn()
    assert snap is not None
    assert compiler.summary == [snap]
    assert sink.snapshots == [snap]
    assert "disk full" in caplog.text


async def test_a_failing_sink_raises_when_strict(caplog: pytest.LogCaptureFixture) -> None:
    compiler = ContextCompiler(
        messages=conversation(), accounting=tiktoken_accounting(sinks=[Broken()], strict=True)
    )
    compiled = await compiler.compile(turn_index=0)
    compiler.record_call(
        compiled,
        model="m",
        usage=Usage(),
        cost=CostEstimate(usd=0, priced=False, price_source="none"),
    )
    with caplog.at_level(logging.CRITICAL), pytest.raises(TelemetryError):
        compiler.end_turn()
    assert len(compiler.summary) == 1


async def test_a_compiled_request_never_changes_when_the_view_is_edited_later() -> None:
    big = "rows " * 400
    messages = [Message.user("go"), call("c1", path="x"), result("c1", big)]
    compiler = ContextCompiler(messages=messages, processors=[Microcompact()])
    first = await compiler.compile(turn_index=0)
    sent = list(first.messages)
    compiler.append([call("c2", path="x"), result("c2", big)])
    second = await compiler.compile(turn_index=0)  # collapses the older copy in the view
    assert second.messages[2].tool_results_parts[0].content.startswith("[same result")
    assert list(first.messages) == sent  # what was sent stays what was sent
    assert first.messages[2].tool_results_parts[0].content == big


async def test_the_view_holds_the_transcript_s_list_until_an_edit_copies_it() -> None:
    big = "rows " * 400
    messages = [Message.user("go"), call("c1", path="x"), result("c1", big)]
    compiler = ContextCompiler(messages=messages, processors=[Microcompact()])
    assert compiler.view._items is compiler.transcript.backing  # held once, not copied
    first = await compiler.compile(turn_index=0)
    compiler.append([call("c2", path="x"), result("c2", big)])
    assert compiler.view._items is compiler.transcript.backing
    assert len(first.messages) == 3 and len(compiler.view) == 5
    assert compiler.view.last_user == 0 and compiler.view.tokens > 0
    second = await compiler.compile(turn_index=0)  # collapses the older copy: an edit
    assert compiler.view._items is not compiler.transcript.backing
    assert second.messages[2].tool_results_parts[0].content.startswith("[same result")
    committed = [p.content for m in compiler.transcript.messages for p in m.tool_results_parts]
    assert committed == [big, big]  # the transcript is as committed
    assert first.messages[2].tool_results_parts[0].content == big
    compiler.append([Message.user("again")])  # the view goes on with its own list
    assert len(compiler.view) == len(compiler.transcript) == 6
    assert compiler.view[5] is compiler.transcript.messages[5]


async def test_a_view_given_to_a_rewriting_processor_keeps_a_copy_from_the_start() -> None:
    big = "x" * 5_000
    compiler = ContextCompiler(
        messages=[Message.user("go"), call("c1", path="x"), result("c1", big)],
        processors=[ToolResultBudget(max_chars=200)],
    )
    assert compiler.view._items is not compiler.transcript.backing
    assert len(compiler.view[2].tool_results_parts[0].content) < 1_000
    assert compiler.transcript.messages[2].tool_results_parts[0].content == big
