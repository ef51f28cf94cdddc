"""Trajectory checks: which tools were called, in which order, with which arguments.

An expected call names a tool and, optionally, some of its arguments: a call
matches when its name is the same and each argument given is equal (the
others may be anything). :func:`match_calls` compares expected calls with the
actual ones in one of three modes:

- ``exact``: the same number of calls, each matching in order;
- ``in_order``: the expected calls appear in that order, others may come between;
- ``subset``: each expected call matches a different actual call, in any order.

``exact`` implies ``in_order``, which implies ``subset`` (a property test checks it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeAlias

from mainspring._lowlevel.json_value import JsonValue
from mainspring.errors import ConfigError
from mainspring.evals.checks import Score
from mainspring.evals.trace import ToolCall

if TYPE_CHECKING:
    from mainspring.evals.trace import CaseTrace

__all__ = ["MatchMode", "Matched", "ToolCalls", "call_matches", "match_calls"]

MatchMode: TypeAlias = Literal["exact", "in_order", "subset"]
MODES: tuple[MatchMode, ...] = ("exact", "in_order", "subset")


def call_matches(expected: ToolCall, actual: ToolCall) -> bool:
    """Whether ``actual`` is the tool ``expected`` names, with every argument it gives."""
    if expected.name != actual.name:
        return False
    return all(k in actual.args and actual.args[k] == v for k, v in expected.args.items())


@dataclass(frozen=True, slots=True)
class Matched:
    """How expected calls fared against the actual ones."""

    ok: bool
    matched: int
    """How many expected calls found their match (the best assignment)."""
    reason: str = ""


def _in_order(expected: Sequence[ToolCall], actual: Sequence[ToolCall]) -> int:
    # Leftmost-first is optimal for a subsequence: a later match never helps more.
    found, at = 0, 0
    for want in expected:
        while at < len(actual) and not call_matches(want, actual[at]):
            at += 1
        if at == len(actual):
            break
        found, at = found + 1, at + 1
    return found


def _subset(expected: Sequence[ToolCall], actual: Sequence[ToolCall]) -> int:
    # A maximum bipartite matching (augmenting paths): partial arguments mean one
    # actual call may fit several expected ones, so a greedy choice can be wrong.
    owner: dict[int, int] = {}

    def place(i: int, seen: set[int]) -> bool:
        for j, call in enumerate(actual):
            if j in seen or not call_matches(expected[i], call):
                continue
            seen.add(j)
            if j not in owner or place(owner[j], seen):
                owner[j] = i
                return True
        return False

    return sum(place(i, set()) for i in range(len(expected)))


def _names(calls: Sequence[ToolCall]) -> str:
    return "[" + ", ".join(f"{c.name}{dict(c.args) if c.args else ''}" for c in calls) + "]"


def match_calls(
    expected: Sequence[ToolCall], actual: Sequence[ToolCall], mode: MatchMode = "exact"
) -> Matched:
    """Compare ``expected`` with ``actual`` calls in ``mode`` (see the module docstring)."""
    if mode == "exact":
        same = sum(call_matches(w, a) for w, a in zip(expected, actual, strict=False))
        ok = len(expected) == len(actual) and same == len(expected)
        found = same
    elif mode == "in_order":
        found = _in_order(expected, actual)
        ok = found == len(expected)
    elif mode == "subset":
        found = _subset(expected, actual)
        ok = found == len(expected)
    else:
        raise ConfigError(f"a match mode is one of {', '.join(MODES)}, not {mode!r}")
    reason = "" if ok else f"expected {_names(expected)} ({mode}), got {_names(actual)}"
    return Matched(ok, found, reason)


ExpectedCall: TypeAlias = "str | ToolCall | Mapping[str, Mapping[str, JsonValue]]"
"""A tool name, a :class:`ToolCall`, or ``{name: {arg: value, …}}``."""


def expected_call(spec: ExpectedCall) -> ToolCall:
    """An expected call from its short forms.

    Raises:
        ConfigError: A mapping that is not ``{name: {args}}``.
    """
    if isinstance(spec, ToolCall):
        return spec
    if isinstance(spec, str):
        return ToolCall(spec)
    if len(spec) != 1:
        raise ConfigError(f"an expected call is {{name: {{args}}}} with one name, not {dict(spec)}")
    [(name, args)] = spec.items()
    if not isinstance(args, Mapping):
        raise ConfigError(f"the arguments of expected call {name!r} must be a mapping")
    return ToolCall(name, dict(args))


class ToolCalls:
    """The run's tool calls match ``expected`` (see :func:`match_calls`).

    ```python
    ToolCalls(["get_balances", {"transfer": {"amount_usd": 50}}], mode="in_order")
    ```

    ``of="calls"`` (the default) checks what the model asked for; ``of="ran"``
    what actually started (after approvals, blocks and rejections; a write's
    ``post_write_refresh`` reads too). The score is the share of expected calls
    matched (``exact``: of the longer of the two lists).
    """

    def __init__(
        self,
        expected: Sequence[ExpectedCall],
        *,
        mode: MatchMode = "exact",
        of: Literal["calls", "ran"] = "calls",
        name: str = "tools",
    ) -> None:
        """Expect ``expected`` calls in ``mode``.

        Raises:
            ConfigError: An unknown mode or source, or a malformed expected call.
        """
        if mode not in MODES:
            raise ConfigError(f"mode is one of {', '.join(MODES)}, not {mode!r}")
        if of not in ("calls", "ran"):
            raise ConfigError(f"of is 'calls' or 'ran', not {of!r}")
        self.expected = tuple(expected_call(e) for e in expected)
        self.mode: MatchMode = mode
        self.of = of
        self.name = name

    def __repr__(self) -> str:
        return f"ToolCalls({list(self.expected)!r}, mode={self.mode!r}, of={self.of!r})"

    async def evaluate(self, trace: CaseTrace) -> Score:
        """Pass when the calls match; the score is the share matched (see the class)."""
        actual = trace.calls if self.of == "calls" else trace.ran
        result = match_calls(self.expected, actual, self.mode)
        # exact also counts the calls nobody expected: two calls where one was expected is half.
        most = max(len(self.expected), len(actual)) if self.mode == "exact" else len(self.expected)
        share = result.matched / most if most else float(result.ok)
        return Score(evaluator=self.name, passed=result.ok, score=share, reason=result.reason)
