"""Read a file under a root through directory handles, never by a name checked earlier.

The path is walked one component at a time, each opened relative to the
handle of the directory before it with ``O_NOFOLLOW`` (the ``openat``
discipline), and the file itself with ``O_NOFOLLOW | O_NONBLOCK``; what the
opened handle is, is decided by ``fstat`` on it. A folder swapped for a
symlink after discovery looked at it is met by the kernel's refusal, and a
``SKILL.md`` swapped for a FIFO or a device is refused without blocking on
it, and a file with more than one hard link (one name may lie outside the
root) is refused on the opened handle. (The same discipline as
``mainspring.toolkits.confine``, which sits above skills in the layers.)
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path

__all__ = ["Refused", "read_under"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC
_FILE_FLAGS = os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC
_LINK_ERRNOS = {errno.ELOOP, errno.ENOTDIR, getattr(errno, "EMLINK", errno.ELOOP)}


class Refused(OSError):
    """The path is not a regular file reached without a symlink (``strerror`` says why)."""

    def __init__(self, code: int, message: str, *, symlink: bool) -> None:
        super().__init__(code, message)
        self.symlink = symlink
        """A symlink was met (else: something that is not a regular file)."""


def _open_dir(name: str | Path, dir_fd: int | None) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in _LINK_ERRNOS:
            raise Refused(
                exc.errno or errno.ELOOP, f"{name} is a symlink or not a folder", symlink=True
            ) from None
        raise


def read_under(root: Path, parts: Sequence[str], cap: int) -> bytes:
    """At most ``cap + 1`` bytes of the regular file ``root/parts…``.

    Raises:
        Refused: a component is a symlink or not a folder, or the file is not a
            regular file (a FIFO, a device, a folder) or has several hard links.
        OSError: the file cannot be opened or read.
    """
    if not parts:
        raise Refused(errno.EISDIR, "no file named", symlink=False)
    fd = _open_dir(root, None)
    try:
        for part in parts[:-1]:
            sub = _open_dir(part, fd)
            os.close(fd)
            fd = sub
        try:
            file_fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=fd)
        except OSError as exc:
            if exc.errno in _LINK_ERRNOS:
                raise Refused(
                    exc.errno or errno.ELOOP, f"{parts[-1]} is a symlink", symlink=True
                ) from None
            raise
    finally:
        os.close(fd)
    try:
        info = os.fstat(file_fd)
        if not stat.S_ISREG(info.st_mode):
            raise Refused(errno.EINVAL, f"{parts[-1]} is not a regular file", symlink=False)
        if info.st_nlink > 1:
            # Another name of the same file may lie outside the root (a hard link
            # cannot be told from its original): refused on the handle, as opened.
            raise Refused(
                errno.EMLINK,
                f"{parts[-1]} has {info.st_nlink} hard links; a file with more than one "
                "name may be reachable from outside the skills root",
                symlink=False,
            )
        os.set_blocking(file_fd, True)
        chunks: list[bytes] = []
        left = cap + 1
        while left > 0:
            chunk = os.read(file_fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(file_fd)
