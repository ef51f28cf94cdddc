"""Sessions of one agent share only what no session changes.

An agent works out its sessions' context plan once (checked options, the
layers that keep no state, the processors' order, the sizing) and hands each
session a compiler of its own. These tests run turns on one session and check
that a sibling, the agent's shared parts and a session made afterwards are
untouched, and that no mutable object is reachable from two sessions except
through the agent.
"""

from __future__ import annotations

import gc
import types
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mainspring import (
    Agent,
    ContextOptions,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    tool,
)
from mainspring.context import Accounting, InMemorySink, Module, VirtualTailProcessor
from mainspring.context.compiler import Compilation
from mainspring.memory import InMemoryMemoryStore
from tests.helpers import send

REPORT = "quarterly report: revenue up 12%, costs flat\n" + "line item: flat\n" * 40


@tool(read_only=True)
async def report(quarter: str) -> str:
    """Fetch a report."""
    return REPORT if quarter == "q3" else f"no data for {quarter}"


class Reminder(VirtualTailProcessor):
    """A module processor that keeps per-session state (the turns it saw)."""

    def __init__(self) -> None:
        super().__init__("reminder")
        self.seen: list[int] = []

    async def text(self, ctx: Compilation[Any]) -> str:
        self.seen.append(ctx.turn_index)
        return f"reminder {len(self.seen)}"


def reminders() -> Module:
    return Module("reminders", [Reminder()])


def _script(*runs: list[bool]) -> list[ScriptedResponse | str]:
    """The model's answers for runs of turns (``True``: the turn calls a tool first)."""
    script: list[ScriptedResponse | str] = []
    for turns in runs:
        for i, calls in enumerate(turns):
            if calls:
                call = ScriptedCall("report", {"quarter": "q3"})
                script.append(ScriptedResponse(tool_calls=[call]))
            script.append(f"answer {i}")
    return script


def _agent(
    *runs: list[bool], memory: bool, budget: int | None, accounting: bool, module: bool
) -> Agent:
    store = InMemoryMemoryStore() if memory else None
    options = ContextOptions(
        budget=budget,
        accounting=Accounting(sinks=[InMemorySink()]) if accounting else None,
        modules=(reminders,) if module else (),
    )
    return Agent(
        model=ScriptedModel(_script(*runs)),
        tools=[report],
        instructions="You are terse.",
        context_block="Balance: 1,200 EUR",
        skill_recipe="Check before paying.",
        memory=store,
        context=options,
    )


_ATOMS = (type(None), bool, int, float, complex, str, bytes, range, type, types.ModuleType)
_OPAQUE = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.CodeType,
    types.FrameType,
    types.MethodWrapperType,
    types.MappingProxyType,  # read-only (a module's constants: ``MappingProxyType({})``)
)


def _reachable(root: object, stop: set[int]) -> dict[int, object]:
    """Every object reachable from ``root`` (not entering ``stop``, types, modules, code)."""
    found: dict[int, object] = {}
    todo = [root]
    while todo:
        obj = todo.pop()
        key = id(obj)
        if key in found or key in stop or isinstance(obj, _ATOMS):
            continue
        found[key] = obj
        if isinstance(obj, _OPAQUE):
            continue
        todo.extend(gc.get_referents(obj))
    return found


def _mutable(obj: object) -> bool:
    if isinstance(obj, (tuple, frozenset, types.MethodType, *_OPAQUE)):
        return False
    params = getattr(type(obj), "__dataclass_params__", None)
    if params is not None and params.frozen:
        return False
    return (
        isinstance(obj, (list, dict, set, bytearray))
        or hasattr(obj, "__dict__")
        or bool(getattr(type(obj), "__slots__", ()))
    )


def _shared_mutables(agent: Agent, one: Session, two: Session) -> list[str]:
    """Mutable objects reachable from both sessions but not from their agent."""
    by_agent = _reachable(agent, set())
    stop = set(by_agent)
    mine = _reachable(one, stop)
    theirs = _reachable(two, stop)
    both = [mine[k] for k in mine.keys() & theirs.keys() if _mutable(mine[k])]
    return sorted(f"{type(o).__qualname__}: {o!r:.80}" for o in both)


def _fingerprint(session: Session) -> dict[str, object]:
    """What a session's context holds, by value."""
    compiler = session._context
    return {
        "messages": [repr(m) for m in session.messages],
        "transcript": len(compiler.transcript),
        "view": [repr(m) for m in compiler.view],
        "tokens": compiler.view.tokens,
        "summary": [s.turn_index for s in compiler.summary],
        "session_cache": sorted(compiler._session_cache),
        "processors": [(p.id, _state(p)) for p in compiler.processors],
        "modules": [m.name for m in compiler.modules],
        "usage": repr(session.usage),
    }


def _state(obj: object) -> object:
    fields = getattr(obj, "__dict__", {})
    return {k: repr(v) for k, v in sorted(fields.items())}


def _plan_fingerprint(agent: Agent) -> object:
    plan = agent._context_plan
    assert plan is not None
    shape = plan.shape
    shared = plan._processors or ()
    return (
        [(p.id, p.module, _state(p)) for p in shared],
        repr(shape.services),
        repr(shape.config),
        shape.model,
        shape.retain_turns,
        [repr(part) for part in plan._parts],
    )


def _run(session: Session, texts: list[str]) -> None:
    async def go() -> None:
        for text in texts:
            await send(session, text)

    anyio.run(go)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    memory=st.booleans(),
    budget=st.sampled_from([None, 400, 200_000]),
    accounting=st.booleans(),
    module=st.booleans(),
    first=st.lists(st.booleans(), min_size=1, max_size=3),
    second=st.lists(st.booleans(), min_size=1, max_size=2),
)
def test_two_sessions_of_one_agent_never_share_mutable_state(
    memory: bool,
    budget: int | None,
    accounting: bool,
    module: bool,
    first: list[bool],
    second: list[bool],
) -> None:
    agent = _agent(
        first, second, memory=memory, budget=budget, accounting=accounting, module=module
    )
    one, two = Session(agent), Session(agent)
    fresh = _fingerprint(two)
    plan = _plan_fingerprint(agent)
    assert one._context is not two._context
    assert one._context.transcript is not two._context.transcript
    assert one._context.view is not two._context.view

    _run(one, [f"question {i}" for i in range(len(first))])
    assert len(one.messages) == 2 * len(first) + 2 * sum(first)
    assert _fingerprint(two) == fresh  # the sibling saw nothing of the first's turns
    assert _plan_fingerprint(agent) == plan  # nor did the agent's shared parts
    assert _fingerprint(Session(agent)) == fresh  # a session made now starts as the first did
    assert _shared_mutables(agent, one, two) == []

    after_first = _fingerprint(one)
    _run(two, [f"other {i}" for i in range(len(second))])
    assert len(two.messages) == 2 * len(second) + 2 * sum(second)
    assert _fingerprint(one) == after_first  # and the other way round
    assert _plan_fingerprint(agent) == plan
    assert _shared_mutables(agent, one, two) == []


def test_sessions_share_the_stateless_layers_and_get_their_own_stateful_processors() -> None:
    agent = _agent(memory=True, budget=600, accounting=False, module=True)
    one, two = Session(agent), Session(agent)
    mine = {p.id: p for p in one._context.processors}
    theirs = {p.id: p for p in two._context.processors}
    assert (
        mine.keys()
        == theirs.keys()
        == {
            "base-system",
            "context-block",
            "skill-recipe",
            "memory-recall",
            "microcompact",
            "compaction",
            "reminder",
        }
    )
    shared = {i for i in mine if mine[i] is theirs[i]}
    assert shared == {"base-system", "context-block", "skill-recipe"}


@pytest.mark.parametrize("accounting", [False, True])
def test_a_session_s_turns_leave_its_siblings_accounting_untouched(accounting: bool) -> None:
    agent = _agent([True, True], memory=False, budget=400, accounting=accounting, module=False)
    one, two = Session(agent), Session(agent)
    _run(one, ["a", "b"])
    assert two._context.summary == []
    assert two.usage == Session(agent).usage
    assert one.usage != two.usage
    if accounting:
        assert [s.turn_index for s in one._context.summary] == [1, 2]
