"""What a context compiler records of its turns: call snapshots, turn snapshots, totals.

A :class:`CompiledTurn` is the turn a compiler is compiling: its index, the
tool cache its compiles share, and (with accounting on) the calls recorded
so far. The compiler holds one per turn, with or without accounting.

A :class:`TurnLog` is the accounting side, held by a compiler only when
accounting is on: each compiled request a model call reports on becomes a
:class:`~mainspring.context.snapshot.CallSnapshot` of the current turn; the
turn's end makes them a :class:`~mainspring.context.snapshot.TurnSnapshot`,
handed to the sinks and kept (the newest ``retain_turns``), and folded into
the session's totals when they are read or when the bound drops one. It
holds no reference to its compiler.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from mainspring.context._compiled import CompiledContext
from mainspring.context.snapshot import (
    CallSnapshot,
    CostEstimate,
    Segments,
    SessionSummary,
    SessionTotals,
    TurnSnapshot,
)
from mainspring.usage import Usage

if TYPE_CHECKING:
    from mainspring.context.accounting import Meter
    from mainspring.context.sinks import SinkSet

__all__ = ["CompiledTurn", "TurnLog", "empty_summary"]

T = TypeVar("T")

_NO_USAGE = Usage()
_NO_COST = CostEstimate(usd=0.0, priced=False, price_source="none")


@dataclass(slots=True)
class CompiledTurn:
    """The turn being compiled: its tool cache, its calls so far, the request awaiting usage.

    The cache is shared by the turn's compiles (e.g. memory recalled once per
    turn) and goes with the turn.
    """

    turn_index: int
    started_at: float
    cache: dict[str, Any] = field(default_factory=dict)
    calls: list[CallSnapshot] = field(default_factory=list)
    pending: CompiledContext[Any] | None = None


def empty_summary(session_id: str) -> SessionSummary:
    """The session summary of a compiler that recorded no turn."""
    return SessionTotals().summary(session_id, retained_turns=0)


class TurnLog(Generic[T]):
    """The turn and session records of one compiler with accounting on."""

    def __init__(
        self,
        meter: Meter | None,
        session_id: str,
        retain_turns: int | None,
        sinks: SinkSet | None,
    ) -> None:
        """Records for ``session_id``, made with ``meter`` (``None``: adopted ones only).

        ``retain_turns`` bounds :attr:`summary`; ``sinks`` receive each turn
        snapshot.
        """
        self.meter = meter
        self.session_id = session_id
        self.retain_turns = retain_turns
        self.sinks = sinks
        self._totals: SessionTotals | None = None
        """Made at the first snapshot folded in (or adopted)."""
        self._summary: list[TurnSnapshot] = []
        """The turn snapshots kept (see :attr:`summary`)."""
        self._unfolded: list[TurnSnapshot] = []
        """Turn snapshots not added to ``_totals`` yet (added when read, or past the bound)."""

    def record_call(
        self,
        turn: CompiledTurn,
        compiled: CompiledContext[T],
        *,
        model: str,
        usage: Usage,
        cost: CostEstimate,
    ) -> CallSnapshot | None:
        """Attach the provider's usage and cost to a request compiled in ``turn``."""
        meter = self.meter
        if meter is None:
            return None
        segments = compiled.segments
        tokenizer = meter.tokenizer
        if isinstance(segments, Segments):  # its figures are read when first needed
            call = CallSnapshot.deferred(
                step=compiled.step,
                model=model,
                tokenizer=tokenizer.name,
                exact=tokenizer.exact,
                segments=segments,
                usage=usage,
                cost=cost,
            )
        else:
            call = CallSnapshot(
                step=compiled.step,
                model=model,
                tokenizer=tokenizer.name,
                exact=tokenizer.exact,
                segments=segments,
                chars=sum(s.chars for s in segments),
                tokens=compiled.tokens,
                prefix_tokens=compiled.prefix_tokens,
                stable_tokens=compiled.stable_tokens,
                usage=usage,
                cost=cost,
            )
        turn.calls.append(call)
        if turn.pending is compiled:
            turn.pending = None
        return call

    def close(self, turn: CompiledTurn) -> TurnSnapshot | None:
        """The snapshot of the ended ``turn`` (kept, and handed to the sinks), if it made calls.

        A request compiled but never reported on is recorded with no usage.
        """
        meter = self.meter
        if meter is None:
            return None
        if turn.pending is not None:  # compiled, but the call never reported usage
            self.record_call(turn, turn.pending, model=meter.model, usage=_NO_USAGE, cost=_NO_COST)
        if not turn.calls:
            return None
        snapshot = TurnSnapshot(
            session_id=self.session_id,
            turn_index=turn.turn_index,
            calls=tuple(turn.calls),
            started_at=turn.started_at,
        )
        summary, unfolded = self._summary, self._unfolded
        summary.append(snapshot)
        unfolded.append(snapshot)
        if self.retain_turns is not None:
            if len(summary) > self.retain_turns:
                del summary[0]  # one at a time: the list never holds more than the bound
            if len(unfolded) > self.retain_turns:  # counted now: memory stays bounded
                self._folded_totals().add(unfolded.pop(0))
        if self.sinks is not None:
            self.sinks.emit(snapshot)
        return snapshot

    @property
    def summary(self) -> list[TurnSnapshot]:
        """The turn snapshots taken, the newest ``retain_turns``."""
        return self._summary

    def session_summary(self) -> SessionSummary:
        """Totals over every turn snapshot taken so far (also those no longer kept)."""
        return self._folded().summary(self.session_id, retained_turns=len(self._summary))

    def adopt(self, previous: TurnLog[Any] | None) -> None:
        """Carry ``previous``'s kept snapshots and totals over (one session, a new compiler).

        ``None`` (the previous compiler recorded nothing): start from empty totals.
        """
        if previous is None:
            self._totals, self._summary = SessionTotals(), []
            return
        self._totals = previous._folded().copy()
        summary = self._summary = list(previous.summary)
        if self.retain_turns is not None:
            del summary[: max(0, len(summary) - self.retain_turns)]

    def _folded_totals(self) -> SessionTotals:
        if self._totals is None:
            self._totals = SessionTotals()
        return self._totals

    def _folded(self) -> SessionTotals:
        """The session's totals, the turns not added yet added now (in order)."""
        totals, unfolded = self._folded_totals(), self._unfolded
        while unfolded:
            totals.add(unfolded[0])
            del unfolded[0]
        return totals
