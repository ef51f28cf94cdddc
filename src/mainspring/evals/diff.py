"""Comparing two eval runs: which cases flipped, how scores and cost moved.

A case's standing in a run is its pass rate over its repetitions and its
mean score. Between a baseline and a candidate:

- a **regression** is a case that passed every repetition in the baseline
  and not in the candidate, or one the candidate no longer has;
- a **fix** is the opposite flip; a case only the candidate has is **new**;
- every case's score delta and the total cost delta are reported.

``mainspring eval diff BASE.json NEW.json`` prints it and exits 1 when there
is a regression (or a score drop past ``--max-score-drop``), else 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mainspring.evals.results import CaseResult, EvalReport

__all__ = ["CaseDelta", "EvalDiff", "diff_reports"]


@dataclass(frozen=True, slots=True)
class CaseDelta:
    """How one case moved between two runs (``None`` where a run lacks the case)."""

    case: str
    before_passed: bool | None
    after_passed: bool | None
    before_score: float | None
    after_score: float | None

    @property
    def score_delta(self) -> float:
        """After minus before (0.0 when either is missing)."""
        if self.before_score is None or self.after_score is None:
            return 0.0
        return self.after_score - self.before_score

    @property
    def status(self) -> str:
        """``regressed``, ``fixed``, ``new``, ``removed``, ``passing`` or ``failing``."""
        if self.before_passed is None:
            return "new"
        if self.after_passed is None:
            return "removed"
        if self.before_passed and not self.after_passed:
            return "regressed"
        if self.after_passed and not self.before_passed:
            return "fixed"
        return "passing" if self.after_passed else "failing"


@dataclass(frozen=True, slots=True)
class EvalDiff:
    """Every case's delta, and the totals'."""

    cases: tuple[CaseDelta, ...] = ()
    cost_before: float = 0.0
    cost_after: float = 0.0
    judge_cost_before: float = 0.0
    judge_cost_after: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def cost_delta(self) -> float:
        """The cases' spend, after minus before."""
        return self.cost_after - self.cost_before

    def regressions(self, *, max_score_drop: float | None = None) -> list[CaseDelta]:
        """Cases regressed or removed, or whose score fell by more than ``max_score_drop``."""
        return [
            d
            for d in self.cases
            if d.status in ("regressed", "removed")
            or (max_score_drop is not None and d.score_delta < -max_score_drop)
        ]


def _standing(results: list[CaseResult]) -> tuple[bool, float]:
    return all(r.passed for r in results), sum(r.score for r in results) / len(results)


def diff_reports(before: EvalReport, after: EvalReport) -> EvalDiff:
    """How ``after`` differs from ``before`` (cases in ``before``'s order, then new ones)."""
    old, new = before.by_case(), after.by_case()
    deltas: list[CaseDelta] = []
    for name in [*old, *(n for n in new if n not in old)]:
        b = _standing(old[name]) if name in old else None
        a = _standing(new[name]) if name in new else None
        deltas.append(
            CaseDelta(
                name,
                b[0] if b else None,
                a[0] if a else None,
                b[1] if b else None,
                a[1] if a else None,
            )
        )
    notes: list[str] = []
    if before.dataset != after.dataset:
        notes.append(f"different datasets: {before.dataset!r} and {after.dataset!r}")
    if before.repeat != after.repeat:
        notes.append(f"different repetitions: {before.repeat} and {after.repeat}")
    return EvalDiff(
        cases=tuple(deltas),
        cost_before=before.cost_usd,
        cost_after=after.cost_usd,
        judge_cost_before=before.judge_cost_usd,
        judge_cost_after=after.judge_cost_usd,
        notes=tuple(notes),
    )
