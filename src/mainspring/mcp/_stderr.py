"""A stdio server's stderr, kept as a bounded tail, and its exit status.

The SDK's ``stdio_client`` hands the child a file for stderr (``errlog=``).
We give it the write end of a pipe and drain the read end on the event loop
into a buffer that keeps only the last :data:`TAIL_BYTES`, so a chatty server
costs bounded memory and a failed start can say what the server said last.

The SDK does not expose the child's exit status, so on POSIX the command runs
under ``/bin/sh``, which waits for it and writes its status to the same
stderr as the last line (:func:`wrapped`). The shell stays the child's parent;
the SDK's shutdown (close stdin, then signal the process group) reaches both.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TextIO

import anyio

__all__ = ["TAIL_BYTES", "StderrTail", "capture_stderr", "wrapped"]

logger = logging.getLogger("mainspring.mcp.client")

TAIL_BYTES = 4096
"""How much of a server's stderr is kept (its end)."""
_DRAIN_AFTER_EXIT = 1.0
"""How long to wait for the pipe's end once the server is gone (a grandchild may hold it)."""
_SHELL = "/bin/sh"
_MARK = "[mainspring] server exited with status"
_SCRIPT = f'"$0" "$@"; s=$?; printf \'\\n{_MARK} %d\\n\' "$s" >&2; exit "$s"'
_STATUS = re.compile(re.escape(_MARK) + r" (\d+)\n?\Z")


def wrapped(command: str, args: list[str]) -> tuple[str, list[str]]:
    """The command and arguments that report the server's exit status (POSIX only)."""
    if os.name != "posix" or not os.access(_SHELL, os.X_OK):
        return command, args
    return _SHELL, ["-c", _SCRIPT, command, *args]


class StderrTail:
    """The end of what a server wrote to stderr."""

    def __init__(self, server: str) -> None:
        """A tail for ``server``'s stderr; :func:`capture_stderr` fills it."""
        self.server = server
        self._buffer = bytearray()
        self._line = bytearray()
        self.dropped = 0
        """Bytes that fell off the front of the buffer."""

    def feed(self, data: bytes) -> None:
        """Keep ``data`` (only the last :data:`TAIL_BYTES` of everything fed)."""
        self._buffer += data
        excess = len(self._buffer) - TAIL_BYTES
        if excess > 0:
            del self._buffer[:excess]
            self.dropped += excess
        if logger.isEnabledFor(logging.DEBUG):
            self._log(data)

    def _log(self, data: bytes) -> None:
        self._line += data
        *lines, rest = self._line.split(b"\n")
        self._line = bytearray(rest[-TAIL_BYTES:])
        for line in lines:
            logger.debug("MCP server %r stderr: %s", self.server, line.decode(errors="replace"))

    @property
    def exit_status(self) -> int | None:
        """The status the wrapper reported, if the server has exited."""
        found = _STATUS.search(self._text())
        return int(found.group(1)) if found else None

    def _text(self) -> str:
        return self._buffer.decode(errors="replace")

    @property
    def text(self) -> str:
        """What the server wrote last, without the wrapper's status line."""
        text = _STATUS.sub("", self._text()).strip()
        if self.dropped and text:
            text = "…" + text
        return text

    def describe(self) -> str:
        """``exit status N; stderr: …`` (the parts that are known), or ``""``."""
        parts: list[str] = []
        if (status := self.exit_status) is not None:
            parts.append(f"exit status {status}")
        if text := self.text:
            parts.append(f"stderr: {text}")
        return "; ".join(parts)


@asynccontextmanager
async def capture_stderr(tail: StderrTail) -> AsyncIterator[TextIO]:
    """Yield a file for the child's stderr; drain it into ``tail`` until the child is gone.

    Call :func:`release` on the yielded file once the child is spawned (so
    only the child holds the write end). On exit, waits up to
    :data:`_DRAIN_AFTER_EXIT` seconds for the pipe to end.
    """
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    errlog = os.fdopen(write_fd, "w")
    done = anyio.Event()

    async def drain() -> None:
        try:
            while True:
                await anyio.wait_readable(read_fd)
                try:
                    data = os.read(read_fd, 65536)
                except BlockingIOError:
                    continue
                if not data:
                    return
                tail.feed(data)
        finally:
            done.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(drain)
            try:
                yield errlog
            finally:
                release(errlog)
                with anyio.move_on_after(_DRAIN_AFTER_EXIT, shield=True):
                    await done.wait()
                tg.cancel_scope.cancel()
    finally:
        os.close(read_fd)


def release(errlog: TextIO) -> None:
    """Close this process's copy of the write end (the child keeps its own)."""
    if not errlog.closed:
        errlog.close()
