"""Confined file tools: read, list, search, write and edit inside a :class:`FileWorkspace`.

Reads are read-only and concurrency-safe (they run in parallel); ``write_file``
and ``edit_file`` are confirm-tier by default, and their pending actions carry
the path and a diff (their policy's ``preview``) when
installed. Every path goes through :class:`FileWorkspace` (directory handles,
no-follow opens, ``fstat`` on the handle); writes are atomic and keep the
file's encoding and line ends.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import anyio.to_thread

from mainspring.toolkits.confine import FileWorkspace, Location, WorkspaceError
from mainspring.toolkits.search import MAX_OUTPUT_CHARS, search_files
from mainspring.toolkits.text import BinaryFile, Text, decode_text, diff_preview, encode_text
from mainspring.tools.define import Tool, tool
from mainspring.tools.policy import Flag, Permission, ToolInput

__all__ = [
    "Change",
    "edit_text",
    "file_tools",
    "list_entries",
    "read_text",
    "readonly_file_tools",
    "search_files",
    "write_text",
]

_NEW_FILE_MODE = 0o644
Roots = FileWorkspace | Sequence[str | os.PathLike[str]] | str | os.PathLike[str]


def workspace_of(roots: Roots) -> FileWorkspace:
    """``roots`` as a :class:`FileWorkspace` (a workspace is returned as is)."""
    return roots if isinstance(roots, FileWorkspace) else FileWorkspace(roots)


# ------------------------------------------------------------------ reading


def read_text(
    ws: FileWorkspace,
    path: str,
    *,
    start_line: int = 1,
    end_line: int | None = None,
    max_chars: int = MAX_OUTPUT_CHARS,
) -> str:
    """Lines ``start_line``…``end_line`` (1-based, inclusive) of a text file, with a header."""
    found = ws.read(path)
    text = _decode(found.data, found.location)
    lines = text.content.splitlines(keepends=True)
    total = len(lines)
    first = max(1, start_line)
    last = total if end_line is None else min(end_line, total)
    if first > max(total, 1) or (end_line is not None and end_line < first):
        raise WorkspaceError(
            f"{found.location.display}: lines {start_line}-{end_line} are outside 1-{total}",
            path=path,
        )
    out: list[str] = []
    size = 0
    shown = first - 1
    for line in lines[first - 1 : last]:
        if size + len(line) > max_chars and out:
            break
        out.append(line)
        size += len(line)
        shown += 1
    header = f"{found.location.display}: lines {first}-{shown} of {total}"
    if text.encoding != "utf-8" or text.newline != "lf":
        header += f" ({text.encoding}, {text.newline.upper()})"
    if shown < last:
        header += f"; cut at {max_chars} characters, continue with start_line={shown + 1}"
    return header + "\n" + "".join(out)


def list_entries(ws: FileWorkspace, path: str = ".", *, limit: int = 500) -> str:
    """The entries of a directory, one per line: kind, size, name (symlinks are not followed)."""
    location = ws.locate(path)
    rows: list[str] = []
    with ws.open_dir(location) as fd:
        with os.scandir(fd) as entries:
            items = sorted(entries, key=lambda e: e.name)
        rows.extend(_entry_row(fd, entry) for entry in items[:limit])
    head = f"{location.display}: {len(items)} entries"
    if len(items) > limit:
        head += f" (first {limit} shown)"
    return "\n".join([head, *rows])


def _entry_row(fd: int, entry: os.DirEntry[str]) -> str:
    st = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
    if stat.S_ISLNK(st.st_mode):
        kind, size = "link", ""
    elif stat.S_ISDIR(st.st_mode):
        kind, size = "dir", ""
    elif stat.S_ISREG(st.st_mode):
        kind, size = "file", str(st.st_size)
    else:
        kind, size = "other", ""
    return f"{kind:<5} {size:>10}  {entry.name}{'/' if kind == 'dir' else ''}"


# ------------------------------------------------------------------ writing


@dataclass(frozen=True, slots=True)
class Change:
    """What a write would do: the file's text before (``None`` if new) and after."""

    location: Location
    before: Text | None
    after: str

    def preview(self) -> str:
        """The path and a unified diff."""
        old = "" if self.before is None else self.before.content
        verb = "create" if self.before is None else "modify"
        return f"{verb} {self.location.display}\n" + diff_preview(
            old, self.after, path=self.location.display
        )


Transform = Callable[[Text | None, Location], str]


def _decode(data: bytes, location: Location) -> Text:
    try:
        return decode_text(data)
    except BinaryFile as exc:
        raise WorkspaceError(f"{location.display}: {exc}", path=location.display) from None


def plan(ws: FileWorkspace, path: str, transform: Transform) -> Change:
    """What ``transform`` would make of ``path``, without writing (for previews)."""
    location = ws.locate(path)
    try:
        with ws.open_parent(location) as dir_fd:
            found = ws.read_in(dir_fd, location)
    except WorkspaceError as exc:
        if "no such directory" not in str(exc):
            raise
        found = None
    before = None if found is None else _decode(found.data, location)
    return Change(location, before, transform(before, location))


def apply(
    ws: FileWorkspace, path: str, transform: Transform, *, create_dirs: bool = True
) -> Change:
    """Read, transform and atomically replace ``path`` while holding its writer lock."""
    location = ws.locate(path)
    with ws.open_parent(location, create=create_dirs) as dir_fd, ws.lock(dir_fd, location):
        found = ws.read_in(dir_fd, location)
        before = None if found is None else _decode(found.data, location)
        after = transform(before, location)
        try:
            data = encode_text(after, before)
        except UnicodeEncodeError as exc:
            raise WorkspaceError(
                f"{location.display}: the new text cannot be stored as {before and before.encoding}"
                f": {exc.reason}",
                path=path,
            ) from None
        mode = _NEW_FILE_MODE if found is None else found.mode
        ws.replace_in(dir_fd, location, data, mode=mode)
    return Change(location, before, after)


def write_text(content: str) -> Transform:
    """The transform of ``write_file``: the whole new content."""

    def transform(before: Text | None, location: Location) -> str:
        if before is not None and before.newline == "crlf":
            return content.replace("\r\n", "\n")
        return content

    return transform


def edit_text(old: str, new: str) -> Transform:
    """The transform of ``edit_file``: ``old`` must occur exactly once."""

    def transform(before: Text | None, location: Location) -> str:
        if before is None:
            raise WorkspaceError(f"{location.display}: no such file", path=location.display)
        needle, repl = old, new
        if before.newline == "crlf":
            needle, repl = needle.replace("\r\n", "\n"), repl.replace("\r\n", "\n")
        if not needle:
            raise WorkspaceError("old_string must not be empty", path=location.display)
        count = before.content.count(needle)
        if count != 1:
            where = "not found" if count == 0 else f"found {count} times; add context to pick one"
            raise WorkspaceError(f"{location.display}: old_string {where}", path=location.display)
        return before.content.replace(needle, repl, 1)

    return transform


def _summary(change: Change) -> str:
    lines = change.after.count("\n") + (0 if change.after.endswith("\n") else 1)
    verb = "created" if change.before is None else "updated"
    return f"{verb} {change.location.display} ({lines} lines)"


# -------------------------------------------------------------------- tools


def readonly_file_tools(roots: Roots) -> list[Tool]:
    """``read_file``, ``list_dir`` and ``search_files`` confined to ``roots``."""
    ws = workspace_of(roots)

    @tool(read_only=True, name="read_file", max_result_chars=MAX_OUTPUT_CHARS + 500)
    def read_file(path: str, start_line: int = 1, end_line: int | None = None) -> str:
        """Read a text file of the workspace (a range of lines, 1-based, inclusive).

        Args:
            path: Relative to the workspace root (or absolute inside a root).
            start_line: First line to show.
            end_line: Last line to show (default: the end, within the output limit).
        """
        return read_text(ws, path, start_line=start_line, end_line=end_line)

    @tool(read_only=True, name="list_dir")
    def list_dir(path: str = ".") -> str:
        """List a workspace directory: kind, size and name of each entry.

        Args:
            path: The directory, relative to the workspace root.
        """
        return list_entries(ws, path)

    @tool(read_only=True, name="search_files", max_result_chars=MAX_OUTPUT_CHARS + 500)
    def search(
        pattern: str | None = None,
        glob: str = "*",
        path: str = ".",
        ignore_case: bool = False,
        max_results: int = 200,
    ) -> str:
        """Find files by glob and, with a pattern, the lines matching a regular expression.

        Args:
            pattern: A regular expression in RE2 syntax (Python's, without backreferences
                or lookaround), at most 1000 characters; without it, matching file names
                are listed.
            glob: File glob (``*.py``, ``src/**/test_*.py``), at most 500 characters;
                without ``/`` it matches names.
            path: The directory to search below.
            ignore_case: Case-insensitive pattern.
            max_results: At most this many lines (or files).
        """
        return search_files(
            ws,
            pattern=pattern,
            glob=glob,
            path=path,
            ignore_case=ignore_case,
            max_results=max(1, min(max_results, 2000)),
        )

    return [read_file, list_dir, search]


def file_tools(roots: Roots, *, write_permission: Permission = "confirm") -> list[Tool]:
    """The read tools plus ``write_file`` and ``edit_file``, confined to ``roots``.

    Args:
        roots: A :class:`FileWorkspace`, or the root directories (the first takes relative paths).
        write_permission: ``"confirm"`` (the default) pauses every write for a decision.
    """
    ws = workspace_of(roots)

    @tool(
        name="write_file",
        permission=write_permission,
        flags={Flag.MUTATING},
        modifiable_fields=("content",),
        preview=lambda args: _preview(ws, args, _write_transform),
    )
    def write_file(path: str, content: str) -> str:
        """Create or replace a text file of the workspace (atomically; encoding and line ends kept).

        Args:
            path: Relative to the workspace root; missing directories are created.
            content: The whole new content.
        """
        return _summary(apply(ws, path, write_text(content)))

    @tool(
        name="edit_file",
        permission=write_permission,
        flags={Flag.MUTATING},
        modifiable_fields=("new_string",),
        preflight=lambda args: _check(ws, args, _edit_transform),
        preview=lambda args: _preview(ws, args, _edit_transform),
    )
    def edit_file(path: str, old_string: str, new_string: str) -> str:
        """Replace one exact occurrence of ``old_string`` in a workspace file.

        Args:
            path: Relative to the workspace root.
            old_string: Text that occurs exactly once in the file (include context to pick one).
            new_string: Its replacement.
        """
        return _summary(apply(ws, path, edit_text(old_string, new_string), create_dirs=False))

    return [*readonly_file_tools(ws), write_file, edit_file]


def _write_transform(ws: FileWorkspace, args: ToolInput) -> tuple[str, Transform]:
    path = str(args["path"])
    return path, write_text(str(args["content"]))


def _edit_transform(ws: FileWorkspace, args: ToolInput) -> tuple[str, Transform]:
    return str(args["path"]), edit_text(str(args["old_string"]), str(args["new_string"]))


def _preview(
    ws: FileWorkspace,
    args: ToolInput,
    make: Callable[[FileWorkspace, ToolInput], tuple[str, Transform]],
) -> str:
    path, transform = make(ws, args)
    return plan(ws, path, transform).preview()


async def _check(
    ws: FileWorkspace,
    args: ToolInput,
    make: Callable[[FileWorkspace, ToolInput], tuple[str, Transform]],
) -> str | None:
    try:
        await anyio.to_thread.run_sync(_preview, ws, args, make)
    except (WorkspaceError, OSError) as exc:
        return str(exc)
    return None
