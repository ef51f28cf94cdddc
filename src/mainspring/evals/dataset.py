"""Case and Dataset: what an eval runs, built in Python or loaded from YAML.

```python
Dataset(
    name="wallet",
    cases=[
        Case(
            name="pay alice",
            inputs="Pay Alice $20",
            steps=[ScriptedResponse(tool_calls=[ScriptedCall("pay", {"to": "alice"})]), "Paid."],
            approve="all",
            expect=[Contains("Paid"), Approvals(asked=["pay"])],
        )
    ],
)
```

A case sends its inputs, one user message after another, to a fresh session
of the agent; each pending action is decided by the case's ``approve`` policy
through ``Session.resume`` (the one dispatch path: nothing is bypassed).
``steps`` script the model for that case, so it runs offline; without them
the agent's own model answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeAlias

from mainspring._lowlevel.json_value import JsonValue
from mainspring.errors import ConfigError

if TYPE_CHECKING:
    from mainspring.evals.checks import Evaluator
    from mainspring.models.scripted import ScriptedResponse

__all__ = ["ApprovalPolicy", "Case", "Dataset", "DatasetError", "Decide", "decide"]

Decide: TypeAlias = Literal["approve", "reject"]
ApprovalPolicy: TypeAlias = "Literal['all', 'none'] | Mapping[str, Decide]"
"""How a case answers pending actions: ``"all"`` approves every one, ``"none"``
rejects every one, ``{tool: "approve" | "reject"}`` decides per tool (a tool
not named is rejected)."""


class DatasetError(ConfigError):
    """A dataset that cannot be used: it names the file, the case and the field."""

    def __init__(
        self, message: str, *, source: str = "", case: str | None = None, field: str = ""
    ) -> None:
        parts = [f"case {case!r}"] if case is not None else []
        parts += [field] if field else []
        where = ": ".join(p for p in (source, ", ".join(parts)) if p)
        super().__init__(f"{where}: {message}" if where else message)
        self.problem = message
        """What is wrong, without where."""
        self.source = source
        """The file (or "python") the dataset came from."""
        self.case = case
        """The case's name (or ``#index`` when it has none); ``None`` for the dataset."""
        self.field = field
        """The field that is wrong, as a dotted path (``expect.2.tools.mode``)."""


def decide(policy: ApprovalPolicy, tool: str) -> Decide:
    """What ``policy`` decides for a pending call of ``tool``."""
    if policy == "all":
        return "approve"
    if policy == "none":
        return "reject"
    return policy.get(tool, "reject")


def _check_policy(policy: object, case: str) -> None:
    if policy in ("all", "none"):
        return
    if not isinstance(policy, Mapping):
        raise DatasetError(
            f"is 'all', 'none' or {{tool: approve|reject}}, not {policy!r}",
            source="python",
            case=case,
            field="approve",
        )
    for tool, choice in policy.items():
        if choice not in ("approve", "reject"):
            raise DatasetError(
                f"{tool!r} must be 'approve' or 'reject', not {choice!r}",
                source="python",
                case=case,
                field=f"approve.{tool}",
            )


@dataclass(frozen=True, kw_only=True)
class Case:
    """One thing to try: messages in, checks on what came out."""

    name: str
    inputs: str | Sequence[str]
    """The user message, or several sent one after another in the same session."""
    expect: Sequence[Evaluator] = ()
    """The checks of this case (the dataset's ``evaluators`` run too)."""
    steps: Sequence[str | ScriptedResponse] | None = None
    """The model's answers, scripted (a ScriptedModel plays them); ``None``: the agent's model."""
    approve: ApprovalPolicy = "none"
    budget_usd: float | None = None
    """The session's budget for this case (``Limits.budget_usd``); ``None`` keeps the agent's."""
    metadata: Mapping[str, JsonValue] = field(default_factory=dict)
    """Free-form data carried into the results (tags, a ticket, an author)."""

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise DatasetError("a case needs a name", source="python", field="name")
        messages = self.messages
        if not messages or not all(m.strip() for m in messages):
            raise DatasetError(
                "give one or more non-empty messages",
                source="python",
                case=self.name,
                field="inputs",
            )
        _check_policy(self.approve, self.name)
        if self.budget_usd is not None and not self.budget_usd >= 0:
            raise DatasetError(
                f"must be a non-negative number, not {self.budget_usd!r}",
                source="python",
                case=self.name,
                field="budget_usd",
            )

    @property
    def messages(self) -> tuple[str, ...]:
        """The user messages, in order."""
        return (self.inputs,) if isinstance(self.inputs, str) else tuple(self.inputs)


@dataclass(frozen=True, kw_only=True)
class Dataset:
    """Cases, and the evaluators every case gets."""

    cases: Sequence[Case]
    name: str = "eval"
    evaluators: Sequence[Evaluator] = ()
    """Checks run on every case, after its own."""
    agent: str | None = None
    """The agent to run, as ``"package.module:attribute"`` (for ``mainspring eval run``)."""
    metadata: Mapping[str, JsonValue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for case in self.cases:
            if case.name in seen:
                raise DatasetError("two cases have this name", source="python", case=case.name)
            seen.add(case.name)

    @classmethod
    def from_yaml(cls, path: str | Path) -> Dataset:
        """Load a dataset from a YAML file (see :func:`~mainspring.evals.load_dataset`).

        Raises:
            DatasetError: The file is missing, not YAML, or not a dataset: the
                message names the file, the case and the field.
        """
        from mainspring.evals._spec import load_dataset

        return load_dataset(path)
