"""The finance demo's ledger: one local SQLite file (or memory) of a household's money.

Accounts (checking, savings) hold USD; holdings hold assets priced in the
price table; one loan is backed by collateral, and its health factor is the
collateral's value times the liquidation threshold over the debt (below 1.0
the loan can be liquidated). Every change is one transaction and is logged.
Methods are blocking: async callers go through ``anyio.to_thread.run_sync``.
"""

from __future__ import annotations

import math
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LIQUIDATION_THRESHOLD", "Ledger", "LedgerError", "Quote"]

LIQUIDATION_THRESHOLD = 0.8
"""Share of the collateral's value that counts toward the health factor."""
SWAP_FEE = 0.003
"""The swap venue's fee (0.3 %)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS accounts (name TEXT PRIMARY KEY, balance_usd REAL NOT NULL);
CREATE TABLE IF NOT EXISTS holdings (asset TEXT PRIMARY KEY, quantity REAL NOT NULL);
CREATE TABLE IF NOT EXISTS prices (asset TEXT PRIMARY KEY, usd REAL NOT NULL);
CREATE TABLE IF NOT EXISTS loan (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    debt_usd REAL NOT NULL,
    collateral_asset TEXT NOT NULL,
    apr REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS contacts (name TEXT PRIMARY KEY, address TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS activity (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    amount_usd REAL NOT NULL,
    note TEXT NOT NULL
);
"""


class LedgerError(ValueError):
    """A change the ledger refuses (unknown account, not enough money, bad amount)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Quote:
    """A swap quote: what ``amount_usd`` buys of ``asset`` at the current price."""

    quote_id: str
    asset: str
    amount_usd: float
    price_usd: float
    quantity: float
    """After the fee."""
    min_quantity: float
    """The least accepted at execution (1 % slippage)."""
    created_at: float


class Ledger:
    """The household's money in one SQLite database."""

    def __init__(self, path: str | Path = ":memory:") -> None:
        """Open (and create) the ledger at ``path`` (``":memory:"`` by default)."""
        self.path = str(path)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        self._quotes = 0
        with self._lock:
            self._db.executescript(_SCHEMA)

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    # ------------------------------------------------------------ seeding

    def seed(self) -> Ledger:
        """The demo household (only into an empty ledger)."""
        with self._lock:
            if self._db.execute("SELECT COUNT(*) FROM accounts").fetchone()[0]:
                return self
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT INTO accounts VALUES (?, ?)", [("checking", 2400.0), ("savings", 8000.0)]
            )
            self._db.executemany(
                "INSERT INTO prices VALUES (?, ?)",
                [("USD", 1.0), ("ETH", 3000.0), ("BTC", 60000.0), ("SOL", 150.0)],
            )
            self._db.executemany(
                "INSERT INTO holdings VALUES (?, ?)", [("ETH", 2.0), ("BTC", 0.05)]
            )
            self._db.execute("INSERT INTO loan VALUES (1, 3000.0, 'ETH', 0.06)")
            self._db.executemany(
                "INSERT INTO contacts VALUES (?, ?)",
                [
                    ("alice", "0xA11CE00000000000000000000000000000000001"),
                    ("bob", "0xB0B0000000000000000000000000000000000002"),
                ],
            )
            self._db.execute("COMMIT")
        return self

    # -------------------------------------------------------------- reads

    def balances(self) -> dict[str, float]:
        """USD by account."""
        with self._lock:
            rows = self._db.execute("SELECT name, balance_usd FROM accounts ORDER BY name")
            return {name: round(balance, 2) for name, balance in rows}

    def balance(self, account: str) -> float:
        """One account's USD balance."""
        found = self.balances().get(account)
        if found is None:
            raise LedgerError(f"no account {account!r}; accounts: {sorted(self.balances())}")
        return found

    def prices(self) -> dict[str, float]:
        """USD price by asset."""
        with self._lock:
            return dict(self._db.execute("SELECT asset, usd FROM prices ORDER BY asset"))

    def price(self, asset: str) -> float:
        """One asset's USD price."""
        found = self.prices().get(asset.upper())
        if found is None:
            raise LedgerError(f"no price for {asset!r}; priced: {sorted(self.prices())}")
        return found

    def holdings(self) -> dict[str, float]:
        """Quantity by asset."""
        with self._lock:
            return dict(self._db.execute("SELECT asset, quantity FROM holdings ORDER BY asset"))

    def loan(self) -> dict[str, float | str]:
        """The loan: debt, collateral asset, its quantity and value, APR."""
        with self._lock:
            row = self._db.execute("SELECT debt_usd, collateral_asset, apr FROM loan").fetchone()
        if row is None:
            return {"debt_usd": 0.0, "collateral_asset": "ETH", "apr": 0.0}
        debt, asset, apr = row
        quantity = self.holdings().get(asset, 0.0)
        return {
            "debt_usd": round(debt, 2),
            "collateral_asset": asset,
            "collateral_quantity": quantity,
            "collateral_usd": round(quantity * self.price(asset), 2),
            "apr": apr,
        }

    def health_factor(self, *, debt_change: float = 0.0, collateral_change: float = 0.0) -> float:
        """The loan's health factor, optionally after a change (``inf`` without debt)."""
        loan = self.loan()
        debt = float(loan["debt_usd"]) + debt_change
        asset = str(loan["collateral_asset"])
        value = (float(loan.get("collateral_quantity", 0.0)) + collateral_change) * self.price(
            asset
        )
        if debt <= 0:
            return math.inf
        return round(value * LIQUIDATION_THRESHOLD / debt, 3)

    def net_worth(self) -> float:
        """Accounts plus holdings at today's prices, minus the debt."""
        prices = self.prices()
        assets = sum(self.balances().values()) + sum(
            q * prices.get(a, 0.0) for a, q in self.holdings().items()
        )
        return round(assets - float(self.loan()["debt_usd"]), 2)

    def contacts(self) -> dict[str, str]:
        """Address by contact name."""
        with self._lock:
            return dict(self._db.execute("SELECT name, address FROM contacts ORDER BY name"))

    def activity(self, limit: int = 10) -> list[dict[str, object]]:
        """The latest changes, newest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT at, kind, amount_usd, note FROM activity ORDER BY id DESC LIMIT ?",
                (max(1, min(limit, 100)),),
            ).fetchall()
        return [{"at": at, "kind": k, "amount_usd": a, "note": n} for at, k, a, n in rows]

    def spent_today(self) -> float:
        """USD moved out today (withdrawals, transfers out, swaps, sends)."""
        start = time.time() - 86_400
        with self._lock:
            row = self._db.execute(
                "SELECT COALESCE(SUM(amount_usd), 0) FROM activity WHERE at >= ? AND kind IN "
                "('withdraw', 'swap', 'send')",
                (start,),
            ).fetchone()
        return float(row[0])

    def quote(self, asset: str, amount_usd: float) -> Quote:
        """A fresh quote for buying ``asset`` with ``amount_usd``.

        The price moves a little with each quote, as a market's does.
        """
        _positive(amount_usd)
        asset = asset.upper()
        price = self.price(asset)
        with self._lock:
            self._quotes += 1
            drift = 1 + 0.001 * (self._quotes % 5)
            quote_id = f"q{self._quotes}"
        price = round(price * drift, 2)
        quantity = amount_usd * (1 - SWAP_FEE) / price
        return Quote(
            quote_id=quote_id,
            asset=asset,
            amount_usd=amount_usd,
            price_usd=price,
            quantity=round(quantity, 6),
            min_quantity=round(quantity * 0.99, 6),
            created_at=time.time(),
        )

    # ------------------------------------------------------------- writes

    def deposit(self, account: str, amount_usd: float) -> float:
        """Money in from outside; the new balance."""
        _positive(amount_usd)
        return self._move(account, amount_usd, "deposit", f"deposit to {account}")

    def withdraw(self, account: str, amount_usd: float) -> float:
        """Money out to the user's bank; the new balance."""
        _positive(amount_usd)
        return self._move(account, -amount_usd, "withdraw", f"withdraw from {account}")

    def transfer(self, source: str, target: str, amount_usd: float) -> dict[str, float]:
        """Between the user's own accounts; both new balances."""
        _positive(amount_usd)
        if source == target:
            raise LedgerError("source and target are the same account")
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._debit(source, amount_usd)
                self._credit(target, amount_usd)
                self._log("transfer", amount_usd, f"{source} -> {target}")
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return {source: self.balance(source), target: self.balance(target)}

    def send(self, account: str, amount_usd: float, to: str) -> float:
        """Record money the client sent to a contact; the new balance."""
        _positive(amount_usd)
        return self._move(account, -amount_usd, "send", f"send to {to}")

    def borrow(self, amount_usd: float, account: str = "checking") -> dict[str, float]:
        """More debt, paid into ``account``; the new debt and health factor."""
        _positive(amount_usd)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("UPDATE loan SET debt_usd = debt_usd + ?", (amount_usd,))
                self._credit(account, amount_usd)
                self._log("borrow", amount_usd, f"borrow into {account}")
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return {"debt_usd": float(self.loan()["debt_usd"]), "health_factor": self.health_factor()}

    def repay(self, amount_usd: float, account: str = "checking") -> dict[str, float]:
        """Pay debt down from ``account``; the new debt and health factor."""
        _positive(amount_usd)
        debt = float(self.loan()["debt_usd"])
        if amount_usd > debt + 1e-9:
            raise LedgerError(f"the debt is only ${debt:,.2f}")
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._debit(account, amount_usd)
                self._db.execute("UPDATE loan SET debt_usd = debt_usd - ?", (amount_usd,))
                self._log("repay", amount_usd, f"repay from {account}")
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return {"debt_usd": float(self.loan()["debt_usd"]), "health_factor": self.health_factor()}

    def swap(
        self, account: str, asset: str, amount_usd: float, *, price_usd: float, min_quantity: float
    ) -> dict[str, float]:
        """Buy ``asset`` at a quoted price; refused if the market moved past ``min_quantity``."""
        _positive(amount_usd)
        asset = asset.upper()
        market = self.price(asset)
        if price_usd < market * 0.98:
            raise LedgerError(
                f"the quote's price ${price_usd:,.2f} is stale (market ${market:,.2f}): "
                "ask for a fresh quote"
            )
        quantity = amount_usd * (1 - SWAP_FEE) / max(price_usd, market)
        if quantity + 1e-12 < min_quantity:
            raise LedgerError(f"slippage: {quantity:.6f} {asset} is below the minimum")
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._debit(account, amount_usd)
                self._db.execute(
                    "INSERT INTO holdings VALUES (?, ?) "
                    "ON CONFLICT(asset) DO UPDATE SET quantity = quantity + excluded.quantity",
                    (asset, quantity),
                )
                self._log("swap", amount_usd, f"{account} -> {quantity:.6f} {asset}")
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return {"quantity": round(quantity, 6), "balance_usd": self.balance(account)}

    def set_price(self, asset: str, usd: float) -> None:
        """Move the market (for tests and what-ifs)."""
        _positive(usd)
        with self._lock:
            self._db.execute(
                "INSERT INTO prices VALUES (?, ?) ON CONFLICT(asset) DO UPDATE SET usd = ?",
                (asset.upper(), usd, usd),
            )

    # ----------------------------------------------------------- internals

    def _move(self, account: str, delta: float, kind: str, note: str) -> float:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                if delta >= 0:
                    self._credit(account, delta)
                else:
                    self._debit(account, -delta)
                self._log(kind, abs(delta), note)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return self.balance(account)

    def _credit(self, account: str, amount: float) -> None:
        changed = self._db.execute(
            "UPDATE accounts SET balance_usd = balance_usd + ? WHERE name = ?", (amount, account)
        ).rowcount
        if not changed:
            raise LedgerError(f"no account {account!r}")

    def _debit(self, account: str, amount: float) -> None:
        row = self._db.execute(
            "SELECT balance_usd FROM accounts WHERE name = ?", (account,)
        ).fetchone()
        if row is None:
            raise LedgerError(f"no account {account!r}")
        if row[0] + 1e-9 < amount:
            raise LedgerError(
                f"insufficient funds in {account}: ${row[0]:,.2f} available, ${amount:,.2f} asked"
            )
        self._db.execute(
            "UPDATE accounts SET balance_usd = balance_usd - ? WHERE name = ?", (amount, account)
        )

    def _log(self, kind: str, amount: float, note: str) -> None:
        self._db.execute(
            "INSERT INTO activity (at, kind, amount_usd, note) VALUES (?, ?, ?, ?)",
            (time.time(), kind, amount, note),
        )


def _positive(amount: object) -> None:
    if isinstance(amount, bool) or not isinstance(amount, int | float):
        raise LedgerError(f"amounts must be positive and finite, not {amount!r}")
    if not (math.isfinite(amount) and amount > 0):
        raise LedgerError(f"amounts must be positive and finite, not {amount!r}")
