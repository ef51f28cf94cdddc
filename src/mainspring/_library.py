"""Which async library runs the caller: sniffio's answer, for the stream machinery's hot path.

``sniffio.current_async_library()`` imports asyncio on every call it has to
sniff for it (a microsecond each), and a stream asks a few times per step.
:func:`on_asyncio` asks the same questions in the same order — sniffio's
thread-local name, then its context variable, then asyncio's current task —
without the import.
"""

from __future__ import annotations

import asyncio

import sniffio

__all__ = ["on_asyncio"]


def on_asyncio() -> bool:
    """Whether the calling task runs on asyncio (else trio: anyio supports these two)."""
    name = sniffio.thread_local.name
    if name is None:
        name = sniffio.current_async_library_cvar.get()
    if name is not None:
        return name == "asyncio"
    try:
        return asyncio.current_task() is not None
    except RuntimeError:  # no running loop: not asyncio
        return False
