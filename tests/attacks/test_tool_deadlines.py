"""A tool that never ends: every call has a deadline, and the rest of the process carries on.

A synchronous CPU-bound tool runs in a worker thread; a tool without a
``timeout`` of its own gets the agent's ``Limits.tool_timeout``. Past it the
call is an error result the model sees, the other calls of the step keep
their results, and the turn goes on. None of these tests waits on a clock:
the stuck tools spin until the test releases them, after the turn ended.
"""

from __future__ import annotations

import threading
import time

import anyio
import anyio.lowlevel
import pytest

from mainspring import (
    Agent,
    Limits,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    ToolResult,
    ToolStart,
    TurnComplete,
    tool,
)
from mainspring.errors import ConfigError
from tests.helpers import send

pytestmark = pytest.mark.anyio


def test_the_default_tool_timeout_is_positive() -> None:
    assert Limits().tool_timeout > 0
    with pytest.raises(ConfigError, match="tool_timeout must be positive"):
        Limits(tool_timeout=0)


@pytest.mark.parametrize("own_timeout", [None, 0.2])
async def test_a_spinning_sync_read_times_out_and_the_turn_goes_on(
    own_timeout: float | None,
) -> None:
    release = threading.Event()

    @tool(read_only=True, timeout=own_timeout)
    def spin() -> str:
        """Burns CPU until released (if its worker thread got to it before the deadline)."""
        while not release.is_set():
            pass
        return "released"

    @tool(read_only=True, timeout=600)  # its own: only spin's deadline is in play
    def quick() -> str:
        """Answers at once."""
        return "quick answer"

    calls = [ScriptedCall("spin", {}), ScriptedCall("quick", {})]
    model = ScriptedModel([ScriptedResponse(tool_calls=calls), "moving on"])
    # the agent's default deadline is what stops the tool without a timeout of its own
    session = Session(Agent(model=model, tools=[spin, quick], limits=Limits(tool_timeout=0.2)))
    try:
        events = await send(session, "go")
    finally:
        release.set()
    results = {e.name: e for e in events if isinstance(e, ToolResult)}
    assert results["spin"].is_error and "timed out after 0.2s" in results["spin"].content
    assert not results["quick"].is_error and results["quick"].content == "quick answer"
    assert session.messages[-1].text == "moving on"


async def test_the_loop_ticks_while_a_sync_tool_burns_cpu() -> None:
    ticks = 0
    done = anyio.Event()

    @tool(read_only=True)
    def crunch() -> str:
        """Spins until the event loop has ticked 200 times meanwhile."""
        seen = ticks
        while ticks < seen + 200:
            pass
        return "crunched"

    async def heartbeat() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await anyio.lowlevel.checkpoint()

    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("crunch", {})]), "ok"])
    session = Session(Agent(model=model, tools=[crunch]))
    async with anyio.create_task_group() as tg:
        tg.start_soon(heartbeat)
        events = await send(session, "go")
        done.set()
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.content == "crunched" and not result.is_error


@pytest.mark.parametrize("deadline_from", ["own", "agent"])
async def test_a_waiting_read_times_out_while_its_sibling_goes_on(deadline_from: str) -> None:
    """Two reads of one step with different deadlines: only the one past its own ends."""
    never = anyio.Event()
    stopped = anyio.Event()

    @tool(read_only=True, timeout=0.05 if deadline_from == "own" else None)
    async def stuck() -> str:
        """Waits for what never comes."""
        try:
            await never.wait()
        finally:
            stopped.set()
        return "unreachable"

    @tool(read_only=True, timeout=600)
    async def patient() -> str:
        """Still running when stuck's deadline passes; answers once stuck has stopped."""
        await stopped.wait()
        return "after stuck"

    calls = [ScriptedCall("stuck", {}), ScriptedCall("patient", {})]
    model = ScriptedModel([ScriptedResponse(tool_calls=calls), "moving on"])
    limits = Limits(tool_timeout=0.05 if deadline_from == "agent" else 600)
    session = Session(Agent(model=model, tools=[stuck, patient], limits=limits))
    events = await send(session, "go")
    results = {e.name: e for e in events if isinstance(e, ToolResult)}
    assert results["stuck"].is_error and "timed out after 0.05s" in results["stuck"].content
    assert not results["patient"].is_error and results["patient"].content == "after stuck"
    assert session.messages[-1].text == "moving on"


async def test_a_read_with_scopes_of_its_own_times_out_cleanly() -> None:
    """A read that entered a task group and a scope before it waits: its deadline still
    stops it, its scopes unwind in order, and the turn goes on."""
    never = anyio.Event()
    helper_stopped = anyio.Event()

    async def helper() -> None:
        try:
            await never.wait()
        finally:
            helper_stopped.set()

    @tool(read_only=True, timeout=0.05)
    async def nested() -> str:
        """A task group, then a scope with a deadline of its own far away, then a wait."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(helper)
            with anyio.fail_after(600):
                await never.wait()
        return "unreachable"

    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("nested", {})]), "on"])
    session = Session(Agent(model=model, tools=[nested]))
    events = await send(session, "go")
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.is_error and "timed out after 0.05s" in result.content
    assert helper_stopped.is_set()
    assert session.messages[-1].text == "on"


async def test_a_read_whose_first_step_overruns_stops_at_its_first_wait() -> None:
    """The deadline counts from the call's start, also for work done before the first wait
    (nothing can stop a coroutine before it waits; it is stopped there)."""
    never = anyio.Event()

    @tool(read_only=True, timeout=0.01)
    async def slow_start() -> str:
        """Works past its deadline before it waits for the first time."""
        start = time.monotonic()
        while time.monotonic() < start + 0.05:  # the clock, not a race: always past 0.01
            pass
        await never.wait()
        return "unreachable"

    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("slow_start", {})]), "on"])
    session = Session(Agent(model=model, tools=[slow_start]))
    events = await send(session, "go")
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.is_error and "timed out after 0.01s" in result.content
    assert session.messages[-1].text == "on"


async def test_a_read_that_catches_its_deadline_is_taken_at_its_word() -> None:
    """A read may catch the deadline's cancellation and answer anyway; that cancellation is
    taken back, so a later cancellation of the run still ends the turn cleanly."""
    never = anyio.Event()

    @tool(read_only=True, timeout=0.05)
    async def stubborn() -> str:
        """Answers with what it has when its deadline stops its wait."""
        try:
            await never.wait()
        except anyio.get_cancelled_exc_class():
            return "partial answer"
        return "unreachable"

    @tool(read_only=True)
    async def forever() -> str:
        """Waits until the run is cancelled."""
        await anyio.sleep_forever()
        return "unreachable"

    model = ScriptedModel(
        [
            ScriptedResponse(tool_calls=[ScriptedCall("stubborn", {})]),
            ScriptedResponse(tool_calls=[ScriptedCall("forever", {})]),
            "after",
        ]
    )
    session = Session(Agent(model=model, tools=[stubborn, forever]))
    events = []
    async for event in session.send("go"):
        events.append(event)
        if isinstance(event, ToolStart) and event.name == "forever":
            session.cancel()  # the run's own cancellation still ends the turn cleanly
    results = {e.name: e for e in events if isinstance(e, ToolResult)}
    assert not results["stubborn"].is_error and results["stubborn"].content == "partial answer"
    assert isinstance(events[-1], TurnComplete) and events[-1].stop_reason == "cancelled"
    await send(session, "again")
    assert session.messages[-1].text == "after"
