"""Built-in finance guards, in the three tiers: safety > financial > UX.

Each factory returns a :class:`~mainspring.Guard` over a
:class:`~mainspring_finance.ledger.Ledger`; checks read the ledger in a
worker thread. They look at calls by convention: the USD amount in
``amount_usd``, the account debited in ``account`` (or ``source``), and the
tool's flags (``Flag.REQUIRES_BALANCE``, ``Flag.AFFECTS_HEALTH``).

- safety: :func:`sufficient_funds` (block a debit over the balance),
  :func:`max_single_amount` (block a fat-finger amount), :func:`daily_outflow_limit`;
- financial: :func:`health_factor_floor` (block under the liquidation line,
  confirm under a comfort line), :func:`large_share_of_balance` (confirm),
  :func:`fresh_quote` (confirm a swap whose quote is too old: regenerate it);
- UX: :func:`emergency_fund_hint` (a hint when checking drops under a floor),
  :func:`low_health_after` (a hint after a write leaves the loan at risk).

:func:`finance_guards` is the demo's set.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Literal

import anyio.to_thread

from mainspring import Guard
from mainspring.tools import Flag, Tool, ToolInput, ToolOutput
from mainspring_finance.ledger import Ledger, LedgerError

__all__ = [
    "amount_of",
    "daily_outflow_limit",
    "debited_account",
    "emergency_fund_hint",
    "finance_guards",
    "fresh_quote",
    "health_factor_floor",
    "large_share_of_balance",
    "low_health_after",
    "max_single_amount",
    "projected_health",
    "sufficient_funds",
]

_Action = Literal["block", "confirm", "hint"]
_Verdict = tuple[_Action, str] | None
_Tier = Literal["safety", "financial", "ux"]


def amount_of(args: ToolInput) -> float | None:
    """The call's USD amount (``amount_usd``), if it has a readable one."""
    value = args.get("amount_usd")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    amount = float(value)
    return amount if math.isfinite(amount) else None


def debited_account(tool: Tool, args: ToolInput) -> str | None:
    """The account a call takes money from, if it takes any."""
    if Flag.REQUIRES_BALANCE not in tool.policy.flags:
        return None
    account = args.get("account", args.get("source", "checking"))
    return account if isinstance(account, str) else None


def projected_health(ledger: Ledger, tool: Tool, args: ToolInput) -> float | None:
    """The loan's health factor after this call (``None`` if it does not touch the loan)."""
    if Flag.AFFECTS_HEALTH not in tool.policy.flags:
        return None
    amount = amount_of(args) or 0.0
    if tool.name == "borrow":
        return ledger.health_factor(debt_change=amount)
    if tool.name == "repay":
        return ledger.health_factor(debt_change=-amount)
    return ledger.health_factor()


def _guard(
    name: str,
    tier: _Tier,
    check: Callable[[Tool, ToolInput], _Verdict],
) -> Guard:
    async def before(tool: Tool, args: ToolInput) -> _Verdict:
        try:
            return await anyio.to_thread.run_sync(check, tool, args)
        except LedgerError:
            return None  # the tool's preflight names what is wrong with the input

    return Guard(name=name, tier=tier, before=before)


# ------------------------------------------------------------------ safety


def sufficient_funds(ledger: Ledger) -> Guard:
    """Safety: block a debit larger than the account's balance."""

    def check(tool: Tool, args: ToolInput) -> _Verdict:
        account, amount = debited_account(tool, args), amount_of(args)
        if account is None or amount is None:
            return None
        balance = ledger.balance(account)
        if amount > balance:
            return "block", (
                f"insufficient funds: {account} has ${balance:,.2f}, the call needs ${amount:,.2f}"
            )
        return None

    return _guard("sufficient_funds", "safety", check)


def max_single_amount(limit_usd: float) -> Guard:
    """Safety: block any single amount over ``limit_usd`` (a fat finger, a runaway loop)."""

    async def before(tool: Tool, args: ToolInput) -> _Verdict:
        amount = amount_of(args)
        if amount is not None and amount > limit_usd:
            return "block", f"${amount:,.2f} is over the single-action limit ${limit_usd:,.2f}"
        return None

    return Guard(name="max_single_amount", tier="safety", before=before)


def daily_outflow_limit(ledger: Ledger, limit_usd: float) -> Guard:
    """Safety: block money going out once today's outflow would pass ``limit_usd``."""

    def check(tool: Tool, args: ToolInput) -> _Verdict:
        amount = amount_of(args)
        if amount is None or debited_account(tool, args) is None:
            return None
        spent = ledger.spent_today()
        if spent + amount > limit_usd:
            return "block", (
                f"today's outflow would reach ${spent + amount:,.2f}, over the daily "
                f"limit ${limit_usd:,.2f}"
            )
        return None

    return _guard("daily_outflow_limit", "safety", check)


# --------------------------------------------------------------- financial


def health_factor_floor(
    ledger: Ledger, *, block_below: float = 1.1, confirm_below: float = 1.5
) -> Guard:
    """Financial: block a call taking the loan under ``block_below``, confirm under the other."""

    def check(tool: Tool, args: ToolInput) -> _Verdict:
        health = projected_health(ledger, tool, args)
        if health is None or tool.name == "repay":
            return None
        if health < block_below:
            return "block", (
                f"the health factor would fall to {health:.2f}, under {block_below:.2f} "
                "(liquidation risk)"
            )
        if health < confirm_below:
            return "confirm", f"the health factor would fall to {health:.2f}"
        return None

    return _guard("health_factor_floor", "financial", check)


def large_share_of_balance(ledger: Ledger, *, share: float = 0.5) -> Guard:
    """Financial: confirm a debit of more than ``share`` of the account's balance."""

    def check(tool: Tool, args: ToolInput) -> _Verdict:
        account, amount = debited_account(tool, args), amount_of(args)
        if account is None or amount is None:
            return None
        balance = ledger.balance(account)
        if balance > 0 and amount > share * balance:
            return "confirm", f"${amount:,.2f} is over {share:.0%} of {account} (${balance:,.2f})"
        return None

    return _guard("large_share_of_balance", "financial", check)


def fresh_quote(max_age_s: float, quoted_at: Mapping[str, float]) -> Guard:
    """Financial: confirm a call whose ``quote_id`` is older than ``max_age_s`` (or unknown).

    ``quoted_at`` maps quote ids to when they were made (the quote tool's record).
    """

    async def before(tool: Tool, args: ToolInput) -> _Verdict:
        quote_id = args.get("quote_id")
        if not isinstance(quote_id, str):
            return None
        made = quoted_at.get(quote_id)
        if made is None:
            return "confirm", f"quote {quote_id!r} is unknown: regenerate it before confirming"
        age = time.time() - made
        if age > max_age_s:
            return "confirm", f"quote {quote_id} is {age:.0f}s old: regenerate it before confirming"
        return None

    return Guard(name="fresh_quote", tier="financial", before=before)


# ----------------------------------------------------------------------- UX


def emergency_fund_hint(ledger: Ledger, *, floor_usd: float = 1000.0) -> Guard:
    """UX: a hint when a debit leaves the account under ``floor_usd``."""

    def check(tool: Tool, args: ToolInput) -> _Verdict:
        account, amount = debited_account(tool, args), amount_of(args)
        if account is None or amount is None:
            return None
        left = ledger.balance(account) - amount
        if 0 <= left < floor_usd:
            return "hint", (
                f"{account} would be left with ${left:,.2f}, under the ${floor_usd:,.0f} "
                "emergency fund: mention it to the user"
            )
        return None

    return _guard("emergency_fund_hint", "ux", check)


def low_health_after(ledger: Ledger, *, warn_below: float = 1.5) -> Guard:
    """UX: after a write that touches the loan, a hint if its health factor is low."""

    async def after(tool: Tool, args: ToolInput, output: ToolOutput) -> str | None:
        if output.is_error or Flag.AFFECTS_HEALTH not in tool.policy.flags:
            return None
        health = await anyio.to_thread.run_sync(lambda: ledger.health_factor())
        if health < warn_below:
            return f"the loan's health factor is {health:.2f}: suggest repaying some debt"
        return None

    return Guard(name="low_health_after", tier="ux", after=after)


def finance_guards(
    ledger: Ledger,
    *,
    quoted_at: Mapping[str, float],
    max_single_usd: float = 25_000.0,
    daily_limit_usd: float = 10_000.0,
    max_quote_age_s: float = 30.0,
) -> list[Guard]:
    """The demo's guards: every tier, in one list (the engine orders findings by tier)."""
    return [
        sufficient_funds(ledger),
        max_single_amount(max_single_usd),
        daily_outflow_limit(ledger, daily_limit_usd),
        health_factor_floor(ledger),
        large_share_of_balance(ledger),
        fresh_quote(max_quote_age_s, quoted_at),
        emergency_fund_hint(ledger),
        low_health_after(ledger),
    ]
