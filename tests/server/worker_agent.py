"""The agent the multi-worker tests serve from worker processes.

``pay`` (confirm tier) appends a line to ``$MAINSPRING_TEST_LEDGER``; after a
payment the model's closing words wait until ``$MAINSPRING_TEST_GATE``
exists, so a test can kill the worker mid-stream, after the write.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import anyio

from mainspring.agent import Agent
from mainspring.messages import Message
from mainspring.models.base import ToolSpec
from mainspring.permissions import PermissionRules
from mainspring.testing import ScriptedCall, ScriptedModel, ScriptedResponse
from mainspring.tools import tool


@tool(permission="confirm")
def pay(to: str, amount: float) -> str:
    """Pay someone."""
    with Path(os.environ["MAINSPRING_TEST_LEDGER"]).open("a") as ledger:
        ledger.write(f"{to} {amount}\n")
    return f"paid {to} {amount}"


async def _script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
    last = messages[-1]
    if last.role == "user" and "pay" in last.text:
        return ScriptedResponse(tool_calls=[ScriptedCall("pay", {"to": "bo", "amount": 5.0})])
    if last.role == "user":
        return ScriptedResponse(text="hello again")
    gate = Path(os.environ["MAINSPRING_TEST_GATE"])
    while not await anyio.Path(gate).exists():  # noqa: ASYNC110 - another process makes it
        await anyio.sleep(0.02)
    return ScriptedResponse(text="paid, and here is a long confirmation " * 3)


def agent() -> Agent:
    """The worker agent."""
    return Agent(
        name="worker-payer",
        model=ScriptedModel(_script, chunk_size=4),
        tools=[pay],
        permissions=PermissionRules(),
    )
