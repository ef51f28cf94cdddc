"""RunResult: what one run came to, for programs that need no event stream.

``Session.run(message)`` (and ``run_sync``) drive a whole stream and return
its :class:`RunResult`: the final text, the pending action if the turn paused
for a decision, usage and cost, and every event. A run that ended in an
``error`` event raises :class:`~mainspring.errors.RunFailed` instead; one a
guardrail stopped raises :class:`~mainspring.errors.GuardrailTripwire`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mainspring.errors import GuardrailTripwire, RunFailed
from mainspring.events import (
    ErrorEvent,
    Event,
    GuardrailVerdict,
    PendingAction,
    StopReason,
    TextDelta,
    TurnComplete,
)
from mainspring.usage import Usage

__all__ = ["RunResult", "result_of"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    """The outcome of one send or resume."""

    text: str
    """The text the model streamed in this run (all steps)."""
    stop_reason: StopReason
    pending: PendingAction | None = None
    """The action waiting for a decision, when the turn paused."""
    turn_index: int = 0
    usage: Usage = Usage()
    cost_usd: float = 0.0
    events: tuple[Event, ...] = ()

    @property
    def paused(self) -> bool:
        """Whether the turn waits for a decision (see :attr:`pending`)."""
        return self.pending is not None


def result_of(events: Sequence[Event]) -> RunResult:
    """The result of a finished stream.

    Raises:
        RunFailed: The stream ended with an ``error`` event.
        GuardrailTripwire: A guardrail tripped (``stop_reason="guardrail_tripped"``).
    """
    last = events[-1] if events else None
    if isinstance(last, ErrorEvent):
        raise RunFailed(
            last.message,
            code=last.code,
            retryable=last.retryable,
            attempt_id=last.attempt_id,
            event=last,
        )
    if not isinstance(last, TurnComplete):
        raise RunFailed("the stream ended without a terminal event", code="no_terminal")
    pending = next((e for e in reversed(events) if isinstance(e, PendingAction)), None)
    result = RunResult(
        text="".join(e.text for e in events if isinstance(e, TextDelta)),
        stop_reason=last.stop_reason,
        pending=pending if last.stop_reason == "pending_action" else None,
        turn_index=last.turn_index,
        usage=last.usage,
        cost_usd=last.cost_usd,
        events=tuple(events),
    )
    if last.stop_reason == "guardrail_tripped":
        verdict = next(e for e in events if isinstance(e, GuardrailVerdict) and e.tripwire)
        raise GuardrailTripwire(
            f"{verdict.stage} guardrail {verdict.name!r} tripped: {verdict.reason}".rstrip(": "),
            verdict=verdict,
            result=result,
        )
    return result
