"""A server's elicitation during a session's MCP call pauses the turn; sampling is charged."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import JsonValue

from mainspring import Agent, Event, Session
from mainspring.cost import ModelPrice
from mainspring.decisions import Approve, ClientResult, Reject
from mainspring.errors import ApprovalError, ConfigError, FieldNotModifiable
from mainspring.events import PendingAction, TextDelta, ToolResult
from mainspring.mcp import (
    ElicitAnswer,
    McpClientManager,
    McpElicitation,
    McpSampling,
    McpServerConfig,
)
from mainspring.mcp._paused_calls import check_answer
from mainspring.models.base import ModelEvent, ModelRequest, ModelStop, ModelUsage
from mainspring.testing import ScriptedCall, ScriptedModel, ScriptedResponse
from mainspring.usage import Usage
from tests.helpers import resume, send

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


RICH = str(Path(__file__).with_name("_rich_server.py"))


def rich() -> McpServerConfig:
    return McpServerConfig(  # ctx.elicit mid-request: a 2025-era server
        name="rich",
        command=sys.executable,
        args=(RICH,),
        tool_permissions={"book": "auto"},
        protocol="2025",
    )


def booking_session(manager: McpClientManager, rooms: list[str]) -> Session:
    steps: list[ScriptedResponse | str] = [
        ScriptedResponse(tool_calls=[ScriptedCall("mcp__rich__book", {"room": r})]) for r in rooms
    ]
    model = ScriptedModel([*steps, "done"])
    return Session(Agent(model=model, tools=manager.tools()))


def pending(events: Sequence[Event]) -> PendingAction:
    found = [e for e in events if isinstance(e, PendingAction)]
    assert len(found) == 1, events
    return found[0]


def waiting(session: Session) -> str | None:
    """The attempt id the session waits on (read afresh: resume changes it)."""
    return session.pending.attempt_id if session.pending is not None else None


def results(events: Sequence[Event]) -> list[ToolResult]:
    return [e for e in events if isinstance(e, ToolResult)]


async def test_approve_answers_the_live_request_and_the_tool_runs_once() -> None:
    async with McpClientManager([rich()], pause_on_elicit=True) as manager:
        session = booking_session(manager, ["r1", "r2"])
        asked = pending(await send(session, "book"))
        assert asked.name == "mcp__rich__book"
        assert "Who stays in r1?" in asked.reason
        assert set(asked.modifiable_fields) == {"name", "age"}
        assert asked.nested is not None
        form = asked.nested.details["mcp_elicitation"]
        assert isinstance(form, dict) and form["server"] == "rich"
        assert waiting(session) == asked.attempt_id
        events = await resume(session, asked.attempt_id, Approve(edits={"name": "Ada", "age": 36}))
        [done] = results(events)
        assert done.content == "booked r1 for Ada (36); bookings: ['r1:Ada']"
        second = pending(events)  # the next call asks again; the first ran exactly once
        events = await resume(session, second.attempt_id, Approve(edits={"name": "Bo"}))
        [done] = results(events)
        assert done.content == "booked r2 for Bo (0); bookings: ['r1:Ada', 'r2:Bo']"
        assert waiting(session) is None and events[-1].type == "turn_complete"


async def test_reject_declines_the_elicitation() -> None:
    async with McpClientManager([rich()], pause_on_elicit=True) as manager:
        session = booking_session(manager, ["r1"])
        asked = pending(await send(session, "book"))
        events = await resume(session, asked.attempt_id, Reject("no"))
        assert [r.content for r in results(events)] == ["not booked: decline"]
        assert waiting(session) is None


async def test_bad_answers_are_clear_errors_and_the_action_stays_decidable() -> None:
    async with McpClientManager([rich()], pause_on_elicit=True) as manager:
        session = booking_session(manager, ["r1"])
        asked = pending(await send(session, "book"))
        with pytest.raises(FieldNotModifiable, match=r"not modifiable"):
            await resume(session, asked.attempt_id, Approve(edits={"room": "r9"}))
        assert waiting(session) == asked.attempt_id
        events = await resume(session, asked.attempt_id, Approve(edits={"age": "old"}))
        again = pending(events)
        assert "does not fit the server's form" in again.reason
        assert results(events) == [], "nothing was sent to the server"
        with pytest.raises(ApprovalError, match="approve or reject"):
            await resume(session, again.attempt_id, ClientResult(content="x"))
        assert waiting(session) == again.attempt_id
        events = await resume(session, again.attempt_id, Approve(edits={"name": "Cy", "age": 3}))
        assert [r.content for r in results(events)] == ["booked r1 for Cy (3); bookings: ['r1:Cy']"]


async def test_closing_the_manager_ends_a_paused_call_and_deciding_then_is_an_error() -> None:
    manager = McpClientManager([rich()], pause_on_elicit=True)
    with anyio.fail_after(60):  # a hang guard, not a timing assertion
        async with manager:
            session = booking_session(manager, ["r1"])
            asked = pending(await send(session, "book"))
    events = await resume(session, asked.attempt_id, Approve(edits={"name": "Ada"}))
    [result] = results(events)
    assert result.is_error and "was not sent again" in result.content
    assert waiting(session) is None


async def test_no_answer_in_time_cancels_the_elicitation_and_the_server_says_so() -> None:
    async with McpClientManager([rich()], pause_on_elicit=True, elicit_timeout=0.05) as manager:
        session = booking_session(manager, ["r1"])
        asked = pending(await send(session, "book"))
        [flight] = manager._paused.values()  # white box: wait for the bounded wait to end
        with anyio.fail_after(30):  # a hang guard, not a timing assertion
            await flight.done.wait()
        events = await resume(session, asked.attempt_id, Approve(edits={"name": "late"}))
        assert [r.content for r in results(events)] == ["not booked: cancel"]
        assert waiting(session) is None


async def test_a_direct_call_without_a_session_is_declined_not_paused() -> None:
    async with McpClientManager([rich()], pause_on_elicit=True) as manager:
        out = await manager.call_tool("rich", "book", {"room": "r1"})
    assert out.content == "not booked: decline"


def test_elicit_timeout_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="elicit_timeout"):
        McpClientManager([rich()], pause_on_elicit=True, elicit_timeout=0)


class PricedModel:
    """A model reporting usage, so sampling has a cost."""

    name = "priced-sampler"

    async def _events(self) -> AsyncIterator[ModelEvent]:
        yield TextDelta(text="short.")
        yield ModelUsage(usage=Usage(input_tokens=1000, output_tokens=1000))
        yield ModelStop(model=self.name)

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return self._events()


async def test_sampling_is_charged_to_the_session_budget() -> None:
    price = ModelPrice(input=1.0, output=2.0)  # 0.001 + 0.002 USD per request
    sampling = McpSampling(model=PricedModel(), price=price)
    async with McpClientManager([rich()], sampling=sampling) as manager:
        model = ScriptedModel(
            [
                ScriptedResponse(tool_calls=[ScriptedCall("mcp__rich__summarize", {"text": "t"})]),
                "ok",
            ]
        )
        session = Session(Agent(model=model, tools=manager.tools()))
        events = await send(session, "go")
    assert [r.content for r in results(events)] == ["priced-sampler: short."]
    assert sampling.cost_usd == pytest.approx(0.003)
    assert session.cost_usd == pytest.approx(0.003)


async def test_sampling_declined_by_config() -> None:
    async with McpClientManager([rich()]) as manager:
        out = await manager.call_tool("rich", "summarize", {"text": "t"})
    assert out.content.startswith("sampling refused")


def form(schema: dict[str, JsonValue]) -> McpElicitation:
    return McpElicitation(server="s", message="m", requested_schema=schema)


def test_a_hostile_pattern_in_the_form_is_not_run() -> None:
    schema: dict[str, JsonValue] = {
        "type": "object",
        "properties": {"name": {"type": "string", "pattern": "^(a+)+$"}},
        "required": ["name"],
    }
    answer = check_answer(form(schema), Approve(edits={"name": "a" * 5000 + "!"}))
    assert isinstance(answer, ElicitAnswer) and answer.action == "accept"
    missing = check_answer(form(schema), Approve(edits={}))
    assert isinstance(missing, str) and "'name' is a required property" in missing
    nested = check_answer(form(schema), Approve(edits={"name": {"deep": "x"}}))
    assert isinstance(nested, str) and "strings, numbers" in nested


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(
    schema=st.dictionaries(st.text(max_size=12), json_values, max_size=4),
    edits=st.dictionaries(st.text(max_size=5), json_values, max_size=3),
)
def test_any_form_and_any_answer_give_an_answer_or_a_reason(
    schema: dict[str, JsonValue], edits: dict[str, JsonValue]
) -> None:
    answer = check_answer(form(schema), Approve(edits=edits))
    assert isinstance(answer, str) or (answer.action == "accept" and answer.content == edits)
    assert check_answer(form(schema), Reject()) == ElicitAnswer(action="decline")
