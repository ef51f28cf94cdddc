"""A run's lease renewal, with no task of its own until the run outlasts a third of the lease.

Most runs end well before their lease would need renewing, and a task costs
as much as a run's whole durable commit. So on asyncio a loop timer waits for
the first renewal; only when it fires does the renewal become a task (which
then renews every third of the lease until the run stops it). On trio, which
has no loop timers to borrow, the renewal is a task from the start.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import anyio

from mainspring._lowlevel.library import running_loop
from mainspring._lowlevel.wakeup import Wakeup

__all__ = ["LeaseKeeper", "now"]

_RUNNING: set[asyncio.Task[None]] = set()
"""Renewal tasks running on asyncio (a strong reference until each finishes)."""


def now() -> float:
    """The event loop's clock (``anyio.current_time``, without its backend lookup on asyncio)."""
    loop = running_loop()
    if loop is not None:
        return loop.time()
    return anyio.current_time()


class LeaseKeeper:
    """Starts ``renew(stop)`` when the first renewal is due, and stops it with the run."""

    __slots__ = ("_finished", "_renew", "_stop", "_timer")

    def __init__(self, renew: Callable[[Wakeup], Awaitable[None]]) -> None:
        """``renew`` renews the lease until its ``stop`` is set (it waits on its own)."""
        self._renew = renew
        self._stop = Wakeup()
        self._timer: asyncio.TimerHandle | None = None
        self._finished: Wakeup | None = None
        """Set when the renewal task ends; ``None`` while no task was started."""

    def start(self, due: float) -> None:
        """Renew from ``due`` on (the event loop's clock, as ``anyio.current_time``)."""
        loop = running_loop()
        if loop is not None:
            self._timer = loop.call_at(due, self._spawn)
        else:
            self._spawn()

    def _spawn(self) -> None:
        self._timer = None
        if self._stop.is_set():
            return
        self._finished = Wakeup()
        loop = running_loop()
        if loop is not None:
            task = loop.create_task(self._run())
            _RUNNING.add(task)
            task.add_done_callback(_RUNNING.discard)
        else:
            import trio

            trio.lowlevel.spawn_system_task(self._run)

    async def _run(self) -> None:
        finished = self._finished
        try:
            await self._renew(self._stop)
        except Exception:  # a renewal task reports nothing to anyone: the lease expires
            logging.getLogger("mainspring.session").exception("the lease renewal failed")
        finally:
            if finished is not None:
                finished.set()

    async def stop(self) -> None:
        """Stop renewing; returns once a running renewal is done (at once without one).

        Safe to cancel: the renewal stops at its next wait by itself.
        """
        self._stop.set()
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        finished = self._finished
        if finished is not None:
            await finished.wait()
