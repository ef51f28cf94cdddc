"""Evals: run a dataset of cases against an agent and score what it did.

```python
from mainspring.evals import Approvals, Case, Contains, Dataset, ToolCalls, evaluate

dataset = Dataset(name="wallet", cases=[Case(name="pay", inputs="Pay Alice $20", ...)])
report = await evaluate(dataset, agent, concurrency=4, repeat=2)
print(report.passed, "/", report.total)
```

- :class:`Dataset` of :class:`Case` (Python, or YAML: :func:`load_dataset`);
- :func:`evaluate` / :func:`run_case`: a fresh session per case, approvals
  decided per case through ``Session.resume``, bounded concurrency, repetitions;
- evaluators of the final answer (:class:`Equals`, :class:`Contains`,
  :class:`Regex`, :class:`JsonOutput`, :class:`LLMJudge`), of the trajectory
  (:class:`ToolCalls`), and of what only mainspring knows (:class:`Approvals`,
  :class:`MaxCost`, :class:`StopReasonIs`);
- :class:`EvalReport` (JSON), :func:`print_report`, :func:`render_html`, and
  :func:`diff_reports` between two runs. ``mainspring eval`` is the CLI.

Importing ``mainspring`` does not import this package; it loads pydantic,
PyYAML and rich when first imported.
"""

from mainspring.evals._spec import load_dataset
from mainspring.evals.checks import (
    Contains,
    Equals,
    Evaluator,
    JsonOutput,
    NotContains,
    Regex,
    Score,
    StopReasonIs,
)
from mainspring.evals.dataset import ApprovalPolicy, Case, Dataset, DatasetError
from mainspring.evals.diff import CaseDelta, EvalDiff, diff_reports
from mainspring.evals.guarantees import Approvals, MaxCost
from mainspring.evals.judge import LLMJudge
from mainspring.evals.report import print_report, render_html, write_html
from mainspring.evals.results import CaseResult, EvalReport, ScoreResult
from mainspring.evals.runner import AgentSource, evaluate, run_case
from mainspring.evals.trace import CaseTrace, ToolCall, trace_of
from mainspring.evals.trajectory import MatchMode, ToolCalls, match_calls

__all__ = [
    "AgentSource",
    "ApprovalPolicy",
    "Approvals",
    "Case",
    "CaseDelta",
    "CaseResult",
    "CaseTrace",
    "Contains",
    "Dataset",
    "DatasetError",
    "Equals",
    "EvalDiff",
    "EvalReport",
    "Evaluator",
    "JsonOutput",
    "LLMJudge",
    "MatchMode",
    "MaxCost",
    "NotContains",
    "Regex",
    "Score",
    "ScoreResult",
    "StopReasonIs",
    "ToolCall",
    "ToolCalls",
    "diff_reports",
    "evaluate",
    "load_dataset",
    "match_calls",
    "print_report",
    "render_html",
    "run_case",
    "trace_of",
    "write_html",
]
