"""A run's lease renewal, with no task of its own until the run outlasts a third of the lease.

Most runs end well before their lease would need renewing, so the renewal is a
:class:`~mainspring._lowlevel.timers.DueTask`: a task only once the first renewal is
due (which then renews every third of the lease until the run stops it).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio

from mainspring._lowlevel.library import running_loop
from mainspring._lowlevel.timers import DueTask
from mainspring._lowlevel.wakeup import Wakeup

__all__ = ["LeaseKeeper", "now"]


def now() -> float:
    """The event loop's clock (``anyio.current_time``, without its backend lookup on asyncio)."""
    loop = running_loop()
    if loop is not None:
        return loop.time()
    return anyio.current_time()


class LeaseKeeper:
    """Starts ``renew(stop)`` when the first renewal is due, and stops it with the run."""

    __slots__ = ("_due", "_finished", "_renew", "_stop")

    def __init__(self, renew: Callable[[Wakeup], Awaitable[None]]) -> None:
        """``renew`` renews the lease until its ``stop`` is set (it waits on its own)."""
        self._renew = renew
        self._stop = Wakeup()
        self._due = DueTask(self._begin)
        self._finished: Wakeup | None = None
        """Set when the renewal task ends; ``None`` while no task was started."""

    def start(self, due: float) -> None:
        """Renew from ``due`` on (the event loop's clock, as ``anyio.current_time``)."""
        self._due.start(due)

    def _begin(self) -> Coroutine[Any, Any, None] | None:
        if self._stop.is_set():
            return None
        self._finished = Wakeup()
        return self._run()

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
        self._due.cancel()
        finished = self._finished
        if finished is not None:
            await finished.wait()
