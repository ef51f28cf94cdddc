"""Run a session's producer as a task that does not live in the consumer's frame.

Why not a task group inside the event generator? Because a task group (a
cancel scope) held across ``yield`` breaks as soon as a consumer stops
iterating early: the generator is then closed later, from another task, and
the scope cannot be exited there (PEP 789). Here the producer is a task of its
own whose handle the session keeps: the session cancels it when the consumer
goes away and waits for its clean-up, so no task is ever left without an
owner and the consumer may ``break`` at any point.

asyncio: ``loop.create_task``; trio: ``trio.lowlevel.spawn_system_task``. On
both the task runs in a copy of the spawner's context, so context variables
(an engine's run scope: its caller) reach the run as they would a child task.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from typing import Any

from mainspring._library import running_loop

__all__ = ["spawn"]

_RUNNING: set[Any] = set()


def spawn(fn: Callable[[], Awaitable[None]]) -> None:
    """Start ``fn()`` as a background task; it must never raise (it reports through events)."""
    loop = running_loop()
    if loop is not None:
        awaitable = fn()  # (a coroutine is the task itself: no wrapper frame per stream)
        coro = awaitable if asyncio.iscoroutine(awaitable) else _run(lambda: awaitable)
        task = loop.create_task(coro)
        _RUNNING.add(task)  # keep a strong reference until it finishes
        task.add_done_callback(_RUNNING.discard)
    else:  # trio (anyio supports only these two)
        import trio

        trio.lowlevel.spawn_system_task(_run, fn, context=contextvars.copy_context())


async def _run(fn: Callable[[], Awaitable[None]]) -> None:
    await fn()
