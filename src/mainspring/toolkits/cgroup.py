"""A ``pids`` cgroup for one command: its process count bounded, for root too.

Linux never applies ``RLIMIT_NPROC`` to root (the global uid 0, which a
sandbox's user namespace maps its user to when the host runs as root), so
for such a host a fork bomb inside the sandbox would take every process
slot of the machine before its deadline. Where the host can make a child
cgroup with the ``pids`` controller (cgroup v1's ``pids`` hierarchy, or a
cgroup v2 tree where ``pids`` is enabled below the host's own cgroup), each
command gets one with ``pids.max`` set; the child joins it between fork and
exec, and the cgroup is removed once the process group is gone.

Where none can be made, :func:`process_bound` falls back to the rlimit, set
to the limit *plus the tasks the host's user runs already*: the kernel
compares ``RLIMIT_NPROC`` with every process and thread of the user (also
from inside a user namespace, up its chain), so a bare limit of 512 would
stop a desktop user's first fork. For root, with no cgroup, nothing bounds
the count; :func:`process_bound` then says so.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["PidsCgroup", "pids_cgroup", "process_bound", "user_tasks"]

_MOUNT = Path("/sys/fs/cgroup")


class PidsCgroup:
    """One cgroup made for one command; :meth:`join` runs in its child."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._procs = os.open(path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)

    def join(self) -> Callable[[], None]:
        """What the child runs between fork and exec: move itself into the cgroup."""
        fd, write = self._procs, os.write

        def enter() -> None:
            write(fd, b"0")  # "0": the writing process itself

        return enter

    def pids(self) -> list[int]:
        """The processes in the cgroup now."""
        try:
            return [int(x) for x in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def kill_all(self) -> None:
        """``SIGKILL`` every process in the cgroup (also one that left the process group)."""
        for _ in range(100):  # a process may fork while the list is read: go again
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            threading.Event().wait(0.01)  # (the killed leave the list once reaped)

    def remove(self, *, patience: float = 5.0) -> None:
        """Kill what is left, then delete the cgroup.

        The killed are reaped by whoever adopts them (the host's init, once a
        sandbox's pid namespace is gone), and the cgroup stays busy until
        then: the removal is tried for ``patience`` seconds, then left.
        """
        self.kill_all()
        with contextlib.suppress(OSError):
            os.close(self._procs)
        pause = threading.Event()
        for _ in range(max(1, int(patience / 0.05))):
            try:
                os.rmdir(self.path)
            except FileNotFoundError:
                return
            except OSError:
                pause.wait(0.05)
                continue
            return


def _candidates() -> list[Path]:
    """Cgroups of this process that can hold a child with ``pids.max`` (v1 first, then v2)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return []
    v1: list[Path] = []
    v2: list[Path] = []
    for line in lines:
        _id, controllers, path = line.split(":", 2)
        relative = path.lstrip("/")
        if "pids" in controllers.split(","):
            v1.append(_MOUNT / "pids" / relative)
        elif controllers == "":
            folder = _MOUNT / relative
            with contextlib.suppress(OSError):
                if "pids" in (folder / "cgroup.subtree_control").read_text().split():
                    v2.append(folder)
    return v1 + v2


def pids_cgroup(limit: int) -> PidsCgroup | None:
    """A fresh cgroup below this process's with ``pids.max = limit``, or ``None``."""
    for parent in _candidates():
        path = parent / f"mainspring-{secrets.token_hex(6)}"
        try:
            path.mkdir()
        except OSError:
            continue
        try:
            (path / "pids.max").write_text(str(limit))
            return PidsCgroup(path)
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
    return None


def user_tasks(uid: int) -> int:
    """Processes and threads whose real user is ``uid`` (what ``RLIMIT_NPROC`` counts)."""
    count = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", encoding="ascii", errors="replace") as f:
                status = f.read()
        except OSError:
            continue
        real = threads = -1
        for line in status.splitlines():
            if line.startswith("Uid:"):
                real = int(line.split()[1])
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
        if real == uid and threads > 0:
            count += threads
    return count


def process_bound(limit: int) -> tuple[PidsCgroup | None, int | None]:
    """How to hold a command to ``limit`` tasks: a cgroup, or an ``RLIMIT_NPROC`` value.

    ``(None, None)``: neither can (root without a cgroup).
    """
    cgroup = pids_cgroup(limit)
    if cgroup is not None:
        return cgroup, None
    uid = os.getuid()
    if uid == 0:
        return None, None
    return None, limit + user_tasks(uid)
