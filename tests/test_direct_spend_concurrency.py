"""The auto-spend cap under concurrent direct calls, through every door.

Twenty concurrent calls of a $99 auto-tier payment against a $500 session cap:
at most five run ($495); the others pause for approval as a serial caller's
would; every caller gets an answer (no call whose payment ran ends in an
error). Through ``Engine.tool_call``, two engines (two workers) sharing one
SQLite store, the signed ``/v1/engine`` route of two servers on one store,
and the MCP server.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from mainspring import Agent, ScriptedModel, tool, usd
from mainspring.decisions import Approve
from mainspring.engine import Caller, Engine, ManagementPolicy, ToolCallResult
from mainspring.permissions import PermissionRules, UsdTiers
from mainspring.stores import SQLiteSessionStore

pytestmark = pytest.mark.anyio

CALLS = 20
PRICE = 99.0
CAP = 500.0
ALICE = Caller("alice")


def payments() -> tuple[list[float], Any]:
    paid: list[float] = []

    @tool(permission=usd(lambda args: float(str(args["amount_usd"]))))
    def pay(to: str, amount_usd: float) -> str:
        """Pay someone."""
        paid.append(amount_usd)
        return f"paid ${amount_usd:g} to {to}"

    return paid, pay


RULES = PermissionRules(usd_tiers=UsdTiers(auto_below_usd=100, session_auto_cap_usd=CAP))


def shop(pay: Any, store: SQLiteSessionStore | None = None) -> Engine:
    policy = ManagementPolicy(visibility="protected")
    return Engine("shop", policy=policy, permissions=RULES, spend_store=store).add_tool(
        pay, export=True
    )


async def concurrently(n: int, call: Callable[[int], Any]) -> list[Any]:
    results: list[Any] = [None] * n

    async def one(i: int) -> None:
        results[i] = await call(i)

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
    return results


def check(paid: list[float], results: list[ToolCallResult]) -> None:
    assert sum(paid) <= CAP and len(paid) == 5, paid  # $495: five fit, the sixth would not
    ran = [r for r in results if r.ran]
    assert len(ran) == len(paid) and all(not r.is_error and "paid $99" in r.content for r in ran)
    asked = [r for r in results if r.pending is not None]
    assert len(ran) + len(asked) == CALLS
    assert all("cap" in p.pending.reason for p in asked if p.pending is not None)


async def test_concurrent_engine_tool_calls_spend_at_most_the_cap() -> None:
    paid, pay = payments()
    engine = shop(pay)
    args: dict[str, Any] = {"to": "bob", "amount_usd": PRICE}
    results = await concurrently(CALLS, lambda i: engine.tool_call(ALICE, "pay", args))
    check(paid, results)
    # The ones past the cap wait on a decision, as a serial caller's would: approved, one runs.
    waiting = await engine.pending(ALICE)
    assert len(waiting) == CALLS - 5
    done = await engine.decide(ALICE, waiting[0].attempt_id, Approve())
    assert isinstance(done, ToolCallResult) and done.ran and len(paid) == 6


async def test_a_serial_caller_pauses_at_the_same_call() -> None:
    paid, pay = payments()
    engine = shop(pay)
    args: dict[str, Any] = {"to": "bob", "amount_usd": PRICE}
    results = [await engine.tool_call(ALICE, "pay", args) for _ in range(CALLS)]
    check(paid, results)


async def test_two_workers_on_one_store_spend_at_most_the_cap(tmp_path: Path) -> None:
    paid, pay = payments()
    one = await SQLiteSessionStore.open(tmp_path / "spend.db")
    two = await SQLiteSessionStore.open(tmp_path / "spend.db")
    try:
        workers = (shop(pay, one), shop(pay, two))
        args: dict[str, Any] = {"to": "bob", "amount_usd": PRICE}
        results = await concurrently(CALLS, lambda i: workers[i % 2].tool_call(ALICE, "pay", args))
    finally:
        await one.aclose()
        await two.aclose()
    check(paid, results)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # (uvicorn serves on asyncio)
async def test_two_mcp_servers_on_one_store_spend_at_most_the_cap(tmp_path: Path) -> None:
    from contextlib import AsyncExitStack

    import mcp.types as mt

    from mainspring.mcp.server import build_mcp_server
    from tests.mcp.test_server import http_session, text_of

    paid, pay = payments()
    agent = Agent(model=ScriptedModel([]), tools=[pay], permissions=RULES)
    asked: list[str] = []

    async def decline(context: Any, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        asked.append(params.message)
        return mt.ElicitResult(action="decline")

    args: dict[str, Any] = {"to": "bob", "amount_usd": PRICE}
    with anyio.fail_after(60):
        async with AsyncExitStack() as stack:
            stores = [await SQLiteSessionStore.open(tmp_path / "mcp.db") for _ in range(2)]
            for store in stores:
                stack.push_async_callback(store.aclose)
            servers = [build_mcp_server(agent, expose_confirm=True, store=s) for s in stores]
            sessions = [
                await stack.enter_async_context(http_session(server, elicitation=decline))
                for server in servers
            ]
            results = await concurrently(CALLS, lambda i: sessions[i % 2].call_tool("pay", args))
    assert len(paid) == 5 and sum(paid) <= CAP
    ran = [r for r in results if not r.is_error]
    assert len(ran) == 5 and all("paid $99" in text_of(r) for r in ran)
    assert len(asked) == CALLS - 5  # the others asked the client's user (who declined)
