"""Tripwires: an agent's guardrails run for one loop, and what a trip does to the turn.

```
user message ─► first model call ──────────────► its stream ends ─► wait for the verdict
                 │ (beside it)                                        │
                 └► input guardrails, concurrently ─ one trips ─► cancel the stream,
                                                                  the other guardrails
final answer ─► output guardrails, concurrently ─ one trips ─► turn ends "guardrail_tripped"
```

Input guardrails start with the turn's first model call, not before it, so a
passing guardrail costs no latency. No tool of that first step runs before
their verdict: the loop dispatches the step's calls (writes, and any call
that pauses for approval) only once every input guardrail has passed, and
the reads the reader starts mid-stream wait in the dispatcher
(``Dispatcher.hold``) for the same verdict. A trip cancels the model stream
and the reads, cancels the other guardrails (the first trip wins), and the
step's outcome is :data:`TRIPPED`. A guardrail that raises fails closed: the
same cancellations, then :class:`~mainspring.errors.GuardrailFailed` ends the run.

Each verdict goes to ``Hooks.guardrail_checked`` (the audit), then out as a
``guardrail_verdict`` event. A guardrail's own model calls are priced and
counted into the turn's usage and spend by :meth:`Tripwires.account`.
Private machinery: applications meet ``Agent(input_guardrails=…)``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from mainspring._lowlevel.tasks import TaskGroup
from mainspring._run.dispatch import Dispatcher
from mainspring._run.outcome import Finish
from mainspring._run.spend import Spend
from mainspring.agent import Agent
from mainspring.errors import GuardrailFailed
from mainspring.events import Event, GuardrailVerdict, UsageEvent
from mainspring.guardrails import Guardrail, GuardrailContext, GuardrailResult, GuardrailStage
from mainspring.hooks import call_hook
from mainspring.messages import Message
from mainspring.state import SessionState
from mainspring.tools.context import current_caller
from mainspring.usage import Usage

__all__ = ["TRIPPED", "Tripwires"]

T = TypeVar("T")

TRIPPED = Finish("guardrail_tripped")
"""A guardrail tripped: the turn ends, none of the step's calls run."""


class _Round:
    """One stage's guardrails running together: their verdict once all passed or one tripped."""

    __slots__ = ("decided", "failure", "left", "scope", "tripped")

    def __init__(self, count: int) -> None:
        self.left = count
        self.tripped: GuardrailVerdict | None = None
        self.failure: GuardrailFailed | None = None
        self.decided = anyio.Event()
        self.scope: anyio.CancelScope | None = None
        """What a trip cancels besides the other guardrails (the first model call)."""

    async def passed(self) -> bool:
        """Wait for the verdict: whether every guardrail passed."""
        if not self.decided.is_set():
            await self.decided.wait()
        return self.tripped is None


class Tripwires:
    """Runs an agent's input and output guardrails for one loop."""

    __slots__ = ("_agent", "_dispatch", "_emit", "_input", "_output", "_spend", "_state", "_text")

    def __init__(
        self,
        *,
        agent: Agent,
        state: SessionState,
        spend: Spend,
        dispatch: Dispatcher,
        emit: Callable[[Event], None],
    ) -> None:
        """Guard the turns of ``state`` run by ``agent``; ``emit`` receives the verdicts."""
        self._agent = agent
        self._state = state
        self._spend = spend
        self._dispatch = dispatch
        self._emit = emit
        self._input = _guardrails(agent.input_guardrails)
        self._output = _guardrails(agent.output_guardrails)
        self._text: str | None = None
        """The user message whose input guardrails run beside the next model call."""

    def arm(self, message: Message) -> None:
        """A new turn: its input guardrails run beside its first model call."""
        if self._input:
            self._text = message.text

    @property
    def armed(self) -> bool:
        """Whether the next model call runs beside input guardrails."""
        return self._text is not None

    async def beside(self, first_call: Awaitable[T]) -> T | Finish:
        """Run ``first_call`` (the turn's first model step) beside the input guardrails.

        Returns what it returned once every guardrail passed, or :data:`TRIPPED`.
        Cancelling cancels the call and the guardrails.

        Raises:
            GuardrailFailed: A guardrail raised (the call was cancelled).
        """
        text, self._text = self._text, None
        assert text is not None, "armed"
        checks = self._input
        verdict = _Round(len(checks))
        dispatch = self._dispatch
        dispatch.hold = verdict.passed
        outcome: T | None = None
        try:
            async with TaskGroup(shielded=False) as group:  # the checks never raise
                for check in checks:
                    group.start_soon(self._check, check, "input", text, verdict, group)
                with anyio.CancelScope() as verdict.scope:
                    outcome = await first_call
        finally:
            dispatch.hold = None
        if verdict.failure is not None:
            raise verdict.failure
        if verdict.tripped is not None:
            return TRIPPED
        assert outcome is not None
        return outcome

    async def check_output(self, text: str) -> bool:
        """Run the output guardrails on the final answer ``text``; whether all passed.

        Raises:
            GuardrailFailed: A guardrail raised.
        """
        checks = self._output
        if not checks:
            return True
        verdict = _Round(len(checks))
        async with TaskGroup(shielded=False) as group:  # the checks never raise
            for check in checks:
                group.start_soon(self._check, check, "output", text, verdict, group)
        if verdict.failure is not None:
            raise verdict.failure
        return verdict.tripped is None

    async def _check(
        self,
        guardrail: Guardrail,
        stage: GuardrailStage,
        text: str,
        verdict: _Round,
        group: TaskGroup,
    ) -> None:
        """Run one guardrail and record its verdict; never raises (a failure trips)."""
        state = self._state
        turn_index = state.turn.index if state.turn is not None else state.turn_index
        ctx = GuardrailContext(
            name=guardrail.name,
            stage=stage,
            session_id=state.session_id,
            agent_name=self._agent.name,
            turn_index=turn_index,
            caller=current_caller(),
            account=lambda model, usage: self.account(guardrail.name, model, usage),
        )
        error: Exception | None = None
        try:
            result = await guardrail.run(ctx, text)
        except Exception as exc:
            error = exc
            result = GuardrailResult(tripwire=True, reason=f"{type(exc).__name__}: {exc}")
        if verdict.tripped is not None:
            return  # another one tripped first (it cancels this one)
        event = GuardrailVerdict(
            name=guardrail.name,
            stage=stage,
            tripwire=result.tripwire,
            reason=result.reason,
            info=result.info,
            error=result.reason if error is not None else "",
            turn_index=turn_index,
        )
        if result.tripwire:
            verdict.tripped = event  # claimed before the hook: the first trip wins
        failure = self._failure(guardrail.name, stage, result.reason, error)
        try:
            await self._audit(event)
        except Exception as exc:  # the audit is the application's code: it fails closed too
            failure = failure or self._failure(
                guardrail.name, stage, f"its guardrail_checked hook raised {exc!r}", exc
            )
        self._emit(event)
        if failure is not None:
            verdict.failure = verdict.failure or failure
            verdict.tripped = verdict.tripped or event
        verdict.left -= 1
        if verdict.tripped is not None:
            if verdict.scope is not None:
                verdict.scope.cancel()  # the model stream, and the reads it started
            group.cancel()  # the other guardrails
            verdict.decided.set()
        elif not verdict.left:
            verdict.decided.set()

    @staticmethod
    def _failure(
        name: str, stage: GuardrailStage, reason: str, error: Exception | None
    ) -> GuardrailFailed | None:
        if error is None:
            return None
        failure = GuardrailFailed(
            f"{stage} guardrail {name!r} failed: {reason}", guardrail=name, stage=stage
        )
        failure.__cause__ = error
        return failure

    async def _audit(self, event: GuardrailVerdict) -> None:
        """The verdict to the audit hook (``Hooks.guardrail_checked``), before its event."""
        hook = self._agent.hooks.guardrail_checked
        if hook is not None:
            await call_hook(hook(event))

    def account(self, guardrail: str, model: str, usage: Usage) -> None:
        """A guardrail's model call: priced, counted into the turn's usage and spend."""
        state = self._state
        turn = state.turn
        if turn is None:
            return
        cost = self._spend.account(model, usage, turn)
        self._emit(
            UsageEvent(
                model=f"guardrail:{guardrail}/{model}",
                usage=usage,
                cost_usd=cost,
                total_cost_usd=self._spend.total_usd,
            )
        )


def _guardrails(items: object) -> tuple[Guardrail, ...]:
    """An agent's guardrails (``Agent`` made each item a :class:`Guardrail`)."""
    assert isinstance(items, tuple)
    return tuple(item for item in items if isinstance(item, Guardrail))
