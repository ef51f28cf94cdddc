"""The auto-spend cap and the budget hold across workers, without a run lock.

Two workers are two sets of store objects on one SQLite file (each its own
connection, as two processes have), both serving the same session from the
state they loaded before either ran: each alone is under the limit, together
they are over it. The store's atomic add is what stops the second.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import anyio
import pytest

from mainspring import (
    Agent,
    Limits,
    PendingAction,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    TurnComplete,
    tool,
    usd,
)
from mainspring.cost import ModelPrice
from mainspring.messages import Message
from mainspring.permissions import PermissionRules, UsdTiers
from mainspring.stores import InMemorySessionStore, SessionStore, SQLiteSessionStore
from mainspring.testing import collect
from mainspring.usage import Usage

pytestmark = pytest.mark.anyio

paid: list[float] = []


@tool(permission=usd(lambda args: float(str(args["amount_usd"]))))
def pay(to: str, amount_usd: float) -> str:
    """Pay someone."""
    paid.append(amount_usd)
    return f"paid ${amount_usd:g} to {to}"


def pay_once(messages: Sequence[Message], tools: object) -> ScriptedResponse | str:
    if messages[-1].role == "tool":
        return "Paid."
    return ScriptedResponse(tool_calls=[ScriptedCall("pay", {"to": "bob", "amount_usd": 60})])


def payer() -> Agent:
    tiers = UsdTiers(auto_below_usd=100, session_auto_cap_usd=100)
    return Agent(
        model=ScriptedModel(pay_once), tools=[pay], permissions=PermissionRules(usd_tiers=tiers)
    )


@pytest.fixture
async def workers(tmp_path: Path) -> AsyncIterator[tuple[SessionStore, SessionStore]]:
    one = await SQLiteSessionStore.open(tmp_path / "shared.db")
    two = await SQLiteSessionStore.open(tmp_path / "shared.db")
    try:
        yield one, two
    finally:
        await one.aclose()
        await two.aclose()


async def test_the_auto_spend_cap_counts_every_workers_auto_approved_writes(
    workers: tuple[SessionStore, SessionStore],
) -> None:
    paid.clear()
    one, two = workers
    first = Session(payer(), session_store=one)
    await first.save()
    # Both workers load the session before either pays: each sees $0 auto-spent.
    second = await Session.load(payer(), two, first.session_id)
    done = await collect(first.send("pay bob $60"))
    assert isinstance(done[-1], TurnComplete) and paid == [60]
    asked = await collect(second.send("pay bob $60 again"))
    pending = asked[-2]
    assert isinstance(pending, PendingAction), "the second $60 would take the session to $120"
    assert "all workers" in pending.reason and "$100.00" in pending.reason
    assert paid == [60]
    stored = await one.load(first.session_id)
    assert stored is not None


async def test_concurrent_workers_never_auto_approve_past_the_cap(
    workers: tuple[SessionStore, SessionStore],
) -> None:
    paid.clear()
    one, two = workers
    first = Session(payer(), session_store=one)
    await first.save()
    second = await Session.load(payer(), two, first.session_id)
    results: list[list[object]] = []

    async def run(session: Session, text: str) -> None:
        results.append(list(await collect(session.send(text))))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, first, "pay bob $60")
        tg.start_soon(run, second, "pay bob $60 too")
    assert paid == [60]  # exactly one ran; the other asks
    assert sum(isinstance(r[-2], PendingAction) for r in results) == 1


def spender(messages: Sequence[Message], tools: object) -> ScriptedResponse | str:
    # 100 input tokens at $1 a million: $0.0001 a call.
    return ScriptedResponse(text="An answer that costs money.", usage=Usage(input_tokens=100))


def priced() -> Agent:
    model = ScriptedModel(spender, name="priced-model")
    return Agent(
        model=model,
        prices={"priced-model": ModelPrice(input=1.0, output=0.0)},
        limits=Limits(budget_usd=0.00015),  # one call is under it, two are over
    )


async def test_the_budget_counts_what_every_worker_spent(
    workers: tuple[SessionStore, SessionStore],
) -> None:
    one, two = workers
    first = Session(priced(), session_store=one)
    await first.save()
    second = await Session.load(priced(), two, first.session_id)
    spent = await collect(first.send("hello"))
    assert isinstance(spent[-1], TurnComplete) and spent[-1].stop_reason == "end_turn"
    one_call = first.cost_usd
    assert one_call == pytest.approx(0.0001)
    again = await collect(second.send("hello"))
    assert isinstance(again[-1], TurnComplete)
    assert second.cost_usd >= 2 * one_call * 0.99  # the other worker's spend counted here
    more = await collect(second.send("and again"))
    assert isinstance(more[-1], TurnComplete) and more[-1].stop_reason == "budget_exceeded"


async def test_a_store_without_a_spend_ledger_keeps_the_old_local_cap() -> None:
    paid.clear()
    store = InMemorySessionStore()
    session = Session(payer(), session_store=store)
    done = await collect(session.send("pay"))
    assert isinstance(done[-1], TurnComplete) and paid == [60]
    assert session.state.auto_spent_usd == 60
