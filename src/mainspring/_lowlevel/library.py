"""Which async library runs the caller: sniffio's answer, for the stream machinery's hot path.

Replaces ``sniffio.current_async_library()`` and ``asyncio.get_running_loop()``: with
:mod:`~mainspring._lowlevel.wakeup` pays 4.4 % of S1 and 3.7 % of the durable S1,
bench/F-figures.md (on its own, 2.6 % of S1 and 1.5 % of the durable S1).

``sniffio.current_async_library()`` imports asyncio on every call it has to
sniff for it (a microsecond each), and a stream asks a few times per step.
:func:`on_asyncio` asks the same questions in the same order — sniffio's
thread-local name, then its context variable, then asyncio's running loop —
without the import. :func:`running_loop` answers with the loop itself:
on CPython 3.11 every ``asyncio.get_running_loop()`` (and so every
``asyncio.current_task()``) makes a ``getpid`` system call, so a caller that
needs the loop asks once.
"""

from __future__ import annotations

import asyncio

import sniffio

__all__ = ["on_asyncio", "running_loop"]

_get_running_loop = asyncio.get_running_loop


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The asyncio loop running the calling task; ``None`` on trio (anyio supports these two)."""
    name = sniffio.thread_local.name
    if name is None:
        name = sniffio.current_async_library_cvar.get()
    if name is not None and name != "asyncio":
        return None
    try:
        return _get_running_loop()
    except RuntimeError:  # no running loop: not asyncio
        return None


def on_asyncio() -> bool:
    """Whether the calling task runs on asyncio (else trio)."""
    return running_loop() is not None
