"""A task group for the engine's own short-lived tasks: a step's reads, a run's writer.

Replaces ``anyio.create_task_group()`` for a step's reads: pays 36.8 % of S1 (289 k
instructions), bench/F-figures.md.

Semantics of an anyio task group — the block waits for every task, a failing
task cancels the block and the others and is raised from it (in an exception
group), a cancelled block cancels the tasks and waits for them — at a sixth of
its cost on asyncio, where each task is one native task (anyio's task group
spends ~40 µs a task on bookkeeping these tasks do not need). On trio the block
is an anyio task group: trio's nursery is cheap already.

On asyncio a failing task stops the block through a cancel scope, which
respects the shields inside the body (a write that must finish, a commit).
A group whose tasks never raise (a step's reads: the dispatcher turns every
failure into a result) can do without that scope: ``TaskGroup(shielded=False)``
then cancels the block's task natively, as ``asyncio.TaskGroup`` does, and
takes back exactly that one cancellation.

Such a group also starts its first task late, the way Python 3.12's eager
tasks save one: ``start_soon`` queues the function and asks the loop to
start it at its next pass, about when a task made at once would first run
(the block has to yield for either). A block that reaches its end without
yielding first (a model stream that had every event at hand) runs it there,
in its own task, in a copy of the context as a task would: a single read
costs no task, no loop pass and no wake-up. A second function starts both
as tasks at once, in order (so their events reach a consumer in one batch,
as before).
"""

from __future__ import annotations

import asyncio
import contextvars
import types
from collections.abc import Callable, Coroutine, Generator
from functools import partial
from types import TracebackType
from typing import Any

import anyio
import anyio.abc

from mainspring._lowlevel.library import running_loop

__all__ = ["TaskGroup"]


_NO_SCOPES: set[anyio.CancelScope] = set()
"""The asyncio path keeps no per-task scopes (never added to)."""
_NO_PENDING: list[Any] = []
"""Nothing queued (never added to: a group makes its own list)."""


class TaskGroup:
    """``async with TaskGroup() as reads: reads.start_soon(fn)``."""

    __slots__ = (
        "_exiting",
        "_failures",
        "_group",
        "_host",
        "_host_cancelled",
        "_idle",
        "_late",
        "_loop",
        "_pending",
        "_scope",
        "_scopes",
        "_shielded",
        "_tasks",
    )

    def __init__(self, *, shielded: bool = True) -> None:
        self._shielded = shielded
        self._group: anyio.abc.TaskGroup | None = None
        self._scope: anyio.CancelScope | None = None
        """On asyncio with ``shielded``: the scope a failing task cancels."""
        self._host: asyncio.Task[Any] | None = None
        """On asyncio: the task running the block."""
        self._loop: asyncio.AbstractEventLoop  # (set on entering, on asyncio only)
        """On asyncio: the loop running the block (asked once: each asking is a system call)."""
        self._host_cancelled = False
        """Whether a failing task cancelled the block (a cancellation to take back)."""
        self._exiting = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._failures: list[BaseException] = []
        self._scopes: set[anyio.CancelScope] = _NO_SCOPES
        """On trio: each task's own scope, so :meth:`cancel` stops the tasks only."""
        self._idle: asyncio.Future[None] | None = None
        """What the block waits on for its last task: one future, not ``asyncio.wait``'s
        future, set and callback per task (a step's reads of 10,000 live streams)."""
        self._pending: list[Callable[[], Coroutine[Any, Any, Any]]] = _NO_PENDING
        """Unshielded, on asyncio: functions queued to start at the loop's next pass."""
        self._late: asyncio.Handle | None = None
        """The loop's call that starts what is pending."""

    async def __aenter__(self) -> TaskGroup:
        loop = running_loop()
        if loop is not None:
            self._loop = loop
            self._host = asyncio.current_task(loop)
            if self._shielded:
                self._scope = anyio.CancelScope()
                self._scope.__enter__()
        else:
            self._scopes = set()
            self._group = anyio.create_task_group()
            await self._group.__aenter__()
        return self

    def start_soon(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        """Start ``fn(*args)`` now; it runs concurrently with the block."""
        if args:
            fn = partial(fn, *args)
        if self._group is not None:
            scope = anyio.CancelScope()
            self._scopes.add(scope)  # now: a cancel before the task starts reaches it
            self._group.start_soon(self._scoped, scope, fn)
            return
        if self._shielded:
            self._start(fn)
            return
        if self._late is not None:  # a second one: both start now, in the order given
            self._pending.append(fn)
            self._start_pending()
        elif self._tasks:
            self._start(fn)
        else:
            self._pending = [fn]
            self._late = self._loop.call_soon(self._start_pending)

    def _start(self, fn: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        task = self._loop.create_task(fn())  # (no wrapper: one frame less)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _start_pending(self) -> None:
        """Start every queued function as a task (the loop's call, or the block's end)."""
        late, pending = self._late, self._pending
        self._late, self._pending = None, _NO_PENDING
        if late is not None:
            late.cancel()  # (a no-op when the loop is making this very call)
        for fn in pending:
            self._start(fn)

    def cancel(self) -> None:
        """Cancel every running task (the block itself goes on)."""
        if self._group is not None:
            for each in self._scopes:
                each.cancel()
            return
        if self._late is not None:  # never started: they never run, as a task cancelled early
            self._late.cancel()
            self._late, self._pending = None, _NO_PENDING
        for task in self._tasks:
            if not task.cancelling():  # once: a second cancel would cut its clean-up
                task.cancel()

    async def _scoped(
        self, scope: anyio.CancelScope, fn: Callable[[], Coroutine[Any, Any, Any]]
    ) -> None:
        try:
            if scope.cancel_called:  # cancelled before it started: it never runs
                return
            with scope:
                await fn()
        finally:
            self._scopes.discard(scope)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        idle = self._idle
        if not self._tasks and idle is not None and not idle.done():
            idle.set_result(None)
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            self._failures.append(error)
            self.cancel()
            if self._scope is not None:
                self._scope.cancel()  # as a task group would: the block stops too
                return
            host = self._host
            if not self._exiting and not self._host_cancelled and host is not None:
                self._host_cancelled = True
                host.cancel()  # as a task group would: the block stops too

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        if self._group is not None:
            return await self._group.__aexit__(kind, error, traceback)
        host = self._host
        assert host is not None
        failed = error  # the body's exception, or one raised while waiting below
        if self._late is not None and error is None:
            failed = await self._run_pending_here()
        self._exiting = True
        if error is not None:
            self.cancel()
        if self._tasks and not self._failures and failed is None:
            try:
                await self._wait_idle()
            except BaseException as exc:  # cancelled while it waited for the tasks
                failed = exc
                self.cancel()
        while self._tasks:
            # Shielded once cancelled: the block still waits for its tasks to finish.
            with anyio.CancelScope(shield=True):
                try:
                    await self._wait_idle()
                except asyncio.CancelledError as exc:  # sent before the shield held
                    failed = failed or exc
        swallowed = False
        if self._scope is not None:
            swallowed = bool(self._scope.__exit__(type(failed) if failed else None, failed, None))
        elif self._host_cancelled and host.uncancel() == 0:
            # The cancellation a failing task sent is taken back; one from outside stays.
            swallowed = isinstance(failed, asyncio.CancelledError)
        if self._failures:
            others = [] if failed is None or swallowed else [failed]
            raise BaseExceptionGroup("a read failed", [*self._failures, *others])
        if failed is not None and failed is not error and not swallowed:
            raise failed
        return swallowed or None

    async def _run_pending_here(self) -> BaseException | None:
        """The block did not yield since its one task was queued: it runs in this task.

        Returns the cancellation that stopped it, if one did.
        """
        late, (fn,) = self._late, self._pending
        assert late is not None
        late.cancel()
        self._late, self._pending = None, _NO_PENDING
        try:
            await _in_context(contextvars.copy_context(), fn())
        except Exception as exc:  # as a failing task: the others stop
            self._failures.append(exc)
            self.cancel()
        except BaseException as exc:  # cancelled (from outside, or by a failing task)
            self.cancel()
            return exc
        return None

    async def _wait_idle(self) -> None:
        """Wait until the last task finished (or this task is cancelled)."""
        idle = self._idle = self._loop.create_future()
        try:
            await idle
        finally:
            self._idle = None


@types.coroutine
def _in_context(
    context: contextvars.Context, coroutine: Coroutine[Any, Any, Any]
) -> Generator[Any, Any, Any]:
    """Await ``coroutine`` with each of its steps run in ``context`` (as its own task would)."""
    send, throw = coroutine.send, coroutine.throw
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = context.run(send, value) if error is None else context.run(throw, error)
        except StopIteration as stop:
            return stop.value
        try:
            value, error = (yield step), None
        except BaseException as exc:  # a cancellation of the block's task reaches the coroutine
            value, error = None, exc
