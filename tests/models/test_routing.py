"""The cost router: heuristics first, a judge when unsure, never failing a turn."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from mainspring import Agent, Message, ScriptedModel, ScriptedResponse, Session
from mainspring.errors import ServerError
from mainspring.models.base import ModelRequest, ToolSpec
from mainspring.models.routing import RoutedModel, heuristic_route
from tests.helpers import collect

pytestmark = pytest.mark.anyio


def request(text: str, *, tools: int = 0) -> ModelRequest:
    specs = tuple(ToolSpec(name=f"t{i}", description="d", input_schema={}) for i in range(tools))
    return ModelRequest(system=(), messages=(Message.user(text),), tools=specs)


@pytest.mark.parametrize(
    ("text", "route"),
    [
        ("thanks!", "cheap"),
        ("What's the capital of France?", "cheap"),
        ("Please analyze the trade-offs of these two designs", "expensive"),
        ("fix this:\n```py\nx = 1\n```", "expensive"),
        ("x" * 3000, "expensive"),
    ],
)
def test_heuristics_decide_the_clear_cases(text: str, route: str) -> None:
    assert heuristic_route(request(text))[0] == route


def test_heuristics_are_unsure_about_the_middle() -> None:
    assert heuristic_route(request("Book me a table for two tomorrow at eight", tools=3))[0] is None


def judge(answer: str | Exception) -> ScriptedModel:
    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
        if isinstance(answer, Exception):
            return ScriptedResponse(
                error=ServerError("down", provider="x", status=500, retryable=True)
            )
        if not tools:  # the judge request carries no tools
            return ScriptedResponse(text=answer)
        return ScriptedResponse(text="cheap answer")

    return ScriptedModel(script, name="cheap")


@pytest.mark.parametrize(
    ("answer", "expected", "reason"),
    [
        ("SIMPLE", "cheap answer", "judge: simple"),
        ("COMPLEX", "expensive answer", "judge: complex"),
        ("maybe?", "expensive answer", "judge unclear"),
        (RuntimeError("judge down"), "expensive answer", "judge failed"),
    ],
)
async def test_the_judge_decides_unsure_turns_and_never_fails_them(
    answer: str | Exception, expected: str, reason: str
) -> None:
    expensive = ScriptedModel(lambda m, t: "expensive answer", name="expensive")
    router = RoutedModel(judge(answer), expensive)
    from mainspring import tool

    @tool(read_only=True)
    async def noop() -> str:
        """Nothing."""
        return ""

    session = Session(Agent(model=router, tools=[noop, noop.renamed("noop2"), noop.renamed("n3")]))
    events = await collect(session.send("Book me a table for two tomorrow at eight"))
    assert events[-1].type == "turn_complete"
    assert session.messages[-1].text == expected
    assert router.stats.reasons[reason] == 1 and router.stats.judge_calls == 1


async def test_a_turn_keeps_its_route_across_steps() -> None:
    from mainspring import ScriptedCall, tool

    @tool(read_only=True)
    async def look() -> str:
        """Look."""
        return "seen"

    cheap = ScriptedModel(
        [ScriptedResponse(tool_calls=[ScriptedCall("look")]), "done cheaply"], name="cheap"
    )
    router = RoutedModel(cheap, ScriptedModel([], name="expensive"), judge=False)
    session = Session(Agent(model=router, tools=[look]))
    await collect(session.send("hi"))
    assert session.messages[-1].text == "done cheaply"
    assert router.stats.routes == {"cheap": 1}
