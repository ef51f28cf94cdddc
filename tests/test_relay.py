"""Relay: the run's event queue between the producer and the consumer (one waiter)."""

from __future__ import annotations

import anyio
import pytest

from mainspring._lowlevel.relay import Relay

pytestmark = pytest.mark.anyio


async def _waiting(relay: Relay[int], got: list[object]) -> None:
    more = await relay.wait()
    got.append((more, relay.drain()))


async def test_a_waiting_consumer_wakes_for_an_item() -> None:
    relay: Relay[int] = Relay()
    got: list[object] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_waiting, relay, got)
        await anyio.wait_all_tasks_blocked()  # (the consumer waits)
        assert got == []
        relay.put(1)
        relay.put(2)
    assert got == [(True, [1, 2])]


async def test_a_close_wakes_it_with_false_when_nothing_is_left() -> None:
    relay: Relay[int] = Relay()
    got: list[object] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_waiting, relay, got)
        await anyio.wait_all_tasks_blocked()  # (the consumer waits)
        relay.close()
    assert got == [(False, [])]
    assert await relay.wait() is False


async def test_a_close_after_an_item_still_hands_the_item_over() -> None:
    relay: Relay[int] = Relay()
    got: list[object] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_waiting, relay, got)
        await anyio.wait_all_tasks_blocked()  # (the consumer waits)
        relay.put(7)
        relay.close()
    assert got == [(True, [7])]
    assert await relay.wait() is False


async def test_a_wake_without_items_returns_true_with_nothing_queued() -> None:
    relay: Relay[int] = Relay()
    got: list[object] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_waiting, relay, got)
        await anyio.wait_all_tasks_blocked()  # (the consumer waits)
        relay.wake()
    assert got == [(True, [])]


async def test_a_cancelled_wait_leaves_nothing_behind() -> None:
    relay: Relay[int] = Relay()
    with anyio.move_on_after(0.01):
        await relay.wait()
    relay.put(3)  # (the cancelled waiter is skipped)
    assert await relay.wait() is True and relay.drain() == [3]
    got: list[object] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_waiting, relay, got)
        await anyio.wait_all_tasks_blocked()  # (the consumer waits)
        relay.put(4)
    assert got == [(True, [4])]


async def test_queued_items_return_at_once_without_a_checkpoint() -> None:
    relay: Relay[int] = Relay()
    relay.put(1)
    with anyio.CancelScope() as scope:
        scope.cancel()
        assert await relay.wait() is True  # (no checkpoint: the cancel is not delivered)
    assert relay.drain() == [1]
