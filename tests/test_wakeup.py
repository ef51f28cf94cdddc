"""Wakeup: the stream machinery's one-shot event (one waiter, no deque)."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from mainspring._lowlevel.wakeup import Wakeup

pytestmark = pytest.mark.anyio


async def test_a_wait_returns_once_set_from_another_task() -> None:
    wakeup = Wakeup()
    woke: list[str] = []

    async def waiter() -> None:
        await wakeup.wait()
        woke.append("woke")

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await anyio.lowlevel.checkpoint()
        assert woke == [] and not wakeup.is_set()
        wakeup.set()
    assert woke == ["woke"] and wakeup.is_set()


async def test_a_set_wakeup_returns_at_once_every_time() -> None:
    wakeup = Wakeup()
    wakeup.set()
    wakeup.set()  # a second set changes nothing
    with anyio.fail_after(60):
        await wakeup.wait()
        await wakeup.wait()


async def test_a_cancelled_wait_leaves_nothing_behind_and_can_wait_again() -> None:
    wakeup = Wakeup()
    with anyio.move_on_after(0.01) as scope:
        await wakeup.wait()
    assert scope.cancelled_caught and not wakeup.is_set()
    wakeup.set()  # no cancelled waiter to trip over
    with anyio.fail_after(60):
        await wakeup.wait()


async def test_a_second_waiter_is_refused() -> None:
    wakeup = Wakeup()
    refused: list[RuntimeError] = []

    async def second() -> None:
        try:
            await wakeup.wait()
        except RuntimeError as exc:
            refused.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(wakeup.wait)
        await anyio.lowlevel.checkpoint()
        tg.start_soon(second)
        await anyio.lowlevel.checkpoint()
        await anyio.lowlevel.checkpoint()
        wakeup.set()
    assert [str(e) for e in refused] == ["a Wakeup has one waiter at a time"]


async def test_a_cancelled_scope_wakes_the_waiter_with_cancellation() -> None:
    wakeup = Wakeup()
    async with anyio.create_task_group() as tg:
        tg.start_soon(wakeup.wait)
        await anyio.lowlevel.checkpoint()
        tg.cancel_scope.cancel()
    assert not wakeup.is_set()
    wakeup.set()


async def test_a_timed_wait_says_whether_it_was_set() -> None:
    wakeup = Wakeup()
    assert await wakeup.wait_for(0.001) is False  # nobody set it: the timer ended the wait
    assert not wakeup.is_set()

    async def setter() -> None:
        wakeup.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(setter)
        assert await wakeup.wait_for(60) is True  # woken long before the timer
    assert await wakeup.wait_for(60) is True  # set: at once


async def test_a_cancelled_timed_wait_leaves_nothing_behind() -> None:
    wakeup = Wakeup()
    with anyio.move_on_after(0.001):
        await wakeup.wait_for(60)
    assert not wakeup.is_set()
    assert await wakeup.wait_for(0.001) is False  # a waiter again, and the old timer is gone
    wakeup.set()
    assert await wakeup.wait_for(60) is True


async def test_a_second_timed_waiter_is_refused() -> None:
    wakeup = Wakeup()
    refused: list[RuntimeError] = []

    async def second() -> None:
        try:
            await wakeup.wait_for(60)
        except RuntimeError as exc:
            refused.append(exc)
        wakeup.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(wakeup.wait)
        await anyio.lowlevel.checkpoint()
        tg.start_soon(second)
    assert len(refused) == 1
