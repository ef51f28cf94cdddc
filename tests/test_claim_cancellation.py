"""A ``resume`` cancelled while its decision is being claimed leaves nothing wedged.

The claim reaches the store, then the caller cancels (a client that hung up)
before the claim returns. The same ``Session`` object must go on when the
decision is posted again: no ``DecisionConflict … by another worker`` for
its own claim, no ``SessionBusy`` after it, and the write runs once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from mainspring import (
    Agent,
    Approve,
    PendingAction,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    TurnComplete,
    tool,
)
from mainspring.stores import SessionStore
from mainspring.stores.urls import open_stores
from tests.helpers import send

pytestmark = pytest.mark.anyio


class SlowClaims:
    """A session store whose claims are on record before they return (and wait there)."""

    def __init__(self, inner: SessionStore) -> None:
        self._inner = inner
        self.claimed = anyio.Event()
        self.gate = anyio.Event()

    async def claim_decision(self, session_id: str, attempt_id: str, decision: str) -> bool:
        claimed = await self._inner.claim_decision(session_id, attempt_id, decision)
        self.claimed.set()
        await self.gate.wait()  # the caller is cancelled here, its claim on record
        return claimed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def payer(paid: list[str]) -> Agent:
    @tool(permission="confirm")
    def pay(amount: float) -> str:
        """Pay (asks first)."""
        paid.append(f"pay {amount:g}")
        return "paid"

    model = ScriptedModel(
        [ScriptedResponse(tool_calls=[ScriptedCall("pay", {"amount": 50})]), "Paid.", "Hi."]
    )
    return Agent(model=model, tools=[pay])


@pytest.mark.parametrize("locked", [False, True], ids=["no-run-lock", "run-lock"])
async def test_a_resume_cancelled_mid_claim_can_be_posted_again(
    locked: bool, tmp_path: Path
) -> None:
    paid: list[str] = []
    url = f"sqlite:///{tmp_path / 's.db'}"
    stores = await open_stores(sessions=url, locks=url)
    assert stores.sessions is not None
    slow = SlowClaims(stores.sessions)
    try:
        lock = stores.locks if locked else None
        session = Session(payer(paid), session_store=slow, run_lock=lock)
        asked = await send(session, "pay")
        pending = asked[-2]
        assert isinstance(pending, PendingAction)

        async def decide() -> None:
            async for _ in session.resume(pending.attempt_id, Approve()):
                pass

        async with anyio.create_task_group() as tg:
            tg.start_soon(decide)
            await slow.claimed.wait()
            tg.cancel_scope.cancel()  # the caller hangs up mid-claim
            slow.gate.set()
        # Whatever the cancel stopped, the same object goes on: the same decision again.
        if session.pending is not None:
            events = [e async for e in session.resume(pending.attempt_id, Approve())]
            assert isinstance(events[-1], TurnComplete), events[-1]
        assert paid == ["pay 50"]
        more = await send(session, "hello")
        assert isinstance(more[-1], TurnComplete) and more[-1].stop_reason == "end_turn"
    finally:
        await stores.aclose()
