"""The finance demo's ledger and guards: bad input is refused whole, money is conserved."""

from __future__ import annotations

import math
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from mainspring import Approve, Session
from mainspring.cli.commands import app
from mainspring.guards import run_before
from mainspring.tools import Tool
from mainspring_finance import Ledger, LedgerError, finance_demo
from mainspring_finance.guards import (
    daily_outflow_limit,
    fresh_quote,
    max_single_amount,
    sufficient_funds,
)
from mainspring_finance.tools import finance_tools
from tests.helpers import pending_of, resume, send


def seeded() -> Ledger:
    return Ledger().seed()


@pytest.mark.parametrize("amount", [0, -5, math.nan, math.inf, "10", True])
def test_bad_amounts_are_refused_and_nothing_changes(amount: object) -> None:
    ledger = seeded()
    before = (ledger.balances(), ledger.holdings(), ledger.loan())
    for change in (
        lambda: ledger.deposit("checking", amount),  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
        lambda: ledger.withdraw("checking", amount),  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
        lambda: ledger.transfer("checking", "savings", amount),  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
        lambda: ledger.borrow(amount),  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
        lambda: ledger.repay(amount),  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
    ):
        with pytest.raises(LedgerError, match="positive and finite"):
            change()
    assert (ledger.balances(), ledger.holdings(), ledger.loan()) == before
    assert ledger.activity() == []


def test_refused_changes_leave_the_ledger_whole() -> None:
    ledger = seeded()
    with pytest.raises(LedgerError, match="insufficient funds"):
        ledger.transfer("checking", "savings", 1_000_000)
    with pytest.raises(LedgerError, match="no account"):
        ledger.transfer("checking", "offshore", 10)
    with pytest.raises(LedgerError, match="same account"):
        ledger.transfer("savings", "savings", 10)
    with pytest.raises(LedgerError, match="only"):
        ledger.repay(10_000)
    quote = ledger.quote("ETH", 100)
    ledger.set_price("ETH", 4000)
    with pytest.raises(LedgerError, match="stale"):
        ledger.swap(
            "checking", "ETH", 100, price_usd=quote.price_usd, min_quantity=quote.min_quantity
        )
    assert ledger.balances() == {"checking": 2400.0, "savings": 8000.0}
    assert ledger.holdings() == {"BTC": 0.05, "ETH": 2.0}


def test_health_factor_and_net_worth() -> None:
    ledger = seeded()
    assert ledger.health_factor() == pytest.approx(2 * 3000 * 0.8 / 3000)
    assert ledger.health_factor(debt_change=1000) < ledger.health_factor()
    worth = ledger.net_worth()
    assert worth == pytest.approx(2400 + 8000 + 2 * 3000 + 0.05 * 60000 - 3000)
    ledger.repay(3000, "savings")
    assert ledger.health_factor() == math.inf
    assert ledger.net_worth() == pytest.approx(worth)  # repaying moves money, not worth


def test_the_ledger_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    ledger = Ledger(path).seed()
    ledger.deposit("savings", 100)
    ledger.close()
    again = Ledger(path).seed()  # seeding a full ledger changes nothing
    assert again.balances()["savings"] == 8100.0


moves = st.lists(
    st.tuples(
        st.sampled_from(["checking", "savings"]),
        st.sampled_from(["checking", "savings"]),
        st.floats(min_value=0.01, max_value=20_000, allow_nan=False),
    ),
    max_size=20,
)


@settings(max_examples=60)
@given(moves)
def test_transfers_conserve_money_and_never_overdraw(plan: list[tuple[str, str, float]]) -> None:
    ledger = seeded()
    total = sum(ledger.balances().values())
    for source, target, amount in plan:
        try:
            ledger.transfer(source, target, amount)
        except LedgerError:
            pass
        assert all(v >= -1e-6 for v in ledger.balances().values())
    assert sum(ledger.balances().values()) == pytest.approx(total)


# ----------------------------------------------------------------- guards


def tool_named(ledger: Ledger, name: str) -> Tool:
    return next(t for t in finance_tools(ledger) if t.name == name)


@pytest.mark.anyio
async def test_the_guard_tiers_order_their_findings() -> None:
    ledger = seeded()
    withdraw = tool_named(ledger, "withdraw")
    guards = [
        daily_outflow_limit(ledger, 100),
        max_single_amount(50),
        sufficient_funds(ledger),
    ]
    report = await run_before(guards, withdraw, {"amount_usd": 5000.0, "account": "checking"})
    assert [f.source for f in report.findings][:1] in (
        ["daily_outflow_limit"],
        ["max_single_amount"],
        ["sufficient_funds"],
    )
    assert all(f.tier == "safety" and f.action == "block" for f in report.findings)
    assert len(report.findings) == 3
    ok = await run_before(guards, withdraw, {"amount_usd": 10.0, "account": "checking"})
    assert ok.findings == ()


@pytest.mark.anyio
async def test_an_unknown_or_old_quote_asks_again() -> None:
    ledger = seeded()
    swap = tool_named(ledger, "swap")
    guard = fresh_quote(30, {"q1": 0.0})
    old = await run_before([guard], swap, {"quote_id": "q1"})
    unknown = await run_before([guard], swap, {"quote_id": "zz"})
    assert old.needs_confirm and "old" in old.findings[0].message
    assert unknown.needs_confirm and "unknown" in unknown.findings[0].message
    assert (await run_before([guard], swap, {})).findings == ()


@pytest.mark.anyio
async def test_an_old_quote_is_regenerated_before_it_is_confirmed() -> None:
    d = await finance_demo()
    session = Session(d.agent)
    pending = pending_of(await send(session, "swap $100 into SOL"))
    d.quotes[str(pending.input["quote_id"])] = 0.0  # the quote went stale while it waited
    fresh = pending_of([e async for e in session.regenerate(pending.attempt_id)])
    assert "fresh_quote" not in [f.source for f in fresh.findings]  # the new one is fresh
    await resume(session, fresh.attempt_id, Approve(input_hash=fresh.input_hash))
    holdings = await anyio.to_thread.run_sync(d.ledger.holdings)
    assert holdings["SOL"] > 0


# -------------------------------------------------------------------- CLI


def test_cli_demo_finance_regenerates_and_swaps() -> None:
    result = CliRunner().invoke(app, ["demo", "finance", "--yes"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "→ get_swap_quote" in out and "refreshing the quote before you confirm" in out
    assert "quote:" in out and "route:" in out and "projected:" in out
    assert "[refreshed get_balances]" in out
    assert out.index("refreshing the quote") < out.index("approval needed") < out.index("→ swap(")
    assert "turn complete (end_turn)" in out


def test_cli_demo_finance_client_transfer_and_tiers(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    args = ["demo", "finance", "--yes", "--tiers", "conservative", "--ledger", str(path)]
    result = CliRunner().invoke(app, [*args, "-m", "send $25 to alice"])
    assert result.exit_code == 0, result.output
    assert "signing in the wallet" in result.output
    assert Ledger(path).balances()["checking"] == 2375.0
    bad = CliRunner().invoke(app, ["demo", "finance", "--tiers", "yolo"])
    assert bad.exit_code == 2 and "preset" in bad.output


def test_cli_demo_finance_without_a_terminal_needs_yes() -> None:
    result = CliRunner().invoke(app, ["demo", "finance"], input="y\n")
    assert result.exit_code == 1 and "pass --yes" in result.output


def test_auto_model_picks_a_provider_only_with_a_key() -> None:
    from mainspring.cli.finance import auto_model

    assert auto_model({}) == "scripted"
    assert auto_model({"OPENAI_API_KEY": "sk"}) == "openai:gpt-5"
    assert auto_model({"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "b"}).startswith("anthropic:")
