"""A child process in its own process group, its bounded log, and its deadline.

Each child starts a new session (``start_new_session``): its process ID is
its process group ID, and stopping it signals the whole group (``killpg``:
``SIGTERM``, then ``SIGKILL`` after a grace period), also every background
job it left behind once the leader exits. Two threads own a child: one
copies its output (stdout and stderr, merged) into a :class:`Log`, one waits
for it and kills the group at the total deadline. Threads, not tasks: a
session outlives the tool call (and the event loop) that started it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mainspring.toolkits.cgroup import PidsCgroup, process_bound
from mainspring.toolkits.sandbox import SandboxLimits

__all__ = ["Log", "LogSlice", "Process", "preview"]


@dataclass(frozen=True, slots=True)
class LogSlice:
    """Bytes of a log from an absolute offset."""

    data: bytes
    offset: int
    """Where ``data`` starts (later than asked when the start was dropped)."""
    next_offset: int
    dropped: int
    """Bytes before ``offset`` no longer kept (the log keeps its newest ``quota`` bytes)."""


class Log:
    """Everything a process printed: the first ``head`` bytes, and the newest ``quota``."""

    def __init__(self, *, quota: int, head: int = 8192) -> None:
        self._lock = threading.Lock()
        self._head = bytearray()
        self._head_size = head
        self._tail = bytearray()
        self._quota = quota
        self._start = 0
        """Absolute offset of ``_tail[0]``."""
        self.total = 0
        """Bytes written so far."""

    def write(self, data: bytes) -> None:
        """Append output, dropping the oldest bytes past the quota."""
        with self._lock:
            if len(self._head) < self._head_size:
                self._head += data[: self._head_size - len(self._head)]
            self._tail += data
            self.total += len(data)
            excess = len(self._tail) - self._quota
            if excess > 0:
                del self._tail[:excess]
                self._start += excess

    def read(self, offset: int, limit: int) -> LogSlice:
        """At most ``limit`` bytes from ``offset`` (an absolute byte offset)."""
        with self._lock:
            offset = max(offset, 0)
            dropped = max(0, self._start - offset)
            begin = max(offset, self._start)
            data = bytes(self._tail[begin - self._start : begin - self._start + limit])
            return LogSlice(data, begin, begin + len(data), dropped)

    def preview(self, *, head: int, tail: int) -> str:
        """The first ``head`` and last ``tail`` bytes, with what was left out between them."""
        with self._lock:
            total = self.total
            first = bytes(self._head[:head])
            last = bytes(self._tail[-tail:]) if tail else b""
        return preview(first, last, tail_start=total - len(last))


def preview(first: bytes, last: bytes, *, tail_start: int) -> str:
    """The head of an output and its tail (which starts at byte ``tail_start``), as text."""
    if tail_start <= len(first):  # they meet: everything is shown
        joined = first + last[len(first) - tail_start :]
        return joined.decode("utf-8", errors="replace")
    omitted = tail_start - len(first)
    return (
        first.decode("utf-8", errors="replace")
        + f"\n… {omitted} bytes omitted (read the session log by offset for them) …\n"
        + last.decode("utf-8", errors="replace")
    )


def _chain(steps: list[Callable[[], None]]) -> Callable[[], None]:
    def run() -> None:
        for step in steps:
            step()

    return run


class Process:
    """One child process group, started at once, with its log and deadline."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: dict[str, str],
        deadline: float,
        log_quota: int,
        grace: float = 2.0,
        limits: SandboxLimits | None = None,
    ) -> None:
        """Start ``argv``; ``deadline`` is a ``time.monotonic()`` instant for the group to die.

        ``limits`` are set in the child before it runs ``argv``; their process
        count also by a ``pids`` cgroup where one can be made (removed, with
        anything left in it, when the process ends).
        """
        self.log = Log(quota=log_quota)
        self.deadline = deadline
        self.started = time.monotonic()
        self.ended: float | None = None
        self.killed_by: str | None = None
        """``"deadline"``, ``"stop"`` or ``"cancel"`` when the group was killed."""
        self._grace = grace
        self._changed = threading.Condition()
        self._cgroup: PidsCgroup | None = None
        steps: list[Callable[[], None]] = []
        if limits is not None:
            nproc = None
            if limits.processes is not None:
                self._cgroup, nproc = process_bound(limits.processes)
            if self._cgroup is not None:
                steps.append(self._cgroup.join())
            steps.append(limits.preexec(nproc=nproc))
        try:
            self._proc = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                preexec_fn=_chain(steps) if steps else None,
            )
        except BaseException:
            if self._cgroup is not None:
                self._cgroup.remove()
            raise
        self.pid = self._proc.pid
        """Also the process group ID."""
        self._reader = threading.Thread(target=self._read, name=f"shell-log-{self.pid}")
        self._waiter = threading.Thread(target=self._wait, name=f"shell-wait-{self.pid}")
        self._reader.daemon = self._waiter.daemon = True
        self._reader.start()
        self._waiter.start()

    @property
    def returncode(self) -> int | None:
        """The exit status (negative: killed by that signal); ``None`` while running."""
        return self._proc.returncode if self.ended is not None else None

    @property
    def running(self) -> bool:
        """Whether the leader has not been reaped yet (or its output is still coming)."""
        return self.ended is None

    def _read(self) -> None:
        out = self._proc.stdout
        assert out is not None
        fd = out.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            self.log.write(chunk)
            with self._changed:
                self._changed.notify_all()
        out.close()

    def _wait(self) -> None:
        try:
            self._proc.wait(timeout=max(0.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill("deadline")
        self._proc.wait()
        self._signal_group(signal.SIGKILL)  # background jobs left behind die with the leader
        if self._cgroup is not None:
            self._cgroup.remove()  # and any that left the group, inside the cgroup
        self._reader.join(timeout=self._grace)
        self.close_stdin()
        with self._changed:
            self.ended = time.monotonic()
            self._changed.notify_all()

    def kill(self, why: str) -> None:
        """Stop the whole group: ``SIGTERM``, then ``SIGKILL`` after the grace period."""
        if self.ended is not None:
            return
        if self.killed_by is None:
            self.killed_by = why
        self._signal_group(signal.SIGTERM)
        try:
            self._proc.wait(timeout=self._grace)
        except subprocess.TimeoutExpired:
            pass
        self._signal_group(signal.SIGKILL)

    def _signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)

    def wait_changed(self, timeout: float, *, seen: int) -> None:
        """Block up to ``timeout`` seconds until output past ``seen`` bytes or the end."""
        with self._changed:
            self._changed.wait_for(
                lambda: self.ended is not None or self.log.total > seen, timeout=timeout
            )

    def wait_ended(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds for the end; whether it ended."""
        with self._changed:
            return self._changed.wait_for(lambda: self.ended is not None, timeout=timeout)

    def write_stdin(self, data: bytes) -> None:
        """Send input to the process (blocks while its pipe is full)."""
        stdin = self._proc.stdin
        if stdin is None or stdin.closed:
            raise BrokenPipeError("stdin is closed")
        stdin.write(data)
        stdin.flush()

    def close_stdin(self) -> None:
        """Signal end of input."""
        stdin = self._proc.stdin
        if stdin is not None and not stdin.closed:
            with contextlib.suppress(OSError, ValueError):
                stdin.close()

    def status(self) -> str:
        """The state in words: ``running``, ``exited 0``, ``killed (deadline)``."""
        if self.ended is None:
            return "running"
        if self.killed_by is not None:
            return f"killed ({self.killed_by})"
        code = self._proc.returncode
        return f"exited {code}" if code >= 0 else f"killed by signal {-code}"

    def elapsed(self) -> float:
        """Seconds from start to end (or to now)."""
        return (self.ended or time.monotonic()) - self.started
