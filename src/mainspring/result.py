"""RunResult: what one run came to, for programs that need no event stream.

``Session.run(message)`` (and ``run_sync``) drive a whole stream and return
its :class:`RunResult`: the final text, the typed output (for an agent with an
``output_type``), the pending action if the turn paused for a decision, usage
and cost, and every event. A run that ended in an ``error`` event raises
:class:`~mainspring.errors.RunFailed` instead
(:class:`~mainspring.errors.OutputInvalid` when no valid output came); one a
guardrail stopped raises :class:`~mainspring.errors.GuardrailTripwire`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar, cast

from mainspring._lowlevel.json_value import JsonValue
from mainspring.errors import ConfigError, GuardrailTripwire, OutputInvalid, RunFailed
from mainspring.events import (
    ErrorEvent,
    Event,
    FinalOutput,
    GuardrailVerdict,
    PendingAction,
    StopReason,
    TextDelta,
    TurnComplete,
)
from mainspring.usage import Usage

__all__ = ["RunResult", "result_of"]

T = TypeVar("T")


class Revives(Protocol):
    """What rebuilds a typed output from its JSON (:class:`~mainspring.output.OutputSpec`)."""

    def revive(self, data: JsonValue) -> object:
        """An instance of the output type from ``data``."""
        ...


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
    output: object = None
    """The turn's answer once it ended (``None`` while paused, or when it ended
    otherwise than ``end_turn``): an instance of the agent's ``output_type``,
    validated; for ``output_type=str``, the final answer's text."""

    @property
    def paused(self) -> bool:
        """Whether the turn waits for a decision (see :attr:`pending`)."""
        return self.pending is not None

    def output_as(self, output_type: type[T]) -> T:
        """:attr:`output`, typed as ``output_type`` for the type checker.

        ```python
        report = result.output_as(Report)
        ```

        Raises:
            ConfigError: The run has no output (it paused, or ended without one),
                or the output is not an instance of ``output_type`` (a class).
        """
        output = self.output
        if output is None:
            raise ConfigError(f"the run has no output (it ended with {self.stop_reason!r})")
        if not _instance(output, output_type):
            raise ConfigError(
                f"the output is a {type(output).__name__}, not a {output_type.__name__}"
            )
        return cast("T", output)


def _instance(value: object, cls: object) -> bool:
    try:
        return isinstance(value, cls)  # type: ignore[arg-type]  # checked at run time below
    except TypeError:  # a TypedDict or a generic alias: not checkable at run time
        return True


def result_of(
    events: Sequence[Event], *, output: Revives | None = None, final_text: str | None = None
) -> RunResult:
    """The result of a finished stream.

    ``output`` revives the stream's ``final_output`` as an instance of the
    agent's output type; without it (``output_type=str``) the output is
    ``final_text``, the answer's text, when the turn ended.

    Raises:
        OutputInvalid: The stream ended with ``error(code="output_invalid")``.
        RunFailed: The stream ended with another ``error`` event.
        GuardrailTripwire: A guardrail tripped (``stop_reason="guardrail_tripped"``).
    """
    last = events[-1] if events else None
    if isinstance(last, ErrorEvent) and last.code == "output_invalid":
        raise OutputInvalid(last.message, event=last)
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
    value: object = None
    if last.stop_reason == "end_turn":
        if output is None:
            value = final_text
        else:
            final = next((e for e in reversed(events) if isinstance(e, FinalOutput)), None)
            value = None if final is None else output.revive(final.output)
    result = RunResult(
        text="".join(e.text for e in events if isinstance(e, TextDelta)),
        stop_reason=last.stop_reason,
        pending=pending if last.stop_reason == "pending_action" else None,
        turn_index=last.turn_index,
        usage=last.usage,
        cost_usd=last.cost_usd,
        events=tuple(events),
        output=value,
    )
    if last.stop_reason == "guardrail_tripped":
        verdict = next(e for e in events if isinstance(e, GuardrailVerdict) and e.tripwire)
        raise GuardrailTripwire(
            f"{verdict.stage} guardrail {verdict.name!r} tripped: {verdict.reason}".rstrip(": "),
            verdict=verdict,
            result=result,
        )
    return result
