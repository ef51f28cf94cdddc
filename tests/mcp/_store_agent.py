"""The agent two ``mcp serve --http --store …`` processes serve in ``test_serve_store``.

``delete_account`` needs approval; ``pay`` is auto-approved under $100 within a
$500 session auto-spend cap. Both append what they did to
``$MAINSPRING_TEST_EFFECTS`` themselves: the file, not mainspring, says what ran.
"""

from __future__ import annotations

import os

from mainspring import Agent, PermissionRules, ScriptedModel, UsdTiers, tool, usd

CAP = 500.0


def _effect(line: str) -> None:
    with open(os.environ["MAINSPRING_TEST_EFFECTS"], "a", encoding="utf-8") as out:
        out.write(line + "\n")


@tool(permission="confirm")
def delete_account(account: str) -> str:
    """Close an account for good."""
    _effect(f"deleted {account}")
    return f"deleted {account}"


@tool(permission=usd(lambda args: float(str(args["amount_usd"]))))
def pay(to: str, amount_usd: float) -> str:
    """Pay someone."""
    _effect(f"paid {to} {amount_usd:.0f}")
    return f"paid ${amount_usd:.0f} to {to}"


agent = Agent(
    model=ScriptedModel([]),
    name="bank",
    tools=[delete_account, pay],
    permissions=PermissionRules(usd_tiers=UsdTiers(auto_below_usd=100, session_auto_cap_usd=CAP)),
)
