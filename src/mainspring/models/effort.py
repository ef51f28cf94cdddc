"""Adaptive effort: a neutral reasoning level picked per query, beside the cost router.

:func:`classify_effort` reads the turn's user message with fast heuristics
(small talk, lookups, money-moving or multi-step requests, reasoning words,
code, length) and never raises: anything it cannot read is ``"medium"``.
:class:`AdaptiveEffort` wraps a model and sets ``ModelSettings.effort`` on
each request that leaves it unset, once per turn (the turn's later steps keep
the level); an explicit effort in the agent's settings always wins. Each
provider adapter maps the neutral level to its own thinking controls.

```python
agent = Agent(model=AdaptiveEffort(model_from_string("anthropic:claude-sonnet-4-5")))
```
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace

from mainspring.models.base import Effort, Model, ModelEvent, ModelRequest

__all__ = ["AdaptiveEffort", "EffortStats", "classify_effort"]

_SMALL_TALK = re.compile(
    r"^\s*(hi|hello|hey|thanks?|thank you|ok(ay)?|yes|no|sure|great|cool|bye)\b[\s!.?]*$", re.I
)
_LOOKUP = re.compile(
    r"^\s*(what('?s| is| are)|show|list|how much|how many|check|get|tell me)\b", re.IGNORECASE
)
_ACTION = re.compile(
    r"\b(transfer|send|pay|withdraw|deposit|borrow|repay|swap|buy|sell|trade|invest|"
    r"rebalance|move|convert)\b",
    re.IGNORECASE,
)
_REASONING = re.compile(
    r"\b(why|explain|analy[sz]e|compare|plan|strategy|optimi[sz]e|trade-?offs?|should i|"
    r"what if|risk|forecast|design|debug|refactor)\b",
    re.IGNORECASE,
)
_DEEP = re.compile(
    r"\b(think (hard|carefully|deeply)|step[- ]by[- ]step|prove|proof|derive|thoroughly|"
    r"in depth|rigorous(ly)?)\b",
    re.IGNORECASE,
)
_STEPS = re.compile(r"\b(then|and then|after that|finally|first)\b", re.IGNORECASE)


def classify_effort(text: str) -> tuple[Effort, str]:
    """The effort level for a query, with the reason; never raises (``"medium"``)."""
    try:
        return _classify(text)
    except Exception:  # a classifier must never fail a turn
        return "medium", "unreadable"


def _classify(text: str) -> tuple[Effort, str]:
    text = text[:8000]
    if not text.strip():
        return "medium", "empty"
    if _SMALL_TALK.match(text):
        return "minimal", "small talk"
    if _DEEP.search(text):
        return "max", "asks for deep reasoning"
    if "```" in text or len(text) > 2000:
        return "high", "code or a long request"
    reasoning = _REASONING.search(text) is not None
    action = _ACTION.search(text) is not None
    steps = len(_STEPS.findall(text))
    if reasoning and (action or steps):
        return "high", "reasoning about actions"
    if action and steps:
        return "high", "several actions"
    if reasoning:
        return "medium", "reasoning words"
    if action:
        return "medium", "moves money or state"
    if _LOOKUP.match(text) and len(text) < 200:
        return "low", "a lookup"
    return "medium", "neutral"


@dataclass
class EffortStats:
    """Which levels turns got, and why."""

    levels: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)


class AdaptiveEffort:
    """A model whose requests get an effort level per query (see the module docstring)."""

    def __init__(
        self,
        model: Model,
        *,
        classify: Callable[[str], tuple[Effort, str]] = classify_effort,
    ) -> None:
        """Wrap ``model``; ``classify`` replaces the heuristics (a failing one means medium)."""
        self.model = model
        self.classify = classify
        self.stats = EffortStats()
        self._turn: tuple[int, Effort] | None = None

    @property
    def name(self) -> str:
        """The wrapped model's name (prices and usage are its own)."""
        return self.model.name

    def level(self, request: ModelRequest) -> Effort:
        """The level this request's turn gets (decided on its first step)."""
        user = next((m for m in reversed(request.messages) if m.role == "user"), None)
        key = id(user)
        if self._turn is not None and self._turn[0] == key:
            return self._turn[1]
        try:
            level, reason = self.classify(user.text if user is not None else "")
        except Exception:  # never fail a turn on the classifier's account
            level, reason = "medium", "classifier failed"
        self.stats.levels[level] += 1
        self.stats.reasons[reason] += 1
        self._turn = (key, level)
        return level

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream from the wrapped model, with the effort set unless the request set one."""
        if request.settings.effort is None:
            settings = replace(request.settings, effort=self.level(request))
            request = replace(request, settings=settings)
        async for event in self.model.stream(request):
            yield event
