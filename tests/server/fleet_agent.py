"""The agent the fleet property test serves: a plan of reads, writes and client tools.

A user message ``plan [[kind, ref, amount], …]`` makes the model call one tool
per step, in order: ``look`` (a read), ``spend`` (a USD write: auto-approved
under $50 while the session's auto spend stays under $100, else asked),
``sign`` (a confirm-tier write) and ``wallet`` (a client-executed tool). Any
other message gets a plain answer. :func:`engine` serves the same tools
to other engines (signed requests) at ``/v1/engine``.

Every tool appends one line to ``$MAINSPRING_TEST_EFFECTS`` itself (one
``write`` on an ``O_APPEND`` descriptor, so lines from several processes
never interleave): the effect log the test judges by, written by the tool,
not by mainspring.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from mainspring import (
    Agent,
    PermissionRules,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    UsdTiers,
    client_tool,
    tool,
    usd,
)
from mainspring.engine import Engine, ManagementPolicy
from mainspring.messages import Message
from mainspring.models.base import ToolSpec

AUTO_BELOW_USD = 50.0
SESSION_CAP_USD = 100.0


def record(line: str) -> None:
    """Append ``line`` to the effect log in one write."""
    fd = os.open(os.environ["MAINSPRING_TEST_EFFECTS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


@tool(read_only=True)
def look(ref: str) -> str:
    """Read something."""
    record(f"read {ref}")
    return f"looked at {ref}"


@tool(permission=usd(lambda args: float(str(args["amount_usd"]))))
def spend(ref: str, amount_usd: float) -> str:
    """Spend money."""
    record(f"spend {ref} {amount_usd:g}")
    return f"spent ${amount_usd:g} for {ref}"


@tool(permission="confirm")
def sign(ref: str) -> str:
    """Sign a contract."""
    record(f"sign {ref}")
    return f"signed {ref}"


wallet = client_tool(
    "wallet",
    description="Ask the user's wallet to sign.",
    input_schema={"type": "object", "properties": {"ref": {"type": "string"}}},
)


def _call(step: list[object]) -> ScriptedCall:
    kind, ref = str(step[0]), str(step[1])
    if kind == "spend":
        return ScriptedCall("spend", {"ref": ref, "amount_usd": float(str(step[2]))})
    return ScriptedCall(kind, {"ref": ref})


def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
    """One call per step of the last plan; then a closing answer."""
    start = max(i for i, m in enumerate(messages) if m.role == "user")
    text = messages[start].text
    if not text.startswith("plan "):
        return ScriptedResponse(text="Nothing else to do.")
    steps: list[list[object]] = json.loads(text.removeprefix("plan "))
    done = sum(len(m.tool_results_parts) for m in messages[start + 1 :])
    if done < len(steps):
        return ScriptedResponse(text=f"Step {done + 1}.", tool_calls=[_call(steps[done])])
    return ScriptedResponse(text="The plan is done.")


def engine() -> Engine:
    """The fleet's engine, served at ``/v1/engine``: the same tools, called directly."""
    tiers = UsdTiers(auto_below_usd=AUTO_BELOW_USD, session_auto_cap_usd=SESSION_CAP_USD)
    served = Engine(
        "fleet",
        policy=ManagementPolicy(visibility="protected"),
        permissions=PermissionRules(usd_tiers=tiers),
    )
    for member in (look, spend, sign):
        served.add_tool(member, export=True)
    return served


def agent() -> Agent:
    """The fleet's agent."""
    tiers = UsdTiers(auto_below_usd=AUTO_BELOW_USD, session_auto_cap_usd=SESSION_CAP_USD)
    return Agent(
        name="fleet",
        model=ScriptedModel(script, chunk_size=8),
        tools=[look, spend, sign, wallet],
        permissions=PermissionRules(usd_tiers=tiers),
    )
