"""The engine: one turn of the loop, from a user message to a terminal event.

```
user message ─► build request ─► model.stream() ─► text / thinking / calls
                                     │ each call, as its arguments close:
                                     │   concurrency-safe auto reads start now
                                     ▼
                 reads finish ─► writes, one at a time, in the model's order
                                     │   confirm-tier ─► pending_action, pause
                                     ▼
                 results (model order) ─► next step … until final text,
                                          max_turns, budget, cancel or error
```

A :class:`TurnRunner` owns nothing durable: it mutates the
:class:`~mainspring.state.SessionState` it is given and reports every event
through a plain callback. :class:`~mainspring.session.Session` wires it to an
async iterator, stores and checkpoints.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from dataclasses import replace
from typing import Any, cast

import anyio
import anyio.lowlevel
from pydantic import JsonValue

from mainspring.agent import Agent
from mainspring.calls import CallRunner, Durability, Judged, Step
from mainspring.context.compiler import CompiledContext, ContextEngine
from mainspring.context.snapshot import CostEstimate
from mainspring.cost import CostTracker
from mainspring.decisions import ClientResult, Decision, Reject
from mainspring.errors import ModelError, ModelOutputError, ToolInputError
from mainspring.events import (
    ErrorEvent,
    Event,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ThinkingDone,
    ToolCallDelta,
    TurnComplete,
    UsageEvent,
)
from mainspring.hooks import call_hook
from mainspring.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from mainspring.models.base import (
    ModelEvent,
    ModelRequest,
    ModelStop,
    ModelUsage,
    ToolCallEnd,
)
from mainspring.state import CallRecord, SessionState, WriteRecord
from mainspring.tools.context import ToolContext
from mainspring.tools.define import ToolOutput
from mainspring.tools.policy import run_preflight
from mainspring.usage import Usage

__all__ = ["TurnRunner", "recover_interrupted"]

log = logging.getLogger("mainspring.engine")


class TurnRunner(CallRunner):
    """Runs one send or one resume of a session to its terminal event."""

    def __init__(
        self,
        *,
        agent: Agent,
        state: SessionState,
        context: ContextEngine[Message],
        cost: CostTracker,
        turn_cache: dict[str, Any],
        emit: Callable[[Event], None],
        durable: Durability | None = None,
    ) -> None:
        """Bind a runner to a session's state; ``emit`` receives every event.

        With ``durable``, progress is saved at every point a crash must not
        lose: the user message, each assistant message, each write before and
        after it runs, each step's results.
        """
        self.agent = agent
        self.state = state
        self.context = context
        self.cost = cost
        self.turn_cache = turn_cache
        self._emit = emit
        self._durable = durable
        self._scope: anyio.CancelScope | None = None
        self._cancel_requested = False
        self._write_scope: anyio.CancelScope | None = None
        self._contexts: set[ToolContext] = set()
        self._step: Step | None = None
        self._verdicts: dict[str, Judged] = {}
        self._kwargs: dict[str, dict[str, Any]] = {}
        """Python arguments of validated calls, so a call is not validated twice."""
        self._turn_index = state.turn_index
        self._steps = 0
        self._turn_usage = Usage()
        self._turn_cost = 0.0
        self._compiled: CompiledContext[Message] | None = None

    # ----------------------------------------------------------------- control

    async def run(self, start: Callable[[], Awaitable[None]]) -> None:
        """Run ``start`` (a send or a resume) and always end with one terminal event."""
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                if self._cancel_requested:
                    scope.cancel()
                await start()
            if scope.cancelled_caught:
                self._repair("the run was cancelled", keep_partial=True)
                self._complete("cancelled")
        except anyio.get_cancelled_exc_class():
            self._repair("the run was cancelled", keep_partial=True)
            raise
        except Exception as exc:
            self._repair("the run failed", keep_partial=False)
            self._end_turn_quietly()
            self._emit(_error_event(exc))

    def _end_turn_quietly(self) -> None:
        try:
            self.context.end_turn()
        except Exception:  # the run is failing already; its error is what the host sees
            log.warning("could not record the turn's token accounting", exc_info=True)

    def cancel(self) -> None:
        """Stop the model stream and running reads now; let a running write finish."""
        self._cancel_requested = True
        for ctx in self._contexts:
            ctx._cancel()  # the runner owns the contexts it made
        if self._write_scope is not None:
            grace = anyio.current_time() + self.agent.write_cancel_grace
            self._write_scope.deadline = min(self._write_scope.deadline, grace)
        if self._scope is not None:
            self._scope.cancel()

    def _complete(self, reason: StopReason) -> None:
        # Accounting first: a strict sink that fails makes this run an error, not two terminals.
        self.context.end_turn()
        self._emit(
            TurnComplete(
                stop_reason=reason,
                turn_index=self._turn_index,
                usage=self._turn_usage,
                cost_usd=self._turn_cost,
            )
        )

    def _append(self, message: Message) -> None:
        self.state.messages.append(message)
        self.context.append((message,))

    # -------------------------------------------------------------- the loop

    async def start_turn(self, message: Message) -> None:
        """A new turn: append the user message and loop."""
        self.state.turn_index += 1
        self._turn_index = self.state.turn_index
        self.turn_cache.clear()
        self._append(message)
        await self._save()
        await self._loop()

    async def _loop(self) -> None:
        while True:
            await anyio.lowlevel.checkpoint_if_cancelled()
            if self.cost.exceeded():
                self._complete("budget_exceeded")
                return
            if self._steps >= self.agent.max_turns:
                self._complete("max_turns")
                return
            step = await self._model_step()
            if self.cost.exceeded() and step.calls:
                self._repair("the budget was exceeded", keep_partial=True)
                self._complete("budget_exceeded")
                return
            if not step.calls:
                self._step = None
                stop = step.stop.stop_reason if step.stop else "end_turn"
                self._complete(stop if stop in ("max_tokens", "refusal") else "end_turn")
                return
            if await self._run_serial(step.calls, 0):
                await self._save()
                self._complete("pending_action")
                return
            self._finish_step(step.calls)
            await self._save()

    def _finish_step(self, calls: list[CallRecord]) -> None:
        results = [c.result for c in calls if c.result is not None]
        self._append(Message.tool_results(results))
        self.state.in_flight = None
        self._step = None

    # ------------------------------------------------------------ model step

    async def _model_step(self) -> Step:
        compiled = await self.context.compile(
            turn_index=self._turn_index, step=self._steps + 1, tools=self.agent.tool_specs
        )
        self._compiled = compiled
        request = ModelRequest(
            system=compiled.system,
            messages=compiled.messages,
            tools=self.agent.tool_specs,
            settings=self.agent.model_settings,
        )
        hooks = self.agent.hooks
        if hooks.before_model_call is not None:
            replaced = await call_hook(hooks.before_model_call(request))
            request = replaced if replaced is not None else request
        step = Step()
        self._step = step
        self._steps += 1
        usage = Usage()
        failure: Exception | None = None
        async with anyio.create_task_group() as reads:
            try:
                usage = await self._consume(request, step, reads)
            except Exception as exc:  # re-raised below, outside the task group
                failure = exc
                reads.cancel_scope.cancel()
        if failure is not None:
            raise failure
        if hooks.after_model_call is not None:
            await call_hook(hooks.after_model_call(request, usage))
        return step

    async def _consume(
        self, request: ModelRequest, step: Step, reads: anyio.abc.TaskGroup
    ) -> Usage:
        """Stream the model's answer into ``step``; reads start in ``reads``."""
        usage = Usage()
        emit = self._emit
        async with aclosing(self.agent.model.stream(request)) as stream:  # type: ignore[type-var]  # adapters return async generators
            async for event in stream:
                kind = type(event)
                if kind is TextDelta:  # the hot path
                    delta = cast(TextDelta, event)
                    step.text.append(delta.text)
                    emit(delta)
                elif kind is ToolCallEnd:
                    assert isinstance(event, ToolCallEnd)
                    step.flush_text()
                    await self._on_call(event, step, reads)
                elif kind is ModelUsage:
                    assert isinstance(event, ModelUsage)
                    usage = usage + event.usage
                else:
                    self._on_model_event(event, step)
        if step.stop is None:
            raise ModelOutputError(
                "the model stream ended without a stop event", provider=self.agent.model.name
            )
        step.flush_text()
        step.calls.sort(key=lambda c: c.index)
        self._append(Message(role="assistant", parts=tuple(step.parts)))
        step.appended = True
        if step.calls:
            self.state.in_flight = step.calls
        if self._durable is not None:
            await self._save()
        self._account(step.stop.model or self.agent.model.name, usage)
        if self.cost.exceeded() and step.calls:
            reads.cancel_scope.cancel()
        return usage

    def _on_model_event(self, event: ModelEvent, step: Step) -> None:
        kind = type(event)
        if kind is TextDelta:
            assert isinstance(event, TextDelta)
            step.text.append(event.text)
            self._emit(event)
        elif kind is ThinkingDelta or kind is ToolCallDelta:
            assert isinstance(event, ThinkingDelta | ToolCallDelta)
            self._emit(event)
        elif kind is ThinkingDone:
            assert isinstance(event, ThinkingDone)
            step.flush_text()
            step.parts.append(
                ThinkingPart(
                    text=event.text,
                    signature=event.signature,
                    redacted=event.redacted,
                    provider=event.provider,
                )
            )
            self._emit(event)
        elif kind is ModelStop:
            assert isinstance(event, ModelStop)
            step.stop = event

    def _account(self, model: str, usage: Usage) -> None:
        priced_before = model not in self.cost.unpriced
        cost = self.cost.record(model, usage)
        if self._compiled is not None:
            priced = priced_before and model not in self.cost.unpriced
            self.context.record_call(
                self._compiled,
                model=model,
                usage=usage,
                cost=CostEstimate(
                    usd=cost,
                    priced=priced,
                    price_source=self.cost.price_source(model) if priced else "none",
                ),
            )
        self._turn_usage = self._turn_usage + usage
        self._turn_cost += cost
        self.state.usage = self.cost.usage
        self.state.cost_usd = self.cost.total_usd
        self._emit(
            UsageEvent(model=model, usage=usage, cost_usd=cost, total_cost_usd=self.cost.total_usd)
        )

    async def _on_call(self, end: ToolCallEnd, step: Step, reads: anyio.abc.TaskGroup) -> None:
        rec = CallRecord(index=end.index, tool_use_id=end.tool_use_id, name=end.name)
        step.calls.append(rec)
        arguments: dict[str, JsonValue] = {}
        tool = self.agent.tool(end.name)
        error: str | None = None
        try:
            parsed = json.loads(end.arguments) if end.arguments.strip() else {}
        except ValueError as exc:
            parsed = None
            error = f"the arguments for {end.name!r} are not valid JSON ({exc}); send a JSON object"
        else:
            if isinstance(parsed, dict):
                arguments = parsed
        step.parts.append(ToolCallPart(id=end.tool_use_id, name=end.name, arguments=arguments))
        if tool is None:
            names = ", ".join(self.agent.tool_names) or "none"
            self._fail_call(rec, f"unknown tool {end.name!r}; available tools: {names}")
            return
        if error is not None:
            self._fail_call(rec, error)
            return
        try:
            rec.input, self._kwargs[rec.tool_use_id] = tool.parse(parsed)
        except ToolInputError as exc:
            self._fail_call(rec, f"{exc}. Fix the arguments and call again.")
            return
        if tool.policy.parallel and not tool.client_executed:
            judged = await self._judge(tool, rec)
            if judged is None:
                return
            if judged[0].outcome == "run":
                rec.parallel = True
                reads.start_soon(self._execute, tool, rec, judged, False)
            else:
                self._verdicts[rec.tool_use_id] = judged

    # --------------------------------------------------------------- resume

    async def resume_turn(
        self, attempt_id: str, decision: Decision, final_input: dict[str, JsonValue] | None
    ) -> None:
        """Apply a validated decision to the paused step, then go on with the turn."""
        paused = self.state.paused
        assert paused is not None and paused.pending.attempt_id == attempt_id
        self.state.paused = None
        self._turn_index = paused.turn_index
        self._steps = paused.steps
        self._turn_usage = paused.turn_usage
        self._turn_cost = paused.turn_cost_usd
        calls = paused.calls
        rec = calls[paused.position]
        self._step = Step(calls=calls, appended=True)
        self.state.in_flight = calls
        await self._save()
        tool = self.agent.tool(rec.name)
        if isinstance(decision, Reject):
            self._fail_call(rec, f"the user rejected this action: {decision.reason}")
        elif isinstance(decision, ClientResult):
            limit = tool.policy.max_result_chars if tool else 50_000
            self._record(
                rec, ToolOutput(content=decision.content, is_error=decision.is_error), limit
            )
        elif tool is None:
            self._fail_call(rec, f"tool {rec.name!r} is no longer available")
        else:
            assert final_input is not None
            rec.input = final_input
            problem = await run_preflight(tool.policy, final_input)
            if problem:
                self._fail_call(rec, problem)
            else:
                await self._execute(tool, rec, None, True, attempt_id)
        if await self._run_serial(calls, paused.position + 1):
            await self._save()
            self._complete("pending_action")
            return
        self._finish_step(calls)
        await self._save()
        await self._loop()

    # --------------------------------------------------------------- repair

    def _repair(self, reason: str, *, keep_partial: bool) -> None:
        """Leave a valid transcript: every committed call gets a result."""
        step, self._step = self._step, None
        if step is None:
            return
        if not step.appended:
            # The model's answer was cut: its calls never reach the transcript,
            # but reads already started get a result event, as every start does.
            for rec in step.calls:
                if rec.result is None and rec.tool_use_id in step.started:
                    self._fail_call(rec, f"tool {rec.name!r} was interrupted: {reason}")
            step.flush_text()
            text = [p for p in step.parts if isinstance(p, TextPart)]
            if keep_partial and text:
                self._append(Message(role="assistant", parts=tuple(text), meta={"partial": True}))
            return
        for rec in step.calls:
            if rec.result is None:
                started = rec.tool_use_id in step.started
                note = "was interrupted" if started else "did not run"
                message = f"tool {rec.name!r} {note}: {reason}"
                self._fail_call(rec, message)
        self.state.paused = None
        self._finish_step(step.calls)


def recover_interrupted(state: SessionState) -> list[WriteRecord]:
    """Repair the state of a run whose process died; return the writes of unknown outcome.

    Ledger entries still ``started`` become ``unknown`` (never re-run). The
    interrupted step's calls get results: the one gathered before the crash,
    the result a finished write left in the ledger, or an error saying the
    call was interrupted (naming the attempt for writes of unknown outcome).
    """
    unknown: list[WriteRecord] = []
    for key, record in list(state.writes.items()):
        if record.status == "started":
            state.writes[key] = replace(record, status="unknown")
            unknown.append(state.writes[key])
    calls = state.in_flight
    if calls is not None:
        results: list[ToolResultPart] = []
        for rec in sorted(calls, key=lambda c: c.index):
            entry = state.writes.get(f"{state.turn_index}:{rec.tool_use_id}")
            if rec.result is not None:
                results.append(rec.result)
            elif entry is not None and entry.result is not None:
                results.append(entry.result)
            else:
                if entry is not None:
                    attempt = f" (attempt {entry.attempt_id})" if entry.attempt_id else ""
                    note = f"was interrupted while running; its outcome is unknown{attempt}"
                else:
                    note = "did not run: the process running the turn stopped"
                results.append(
                    ToolResultPart(
                        tool_use_id=rec.tool_use_id,
                        name=rec.name,
                        content=f"tool {rec.name!r} {note}",
                        is_error=True,
                    )
                )
        state.messages.append(Message.tool_results(results))
        state.in_flight = None
    state.active_stream = None
    return unknown


def _error_event(exc: Exception) -> ErrorEvent:
    while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, ModelError):
        code = "model_output_error" if isinstance(exc, ModelOutputError) else "model_error"
        return ErrorEvent(code=code, message=str(exc), retryable=exc.retryable)
    log.exception("run failed")
    return ErrorEvent(code="internal_error", message=f"{type(exc).__name__}: {exc}")
