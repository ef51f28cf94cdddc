"""The agent of the crash tests at single points (``test_crash_points``).

Each turn's first message picks what it does: ``spend`` makes a $5
auto-approved payment (``transfer``, under a $100 session cap), ``client``
calls a client-executed tool (``sign``), ``pay`` a confirm-tier payment.
The model's final text repeats the tool result it got, so the parent sees
what the model was told. Effects go to the effects file, as in
:mod:`tests.crash.scenario`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mainspring import Agent, ScriptedCall, ScriptedModel, ScriptedResponse, tool, usd
from mainspring.decisions import Approve, ClientResult, Decision, Reject
from mainspring.messages import Message
from mainspring.models.base import ToolSpec
from mainspring.permissions import PermissionRules, UsdTiers
from mainspring.tools import client_tool
from tests.crash.scenario import maybe_crash, record_effect

CALLS = {
    "spend": ScriptedCall("transfer", {"amount_usd": 5}),
    "client": ScriptedCall("sign", {"document": "lease"}),
    "pay": ScriptedCall("pay", {"amount": 50}),
}


def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
    last = messages[-1]
    if last.role == "user":
        call = CALLS.get(last.text)
        if call is None:
            return ScriptedResponse(text="Nothing else to do today.")
        return ScriptedResponse(text="On it.", tool_calls=[call])
    result = last.tool_results_parts[0]
    return ScriptedResponse(text=f"the tool said: {result.content}")


def make_points_agent(effects: Path) -> Agent:
    @tool(permission=usd(lambda args: float(str(args["amount_usd"]))))
    async def transfer(amount_usd: float) -> str:
        """Move money (auto-approved under the cap)."""
        record_effect(effects, "write:transfer")
        return f"moved ${amount_usd:g}"

    @tool(permission="confirm")
    async def pay(amount: float) -> str:
        """Pay a third party (asks first)."""
        maybe_crash("pay-before-effect")
        record_effect(effects, "write:pay")
        return f"paid ${amount:g}"

    sign = client_tool(
        "sign",
        description="Sign a document in the user's browser.",
        input_schema={"type": "object", "properties": {"document": {"type": "string"}}},
    )
    tiers = UsdTiers(auto_below_usd=100, session_auto_cap_usd=100)
    return Agent(
        name="points",
        model=ScriptedModel(script, name="points-model"),
        tools=[transfer, pay, sign],
        permissions=PermissionRules(usd_tiers=tiers),
    )


def decision_of(text: str) -> Decision:
    """``approve``, ``reject`` or ``client:<content>`` (the child's decision argument)."""
    if text == "reject":
        return Reject("no")
    if text.startswith("client:"):
        return ClientResult(content=text.removeprefix("client:"))
    return Approve()
