"""Cost tracking: token prices per model and a budget.

Prices are per million tokens and configurable per model name; a model
without a configured price is priced by ``genai-prices`` when that extra is
installed. A model priced by neither costs nothing and is reported as
unpriced, never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import mainspring.prices as _prices
from mainspring.errors import ConfigError
from mainspring.usage import Usage

__all__ = ["CostTracker", "ModelPrice"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelPrice:
    """USD per million tokens of each kind."""

    input: float
    output: float
    cache_read: float | None = None
    """Defaults to ``input``."""
    cache_write: float | None = None
    """Defaults to ``input``."""

    def cost(self, usage: Usage) -> float:
        """USD for ``usage`` (uncached input, cache read and write, output)."""
        cache_read = self.input if self.cache_read is None else self.cache_read
        cache_write = self.input if self.cache_write is None else self.cache_write
        return (
            usage.input_tokens * self.input
            + usage.cache_read_tokens * cache_read
            + usage.cache_write_tokens * cache_write
            + usage.output_tokens * self.output
        ) / 1_000_000


@dataclass(slots=True)
class CostTracker:
    """Accumulates usage and cost; knows when a budget is spent."""

    prices: Mapping[str, ModelPrice] = field(default_factory=dict)
    budget_usd: float | None = None
    total_usd: float = 0.0
    usage: Usage = Usage()
    unpriced: frozenset[str] = frozenset()
    """Models seen without a configured price (replaced, not mutated, and one object
    per distinct set across trackers: a set costs a live session 216 bytes)."""

    def __post_init__(self) -> None:
        if self.budget_usd is not None and self.budget_usd < 0:
            raise ConfigError("budget_usd must not be negative")

    auto_prices: bool = True
    """Look prices up in genai-prices for models not in ``prices``."""

    def price_of(self, model: str, usage: Usage) -> float | None:
        """What ``usage`` on ``model`` costs (``None`` when no price is known)."""
        price = self.prices.get(model)
        if price is not None:
            return price.cost(usage)
        if self.auto_prices and model not in self.unpriced:
            return _prices.genai_price(model, usage)
        return None

    def price_source(self, model: str) -> str:
        """Where ``model``'s price comes from: ``"configured"`` or ``"genai-prices <version>"``."""
        if model in self.prices:
            return "configured"
        return f"genai-prices {_prices.price_data_version()}"

    def price(self, model: str, usage: Usage) -> float:
        """What one call's ``usage`` costs, totals untouched (0 for a model without a price).

        A model without a price joins :attr:`unpriced` (it is not looked up again).
        """
        priced = self.price_of(model, usage)
        if priced is None and model not in self.unpriced:
            self.unpriced = _with(self.unpriced, model)
        return priced or 0.0

    def record(self, model: str, usage: Usage) -> float:
        """Add one call's usage; return its cost."""
        cost = self.price(model, usage)
        self.total_usd += cost
        self.usage = self.usage + usage
        return cost

    def add(self, usd: float) -> None:
        """Count spend that is not a model call of this session (a subagent's)."""
        self.total_usd += usd

    def exceeded(self) -> bool:
        """Whether spending reached the budget."""
        return self.budget_usd is not None and self.total_usd >= self.budget_usd


_SETS: dict[frozenset[str], frozenset[str]] = {}
"""Sets of unpriced models, one object per distinct set (every live session of an
agent on an unpriced model would otherwise hold a set of its own)."""


def _with(models: frozenset[str], model: str) -> frozenset[str]:
    grown = models | {model}
    if len(_SETS) >= 256:  # model names come from configuration: a few, but bound them
        _SETS.clear()
    return _SETS.setdefault(grown, grown)
