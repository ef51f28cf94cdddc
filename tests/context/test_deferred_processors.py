"""Budget processors made at first need: the same requests, no state shared.

An agent whose only processors that keep state are microcompact and
compaction gives its sessions one shared tuple of the stateless layers and a
shared :class:`~mainspring.context._shape.Deferral`; a session makes its own
microcompact and compaction only once its history passes their thresholds (or
when its processors are read). These tests check that such a session compiles
exactly what a session with its processors made at the start compiles, and
that sessions below the threshold hold no processors of their own.
"""

from __future__ import annotations

from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mainspring import Agent, ContextOptions, ScriptedModel, Session
from mainspring.context import Compaction, Microcompact
from mainspring.context._plan import ContextPlan, _make
from mainspring.context.compiler import ContextCompiler
from mainspring.messages import Message, ToolCallPart, ToolResultPart
from tests.helpers import send

RESULTS = ("alpha " * 300, "beta " * 400, "short")
"""Tool results a conversation draws from: two large enough to be collapsed, one not."""


def _turn(turn: int, tool: int | None) -> list[Message]:
    """One turn: the question, a call and its result when ``tool`` is given, the answer."""
    messages = [Message.user(f"question {turn}")]
    if tool is not None:
        call = ToolCallPart(id=f"c{turn}", name="fetch", arguments={"which": tool})
        messages.append(Message(role="assistant", parts=(call,)))
        result = ToolResultPart(tool_use_id=f"c{turn}", name="fetch", content=RESULTS[tool])
        messages.append(Message.tool_results([result]))
    messages.append(Message.assistant(f"answer {turn}"))
    return messages


async def _summarize(messages: Any) -> str:
    return f"{len(messages)} messages"


def _plan(budget: int, *, instructions: str, summarizer: bool) -> ContextPlan:
    options = ContextOptions(budget=budget, summarizer=_summarize if summarizer else None)
    return ContextPlan(options=options, model="m", instructions=instructions)


def _made_at_start(plan: ContextPlan) -> ContextCompiler[Message]:
    processors, modules = _make(plan._parts, plan._order, plan._in_place)
    return ContextCompiler.shaped(plan.shape, modules, processors=processors)


def _state(compiler: ContextCompiler[Message]) -> list[object]:
    """What the budget processors hold, by value."""
    found: list[object] = []
    for proc in compiler.processors:
        if isinstance(proc, Compaction):
            found.append(("compaction", proc.runs, proc.pruned, proc.summaries, proc._pruned_upto))
        elif isinstance(proc, Microcompact):
            seen = proc._seen
            noted = None if seen is None else (seen.calls, seen.latest, seen.superseded)
            found.append(("microcompact", proc._turn, proc._pending_start, proc._pending, noted))
        else:
            found.append(proc)
    return found


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    budget=st.sampled_from([300, 900, 2_000, 200_000]),
    instructions=st.sampled_from(["", "Be terse."]),
    summarizer=st.booleans(),
    turns=st.lists(st.one_of(st.none(), st.integers(0, 2)), min_size=1, max_size=8),
    read_at=st.one_of(st.none(), st.integers(0, 8)),
    compile_every=st.sampled_from([1, 2]),
)
def test_a_session_making_its_budget_processors_late_compiles_the_same_requests(
    budget: int,
    instructions: str,
    summarizer: bool,
    turns: list[int | None],
    read_at: int | None,
    compile_every: int,
) -> None:
    plan = _plan(budget, instructions=instructions, summarizer=summarizer)
    assert plan._deferral is not None
    late = plan.compiler()
    early = _made_at_start(plan)

    async def go() -> None:
        for turn, tool in enumerate(turns, 1):
            if turn == read_at:  # reading the processors makes them, under the threshold too
                assert [p.id for p in late.processors] == [p.id for p in early.processors]
            for compiler in (late, early):
                compiler.append(_turn(turn, tool))
            if turn % compile_every:
                continue  # (two turns mapped as one run)
            one = await late.compile(turn_index=turn)
            two = await early.compile(turn_index=turn)
            assert list(one.messages) == list(two.messages)
            assert one.system == two.system
            assert late.view.tokens == early.view.tokens
        assert _state(late) == _state(early)

    anyio.run(go)


def test_sessions_under_the_budget_share_the_layers_and_make_no_budget_processors() -> None:
    agent = Agent(model=ScriptedModel(["one", "two", "three"]), instructions="Be terse.")
    one, two = Session(agent), Session(agent)
    plan = agent._context_plan
    assert plan is not None and plan._deferral is not None

    async def go() -> None:
        await send(one, "hi")
        await send(two, "hello")

    anyio.run(go)
    for session in (one, two):
        compiler = session._context
        assert compiler._deferred is plan._deferral
        assert compiler._processors is plan._processors  # the shared layers, nothing else
        assert not any(isinstance(p, (Microcompact, Compaction)) for p in compiler._processors)
    # Asked for, they are made, each session its own, as new.
    mine, theirs = one._context.processors, two._context.processors
    assert [p.id for p in mine] == ["microcompact", "compaction", "base-system"]
    assert mine[0] is not theirs[0] and mine[1] is not theirs[1]
    assert mine[2] is theirs[2]  # the base system prompt keeps no state: shared
    assert one._context._deferred is None
    assert two._context._deferred is None
    assert plan._processors is not None and len(plan._processors) == 1  # the plan's unchanged


def test_a_session_past_the_threshold_leaves_its_siblings_and_the_plan_untouched() -> None:
    big = "x" * 3_000
    agent = Agent(
        model=ScriptedModel([f"{big} {i}" for i in range(6)]),
        context=ContextOptions(budget=1_500),
    )
    first, second = Session(agent), Session(agent)
    plan = agent._context_plan
    assert plan is not None and plan._deferral is not None
    shared = plan._processors

    async def go() -> None:
        for i in range(3):
            await send(first, f"question {i}")
        await send(second, "short")

    anyio.run(go)
    compaction = [p for p in first._context._processors if isinstance(p, Compaction)]
    assert first._context._deferred is None  # past the threshold: made
    assert len(compaction) == 1 and compaction[0].runs > 0
    assert second._context._deferred is plan._deferral  # a small history: still shared
    assert plan._processors is shared == ()
    later = Session(agent)
    assert later._context._deferred is plan._deferral
    fresh = [p for p in later._context.processors if isinstance(p, Compaction)]
    assert fresh[0] is not compaction[0] and fresh[0].runs == fresh[0].pruned == 0


def test_agents_whose_other_processors_keep_state_make_every_processor_per_session() -> None:
    from mainspring.memory import InMemoryMemoryStore

    agent = Agent(model=ScriptedModel(["ok"]), memory=InMemoryMemoryStore())
    session = Session(agent)
    plan = agent._context_plan
    assert plan is not None and plan._deferral is None
    assert session._context._deferred is None
    kinds = {type(p) for p in session._context._processors}
    assert {Microcompact, Compaction} <= kinds
