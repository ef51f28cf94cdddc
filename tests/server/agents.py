"""Agents for the server tests: a model that waits at a gate, a counting write."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import anyio

from mainspring.agent import Agent
from mainspring.messages import Message
from mainspring.models.base import ToolSpec
from mainspring.permissions import PermissionRules
from mainspring.testing import ScriptedCall, ScriptedModel, ScriptedResponse
from mainspring.tools import tool


class Gate:
    """A threading gate the model waits at (the server runs on its own thread)."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.opened = threading.Event()

    async def wait(self) -> None:
        self.reached.set()
        while not self.opened.is_set():  # noqa: ASYNC110 - a thread sets it, not a task
            await anyio.sleep(0.01)


def gated_agent(gate: Gate, *, words: int = 40) -> Agent:
    """An agent that streams ``words`` words, waiting at ``gate`` half way."""

    async def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
        await gate.wait()
        return ScriptedResponse(text=" ".join(f"w{i}" for i in range(words)))

    return Agent(name="gated", model=ScriptedModel(script, chunk_size=3))


def paying_agent(ledger: list[float]) -> Agent:
    """An agent whose one write, ``pay``, needs approval and appends to ``ledger``."""

    @tool(permission="confirm", modifiable_fields=("amount",))
    def pay(to: str, amount: float) -> str:
        """Pay someone."""
        ledger.append(amount)
        return f"paid {to} {amount}"

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
        last = messages[-1]
        if last.role == "user":
            return ScriptedResponse(tool_calls=[ScriptedCall("pay", {"to": "bo", "amount": 5.0})])
        return ScriptedResponse(text="done")

    return Agent(
        name="payer", model=ScriptedModel(script), tools=[pay], permissions=PermissionRules()
    )
