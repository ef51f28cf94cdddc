"""The simple and the owned-stream ways to run a session.

``session.run`` / ``run_sync`` return a RunResult (or raise RunFailed);
``session.stream`` / ``stream_resume`` own their stream's task; a slow
consumer holds the model back (a bounded buffer); ``aclose`` tears down the
context pipeline's modules.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import anyio.lowlevel
import pytest

from mainspring import (
    Agent,
    Approve,
    ContextOptions,
    RunFailed,
    Session,
    TextDelta,
    TurnComplete,
    tool,
)
from mainspring.context import Module
from mainspring.errors import ConfigError, ModelOutputError
from mainspring.models.base import ModelEvent, ModelRequest, ModelStop
from mainspring.testing import ScriptedCall, ScriptedModel, ScriptedResponse

pytestmark = pytest.mark.anyio

paid: list[str] = []


@tool(permission="confirm")
def pay(to: str) -> str:
    """Pay someone."""
    paid.append(to)
    return f"paid {to}"


def agent(*extra: ScriptedResponse | str) -> Agent:
    script: list[ScriptedResponse | str] = [
        ScriptedResponse(text="On it. ", tool_calls=[ScriptedCall("pay", {"to": "ann"})]),
        "Paid Ann.",
        *extra,
    ]
    return Agent(model=ScriptedModel(script), tools=[pay])


async def test_run_returns_the_pending_action_then_the_final_text() -> None:
    paid.clear()
    session = Session(agent())
    first = await session.run("pay Ann")
    assert first.paused and first.pending is not None and first.pending.name == "pay"
    assert first.stop_reason == "pending_action" and first.text == "On it. "
    assert paid == []
    done = await session.run(attempt_id=first.pending.attempt_id, decision=Approve())
    assert not done.paused and done.stop_reason == "end_turn"
    assert done.text == "Paid Ann." and paid == ["ann"]
    assert isinstance(done.events[-1], TurnComplete)


def test_run_sync_works_from_plain_code() -> None:
    session = Session(Agent(model=ScriptedModel(["Hello there."])))
    result = session.run_sync("hi")
    assert result.text == "Hello there." and result.usage.requests == 1


async def test_run_raises_run_failed_with_the_error_event() -> None:
    failing = ScriptedResponse(
        text="partial", error=ModelOutputError("cut off", provider="scripted"), error_after=1
    )
    session = Session(Agent(model=ScriptedModel([failing])))
    with pytest.raises(RunFailed) as caught:
        await session.run("hi")
    assert caught.value.code == "model_output_error" and caught.value.event is not None
    assert not session.running


async def test_run_needs_a_message_or_a_decision() -> None:
    session = Session(agent())
    with pytest.raises(ConfigError):
        await session.run()
    with pytest.raises(ConfigError):
        await session.run("hi", attempt_id="x", decision=Approve())
    with pytest.raises(ConfigError):
        await session.run(decision=Approve())


async def test_leaving_a_stream_block_early_stops_the_run_cleanly() -> None:
    paid.clear()
    session = Session(agent())
    async with session.stream("pay Ann") as events:
        async for event in events:
            if isinstance(event, TextDelta):
                break
    assert not session.running
    assert paid == []  # nothing ran without a decision
    # The run stopped where it was: maybe before the pause, maybe at it (the
    # producer may have reached it before the consumer left). Either way the
    # session goes on at once.
    if session.pending is not None:
        result = await session.run(attempt_id=session.pending.attempt_id, decision=Approve())
        assert paid == ["ann"]
    else:
        result = await session.run("again")
    assert result.stop_reason in ("pending_action", "end_turn")


async def test_stream_resume_owns_the_resumed_stream() -> None:
    paid.clear()
    session = Session(agent())
    first = await session.run("pay Ann")
    assert first.pending is not None
    async with session.stream_resume(first.pending.attempt_id, Approve()) as events:
        seen = [e.type async for e in events]
    assert seen[-1] == "turn_complete" and paid == ["ann"]


class Firehose:
    """A model that streams many deltas and counts how far it got."""

    name = "firehose"

    def __init__(self, deltas: int) -> None:
        self.deltas = deltas
        self.produced = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        for _ in range(self.deltas):
            self.produced += 1
            yield TextDelta(text="x")
            await anyio.lowlevel.checkpoint()
        yield ModelStop(stop_reason="end_turn")


async def test_a_slow_consumer_holds_the_model_back() -> None:
    model = Firehose(500)
    session = Session(Agent(model=model), buffer_events=8)
    async with session.stream("go") as events:
        await events.__anext__()
        for _ in range(50):  # the consumer dawdles; the producer may not run ahead
            await anyio.lowlevel.checkpoint()
        ahead = model.produced
        rest = [e async for e in events]
    assert ahead <= 8 + 2, f"the model ran {ahead} deltas ahead of a consumer that took one"
    assert isinstance(rest[-1], TurnComplete) and model.produced == 500


async def test_aclose_tears_down_the_context_modules() -> None:
    torn: list[str] = []

    class Tracked(Module):
        async def teardown(self) -> None:
            torn.append(self.name)

    session = Session(
        Agent(model=ScriptedModel(["ok"]), context=ContextOptions(modules=[Tracked("tracked")]))
    )
    await session.run("hi")
    await session.aclose()
    assert torn == ["tracked"]
