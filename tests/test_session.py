"""Session API: misuse fails at once and clearly; state persists through stores."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mainspring import (
    Agent,
    ConfigError,
    Hooks,
    Message,
    ModelPrice,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    SessionBusy,
    TextDelta,
    ThinkingDone,
    TurnComplete,
    UsageEvent,
    tool,
)
from mainspring.errors import StoreError
from mainspring.messages import ThinkingPart
from mainspring.models.base import ModelRequest
from mainspring.state import SessionState
from mainspring.stores import InMemoryCheckpointStore, InMemorySessionStore
from mainspring.testing import collect
from tests.helpers import send

pytestmark = pytest.mark.anyio


async def test_second_send_while_running_is_refused() -> None:
    model = ScriptedModel(["a long answer that takes a while to stream", "second"])
    session = Session(Agent(model=model))
    stream = session.send("hi")
    await stream.__anext__()
    assert session.running
    with pytest.raises(SessionBusy, match="active run"):
        session.send("again")
    rest = [e async for e in stream]
    assert rest[-1].type == "turn_complete"
    await send(session, "again")


async def test_send_requires_a_user_message() -> None:
    session = Session(Agent(model=ScriptedModel([])))
    with pytest.raises(ConfigError, match="user message"):
        session.send(Message.assistant("not mine to send"))


async def test_state_and_messages_are_exclusive() -> None:
    agent = Agent(model=ScriptedModel([]))
    state = SessionState(session_id="s", agent_name="agent")
    with pytest.raises(ConfigError):
        Session(agent, state=state, messages=[Message.user("x")])


async def test_loading_an_unknown_session_is_a_clear_error() -> None:
    with pytest.raises(StoreError, match="no stored session 'nope'"):
        await Session.load(Agent(model=ScriptedModel([])), InMemorySessionStore(), "nope")


async def test_thinking_is_kept_with_its_signature() -> None:
    model = ScriptedModel(
        [ScriptedResponse(thinking="let me think", thinking_signature="sig-123", text="answer")]
    )
    session = Session(Agent(model=model))
    events = await send(session, "q")
    done = next(e for e in events if isinstance(e, ThinkingDone))
    assert done.text == "let me think" and done.signature == "sig-123"
    parts = session.messages[-1].parts
    assert parts[0] == ThinkingPart(text="let me think", signature="sig-123")
    assert session.messages[-1].text == "answer"


async def test_before_model_call_hook_can_replace_the_request() -> None:
    seen: list[int] = []

    def trim(request: ModelRequest) -> ModelRequest:
        seen.append(len(request.messages))
        return ModelRequest(system=request.system, messages=request.messages[-1:])

    model = ScriptedModel(["one", "two"])
    session = Session(Agent(model=model, hooks=Hooks(before_model_call=trim)))
    await send(session, "first")
    await send(session, "second")
    assert seen == [1, 3]
    assert [m.text for m in model.requests[1].messages] == ["second"]
    assert model.requests[1].tools == ()


async def test_usage_and_cost_survive_a_store_round_trip() -> None:
    store = InMemorySessionStore()
    model = ScriptedModel(["hello"])
    session = Session(Agent(model=model), session_store=store)
    await send(session, "hi")
    loaded = await Session.load(Agent(model=ScriptedModel(["again"])), store, session.session_id)
    assert loaded.usage == session.usage and loaded.usage.requests == 1
    assert loaded.messages == session.messages
    await send(loaded, "more")
    assert loaded.usage.requests == 2


async def test_each_turn_reports_its_own_usage_and_the_session_sums_them() -> None:
    @tool(read_only=True)
    async def look() -> str:
        """Look."""
        return "seen"

    call = ScriptedResponse(tool_calls=[ScriptedCall("look", {})])
    session = Session(Agent(model=ScriptedModel([call, "first", "second"]), tools=[look]))
    first = next(e for e in await send(session, "hi") if isinstance(e, TurnComplete))
    assert first.usage.requests == 2 and first.usage == session.usage
    # (the first turn's usage is the session's so far: one object for both)
    assert first.usage is session.usage
    second = next(e for e in await send(session, "again") if isinstance(e, TurnComplete))
    assert second.usage.requests == 1 and second.usage is not session.usage
    assert first.usage + second.usage == session.usage
    assert first.usage.requests == 2  # the first turn's figures did not move
    assert session.state.last_terminal is second


async def test_a_session_keeps_its_figures_in_its_state_and_what_runs_learned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import types

    import mainspring.cost

    looked_up: list[str] = []

    def no_price(model: str, usage: object) -> None:
        looked_up.append(model)

    lookups = types.SimpleNamespace(genai_price=no_price, price_data_version=lambda: "test")
    monkeypatch.setattr(mainspring.cost, "_prices", lookups)
    prices = {"priced": ModelPrice(input=1.0, output=2.0)}
    unpriced = Session(Agent(model=ScriptedModel(["a", "b"], name="mystery")))
    priced = Session(Agent(model=ScriptedModel(["a", "b"], name="priced"), prices=prices))
    for session in (unpriced, priced):
        stream = session.send("hi")
        async for event in stream:
            if isinstance(event, UsageEvent):  # (one call: the run's total)
                assert session.cost_usd == event.total_cost_usd
                assert session.usage == event.usage
        assert session.usage == session.state.usage and session.usage.requests == 1
        assert session.cost_usd == session.state.cost_usd
    assert priced.cost_usd > 0 and unpriced.cost_usd == 0
    assert looked_up == ["mystery"]
    await send(unpriced, "again")  # what the first run learned: no second look-up
    await send(priced, "again")
    assert looked_up == ["mystery"]
    assert unpriced.usage.requests == priced.usage.requests == 2
    assert priced._unpriced == frozenset() and unpriced._unpriced == {"mystery"}


async def test_checkpoint_ttl_slides_and_expires() -> None:
    now = [0.0]
    store = InMemoryCheckpointStore(ttl=10, clock=lambda: now[0])
    await store.append("s", TextDelta(text="a"))
    now[0] = 9.0
    await store.append("s", TextDelta(text="b"))  # refreshes the TTL
    now[0] = 18.0
    assert len(await store.load("s")) == 2
    now[0] = 30.0
    assert await store.load("s") == []


@settings(max_examples=60)
@given(
    st.lists(st.tuples(st.sampled_from("abcd"), st.floats(min_value=0, max_value=8)), max_size=30)
)
def test_many_streams_expire_each_on_its_own_last_append(
    appends: list[tuple[str, float]],
) -> None:
    now = [0.0]
    store = InMemoryCheckpointStore(ttl=10, clock=lambda: now[0])
    last: dict[str, float] = {}
    count: dict[str, int] = {}

    async def check() -> None:
        for stream, step in appends:
            now[0] += step
            if stream in last and now[0] - last[stream] > 10:
                count[stream] = 0  # expired: the append starts a new log
            await store.append(stream, TextDelta(text=stream))
            last[stream], count[stream] = now[0], count.get(stream, 0) + 1
            for other in "abcd":
                live = other in last and now[0] - last[other] <= 10
                assert len(await store.load(other)) == (count[other] if live else 0)

    anyio.run(check)


def test_session_state_is_a_read_only_view() -> None:
    session = Session(Agent(model=ScriptedModel(["hi"])), messages=[Message.user("earlier")])
    view = session.state
    with pytest.raises(AttributeError, match="read-only"):
        view.turn_index = 5  # type: ignore[misc]  # a write to a read-only view on purpose
    assert view.messages[0].text == "earlier"
    with pytest.raises(TypeError):
        view.writes["x"] = None  # type: ignore[index]  # a write to a read-only view on purpose
    snapshot = view.snapshot()
    snapshot.messages.append(Message.user("not in the session"))
    assert len(session.messages) == 1 and len(snapshot.messages) == 2


async def test_the_persisted_transcript_is_the_compilers_one_list() -> None:
    """One transcript: what a store saves is what the model is shown (white-box)."""
    store = InMemorySessionStore()
    agent = Agent(model=ScriptedModel(["first answer", "second answer"]))
    session = Session(agent, session_store=store, messages=[Message.user("earlier")])
    await collect(session.send("hello"))
    loaded = await Session.load(agent, store, session.session_id)
    await collect(loaded.send("again"))
    for s in (session, loaded):
        compiled = s._context.transcript.messages
        assert s._state.messages is s._context.transcript.backing
        assert list(s.messages) == list(compiled)
    assert [m.text for m in loaded.messages][-2:] == ["again", "second answer"]


def test_default_ids_are_uuid4_text() -> None:
    import uuid

    from mainspring import Agent, ScriptedModel, Session

    agent = Agent(model=ScriptedModel(["ok"]), name="ids")
    seen = set()
    for _ in range(200):
        session = Session(agent)
        for text in (session.session_id, session.owner):
            parsed = uuid.UUID(text)
            assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
            assert str(parsed) == text
            seen.add(text)
    assert len(seen) == 400
    assert Session(agent, owner="worker-1").owner == "worker-1"
