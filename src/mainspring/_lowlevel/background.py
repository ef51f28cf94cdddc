"""Run a session's producer as a task that does not live in the consumer's frame.

Replaces a task with a done callback (``releases``): pays 12.5 % of the 10k live sessions'
RSS and 19 % of their peak (0.8 and 1.1 KiB a session), bench/F-figures.md.

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
from collections.abc import Coroutine
from typing import Any

from mainspring._lowlevel.library import running_loop

__all__ = ["release", "spawn"]

_RUNNING: set[Any] = set()


def spawn(coro: Coroutine[Any, Any, None], *, releases: bool = False) -> None:
    """Run ``coro`` as a background task; it must never raise (it reports through events).

    (A coroutine, not a function making one: the coroutine is the task itself,
    with no wrapper frame or partial per stream on asyncio.)

    With ``releases``, the coroutine calls :func:`release` as the last thing it
    does (in its outermost ``finally``) instead of the task getting a done
    callback: the finished task is then freed as its last step returns, not a
    loop pass later along with its callback list, its handle and asyncio's and
    anyio's records of it (about 0.8 KiB a stream when 10,000 finish at once).
    """
    loop = running_loop()
    if loop is not None:
        task = loop.create_task(coro)
        _RUNNING.add(task)  # keep a strong reference until it finishes
        if not releases:
            task.add_done_callback(_RUNNING.discard)
    else:  # trio (anyio supports only these two)
        import trio

        trio.lowlevel.spawn_system_task(_run, coro, context=contextvars.copy_context())


def release() -> None:
    """Called by a task :func:`spawn` started with ``releases``, as its last act."""
    loop = running_loop()
    if loop is not None:
        _RUNNING.discard(asyncio.current_task(loop))


async def _run(coro: Coroutine[Any, Any, None]) -> None:
    await coro
