"""A tool that never ends: every call has a deadline, and the rest of the process carries on.

A synchronous CPU-bound tool runs in a worker thread; a tool without a
``timeout`` of its own gets the agent's ``Limits.tool_timeout``. Past it the
call is an error result the model sees, the other calls of the step keep
their results, and the turn goes on. None of these tests waits on a clock:
the stuck tools spin until the test releases them, after the turn ended.
"""

from __future__ import annotations

import threading

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
    spins = 0

    @tool(read_only=True, timeout=own_timeout)
    def spin() -> str:
        """Burns CPU until released."""
        nonlocal spins
        while not release.is_set():
            spins += 1
        return "released"

    @tool(read_only=True)
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
    assert spins > 0


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
