"""The results of an eval run: per case and repetition, and the whole report, as JSON.

The JSON a run writes (``mainspring eval run --json``) is this module's
:class:`EvalReport`; ``mainspring eval diff`` reads two of them back
(:meth:`EvalReport.read`, which names the file and the field that is wrong).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mainspring._lowlevel.json_value import JsonValue
from mainspring.errors import ConfigError

__all__ = ["REPORT_VERSION", "CaseResult", "EvalReport", "ScoreResult"]

REPORT_VERSION = 1
"""The version of the results file's layout."""


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ScoreResult(_Record):
    """One evaluator's score of one run of a case."""

    evaluator: str
    passed: bool
    score: float
    reason: str = ""
    cost_usd: float = 0.0
    """The evaluator's own spend (an LLM judge's), apart from the case's."""
    tokens: int = 0
    """The evaluator's own tokens (input and output)."""


class CaseResult(_Record):
    """One run (one repetition) of one case."""

    case: str
    repetition: int = 0
    passed: bool
    error: str | None = None
    """Why the case could not run or ended in an ``error`` event."""
    output: str = ""
    stop_reason: str | None = None
    calls: list[dict[str, JsonValue]] = []
    """The tool calls the model asked for: ``{"name": …, "args": …}``."""
    asked: list[str] = []
    approved: list[str] = []
    rejected: list[str] = []
    blocked: list[str] = []
    denied: list[str] = []
    cost_usd: float = 0.0
    """What the case's session spent."""
    input_tokens: int = 0
    output_tokens: int = 0
    scores: list[ScoreResult] = []
    metadata: dict[str, JsonValue] = {}

    @property
    def score(self) -> float:
        """The mean of the scores (1.0 with none, 0.0 on an error)."""
        if self.error is not None and not self.scores:
            return 0.0
        return sum(s.score for s in self.scores) / len(self.scores) if self.scores else 1.0

    @property
    def judge_cost_usd(self) -> float:
        """What the evaluators themselves spent on this run."""
        return sum(s.cost_usd for s in self.scores)

    @property
    def judge_tokens(self) -> int:
        """Tokens the evaluators themselves used on this run."""
        return sum(s.tokens for s in self.scores)


class EvalReport(_Record):
    """Every result of a run of a dataset, with what it was run with."""

    version: int = REPORT_VERSION
    dataset: str
    agent: str | None = None
    repeat: int = 1
    concurrency: int = 1
    results: list[CaseResult] = Field(default_factory=list)

    @property
    def total(self) -> int:
        """Runs (cases times repetitions)."""
        return len(self.results)

    @property
    def passed(self) -> int:
        """Runs that passed every check."""
        return sum(r.passed for r in self.results)

    @property
    def ok(self) -> bool:
        """Whether every run passed."""
        return self.passed == self.total

    @property
    def cost_usd(self) -> float:
        """What the cases' sessions spent."""
        return sum(r.cost_usd for r in self.results)

    @property
    def judge_cost_usd(self) -> float:
        """What the evaluators (LLM judges) spent, apart from the cases."""
        return sum(r.judge_cost_usd for r in self.results)

    @property
    def judge_tokens(self) -> int:
        """Tokens the evaluators used, apart from the cases."""
        return sum(r.judge_tokens for r in self.results)

    def by_case(self) -> dict[str, list[CaseResult]]:
        """The results grouped by case, in the dataset's order."""
        grouped: dict[str, list[CaseResult]] = {}
        for result in self.results:
            grouped.setdefault(result.case, []).append(result)
        return grouped

    def to_json(self) -> str:
        """The report as JSON text (what :meth:`read` reads back)."""
        return self.model_dump_json(indent=2)

    def write(self, path: str | Path) -> None:
        """Write the report as JSON to ``path`` (blocking)."""
        Path(path).write_text(self.to_json() + "\n", encoding="utf-8")

    @classmethod
    def from_json(cls, text: str, *, source: str = "results") -> EvalReport:
        """A report from JSON text.

        Raises:
            ConfigError: Not JSON, or not a results file (names the field).
        """
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            field = ".".join(str(p) for p in error["loc"])
            if error["type"] == "json_invalid":
                raise ConfigError(f"{source}: not JSON ({error['msg']})") from None
            where = f", {field}" if field else ""
            raise ConfigError(
                f"{source}{where}: {error['msg']} (not a results file of mainspring eval run?)"
            ) from None

    @classmethod
    def read(cls, path: str | Path) -> EvalReport:
        """Read a results file (blocking).

        Raises:
            ConfigError: The file is missing, unreadable, or not a results file.
        """
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read it: {exc}") from None
        report = cls.from_json(text, source=str(path))
        if report.version != REPORT_VERSION:
            raise ConfigError(
                f"{path}: results version {report.version}; this mainspring reads {REPORT_VERSION}"
            )
        return report
