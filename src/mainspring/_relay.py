"""A single-producer, single-consumer event queue between two tasks.

Lighter than a memory object stream for the engine's one hot path: putting an
event is a deque append (and a wake-up only when the consumer is waiting);
the consumer awaits only when the queue is empty.
"""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

import anyio

__all__ = ["Relay"]

T = TypeVar("T")


class Relay(Generic[T]):
    """Events from the producer to the consumer, in order."""

    __slots__ = ("_closed", "_items", "_waiter")

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self._waiter: anyio.Event | None = None
        self._closed = False

    def put(self, item: T) -> None:
        """Queue ``item`` (dropped once the relay is closed)."""
        if self._closed:
            return
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            waiter.set()

    def close(self) -> None:
        """No more items; a waiting consumer wakes up and drains the rest."""
        self._closed = True
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            waiter.set()

    def drain(self) -> list[T]:
        """Take every queued item (possibly none) without waiting."""
        items = list(self._items)
        self._items.clear()
        return items

    async def wait(self) -> bool:
        """Wait until an item is queued; ``False`` once closed and drained."""
        while not self._items:
            if self._closed:
                return False
            waiter = self._waiter = anyio.Event()
            await waiter.wait()
        return True
