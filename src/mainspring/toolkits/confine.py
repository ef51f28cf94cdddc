"""Confinement: every file operation walks from a root through directory handles.

A path is split into components and opened one component at a time relative
to the directory opened before it (``os.open(name, dir_fd=…)``, the ``openat``
discipline), each with ``O_NOFOLLOW``. Nothing is ever resolved by name from
the top again, so a symlink swapped in between a check and a use is met by the
kernel's refusal (``ELOOP`` / ``ENOTDIR``) on the handle being opened, not by
a check that already passed. What a handle is gets decided by ``fstat`` on the
handle itself: only directories and regular files with one link are accepted;
FIFOs, devices, sockets and hard links (``st_nlink > 1``, which may be a
second name of a file outside the roots) are refused.

Replacement is atomic and stays inside the same directory handle: a temporary
file created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` next to the target, then
``os.replace(…, src_dir_fd=…, dst_dir_fd=…)``. Writers that go through a
:class:`FileWorkspace` are serialized per file (the parent directory's device and
inode plus the name).

The one thing this cannot stop is a directory that is *moved* out of a root
by someone else while a handle to it is open; that needs write access outside
the roots, which the sandboxed shell does not have.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import threading
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from mainspring.errors import ConfigError, ToolError

__all__ = [
    "MAX_FILE_BYTES",
    "FileData",
    "FileWorkspace",
    "Location",
    "WorkspaceError",
]

MAX_FILE_BYTES = 10 * 1024 * 1024
"""The default limit on the bytes of one file read, written or edited (10 MiB)."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class WorkspaceError(ToolError, PermissionError):
    """A path was refused (outside the roots, a symlink, a device…) or a limit was hit.

    Attributes:
        path: The path as the caller gave it.
    """

    def __init__(self, message: str, *, path: str, tool: str = "") -> None:
        super().__init__(message, tool=tool)
        self.path = path


@dataclass(frozen=True, slots=True)
class Location:
    """A path inside one root, as components (never ``..``, never empty)."""

    root: int
    """Index of the root in :attr:`FileWorkspace.roots`."""
    parts: tuple[str, ...]
    """Components below the root; ``()`` is the root itself."""
    display: str
    """How results name it: relative to the first root, absolute for the others."""


@dataclass(frozen=True, slots=True)
class FileData:
    """A regular file's bytes, read through its own handle."""

    location: Location
    data: bytes
    mode: int
    """Permission bits, kept when the file is replaced."""


class FileWorkspace:
    """The roots a toolkit may touch, and the only way its tools touch files."""

    def __init__(
        self,
        roots: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
        *,
        max_file_bytes: int = MAX_FILE_BYTES,
    ) -> None:
        """Confine to ``roots`` (existing directories; the first is where relative paths go).

        Raises:
            ConfigError: a root is missing or not a directory.
        """
        if isinstance(roots, str | os.PathLike):
            roots = [roots]
        if not roots:
            raise ConfigError("a workspace needs at least one root")
        if max_file_bytes < 1:
            raise ConfigError("max_file_bytes must be at least 1")
        resolved: list[Path] = []
        for root in roots:
            path = Path(os.path.realpath(root))
            if not path.is_dir():
                raise ConfigError(f"workspace root {str(root)!r} is not a directory")
            resolved.append(path)
        self.roots: tuple[Path, ...] = tuple(resolved)
        """The roots, resolved once at construction."""
        self.max_file_bytes = max_file_bytes
        self._locks: weakref.WeakValueDictionary[tuple[int, int, str], threading.Lock] = (
            weakref.WeakValueDictionary()
        )
        self._locks_guard = threading.Lock()

    # ------------------------------------------------------------------ paths

    def locate(self, path: str) -> Location:
        """Split ``path`` into a root and components, refusing ``..`` and foreign roots.

        Raises:
            WorkspaceError: the path is empty of meaning, climbs, or lies outside every root.
        """
        if "\x00" in path:
            raise WorkspaceError("a path must not contain NUL", path=path)
        root = 0
        rest = path
        if path.startswith("/"):
            for index, candidate in enumerate(self.roots):
                prefix = str(candidate)
                if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                    root, rest = index, path[len(prefix) :]
                    break
            else:
                raise WorkspaceError(f"{path!r} is outside the workspace roots", path=path)
        parts = tuple(p for p in rest.split("/") if p not in ("", "."))
        if ".." in parts:
            raise WorkspaceError(f"{path!r}: '..' is not allowed in workspace paths", path=path)
        return Location(root, parts, self._display(root, parts))

    def _display(self, root: int, parts: tuple[str, ...]) -> str:
        if root == 0:
            return "/".join(parts) or "."
        return str(self.roots[root].joinpath(*parts))

    def child(self, location: Location, name: str) -> Location:
        """The location of ``name`` inside the directory ``location``."""
        parts = (*location.parts, name)
        return Location(location.root, parts, self._display(location.root, parts))

    # ---------------------------------------------------------------- handles

    @contextlib.contextmanager
    def open_dir(self, location: Location, *, create: bool = False) -> Iterator[int]:
        """A handle on the directory ``location``, walked component by component.

        With ``create``, missing directories are made (``mkdir`` relative to
        the handle of their parent, then opened with ``O_NOFOLLOW``).
        """
        fd = self._walk(location, location.parts, create=create)
        try:
            yield fd
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def open_parent(self, location: Location, *, create: bool = False) -> Iterator[int]:
        """A handle on the directory holding ``location`` (which must not be a root)."""
        if not location.parts:
            raise WorkspaceError("a workspace root is not a file", path=location.display)
        fd = self._walk(location, location.parts[:-1], create=create)
        try:
            yield fd
        finally:
            os.close(fd)

    def _walk(self, location: Location, parts: tuple[str, ...], *, create: bool) -> int:
        fd = os.open(self.roots[location.root], _DIR_FLAGS)
        try:
            for part in parts:
                next_fd = self._open_subdir(fd, part, location, create=create)
                os.close(fd)
                fd = next_fd
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _open_subdir(self, fd: int, name: str, location: Location, *, create: bool) -> int:
        try:
            sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            if not create:
                raise WorkspaceError(
                    f"{location.display}: no such directory {name!r}", path=location.display
                ) from None
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o777, dir_fd=fd)
            sub = self._reopen_dir(fd, name, location)
        except OSError as exc:
            raise _refusal(exc, location, name, fd) from None
        return _check_dir(sub, location)

    def _reopen_dir(self, fd: int, name: str, location: Location) -> int:
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            raise _refusal(exc, location, name, fd) from None

    def open_file(self, dir_fd: int, location: Location) -> int | None:
        """Open the regular file ``location`` (in ``dir_fd``) for reading, or ``None`` if absent.

        ``O_NONBLOCK`` keeps a FIFO from blocking the open; ``fstat`` on the
        handle then refuses anything but a regular file with one link.
        """
        name = location.parts[-1]
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _refusal(exc, location, name, dir_fd) from None
        try:
            check_regular(os.fstat(fd), location)
        except BaseException:
            os.close(fd)
            raise
        return fd

    # ------------------------------------------------------------ operations

    def read(self, path: str | Location) -> FileData:
        """The bytes of a regular file (at most :attr:`max_file_bytes`, counted as read).

        Raises:
            WorkspaceError: refused, missing, or too large.
        """
        location = self.locate(path) if isinstance(path, str) else path
        with self.open_parent(location) as dir_fd:
            data = self.read_in(dir_fd, location)
        if data is None:
            raise WorkspaceError(f"{location.display}: no such file", path=location.display)
        return data

    def read_in(self, dir_fd: int, location: Location) -> FileData | None:
        """:meth:`read` relative to an open parent handle; ``None`` when the file is absent."""
        fd = self.open_file(dir_fd, location)
        if fd is None:
            return None
        try:
            mode = stat.S_IMODE(os.fstat(fd).st_mode)
            data = read_bounded(fd, self.max_file_bytes, location)
        finally:
            os.close(fd)
        return FileData(location, data, mode)

    def replace_in(self, dir_fd: int, location: Location, data: bytes, *, mode: int) -> None:
        """Atomically replace (or create) ``location`` in ``dir_fd`` with ``data``.

        The temporary file lives in the same directory handle; the rename
        replaces whatever name is there without following it.
        """
        if len(data) > self.max_file_bytes:
            raise WorkspaceError(
                f"{location.display}: {len(data)} bytes is over the "
                f"{self.max_file_bytes}-byte limit",
                path=location.display,
            )
        name = location.parts[-1]
        temp = f".{name}.{secrets.token_hex(6)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(temp, flags, 0o600, dir_fd=dir_fd)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, mode)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=dir_fd)
            raise

    def unlink_in(self, dir_fd: int, location: Location) -> None:
        """Remove the regular file ``location`` (checked on its handle first)."""
        fd = self.open_file(dir_fd, location)
        if fd is None:
            raise WorkspaceError(f"{location.display}: no such file", path=location.display)
        os.close(fd)
        os.unlink(location.parts[-1], dir_fd=dir_fd)

    def lock_key(self, dir_fd: int, location: Location) -> tuple[int, int, str]:
        """What identifies ``location`` for writers: its directory's device and inode, its name."""
        st = os.fstat(dir_fd)
        return (st.st_dev, st.st_ino, location.parts[-1])

    def lock(self, dir_fd: int, location: Location) -> threading.Lock:
        """The lock serializing writers of ``location`` (see :meth:`lock_key`)."""
        key = self.lock_key(dir_fd, location)
        with self._locks_guard:
            found = self._locks.get(key)
            if found is None:
                found = threading.Lock()
                self._locks[key] = found
            return found


def check_regular(st: os.stat_result, location: Location) -> None:
    """Refuse anything but a regular file with exactly one link."""
    if stat.S_ISDIR(st.st_mode):
        raise WorkspaceError(f"{location.display} is a directory", path=location.display)
    if not stat.S_ISREG(st.st_mode):
        raise WorkspaceError(
            f"{location.display} is not a regular file ({_kind(st.st_mode)})",
            path=location.display,
        )
    if st.st_nlink > 1:
        raise WorkspaceError(
            f"{location.display} has {st.st_nlink} hard links; a file with more than one "
            "name may be reachable from outside the roots, so it is refused",
            path=location.display,
        )


def read_bounded(fd: int, limit: int, location: Location) -> bytes:
    """Read at most ``limit`` bytes, refusing a file that turns out longer."""
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, min(1 << 20, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise WorkspaceError(
                f"{location.display} is over the {limit}-byte limit", path=location.display
            )
    return b"".join(chunks)


def _check_dir(fd: int, location: Location) -> int:
    if not stat.S_ISDIR(os.fstat(fd).st_mode):  # O_DIRECTORY already says so; belt and braces
        os.close(fd)
        raise WorkspaceError(f"{location.display}: not a directory", path=location.display)
    return fd


def _refusal(exc: OSError, location: Location, name: str, dir_fd: int) -> WorkspaceError:
    """Why an open was refused (the refusal itself came from the kernel, on the handle)."""
    try:  # only to word the message: what is there now
        mode: int | None = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        mode = None
    if mode is not None and stat.S_ISLNK(mode):
        why = f"{name!r} is a symbolic link, which workspace paths never follow"
    elif exc.errno in (errno.ELOOP, errno.EMLINK):
        why = f"{name!r} is a symbolic link, which workspace paths never follow"
    elif mode is not None and not stat.S_ISDIR(mode) and not stat.S_ISREG(mode):
        why = f"{name!r} is not a regular file ({_kind(mode)})"
    elif exc.errno == errno.ENOTDIR:
        why = f"{name!r} is not a directory"
    elif exc.errno in (errno.EACCES, errno.EPERM):
        why = f"permission denied on {name!r}"
    else:
        why = f"{name!r}: {exc.strerror}"
    return WorkspaceError(f"{location.display}: {why}", path=location.display)


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"
