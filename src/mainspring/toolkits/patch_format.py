"""The ``*** Begin Patch`` format: parsing (one pass, linear) and applying chunks to lines.

```
*** Begin Patch
*** Add File: docs/new.md
+first line
*** Delete File: old.txt
*** Update File: src/app.py
*** Move to: src/main.py
@@ def main():
-    return 1
+    return 2
*** End of File
*** End Patch
```

An update is a list of chunks. A chunk's old lines (context ``" "`` and
removed ``"-"``) must occur exactly once in the part of the file after the
previous chunk (and after its ``@@`` anchor line, when it names one); its
new lines (context and added ``"+"``) replace them. ``*** End of File``
pins a chunk to the end of the file. An empty line inside a chunk is an
empty context line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

__all__ = [
    "AddFile",
    "Chunk",
    "DeleteFile",
    "Operation",
    "Patch",
    "PatchError",
    "PatchLimits",
    "UpdateFile",
    "apply_chunks",
    "parse_patch",
]

BEGIN = "*** Begin Patch"
END = "*** End Patch"
ADD = "*** Add File: "
DELETE = "*** Delete File: "
UPDATE = "*** Update File: "
MOVE = "*** Move to: "
EOF_MARK = "*** End of File"


class PatchError(ValueError):
    """A patch that cannot be parsed or applied; nothing was written.

    Attributes:
        line: The patch line it is about (1-based), when there is one.
        path: The file it is about, when there is one.
    """

    def __init__(self, message: str, *, line: int | None = None, path: str = "") -> None:
        where = f"line {line}: " if line is not None else ""
        super().__init__(f"{where}{message}")
        self.line = line
        self.path = path


@dataclass(frozen=True, slots=True, kw_only=True)
class PatchLimits:
    """Bounds on what one patch may ask for."""

    max_chars: int = 2_000_000
    max_files: int = 100
    max_chunks: int = 2_000


@dataclass(frozen=True, slots=True)
class Chunk:
    """One ``@@`` section of an update."""

    anchor: str | None
    old: tuple[str, ...]
    new: tuple[str, ...]
    at_eof: bool = False
    line: int = 0
    """Where it starts in the patch."""


@dataclass(frozen=True, slots=True)
class AddFile:
    """Create a file that must not exist."""

    path: str
    lines: tuple[str, ...]

    @property
    def content(self) -> str:
        """The new file's text (each line ends with a newline)."""
        return "".join(line + "\n" for line in self.lines)


@dataclass(frozen=True, slots=True)
class DeleteFile:
    """Remove a file that must exist."""

    path: str


@dataclass(frozen=True, slots=True)
class UpdateFile:
    """Change a file in place, or move it (``move_to`` must not exist)."""

    path: str
    chunks: tuple[Chunk, ...]
    move_to: str | None = None


Operation: TypeAlias = AddFile | DeleteFile | UpdateFile


@dataclass(frozen=True, slots=True)
class Patch:
    """The operations of a patch, in order."""

    operations: tuple[Operation, ...]


def parse_patch(text: str, limits: PatchLimits = PatchLimits()) -> Patch:
    """Parse a patch in one pass over its lines.

    Raises:
        PatchError: naming the line that is wrong, or the bound that was passed.
    """
    if len(text) > limits.max_chars:
        raise PatchError(f"the patch is over {limits.max_chars} characters")
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    while lines and not lines[-1].strip():
        lines.pop()
    first = next((i for i, line in enumerate(lines) if line.strip()), len(lines))
    if first == len(lines) or lines[first].strip() != BEGIN:
        raise PatchError(f"a patch starts with {BEGIN!r}", line=first + 1)
    if lines[-1].strip() != END:
        raise PatchError(f"a patch ends with {END!r}", line=len(lines))
    return _Parser(lines, first + 1, len(lines) - 1, limits).run()


class _Parser:
    def __init__(self, lines: list[str], start: int, stop: int, limits: PatchLimits) -> None:
        self.lines = lines
        self.i = start
        self.stop = stop
        self.limits = limits
        self.chunks = 0

    def run(self) -> Patch:
        ops: list[Operation] = []
        while self.i < self.stop:
            line = self.lines[self.i]
            self.i += 1
            if line.startswith(ADD):
                ops.append(AddFile(self._path(line, ADD), tuple(self._added())))
            elif line.startswith(DELETE):
                ops.append(DeleteFile(self._path(line, DELETE)))
            elif line.startswith(UPDATE):
                ops.append(self._update(self._path(line, UPDATE)))
            elif not line.strip():
                continue
            else:
                raise PatchError(f"expected a file operation, got {line[:80]!r}", line=self.i)
            if len(ops) > self.limits.max_files:
                raise PatchError(f"a patch may touch at most {self.limits.max_files} files")
        if not ops:
            raise PatchError("the patch has no operations")
        return Patch(tuple(ops))

    def _path(self, line: str, prefix: str) -> str:
        path = line[len(prefix) :].strip()
        if not path:
            raise PatchError("a file operation needs a path", line=self.i)
        return path

    def _header(self) -> bool:
        return self.lines[self.i].startswith("*** ") and self.lines[self.i] != EOF_MARK

    def _added(self) -> list[str]:
        out: list[str] = []
        while self.i < self.stop and not self._header():
            line = self.lines[self.i]
            if not line.startswith("+"):
                raise PatchError("every line of an added file starts with '+'", line=self.i + 1)
            out.append(line[1:])
            self.i += 1
        return out

    def _update(self, path: str) -> UpdateFile:
        move_to = None
        if self.i < self.stop and self.lines[self.i].startswith(MOVE):
            move_to = self._path(self.lines[self.i], MOVE)
            self.i += 1
        chunks: list[Chunk] = []
        while self.i < self.stop and not self._header():
            chunks.append(self._chunk(first=not chunks))
            self.chunks += 1
            if self.chunks > self.limits.max_chunks:
                raise PatchError(f"a patch may have at most {self.limits.max_chunks} chunks")
        if not chunks and move_to is None:
            raise PatchError(f"the update of {path!r} has no chunks", line=self.i, path=path)
        return UpdateFile(path, tuple(chunks), move_to)

    def _chunk(self, *, first: bool) -> Chunk:
        start = self.i + 1
        line = self.lines[self.i]
        anchor: str | None = None
        if line.startswith("@@"):
            anchor = line[2:].strip() or None
            self.i += 1
        elif not first:
            raise PatchError(f"expected '@@' to start a chunk, got {line[:80]!r}", line=start)
        old: list[str] = []
        new: list[str] = []
        at_eof = False
        while self.i < self.stop and not self._header() and not self.lines[self.i].startswith("@@"):
            line = self.lines[self.i]
            self.i += 1
            if line == EOF_MARK:
                at_eof = True
                break
            tag, body = line[:1], line[1:]
            if tag in (" ", ""):
                old.append(body)
                new.append(body)
            elif tag == "-":
                old.append(body)
            elif tag == "+":
                new.append(body)
            else:
                raise PatchError(
                    f"a chunk line starts with ' ', '-' or '+', got {line[:80]!r}", line=self.i
                )
        if not old and not new:
            raise PatchError("an empty chunk", line=start)
        return Chunk(anchor, tuple(old), tuple(new), at_eof, start)


def apply_chunks(lines: list[str], chunks: tuple[Chunk, ...], *, path: str = "") -> list[str]:
    """``lines`` with every chunk applied in order.

    Raises:
        PatchError: a chunk's old lines are missing or occur more than once in
            its part of the file, or an anchor is missing.
    """
    out = list(lines)
    cursor = 0
    for chunk in chunks:
        start = cursor
        if chunk.anchor is not None:
            start = _find_anchor(out, chunk, start, path) + 1
        at = _locate(out, chunk, start, path)
        out[at : at + len(chunk.old)] = chunk.new
        cursor = at + len(chunk.new)
    return out


def _find_anchor(lines: list[str], chunk: Chunk, start: int, path: str) -> int:
    anchor = chunk.anchor
    for index in range(start, len(lines)):
        if lines[index].strip() == anchor:
            return index
    raise PatchError(f"{path}: anchor {anchor!r} not found", line=chunk.line, path=path)


def _locate(lines: list[str], chunk: Chunk, start: int, path: str) -> int:
    old = list(chunk.old)
    size = len(old)
    if chunk.at_eof:
        at = len(lines) - size
        if at < start or lines[at:] != old:
            raise PatchError(
                f"{path}: the end of the file does not match the chunk", line=chunk.line, path=path
            )
        return at
    if not old:
        if chunk.anchor is None:
            raise PatchError(
                f"{path}: a chunk without context or removed lines needs an '@@' anchor "
                "or '*** End of File'",
                line=chunk.line,
                path=path,
            )
        return start
    found = _occurrences(lines, old, start)
    if not found:
        raise PatchError(f"{path}: the chunk's context was not found", line=chunk.line, path=path)
    if len(found) > 1:
        raise PatchError(
            f"{path}: the chunk's context matches {len(found)} places (lines "
            f"{found[0] + 1} and {found[1] + 1}); add context lines so it matches one",
            line=chunk.line,
            path=path,
        )
    return found[0]


def _occurrences(lines: list[str], old: list[str], start: int) -> list[int]:
    """Up to two positions at or after ``start`` where ``old`` occurs."""
    found: list[int] = []
    first, size = old[0], len(old)
    index = start
    last = len(lines) - size
    while index <= last:
        try:
            index = lines.index(first, index, last + 1)
        except ValueError:
            break
        if lines[index : index + size] == old:
            found.append(index)
            if len(found) == 2:
                break
        index += 1
    return found
