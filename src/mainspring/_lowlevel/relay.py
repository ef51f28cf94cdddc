"""A single-producer, single-consumer event queue between two tasks.

Replaces an anyio memory object stream: pays 17.8 % of S1 (140 k instructions),
bench/F-figures.md.

Lighter than a memory object stream for the engine's one hot path: putting an
event is a list append (and a wake-up only when the consumer is waiting);
the consumer awaits only when the queue is empty. With a ``limit``, the
producer applies back-pressure itself: ``put`` never blocks (the engine emits
from plain callbacks), and the producer awaits :meth:`Relay.room` at its
checkpoints (after each model event) while the queue holds ``limit`` items.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Generator, Sequence
from typing import Generic, TypeVar

from mainspring._lowlevel.library import running_loop
from mainspring._lowlevel.wakeup import Wakeup

__all__ = ["Relay"]

T = TypeVar("T")


class Relay(Generic[T]):
    """Events from the producer to the consumer, in order."""

    __slots__ = ("_closed", "_items", "_room", "_waiter", "limit")

    def __init__(self, limit: int | None = None) -> None:
        self._items: list[T] | tuple[()] = ()
        """What is queued: a list, or the shared empty tuple while nothing is (a
        deque would hold a 64-slot block, and an empty list is one more object for
        the cyclic collector to walk, in every running stream's one or two relays)."""
        self._waiter: asyncio.Future[bool] | Wakeup | None = None
        """The consumer's: on asyncio the future it awaits itself (no coroutine frame
        per waiting stream), a Wakeup on trio."""
        self._room: Wakeup | None = None
        self._closed = False
        self.limit = limit

    def __len__(self) -> int:
        return len(self._items)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (nothing more will be queued)."""
        return self._closed

    @property
    def full(self) -> bool:
        """Whether the queue holds ``limit`` items or more (never, without a limit)."""
        return self.limit is not None and len(self._items) >= self.limit

    async def room(self) -> None:
        """Wait until the consumer has taken the queue below its limit (or closed it)."""
        while self.full and not self._closed:
            room = self._room = Wakeup()
            await room.wait()

    def put(self, item: T) -> None:
        """Queue ``item`` (dropped once the relay is closed)."""
        if self._closed:
            return
        items = self._items
        if items:  # (only ever empty as the shared tuple)
            items.append(item)
        else:
            self._items = [item]
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            _wake(waiter, True)

    def put_many(self, items: Sequence[T]) -> None:
        """Queue ``items``, in order (as many :meth:`put` calls)."""
        if self._closed or not items:
            return
        queued = self._items
        if queued:
            queued.extend(items)
        else:
            self._items = list(items)
        self.wake()

    def put_back(self, items: Sequence[T]) -> None:
        """Queue ``items`` again, first (taken by a consumer that could not pass them on)."""
        self._items = [*items, *self._items]

    def close(self) -> None:
        """No more items; a waiting consumer wakes up and drains the rest."""
        self._closed = True
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            _wake(waiter, bool(self._items))
        self._make_room()

    def drain(self) -> list[T]:
        """Take every queued item (possibly none) without waiting."""
        items, self._items = self._items, ()
        self._make_room()
        return items if items else []

    def _make_room(self) -> None:
        room = self._room
        if room is not None:
            self._room = None
            room.set()

    def wake(self) -> None:
        """Wake a waiting consumer without queuing anything (see :meth:`wait`)."""
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            _wake(waiter, True)

    def wait(self) -> Awaitable[bool]:
        """Wait for an item or a :meth:`wake`; ``False`` once closed and drained.

        With items queued (or closed and drained) it returns at once, without a
        coroutine; on asyncio a waiting consumer awaits one future, whose result
        whoever wakes it sets. After a ``wake`` it may return ``True`` with
        nothing queued.
        """
        if self._items:
            return _TRUE
        if self._closed:
            return _FALSE
        loop = running_loop()
        if loop is not None:  # (cancelled, the future is done: a wake skips it, a wait replaces it)
            future: asyncio.Future[bool] = loop.create_future()
            self._waiter = future
            return future
        return self._wait()

    async def _wait(self) -> bool:
        waiter = self._waiter = Wakeup()
        await waiter.wait()
        return bool(self._items) or not self._closed


def _wake(waiter: asyncio.Future[bool] | Wakeup, more: bool) -> None:
    """Wake the consumer: ``more`` is what its ``wait`` returns (on asyncio)."""
    if isinstance(waiter, Wakeup):
        waiter.set()
    elif not waiter.done():
        waiter.set_result(more)


class _Ready:
    """An awaitable that is done: awaiting it returns ``value`` without suspending."""

    __slots__ = ("value",)

    def __init__(self, value: bool) -> None:
        self.value = value

    def __await__(self) -> Generator[None, None, bool]:
        yield from ()  # (a generator that never yields: awaiting it runs no loop step)
        return self.value


_TRUE = _Ready(True)
_FALSE = _Ready(False)
