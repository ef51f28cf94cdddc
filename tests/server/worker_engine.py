"""The engine two worker processes serve at ``/v1/engine`` in ``test_engine_workers``.

Its tools write what they do to ``$MAINSPRING_TEST_EFFECTS`` themselves (one
line per run, appended), so the test judges "at most once" by the effect,
not by what mainspring reports.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from mainspring import Agent, ScriptedCall, ScriptedModel, ScriptedResponse, tool
from mainspring.engine import Engine, ManagementPolicy
from mainspring.messages import Message
from mainspring.models.base import ToolSpec


def _effect(line: str) -> None:
    with open(os.environ["MAINSPRING_TEST_EFFECTS"], "a", encoding="utf-8") as out:
        out.write(line + "\n")


@tool
def transfer(to: str, cents: int) -> str:
    """Move money (a write that needs no approval)."""
    _effect(f"transfer {to} {cents}")
    return f"sent {cents} to {to}"


@tool(permission="confirm")
def close_account(account: str) -> str:
    """Close an account (needs the caller's decision)."""
    _effect(f"close {account}")
    return f"closed {account}"


@tool(permission="confirm")
def wire(to: str, cents: int) -> str:
    """Wire money (the clerk subagent's write; needs the caller's decision)."""
    _effect(f"wire {to} {cents}")
    return f"wired {cents} to {to}"


def _clerk(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
    """Wires what it is asked to; after the decision, reports it with every task it was given."""
    last = messages[-1]
    tasks = [m.text for m in messages if m.role == "user"]
    if last.role == "tool":
        return ScriptedResponse(text=f"{last.tool_results_parts[0].content}; tasks {tasks}")
    to, cents = last.text.split()
    return ScriptedResponse(tool_calls=[ScriptedCall("wire", {"to": to, "cents": int(cents)})])


def _desk(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
    """Gives the user's task to the clerk under the alias ``main``; then says what it heard."""
    last = messages[-1]
    if last.role == "tool":
        return ScriptedResponse(text=f"desk: {last.tool_results_parts[0].content}")
    return ScriptedResponse(
        tool_calls=[ScriptedCall("clerk", {"task": last.text, "alias": "main"})]
    )


def engine() -> Engine:
    """A fresh engine per worker (each process builds its own)."""
    clerk = Agent(model=ScriptedModel(_clerk, name="clerk"), name="clerk", tools=[wire])
    desk = Agent(model=ScriptedModel(_desk, name="desk"), name="desk")
    return (
        Engine("bank", policy=ManagementPolicy(visibility="protected"))
        .add_tool(transfer, export=True)
        .add_tool(close_account, export=True)
        .add_agent(clerk, description="Wires money.")
        .add_agent(desk, export=True, default=True, uses=["clerk"])
    )
