"""Repeated identical tool calls are shown to the model once."""

from __future__ import annotations

import pytest
from pydantic import JsonValue

from mainspring import Agent, ScriptedCall, ScriptedModel, ScriptedResponse, Session, tool
from mainspring.messages import Message, ToolCallPart, ToolResultPart
from mainspring.microcompact import Microcompactor
from tests.helpers import send

pytestmark = pytest.mark.anyio

REPORT = "quarterly report: revenue up 12%, costs flat, headcount 42, churn 3%"


@tool(read_only=True)
async def report(quarter: str) -> str:
    """Fetch a report."""
    return REPORT if quarter == "q3" else f"no data for {quarter}"


async def test_a_repeated_call_with_the_same_result_is_compacted_in_later_requests() -> None:
    call = ScriptedCall("report", {"quarter": "q3"})
    model = ScriptedModel(
        [
            ScriptedResponse(tool_calls=[call]),
            "first look",
            ScriptedResponse(tool_calls=[call]),
            "second look",
        ]
    )
    session = Session(Agent(model=model, tools=[report]))
    await send(session, "show q3")
    await send(session, "show it again")
    last_request = model.requests[-1]
    results = [p for m in last_request.messages for p in m.tool_results_parts]
    assert results[0].content == REPORT  # the first occurrence stays (a stable prefix)
    assert results[1].content == "[same result as turn 1]"
    # The transcript itself keeps the real content.
    stored = [p for m in session.messages for p in m.tool_results_parts]
    assert [p.content for p in stored] == [REPORT, REPORT]


async def test_disabled_microcompact_sends_everything() -> None:
    call = ScriptedCall("report", {"quarter": "q3"})
    model = ScriptedModel(
        [ScriptedResponse(tool_calls=[call]), ScriptedResponse(tool_calls=[call]), "done"]
    )
    session = Session(Agent(model=model, tools=[report], microcompact=False))
    await send(session, "go")
    results = [p for m in model.requests[-1].messages for p in m.tool_results_parts]
    assert [p.content for p in results] == [REPORT, REPORT]


def _call(call_id: str, args: dict[str, JsonValue]) -> Message:
    return Message(
        role="assistant", parts=(ToolCallPart(id=call_id, name="report", arguments=args),)
    )


def _result(call_id: str, content: str, *, is_error: bool = False) -> Message:
    return Message.tool_results(
        [ToolResultPart(tool_use_id=call_id, name="report", content=content, is_error=is_error)]
    )


def test_different_args_results_errors_and_short_results_are_left_alone() -> None:
    view = Microcompactor()
    view.append(_call("a", {"quarter": "q3"}), 1)
    view.append(_result("a", REPORT), 1)
    view.append(_call("b", {"quarter": "q4"}), 2)
    view.append(_result("b", REPORT), 2)  # other arguments
    view.append(_call("c", {"quarter": "q3"}), 3)
    view.append(_result("c", REPORT + " (revised)"), 3)  # other content
    view.append(_call("d", {"quarter": "q3"}), 4)
    view.append(_result("d", REPORT, is_error=True), 4)  # errors are never compacted
    view.append(_call("e", {"x": "1"}), 5)
    view.append(_result("e", "ok"), 5)
    view.append(_call("f", {"x": "1"}), 6)
    view.append(_result("f", "ok"), 6)  # shorter than the note
    contents = [p.content for m in view.view for p in m.tool_results_parts]
    assert contents == [REPORT, REPORT, REPORT + " (revised)", REPORT, "ok", "ok"]


def test_argument_order_does_not_matter() -> None:
    view = Microcompactor()
    view.append(
        Message(
            role="assistant",
            parts=(ToolCallPart(id="a", name="t", arguments={"x": 1, "y": 2}),),
        ),
        1,
    )
    view.append(_result("a", REPORT), 1)
    view.append(
        Message(
            role="assistant",
            parts=(ToolCallPart(id="b", name="t", arguments={"y": 2, "x": 1}),),
        ),
        2,
    )
    view.append(_result("b", REPORT), 2)
    assert view.view[-1].tool_results_parts[0].content == "[same result as turn 1]"
