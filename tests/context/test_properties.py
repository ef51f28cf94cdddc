"""Property tests of the context compiler: prefix guard, relaxed sync, replay, token sums."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mainspring.context.accounting import Accounting, message_segments
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
from mainspring.errors import PrefixMutationError
from mainspring.messages import Message, ToolCallPart, ToolResultPart
from mainspring.tokens import EstimateTokenizer

pytestmark = pytest.mark.slow

SETTINGS = settings(max_examples=60, deadline=None)

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


def compile_now(engine: ContextCompiler[Message], turn_index: int = 0) -> CompiledContext[Message]:
    async def go() -> CompiledContext[Message]:
        return await engine.compile(turn_index=turn_index)

    return anyio.run(go)


def shape(out: CompiledContext[Message]) -> tuple[object, ...]:
    return (out.system, list(out.messages), out.contributions, out.stable_blocks)


@SETTINGS
@given(transcripts(), st.data())
def test_strict_sync_catches_any_prefix_change(
    messages: list[Message], data: st.DataObject
) -> None:
    engine = ContextCompiler(messages=messages, processors=processors())
    compile_now(engine)
    before = (len(engine.transcript), list(engine.view), list(engine.transcript.messages))
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
        engine.sync(full)
    except PrefixMutationError:
        pass
    else:
        raise AssertionError("a changed prefix was accepted in strict mode")
    assert (len(engine.transcript), list(engine.view), list(engine.transcript.messages)) == before
    assert engine.transcript.generation == 0


@SETTINGS
@given(transcripts(), transcripts(), st.integers(0, 10))
def test_relaxed_sync_compiles_like_a_fresh_engine(
    old: list[Message], new: list[Message], keep: int
) -> None:
    engine = ContextCompiler(
        messages=old,
        processors=processors(),
        strict=False,
        accounting=accounting(),
        on_prefix_change=lambda change: None,
    )
    compile_now(engine)
    target = old[: min(keep, len(old))] + new
    assume(target[: len(old)] != old)  # a real prefix change (an append replays by design)
    engine.sync(target)
    assert engine.transcript.generation == 1
    fresh = ContextCompiler(messages=target, processors=processors(), accounting=accounting())
    got, want = compile_now(engine, 1), compile_now(fresh, 1)
    assert shape(got) == shape(want)
    assert list(engine.transcript.messages) == target
    assert got.tokens == want.tokens


@SETTINGS
@given(transcripts(), st.lists(transcripts(), max_size=3))
def test_replayed_session_contributions_equal_recomputed_ones(
    messages: list[Message], later: list[list[Message]]
) -> None:
    engine = ContextCompiler(messages=messages, processors=processors())
    compile_now(engine)
    full = list(messages)
    for i, delta in enumerate(later, start=1):
        engine.append(delta)
        full += delta
        replayed = compile_now(engine, i)
        fresh = ContextCompiler(messages=full, processors=processors())
        recomputed = compile_now(fresh, i)
        # Contextual reads the transcript, so it replays what the first compile saw;
        # every other session contribution is what a fresh engine computes.
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
    engine = ContextCompiler(messages=messages, processors=processors(), accounting=accounting())
    for i, delta in enumerate([[], *later]):
        engine.append(delta)
        out = compile_now(engine, i)
        assert out.tokens == sum(s.tokens for s in out.segments)
        assert all(s.tokens >= 0 for s in out.segments)
        independent = sum(tok.count(b.text) for b in out.system)
        independent += sum(tok.count(text) for m in out.messages for _, text in message_segments(m))
        assert out.tokens == independent
        assert 0 <= out.prefix_tokens <= out.tokens
