"""This process's stdin as lines, read so that cancelling stops the read at once.

The SDK's stdio transport reads stdin in a worker thread, which a cancellation
cannot stop: on Ctrl-C the event loop cancels the server, then waits for that
thread, which waits for the client's next line. ``mainspring mcp serve`` so
ignored Ctrl-C until the client sent something. Here the read waits for the
descriptor to become readable on the event loop instead (cancellable like any
other wait), then takes what is there.

Like the SDK, the wire is read from a private duplicate of descriptor 0, and
descriptor 0 itself points at the null device while serving, so a tool (or a
child process it starts) reading stdin gets EOF, not the client's messages.
"""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

__all__ = ["FdLines", "stdin_lines"]

_CHUNK = 65536


class FdLines:
    """Lines (UTF-8, undecodable bytes replaced) from a file descriptor, until EOF."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = b""
        self._pollable = True

    def __aiter__(self) -> FdLines:
        return self

    async def __anext__(self) -> str:
        while b"\n" not in self._buffer:
            chunk = await self._read()
            if not chunk:
                if not self._buffer:
                    raise StopAsyncIteration
                line, self._buffer = self._buffer, b""
                return line.decode("utf-8", errors="replace")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return (line + b"\n").decode("utf-8", errors="replace")

    async def _read(self) -> bytes:
        if self._pollable:
            try:
                await anyio.wait_readable(self._fd)
            except OSError:  # a regular file or the null device: never waits, cannot be polled
                self._pollable = False
            else:
                return os.read(self._fd, _CHUNK)  # readable: returns what is there
        return await anyio.to_thread.run_sync(os.read, self._fd, _CHUNK)


@asynccontextmanager
async def stdin_lines() -> AsyncIterator[FdLines | None]:
    """Stdin's lines while descriptor 0 is diverted; ``None`` where the SDK's reader must do.

    ``None`` on Windows (no waiting on a pipe's readiness there) and when
    stdin is not a real descriptor (an embedding host replaced ``sys.stdin``).
    """
    if sys.platform == "win32" or not _backed_by_fd0():
        yield None
        return
    wire = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        yield FdLines(wire)
    finally:
        os.dup2(wire, 0)
        os.close(wire)


def _backed_by_fd0() -> bool:
    try:
        return sys.stdin.fileno() == 0
    except (AttributeError, OSError, ValueError):
        return False
