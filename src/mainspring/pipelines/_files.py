"""Confined file access for a workspace: every read and write walks from its root.

A pipeline reads contracts and inputs and writes artifacts only through
:class:`~mainspring.toolkits.confine.FileWorkspace`: each path is opened component
by component through directory handles with ``O_NOFOLLOW``, so a symlink (one
planted after the workspace was loaded, too) is refused by the kernel, never
read or written through. Reads are capped; text must be UTF-8. Every refusal
is a :class:`~mainspring.pipelines.workspace.PipelineError` naming the file
(and, for bad bytes, the line).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

from mainspring.errors import ConfigError
from mainspring.toolkits.confine import FileWorkspace, WorkspaceError

__all__ = ["DEFAULT_MAX_INPUT_BYTES", "PipelineError", "WorkspaceFiles"]

DEFAULT_MAX_INPUT_BYTES = 1024 * 1024
"""The default cap on one file a pipeline reads (contracts and inputs): 1 MiB."""


class PipelineError(ConfigError):
    """A workspace or stage contract is malformed, or a stage cannot run.

    Attributes:
        path: The file at fault (a contract, or the workspace folder).
        line: 1-based line in ``path``, when one is to blame.
    """

    def __init__(self, message: str, *, path: Path, line: int | None = None) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


class WorkspaceFiles:
    """A workspace root's files, reached only through directory handles.

    Paths are workspace-relative POSIX strings (``"stages/01_x/CONTEXT.md"``).
    """

    def __init__(self, root: Path, *, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> None:
        """Confine to ``root`` (resolved once, here); ``max_bytes`` caps every read.

        Raises:
            PipelineError: ``root`` is not a directory, or ``max_bytes`` is below 1.
        """
        if max_bytes < 1:
            raise PipelineError("max_input_bytes must be at least 1", path=root)
        try:
            self._confined = FileWorkspace(root, max_file_bytes=max_bytes)
        except ConfigError:
            problem = (
                "not a folder (a workspace is a folder with AGENT.md)"
                if root.exists()
                else "workspace folder does not exist"
            )
            raise PipelineError(problem, path=root) from None
        self.root = root
        self.max_bytes = max_bytes

    def path(self, rel: str) -> Path:
        """The path a message shows for ``rel``."""
        return self.root / rel

    def read_bytes(self, rel: str) -> bytes | None:
        """A regular file's bytes, or ``None`` when it does not exist.

        Raises:
            PipelineError: a symlink or other non-regular file on the way, or over the cap.
        """
        try:
            location = self._confined.locate(rel)
            with self._confined.open_parent(location) as dir_fd:
                data = self._confined.read_in(dir_fd, location)
        except WorkspaceError as exc:
            if "no such directory" in str(exc):
                return None
            raise PipelineError(_reason(exc, rel), path=self.path(rel)) from None
        return None if data is None else data.data

    def read_text(self, rel: str, *, what: str = "file") -> str:
        """A UTF-8 file's text.

        Raises:
            PipelineError: missing, refused, over the cap, or not UTF-8 (with the line).
        """
        data = self.read_bytes(rel)
        if data is None:
            raise PipelineError(f"{what} does not exist", path=self.path(rel))
        return decode(data, self.path(rel))

    def write_text(self, rel: str, text: str) -> None:
        """Atomically replace (or create) ``rel``, making its folders as needed.

        Raises:
            PipelineError: a symlink or non-directory on the way, or the target is one.
        """
        data = text.encode("utf-8")
        try:
            location = self._confined.locate(rel)
            with self._confined.open_parent(location, create=True) as dir_fd:
                with self._confined.lock(dir_fd, location):
                    self._refuse_non_regular(dir_fd, location.parts[-1], rel)
                    self._confined.replace_in(dir_fd, location, data, mode=0o644)
        except WorkspaceError as exc:
            raise PipelineError(_reason(exc, rel), path=self.path(rel)) from None

    def _refuse_non_regular(self, dir_fd: int, name: str, rel: str) -> None:
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if not stat.S_ISREG(st.st_mode):
            raise PipelineError(
                "refusing to write: the target is not a regular file (a symlink?)",
                path=self.path(rel),
            )

    def list_dirs(self, rel: str) -> list[str] | None:
        """Names of the directories directly inside ``rel`` (sorted), ``None`` if absent.

        Entries are judged on the directory handle without following links: a
        symlink is listed as what it is (a symlink), never as a folder.
        """
        try:
            location = self._confined.locate(rel)
            with self._confined.open_dir(location) as fd:
                names = os.listdir(fd)
                out = []
                for name in names:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    if stat.S_ISDIR(st.st_mode):
                        out.append(name)
                    elif stat.S_ISLNK(st.st_mode) and not name.startswith("."):
                        raise PipelineError(
                            f"{name!r} is a symlink; stage folders must be real folders",
                            path=self.path(f"{rel}/{name}"),
                        )
        except WorkspaceError as exc:
            if "no such directory" in str(exc):
                return None
            raise PipelineError(_reason(exc, rel), path=self.path(rel)) from None
        return sorted(out)

    def is_file(self, rel: str) -> bool:
        """Whether ``rel`` is a regular file reached without a symlink (errors count as no)."""
        try:
            return self.read_bytes(rel) is not None
        except PipelineError:
            return False


def decode(data: bytes, path: Path) -> str:
    """UTF-8 text, or a :class:`PipelineError` naming the line of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PipelineError(
            f"{path.name} is not UTF-8 text (byte {exc.start}: {exc.reason})",
            path=path,
            line=_line_of(data, exc.start),
        ) from None


def _reason(exc: WorkspaceError, rel: str) -> str:
    text = str(exc)
    prefix = f"{PurePosixPath(rel)}: "
    return text.removeprefix(prefix) if text.startswith(prefix) else text
