"""A read's deadline on asyncio, armed only once the read waits.

Replaces a cancel scope with a deadline (``anyio.move_on_after``) around each read: pays
7.5 % of S1 (59 k instructions), bench/F-figures.md.

Every tool call has a deadline (:meth:`~mainspring._run.dispatch.Dispatcher.execute`).
A cancel scope with a deadline costs a read about 55,000 instructions on
asyncio (the scope 30,000, a timer armed and cancelled 15,000, the clock
asked through anyio 8,000): 7 % of a whole one-read turn, and a read that
answers at once (most do) could not have been stopped anyway, since nothing
can interrupt a coroutine that never waits. So the dispatcher runs a read's first
step itself; only a read that then waits gets a timer (:func:`finish_by`),
for what is left of its deadline (counted from the call's start).

That timer cannot be a cancel scope: the read's first step may have entered
scopes of its own (a task group, ``anyio.fail_after``), and a scope entered
now would sit inside theirs, the wrong way round when they exit. It cancels
the task natively instead, as ``asyncio.timeout`` does, and takes back
exactly that one cancellation: a cancellation from outside that arrives as
well still goes through. On trio, and for writes (shielded from the
turn's cancellation from their start), the dispatcher keeps its cancel scope.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Coroutine, Generator
from typing import Any, Final

__all__ = ["EXPIRED", "finish_by"]

EXPIRED: Final = object()
"""What :func:`finish_by` returns when the deadline stopped the call."""

_RECHECK = 0.05
"""Seconds between looks at the deadline while another cancellation is on its way."""


class _Timer:
    """The deadline of one waiting call.

    It cancels the call's task once, unless another cancellation is on its way.
    """

    __slots__ = ("before", "handle", "loop", "sent", "task")

    def __init__(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        task = asyncio.current_task(loop)
        assert task is not None  # (a coroutine awaited on asyncio runs in a task)
        self.loop, self.task = loop, task
        self.before = task.cancelling()
        """Cancellations requested before: this one is taken back down to them."""
        self.sent = False
        """Whether this deadline's cancellation was requested (and not yet taken back)."""
        self.handle = loop.call_at(deadline, self.expire)

    def expire(self) -> None:
        if self.task.cancelling() > self.before:
            # Another cancellation is on its way and will end the call: a second
            # request would fold into it, and its message (which anyio's scopes
            # read to know their own) could become this one's. Look again later.
            self.handle = self.loop.call_at(self.loop.time() + _RECHECK, self.expire)
            return
        self.sent = True
        self.task.cancel()

    def take_back(self) -> bool:
        """Undo this deadline's cancellation; whether it was the only one pending."""
        self.sent = False
        return self.task.uncancel() <= self.before


@types.coroutine
def finish_by(
    coroutine: Coroutine[Any, Any, Any],
    step: Any,
    loop: asyncio.AbstractEventLoop,
    deadline: float,
) -> Generator[Any, Any, Any]:
    """Await ``coroutine``, suspended at ``step``, until ``deadline`` (``loop.time()``).

    Returns what the coroutine returns, or :data:`EXPIRED` when the deadline
    cancelled it (a coroutine that catches that cancellation and returns
    anyway is taken at its word). What it raises propagates, and so does a
    cancellation of the task from anywhere else.
    """
    timer = _Timer(loop, deadline)
    send, throw = coroutine.send, coroutine.throw
    try:
        while True:
            try:
                value = yield step
            except BaseException as exc:  # (passed on to the coroutine)
                try:
                    step = throw(exc)
                except StopIteration as stop:
                    return stop.value
                continue
            try:
                step = send(value)
            except StopIteration as stop:
                return stop.value
    except asyncio.CancelledError:
        if timer.sent and timer.take_back():
            return EXPIRED  # only this deadline's cancellation: the call timed out
        raise
    finally:
        timer.handle.cancel()
        if timer.sent:  # it caught the cancellation and went on: take it back all the same
            timer.take_back()
