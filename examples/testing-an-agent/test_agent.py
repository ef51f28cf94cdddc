"""How to test an agent: a scripted model plays the model's part; assert what the user sees.

    python -m pytest examples/testing-an-agent/test_agent.py

No network, no keys, no sleeps: every test is deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from support_agent import Shop, build_agent

from mainspring import (
    Approve,
    FieldNotModifiable,
    Message,
    Reject,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    ToolResult,
    ToolStart,
)
from mainspring.models import ToolSpec
from mainspring.testing import collect, pending_of

pytestmark = pytest.mark.anyio  # run the async tests (anyio's pytest plugin, on asyncio)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def call(name: str, **arguments: str | float) -> ScriptedResponse:
    """A model step that calls one tool."""
    return ScriptedResponse(tool_calls=[ScriptedCall(name, dict(arguments))])


async def test_a_lookup_is_a_read_that_runs_without_asking() -> None:
    model = ScriptedModel([call("lookup_order", order_id="A1"), "Order A1 cost $40.00."])
    session = Session(build_agent(model, Shop()))

    events = await collect(session.send("How much was order A1?"))  # also checks the grammar

    assert [e.name for e in events if isinstance(e, ToolStart)] == ["lookup_order"]
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.content == "order A1: $40.00"
    assert not result.is_error
    assert events[-1].type == "turn_complete"
    assert session.messages[-1].text == "Order A1 cost $40.00."


async def test_the_model_sees_the_instructions_the_tools_and_the_result() -> None:
    model = ScriptedModel([call("lookup_order", order_id="A1"), "ok"])
    await collect(Session(build_agent(model, Shop())).send("order A1?"))

    first, second = model.requests  # the scripted model records every request
    assert "Look an order up before refunding it." in str(first.system)
    assert {t.name for t in first.tools} == {"lookup_order", "refund"}
    assert second.messages[-1].tool_results_parts[0].content == "order A1: $40.00"


async def test_a_refund_waits_for_approval_and_runs_once_at_the_approved_amount() -> None:
    shop = Shop()
    model = ScriptedModel([call("refund", order_id="A1", amount_usd=40), "Refunded $25."])
    session = Session(build_agent(model, shop))

    pending = pending_of(await collect(session.send("refund A1")))
    assert (pending.name, pending.input) == ("refund", {"order_id": "A1", "amount_usd": 40.0})
    assert pending.modifiable_fields == ("amount_usd",)
    assert shop.refunds == [], "nothing runs before the decision"

    await collect(session.resume(pending.attempt_id, Approve(edits={"amount_usd": 25})))

    assert shop.refunds == [("A1", 25.0)]


async def test_a_rejected_refund_never_runs_and_the_model_is_told_why() -> None:
    shop = Shop()
    model = ScriptedModel([call("refund", order_id="A1", amount_usd=40), "Sorry."])
    session = Session(build_agent(model, shop))
    pending = pending_of(await collect(session.send("refund A1")))

    await collect(session.resume(pending.attempt_id, Reject(reason="past the 30-day window")))

    assert shop.refunds == []
    told = model.requests[-1].messages[-1].tool_results_parts[0]
    assert told.is_error
    assert "past the 30-day window" in told.content


async def test_an_approver_may_not_change_the_order() -> None:
    shop = Shop()
    model = ScriptedModel([call("refund", order_id="A1", amount_usd=40), "ok"])
    session = Session(build_agent(model, shop))
    pending = pending_of(await collect(session.send("refund A1")))

    with pytest.raises(FieldNotModifiable):
        session.resume(pending.attempt_id, Approve(edits={"order_id": "B2"}))
    assert shop.refunds == []
    assert session.pending is not None, "the refund still waits for a valid decision"


async def test_a_failing_tool_is_an_error_result_and_the_turn_goes_on() -> None:
    model = ScriptedModel([call("lookup_order", order_id="Z9"), "I cannot find Z9."])
    session = Session(build_agent(model, Shop()))

    events = await collect(session.send("order Z9?"))

    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.is_error
    assert "no order Z9" in result.content
    assert session.messages[-1].text == "I cannot find Z9."


async def test_a_model_as_a_function_answers_from_what_it_was_sent() -> None:
    def model_turn(
        messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> ScriptedResponse | str:
        if messages[-1].role == "tool":  # answer from the tool's result
            return f"Found it: {messages[-1].tool_results_parts[0].content}"
        return call("lookup_order", order_id="B2")

    result = await Session(build_agent(ScriptedModel(model_turn), Shop())).run("order B2?")

    assert result.text == "Found it: order B2: $15.50"
    assert result.pending is None
