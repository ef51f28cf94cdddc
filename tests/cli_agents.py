"""Agents for the command-line error tests (``tests.cli_agents:…``).

``crashing``'s model raises a bug of its own (an internal error, not a model
error); ``paying`` asks for approval before it pays; ``not_an_agent`` is a
number; ``make_crashing`` is a factory that fails.
"""

from __future__ import annotations

from collections.abc import Sequence

from mainspring import Agent, Message, ScriptedModel, ScriptedResponse, tool
from mainspring.models.base import ToolSpec
from mainspring.testing import ScriptedCall


def _bug(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
    raise ZeroDivisionError("a bug inside the model")


crashing = Agent(name="crashing", model=ScriptedModel(_bug))


@tool(permission="confirm")
def pay(amount_usd: int) -> str:
    """Pay someone.

    Args:
        amount_usd: How much.
    """
    return f"paid ${amount_usd}"


def _pay_then_answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
    if messages[-1].role == "user" and not any(m.role == "tool" for m in messages):
        return ScriptedResponse(tool_calls=[ScriptedCall("pay", {"amount_usd": 5})])
    return ScriptedResponse(text="Done: the payment went through.")


paying = Agent(name="paying", model=ScriptedModel(_pay_then_answer), tools=[pay])

not_an_agent = 42


def make_crashing() -> Agent:
    raise RuntimeError("the factory fails")
