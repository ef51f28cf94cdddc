"""A task group for the engine's own short-lived tasks: a step's reads, a run's writer.

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
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from functools import partial
from types import TracebackType
from typing import Any

import anyio
import anyio.abc

from mainspring._library import on_asyncio

__all__ = ["TaskGroup"]


_NO_SCOPES: set[anyio.CancelScope] = set()
"""The asyncio path keeps no per-task scopes (never added to)."""


class TaskGroup:
    """``async with TaskGroup() as reads: reads.start_soon(fn)``."""

    __slots__ = (
        "_exiting",
        "_failures",
        "_group",
        "_host",
        "_host_cancelled",
        "_idle",
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

    async def __aenter__(self) -> TaskGroup:
        if on_asyncio():
            self._host = asyncio.current_task()
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
            self._group.start_soon(self._scoped, fn)
            return
        task = asyncio.get_running_loop().create_task(fn())  # (no wrapper: one frame less)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def cancel(self) -> None:
        """Cancel every running task (the block itself goes on)."""
        if self._group is not None:
            for each in self._scopes:
                each.cancel()
            return
        for task in self._tasks:
            if not task.cancelling():  # once: a second cancel would cut its clean-up
                task.cancel()

    async def _scoped(self, fn: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        with anyio.CancelScope() as scope:
            self._scopes.add(scope)
            try:
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
        self._exiting = True
        failed = error  # the body's exception, or one raised while waiting below
        if error is not None:
            self.cancel()
        if self._tasks and not self._failures and error is None:
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

    async def _wait_idle(self) -> None:
        """Wait until the last task finished (or this task is cancelled)."""
        idle = self._idle = asyncio.get_running_loop().create_future()
        try:
            await idle
        finally:
            self._idle = None
