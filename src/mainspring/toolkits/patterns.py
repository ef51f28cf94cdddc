"""Search patterns from outside: regular expressions and globs on a linear-time engine.

A pattern the model writes is hostile input. Python's ``re`` backtracks:
``(a+)+$`` over a 40-character line, or a glob of repeated ``**a`` then
``b``, runs for hours, and it holds the GIL while it does, so no other
thread, no event loop and no deadline gets a turn. RE2 (``google-re2``,
``pip install "mainspring[re2]"``) matches in time linear in the text and
releases no control it cannot give back; it refuses what needs backtracking
(backreferences, lookaround) with a clear error.

:func:`engine` says which engine this process has. Without RE2 the search
toolkit runs Python's ``re`` in a child process killed at its deadline
(``mainspring.toolkits.search``); :func:`compile_pattern` with
``engine="re"`` is that child's compiler, never the event loop's.

Patterns are capped at :data:`MAX_PATTERN_CHARS` and globs at
:data:`MAX_GLOB_CHARS`: a bound on compile time and memory for either engine.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import AnyStr, Literal, Protocol, TypeVar, cast

from mainspring.toolkits.confine import WorkspaceError
from mainspring.tools._regex import RegexRefused, compile_re2, re2_available

__all__ = [
    "MAX_GLOB_CHARS",
    "MAX_PATTERN_CHARS",
    "Engine",
    "LinePattern",
    "PathGlob",
    "compile_glob",
    "compile_pattern",
    "engine",
    "glob_source",
]

MAX_PATTERN_CHARS = 1000
"""The longest regular expression a search accepts."""
MAX_GLOB_CHARS = 500
"""The longest file glob a search accepts."""
_RE2_MAX_MEM = 64 * 1024 * 1024
"""RE2's memory budget for one compiled pattern (its DFA cache falls back to NFA past it)."""

Engine = Literal["re2", "re"]


class _Match(Protocol):
    def start(self) -> int: ...


_Text = TypeVar("_Text", str, bytes, contravariant=True)


class _Compiled(Protocol[_Text]):
    """What both engines' compiled patterns offer (RE2's over bytes, ``re``'s over str)."""

    def finditer(self, text: _Text) -> Iterator[_Match]: ...

    def fullmatch(self, text: _Text) -> _Match | None: ...


@dataclass(frozen=True, slots=True)
class LinePattern:
    """A compiled search pattern: the lines of a file it matches."""

    engine: Engine
    _regex: _Compiled[bytes] | _Compiled[str]

    def lines(self, data: bytes) -> Iterator[tuple[int, str]]:
        """``(line number, line)`` of each line with a match, first to last.

        RE2 reads the file's bytes as UTF-8 (no decoding: invalid bytes match
        no character); ``re`` reads them decoded, invalid bytes replaced.
        """
        if self.engine == "re2":
            regex = cast("_Compiled[bytes]", self._regex)
            for number, line in _matching_lines(regex, data, b"\n"):
                yield number, line.decode("utf-8", errors="replace")
        else:
            text = data.decode("utf-8", errors="replace")
            yield from _matching_lines(cast("_Compiled[str]", self._regex), text, "\n")


def _matching_lines(
    regex: _Compiled[AnyStr], text: AnyStr, nl: AnyStr
) -> Iterator[tuple[int, AnyStr]]:
    line_no, scanned, last_line = 1, 0, -1
    for match in regex.finditer(text):
        start = match.start()
        line_no += text.count(nl, scanned, start)
        scanned = start
        if line_no == last_line:
            continue
        last_line = line_no
        begin = text.rfind(nl, 0, start) + 1
        end = text.find(nl, start)
        yield line_no, text[begin : end if end != -1 else len(text)]


@dataclass(frozen=True, slots=True)
class PathGlob:
    """A compiled glob: whether a ``/``-separated relative path matches it whole."""

    engine: Engine
    _regex: _Compiled[bytes] | _Compiled[str] | None
    """``None``: every path (the glob ``*``)."""

    def matches(self, path: str) -> bool:
        """Whether ``path`` matches the glob."""
        if self._regex is None:
            return True
        if self.engine == "re2":
            return cast("_Compiled[bytes]", self._regex).fullmatch(path.encode()) is not None
        return cast("_Compiled[str]", self._regex).fullmatch(path) is not None


def engine() -> Engine:
    """``"re2"`` when ``google-re2`` is importable here, else ``"re"``."""
    return "re2" if re2_available() else "re"


def compile_pattern(pattern: str, *, ignore_case: bool = False, using: Engine) -> LinePattern:
    """``pattern`` compiled for ``using`` (``ignore_case`` as the ``(?i)`` flag).

    Raises:
        WorkspaceError: too long, or not a valid pattern for the engine (the
            engine's reason; RE2 names what it does not support).
    """
    if len(pattern) > MAX_PATTERN_CHARS:
        raise WorkspaceError(
            f"a search pattern must be at most {MAX_PATTERN_CHARS} characters (got {len(pattern)})",
            path=".",
        )
    return LinePattern(
        using, _compile(pattern, ignore_case=ignore_case, using=using, what="pattern")
    )


def glob_source(glob: str) -> str:
    """A glob as a regular expression over ``/``-separated paths (``**`` spans directories).

    It is meant to match a whole path (``fullmatch``).
    A glob without ``/`` matches the file's name in any directory. Runs of
    ``*`` collapse (``***`` is ``**``): the same language, a smaller automaton.

    Raises:
        WorkspaceError: the glob is longer than :data:`MAX_GLOB_CHARS`.
    """
    if len(glob) > MAX_GLOB_CHARS:
        raise WorkspaceError(
            f"a glob must be at most {MAX_GLOB_CHARS} characters (got {len(glob)})", path="."
        )
    glob = re.sub(r"\*{3,}", "**", glob)
    if "/" not in glob:
        glob = "**/" + glob
    out: list[str] = []
    i = 0
    while i < len(glob):
        c = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if glob.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (end := glob.find("]", i + 2)) != -1:
            body = glob[i + 1 : end].replace("\\", "\\\\")
            out.append("[^" + body[1:] + "]" if body.startswith("!") else "[" + body + "]")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def compile_glob(glob: str, *, using: Engine) -> PathGlob:
    """``glob`` (see :func:`glob_source`) compiled for ``using``.

    Raises:
        WorkspaceError: too long, or a bracket expression the engine refuses.
    """
    if glob == "*":  # the default: any name in any directory
        return PathGlob(using, None)
    return PathGlob(using, _compile(glob_source(glob), ignore_case=False, using=using, what="glob"))


def _compile(
    source: str, *, ignore_case: bool, using: Engine, what: str
) -> _Compiled[bytes] | _Compiled[str]:
    if using == "re2":
        try:
            compiled: _Compiled[bytes] = compile_re2(
                source, ignore_case=ignore_case, max_mem=_RE2_MAX_MEM
            )
        except RegexRefused as exc:
            raise WorkspaceError(f"invalid search {what} for RE2: {exc.reason}", path=".") from None
        return compiled
    try:
        return re.compile(source, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise WorkspaceError(f"invalid search {what}: {exc}", path=".") from None
