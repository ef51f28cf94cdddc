"""Live steering: messages sent while a run is active are taken at step boundaries."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import aclosing

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mainspring import (
    Agent,
    ConfigError,
    Event,
    Message,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    SessionBusy,
    ToolContext,
    ToolStart,
    TurnComplete,
    tool,
)
from mainspring.events import SteeringQueued, SteeringTaken
from mainspring.models.base import ToolSpec
from mainspring.stores import InMemorySessionStore
from mainspring.testing import check_events
from tests.helpers import send

pytestmark = pytest.mark.anyio


GATES: dict[str, anyio.Event] = {}


def steerable(**kw: object) -> tuple[Session, ScriptedModel]:
    """A session whose first step runs a read (held until the test steered), then
    answers from what the user said last."""

    @tool(read_only=True)
    async def look(ctx: ToolContext) -> str:
        """Look around."""
        gate = GATES.get(ctx.session_id)
        if gate is not None:
            await gate.wait()
        return "looked"

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse | str:
        last = messages[-1]
        if last.role == "user" and not any(m.role == "tool" for m in messages[-3:]):
            if "look" in last.text:
                return ScriptedResponse(tool_calls=[ScriptedCall("look", {})])
        users = [m.text for m in messages if m.role == "user"]
        return f"answering: {users[-1]}"

    model = ScriptedModel(script)
    session = Session(Agent(model=model, tools=[look]), **kw)  # type: ignore[arg-type]  # keywords passed through from the caller
    GATES[session.session_id] = anyio.Event()
    return session, model


async def run_and_steer(
    session: Session, first: str, steer: str, *, mode: str = "next_step", via_send: bool = False
) -> tuple[list[Event], list[Event]]:
    """Send ``first``; when its read starts, steer ``steer`` in; both streams' events."""
    events: list[Event] = []
    side: list[Event] = []
    async with aclosing(session.send(first)) as stream:
        async for event in stream:
            events.append(event)
            if isinstance(event, ToolStart) and not side:
                if via_send:
                    side = [e async for e in session.send(steer)]
                else:
                    session.steer(steer, mode=mode)  # type: ignore[arg-type]  # the parametrized names are the literals the type lists
                    side = [TurnComplete(stop_reason="steered")]
                GATES[session.session_id].set()  # the read may finish now
    check_events(events)
    return events, side


async def test_a_steering_message_reaches_the_model_at_the_next_step() -> None:
    session, model = steerable()
    events, _ = await run_and_steer(session, "look around", "actually, only the kitchen")
    taken = [e for e in events if isinstance(e, SteeringTaken)]
    assert len(taken) == 1 and taken[0].mode == "next_step" and taken[0].step == 1
    assert taken[0].text == "actually, only the kitchen" and taken[0].turn_index == 1
    second = model.requests[1].messages
    assert [m.role for m in second[-3:]] == ["assistant", "tool", "user"]
    assert second[-1].text == "actually, only the kitchen"
    assert session.messages[-1].text == "answering: actually, only the kitchen"
    assert session.messages[-2].meta["steering"] == taken[0].steering_id
    assert isinstance(events[-1], TurnComplete) and events[-1].stop_reason == "end_turn"
    assert session.steering_queued == ()


async def test_a_message_steered_to_one_session_never_reaches_another() -> None:
    steered, _ = steerable()
    other, _ = steerable()
    GATES[steered.session_id].set()
    GATES[other.session_id].set()
    async with aclosing(steered.send("look")) as stream:
        async for event in stream:
            if isinstance(event, ToolStart):
                steered.steer("later", mode="follow_up")
                assert len(steered.steering_queued) == 1
                assert other.steering_queued == ()
    assert [m.text for m in other.messages] == []
    events = await send(other, "look")
    assert not any(isinstance(e, SteeringTaken) for e in events)


async def test_send_while_running_queues_when_steering_is_on() -> None:
    session, _ = steerable(steering="next_step")
    events, side = await run_and_steer(session, "look", "and the garden", via_send=True)
    check_events(side)
    queued = side[0]
    assert isinstance(queued, SteeringQueued) and queued.mode == "next_step"
    assert isinstance(side[1], TurnComplete) and side[1].stop_reason == "steered"
    taken = next(e for e in events if isinstance(e, SteeringTaken))
    assert taken.steering_id == queued.steering_id


async def test_send_while_running_still_raises_by_default() -> None:
    session, _ = steerable()
    with pytest.raises(SessionBusy):
        await run_and_steer(session, "look", "again", via_send=True)


async def test_a_follow_up_runs_as_the_next_turn_of_the_same_stream() -> None:
    session, _model = steerable()
    events, _ = await run_and_steer(session, "look", "now the attic", mode="follow_up")
    taken = next(e for e in events if isinstance(e, SteeringTaken))
    assert taken.mode == "follow_up" and taken.turn_index == 2
    texts = [m.text for m in session.messages if m.role == "assistant" and m.text]
    assert texts == ["answering: look", "answering: now the attic"]
    last = events[-1]
    assert isinstance(last, TurnComplete) and last.turn_index == 2
    assert session.state.turn_index == 2


async def test_steering_is_refused_with_no_run_and_for_bad_input() -> None:
    session, _ = steerable()
    with pytest.raises(ConfigError, match="no active run"):
        session.steer("hello")
    with pytest.raises(ConfigError, match="mode is"):
        session.steer("hello", mode="later")  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
    with pytest.raises(ConfigError, match="user message"):
        session.steer(Message(role="assistant", parts=()))
    with pytest.raises(ConfigError, match="steering is"):
        Session(session.agent, steering="sometimes")  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
    await send(session, "hi")  # the session is fine


async def test_a_message_queued_as_a_run_pauses_is_taken_by_the_next_run() -> None:
    @tool(permission="confirm")
    def act() -> str:
        """Act."""
        return "acted"

    model = ScriptedModel(
        [ScriptedResponse(tool_calls=[ScriptedCall("act", {})]), "after approval"]
    )
    session = Session(Agent(model=model, tools=[act]))
    stream = session.send("act")
    pending = None
    async for event in stream:
        if event.type == "pending_action":
            session.steer("make it quick")
            pending = event
    assert pending is not None and len(session.steering_queued) == 1
    from mainspring import Approve

    events = [e async for e in session.resume(pending.attempt_id, Approve())]
    check_events(events)
    assert any(isinstance(e, SteeringTaken) for e in events)
    assert model.requests[-1].messages[-1].text == "make it quick"


async def test_steering_is_durable_once_taken() -> None:
    store = InMemorySessionStore()
    session, _ = steerable(session_store=store)
    await run_and_steer(session, "look", "just the hall")
    loaded = await store.load(session.session_id)
    assert loaded is not None
    assert [m.text for m in loaded.messages if m.role == "user"] == ["look", "just the hall"]


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["next_step", "follow_up"]), min_size=1, max_size=5))
def test_every_steered_message_is_taken_once_in_order(modes: list[str]) -> None:
    async def main() -> None:
        session, _ = steerable()
        events: list[Event] = []
        ids: list[str] = []
        async with aclosing(session.send("look")) as stream:
            async for event in stream:
                events.append(event)
                if isinstance(event, ToolStart) and not ids:
                    ids = [
                        session.steer(f"message {i}", mode=mode)  # type: ignore[arg-type]  # the parametrized names are the literals the type lists
                        for i, mode in enumerate(modes)
                    ]
                    GATES[session.session_id].set()
        check_events(events)
        taken = [e for e in events if isinstance(e, SteeringTaken)]
        nexts = [i for i, m in zip(ids, modes, strict=True) if m == "next_step"]
        follows = [i for i, m in zip(ids, modes, strict=True) if m == "follow_up"]
        assert [t.steering_id for t in taken] == nexts + follows
        assert session.steering_queued == ()
        users = [m.text for m in session.messages if m.role == "user"]
        expected = [f"message {ids.index(i)}" for i in nexts + follows]
        assert users == ["look", *expected]
        assert session.state.turn_index == 1 + len(follows)

    anyio.run(main)
