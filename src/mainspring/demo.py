"""The offline demo agent: a small wallet assistant driven by ScriptedModel.

Two reads (``get_balance``, ``lookup_contact``) run in parallel; one write
(``send_payment``) is USD-tiered, so a payment above the conservative $10
limit pauses for approval. The scripted model reacts to what actually
happened (approved, edited, rejected), so every path of the loop shows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from mainspring._run.results import EDITED_NOTE_START
from mainspring.agent import Agent
from mainspring.cost import ModelPrice
from mainspring.messages import Message
from mainspring.models.base import Model, ToolSpec
from mainspring.models.scripted import ScriptedCall, ScriptedModel, ScriptedResponse
from mainspring.permissions import PermissionRules, UsdTiers
from mainspring.tools.context import ToolContext
from mainspring.tools.define import Tool, tool
from mainspring.tools.policy import Flag, usd

__all__ = ["DEMO_MESSAGE", "demo_agent"]

DEMO_MESSAGE = "Please pay Alice $120 for the concert tickets."

_CONTACTS = {"alice": "acct_alice_01", "bob": "acct_bob_02"}


def _tools(balance: list[float]) -> list[Tool]:
    @tool(read_only=True)
    async def get_balance(ctx: ToolContext) -> dict[str, float]:
        """The user's current balance in USD."""
        ctx.progress("reading the ledger", 50)
        return {"balance_usd": balance[0]}

    @tool(read_only=True)
    async def lookup_contact(name: str) -> dict[str, str]:
        """Find a contact's account id by name.

        Args:
            name: The contact's first name.
        """
        account = _CONTACTS.get(name.lower())
        if account is None:
            raise LookupError(f"no contact named {name!r}")
        return {"name": name.title(), "account": account}

    def enough_money(args: Mapping[str, object]) -> str | None:
        amount = float(str(args["amount_usd"]))
        if amount > balance[0]:
            return f"insufficient balance: ${balance[0]:,.2f} available, ${amount:,.2f} requested"
        return None

    @tool(
        permission=usd(lambda args: float(str(args["amount_usd"]))),
        flags={Flag.MUTATING, Flag.IRREVERSIBLE, Flag.REQUIRES_BALANCE},
        modifiable_fields=("amount_usd", "memo"),
        preflight=enough_money,
        timeout=10.0,
    )
    async def send_payment(to_account: str, amount_usd: float, memo: str = "") -> dict[str, object]:
        """Send money from the user's balance to a contact's account.

        Args:
            to_account: The recipient's account id.
            amount_usd: How much to send, in USD.
            memo: A note for the recipient.
        """
        balance[0] -= amount_usd
        return {"status": "sent", "amount_usd": amount_usd, "new_balance_usd": balance[0]}

    return [get_balance, lookup_contact, send_payment]


def _script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
    last = messages[-1]
    if last.role == "user":
        match = re.search(r"pay (\w+) \$?(\d+(?:\.\d+)?)", last.text, re.IGNORECASE)
        if match is None:
            return ScriptedResponse(
                text="I can check your balance or pay a contact, e.g. 'pay Bob $5'."
            )
        name, amount = match.group(1), float(match.group(2))
        return ScriptedResponse(
            thinking=f"The user wants to pay {name} ${amount:g}. Check balance and contact.",
            text=f"Let me check your balance and look up {name}.",
            tool_calls=[
                ScriptedCall("get_balance", {}),
                ScriptedCall("lookup_contact", {"name": name}),
            ],
        )
    results = {p.name: p for p in last.tool_results_parts}
    if "lookup_contact" in results:
        contact = results["lookup_contact"]
        if contact.is_error:
            return ScriptedResponse(text=f"I couldn't find that contact: {contact.content}")
        account = json.loads(_own_output(contact.content))["account"]
        request = next(m for m in reversed(messages) if m.role == "user")
        match = re.search(r"\$?(\d+(?:\.\d+)?)", request.text)
        amount = float(match.group(1)) if match else 0.0
        memo = "concert tickets" if "concert" in request.text else ""
        return ScriptedResponse(
            text=f" Sending ${amount:,.2f}.",
            tool_calls=[
                ScriptedCall(
                    "send_payment", {"to_account": account, "amount_usd": amount, "memo": memo}
                )
            ],
        )
    payment = results.get("send_payment")
    if payment is None or payment.is_error:
        reason = payment.content if payment else "no payment was made"
        return ScriptedResponse(text=f"The payment did not go through: {reason}")
    sent = json.loads(_own_output(payment.content))
    return ScriptedResponse(
        text=(
            f"Done: ${sent['amount_usd']:,.2f} is on its way. "
            f"Your new balance is ${sent['new_balance_usd']:,.2f}."
        )
    )


def demo_agent(*, balance_usd: float = 250.0, model: Model | None = None) -> Agent:
    """The demo agent, with its own in-memory balance (offline unless ``model`` is given)."""
    return Agent(
        name="wallet",
        instructions=(
            "You are a careful wallet assistant. Look up the balance and the contact "
            "before paying; never move money without approval."
        ),
        model=model or ScriptedModel(_script, name="scripted-demo", chunk_size=6),
        tools=_tools([balance_usd]),
        permissions=PermissionRules(usd_tiers=UsdTiers.conservative()),
        # Illustrative prices, so the demo shows cost tracking at work.
        prices={"scripted-demo": ModelPrice(input=3.0, output=15.0, cache_read=0.3)},
    )


def _own_output(content: str) -> str:
    """A result's text without the note an edited approval puts before it (see the engine)."""
    if content.startswith(EDITED_NOTE_START):
        return content.split("]\n\n", 1)[-1]
    return content
