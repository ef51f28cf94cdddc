"""What a context compiler records of its turns: call snapshots, turn snapshots, totals.

With accounting on, each compiled request a model call reports on becomes a
:class:`~mainspring.context.snapshot.CallSnapshot` of the current turn; the
turn's end makes them a :class:`~mainspring.context.snapshot.TurnSnapshot`,
handed to the sinks and kept (the newest ``retain_turns``), and folded into
the session's totals when they are read or when the bound drops one.
:class:`TurnRecords` is the compiler's base class for this part.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from mainspring._lowlevel.frozen import maker
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

__all__ = ["TurnRecords", "new_turn"]

T = TypeVar("T")

_NO_USAGE = Usage()
_NO_COST = CostEstimate(usd=0.0, priced=False, price_source="none")


@dataclass(slots=True)
class Turn:
    """The turn being compiled: its calls so far, the compiled request awaiting usage."""

    turn_index: int
    started_at: float
    calls: list[CallSnapshot] = field(default_factory=list)
    pending: CompiledContext[Any] | None = None


new_turn = maker(Turn)
"""A :class:`Turn` made without calling the class (one per turn; see ``_lowlevel.frozen.maker``)."""


class TurnRecords(Generic[T]):
    """The turn and session records of a :class:`~mainspring.context.ContextCompiler`."""

    # Read from the class until first changed (most sessions keep no records).
    _turn: Turn | None = None
    _totals: SessionTotals | None = None
    """Made at the first snapshot added (only accounting takes them)."""
    _summary: list[TurnSnapshot] | None = None
    """The turn snapshots kept (see :attr:`summary`): a list from the first one."""
    _unfolded: list[TurnSnapshot] | None = None
    """Turn snapshots not added to ``_totals`` yet (added when read, or past the bound)."""
    _turn_cache: dict[str, Any]
    """The current turn's cache (made at a turn's first compile, dropped at its end)."""
    # Set by the compiler:
    meter: Meter | None
    session_id: str
    retain_turns: int | None
    _sinks: SinkSet | None

    def record_call(
        self,
        compiled: CompiledContext[T],
        *,
        model: str,
        usage: Usage,
        cost: CostEstimate,
    ) -> CallSnapshot | None:
        """Attach the provider's usage and cost to a compiled request (accounting on)."""
        if self.meter is None or self._turn is None:
            return None
        segments = compiled.segments
        tokenizer = self.meter.tokenizer
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
        self._turn.calls.append(call)
        if self._turn.pending is compiled:
            self._turn.pending = None
        return call

    def _flush_turn(self) -> TurnSnapshot | None:
        turn, self._turn = self._turn, None
        if turn is None:
            return None
        if self.meter is None:
            del self._turn_cache  # made with the turn (a new turn makes a new one)
            return None
        if turn.pending is not None:  # compiled, but the call never reported usage
            pending = turn.pending
            self._turn = turn
            self.record_call(pending, model=self.meter.model, usage=_NO_USAGE, cost=_NO_COST)
            self._turn = None
        del self._turn_cache
        if not turn.calls:
            return None
        snapshot = TurnSnapshot(
            session_id=self.session_id,
            turn_index=turn.turn_index,
            calls=tuple(turn.calls),
            started_at=turn.started_at,
        )
        summary = self._summary
        if summary is None:
            summary = self._summary = []
        summary.append(snapshot)
        unfolded = self._unfolded
        if unfolded is None:
            unfolded = self._unfolded = []
        unfolded.append(snapshot)
        if self.retain_turns is not None:
            if len(summary) > self.retain_turns:
                del summary[0]  # one at a time: the list never holds more than the bound
            if len(unfolded) > self.retain_turns:  # counted now: memory stays bounded
                self._folded_totals().add(unfolded.pop(0))
        if self._sinks is not None:
            self._sinks.emit(snapshot)
        return snapshot

    @property
    def summary(self) -> list[TurnSnapshot]:
        """The turn snapshots taken (with accounting on), the newest ``retain_turns``."""
        kept = self._summary
        return [] if kept is None else kept

    def session_summary(self) -> SessionSummary:
        """Totals over every turn snapshot taken so far (also those no longer kept)."""
        return self._folded().summary(self.session_id, retained_turns=len(self.summary))

    def _folded_totals(self) -> SessionTotals:
        if self._totals is None:
            self._totals = SessionTotals()
        return self._totals

    def _folded(self) -> SessionTotals:
        """The session's totals, the turns not added yet added now (in order)."""
        totals, unfolded = self._folded_totals(), self._unfolded
        while unfolded:  # (None before the first snapshot)
            totals.add(unfolded[0])
            del unfolded[0]
        return totals

    def adopt_telemetry(self, previous: TurnRecords[T]) -> None:
        """Carry another engine's kept snapshots and totals over (one session, new engine)."""
        self._totals = previous._folded().copy()
        summary = self._summary = list(previous.summary)
        if self.retain_turns is not None:
            del summary[: max(0, len(summary) - self.retain_turns)]
