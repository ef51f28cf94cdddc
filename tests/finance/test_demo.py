"""The finance flagship, driven end to end through the public API (offline)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from mainspring import (
    Approve,
    ConfigError,
    InputChanged,
    PendingAction,
    Reject,
    Session,
    ThinkingDone,
    ToolResult,
    ToolStart,
)
from mainspring.mcp.server import build_mcp_server
from mainspring.stores import InMemorySessionStore
from mainspring_finance import FINANCE_MESSAGE, FinanceDemo, execute_client_transfer, finance_demo
from tests.helpers import collect, pending_of, resume, send
from tests.mcp.test_server import http_session

pytestmark = pytest.mark.anyio


async def demo(**kw: object) -> FinanceDemo:
    return await finance_demo(**kw)  # type: ignore[arg-type]  # keywords passed through from the caller


async def balances(d: FinanceDemo) -> dict[str, float]:
    return await anyio.to_thread.run_sync(d.ledger.balances)


async def test_it_has_the_tools_the_example_promises() -> None:
    d = await demo()
    tools = [d.agent.tool(n) for n in d.agent.tool_names]
    reads = [t for t in tools if t is not None and t.policy.read_only]
    writes = [t for t in tools if t is not None and not t.policy.read_only]
    assert len(reads) >= 10 and len(writes) >= 6
    assert {"deposit", "withdraw", "transfer", "borrow", "repay", "swap"} <= {
        w.name for w in writes
    }
    send_tool = d.agent.tool("send_to_contact")
    assert send_tool is not None and send_tool.client_executed
    assert d.agent.permissions.usd_tiers.name == "balanced"
    tiers = {
        t: (await demo(tiers=t)).agent.permissions.usd_tiers.name
        for t in ("conservative", "aggressive")
    }
    assert tiers == {"conservative": "conservative", "aggressive": "aggressive"}
    with pytest.raises(ConfigError, match="preset"):
        await demo(tiers="reckless")


async def test_a_swap_quotes_pauses_regenerates_and_runs_on_the_fresh_quote() -> None:
    d = await demo()
    session = Session(d.agent)
    events = await send(session, FINANCE_MESSAGE)
    assert [e.name for e in events if isinstance(e, ToolStart)] == [
        "get_swap_quote",
        "get_balances",
    ]
    thought = next(e for e in events if isinstance(e, ThinkingDone))
    assert thought.summary_mode == "brief" and thought.evaluation[0].name == "intent"
    first = pending_of(events)
    assert first.name == "swap" and first.can_regenerate
    assert set(first.details) == {"quote", "route", "projected", "quote_age_s"}
    assert first.details["projected"] == {
        "balance_usd": 2100.0,
        "quantity": pytest.approx(0.0996, rel=1e-3),
    }
    assert await balances(d) == {"checking": 2400.0, "savings": 8000.0}  # nothing ran

    fresh = pending_of(await collect(session.regenerate(first.attempt_id)))
    assert fresh.input["quote_id"] != first.input["quote_id"]
    assert fresh.input["price_usd"] != first.input["price_usd"]
    with pytest.raises(InputChanged):
        session.resume(first.attempt_id, Approve(input_hash=first.input_hash))

    done = await resume(session, fresh.attempt_id, Approve(input_hash=fresh.input_hash))
    swap = next(e for e in done if isinstance(e, ToolResult) and e.name == "swap")
    assert "[refreshed get_balances]" in swap.content and "[refreshed get_holdings]" in swap.content
    assert await balances(d) == {"checking": 2100.0, "savings": 8000.0}
    holdings = await anyio.to_thread.run_sync(d.ledger.holdings)
    assert holdings["ETH"] == pytest.approx(
        2 + 300 * 0.997 / float(str(fresh.input["price_usd"])), rel=1e-5
    )
    assert "Your balances now: checking $2,100.00" in session.messages[-1].text


async def test_a_rejected_swap_moves_nothing() -> None:
    d = await demo()
    session = Session(d.agent)
    pending = pending_of(await send(session, "buy $50 of BTC"))
    await resume(session, pending.attempt_id, Reject("not today"))
    assert await balances(d) == {"checking": 2400.0, "savings": 8000.0}
    assert "did not go through" in session.messages[-1].text


async def test_small_deposits_run_under_the_tier_and_count_against_the_cap() -> None:
    d = await demo(tiers="conservative")  # auto below $10, $50 per session
    session = Session(d.agent)
    for _ in range(5):
        events = await send(session, "deposit $9.50")
        assert not any(isinstance(e, PendingAction) for e in events)
    assert session.state.auto_spent_usd == pytest.approx(47.5)
    over = pending_of(await send(session, "deposit $9.50"))  # past the session cap
    assert "session cap" in over.reason
    assert (await balances(d))["checking"] == pytest.approx(2447.5)


async def test_guards_block_a_borrow_that_risks_liquidation_and_confirm_a_risky_one() -> None:
    d = await demo()
    session = Session(d.agent)
    await send(session, "borrow $2000")
    assert "blocked by health_factor_floor" in session.messages[-1].text
    assert await balances(d) == {"checking": 2400.0, "savings": 8000.0}

    pending = pending_of(await send(session, "borrow $500"))
    sources = [f.source for f in pending.findings]
    projected = pending.details["projected"]
    assert isinstance(projected, dict) and float(str(projected["health_factor"])) < 1.5
    assert "health_factor_floor" in sources
    await resume(session, pending.attempt_id, Approve())
    assert "suggest repaying some debt" in session.messages[-1].text  # the after-hint reached it


async def test_a_withdrawal_over_the_balance_is_blocked_by_the_safety_tier() -> None:
    d = await demo()
    session = Session(d.agent)
    await send(session, "withdraw $5000 from checking")
    assert "insufficient funds" in session.messages[-1].text
    assert (await balances(d))["checking"] == 2400.0


async def test_the_client_executes_a_transfer_to_a_contact() -> None:
    d = await demo()
    session = Session(d.agent)
    pending = pending_of(await send(session, "send $40 to bob"))
    assert pending.client_executed and pending.name == "send_to_contact"
    assert pending.details["projected"] == {"balance_usd": 2360.0}
    result = await anyio.to_thread.run_sync(execute_client_transfer, d.ledger, pending)
    assert result.input_hash == pending.input_hash
    await resume(session, pending.attempt_id, result)
    assert (await balances(d))["checking"] == 2360.0
    assert "checking $2,360.00" in session.messages[-1].text  # refreshed after the client ran it


async def test_unknown_contacts_and_accounts_fail_preflight_without_asking() -> None:
    d = await demo()
    session = Session(d.agent)
    events = await send(session, "send $40 to mallory")
    assert not any(isinstance(e, PendingAction) for e in events)
    assert "not one of your contacts" in session.messages[-1].text


async def test_the_snapshot_memory_and_skills_reach_the_model() -> None:
    d = await demo()
    session = Session(d.agent)
    await send(session, "how is my loan health?")
    request = d.agent.resolved_model.model.requests[0]  # type: ignore[attr-defined]  # the demo's model is a ScriptedModel, which records requests
    system = request.system_text
    assert "Daily snapshot" in system and "health factor" in system
    assert "swap-safely" in system  # the skills' resident block
    assert "health factor kept above 2" in request.messages[-1].text  # recalled memory
    assert "I remember" in session.messages[-1].text
    await send(session, "show me your playbooks")
    assert session.messages[-1].text == "My playbooks: pay-down-debt, swap-safely, weekly-review."


async def test_a_transfer_between_accounts_and_a_durable_session(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    store = InMemorySessionStore()
    d = await demo(path=path)
    session = Session(d.agent, session_store=store)
    pending = pending_of(await send(session, "transfer $600 to savings"))  # over $100: asks
    reopened = await demo(path=path)
    loaded = await Session.load(reopened.agent, store, session.session_id)
    await resume(loaded, pending.attempt_id, Approve(input_hash=pending.input_hash))
    assert await balances(reopened) == {"checking": 1800.0, "savings": 8600.0}
    activity = await anyio.to_thread.run_sync(reopened.ledger.activity)
    assert activity[0]["kind"] == "transfer"


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn runs on asyncio
async def test_skills_are_served_as_mcp_prompts(anyio_backend: str) -> None:
    d = await demo()
    server = build_mcp_server(d.agent, skills=d.skills)
    with anyio.fail_after(60):
        async with http_session(server) as client:
            prompts = {p.name for p in (await client.list_prompts()).prompts}
            assert prompts == {"pay-down-debt", "swap-safely", "weekly-review"}
            got = await client.get_prompt("swap-safely")
            assert "get_swap_quote" in json.dumps(got.model_dump(mode="json"))
