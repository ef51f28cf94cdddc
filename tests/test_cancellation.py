"""Cancellation, budgets and early exits leave a usable session and a valid transcript."""

from __future__ import annotations

from contextlib import aclosing

import anyio
import anyio.lowlevel
import pytest

from mainspring import (
    Agent,
    Limits,
    Message,
    ModelPrice,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    TextDelta,
    ToolResult,
    ToolStart,
    TurnComplete,
    Usage,
    tool,
)
from mainspring.messages import ToolResultPart
from tests.helpers import send

pytestmark = pytest.mark.anyio


def assert_valid_transcript(messages: tuple[Message, ...]) -> None:
    """Every tool call has exactly one result, in the next message."""
    for i, message in enumerate(messages):
        calls = [c.id for c in message.tool_calls]
        if calls:
            assert i + 1 < len(messages), "a tool call without results ends the transcript"
            results = [p.tool_use_id for p in messages[i + 1].tool_results_parts]
            assert results == calls


def results_of(session: Session) -> list[ToolResultPart]:
    return [p for m in session.messages for p in m.tool_results_parts]


async def test_cancel_mid_model_stream_stops_promptly_and_keeps_partial_text() -> None:
    model = ScriptedModel(
        [ScriptedResponse(text="a very slow answer " * 20, delay=1.0), "next turn works"],
        chunk_size=4,
    )
    session = Session(Agent(model=model))
    events = []
    async for event in session.send("hi"):
        events.append(event)
        if isinstance(event, TextDelta):
            session.cancel()
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.stop_reason == "cancelled"
    assert sum(isinstance(e, TextDelta) for e in events) == 1
    assert session.messages[-1].role == "assistant" and session.messages[-1].meta == {
        "partial": True
    }
    assert not session.running
    events = await send(session, "again")
    assert session.messages[-1].text == "next turn works"


async def test_cancel_mid_read_interrupts_it_and_records_a_result() -> None:
    @tool(read_only=True)
    async def forever() -> str:
        """Never ends."""
        await anyio.sleep_forever()
        return "unreachable"

    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("forever")]), "after"])
    session = Session(Agent(model=model, tools=[forever]))
    events = []
    async for event in session.send("go"):
        events.append(event)
        if isinstance(event, ToolStart):
            session.cancel()
    assert isinstance(events[-1], TurnComplete) and events[-1].stop_reason == "cancelled"
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.is_error and "interrupted" in result.content
    assert_valid_transcript(session.messages)
    await send(session, "again")
    assert session.messages[-1].text == "after"


async def test_cancel_mid_write_lets_the_write_finish_and_records_it() -> None:
    entered = anyio.Event()
    done: list[str] = []

    @tool
    async def transfer() -> str:
        """Move money (takes a moment)."""
        entered.set()
        await anyio.sleep(0.05)
        done.append("transfer")
        return "transferred"

    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("transfer")]), "after"])
    session = Session(Agent(model=model, tools=[transfer]))
    events = []
    async for event in session.send("go"):
        events.append(event)
        if isinstance(event, ToolStart):
            session.cancel()
    assert done == ["transfer"]
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.content == "transferred" and not result.is_error
    assert isinstance(events[-1], TurnComplete) and events[-1].stop_reason == "cancelled"
    (record,) = session.state.writes.values()
    assert record.status == "done"
    assert_valid_transcript(session.messages)


async def test_a_write_that_outlives_the_grace_is_recorded_as_unknown() -> None:
    @tool
    async def stuck() -> str:
        """Never finishes."""
        await anyio.sleep_forever()
        return "unreachable"

    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("stuck")]), "after"])
    session = Session(Agent(model=model, tools=[stuck], limits=Limits(write_cancel_grace=0.05)))
    events = []
    async for event in session.send("go"):
        events.append(event)
        if isinstance(event, ToolStart):
            session.cancel()
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.is_error and "outcome is unknown" in result.content
    (record,) = session.state.writes.values()
    assert record.status == "unknown"
    assert_valid_transcript(session.messages)


async def test_cancelling_the_consumer_task_leaves_a_usable_session() -> None:
    @tool(read_only=True)
    async def forever() -> str:
        """Never ends."""
        await anyio.sleep_forever()
        return "unreachable"

    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("forever")]), "after"])
    session = Session(Agent(model=model, tools=[forever]))
    with anyio.move_on_after(0.1) as scope:
        async with aclosing(session.send("go")) as stream:
            async for _ in stream:
                pass
    assert scope.cancelled_caught
    assert not session.running
    assert_valid_transcript(session.messages)
    await send(session, "again")
    assert session.messages[-1].text == "after"


@pytest.mark.parametrize("close", [True, False])
# trio warns (ResourceWarning) when a generator is left to the garbage collector.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_breaking_out_early_leaves_a_usable_session(close: bool) -> None:
    model = ScriptedModel(["first answer, long enough to stream", "second answer"])
    session = Session(Agent(model=model))
    stream = session.send("hi")
    async for event in stream:
        if isinstance(event, TextDelta):
            break
    if close:
        await stream.aclose()
    else:
        del stream  # finalized by the event loop, possibly in another task
        for _ in range(5):
            await anyio.lowlevel.checkpoint()
    with anyio.fail_after(60):
        while session.running:  # noqa: ASYNC110  # the session exposes no event for this
            await anyio.sleep(0.001)
    events = await send(session, "again")
    assert isinstance(events[-1], TurnComplete)
    assert session.messages[-1].text == "second answer"


async def test_a_consumer_leaving_a_storeless_run_mid_stream_stops_it_at_once() -> None:
    """No store, no lock: the run's own cancel stops the model stream (no scope of its own)."""
    text = "a long answer that streams one slow word at a time " * 4
    model = ScriptedModel([ScriptedResponse(text=text, delay=0.01), "second answer"])
    session = Session(Agent(model=model))
    seen = 0
    async with aclosing(session.send("hi")) as stream:
        async for event in stream:
            if isinstance(event, TextDelta):
                seen += 1
                if seen == 2:
                    break
    assert not session.running  # the close waited for the run's clean-up
    assert_valid_transcript(session.messages)
    assert all(m.text != text for m in session.messages)  # the answer was cut, not finished
    events = await send(session, "again")
    assert isinstance(events[-1], TurnComplete) and events[-1].stop_reason == "end_turn"
    assert session.messages[-1].text == "second answer"


async def test_budget_exceeded_mid_run_stops_cleanly_without_running_tools() -> None:
    ran: list[str] = []

    @tool
    async def look() -> str:
        """A write: it would only run after the step, so it never starts."""
        ran.append("look")
        return "seen"

    big = Usage(input_tokens=1_000_000, requests=1)
    model = ScriptedModel(
        [ScriptedResponse(tool_calls=[ScriptedCall("look")], usage=big), "never reached"], name="m"
    )
    agent = Agent(
        model=model,
        tools=[look],
        prices={"m": ModelPrice(input=2.0, output=10.0)},
        limits=Limits(budget_usd=1.0),
    )
    session = Session(agent)
    events = await send(session, "go")
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.stop_reason == "budget_exceeded"
    assert done.cost_usd == pytest.approx(2.0)
    assert len(model.requests) == 1
    assert_valid_transcript(session.messages)
    assert all(p.is_error for p in results_of(session))
    assert ran == []
    # Further turns stop before calling the model.
    events = await send(session, "more")
    assert isinstance(events[-1], TurnComplete) and events[-1].stop_reason == "budget_exceeded"
    assert len(model.requests) == 1


async def test_cancel_between_send_and_the_first_iteration_cancels_that_run() -> None:
    agent = Agent(model=ScriptedModel(["an answer the user no longer wants"]))
    session = Session(agent)
    stream = session.send("hello")
    session.cancel()  # before anything ran: the run starts cancelled
    events = [e async for e in stream]
    last = events[-1]
    assert isinstance(last, TurnComplete) and last.stop_reason == "cancelled"
    again = [e async for e in session.send("still there?")]  # the next run is not affected
    assert isinstance(again[-1], TurnComplete) and again[-1].stop_reason == "end_turn"
