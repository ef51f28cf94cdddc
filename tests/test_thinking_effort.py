"""Thinking blocks with indices and evaluation summaries; adaptive effort; after-guard hooks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import JsonValue

from mainspring import (
    Agent,
    Approve,
    Guard,
    Hooks,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    ThinkingDelta,
    ThinkingDone,
    tool,
)
from mainspring.codec import event_from_dict, event_to_dict
from mainspring.events import Finding, TextDelta
from mainspring.models import AdaptiveEffort, ModelRequest, classify_effort
from mainspring.models.base import ModelEvent, ModelStop
from mainspring.thinking import MAX_EVAL_ITEMS, EvalItem, parse_eval_summary
from mainspring.tools import Tool
from tests.helpers import pending_of, resume, send

pytestmark = pytest.mark.anyio

SUMMARY = """Let me weigh this.
<eval_summary mode="brief">
- balance_ok: pass — the balance covers it
- health_factor: warn - drops to 1.4
- slippage: pass
not an item
</eval_summary>"""


class TwoBlocks:
    """A model that thinks twice in one step, the second block with a summary."""

    name = "two-blocks"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield ThinkingDelta(text="first ")
        yield ThinkingDone(text="first thought", signature="sig-1")
        yield TextDelta(text="between ")
        yield ThinkingDelta(text="second")
        yield ThinkingDone(text=SUMMARY, signature="sig-2")
        yield TextDelta(text="answer")
        yield ModelStop()


async def test_thinking_blocks_carry_their_index_signature_and_summary() -> None:
    session = Session(Agent(model=TwoBlocks()))
    events = await send(session, "go")
    deltas = [e for e in events if isinstance(e, ThinkingDelta)]
    done = [e for e in events if isinstance(e, ThinkingDone)]
    assert [d.index for d in deltas] == [0, 1]
    assert [(d.index, d.signature) for d in done] == [(0, "sig-1"), (1, "sig-2")]
    assert done[0].summary_mode is None and done[0].evaluation == ()
    assert done[1].summary_mode == "brief"
    assert done[1].evaluation == (
        EvalItem(name="balance_ok", verdict="pass", note="the balance covers it"),
        EvalItem(name="health_factor", verdict="warn", note="drops to 1.4"),
        EvalItem(name="slippage", verdict="pass"),
    )
    assert event_from_dict(event_to_dict(done[1])) == done[1]


async def test_thinking_indices_run_across_steps_and_a_resume() -> None:
    @tool(permission="confirm")
    def act() -> str:
        """Act."""
        return "acted"

    model = ScriptedModel(
        [
            ScriptedResponse(thinking="one", tool_calls=[ScriptedCall("act", {})]),
            ScriptedResponse(thinking="two", text="done"),
        ]
    )
    session = Session(Agent(model=model, tools=[act]))
    first = await send(session, "go")
    pending = pending_of(first)
    second = await resume(session, pending.attempt_id, Approve())
    indices = [e.index for e in first + second if isinstance(e, ThinkingDone)]
    assert indices == [0, 1]


def test_a_summary_without_mode_or_close_still_parses() -> None:
    assert parse_eval_summary("<eval_summary>\n- a: ok") == (
        "default",
        (EvalItem(name="a", verdict="ok"),),
    )
    assert parse_eval_summary("no marker here") is None
    assert parse_eval_summary("<eval_summaryX>\n- a: ok</eval_summaryX>") is None
    assert parse_eval_summary("<eval_summary") is None


def test_a_summary_keeps_a_bounded_number_of_items() -> None:
    body = "\n".join(f"- item{i}: ok" for i in range(1000))
    parsed = parse_eval_summary(f"<eval_summary mode='x'>\n{body}\n</eval_summary>")
    assert parsed is not None and parsed[0] == "x" and len(parsed[1]) == MAX_EVAL_ITEMS


@given(st.text(alphabet=st.sampled_from("<>/-:*= \n\u2014eval_summarymode\"'ab"), max_size=300))
def test_the_summary_parser_never_raises(text: str) -> None:
    parsed = parse_eval_summary(text)
    if parsed is not None:
        mode, items = parsed
        assert mode and len(items) <= MAX_EVAL_ITEMS
        assert all(item.name for item in items)


# ------------------------------------------------------------------ effort


@pytest.mark.parametrize(
    ("text", "level"),
    [
        ("thanks!", "minimal"),
        ("what's my balance?", "low"),
        ("swap $50 of USD to ETH", "medium"),
        ("why did my health factor drop?", "medium"),
        ("should I repay the loan first and then swap the rest?", "high"),
        ("think carefully about my portfolio", "max"),
        ("", "medium"),
    ],
)
def test_classify_effort(text: str, level: str) -> None:
    assert classify_effort(text)[0] == level


@given(st.text(max_size=500))
def test_classify_effort_never_raises(text: str) -> None:
    level, reason = classify_effort(text)
    assert level in ("minimal", "low", "medium", "high", "max") and reason


async def test_adaptive_effort_sets_the_level_per_turn_unless_the_agent_set_one() -> None:
    inner = ScriptedModel(["hi there", "thinking hard"])
    model = AdaptiveEffort(inner)
    session = Session(Agent(model=model))
    await send(session, "hello")
    await send(session, "think hard about my savings plan")
    assert [r.settings.effort for r in inner.requests] == ["minimal", "max"]
    assert model.stats.levels == {"minimal": 1, "max": 1}

    from mainspring.models import ModelSettings

    fixed = ScriptedModel(["ok"])
    agent = Agent(model=AdaptiveEffort(fixed), model_settings=ModelSettings(effort="low"))
    await send(Session(agent), "think hard about it")
    assert fixed.requests[0].settings.effort == "low"


async def test_a_failing_classifier_means_medium() -> None:
    def broken(text: str) -> tuple[str, str]:
        raise RuntimeError("boom")

    inner = ScriptedModel(["ok"])
    await send(Session(Agent(model=AdaptiveEffort(inner, classify=broken))), "x")  # type: ignore[arg-type]  # a classifier that only raises; its labels do not matter
    assert inner.requests[0].settings.effort == "medium"


async def test_every_step_of_a_turn_keeps_its_level() -> None:
    @tool(read_only=True)
    def look() -> str:
        """Look."""
        return "seen"

    inner = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("look", {})]), "ok"])
    await send(Session(Agent(model=AdaptiveEffort(inner), tools=[look])), "what is my balance")
    assert [r.settings.effort for r in inner.requests] == ["low", "low"]


# ------------------------------------------------------- guard_fired (after)


async def test_guard_fired_sees_after_hints_and_blocked_calls_keep_their_hints() -> None:
    fired: list[tuple[str, Finding]] = []

    @tool(read_only=True)
    def balance() -> str:
        """Balance."""
        return "5"

    @tool
    def spend() -> str:
        """Spend."""
        return "spent"

    def low(t: Tool, a: Mapping[str, JsonValue], out: object) -> str | None:
        return "balance is low: tell the user" if t.name == "balance" else None

    guards = [
        Guard(name="low_balance", tier="ux", after=low),
        Guard(
            name="frozen",
            before=lambda t, a: ("block", "account frozen") if t.name == "spend" else None,
        ),
        Guard(
            name="note",
            tier="ux",
            before=lambda t, a: ("hint", "suggest a smaller amount") if t.name == "spend" else None,
        ),
    ]
    model = ScriptedModel(
        [
            ScriptedResponse(tool_calls=[ScriptedCall("balance", {}), ScriptedCall("spend", {})]),
            "ok",
        ]
    )
    agent = Agent(
        model=model,
        tools=[balance, spend],
        guards=guards,
        hooks=Hooks(guard_fired=lambda t, a, f: fired.append((t.name, f))),
    )
    session = Session(agent)
    await send(session, "go")
    results = {p.name: p.content for p in session.messages[-2].tool_results_parts}
    assert results["balance"] == "5\n\n[hint] balance is low: tell the user"
    assert (
        results["spend"] == "blocked by frozen: account frozen\n\n[hint] suggest a smaller amount"
    )
    assert sorted((n, f.source, f.action) for n, f in fired) == [
        ("balance", "low_balance", "hint"),
        ("spend", "frozen", "block"),
        ("spend", "note", "hint"),
    ]
