"""The checks only mainspring can make: approvals asked, writes blocked, money spent.

Other eval libraries see a model's text and tool calls; a mainspring run also
says which writes paused for a decision (and what was decided), which a guard
blocked or a permission rule denied before anyone was asked, and what the
session spent. These evaluators check those facts (see
:class:`~mainspring.evals.trace.CaseTrace`).

```python
Approvals(asked=["transfer"], rejected=["transfer"], blocked=[])
MaxCost(0.01)
```
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mainspring.errors import ConfigError
from mainspring.evals.checks import Score, verdict

if TYPE_CHECKING:
    from mainspring.evals.trace import CaseTrace

__all__ = ["Approvals", "MaxCost"]

_FACTS = ("asked", "approved", "rejected", "blocked", "denied")


@dataclass(frozen=True, slots=True, kw_only=True)
class Approvals:
    """Which tools asked for a decision, were approved, rejected, blocked or denied.

    Each list given must equal the run's, in order (a tool once per call);
    ``[]`` means none; a list left out is not checked.
    """

    asked: Sequence[str] | None = None
    """The tools whose calls paused the turn for a decision."""
    approved: Sequence[str] | None = None
    rejected: Sequence[str] | None = None
    blocked: Sequence[str] | None = None
    """The tools whose calls a guard blocked (they never ran, nobody was asked)."""
    denied: Sequence[str] | None = None
    """The tools whose calls a permission rule denied."""
    name: str = "approvals"

    def __post_init__(self) -> None:
        if all(getattr(self, fact) is None for fact in _FACTS):
            raise ConfigError(f"Approvals checks nothing: give one of {', '.join(_FACTS)}")

    async def evaluate(self, trace: CaseTrace) -> Score:
        """Pass when every list given equals the run's."""
        wrong = []
        for fact in _FACTS:
            want = getattr(self, fact)
            got = list(getattr(trace, fact))
            if want is not None and list(want) != got:
                wrong.append(f"{fact}: expected {list(want)}, got {got}")
        return verdict(self.name, not wrong, "; ".join(wrong))


@dataclass(frozen=True, slots=True)
class MaxCost:
    """The case's session spent at most ``max_usd`` (its model calls, priced).

    An evaluator's own spend (an LLM judge's) is counted apart and not included.
    """

    max_usd: float
    name: str = "max_cost_usd"

    def __post_init__(self) -> None:
        if not self.max_usd >= 0:
            raise ConfigError(f"max_usd must be a non-negative number, not {self.max_usd!r}")

    async def evaluate(self, trace: CaseTrace) -> Score:
        """Pass when the session's cost is within the limit."""
        ok = trace.cost_usd <= self.max_usd
        return verdict(
            self.name, ok, f"spent ${trace.cost_usd:.6f}, over the limit ${self.max_usd:.6f}"
        )
