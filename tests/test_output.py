"""Typed output (``Agent(output_type=…)``) through the public API, on the scripted model.

Both paths run: the native one (the schema goes in the request's settings; the
answer's text is the JSON) and the final-answer tool (``native_output=False``:
the model calls ``final_result``). Invalid answers go back to the model with
the reason, within ``output_retries``; validators may reject; a paused turn
produces the output in the run that finishes it, across a process-like reload
from SQLite.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, JsonValue
from typing_extensions import TypedDict

from mainspring import (
    Agent,
    Approve,
    FinalOutput,
    OutputContext,
    OutputInvalid,
    OutputPartial,
    OutputRejected,
    OutputRetry,
    RunFailed,
    Session,
    TurnComplete,
    tool,
)
from mainspring.errors import ConfigError
from mainspring.events import ErrorEvent, ToolResult
from mainspring.messages import Message, ToolResultPart
from mainspring.models.base import ToolSpec
from mainspring.output import FINAL_RESULT_TOOL, OutputSpec
from mainspring.stores import SQLiteSessionStore
from mainspring.testing import (
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    check_events,
    collect,
)

pytestmark = pytest.mark.anyio


class City(BaseModel):
    city: str
    population: int = Field(ge=0)


class Country(BaseModel):
    kind: Literal["country"] = "country"
    country: str
    language: str


class Point(TypedDict):
    x: int
    y: int


@dataclasses.dataclass
class Reading:
    sensor: str
    value: float


MEXICO: dict[str, JsonValue] = {"city": "Mexico City", "population": 9_200_000}
MEXICO_CITY = City(city="Mexico City", population=9_200_000)


def final(args: dict[str, JsonValue] | str) -> ScriptedResponse:
    """A step that answers through the final-answer tool."""
    return ScriptedResponse(tool_calls=[ScriptedCall(FINAL_RESULT_TOOL, args)])


def said(message: Message) -> str:
    """What a message tells the model: its text, or its tool results' content."""
    return message.text + "".join(
        part.content for part in message.parts if isinstance(part, ToolResultPart)
    )


def answer(value: dict[str, JsonValue], *, native: bool) -> ScriptedResponse | str:
    """The answer ``value``: JSON text (native) or the final-answer tool's arguments."""
    return json.dumps(value) if native else final(value)


# ------------------------------------------------------------------ both paths


@pytest.mark.parametrize("native", [True, False], ids=["native", "tool"])
async def test_a_valid_answer_is_the_runs_validated_output(native: bool) -> None:
    model = ScriptedModel([answer(MEXICO, native=native)], native_output=native)
    session = Session(Agent(model=model, output_type=City))
    result = await session.run("Largest city in Mexico?")
    assert result.output == City(city="Mexico City", population=9_200_000)
    assert result.output_as(City).population == 9_200_000
    finals = [e for e in result.events if isinstance(e, FinalOutput)]
    assert [f.output for f in finals] == [MEXICO]
    assert result.events[-2] == finals[0]  # just before its turn_complete
    check_events(result.events)
    request = model.requests[0]
    if native:
        assert request.settings.output_schema == City.model_json_schema()
        assert FINAL_RESULT_TOOL not in [t.name for t in request.tools]
    else:
        assert request.settings.output_schema is None
        (spec,) = [t for t in request.tools if t.name == FINAL_RESULT_TOOL]
        assert spec.input_schema == City.model_json_schema()


@pytest.mark.parametrize("native", [True, False], ids=["native", "tool"])
async def test_an_invalid_answer_goes_back_with_the_reason_then_a_valid_one_is_taken(
    native: bool,
) -> None:
    bad: dict[str, JsonValue] = {"city": "Mexico City", "population": "lots"}
    model = ScriptedModel(
        [answer(bad, native=native), answer(MEXICO, native=native)], native_output=native
    )
    session = Session(Agent(model=model, output_type=City))
    result = await session.run("Largest city in Mexico?")
    assert result.output == MEXICO_CITY
    (retry,) = [e for e in result.events if isinstance(e, OutputRetry)]
    assert retry.retries == 1 and "population" in retry.reason
    # The model's second request carried the validation error.
    told = model.requests[1].messages[-1]
    assert "population" in said(told) and "valid integer" in said(told)
    if native:
        assert told.role == "user"
    else:
        assert told.role == "tool" and told.parts[0].is_error  # type: ignore[union-attr]  # a result
    assert session.state.turn is None  # the turn ended


@pytest.mark.parametrize("native", [True, False], ids=["native", "tool"])
async def test_retries_exhausted_end_the_run_with_a_typed_error(native: bool) -> None:
    bad = "{not json" if native else final("{not json")
    model = ScriptedModel([bad, bad, bad], native_output=native)
    session = Session(Agent(model=model, output_type=City, output_retries=2))
    events = await collect(session.send("Largest city?"))
    last = events[-1]
    assert isinstance(last, ErrorEvent) and last.code == "output_invalid"
    assert [e.retries for e in events if isinstance(e, OutputRetry)] == [1, 2]
    assert not any(isinstance(e, FinalOutput) for e in events)
    assert len(model.requests) == 3  # the first answer and two retries, no more
    # The transcript stays valid: a next turn runs on it.
    model_two = ScriptedModel([answer(MEXICO, native=native)], native_output=native)
    again = Session(
        Agent(model=model_two, output_type=City), messages=session.messages, session_id="again"
    )
    assert (await again.run("Try again")).output == MEXICO_CITY

    model_three = ScriptedModel([bad, bad], native_output=native)
    with pytest.raises(OutputInvalid) as info:
        await Session(Agent(model=model_three, output_type=City, output_retries=1)).run("q")
    assert info.value.code == "output_invalid"
    assert "not json" in info.value.reason or "JSON" in info.value.reason


async def test_no_retries_allowed_fails_at_the_first_invalid_answer() -> None:
    model = ScriptedModel(['{"city": 3}'])
    with pytest.raises(OutputInvalid, match="city"):
        await Session(Agent(model=model, output_type=City, output_retries=0)).run("q")
    assert len(model.requests) == 1


async def test_on_the_tool_path_a_text_answer_is_sent_back_to_call_the_tool() -> None:
    model = ScriptedModel(["It is Mexico City.", final(MEXICO)], native_output=False)
    result = await Session(Agent(model=model, output_type=City)).run("q")
    assert result.output == MEXICO_CITY
    assert FINAL_RESULT_TOOL in said(model.requests[1].messages[-1])


async def test_a_final_answer_beside_other_calls_is_refused_and_the_others_run() -> None:
    looked: list[str] = []

    @tool
    def lookup(country: str) -> str:
        """Look a country up."""
        looked.append(country)
        return "Mexico City, 9.2 million"

    model = ScriptedModel(
        [
            ScriptedResponse(
                tool_calls=[ScriptedCall("lookup", {"country": "MX"}), final(MEXICO).tool_calls[0]]
            ),
            final(MEXICO),
        ],
        native_output=False,
    )
    result = await Session(Agent(model=model, tools=[lookup], output_type=City)).run("q")
    assert looked == ["MX"]
    results = [e for e in result.events if isinstance(e, ToolResult)]
    assert results[0].name == FINAL_RESULT_TOOL and results[0].is_error
    assert "only call" in results[0].content
    assert result.output == MEXICO_CITY


# ------------------------------------------------------------------ types


@pytest.mark.parametrize("native", [True, False], ids=["native", "tool"])
async def test_a_union_is_wrapped_and_each_member_validates(native: bool) -> None:
    spec = OutputSpec(City | Country)
    assert spec.wrapped and spec.schema["type"] == "object"
    assert spec.schema["required"] == ["response"]
    country: dict[str, JsonValue] = {"kind": "country", "country": "Mexico", "language": "Spanish"}
    model = ScriptedModel(
        [answer({"response": country}, native=native), answer({"response": MEXICO}, native=native)],
        native_output=native,
    )
    session = Session(Agent(model=model, output_type=City | Country))
    first = await session.run("q")
    assert first.output == Country(country="Mexico", language="Spanish")
    second = await session.run("q2")
    assert second.output == MEXICO_CITY
    assert [e.output for e in second.events if isinstance(e, FinalOutput)] == [MEXICO]


async def test_a_typeddict_output() -> None:
    model = ScriptedModel([final({"x": 1, "y": "2"})], native_output=False)
    result = await Session(Agent(model=model, output_type=Point)).run("q")
    assert result.output == {"x": 1, "y": 2}
    point = result.output_as(Point)
    assert point["y"] == 2


async def test_a_dataclass_output_and_a_list_output() -> None:
    model = ScriptedModel(['{"sensor": "t1", "value": 21.5}'])
    result = await Session(Agent(model=model, output_type=Reading)).run("q")
    assert result.output_as(Reading) == Reading(sensor="t1", value=21.5)
    with pytest.raises(ConfigError, match="not a City"):
        result.output_as(City)

    listed = ScriptedModel(['{"response": [1, 2, 3]}'])
    assert (await Session(Agent(model=listed, output_type=list[int])).run("q")).output == [1, 2, 3]


async def test_str_output_is_the_final_answers_text() -> None:
    @tool
    def look() -> str:
        """Look."""
        return "seen"

    model = ScriptedModel(
        [ScriptedResponse(text="Let me look. ", tool_calls=[ScriptedCall("look")]), "Done."]
    )
    result = await Session(Agent(model=model, tools=[look])).run("q")
    assert result.output == "Done." and result.text == "Let me look. Done."
    assert not any(isinstance(e, FinalOutput | OutputPartial) for e in result.events)
    assert model.requests[0].settings.output_schema is None


def test_misconfigurations_are_refused_at_construction() -> None:
    model = ScriptedModel(["x"])
    with pytest.raises(ConfigError, match="not both"):
        from mainspring.models.base import ModelSettings

        Agent(model=model, output_type=City, model_settings=ModelSettings(output_schema={}))
    with pytest.raises(ConfigError, match="output_validators need"):
        Agent(model=model, output_validators=[lambda output, context: None])
    with pytest.raises(ConfigError, match="negative"):
        Agent(model=model, output_type=City, output_retries=-1)

    class Opaque:
        """Not a type pydantic can validate."""

    with pytest.raises(ConfigError, match="no JSON schema"):
        Agent(model=model, output_type=Opaque)

    @tool(name=FINAL_RESULT_TOOL)
    def clash() -> str:
        """Clash."""
        return ""

    with pytest.raises(ConfigError, match="may not be named"):
        Agent(model=ScriptedModel(["x"], native_output=False), tools=[clash], output_type=City)


# ------------------------------------------------------------------ validators


@pytest.mark.parametrize("native", [True, False], ids=["native", "tool"])
async def test_a_validator_rejects_and_the_model_tries_again(native: bool) -> None:
    seen: list[tuple[str, OutputContext]] = []

    async def big_enough(output: City, context: OutputContext) -> None:
        seen.append((output.city, context))
        if output.population < 1_000_000:
            raise OutputRejected("that is not the largest city; check the population")

    small: dict[str, JsonValue] = {"city": "Tijuana", "population": 1}
    model = ScriptedModel(
        [answer(small, native=native), answer(MEXICO, native=native)], native_output=native
    )
    agent = Agent(model=model, output_type=City, output_validators=[big_enough])
    session = Session(agent, session_id="s-1")
    result = await session.run("Largest city?")
    assert result.output == MEXICO_CITY
    assert [(city, ctx.session_id, ctx.turn_index, ctx.retries) for city, ctx in seen] == [
        ("Tijuana", "s-1", 1, 0),
        ("Mexico City", "s-1", 1, 1),
    ]
    assert "check the population" in said(model.requests[1].messages[-1])


async def test_a_validator_rejecting_every_time_ends_in_output_invalid() -> None:
    def never(output: City, context: OutputContext) -> None:
        raise OutputRejected("no")

    model = ScriptedModel([json.dumps(MEXICO)] * 3)
    agent = Agent(model=model, output_type=City, output_validators=[never], output_retries=1)
    with pytest.raises(OutputInvalid, match="rejected: no") as info:
        await Session(agent).run("q")
    assert len(model.requests) == 2
    assert isinstance(info.value.event, ErrorEvent)


async def test_a_validator_that_breaks_fails_the_run_as_an_internal_error() -> None:
    def broken(output: City, context: OutputContext) -> None:
        raise KeyError("bug")

    model = ScriptedModel([json.dumps(MEXICO)])
    agent = Agent(model=model, output_type=City, output_validators=[broken])
    with pytest.raises(RunFailed) as info:
        await Session(agent).run("q")
    assert info.value.code == "internal_error" and not isinstance(info.value, OutputInvalid)


# ------------------------------------------------------------------ streaming


@pytest.mark.parametrize("native", [True, False], ids=["native", "tool"])
async def test_partial_objects_stream_as_the_answer_grows(native: bool) -> None:
    model = ScriptedModel([answer(MEXICO, native=native)], native_output=native, chunk_size=5)
    events = await collect(Session(Agent(model=model, output_type=City)).send("q"))
    partials = [e.output for e in events if isinstance(e, OutputPartial)]
    assert len(partials) >= 3
    assert partials[-1] == MEXICO
    # An unfinished string shows as far as it went.
    assert any(isinstance(p, dict) and p.get("city") not in (None, "Mexico City") for p in partials)
    assert all(a != b for a, b in itertools.pairwise(partials))  # changes only


# ------------------------------------------------------------------ pause and resume


@tool(permission="confirm")
def book(city: str) -> str:
    """Book a trip (a write: it asks for approval)."""
    return f"booked {city}"


@pytest.mark.parametrize("native", [True, False], ids=["native", "tool"])
async def test_a_paused_turn_gives_its_output_in_the_run_that_finishes_it(
    tmp_path: Path, native: bool
) -> None:
    script = ScriptedModel(
        [ScriptedResponse(tool_calls=[ScriptedCall("book", {"city": "Mexico City"})])],
        native_output=native,
    )
    store = await SQLiteSessionStore.open(tmp_path / "s.db")
    try:
        first = Session(Agent(model=script, tools=[book], output_type=City), session_store=store)
        paused = await first.run("Book the largest city")
        assert paused.paused and paused.output is None
        assert not any(isinstance(e, FinalOutput) for e in paused.events)
        pending = paused.pending
        assert pending is not None
    finally:
        await store.aclose()

    # A new process: a new store object, a new agent, the session loaded from SQLite.
    store = await SQLiteSessionStore.open(tmp_path / "s.db")
    try:
        later = ScriptedModel(
            [
                answer({"city": "Mexico City", "population": -1}, native=native),
                answer(MEXICO, native=native),
            ],
            native_output=native,
        )
        agent = Agent(model=later, tools=[book], output_type=City, output_retries=1)
        again = await Session.load(agent, store, first.session_id)
        done = await again.run(attempt_id=pending.attempt_id, decision=Approve())
        assert done.output == MEXICO_CITY
        assert [e.retries for e in done.events if isinstance(e, OutputRetry)] == [1]
        assert isinstance(done.events[-1], TurnComplete)
        assert done.events[-1].stop_reason == "end_turn"
        stored = await store.load(first.session_id)
        assert stored is not None and stored.turn is None  # the finished turn is on record
    finally:
        await store.aclose()


async def test_the_retry_count_is_the_turns_and_survives_a_pause(tmp_path: Path) -> None:
    """A refused answer before the pause counts against the budget after it."""
    store = await SQLiteSessionStore.open(tmp_path / "s.db")
    try:
        model = ScriptedModel(
            [
                '{"city": 1}',  # refused (1 of 1)
                ScriptedResponse(tool_calls=[ScriptedCall("book", {"city": "Mexico City"})]),
                '{"city": 2}',  # refused again: past the budget
            ]
        )
        agent = Agent(model=model, tools=[book], output_type=City, output_retries=1)
        session = Session(agent, session_store=store)
        paused = await session.run("q")
        assert paused.pending is not None
        stored = await store.load(session.session_id)
        assert stored is not None and stored.turn is not None
        assert stored.turn.output_retries == 1
        loaded = await Session.load(agent, store, session.session_id)
        with pytest.raises(OutputInvalid):
            await loaded.run(attempt_id=paused.pending.attempt_id, decision=Approve())
    finally:
        await store.aclose()


# ------------------------------------------------------------------ property


class Order(BaseModel):
    sku: str
    quantity: int = Field(ge=1)
    gift: bool = False
    note: str | None = None


orders = st.builds(
    Order,
    sku=st.text(min_size=1, max_size=12),
    quantity=st.integers(min_value=1, max_value=10**9),
    gift=st.booleans(),
    note=st.none() | st.text(max_size=20),
)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=orders, native=st.booleans())
def test_any_valid_instance_round_trips_through_either_path(order: Order, native: bool) -> None:
    import anyio

    payload = order.model_dump(mode="json")
    model = ScriptedModel([answer(payload, native=native)], native_output=native, chunk_size=7)

    async def main() -> object:
        return (await Session(Agent(model=model, output_type=Order)).run("q")).output

    assert anyio.run(main) == order


async def test_a_steered_answer_gets_its_next_step_and_the_last_output_wins() -> None:
    session: Session | None = None
    tijuana: dict[str, JsonValue] = {"city": "Tijuana", "population": 1_900_000}

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        assert session is not None
        if len(messages) == 1:  # the first answer: a message arrives meanwhile
            session.steer("Actually: the largest in Baja California?")
            return json.dumps(MEXICO)
        return json.dumps(tijuana)

    session = Session(Agent(model=ScriptedModel(script), output_type=City), steering="next_step")
    result = await session.run("Largest city in Mexico?")
    assert result.output == City(city="Tijuana", population=1_900_000)
    assert [e.output for e in result.events if isinstance(e, FinalOutput)] == [tijuana]
