"""A small wallet agent for the eval tests: a read, a confirm-tier write, a guard."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mainspring import (
    Agent,
    Guard,
    ModelPrice,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    tool,
)
from mainspring.models import Model
from mainspring.tools import Tool, ToolInput

PRICED = "scripted-wallet"
"""The wallet's model name, priced (a case's script is named after it)."""


@dataclass
class Wallet:
    """What the tools did: every payment that actually ran."""

    paid: list[tuple[str, float]] = field(default_factory=list)

    def agent(self, *, model: Model | None = None) -> Agent:
        """The wallet agent; its own model only says hello (cases script theirs)."""
        wallet = self

        @tool(read_only=True)
        async def balance() -> str:
            """The balance."""
            return "$100.00"

        @tool(permission="confirm")
        async def pay(to: str, amount_usd: float) -> str:
            """Send money to someone."""
            wallet.paid.append((to, amount_usd))
            return f"sent ${amount_usd:.2f} to {to}"

        async def no_mallory(t: Tool, args: ToolInput) -> tuple[Literal["block"], str] | None:
            if t.name == "pay" and args.get("to") == "mallory":
                return "block", "mallory is on the deny list"
            return None

        guard = Guard(name="no_mallory", tier="safety", before=no_mallory)
        return Agent(
            model=model or ScriptedModel(["Hello."], name=PRICED),
            tools=[balance, pay],
            guards=[guard],
            prices={PRICED: ModelPrice(input=3.0, output=15.0)},
        )


def pay_steps(
    to: str = "alice", amount: float = 20.0, final: str = "Paid."
) -> list[str | ScriptedResponse]:
    """The model reads the balance, pays, then answers."""
    return [
        ScriptedResponse(
            tool_calls=[
                ScriptedCall("balance"),
                ScriptedCall("pay", {"to": to, "amount_usd": amount}),
            ]
        ),
        final,
    ]


def wallet_agent() -> Agent:
    """A fresh wallet agent (``tests.evals.agents:wallet_agent`` for the CLI tests)."""
    return Wallet().agent()
