"""TaskGroup keeps a task group's semantics (on asyncio without its cost)."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from mainspring._lowlevel.tasks import TaskGroup

pytestmark = pytest.mark.anyio


async def test_the_block_waits_for_every_task() -> None:
    done: list[int] = []

    async def read(n: int) -> None:
        await anyio.sleep(0.01 * n)
        done.append(n)

    async with TaskGroup() as reads:
        for n in (3, 1, 2):
            reads.start_soon(lambda n=n: read(n))
    assert sorted(done) == [1, 2, 3]


async def test_a_failing_task_cancels_the_block_and_the_others_and_is_raised() -> None:
    cleaned: list[str] = []

    async def slow() -> None:
        try:
            await anyio.sleep(10)
        finally:
            cleaned.append("slow")

    async def fails() -> None:
        await anyio.lowlevel.checkpoint()
        raise ValueError("boom")

    with pytest.raises(BaseExceptionGroup) as caught:
        async with TaskGroup() as reads:
            reads.start_soon(slow)
            reads.start_soon(fails)
            await anyio.sleep(10)  # the block is cancelled too
    assert caught.group_contains(ValueError, match="boom")
    assert cleaned == ["slow"]


async def test_an_outer_cancel_cancels_the_tasks_and_waits_for_their_clean_up() -> None:
    cleaned: list[str] = []

    async def read() -> None:
        try:
            await anyio.sleep(10)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.01)  # clean-up that takes a moment
            cleaned.append("read")

    with anyio.CancelScope() as outer:
        async with TaskGroup() as reads:
            reads.start_soon(read)
            await anyio.lowlevel.checkpoint()
            outer.cancel()
            await anyio.sleep(10)
    assert outer.cancelled_caught and cleaned == ["read"]


async def test_an_outer_cancel_while_waiting_at_the_end_cancels_the_tasks() -> None:
    cleaned: list[str] = []

    async def read() -> None:
        try:
            await anyio.sleep(10)
        finally:
            cleaned.append("read")

    with anyio.move_on_after(0.05) as scope:
        async with TaskGroup() as reads:
            reads.start_soon(read)
    assert scope.cancelled_caught and cleaned == ["read"]


async def test_cancel_stops_the_tasks_and_the_block_goes_on() -> None:
    async def read() -> None:
        await anyio.sleep(10)

    async with TaskGroup() as reads:
        reads.start_soon(read)
        await anyio.lowlevel.checkpoint()
        reads.cancel()
        await anyio.sleep(0.01)
        went_on = True
    assert went_on


async def test_the_blocks_own_exception_cancels_the_tasks_and_propagates() -> None:
    cleaned: list[str] = []

    async def read() -> None:
        try:
            await anyio.sleep(10)
        finally:
            cleaned.append("read")

    with pytest.raises((KeyError, BaseExceptionGroup)) as caught:
        async with TaskGroup() as reads:
            reads.start_soon(read)
            await anyio.lowlevel.checkpoint()
            raise KeyError("model stream failed")
    if isinstance(caught.value, BaseExceptionGroup):  # trio's nursery wraps it
        assert caught.group_contains(KeyError)
    assert cleaned == ["read"]


@pytest.mark.parametrize("shielded", [True, False])
async def test_both_kinds_wait_for_a_failing_tasks_siblings_and_raise(shielded: bool) -> None:
    cleaned: list[str] = []

    async def slow() -> None:
        try:
            await anyio.sleep(10)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.01)  # a clean-up a second cancel would cut
            cleaned.append("slow")

    async def fails() -> None:
        await anyio.lowlevel.checkpoint()
        raise ValueError("boom")

    with pytest.raises(BaseExceptionGroup) as caught:
        async with TaskGroup(shielded=shielded) as reads:
            reads.start_soon(slow)
            reads.start_soon(fails)
            await anyio.sleep(10)
    assert caught.group_contains(ValueError, match="boom")
    assert cleaned == ["slow"]


async def test_a_failing_task_does_not_cut_a_shielded_section_of_the_block() -> None:
    finished: list[str] = []

    async def fails() -> None:
        await anyio.lowlevel.checkpoint()
        raise ValueError("boom")

    with pytest.raises(BaseExceptionGroup):
        async with TaskGroup() as group:
            group.start_soon(fails)
            with anyio.CancelScope(shield=True):  # a write that must finish
                await anyio.sleep(0.02)
                finished.append("write")
            await anyio.sleep(10)
    assert finished == ["write"]


async def test_an_outer_cancel_reaches_a_native_block_and_is_not_swallowed() -> None:
    async def read() -> None:
        await anyio.sleep(10)

    with anyio.move_on_after(0.02) as scope:
        async with TaskGroup(shielded=False) as reads:
            reads.start_soon(read)
            await anyio.sleep(10)
        raise AssertionError("the block must not swallow an outer cancel")
    assert scope.cancelled_caught


@pytest.mark.parametrize("width", [1, 2, 5])
async def test_an_unshielded_block_that_never_yields_still_waits_for_its_tasks(width: int) -> None:
    """Tasks start late (at the loop's next pass); a block ending first runs them all."""
    done: list[int] = []

    async def read(n: int) -> None:
        await anyio.lowlevel.checkpoint()
        done.append(n)

    async with TaskGroup(shielded=False) as reads:
        for n in range(width):
            reads.start_soon(read, n)
    assert sorted(done) == list(range(width))


async def test_a_task_run_at_the_blocks_end_keeps_its_context_to_itself() -> None:
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="block")
    seen: list[str] = []

    async def read() -> None:
        seen.append(var.get())
        var.set("read")
        await anyio.sleep(0.001)  # it suspends and resumes in its own context
        seen.append(var.get())

    var.set("before")
    async with TaskGroup(shielded=False) as reads:
        reads.start_soon(read)
    assert seen == ["before", "read"] and var.get() == "before"


async def test_tasks_started_late_still_run_concurrently_with_a_yielding_block() -> None:
    order: list[str] = []

    async def read() -> None:
        order.append("read")

    async with TaskGroup(shielded=False) as reads:
        reads.start_soon(read)
        await anyio.sleep(0.01)  # the block yields: the task runs meanwhile
        order.append("block")
    assert order == ["read", "block"]


async def test_cancel_before_a_late_task_started_means_it_never_runs() -> None:
    ran: list[str] = []

    async def read() -> None:
        ran.append("read")

    async with TaskGroup(shielded=False) as reads:
        reads.start_soon(read)
        reads.cancel()
    await anyio.sleep(0.01)
    assert ran == []


async def test_an_outer_cancel_stops_a_task_run_at_the_blocks_end_and_is_not_swallowed() -> None:
    cleaned: list[str] = []

    async def read() -> None:
        try:
            await anyio.sleep(10)
        finally:
            cleaned.append("read")

    with anyio.move_on_after(0.02) as scope:
        async with TaskGroup(shielded=False) as reads:
            reads.start_soon(read)
        raise AssertionError("the block must not swallow an outer cancel")
    assert scope.cancelled_caught and cleaned == ["read"]


async def test_a_task_run_at_the_blocks_end_that_fails_is_raised() -> None:
    async def fails() -> None:
        raise ValueError("boom")

    with pytest.raises(BaseExceptionGroup) as caught:
        async with TaskGroup(shielded=False) as reads:
            reads.start_soon(fails)
    assert caught.group_contains(ValueError, match="boom")
