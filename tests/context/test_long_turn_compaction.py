"""Compaction inside one long turn: a turn's own older tool results are pruned once the
history passes its budget, never the latest one, never a call without its result."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import pytest

from mainspring import Agent, ContextOptions, Message, ScriptedModel, Session, tool
from mainspring.messages import TextPart, ToolCallPart, ToolResultPart
from mainspring.models import ToolSpec
from mainspring.testing import ScriptedCall, ScriptedResponse, collect
from mainspring.tools import Tool

pytestmark = pytest.mark.anyio

BUDGET = 2_500
CALLS = 10


def _pages(tokens: int) -> Tool:
    @tool
    def fetch_page(n: int) -> str:
        """One page of a long document."""
        head = f"page {n}: "
        return head + "x" * (4 * tokens - len(head))  # ~``tokens`` at four characters each

    return fetch_page


def _ten_fetches(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
    done = sum(1 for m in messages if m.role == "tool")
    if done < CALLS:
        return ScriptedResponse(tool_calls=[ScriptedCall("fetch_page", {"n": done + 1})])
    return ScriptedResponse(text="read them all")


def _tokens(messages: Sequence[Message]) -> int:
    """What a request's history holds, at the four characters a token its budget counts."""
    chars = 0
    for message in messages:
        for part in message.parts:
            if isinstance(part, TextPart):
                chars += len(part.text)
            elif isinstance(part, ToolResultPart):
                chars += len(part.content)
            elif isinstance(part, ToolCallPart):
                chars += len(part.name) + len(json.dumps(part.arguments))
    return math.ceil(chars / 4)


def _results(messages: Sequence[Message]) -> list[ToolResultPart]:
    return [p for m in messages for p in m.parts if isinstance(p, ToolResultPart)]


def _check_pairs(messages: Sequence[Message]) -> None:
    """Every call is answered by the next message, and every result answers a call."""
    for index, message in enumerate(messages):
        calls = [p.id for p in message.parts if isinstance(p, ToolCallPart)]
        if calls:
            answer = messages[index + 1]
            assert answer.role == "tool"
            assert [r.tool_use_id for r in _results([answer])] == calls


async def _run(tokens: int) -> tuple[ScriptedModel, Session]:
    model = ScriptedModel(_ten_fetches)
    agent = Agent(model=model, tools=[_pages(tokens)], context=ContextOptions(budget=BUDGET))
    session = Session(agent)
    events = await collect(session.send("Read the whole document."))
    assert events[-1].type == "turn_complete"
    assert len(model.requests) == CALLS + 1
    return model, session


async def test_ten_results_over_the_budget_reach_the_model_pruned_but_the_latest() -> None:
    page = 5_400
    model, session = await _run(page)
    for step, request in enumerate(model.requests[1:], start=1):
        sent = list(request.messages)
        _check_pairs(sent)
        results = _results(sent)
        assert len(results) == step  # every call keeps its result: pruned, never dropped
        latest = results[-1]
        assert len(latest.content) == 4 * page  # the one the model has not seen: whole
        older = results[:-1]
        assert all(r.content.startswith("[tool result pruned") for r in older), step
        # What remains besides the latest result is within the budget.
        assert _tokens(sent) - _tokens([Message.tool_results([latest])]) <= BUDGET
    # The transcript keeps every result whole: compaction shapes what is sent.
    kept = _results(list(session.messages))
    assert [len(r.content) for r in kept] == [4 * page] * CALLS


async def test_results_that_fit_keep_every_request_under_the_budget() -> None:
    model, _ = await _run(900)
    sizes = [_tokens(list(r.messages)) for r in model.requests]
    assert max(sizes) <= BUDGET, sizes
    last = list(model.requests[-1].messages)
    _check_pairs(last)
    results = _results(last)
    assert len(results) == CALLS and len(results[-1].content) == 3_600  # the latest whole
    assert any(r.content.startswith("[tool result pruned") for r in results)


async def test_nothing_is_pruned_while_the_turn_fits() -> None:
    model, _ = await _run(100)  # ten results of ~100 tokens: ~1,000 in all
    assert not any(
        r.content.startswith("[tool result pruned")
        for r in _results(list(model.requests[-1].messages))
    )


async def test_a_history_over_its_budget_with_nothing_to_prune_is_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # plain talk, no tool results: pruning frees nothing, and there is no summarizer
    history: list[Message] = []
    for i in range(400):
        history += [Message.user(f"question {i}: " + "q" * 40), Message.assistant(f"answer {i}")]
    model = ScriptedModel(["first", "second"])
    agent = Agent(model=model, name="long", context=ContextOptions(budget=BUDGET))
    session = Session(agent, messages=history)
    with caplog.at_level("WARNING", logger="mainspring.context"):
        await collect(session.send("one more"))
        await collect(session.send("and another"))
    said = [r for r in caplog.records if "over its budget after compaction" in r.getMessage()]
    assert len(said) == 1  # once a session, not once a turn
    assert "no summarizer is set" in said[0].getMessage()
    # nothing was dropped on the quiet: the model got the whole history each time
    assert [len(r.messages) for r in model.requests] == [801, 803]
