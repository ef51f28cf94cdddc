"""Tripwires: an agent's guardrails run for one loop, and what a trip does to the turn.

```
user message ─► first model call ──────────────► its stream ends ─► wait for the verdict
                 │ (beside it)                                        │
                 └► input guardrails, concurrently ─ one trips ─► cancel the stream,
                                                                  the other guardrails
final answer ─► output guardrails, concurrently ─ one trips ─► turn ends "guardrail_tripped"
```

Input guardrails start with the turn's first model call, not before it: a
synchronous one runs as the call starts (it holds the event loop however it
is scheduled; when it trips, the model is never asked), an async one in a
task beside the call, so a guardrail that waits on its own model costs no
latency when it passes. No tool of that first step runs before their
verdict: the loop dispatches the step's calls (writes, and any call that
pauses for approval) only once every input guardrail has passed, and the
reads the reader starts mid-stream wait for the same verdict
(``AnswerReader.hold``). An async one that trips cancels the other
guardrails (the first trip wins) and stops the run through the loop's own
cancel scope (``stop``): the model stream and the held reads end, and the
loop ends the turn ``guardrail_tripped``. A guardrail that raises (or returns
something else than a result, or whose audit hook raises) fails closed: the
same stop, then :class:`~mainspring.errors.GuardrailFailed` ends the run.

Each verdict goes to ``Hooks.guardrail_checked`` (the audit), then out as a
``guardrail_verdict`` event. A guardrail's own model calls are priced and
counted into the turn's usage and spend by :meth:`Tripwires.account`.
Private machinery: applications meet ``Agent(input_guardrails=…)``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Protocol, TypeAlias, TypeVar, cast

import anyio
import anyio.lowlevel

from mainspring._lowlevel.tasks import TaskGroup
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

__all__ = ["TRIPPED", "Reads", "Tripwires"]

T = TypeVar("T")

TRIPPED = Finish("guardrail_tripped")
"""A guardrail tripped: the turn ends, none of the step's calls run."""


class Reads(Protocol):
    """Where the reads of a step start (the loop's ``AnswerReader``): they wait for ``hold``."""

    hold: Callable[[], Awaitable[bool]] | None


class _Round:
    """One stage's guardrails: their verdict once all passed or one tripped."""

    __slots__ = ("decided", "failure", "left", "tripped")

    def __init__(self, count: int) -> None:
        self.left = count
        self.tripped: GuardrailVerdict | None = None
        self.failure: GuardrailFailed | None = None
        self.decided: anyio.Event | None = None
        """Made when something has to wait for the verdict (a held read)."""

    async def passed(self) -> bool:
        """Wait for the verdict: whether every guardrail passed."""
        if self.tripped is None and self.left:
            if self.decided is None:
                self.decided = anyio.Event()
            await self.decided.wait()
        return self.tripped is None

    def over(self) -> bool:
        """Whether one tripped (or failed)."""
        return self.tripped is not None

    def decide(self) -> None:
        if self.decided is not None:
            self.decided.set()


_Started: TypeAlias = tuple[Guardrail, GuardrailContext, Awaitable[GuardrailResult]]
"""An async guardrail called (its coroutine not yet run), to run in a task."""


class Tripwires:
    """Runs an agent's input and output guardrails for one loop."""

    __slots__ = (
        "_agent",
        "_emit",
        "_input",
        "_output",
        "_reader",
        "_spend",
        "_state",
        "_stop",
        "_text",
        "stopped",
    )

    def __init__(
        self,
        *,
        agent: Agent,
        state: SessionState,
        spend: Spend,
        reader: Reads,
        emit: Callable[[Event], None],
        stop: Callable[[], None],
    ) -> None:
        """Guard the turns of ``state`` run by ``agent``; ``emit`` receives the verdicts.

        ``stop`` cancels the run (the loop's scope): what an input guardrail
        that trips while the first model call streams does.
        """
        self._agent = agent
        self._state = state
        self._spend = spend
        self._reader = reader
        self._emit = emit
        self._stop = stop
        self._input = _guardrails(agent.input_guardrails)
        self._output = _guardrails(agent.output_guardrails)
        self._text: str | None = None
        """The user message whose input guardrails run beside the next model call."""
        self.stopped: _Round | None = None
        """The input guardrails' round when one of them stopped the run (see ``stop``)."""

    def arm(self, message: Message) -> None:
        """A new turn: its input guardrails run beside its first model call."""
        if self._input:
            self._text = message.text

    @property
    def on_output(self) -> bool:
        """Whether the agent has output guardrails."""
        return bool(self._output)

    @property
    def armed(self) -> bool:
        """Whether the next model call runs beside input guardrails."""
        return self._text is not None

    async def beside(self, first_call: Callable[[], Awaitable[T]]) -> T | Finish:
        """Run ``first_call`` (the turn's first model step) beside the input guardrails.

        A synchronous guardrail runs as the call starts (it holds the event
        loop however it is scheduled); an async one runs in a task beside it.
        Returns what the call returned once every guardrail passed, or
        :data:`TRIPPED` when a synchronous one tripped (the call never
        started). An async one that trips stops the run (``stop``):
        :attr:`stopped` then says why.

        Raises:
            GuardrailFailed: A synchronous guardrail raised.
        """
        text, self._text = self._text, None
        assert text is not None, "armed"
        verdict = _Round(len(self._input))
        started = await self._start_all(self._input, "input", text, verdict)
        if verdict.tripped is not None:
            if verdict.failure is not None:
                raise verdict.failure
            return TRIPPED
        if not started:
            return await first_call()
        reader = self._reader
        reader.hold = verdict.passed
        try:
            async with TaskGroup(shielded=False) as group:  # the checks never raise
                for each in started:
                    group.start_soon(self._finish, *each, verdict, group)
                outcome = await first_call()
        finally:
            reader.hold = None
        if verdict.over():  # one ran in this task (the group's last), tripped and stopped
            await anyio.lowlevel.checkpoint()  # the run, whose cancellation arrives here
        return outcome

    async def check_output(self, text: str) -> bool:
        """Run the output guardrails on the final answer ``text``; whether all passed.

        Raises:
            GuardrailFailed: A guardrail raised.
        """
        verdict = _Round(len(self._output))
        started = await self._start_all(self._output, "output", text, verdict)
        if started and verdict.tripped is None:
            async with TaskGroup(shielded=False) as group:  # the checks never raise
                for each in started:
                    group.start_soon(self._finish, *each, verdict, group)
        if verdict.failure is not None:
            raise verdict.failure
        return verdict.tripped is None

    async def _start_all(
        self, checks: tuple[Guardrail, ...], stage: GuardrailStage, text: str, verdict: _Round
    ) -> list[_Started]:
        """Call each guardrail: a synchronous one's verdict now, an async one's coroutine."""
        started: list[_Started] = []
        for guardrail in checks:
            ctx = self._context(guardrail, stage)
            try:
                result = guardrail.check(ctx, text)
            except Exception as exc:
                await self._decide(guardrail, ctx, None, exc, verdict)
            else:
                if type(result) is not GuardrailResult and inspect.isawaitable(result):
                    started.append((guardrail, ctx, result))
                else:
                    await self._decide(guardrail, ctx, result, None, verdict)
            if verdict.tripped is not None:
                for _, _, waiting in started:
                    _close(waiting)  # never run: the first trip wins
                return []
        return started

    async def _finish(
        self,
        guardrail: Guardrail,
        ctx: GuardrailContext,
        running: Awaitable[GuardrailResult],
        verdict: _Round,
        group: TaskGroup,
    ) -> None:
        """An async guardrail to its verdict, in its task; never raises (a failure trips)."""
        try:
            result: object = await running
        except Exception as exc:
            await self._decide(guardrail, ctx, None, exc, verdict)
        else:
            await self._decide(guardrail, ctx, result, None, verdict)
        if verdict.tripped is not None:
            group.cancel()  # the other guardrails: the first trip wins
            if ctx.stage == "input":
                self.stopped = verdict
                self._stop()  # the model stream, the reads it started, the turn

    def _context(self, guardrail: Guardrail, stage: GuardrailStage) -> GuardrailContext:
        state = self._state
        return GuardrailContext(
            name=guardrail.name,
            stage=stage,
            session_id=state.session_id,
            agent_name=self._agent.name,
            turn_index=state.turn.index if state.turn is not None else state.turn_index,
            caller=current_caller(),
            account=partial(self.account, guardrail.name),
        )

    async def _decide(
        self,
        guardrail: Guardrail,
        ctx: GuardrailContext,
        result: object,
        error: Exception | None,
        verdict: _Round,
    ) -> None:
        """Record one guardrail's verdict (a failure, or a result not a GuardrailResult, trips)."""
        if verdict.tripped is not None:
            return  # another one tripped first (it cancels this one)
        if error is None and not isinstance(result, GuardrailResult):
            error = TypeError(
                f"guardrail {guardrail.name!r} returned {type(result).__name__}, "
                "not a GuardrailResult"
            )
        if error is not None or not isinstance(result, GuardrailResult):
            result = GuardrailResult(tripwire=True, reason=f"{type(error).__name__}: {error}")
        event = GuardrailVerdict(
            name=guardrail.name,
            stage=ctx.stage,
            tripwire=result.tripwire,
            reason=result.reason,
            info=result.info,
            error=result.reason if error is not None else "",
            turn_index=ctx.turn_index,
        )
        if result.tripwire:
            verdict.tripped = event  # claimed before the hook: the first trip wins
        failure = _failure(guardrail.name, ctx.stage, result.reason, error)
        hook = self._agent.hooks.guardrail_checked
        if hook is not None:
            try:
                await call_hook(hook(event))
            except Exception as exc:  # the audit is the application's code: it fails closed too
                reason = f"its guardrail_checked hook raised {exc!r}"
                failure = failure or _failure(guardrail.name, ctx.stage, reason, exc)
        self._emit(event)
        if failure is not None:
            verdict.failure = verdict.failure or failure
            verdict.tripped = verdict.tripped or event
        verdict.left -= 1
        if verdict.tripped is not None or not verdict.left:
            verdict.decide()

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


def _close(waiting: Awaitable[GuardrailResult]) -> None:
    """An async guardrail's coroutine that will never run, closed (no never-awaited warning)."""
    close = getattr(waiting, "close", None)
    if close is not None:
        close()


def _guardrails(items: object) -> tuple[Guardrail, ...]:
    """An agent's guardrails (``Agent`` made each item a :class:`Guardrail`, in a tuple)."""
    return cast("tuple[Guardrail, ...]", items)
