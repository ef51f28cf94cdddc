"""The flagship example: a finance agent over a local SQLite ledger.

``mainspring demo finance`` runs it. Offline it is driven by a scripted model
that reacts to what actually happened (a quote, a pause, a refusal by a guard,
the refreshed balances); with a model string (or ``--model auto`` when a
provider key is set) a real model drives the same tools. What it shows:

- 12 parallel reads and 7 writes (deposit, withdraw, transfer, borrow, repay,
  swap with a quote, and a client-executed ``send_to_contact``);
- USD tiers (``conservative`` / ``balanced`` / ``aggressive``) with the
  session's auto-spend cap, and the finance guards in three tiers;
- a swap's pending action with its quote, route, projected values and quote
  age, regenerated before it is confirmed, its approval bound to the input hash;
- post-write refresh (fresh balances reach the model before it answers);
- the daily snapshot as the context block, memory recall of the user's
  preferences, skills as markdown playbooks (also MCP prompts), thinking with
  an evaluation summary, adaptive effort.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio.to_thread

from mainspring import (
    Agent,
    ClientResult,
    ContextOptions,
    Message,
    ModelPrice,
    PendingAction,
    PermissionRules,
    UsdTiers,
)
from mainspring.messages import TextPart, ToolResultPart
from mainspring.models import (
    AdaptiveEffort,
    Model,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    ToolSpec,
)
from mainspring.skills import SkillCatalog
from mainspring.stores import InMemoryMemoryStore, MemoryStore
from mainspring_finance.guards import finance_guards
from mainspring_finance.ledger import Ledger, LedgerError
from mainspring_finance.tools import QuoteBook, finance_tools, snapshot_text

__all__ = [
    "FINANCE_MESSAGE",
    "PREFERENCES",
    "SKILLS_DIR",
    "FinanceDemo",
    "execute_client_transfer",
    "finance_agent",
    "finance_demo",
]

FINANCE_MESSAGE = "Swap $300 of my checking into ETH."
SKILLS_DIR = Path(__file__).parent / "skills"
"""The demo's playbooks (``SKILL.md`` folders)."""
PREFERENCES = (
    "The user keeps an emergency fund of at least $1,000 in checking.",
    "The user is saving for a house and prefers low-risk moves.",
    "The user wants the loan's health factor kept above 2.",
)
"""What the demo's memory store holds about the user."""

INSTRUCTIONS = """You are a careful personal-finance assistant over the user's ledger.
Read before you write: check balances, the loan and prices first. Never move money
the user did not ask to move. Swaps always use a fresh quote from get_swap_quote.
After a write, answer from the refreshed balances that come back with its result.
Mention guard hints to the user. Keep answers short and give exact amounts."""

_AMOUNT = r"\$?(\d[\d,]*(?:\.\d+)?)"


def _amount(text: str) -> float | None:
    found = re.search(_AMOUNT, text)
    return float(found.group(1).replace(",", "")) if found else None


def _request(messages: Sequence[Message]) -> str:
    """The user's own words of the latest user message (not the recalled memory)."""
    last = next((m for m in reversed(messages) if m.role == "user"), None)
    if last is None:
        return ""
    first = next((p for p in last.parts if isinstance(p, TextPart)), None)
    return first.text if first is not None else ""


def _eval(*items: str) -> str:
    body = "\n".join(f"- {item}" for item in items)
    head = 'Checking the request against the ledger.\n<eval_summary mode="brief">'
    return f"{head}\n{body}\n</eval_summary>"


def _first_move(text: str) -> ScriptedResponse:
    """The first step for a request: the reads or the write it needs."""
    low = text.lower()
    amount = _amount(text)
    asset = re.search(r"\b(ETH|BTC|SOL)\b", text, re.IGNORECASE)
    if "swap" in low or "buy" in low:
        if amount is None or asset is None:
            return ScriptedResponse(text="How much, and into which asset (ETH, BTC, SOL)?")
        return ScriptedResponse(
            thinking=_eval("intent: swap — a quote first", "tier: swap always asks"),
            text=f"Getting a quote for ${amount:,.2f} of {asset.group(1).upper()}.",
            tool_calls=[
                ScriptedCall(
                    "get_swap_quote", {"asset": asset.group(1).upper(), "amount_usd": amount}
                ),
                ScriptedCall("get_balances", {}),
            ],
        )
    if re.search(r"\b(send|pay)\b", low):
        who = re.search(r"\bto (\w+)|\bpay (\w+)", low)
        if amount is None or who is None:
            return ScriptedResponse(text="Whom should I send money to, and how much?")
        return ScriptedResponse(
            text="Looking up your contacts.", tool_calls=[ScriptedCall("list_contacts", {})]
        )
    for verb, args in (
        ("deposit", {"account": "savings" if "saving" in low else "checking"}),
        ("withdraw", {"account": "savings" if "saving" in low else "checking"}),
        ("borrow", {"account": "checking"}),
        ("repay", {"account": "checking"}),
    ):
        if verb in low and amount is not None:
            return ScriptedResponse(
                thinking=_eval(f"intent: {verb} ${amount:,.2f}", "guards: checked by the engine"),
                text=f"{verb.title()}ing ${amount:,.2f}.",
                tool_calls=[ScriptedCall(verb, {"amount_usd": amount, **args})],
            )
    if "transfer" in low or "move" in low:
        if amount is None:
            return ScriptedResponse(text="How much should I move?")
        to_checking = "to checking" in low
        source, target = ("savings", "checking") if to_checking else ("checking", "savings")
        return ScriptedResponse(
            text=f"Moving ${amount:,.2f} from {source} to {target}.",
            tool_calls=[
                ScriptedCall("transfer", {"amount_usd": amount, "source": source, "target": target})
            ],
        )
    if "playbook" in low or "skill" in low:
        return ScriptedResponse(tool_calls=[ScriptedCall("skills_list", {})])
    return ScriptedResponse(
        text="Here is where you stand.",
        tool_calls=[
            ScriptedCall("get_balances", {}),
            ScriptedCall("get_loan", {}),
            ScriptedCall("get_net_worth", {}),
        ],
    )


def _refreshed(content: str) -> str:
    """The refreshed balances in a write's result, as a sentence."""
    found = re.search(r"\[refreshed get_balances\]\n(\{[^\n]*\})", content)
    if found is None:
        return ""
    balances = json.loads(found.group(1))
    listed = ", ".join(f"{k} ${v:,.2f}" for k, v in balances.items())
    return f" Your balances now: {listed}."


def _hints(content: str) -> str:
    hints = re.findall(r"\[hint\] ([^\n]+)", content)
    return "".join(f" Note: {h}" for h in hints)


_WRITES = ("swap", "deposit", "withdraw", "transfer", "borrow", "repay", "send_to_contact")


def _after_results(messages: Sequence[Message]) -> ScriptedResponse:
    results = {p.name: p for p in messages[-1].tool_results_parts}
    text = _request(messages)
    for name in _WRITES:
        if name in results:
            part = results[name]
            if part.is_error:
                return ScriptedResponse(text=f"That did not go through: {part.content}")
            first = part.content.split("\n", 1)[0]
            return ScriptedResponse(
                text=f"Done ({name}: {first}).{_refreshed(part.content)}{_hints(part.content)}"
            )
    if "get_swap_quote" in results:
        quote_part = results["get_swap_quote"]
        if quote_part.is_error:
            return ScriptedResponse(text=f"I could not get a quote: {quote_part.content}")
        quote = json.loads(quote_part.content)
        return ScriptedResponse(
            text=f" The quote: {quote['quantity']:g} {quote['asset']} at "
            f"${quote['price_usd']:,.2f}. Asking you to confirm.",
            tool_calls=[
                ScriptedCall(
                    "swap",
                    {
                        "asset": quote["asset"],
                        "amount_usd": quote["amount_usd"],
                        "quote_id": quote["quote_id"],
                        "price_usd": quote["price_usd"],
                        "min_quantity": quote["min_quantity"],
                    },
                )
            ],
        )
    if "list_contacts" in results:
        contacts = json.loads(results["list_contacts"].content)
        who = re.search(r"\bto (\w+)|\bpay (\w+)", text.lower())
        name = next(g for g in who.groups() if g) if who else ""
        if name not in contacts:
            return ScriptedResponse(text=f"{name!r} is not one of your contacts.")
        return ScriptedResponse(
            text=f" Please sign the transfer to {name.title()} in your wallet.",
            tool_calls=[
                ScriptedCall("send_to_contact", {"to": name, "amount_usd": _amount(text) or 0.0})
            ],
        )
    if "skills_list" in results:
        listed = json.loads(results["skills_list"].content)
        names = ", ".join(s["name"] for s in listed.get("skills", []))
        return ScriptedResponse(text=f"My playbooks: {names}.")
    return ScriptedResponse(text=_overview(results, _recalled(messages)))


def _recalled(messages: Sequence[Message]) -> list[str]:
    """Memory the engine recalled for this turn (it rides on the latest user message)."""
    last = next((m for m in reversed(messages) if m.role == "user"), None)
    text = last.text if last is not None else ""
    return [line[2:].strip() for line in text.splitlines() if line.startswith("- The user")]


def _overview(results: dict[str, ToolResultPart], memories: list[str]) -> str:
    facts: list[str] = []
    for name, part in results.items():
        if part.is_error:
            facts.append(f"{name} failed: {part.content}")
            continue
        data = json.loads(part.content)
        if name == "get_balances":
            facts.append(", ".join(f"{k} ${v:,.2f}" for k, v in data.items()))
        elif name == "get_loan":
            facts.append(
                f"loan ${data['debt_usd']:,.2f}, health factor {data['health_factor']:.2f}"
            )
        elif name == "get_net_worth":
            facts.append(f"net worth ${data['net_worth_usd']:,.2f}")
    remembered = f" I remember: {' '.join(memories)}" if memories else ""
    return " " + "; ".join(facts) + "." + remembered


def _script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
    if messages[-1].role == "user":
        return _first_move(_request(messages))
    return _after_results(messages)


def execute_client_transfer(ledger: Ledger, pending: PendingAction) -> ClientResult:
    """What the user's wallet does for a ``send_to_contact`` (the client-executed transfer).

    Blocking (a ledger write): async callers use ``anyio.to_thread.run_sync``.
    """
    args = pending.input
    to = str(args.get("to", ""))
    account = str(args.get("account", "checking"))
    try:
        balance = ledger.send(account, float(str(args.get("amount_usd"))), to)
    except (LedgerError, ValueError) as exc:
        return ClientResult(
            f"the wallet refused: {exc}", is_error=True, input_hash=pending.input_hash
        )
    body = {"status": "signed", "to": to, "tx": f"0x{pending.attempt_id.replace('-', '')[:16]}"}
    body["balance_usd"] = balance  # type: ignore[assignment]  # a JSON object of mixed values
    return ClientResult(json.dumps(body), input_hash=pending.input_hash)


@dataclass(kw_only=True)
class FinanceDemo:
    """The demo's parts: the ledger, the agent and what it was built from."""

    ledger: Ledger
    agent: Agent
    memory: MemoryStore
    skills: SkillCatalog
    quotes: QuoteBook = field(default_factory=QuoteBook)


async def finance_demo(
    path: str | Path = ":memory:",
    *,
    model: Model | None = None,
    tiers: str = "balanced",
    memory: MemoryStore | None = None,
) -> FinanceDemo:
    """The finance agent over the ledger at ``path`` (seeded when empty).

    Offline unless ``model`` is given; ``tiers`` names a USD preset
    (``conservative``, ``balanced``, ``aggressive``).

    Raises:
        ConfigError: ``tiers`` is not a preset.
    """
    usd_tiers = UsdTiers.preset(tiers)
    ledger = await anyio.to_thread.run_sync(lambda: Ledger(path).seed())
    store = memory if memory is not None else InMemoryMemoryStore()
    if memory is None:
        for text in PREFERENCES:
            await store.remember(text, scope="finance")
    skills = await anyio.to_thread.run_sync(lambda: SkillCatalog([SKILLS_DIR]).load())
    resident = await anyio.to_thread.run_sync(skills.resident_block)
    quotes = QuoteBook()

    async def snapshot() -> str:
        return await anyio.to_thread.run_sync(snapshot_text, ledger)

    inner = model or ScriptedModel(_script, name="scripted-finance", chunk_size=8)
    agent = Agent(
        name="finance",
        instructions=INSTRUCTIONS,
        model=AdaptiveEffort(inner),
        tools=[*finance_tools(ledger, quotes), *skills.tools()],
        permissions=PermissionRules(usd_tiers=usd_tiers),
        guards=finance_guards(ledger, quoted_at=quotes),
        context_block=snapshot,
        skill_recipe=resident,
        memory=store,
        context=ContextOptions(memory_scope="finance", memory_k=2),
        prices={"scripted-finance": ModelPrice(input=3.0, output=15.0, cache_read=0.3)},
    )
    return FinanceDemo(ledger=ledger, agent=agent, memory=store, skills=skills, quotes=quotes)


async def finance_agent() -> Agent:
    """A fresh finance agent over a new in-memory ledger, offline.

    Each call seeds its own ledger, so every eval case starts from the same
    balances (``mainspring eval run examples/finance/evals/finance.yaml``).
    """
    return (await finance_demo()).agent
