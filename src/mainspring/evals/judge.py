"""LLMJudge: a model grades the final answer against a rubric.

The judge runs as an agent of its own (no tools) in a fresh session per
grade, so its tokens and cost are counted by the engine as any session's are
— and kept apart from the case's: they land on the :class:`~mainspring.evals.checks.Score`
(``usage``, ``cost_usd``) and in the report's judge totals, never in the
case's spend or its budget.

The judge is asked to answer with one JSON object,
``{"pass": true|false, "score": 0.0-1.0, "reason": "…"}``; an answer that is
not one fails the check and says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from mainspring.errors import ConfigError, MainspringError
from mainspring.evals.checks import Score

if TYPE_CHECKING:
    from mainspring.cost import ModelPrice
    from mainspring.evals.trace import CaseTrace
    from mainspring.models.base import Model
    from mainspring.session import Session

__all__ = ["JUDGE_INSTRUCTIONS", "LLMJudge"]

JUDGE_INSTRUCTIONS = """You grade an AI assistant's answer against a rubric.
Read the user's request, the assistant's final answer and the rubric. Reply with
one JSON object and nothing else:
{"pass": true or false, "score": a number from 0 to 1, "reason": "one short sentence"}"""


class LLMJudge:
    """Grade the final answer with ``model`` against ``rubric``.

    ```python
    LLMJudge("The answer states the new checking balance.", model=judge_model)
    ```

    ``model`` may be left out and given to the run instead (``judge_model=``,
    ``mainspring eval run --judge-model``). ``threshold``: the least score that
    passes (the judge's ``score``; a bare ``pass`` counts as 1 or 0).
    """

    def __init__(
        self,
        rubric: str,
        *,
        model: Model | None = None,
        threshold: float = 0.5,
        prices: Mapping[str, ModelPrice] | None = None,
        name: str = "judge",
    ) -> None:
        """Make a judge.

        Raises:
            ConfigError: An empty rubric or a threshold outside [0, 1].
        """
        if not rubric.strip():
            raise ConfigError("an LLM judge needs a rubric")
        if not 0.0 <= threshold <= 1.0:
            raise ConfigError(f"threshold is between 0 and 1, not {threshold}")
        self.rubric = rubric
        self.model = model
        self.threshold = threshold
        self.prices = dict(prices or {})
        self.name = name

    def __repr__(self) -> str:
        return f"LLMJudge({self.rubric!r}, threshold={self.threshold})"

    def with_model(self, model: Model) -> LLMJudge:
        """The same judge grading with ``model`` (when it has none of its own)."""
        if self.model is not None:
            return self
        return LLMJudge(
            self.rubric, model=model, threshold=self.threshold, prices=self.prices, name=self.name
        )

    async def evaluate(self, trace: CaseTrace) -> Score:
        """Ask the judge; its spend is on the score, not the case.

        Cancelling it cancels the judge's session run (nothing is left behind).
        """
        from mainspring.agent import Agent
        from mainspring.errors import RunFailed
        from mainspring.session import Session  # the run needs the class itself

        if self.model is None:
            raise ConfigError(
                "an LLM judge has no model: give LLMJudge(model=…) or the run's judge_model"
            )
        agent = Agent(
            name="judge", model=self.model, instructions=JUDGE_INSTRUCTIONS, prices=self.prices
        )
        session = Session(agent)
        try:
            result = await session.run(_prompt(trace, self.rubric))
            answer = result.text
        except (RunFailed, MainspringError) as exc:
            return self._score(False, 0.0, f"the judge failed: {exc}", session)
        finally:
            await session.aclose()
        parsed = _verdict_of(answer)
        if parsed is None:
            reason = f"the judge did not answer with the JSON asked for: {answer[:200]!r}"
            return self._score(False, 0.0, reason, session)
        score, reason = parsed
        return self._score(score >= self.threshold, score, reason, session)

    def _score(self, passed: bool, score: float, reason: str, session: Session) -> Score:
        return Score(
            evaluator=self.name,
            passed=passed,
            score=score,
            reason=reason,
            usage=session.usage,
            cost_usd=session.cost_usd,
        )


def _prompt(trace: CaseTrace, rubric: str) -> str:
    request = "\n\n".join(trace.inputs) or "(the request is not recorded)"
    return (
        f"<request>\n{request}\n</request>\n<answer>\n{trace.output}\n</answer>\n"
        f"<rubric>\n{rubric}\n</rubric>"
    )


def _verdict_of(text: str) -> tuple[float, str] | None:
    """``(score, reason)`` from the judge's answer (a bare ``pass`` scores 1 or 0)."""
    found = re.search(r"\{.*\}", text, flags=re.DOTALL)
    if found is None:
        return None
    try:
        body = json.loads(found.group(0))
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    raw_score = body.get("score")
    raw_pass = body.get("pass")
    if raw_score is None and not isinstance(raw_pass, bool):
        return None
    try:
        score = float(raw_score) if raw_score is not None else float(bool(raw_pass))
    except (TypeError, ValueError):
        return None
    return min(1.0, max(0.0, score)), str(body.get("reason", ""))
