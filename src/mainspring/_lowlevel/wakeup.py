"""Wakeup: a one-shot event with one waiter at a time, for the stream machinery.

Replaces ``anyio.Event``: with :mod:`~mainspring._lowlevel.library` (which it stands on)
pays 4.4 % of S1 and 3.7 % of the durable S1, and 1.1 KiB of the 10k live sessions'
RSS per session, bench/F-figures.md (on its own, 1.9 % of S1 and 1.6 % of the durable S1).

``anyio.Event`` on asyncio wraps an ``asyncio.Event``, whose waiter deque
alone holds a 64-slot block (over 600 bytes) from the moment it is made. A
running stream keeps a few of them (the relay's waiter, the producer's done
signal), so a process running 10,000 streams paid for tens of thousands. A
Wakeup is two slots; while someone waits it holds one future (asyncio) or one
``anyio.Event`` (trio, where events are light already).

Unlike ``anyio.Event.wait``, waiting on a Wakeup that is set returns at once,
without a checkpoint: its callers wait only at points that yield anyway.
"""

from __future__ import annotations

import asyncio

import anyio

from mainspring._lowlevel.library import running_loop

__all__ = ["Wakeup"]


class Wakeup:
    """``set()`` once; ``await wait()`` from one task at a time."""

    __slots__ = ("_set", "_waiter")

    def __init__(self) -> None:
        self._set = False
        self._waiter: asyncio.Future[None] | anyio.Event | None = None

    def is_set(self) -> bool:
        """Whether :meth:`set` was called."""
        return self._set

    def set(self) -> None:
        """Wake the waiter (if any); later waits return at once."""
        if self._set:
            return
        self._set = True
        waiter, self._waiter = self._waiter, None
        if isinstance(waiter, anyio.Event):
            waiter.set()
        elif waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        """Return once set. Safe to cancel: nothing is left behind, and it can be awaited again.

        Raises:
            RuntimeError: Another task is waiting already.
        """
        if self._set:
            return
        if self._waiter is not None:
            raise RuntimeError("a Wakeup has one waiter at a time")
        loop = running_loop()
        if loop is not None:
            future: asyncio.Future[None] = loop.create_future()
            self._waiter = future
            try:
                await future
            finally:
                if self._waiter is future:
                    self._waiter = None
            return
        event = self._waiter = anyio.Event()
        try:
            await event.wait()
        finally:
            if self._waiter is event:
                self._waiter = None

    async def wait_for(self, seconds: float) -> bool:
        """Wait until set, at most ``seconds``; whether it was set. Safe to cancel.

        On asyncio a timer on the loop, not a cancel scope (a run's lease
        renewal waits like this once a run).

        Raises:
            RuntimeError: Another task is waiting already.
        """
        if self._set:
            return True
        loop = running_loop()
        if loop is None:
            with anyio.move_on_after(seconds):
                await self.wait()
            return self._set
        if self._waiter is not None:
            raise RuntimeError("a Wakeup has one waiter at a time")
        future: asyncio.Future[None] = loop.create_future()
        self._waiter = future
        timer = loop.call_later(seconds, _expire, future)
        try:
            await future
        finally:
            timer.cancel()
            if self._waiter is future:
                self._waiter = None
        return self._set


def _expire(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
