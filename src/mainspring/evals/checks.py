"""Evaluators: the protocol, the score they give, and the checks of a final answer.

An evaluator looks at a :class:`~mainspring.evals.trace.CaseTrace` and gives a
:class:`Score` (passed or not, a number in [0, 1], the reason). This module
holds the checks of the final answer; trajectory checks are in
:mod:`mainspring.evals.trajectory`, the mainspring-only ones (approvals,
blocks, spend) in :mod:`mainspring.evals.guarantees`, the model-graded one in
:mod:`mainspring.evals.judge`.

```python
Contains("Paid"), Regex(r"[0-9]+ USD"), Equals("Done."), JsonOutput(Invoice)
```
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from mainspring._lowlevel.json_value import JsonValue
from mainspring.errors import ConfigError
from mainspring.events import StopReason
from mainspring.usage import Usage

if TYPE_CHECKING:
    from mainspring.evals.trace import CaseTrace

__all__ = [
    "Contains",
    "Equals",
    "Evaluator",
    "JsonOutput",
    "NotContains",
    "Regex",
    "Score",
    "StopReasonIs",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Score:
    """What one evaluator found for one run of a case."""

    evaluator: str
    """The evaluator's name (``contains``, ``tools``, ``judge``…)."""
    passed: bool
    score: float = 0.0
    """In [0, 1]: 1.0 or 0.0 for a check; a judge's or a partial match's grade."""
    reason: str = ""
    """Why it failed (or the judge's reasoning)."""
    usage: Usage = Usage()
    """Tokens the evaluator itself used (an LLM judge's), counted apart from the case's."""
    cost_usd: float = 0.0
    """What the evaluator itself cost (an LLM judge's calls)."""


def verdict(name: str, passed: bool, reason: str) -> Score:
    """A pass/fail score: 1.0 with no reason, or 0.0 with ``reason``."""
    return Score(
        evaluator=name, passed=passed, score=1.0 if passed else 0.0, reason="" if passed else reason
    )


@runtime_checkable
class Evaluator(Protocol):
    """Anything that scores a case's run.

    ``evaluate`` may await (an LLM judge does); cancelling it leaves nothing behind.
    """

    @property
    def name(self) -> str:
        """A short name for reports (``contains``, ``tools``…)."""
        ...

    async def evaluate(self, trace: CaseTrace) -> Score:
        """Score one run of a case."""
        ...


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class Equals:
    """The final answer is exactly ``text`` (surrounding whitespace ignored)."""

    text: str
    name: str = "equals"

    async def evaluate(self, trace: CaseTrace) -> Score:
        """Pass when the stripped answer equals the stripped text."""
        ok = trace.output.strip() == self.text.strip()
        return verdict(self.name, ok, f"expected {self.text!r}, got {_short(trace.output)!r}")


@dataclass(frozen=True, slots=True)
class Contains:
    """The final answer contains every one of ``texts``."""

    texts: Sequence[str] | str
    ignore_case: bool = False
    name: str = "contains"

    async def evaluate(self, trace: CaseTrace) -> Score:
        """Pass when each text occurs in the answer; the score is the share found."""
        wanted = [self.texts] if isinstance(self.texts, str) else list(self.texts)
        hay = trace.output.lower() if self.ignore_case else trace.output
        missing = [t for t in wanted if (t.lower() if self.ignore_case else t) not in hay]
        share = 1.0 - len(missing) / len(wanted) if wanted else 1.0
        reason = f"missing {missing} in {_short(trace.output)!r}" if missing else ""
        return Score(evaluator=self.name, passed=not missing, score=share, reason=reason)


@dataclass(frozen=True, slots=True)
class NotContains:
    """The final answer contains none of ``texts``."""

    texts: Sequence[str] | str
    name: str = "not_contains"

    async def evaluate(self, trace: CaseTrace) -> Score:
        """Pass when no text occurs in the answer."""
        unwanted = [self.texts] if isinstance(self.texts, str) else list(self.texts)
        found = [t for t in unwanted if t in trace.output]
        return verdict(self.name, not found, f"found {found} in {_short(trace.output)!r}")


@dataclass(frozen=True, slots=True)
class Regex:
    """The final answer matches ``pattern`` somewhere (:func:`re.search`)."""

    pattern: str
    name: str = "regex"
    _compiled: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "_compiled", re.compile(self.pattern))
        except re.error as exc:
            raise ConfigError(f"regex {self.pattern!r} does not compile: {exc}") from None

    async def evaluate(self, trace: CaseTrace) -> Score:
        """Pass when the pattern is found in the answer."""
        ok = self._compiled.search(trace.output) is not None
        return verdict(self.name, ok, f"no match for {self.pattern!r} in {_short(trace.output)!r}")


@dataclass(frozen=True, slots=True)
class JsonOutput:
    """The final answer is JSON valid against a schema.

    ``schema`` is a JSON schema (a mapping: checked with ``jsonschema``, the
    ``jsonschema`` extra) or a type pydantic validates (a model, a TypedDict,
    a dataclass, ``list[int]``…).
    """

    schema: Mapping[str, JsonValue] | type[Any]
    name: str = "json_schema"

    def __post_init__(self) -> None:
        if isinstance(self.schema, Mapping):
            _validator(self.schema)  # a bad schema is refused when the check is made

    async def evaluate(self, trace: CaseTrace) -> Score:
        """Pass when the answer parses as JSON and the schema accepts it."""
        text = _unfenced(trace.output)
        try:
            value = json.loads(text)
        except ValueError as exc:
            return verdict(self.name, False, f"the answer is not JSON ({exc}): {_short(text)!r}")
        if isinstance(self.schema, Mapping):
            errors = sorted(_validator(self.schema).iter_errors(value), key=lambda e: e.path)
            problems = [f"{'/'.join(map(str, e.path)) or '(root)'}: {e.message}" for e in errors]
        else:
            from pydantic import TypeAdapter, ValidationError

            try:
                TypeAdapter(self.schema).validate_python(value)
                problems = []
            except ValidationError as exc:
                problems = [
                    f"{'/'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in exc.errors()
                ]
        return verdict(self.name, not problems, "; ".join(problems[:5]))


def _unfenced(text: str) -> str:
    """The text without a Markdown code fence around it (models like to add one)."""
    found = re.fullmatch(r"\s*```[\w-]*\n(.*?)\n?```\s*", text, flags=re.DOTALL)
    return found.group(1) if found else text.strip()


def _validator(schema: Mapping[str, JsonValue]) -> Any:
    try:
        import jsonschema
    except ImportError as exc:
        raise ImportError(
            'a JSON-schema check needs: pip install "mainspring[jsonschema]"'
        ) from exc
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ConfigError(f"not a valid JSON schema: {exc.message}") from None
    return cls(schema)


@dataclass(frozen=True, slots=True)
class StopReasonIs:
    """The case's last turn ended with ``stop_reason`` (``end_turn``, ``budget_exceeded``…)."""

    stop_reason: StopReason
    name: str = "stop_reason"

    async def evaluate(self, trace: CaseTrace) -> Score:
        """Pass when the last turn ended so."""
        got = trace.stop_reason or f"error ({trace.error})"
        return verdict(
            self.name,
            trace.stop_reason == self.stop_reason,
            f"ended {got}, expected {self.stop_reason}",
        )
