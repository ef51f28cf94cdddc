"""The finance agent's tools over a :class:`~mainspring_finance.ledger.Ledger`.

Reads (read-only, run in parallel): balances, one account, prices, one price,
holdings, the loan, its health factor, net worth, recent activity, contacts,
a swap quote and the daily snapshot. Writes (one at a time, USD-tiered):
deposit, withdraw, transfer, borrow, repay — and swap, which always asks,
shows its quote, route and projected values in the pending action, and can
regenerate its quote before it is confirmed. ``send_to_contact`` is executed
by the client (a transfer signed in the user's wallet). Every write refreshes
the balances (and the loan, where it changes) before the model answers.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from mainspring.tools import Flag, Tool, ToolInput, client_tool, tool, usd
from mainspring_finance.ledger import Ledger, LedgerError

__all__ = ["QUOTE_ROUTE", "QuoteBook", "finance_tools", "snapshot_text"]

QUOTE_ROUTE = ["checking (USD)", "demo-dex USD/{asset} pool", "holdings ({asset})"]
"""The route a swap takes, as its pending action shows it."""


class QuoteBook(dict[str, float]):
    """When each quote id was made (the ``fresh_quote`` guard reads it)."""


class SendToContact(BaseModel):
    """``send_to_contact``'s input: a model, so the demo needs no JSON Schema validator."""

    model_config = ConfigDict(extra="forbid")

    to: str = Field(description="The contact's name.")
    amount_usd: float = Field(description="How much.")
    account: str = Field("checking", description="From which account.")


def _usd(args: ToolInput) -> float | None:
    value = args.get("amount_usd")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def snapshot_text(ledger: Ledger) -> str:
    """The daily snapshot: the context block the model sees every turn."""
    balances = ledger.balances()
    loan = ledger.loan()
    prices = ledger.prices()
    held = ledger.holdings().items()
    lines = [
        f"Daily snapshot ({time.strftime('%Y-%m-%d')}):",
        "- accounts: " + ", ".join(f"{k} ${v:,.2f}" for k, v in balances.items()),
        "- holdings: " + ", ".join(f"{q:g} {a} (${q * prices.get(a, 0):,.2f})" for a, q in held),
        f"- loan: ${float(loan['debt_usd']):,.2f} against {loan['collateral_asset']}, "
        f"health factor {ledger.health_factor():.2f}",
        "- prices: " + ", ".join(f"{a} ${p:,.2f}" for a, p in prices.items() if a != "USD"),
        f"- net worth: ${ledger.net_worth():,.2f}",
    ]
    return "\n".join(lines)


def _reads(ledger: Ledger, quotes: QuoteBook) -> list[Tool]:
    @tool(read_only=True)
    def get_balances() -> dict[str, float]:
        """USD balance of every account (checking, savings)."""
        return ledger.balances()

    @tool(read_only=True)
    def get_account_balance(account: str) -> dict[str, float | str]:
        """One account's USD balance.

        Args:
            account: ``checking`` or ``savings``.
        """
        return {"account": account, "balance_usd": ledger.balance(account)}

    @tool(read_only=True)
    def get_prices() -> dict[str, float]:
        """Today's USD price of every asset."""
        return ledger.prices()

    @tool(read_only=True)
    def get_price(asset: str) -> dict[str, float | str]:
        """One asset's USD price.

        Args:
            asset: A ticker such as ETH or BTC.
        """
        return {"asset": asset.upper(), "usd": ledger.price(asset)}

    return [get_balances, get_account_balance, get_prices, get_price]


def _position_reads(ledger: Ledger, quotes: QuoteBook) -> list[Tool]:
    @tool(read_only=True)
    def get_holdings() -> dict[str, float]:
        """Quantity of each asset held."""
        return ledger.holdings()

    @tool(read_only=True)
    def get_loan() -> dict[str, float | str]:
        """The loan: debt, collateral, its value and APR, and the health factor."""
        return {**ledger.loan(), "health_factor": ledger.health_factor()}

    @tool(read_only=True)
    def get_health_factor(borrow_usd: float = 0.0, repay_usd: float = 0.0) -> dict[str, float]:
        """The loan's health factor now, or after borrowing or repaying an amount.

        Args:
            borrow_usd: A what-if: borrow this much more.
            repay_usd: A what-if: repay this much.
        """
        return {"health_factor": ledger.health_factor(debt_change=borrow_usd - repay_usd)}

    @tool(read_only=True)
    def get_net_worth() -> dict[str, float]:
        """Accounts plus holdings at today's prices, minus the debt."""
        return {"net_worth_usd": ledger.net_worth()}

    @tool(read_only=True)
    def list_activity(limit: int = 10) -> list[dict[str, object]]:
        """The latest changes to the ledger, newest first.

        Args:
            limit: How many (1-100).
        """
        return ledger.activity(limit)

    @tool(read_only=True)
    def list_contacts() -> dict[str, str]:
        """People the user sends money to, with their addresses."""
        return ledger.contacts()

    @tool(read_only=True)
    def get_swap_quote(asset: str, amount_usd: float) -> dict[str, JsonValue]:
        """A quote for buying an asset with USD from checking (valid about 30 seconds).

        Args:
            asset: What to buy (ETH, BTC, SOL).
            amount_usd: How much USD to spend.
        """
        quote = ledger.quote(asset, amount_usd)
        quotes[quote.quote_id] = quote.created_at
        return dict(asdict(quote))

    @tool(read_only=True)
    def get_daily_snapshot() -> str:
        """Today's overview: accounts, holdings, loan, prices, net worth."""
        return snapshot_text(ledger)

    return [
        get_holdings,
        get_loan,
        get_health_factor,
        get_net_worth,
        list_activity,
        list_contacts,
        get_swap_quote,
        get_daily_snapshot,
    ]


def _checker(
    ledger: Ledger, *, accounts: tuple[str, ...] = ("account",), asset: bool = False
) -> Callable[[ToolInput], Awaitable[str | None]]:
    async def preflight(args: ToolInput) -> str | None:
        def check() -> str | None:
            amount = _usd(args)
            if amount is None or amount <= 0:
                return "amount_usd must be a positive number"
            known = ledger.balances()
            for key in accounts:
                name = args.get(key, "checking")
                if name not in known:
                    return f"{key} {name!r} is not an account; accounts: {sorted(known)}"
            if asset:
                try:
                    ledger.price(str(args.get("asset", "")))
                except LedgerError as exc:
                    return str(exc)
            return None

        return await anyio.to_thread.run_sync(check)

    return preflight


def _writes(ledger: Ledger, quotes: QuoteBook) -> list[Tool]:
    money = usd(_usd)

    @tool(
        permission=money,
        flags={Flag.MUTATING},
        preflight=_checker(ledger),
        post_write_refresh=("get_balances",),
    )
    def deposit(amount_usd: float, account: str = "checking") -> dict[str, float]:
        """Deposit money from the user's bank into an account.

        Args:
            amount_usd: How much.
            account: Into which account.
        """
        return {"balance_usd": ledger.deposit(account, amount_usd)}

    @tool(
        permission=money,
        flags={Flag.MUTATING, Flag.REQUIRES_BALANCE, Flag.IRREVERSIBLE},
        preflight=_checker(ledger),
        modifiable_fields=("amount_usd",),
        post_write_refresh=("get_balances",),
    )
    def withdraw(amount_usd: float, account: str = "checking") -> dict[str, float]:
        """Withdraw money from an account to the user's bank.

        Args:
            amount_usd: How much.
            account: From which account.
        """
        return {"balance_usd": ledger.withdraw(account, amount_usd)}

    @tool(
        permission=money,
        flags={Flag.MUTATING, Flag.REQUIRES_BALANCE},
        preflight=_checker(ledger, accounts=("source", "target")),
        modifiable_fields=("amount_usd",),
        post_write_refresh=("get_balances",),
    )
    def transfer(amount_usd: float, source: str, target: str) -> dict[str, float]:
        """Move money between the user's own accounts.

        Args:
            amount_usd: How much.
            source: From which account.
            target: To which account.
        """
        return ledger.transfer(source, target, amount_usd)

    @tool(
        permission=money,
        flags={Flag.MUTATING, Flag.AFFECTS_HEALTH},
        preflight=_checker(ledger),
        modifiable_fields=("amount_usd",),
        details=lambda args: {
            "projected": {"health_factor": ledger.health_factor(debt_change=_usd(args) or 0.0)}
        },
        post_write_refresh=("get_balances", "get_loan"),
    )
    def borrow(amount_usd: float, account: str = "checking") -> dict[str, float]:
        """Borrow against the collateral, paid into an account.

        Args:
            amount_usd: How much.
            account: Into which account.
        """
        return ledger.borrow(amount_usd, account)

    @tool(
        permission=money,
        flags={Flag.MUTATING, Flag.AFFECTS_HEALTH, Flag.REQUIRES_BALANCE},
        preflight=_checker(ledger),
        modifiable_fields=("amount_usd",),
        details=lambda args: {
            "projected": {"health_factor": ledger.health_factor(debt_change=-(_usd(args) or 0.0))}
        },
        post_write_refresh=("get_balances", "get_loan"),
    )
    def repay(amount_usd: float, account: str = "checking") -> dict[str, float]:
        """Repay some of the loan from an account.

        Args:
            amount_usd: How much.
            account: From which account.
        """
        return ledger.repay(amount_usd, account)

    def swap_details(args: ToolInput) -> dict[str, JsonValue]:
        asset = str(args.get("asset", "")).upper()
        amount = _usd(args) or 0.0
        price = float(str(args.get("price_usd", 0) or 0))
        made = quotes.get(str(args.get("quote_id", "")))
        balance = ledger.balance(str(args.get("account", "checking")))
        return {
            "quote": {
                "quote_id": args.get("quote_id"),
                "price_usd": price,
                "min_quantity": args.get("min_quantity"),
            },
            "route": [step.format(asset=asset) for step in QUOTE_ROUTE],
            "projected": {
                "balance_usd": round(balance - amount, 2),
                "quantity": round(amount * 0.997 / price, 6) if price else None,
            },
            "quote_age_s": round(time.time() - made, 1) if made is not None else None,
        }

    def fresh_quote(args: ToolInput) -> dict[str, JsonValue]:
        quote = ledger.quote(str(args["asset"]), float(str(args["amount_usd"])))
        quotes[quote.quote_id] = quote.created_at
        return {
            **args,
            "quote_id": quote.quote_id,
            "price_usd": quote.price_usd,
            "min_quantity": quote.min_quantity,
        }

    @tool(
        permission="confirm",
        flags={Flag.MUTATING, Flag.REQUIRES_BALANCE, Flag.IRREVERSIBLE, Flag.EXTERNAL},
        preflight=_checker(ledger, asset=True),
        details=swap_details,
        regenerate=fresh_quote,
        post_write_refresh=("get_balances", "get_holdings"),
    )
    def swap(
        asset: str,
        amount_usd: float,
        quote_id: str,
        price_usd: float,
        min_quantity: float,
        account: str = "checking",
    ) -> dict[str, float]:
        """Buy an asset with USD at a quote from get_swap_quote (always asks the user).

        Args:
            asset: What to buy.
            amount_usd: USD to spend.
            quote_id: The quote's id.
            price_usd: The quote's price.
            min_quantity: The least accepted (the quote's min_quantity).
            account: Which account pays.
        """
        return ledger.swap(
            account, asset, amount_usd, price_usd=price_usd, min_quantity=min_quantity
        )

    def send_details(args: ToolInput) -> dict[str, JsonValue]:
        contacts = ledger.contacts()
        to = str(args.get("to", "")).lower()
        balance = ledger.balance(str(args.get("account", "checking")))
        return {
            "route": ["checking (USD)", "wallet signature", f"{to} {contacts.get(to, '?')}"],
            "projected": {"balance_usd": round(balance - (_usd(args) or 0.0), 2)},
        }

    async def known_contact(args: ToolInput) -> str | None:
        problem = await _checker(ledger)(args)
        if problem:
            return problem
        contacts = await anyio.to_thread.run_sync(ledger.contacts)
        to = str(args.get("to", "")).lower()
        return None if to in contacts else f"{to!r} is not a contact; contacts: {sorted(contacts)}"

    send_to_contact = client_tool(
        "send_to_contact",
        description=(
            "Send USD to a contact: the user signs the transfer in their wallet "
            "(executed by the client)."
        ),
        input_schema=SendToContact,
        modifiable_fields=("amount_usd",),
        flags={Flag.MUTATING, Flag.REQUIRES_BALANCE, Flag.IRREVERSIBLE},
        preflight=known_contact,
        details=send_details,
        post_write_refresh=("get_balances",),
    )
    return [deposit, withdraw, transfer, borrow, repay, swap, send_to_contact]


def finance_tools(ledger: Ledger, quotes: QuoteBook | None = None) -> list[Tool]:
    """Every read and write of the finance agent (``quotes`` records when quotes were made)."""
    book = quotes if quotes is not None else QuoteBook()
    return [*_reads(ledger, book), *_position_reads(ledger, book), *_writes(ledger, book)]
