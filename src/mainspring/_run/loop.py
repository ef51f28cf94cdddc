"""The loop: one send or resume of a session, from its start to one terminal event.

```
user message ─► build request ─► stream ─► text / thinking / calls
                                   │ each call, as its arguments close:
                                   │   concurrency-safe auto reads start now
                                   ▼
               dispatch: reads finish ─► writes, one at a time, in the model's order
                                   │   confirm-tier ─► pending_action, pause
                                   ▼
               decide ─► commit (results in the model's order) ─► next step …
                         until final text, max_steps, budget, cancel or error
```

Every fact of the turn lives in ``state.turn`` (a :class:`~mainspring.state.Turn`):
the loop reads and writes it there, the dispatcher likewise, and the session
persists it. Each step's model stream is read by the loop's
:class:`~mainspring._run.reader.AnswerReader`, which keeps the answer being
streamed (text and parts not yet committed) until it joins the transcript.
Private machinery: applications meet :class:`~mainspring.session.Session`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, assert_never

import anyio
import anyio.lowlevel

from mainspring._lowlevel.json_value import JsonValue
from mainspring._run.dispatch import Dispatcher
from mainspring._run.durability import Durability
from mainspring._run.outcome import CONTINUE, Continue, Finish, Paused
from mainspring._run.output import OutputCheck
from mainspring._run.reader import AnswerReader, Paced
from mainspring._run.resume import (
    apply_decision,
    error_event,
    regenerate,
    repair,
    thinking_blocks,
)
from mainspring._run.spend import Spend
from mainspring._run.steering import SteeringQueue, SteerMode
from mainspring._run.tripwires import TRIPPED, Tripwires
from mainspring.agent import Agent
from mainspring.context.compiler import ContextCompiler
from mainspring.decisions import Decision
from mainspring.events import (
    ApprovalAdded,
    ErrorEvent,
    Event,
    SteeringTaken,
    StopReason,
    TurnComplete,
)
from mainspring.hooks import call_hook
from mainspring.messages import (
    Message,
)
from mainspring.models.base import ModelRequest, ModelStop
from mainspring.state import SessionState, Turn
from mainspring.usage import Usage

__all__ = ["Loop", "error_event"]

log = logging.getLogger("mainspring.loop")


_END_TURN = Finish("end_turn")


class Loop:
    """Runs one send or one resume of a session to its terminal event."""

    def __init__(
        self,
        *,
        agent: Agent,
        state: SessionState,
        context: ContextCompiler[Message],
        spend: Spend,
        turn_cache: dict[str, Any],
        emit: Callable[[Event], None],
        durable: Durability | None = None,
        pace: Paced | None = None,
        steering: SteeringQueue | None = None,
        fence: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Bind a loop to a session's state; ``emit`` receives every event.

        With ``durable``, progress is saved at every point a crash must not
        lose: the user message, each assistant message, each write before and
        after it runs, each step's results. With ``pace``, the model stream
        waits while the consumer's buffer is full (back-pressure). With
        ``steering``, queued messages are taken at step boundaries. ``fence``
        runs before each write (see :class:`~mainspring._run.dispatch.Dispatcher`).
        ``spend`` prices the run's model calls and holds its budget check.
        """
        self.agent = agent
        self.state = state
        self.context = context
        self.spend = spend
        self.turn_cache = turn_cache
        self.emit = emit
        self.dispatch = Dispatcher(
            agent=agent,
            state=state,
            turn_cache=turn_cache,
            emit=emit,
            durable=durable,
            charge=spend.charge,
            fence=fence,
            cost=spend,
        )
        self._durable = durable
        self._steering = steering
        self._scope: anyio.CancelScope | None = None
        self._stopped_by: Exception | None = None
        """The error a cancel carried (see :meth:`cancel`)."""
        spec = agent.output_spec
        self.output = (
            None if spec is None else OutputCheck(agent=agent, spec=spec, state=state, emit=emit)
        )
        """The turn's typed output, when the agent has an ``output_type`` (see _run/output.py)."""
        self.reader = AnswerReader(
            agent=agent,
            context=context,
            spend=spend,
            dispatch=self.dispatch,
            emit=emit,
            pace=pace,
            thinking=thinking_blocks(state.messages) if state.turn is not None else 0,
            output=self.output,
        )
        """Reads each step's model stream (a resumed turn counts its own thinking blocks)."""
        self.tripwires = (
            Tripwires(
                agent=agent,
                state=state,
                spend=spend,
                reader=self.reader,
                emit=emit,
                stop=self._stop_for_guardrail,
            )
            if agent.input_guardrails or agent.output_guardrails
            else None
        )
        """The agent's guardrails, if it has any."""

    @property
    def turn(self) -> Turn:
        """The turn this loop runs."""
        turn = self.state.turn
        assert turn is not None, "the loop runs inside a turn"
        return turn

    # ----------------------------------------------------------------- control

    async def run(self, start: Callable[[], Awaitable[None]]) -> None:
        """Run ``start`` (a send or a resume) and always end with one terminal event."""
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                if self.dispatch.cancel_requested:
                    scope.cancel()
                await start()
            self._scope = None  # (a cancel from now on has nothing to stop)
            tripped = self.tripwires.stopped if self.tripwires is not None else None
            if scope.cancelled_caught and tripped is not None:
                await self._stopped_before_calls(TRIPPED, tripped.failure)
                return
            if scope.cancelled_caught and self._stopped_by is not None:
                raise self._stopped_by  # (the run cannot go on: an error, not a cancel)
            if scope.cancelled_caught:
                self._repair("the run was cancelled", keep_partial=True)
                await self._complete("cancelled")
        except anyio.get_cancelled_exc_class():
            self._repair("the run was cancelled", keep_partial=True)
            self._end_turn_record()
            raise
        except Exception as exc:
            self._repair("the run failed", keep_partial=False)
            self._end_turn_quietly()
            self._end_turn_record()
            self.emit(error_event(exc))

    def cancel(self, error: Exception | None = None) -> None:
        """Stop the model stream and running reads now; let a running write finish.

        With ``error``, the run ends with that error (an ``error`` event) instead
        of ``turn_complete(stop_reason="cancelled")``.
        """
        if error is not None and self._stopped_by is None:
            self._stopped_by = error
        self.dispatch.cancel()
        if self._scope is not None:
            self._scope.cancel()

    def _stop_for_guardrail(self) -> None:
        """An input guardrail tripped beside the first model call: stop the run now."""
        if self._scope is not None:
            self._scope.cancel()

    def _end_turn_quietly(self) -> None:
        try:
            self.context.end_turn()
        except Exception:  # the run is failing already; its error is what the host sees
            log.warning("could not record the turn's token accounting", exc_info=True)

    def _end_turn_record(self) -> None:
        """The turn is over unless it waits for a decision."""
        self.state.finish_turn()

    async def _complete(self, reason: StopReason) -> None:
        if reason == "end_turn" and self.tripwires is not None and self.tripwires.on_output:
            reason = await self._checked_answer(self.tripwires)
        # What the terminal event reports is on record before it is emitted (a
        # deferred save goes now where no later commit would carry it).
        if self._durable is not None:
            await self.dispatch.flush()
        # Accounting first: a strict sink that fails makes this run an error, not two terminals.
        self.context.end_turn()
        turn = self.state.turn
        if reason == "end_turn" and self.output is not None and self.output.accepted and turn:
            self.emit(self.output.final(turn))
        self.emit(
            TurnComplete(
                stop_reason=reason,
                turn_index=turn.index if turn else self.state.turn_index,
                usage=turn.usage if turn else Usage(),
                cost_usd=turn.cost_usd if turn else 0.0,
            )
        )
        self._end_turn_record()

    def _append(self, message: Message) -> None:
        # One transcript: the compiler's, which state.messages is (see Session).
        self.context.append((message,))

    # ---------------------------------------------------------------- the loop

    async def start_turn(self, message: Message) -> None:
        """A new turn: append the user message and loop."""
        self.state.start_turn()
        self.reader.thinking = 0
        self.turn_cache.clear()
        self._append(message)
        if self.tripwires is not None:
            self.tripwires.arm(message)
        if self._durable is not None:
            await self.dispatch.save()  # the turn is on record before a model is paid for it
        await self._steps()

    async def _steps(self) -> None:
        while True:
            if self.dispatch.cancel_requested:
                # A cancel asked for since the last step stops the run here, even when
                # nothing awaited since yielded.
                await anyio.lowlevel.checkpoint()
            if self.spend.unshared:
                await self.spend.share()
            limit = self._limit_reached()
            if limit is not None:
                await self._complete(limit)
                return
            turn = self.turn
            if self._steering:  # (read each step: see steer_from; empty is false)
                await self._take_steering(turn)
            stop = await self._read(await self._build_request(turn), turn)
            if isinstance(stop, Finish):
                await self._stopped_before_calls(stop)
                return
            outcome = await self._run_step(turn, stop)
            match outcome:
                case Continue():
                    # Every call has its result: the step is done (steering may have
                    # given an answer another step instead).
                    if turn.calls and await self._step_done(turn):
                        return
                case Paused():
                    await self.dispatch.save(defer=True)
                    await self._complete("pending_action")
                    return
                case Finish(reason):
                    await self._complete(reason)
                    return
                case _:
                    assert_never(outcome)

    async def _step_done(self, turn: Turn) -> bool:
        """The step's results join the transcript (saved, in a store); whether the turn ended.

        It ends here when the step was the final-answer tool's call, accepted.
        """
        if self._commit_step(turn):
            await self.dispatch.save(defer=True)
        if self.output is not None and self.output.accepted:
            await self._complete("end_turn")
            return True
        return False

    async def _run_step(self, turn: Turn, stop: ModelStop) -> Paused | Continue | Finish:
        """A step with calls runs them; one without ends the turn, unless steered on.

        A final-answer call (typed output through the tool) is checked first.
        """
        output = self.output
        if output is not None and output.finals:
            await output.settle(turn)
        if turn.calls:
            return await self.dispatch.run_serial(turn)
        return await self._answered(stop)

    def _read(self, request: ModelRequest, turn: Turn) -> Awaitable[ModelStop | Finish]:
        """One model step; a turn's first runs beside its input guardrails (see Tripwires)."""
        tripwires = self.tripwires
        if tripwires is not None and tripwires.armed:
            return tripwires.beside(partial(self.reader.read, request, turn))
        return self.reader.read(request, turn)

    async def _stopped_before_calls(self, stop: Finish, failure: Exception | None = None) -> None:
        """None of the step's calls run: the turn ends.

        An input guardrail tripped (or failed: ``failure`` is then raised), or
        the budget ran out once the answer was priced (see ``AnswerReader.read``).
        """
        if failure is not None:
            raise failure
        if stop is TRIPPED:
            self._repair("an input guardrail stopped the turn", keep_partial=False)
        else:
            self._repair("the budget was exceeded", keep_partial=True)
        await self._complete(stop.reason)

    async def _checked_answer(self, tripwires: Tripwires) -> StopReason:
        """The final answer (``end_turn``) through the output guardrails, before it ends the turn.

        A tripped answer stays in the transcript (it is append-only, and its text
        was streamed); the turn ends ``guardrail_tripped`` instead of ``end_turn``.
        """
        last = self.state.messages[-1] if self.state.messages else None
        text = last.text if last is not None and last.role == "assistant" else ""
        passed = await tripwires.check_output(text)
        return "end_turn" if passed else TRIPPED.reason

    async def _answered(self, stop: ModelStop) -> Finish | Continue:
        """A step without calls ends the turn, unless steering gives it another step."""
        reason = stop.stop_reason
        if reason in ("max_tokens", "refusal"):
            return Finish(reason)
        if self.output is not None and not self.output.accepted:
            retry = await self.output.answer(self.turn, self.state.messages[-1])
            if retry is not None:  # not a valid output: the model is told why, and goes on
                self._append(retry)
                return CONTINUE
        steering = self._steering
        if steering is not None and len(steering):
            return await self._steered()
        return _END_TURN

    def steer_from(self, queue: SteeringQueue) -> None:
        """Take steering messages from ``queue`` from the next step boundary on.

        (A session makes its queue when it is first steered, maybe while this
        loop runs with the shared empty one.)
        """
        self._steering = queue

    async def _take_steering(self, turn: Turn) -> None:
        """At a step boundary: queued ``next_step`` messages join the conversation."""
        queue = self._steering
        if queue is None or not len(queue):
            return
        for item in queue.take("next_step"):
            self._steer(item.id, item.message, "next_step", turn)
        await self.dispatch.save(defer=True)

    def _steer(self, steering_id: str, message: Message, mode: SteerMode, turn: Turn) -> None:
        meta = {**message.meta, "steering": steering_id}
        self._append(Message(role="user", parts=message.parts, meta=meta))
        self.emit(
            SteeringTaken(
                steering_id=steering_id,
                mode=mode,
                text=message.text,
                turn_index=turn.index,
                step=turn.steps,
            )
        )

    async def _steered(self) -> Finish | Continue:
        """The run goes on instead of ending the turn, or the turn ends.

        It goes on when a ``next_step`` message is waiting, or when a
        ``follow_up`` one starts the next turn here.
        """
        queue = self._steering
        if queue is None or not len(queue):
            return _END_TURN
        if queue.waiting("next_step"):
            return CONTINUE
        follow = queue.take_first("follow_up")
        if follow is None:
            return _END_TURN
        self.context.end_turn()  # the turn that ended is accounted as any other
        turn = self.state.start_turn()
        self.reader.thinking = 0
        self.turn_cache.clear()
        self._steer(follow.id, follow.message, "follow_up", turn)
        await self.dispatch.save()  # the new turn is on record before a model is paid for it
        return CONTINUE

    def _limit_reached(self) -> StopReason | None:
        """The turn's limits, checked before each model step (the budget: Spend.over_budget)."""
        if self.spend.over_budget():
            return "budget_exceeded"
        if self.turn.steps >= self.agent.limits.max_steps:
            return "max_turns"
        return None

    def _commit_step(self, turn: Turn) -> bool:
        """The step's results, in the model's order, become one tool message.

        Returns whether the run has a store: the caller then saves the state.
        """
        self._append(Message.tool_results(turn.commit_step()))
        return self._durable is not None

    # ---------------------------------------------------------- a paused turn

    async def resume_turn(
        self, attempt_id: str, decision: Decision, final_input: dict[str, JsonValue] | None
    ) -> None:
        """Apply a validated decision to the paused call, then go on with the turn."""
        turn = self.turn
        outcome = await apply_decision(
            turn, self.dispatch, self.agent, attempt_id, decision, final_input
        )
        match outcome:
            case Paused():  # the call (approved, or nested) waits on a nested run
                await self.dispatch.save(defer=True)
                await self._complete("pending_action")
            case Continue():
                await self._rest_of_step(turn)
            case _:
                assert_never(outcome)

    async def approval_added(self, added: ApprovalAdded) -> None:
        """An approval short of its quorum is on record: say so; the turn stays paused.

        The stream ends as every paused one does: the action still waiting
        (``pending_action``, unchanged), then ``turn_complete``.
        """
        self.emit(added)
        pending = self.turn.pending
        assert pending is not None
        self.emit(pending)
        await self._complete("pending_action")

    async def regenerate_turn(self, attempt_id: str) -> None:
        """A fresh input for the paused call; pause on it again, or go on if it was refused.

        A hook that fails (or gives an invalid input) ends the stream with an
        ``error`` event (``code="regenerate_failed"``) and leaves the pending
        action as it was.
        """
        turn = self.turn
        outcome = await regenerate(turn, self.dispatch, self.agent, attempt_id)
        match outcome:
            case ErrorEvent():
                self.emit(outcome)
            case Paused():
                await self._complete("pending_action")
            case Continue():
                await self._rest_of_step(turn)
            case _:
                assert_never(outcome)

    async def _rest_of_step(self, turn: Turn) -> None:
        """After the paused call: the step's other calls, then the next steps."""
        outcome = await self.dispatch.run_serial(turn)
        match outcome:
            case Continue():
                if self._commit_step(turn):
                    await self.dispatch.save(defer=True)
                await self._steps()
            case Paused():
                await self.dispatch.save(defer=True)
                await self._complete("pending_action")
            case _:
                assert_never(outcome)

    def _repair(self, reason: str, *, keep_partial: bool) -> None:
        """Leave a valid transcript: every committed call gets a result (see :func:`repair`)."""
        repair(
            self.state.turn,
            self.reader.cut(),
            self.dispatch,
            self._append,
            reason,
            keep_partial=keep_partial,
        )

    # ----------------------------------------------------------- build request

    async def _build_request(self, turn: Turn) -> ModelRequest:
        agent = self.agent
        tools = agent.request_tools
        compiled = await self.context.compile(
            turn_index=turn.index, step=turn.steps + 1, tools=tools
        )
        self.reader.compiled = compiled
        request = ModelRequest(
            system=compiled.system,
            messages=compiled.messages,
            tools=tools,
            settings=agent.request_settings,
        )
        hook = self.agent.hooks.before_model_call
        if hook is not None:
            replaced = await call_hook(hook(request))
            request = replaced if replaced is not None else request
        return request
