"""DueTask: a background task started when it is due, or never.

Replaces a task started at once that sleeps until it is due (what it is on trio):
pays 8.7 % of the durable S1 (149 k instructions), bench/F-figures.md.

A run's lease renewal is due only once the run outlasts a third of its lease, and most runs
end well before. On asyncio a loop timer waits for the due time; only when it fires does
the work become a task. Cancelled first, it never becomes one. Trio has no loop timers to
borrow, so there the task starts at once and waits for the due time itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from mainspring._lowlevel.background import spawn
from mainspring._lowlevel.library import running_loop

__all__ = ["DueTask"]


class DueTask:
    """``start(due)``: at ``due``, ``make()``'s coroutine runs as a background task.

    ``make`` may return ``None`` to start nothing after all. The coroutine must not
    raise (it runs as :func:`~mainspring._lowlevel.background.spawn` runs it).
    """

    __slots__ = ("_make", "_timer")

    def __init__(self, make: Callable[[], Coroutine[Any, Any, None] | None]) -> None:
        self._make: Callable[[], Coroutine[Any, Any, None] | None] | None = make
        """Until the task starts or is cancelled (then ``None``: the owner that made this
        and is referenced by ``make`` is freed by reference counting alone)."""
        self._timer: asyncio.TimerHandle | None = None

    def start(self, due: float) -> None:
        """Start the task at ``due`` (the event loop's clock, as ``anyio.current_time``).

        On trio the task starts now: it has to wait for ``due`` itself.
        """
        loop = running_loop()
        if loop is not None:
            self._timer = loop.call_at(due, self._due)
        else:
            self._due()

    def cancel(self) -> None:
        """Never start the task, if it has not started yet (a started one runs on)."""
        self._make = None
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _due(self) -> None:
        make, self._make, self._timer = self._make, None, None
        coroutine = make() if make is not None else None
        if coroutine is not None:
            spawn(coroutine)
