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
from typing import Literal, Protocol

from mainspring.toolkits.confine import WorkspaceError

__all__ = [
    "MAX_GLOB_CHARS",
    "MAX_PATTERN_CHARS",
    "Engine",
    "Matcher",
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


class Match(Protocol):
    """A match: where it starts (what the search reads of it)."""

    def start(self) -> int:
        """Offset of the match's first character."""
        ...


class Matcher(Protocol):
    """What both engines' compiled patterns offer the search."""

    def finditer(self, text: str) -> Iterator[Match]:
        """Every non-overlapping match in ``text``."""
        ...

    def fullmatch(self, text: str) -> Match | None:
        """A match of the whole of ``text`` (how a glob is matched)."""
        ...


def engine() -> Engine:
    """``"re2"`` when ``google-re2`` is importable here, else ``"re"``."""
    try:
        import re2  # noqa: F401  # lazy: only a search needs it
    except ImportError:
        return "re"
    return "re2"


def compile_pattern(pattern: str, *, ignore_case: bool = False, using: Engine) -> Matcher:
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
    return _compile(pattern, ignore_case=ignore_case, using=using, what="pattern")


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


def compile_glob(glob: str, *, using: Engine) -> Matcher:
    """``glob`` (see :func:`glob_source`) compiled for ``using``; ``.fullmatch`` a relative path.

    Raises:
        WorkspaceError: too long, or a bracket expression the engine refuses.
    """
    return _compile(glob_source(glob), ignore_case=False, using=using, what="glob")


def _compile(source: str, *, ignore_case: bool, using: Engine, what: str) -> Matcher:
    if using == "re2":
        import re2  # lazy: only a search needs it

        options = re2.Options()
        options.max_mem = _RE2_MAX_MEM
        options.case_sensitive = not ignore_case
        options.log_errors = False  # the error is raised, not written to stderr
        try:
            compiled: Matcher = re2.compile(source, options)
        except re2.error as exc:
            reason = exc.args[0] if exc.args else exc
            if isinstance(reason, bytes):
                reason = reason.decode("utf-8", errors="replace")
            raise WorkspaceError(f"invalid search {what} for RE2: {reason}", path=".") from None
        return compiled
    try:
        return re.compile(source, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise WorkspaceError(f"invalid search {what}: {exc}", path=".") from None
