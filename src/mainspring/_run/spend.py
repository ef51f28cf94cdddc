"""A run's spend: pricing, the session's and the turn's totals, and the one budget check.

Usage and cost live in one place each: the session's totals in the state
(``SessionState.usage`` / ``cost_usd``), a turn's on its record (``Turn.usage`` /
``cost_usd``). :class:`Spend` is the only writer of both. It prices a model
call with the agent's :class:`~mainspring.cost.CostTracker` (used as a pricer
only: it holds no totals here), counts what tools report (a subagent's model
calls), and, with a budget and a store that keeps the session's total across
workers, adds this worker's new spend there (:meth:`Spend.share`).

:meth:`Spend.over_budget` is the run's one budget check, read at the step
boundaries: before each model call, and once the call's usage is recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

import anyio

from mainspring.cost import CostTracker, ModelPrice
from mainspring.events import Event, UsageEvent
from mainspring.state import SessionState, SpendKind, Turn
from mainspring.usage import Usage

__all__ = ["Spend", "SpendShare"]


class SpendShare(Protocol):
    """Where a session's spend total is kept across workers (a run's durability)."""

    async def add_spend(
        self, kind: SpendKind, amount: float, *, cap: float | None, floor: float
    ) -> float | None:
        """Add ``amount`` to the ``kind`` total atomically; return the new total."""
        ...


class Spend:
    """Prices one run's model calls and writes its totals to the state and the turn."""

    __slots__ = ("_emit", "_pricer", "_share", "_state", "_unshared")

    def __init__(
        self,
        *,
        state: SessionState,
        prices: Mapping[str, ModelPrice],
        budget_usd: float | None,
        unpriced: frozenset[str],
        emit: Callable[[Event], None],
        share: SpendShare | None,
    ) -> None:
        """Count toward ``state``'s totals; ``emit`` receives a tool's charges.

        ``unpriced`` names the models an earlier run found without a price (no
        second look-up); ``share`` keeps the session's total across workers,
        used only with a budget (it is what the budget is checked against).
        """
        self._state = state
        self._pricer = CostTracker(prices=prices, budget_usd=budget_usd, unpriced=unpriced)
        self._emit = emit
        self._share = share if budget_usd is not None else None
        self._unshared = 0.0
        """Spend of this run not yet added to the store's total (see :meth:`share`)."""

    @property
    def budget_usd(self) -> float | None:
        """The session's budget (``None``: none)."""
        return self._pricer.budget_usd

    @property
    def total_usd(self) -> float:
        """What the session spent so far (its state's total)."""
        return self._state.cost_usd

    @property
    def unpriced(self) -> frozenset[str]:
        """The models found without a price so far (the next run starts from them)."""
        return self._pricer.unpriced

    @property
    def unshared(self) -> float:
        """Spend :meth:`share` has still to add to the store's total."""
        return self._unshared

    def over_budget(self) -> bool:
        """The one budget check: whether the session's spend reached its budget."""
        budget = self._pricer.budget_usd
        return budget is not None and self._state.cost_usd >= budget

    def priced(self, model: str) -> bool:
        """Whether ``model`` has a price (it was not found without one)."""
        return model not in self._pricer.unpriced

    def price_source(self, model: str) -> str:
        """Where ``model``'s price comes from (see :meth:`CostTracker.price_source`)."""
        return self._pricer.price_source(model)

    def account(self, model: str, usage: Usage, turn: Turn) -> float:
        """One model call's usage, priced and added to the session's and the turn's totals.

        Returns what it cost (0 for a model without a price).
        """
        cost = self._pricer.price(model, usage)
        state = self._state
        before = state.usage
        after = before + usage
        # The session's first turn sums what the session's total sums: one object for the
        # two (the turn's usage stays in its TurnComplete, which a kept session holds).
        turn.charge(cost, usage, sums=after if turn.usage is before else None)
        state.set_totals(state.cost_usd + cost, after)
        if self._share is not None:
            self._unshared += cost
        return cost

    def charge(self, usd: float, what: str) -> None:
        """Spend a tool reported (a subagent's model calls): it counts toward the budget."""
        state = self._state
        turn = state.turn
        if turn is not None:
            turn.charge(usd)
        state.set_totals(state.cost_usd + usd)
        if self._share is not None:
            self._unshared += usd
        self._emit(
            UsageEvent(
                model=f"tool:{what}", usage=Usage(), cost_usd=usd, total_cost_usd=state.cost_usd
            )
        )

    async def share(self) -> None:
        """This worker's new spend joins the session's total in the store.

        The store adds atomically, so the budget check that follows sees what
        every worker running this session spent (with or without a run lock).
        """
        amount, share = self._unshared, self._share
        if not amount or share is None:
            return
        self._unshared = 0.0
        state = self._state
        with anyio.CancelScope(shield=True):
            total = await share.add_spend("cost", amount, cap=None, floor=state.cost_usd - amount)
        if total is not None and total > state.cost_usd:
            state.set_totals(total)  # with other workers' spend
