"""Regular expressions from outside, on a linear-time engine when this process has one.

A pattern a model or a server writes is hostile input. Python's ``re``
backtracks: ``(a+)+$`` over 40 ``a`` and a ``!`` runs for hours, holding the
GIL, so no event loop, thread or deadline gets a turn. RE2 (``google-re2``,
``pip install "mainspring[re2]"``) matches in time linear in the text; it
refuses what needs backtracking (backreferences, lookaround) with a reason.

- :func:`re2_available` says whether RE2 is importable here.
- :func:`compile_re2` compiles for RE2, or raises :class:`RegexRefused` with
  RE2's reason.
- :func:`backtracking_risk` is the check for a process without RE2: it names
  the shapes of pattern that make ``re`` take exponential time (a repeated
  group holding a quantifier or an alternation, a backreference, lookaround).
  It is a screen, not a proof: polynomial blow-ups (``a*a*a*b``) pass it.

Used by tool argument schemas (:mod:`mainspring.tools._schema_keywords`) and
the file toolkit's search (:mod:`mainspring.toolkits.patterns`).
"""

from __future__ import annotations

import importlib
import re
from typing import Any

__all__ = ["RE2_MAX_MEM", "RegexRefused", "backtracking_risk", "compile_re2", "re2_available"]

RE2_MAX_MEM = 8 * 1024 * 1024
"""RE2's memory budget for one compiled pattern (its DFA cache falls back to NFA past it)."""


class RegexRefused(ValueError):
    """A pattern the engine will not run; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        """Hold the reason."""
        super().__init__(reason)
        self.reason = reason


def re2_available() -> bool:
    """Whether ``google-re2`` is importable in this process."""
    try:
        import re2  # noqa: F401  # lazy: only a pattern from outside needs it
    except ImportError:
        return False
    return True


def compile_re2(source: str, *, ignore_case: bool = False, max_mem: int = RE2_MAX_MEM) -> Any:
    """``source`` compiled by RE2 (searching ``str`` or ``bytes`` as UTF-8).

    Raises:
        ImportError: ``google-re2`` is not installed.
        RegexRefused: RE2 cannot compile it (its reason: a backreference,
            lookaround, a syntax error, a program larger than ``max_mem``).
    """
    import re2  # lazy: only a pattern from outside needs it

    options = re2.Options()
    options.max_mem = max_mem
    options.case_sensitive = not ignore_case
    options.log_errors = False  # the error is raised, not written to stderr
    try:
        return re2.compile(source, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", errors="replace")
        raise RegexRefused(str(reason)) from None


_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
_NEVER = {
    "GROUPREF": "a backreference",
    "GROUPREF_EXISTS": "a conditional on a group",
    "ASSERT": "a lookahead or lookbehind",
    "ASSERT_NOT": "a negative lookahead or lookbehind",
}


def backtracking_risk(source: str) -> str | None:
    r"""Why Python's ``re`` could take exponential time on ``source``, or ``None``.

    Refused: a backreference or lookaround (RE2 refuses them too, so a
    pattern passes here only if it could run on RE2 as well), and a group
    repeated without bound (``+``, ``*``, ``{2,}``) that holds another
    quantifier or an alternation (``(a+)+``, ``(a|aa)*``, also the harmless
    ``(\.[a-z]+)*``: the screen cannot tell them apart).

    Raises:
        RegexRefused: ``source`` is not a valid ``re`` pattern.
    """
    parser: Any = importlib.import_module("re._parser")  # what ``re`` compiles with (3.11+)
    try:
        parsed = parser.parse(source)
    except re.error as exc:
        raise RegexRefused(f"not a valid regular expression: {exc}") from None
    return _risk(parsed, repeated=False)


def _risk(items: Any, *, repeated: bool) -> str | None:
    for op, arg in items:
        name = str(op)
        if name in _NEVER:
            return f"it has {_NEVER[name]}"
        if name == "BRANCH" and repeated:
            return "it repeats a group that holds an alternation"
        if name in _REPEATS and repeated and arg[0] != arg[1]:
            return "it repeats a group that holds a quantifier (nested quantifiers)"
        for body, inner in _bodies(name, arg, repeated=repeated):
            if why := _risk(body, repeated=inner):
                return why
    return None


def _bodies(name: str, arg: Any, *, repeated: bool) -> list[tuple[Any, bool]]:
    """The sub-patterns of one parsed item, each with whether it is repeated."""
    if name in _REPEATS:
        _low, high, body = arg
        return [(body, repeated or high > 1)]
    if name == "BRANCH":
        return [(branch, repeated) for branch in arg[1]]
    if name == "SUBPATTERN":
        return [(arg[-1], repeated)]
    if name == "ATOMIC_GROUP":
        return [(arg, repeated)]
    return []
