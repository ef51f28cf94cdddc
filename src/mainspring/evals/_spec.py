"""The YAML form of a dataset: validated with pydantic, built into Case and Dataset.

```yaml
name: wallet
agent: my_app.agents:wallet        # optional: mainspring eval run uses it
evaluators:                         # checks every case gets
  - max_cost_usd: 0.01
cases:
  - name: pay alice
    input: Pay Alice $20            # or a list: messages sent one after another
    approve: all                    # all | none | {tool: approve | reject}
    steps:                          # optional: the model's answers, scripted
      - calls: [{pay: {to: alice, amount_usd: 20}}]
      - Paid.
    expect:
      - contains: Paid
      - tools: {calls: [pay], mode: exact}
      - approvals: {asked: [pay], approved: [pay]}
```

Every mistake is a :class:`~mainspring.evals.dataset.DatasetError` naming the
file, the case and the field (``expect.1.tools.mode``), raised before
anything runs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from mainspring._lowlevel.json_value import JsonValue
from mainspring.errors import ConfigError
from mainspring.evals.checks import (
    Contains,
    Equals,
    Evaluator,
    JsonOutput,
    NotContains,
    Regex,
    StopReasonIs,
)
from mainspring.evals.dataset import Case, Dataset, DatasetError
from mainspring.evals.guarantees import Approvals, MaxCost
from mainspring.evals.judge import LLMJudge
from mainspring.evals.trajectory import ToolCalls
from mainspring.events import StopReason
from mainspring.models.scripted import ScriptedCall, ScriptedResponse

__all__ = ["dataset_from_data", "load_dataset"]

CallSpec = str | dict[str, dict[str, JsonValue]]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StepSpec(_Strict):
    """One scripted model answer: text, thinking, tool calls."""

    text: str = ""
    thinking: str = ""
    calls: list[CallSpec] = []


class ToolsSpec(_Strict):
    calls: list[CallSpec]
    mode: Literal["exact", "in_order", "subset"] = "exact"
    of: Literal["calls", "ran"] = "calls"


class ContainsSpec(_Strict):
    texts: str | list[str]
    ignore_case: bool = False


class ApprovalsSpec(_Strict):
    asked: list[str] | None = None
    approved: list[str] | None = None
    rejected: list[str] | None = None
    blocked: list[str] | None = None
    denied: list[str] | None = None


class JudgeSpec(_Strict):
    rubric: str = Field(min_length=1)
    threshold: float = Field(default=0.5, ge=0, le=1)


class CheckSpec(_Strict):
    """One check: a mapping with exactly one of these keys."""

    equals: str | None = None
    contains: str | list[str] | ContainsSpec | None = None
    not_contains: str | list[str] | None = None
    regex: str | None = None
    json_schema: dict[str, JsonValue] | None = None
    tools: ToolsSpec | None = None
    approvals: ApprovalsSpec | None = None
    max_cost_usd: float | None = Field(default=None, ge=0)
    stop_reason: StopReason | None = None
    judge: str | JudgeSpec | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_key(cls, data: Any) -> Any:
        keys = ", ".join(cls.model_fields)
        if isinstance(data, dict) and len(data) != 1:
            raise ValueError(f"a check has exactly one key ({keys}), not {sorted(data)}")
        if isinstance(data, dict) and next(iter(data)) not in cls.model_fields:
            raise ValueError(f"unknown check {next(iter(data))!r}: one of {keys}")
        return data


class CaseSpec(_Strict):
    name: str = Field(min_length=1)
    input: str | list[str]
    expect: list[CheckSpec] = []
    steps: list[str | StepSpec] | None = None
    approve: Literal["all", "none"] | dict[str, Literal["approve", "reject"]] = "none"
    budget_usd: float | None = Field(default=None, ge=0)
    metadata: dict[str, JsonValue] = {}


class DatasetSpec(_Strict):
    name: str | None = None
    agent: str | None = None
    evaluators: list[CheckSpec] = []
    cases: list[dict[str, Any]] = Field(min_length=1)
    metadata: dict[str, JsonValue] = {}


_UNION_TAGS = re.compile(r"[\[\]\-]|^(str|int|float|bool|list|dict|none|literal|\w+Spec)$")
"""What pydantic puts in an error's path to name a union's alternative, not a field."""


def _problem(exc: ValidationError) -> tuple[str, str]:
    """The most specific problem's field path and message (a union's alternatives joined).

    A union reports one error per alternative; the deepest path is the one the
    author meant (``input.1``, not ``input``, for a list with a bad item).
    """
    grouped: dict[str, list[str]] = {}
    depth: dict[str, int] = {}
    for error in exc.errors(include_url=False):
        loc = [str(p) for p in error["loc"] if not _UNION_TAGS.search(str(p))]
        msg = error["msg"].removeprefix("Value error, ")
        key = ".".join(loc)
        found = grouped.setdefault(key, [])
        depth[key] = len(loc)
        if msg not in found:
            found.append(msg)
    field = max(grouped, key=lambda k: depth[k])  # the first of the deepest
    return field, " or ".join(grouped[field])


def _call(spec: CallSpec) -> ScriptedCall:
    if isinstance(spec, str):
        return ScriptedCall(spec, {})
    if len(spec) != 1:
        raise ConfigError(f"a call is {{tool: {{args}}}} with one tool, not {sorted(spec)}")
    [(name, args)] = spec.items()
    return ScriptedCall(name, args)


def _step(spec: str | StepSpec) -> str | ScriptedResponse:
    if isinstance(spec, str):
        return spec
    calls = [_call(c) for c in spec.calls]
    return ScriptedResponse(text=spec.text, thinking=spec.thinking, tool_calls=calls)


def _check(spec: CheckSpec) -> tuple[str, Evaluator]:  # noqa: C901  # one branch per key
    if spec.equals is not None:
        return "equals", Equals(spec.equals)
    if spec.contains is not None:
        c = spec.contains
        if isinstance(c, ContainsSpec):
            return "contains", Contains(c.texts, ignore_case=c.ignore_case)
        return "contains", Contains(c)
    if spec.not_contains is not None:
        return "not_contains", NotContains(spec.not_contains)
    if spec.regex is not None:
        return "regex", Regex(spec.regex)
    if spec.json_schema is not None:
        return "json_schema", JsonOutput(spec.json_schema)
    if spec.tools is not None:
        t = spec.tools
        return "tools", ToolCalls(t.calls, mode=t.mode, of=t.of)
    if spec.approvals is not None:
        return "approvals", Approvals(**spec.approvals.model_dump())
    if spec.max_cost_usd is not None:
        return "max_cost_usd", MaxCost(spec.max_cost_usd)
    if spec.stop_reason is not None:
        return "stop_reason", StopReasonIs(spec.stop_reason)
    if spec.judge is not None:
        j = spec.judge
        if isinstance(j, str):
            return "judge", LLMJudge(j)
        return "judge", LLMJudge(j.rubric, threshold=j.threshold)
    raise ConfigError("a check needs one key")  # _one_key refused it already


def _checks(
    specs: list[CheckSpec], *, source: str, case: str | None, field: str
) -> list[Evaluator]:
    built: list[Evaluator] = []
    for index, spec in enumerate(specs):
        key = next(iter(spec.model_fields_set), "")
        try:
            _, evaluator = _check(spec)
        except (ConfigError, ImportError) as exc:
            raise DatasetError(
                str(exc), source=source, case=case, field=f"{field}.{index}.{key}"
            ) from None
        built.append(evaluator)
    return built


def _case(raw: dict[str, Any], index: int, source: str) -> Case:
    label = raw.get("name") if isinstance(raw.get("name"), str) and raw.get("name") else f"#{index}"
    try:
        spec = CaseSpec.model_validate(raw)
    except ValidationError as exc:
        field, message = _problem(exc)
        raise DatasetError(message, source=source, case=label, field=field) from None
    expect = _checks(spec.expect, source=source, case=spec.name, field="expect")
    steps = None
    if spec.steps is not None:
        try:
            steps = [_step(s) for s in spec.steps]
        except ConfigError as exc:
            raise DatasetError(str(exc), source=source, case=spec.name, field="steps") from None
    try:
        return Case(
            name=spec.name,
            inputs=spec.input,
            expect=expect,
            steps=steps,
            approve=spec.approve,
            budget_usd=spec.budget_usd,
            metadata=spec.metadata,
        )
    except DatasetError as exc:
        raise DatasetError(exc.problem, source=source, case=spec.name, field=exc.field) from None


def dataset_from_data(
    data: object, *, source: str = "python", default_name: str = "eval"
) -> Dataset:
    """A dataset from parsed YAML (or JSON) data.

    Raises:
        DatasetError: The data is not a dataset (names the case and the field).
    """
    if not isinstance(data, dict):
        kind = type(data).__name__ if data is not None else "empty"
        raise DatasetError(f"a dataset is a mapping with 'cases', not {kind}", source=source)
    try:
        spec = DatasetSpec.model_validate(data)
    except ValidationError as exc:
        field, message = _problem(exc)
        raise DatasetError(message, source=source, field=field) from None
    evaluators = _checks(spec.evaluators, source=source, case=None, field="evaluators")
    cases: list[Case] = []
    seen: set[str] = set()
    for index, raw in enumerate(spec.cases):
        case = _case(raw, index, source)
        if case.name in seen:
            raise DatasetError(
                "two cases have this name", source=source, case=case.name, field="name"
            )
        seen.add(case.name)
        cases.append(case)
    return Dataset(
        name=spec.name or default_name,
        cases=cases,
        evaluators=evaluators,
        agent=spec.agent,
        metadata=spec.metadata,
    )


def load_dataset(path: str | Path) -> Dataset:
    """Load a dataset from a YAML file (the form in this module's docstring).

    Raises:
        DatasetError: The file is missing or unreadable, not YAML, or not a
            dataset; the message names the file, the case and the field.
    """
    import yaml

    path = Path(path)
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DatasetError("no such file", source=source) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read it: {exc}", source=source) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise DatasetError(f"not valid YAML{where}: {problem}", source=source) from None
    return dataset_from_data(data, source=source, default_name=path.stem)
