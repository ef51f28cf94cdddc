"""Files and folders a store creates are private to the user running it.

A store holds transcripts, decisions and artifacts: what other local users of
the machine must not read. Folders a store creates get mode ``0700`` (each
missing one, not only the last), and a SQLite database file it creates is
made empty with mode ``0600`` before SQLite opens it, so the ``-wal`` and
``-shm`` files SQLite makes beside it (it gives them the database file's
mode) are private too. What already exists is left as it is: its owner chose
its mode. The process umask can only remove permissions, never add them.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DIR_MODE", "FILE_MODE", "make_private_dirs", "make_private_file"]

DIR_MODE = 0o700
"""Mode of a folder a store creates."""
FILE_MODE = 0o600
"""Mode of a file a store creates."""

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def make_private_dirs(path: Path) -> None:
    """Create ``path`` and its missing parents, each with mode ``0700``.

    Raises:
        OSError: A folder cannot be created (or a component is not a folder).
    """
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue  # made meanwhile by another process: its mode is its creator's
        os.chmod(folder, DIR_MODE)  # (mkdir's mode is masked by the umask; chmod's is not)
    if not path.is_dir():
        raise NotADirectoryError(f"{str(path)!r} is not a folder")


def make_private_file(path: Path) -> None:
    """Create ``path`` empty with mode ``0600`` unless it exists (its folders ``0700``).

    Never follows a symlink at ``path`` and never truncates: an existing file
    (or one another process creates meanwhile) is left as it is.

    Raises:
        OSError: The folder or the file cannot be created.
    """
    make_private_dirs(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, FILE_MODE)
    except FileExistsError:
        return
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, FILE_MODE)  # (the umask may have taken bits; it never adds any)
    finally:
        os.close(fd)
