"""A cost router: send easy turns to a cheap model, hard ones to an expensive one.

Fast heuristics decide first (length, code, reasoning words, tools in play,
history size). Only when they are unsure does the router ask the cheap model
to judge, in a few tokens. It never raises on its own account: a judge that
fails or answers nonsense sends the turn to the expensive model. Each turn is
routed once (on its user message); the turn's later steps keep the choice.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Literal

from mainspring.messages import Message, TextPart
from mainspring.models.base import Model, ModelEvent, ModelRequest, ModelSettings, SystemBlock

__all__ = ["RoutedModel", "RoutingStats"]

Route = Literal["cheap", "expensive"]

_HARD_WORDS = re.compile(
    r"\b(prove|proof|derive|analy[sz]e|architect|design|refactor|debug|optimi[sz]e|"
    r"step[- ]by[- ]step|trade-?offs?|compare|plan|strategy|why)\b",
    re.IGNORECASE,
)
_EASY = re.compile(r"^\s*(hi|hello|hey|thanks?|thank you|ok(ay)?|yes|no|bye)\b[\s!.?]*$", re.I)
_JUDGE_PROMPT = (
    "Classify how hard the user's last request is for an AI assistant. "
    "Answer with exactly one word: SIMPLE or COMPLEX."
)


@dataclass
class RoutingStats:
    """How turns were routed, and why."""

    routes: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    judge_calls: int = 0
    judge_failures: int = 0


def heuristic_route(request: ModelRequest) -> tuple[Route | None, str]:
    """A route and its reason, or ``(None, reason)`` when unsure."""
    user = next((m for m in reversed(request.messages) if m.role == "user"), None)
    text = user.text if user else ""
    if _EASY.match(text):
        return "cheap", "small talk"
    if "```" in text or len(text) > 2000:
        return "expensive", "code or a long request"
    if len(request.messages) > 40:
        return "expensive", "long history"
    if _HARD_WORDS.search(text):
        return "expensive", "reasoning words"
    if len(text) < 120 and not request.tools:
        return "cheap", "short request, no tools"
    return None, "unsure"


class RoutedModel:
    """Routes each turn to ``cheap`` or ``expensive`` (see the module docstring)."""

    def __init__(self, cheap: Model, expensive: Model, *, judge: bool = True) -> None:
        """Create a router; ``judge=False`` sends unsure turns to ``expensive`` at once."""
        self.cheap = cheap
        self.expensive = expensive
        self.judge = judge
        self.stats = RoutingStats()
        self._turn: tuple[int, Route] | None = None

    @property
    def name(self) -> str:
        """Both models' names."""
        return f"route({self.cheap.name}|{self.expensive.name})"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream from the model this turn is routed to."""
        model = self.cheap if await self._route(request) == "cheap" else self.expensive
        async for event in model.stream(request):
            yield event

    async def _route(self, request: ModelRequest) -> Route:
        user = next((m for m in reversed(request.messages) if m.role == "user"), None)
        key = id(user)
        if self._turn is not None and self._turn[0] == key:
            return self._turn[1]  # a later step of the same turn
        route, reason = heuristic_route(request)
        if route is None:
            route, reason = (
                await self._ask_judge(request) if self.judge else ("expensive", "unsure")
            )
        self.stats.routes[route] += 1
        self.stats.reasons[reason] += 1
        self._turn = (key, route)
        return route

    async def _ask_judge(self, request: ModelRequest) -> tuple[Route, str]:
        self.stats.judge_calls += 1
        last = next((m.text for m in reversed(request.messages) if m.role == "user"), "")
        judge_request = ModelRequest(
            system=(SystemBlock(text=_JUDGE_PROMPT, source="router"),),
            messages=(Message(role="user", parts=(TextPart(text=last[:4000]),)),),
            settings=ModelSettings(max_tokens=5, temperature=0.0),
        )
        answer = ""
        try:
            async for event in self.cheap.stream(judge_request):
                if event.type == "text_delta":
                    answer += event.text
        except Exception:  # the router never fails a turn of its own accord
            self.stats.judge_failures += 1
            return "expensive", "judge failed"
        verdict = answer.strip().upper()
        if verdict.startswith("SIMPLE"):
            return "cheap", "judge: simple"
        if verdict.startswith("COMPLEX"):
            return "expensive", "judge: complex"
        self.stats.judge_failures += 1
        return "expensive", "judge unclear"
