"""Paused engine calls live in the shared store: any worker decides them, once; bounded per caller.

Two workers are two engines on two connections to one SQLite file (as two
processes have); ``tests/server/test_engine_workers.py`` does the same with
real worker processes through the signed route.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from mainspring import Approve, tool
from mainspring.engine import Caller, Engine, ManagementPolicy, ToolCallResult
from mainspring.engine import paused as paused_module
from mainspring.errors import ApprovalError, CallerBusy, StoreError, UnknownAttempt
from mainspring.stores import SQLiteSessionStore

pytestmark = pytest.mark.anyio

ALICE, BOB = Caller("alice"), Caller("bob")
closed: list[str] = []


@tool(permission="confirm")
def close_account(account: str) -> str:
    """Close an account."""
    closed.append(account)
    return f"closed {account}"


def bank(store: SQLiteSessionStore) -> Engine:
    return Engine("bank", policy=ManagementPolicy(visibility="protected"), records=store).add_tool(
        close_account, export=True
    )


@pytest.fixture
async def two(tmp_path: Path) -> AsyncIterator[tuple[Engine, Engine]]:
    closed.clear()
    one = await SQLiteSessionStore.open(tmp_path / "shared.db")
    other = await SQLiteSessionStore.open(tmp_path / "shared.db")
    try:
        yield bank(one), bank(other)
    finally:
        await one.aclose()
        await other.aclose()


async def test_a_call_paused_on_one_worker_is_decided_on_the_other(
    two: tuple[Engine, Engine],
) -> None:
    a, b = two
    first = await a.tool_call(BOB, "close_account", {"account": "acme"})
    assert first.pending is not None and closed == []
    assert await b.pending(BOB) == (first.pending,) == await a.pending(BOB)
    assert await b.pending(ALICE) == ()
    with pytest.raises(UnknownAttempt):  # another caller cannot decide it, on any worker
        await b.decide(ALICE, first.pending.attempt_id, Approve())
    done = await b.decide(BOB, first.pending.attempt_id, Approve())
    assert isinstance(done, ToolCallResult) and done.ran and done.content == "closed acme"
    with pytest.raises(UnknownAttempt):  # taken: never applied twice
        await a.decide(BOB, first.pending.attempt_id, Approve())
    assert closed == ["acme"] and await a.pending(BOB) == ()


async def test_racing_decisions_on_two_workers_run_the_call_once(
    two: tuple[Engine, Engine],
) -> None:
    a, b = two
    first = await a.tool_call(BOB, "close_account", {"account": "acme"})
    assert first.pending is not None
    outcomes: list[str] = []

    async def decide(engine: Engine) -> None:
        assert first.pending is not None
        try:
            await engine.decide(BOB, first.pending.attempt_id, Approve())
            outcomes.append("ran")
        except UnknownAttempt:
            outcomes.append("unknown")

    async with anyio.create_task_group() as tg:
        for engine in (a, b, a, b):
            tg.start_soon(decide, engine)
    assert sorted(outcomes) == ["ran", "unknown", "unknown", "unknown"]
    assert closed == ["acme"]


async def test_paused_calls_per_caller_are_bounded_with_a_clear_error(
    two: tuple[Engine, Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(paused_module, "MAX_PAUSED", 2)
    a, b = two
    held = [await a.tool_call(BOB, "close_account", {"account": f"n{n}"}) for n in range(2)]
    with pytest.raises(CallerBusy, match="holds 2 paused calls"):
        await b.tool_call(BOB, "close_account", {"account": "third"})
    assert len(await a.pending(BOB)) == 2, "the refused one is not parked"
    other = await b.tool_call(ALICE, "close_account", {"account": "hers"})  # per caller
    assert other.pending is not None
    first = held[0].pending
    assert first is not None
    await b.decide(BOB, first.attempt_id, Approve())
    again = await a.tool_call(BOB, "close_account", {"account": "third"})  # room again
    assert again.pending is not None
    assert closed == ["n0"], "a refused pause never runs"


async def test_a_refused_decision_on_one_worker_leaves_the_call_waiting_for_all(
    two: tuple[Engine, Engine],
) -> None:
    a, b = two
    first = await a.tool_call(BOB, "close_account", {"account": "acme"})
    assert first.pending is not None
    with pytest.raises(ApprovalError, match="not modifiable"):
        await b.decide(BOB, first.pending.attempt_id, Approve(edits={"account": "other"}))
    assert await a.pending(BOB) == (first.pending,) and closed == []
    done = await a.decide(BOB, first.pending.attempt_id, Approve())
    assert isinstance(done, ToolCallResult) and done.content == "closed acme"


@pytest.mark.parametrize(
    "text", ["", "[]", '{"kind": "call"}', '{"kind": "other", "name": "x"}', "{nope"]
)
def test_a_parked_record_that_cannot_be_decoded_is_a_store_error(text: str) -> None:
    with pytest.raises(StoreError, match="cannot be decoded"):
        paused_module.Parked.loads(text)


class _CancelAfterTake:
    """The store, but the caller of ``take_record`` is cancelled the moment the take returns."""

    def __init__(self, store: SQLiteSessionStore, scope: anyio.CancelScope) -> None:
        self._store, self._scope = store, scope

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    async def take_record(self, kind: str, key: str) -> tuple[str, str] | None:
        taken = await self._store.take_record(kind, key)
        self._scope.cancel()  # the caller gave up: its next checkpoint raises
        return taken


async def test_a_decision_cancelled_before_it_applies_leaves_the_call_waiting(
    two: tuple[Engine, Engine],
) -> None:
    # Found by the fleet property test: a caller that cancelled its decision just
    # after the paused call was taken lost the call (it never ran, nobody could decide it).
    a, b = two
    first = await a.tool_call(BOB, "close_account", {"account": "acme"})
    assert first.pending is not None
    store = a.records
    assert isinstance(store, SQLiteSessionStore)
    with anyio.CancelScope() as scope:
        a.records = _CancelAfterTake(store, scope)  # type: ignore[assignment]  # a test double
        await a.decide(BOB, first.pending.attempt_id, Approve())
    a.records = store
    assert scope.cancelled_caught and closed == []
    assert await b.pending(BOB) == (first.pending,)  # still waiting, for any worker
    done = await b.decide(BOB, first.pending.attempt_id, Approve())
    assert isinstance(done, ToolCallResult) and done.ran and closed == ["acme"]
