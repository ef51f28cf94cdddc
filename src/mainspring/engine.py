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
import math
import uuid
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, cast

import anyio
import anyio.lowlevel
from pydantic import JsonValue

from mainspring.agent import Agent
from mainspring.cost import CostTracker
from mainspring.decisions import ClientResult, Decision, Reject
from mainspring.errors import ModelError, ModelOutputError, ToolInputError
from mainspring.events import (
    ErrorEvent,
    Event,
    PendingAction,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ThinkingDone,
    ToolCallDelta,
    ToolResult,
    ToolStart,
    TurnComplete,
    UsageEvent,
)
from mainspring.guards import GuardReport, check_after, check_before
from mainspring.hooks import call_hook
from mainspring.messages import Message, Part, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from mainspring.microcompact import Microcompactor
from mainspring.models.base import (
    ModelEvent,
    ModelRequest,
    ModelStop,
    ModelUsage,
    SystemBlock,
    ToolCallEnd,
)
from mainspring.permissions import Verdict, evaluate, evaluate_static
from mainspring.state import CallRecord, PausedStep, SessionState, WriteRecord
from mainspring.tools.context import ToolContext
from mainspring.tools.define import Tool, ToolOutput
from mainspring.tools.policy import run_preflight
from mainspring.usage import Usage

__all__ = ["Durability", "TurnRunner", "recover_interrupted", "truncate_result"]

log = logging.getLogger("mainspring.engine")

_Judged = tuple[Verdict, GuardReport]
_NO_REPORT = GuardReport()
_AUTO: _Judged = (Verdict(outcome="run", input={}), _NO_REPORT)


def truncate_result(content: str, limit: int) -> str:
    """Cut ``content`` to ``limit`` characters with a hint to narrow the call."""
    if len(content) <= limit:
        return content
    return (
        content[:limit]
        + f"\n\n[truncated: the result has {len(content):,} characters; only the first "
        f"{limit:,} are shown. Narrow the call (filter, paginate or ask for less) to see the rest.]"
    )


class Durability(Protocol):
    """Where a runner makes its progress durable (a session with a SessionStore)."""

    async def save(self) -> None:
        """Persist the session state as it is now."""
        ...

    async def record_write(self, record: WriteRecord) -> None:
        """Persist one write-ledger entry."""
        ...


@dataclass(slots=True)
class _Step:
    """A model step in progress."""

    calls: list[CallRecord] = field(default_factory=list[CallRecord])
    parts: list[Part] = field(default_factory=list[Part])
    text: list[str] = field(default_factory=list[str])
    started: set[str] = field(default_factory=set[str])
    appended: bool = False
    stop: ModelStop | None = None

    def flush_text(self) -> None:
        if self.text:
            self.parts.append(TextPart(text="".join(self.text)))
            self.text.clear()


class TurnRunner:
    """Runs one send or one resume of a session to its terminal event."""

    def __init__(
        self,
        *,
        agent: Agent,
        state: SessionState,
        view: Microcompactor,
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
        self.view = view
        self.cost = cost
        self.turn_cache = turn_cache
        self._emit = emit
        self._durable = durable
        self._scope: anyio.CancelScope | None = None
        self._cancel_requested = False
        self._write_scope: anyio.CancelScope | None = None
        self._contexts: set[ToolContext] = set()
        self._step: _Step | None = None
        self._verdicts: dict[str, _Judged] = {}
        self._kwargs: dict[str, dict[str, Any]] = {}
        """Python arguments of validated calls, so a call is not validated twice."""
        self._turn_index = state.turn_index
        self._steps = 0
        self._turn_usage = Usage()
        self._turn_cost = 0.0
        self._system = (
            (SystemBlock(text=agent.instructions, source="instructions", cache_breakpoint=True),)
            if agent.instructions
            else ()
        )

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
            self._emit(_error_event(exc))

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
        self.view.append(message, self._turn_index)

    async def _save(self) -> None:
        if self._durable is not None:
            with anyio.CancelScope(shield=True):
                await self._durable.save()

    async def _ledger(self, record: WriteRecord) -> None:
        self.state.writes[record.key] = record
        if self._durable is not None:
            with anyio.CancelScope(shield=True):
                await self._durable.record_write(record)

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

    async def _model_step(self) -> _Step:
        request = ModelRequest(
            system=self._system,
            messages=self.view.snapshot(),
            tools=self.agent.tool_specs,
            settings=self.agent.model_settings,
        )
        hooks = self.agent.hooks
        if hooks.before_model_call is not None:
            replaced = await call_hook(hooks.before_model_call(request))
            request = replaced if replaced is not None else request
        step = _Step()
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
        self, request: ModelRequest, step: _Step, reads: anyio.abc.TaskGroup
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

    def _on_model_event(self, event: ModelEvent, step: _Step) -> None:
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
        cost = self.cost.record(model, usage)
        self._turn_usage = self._turn_usage + usage
        self._turn_cost += cost
        self.state.usage = self.cost.usage
        self.state.cost_usd = self.cost.total_usd
        self._emit(
            UsageEvent(model=model, usage=usage, cost_usd=cost, total_cost_usd=self.cost.total_usd)
        )

    async def _on_call(self, end: ToolCallEnd, step: _Step, reads: anyio.abc.TaskGroup) -> None:
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

    # ------------------------------------------------------------- judging

    def _fail_call(self, rec: CallRecord, message: str) -> None:
        rec.result = ToolResultPart(
            tool_use_id=rec.tool_use_id, name=rec.name, content=message, is_error=True
        )
        self._emit(
            ToolResult(tool_use_id=rec.tool_use_id, name=rec.name, content=message, is_error=True)
        )

    async def _judge(self, tool: Tool, rec: CallRecord) -> _Judged | None:
        """Permissions, guards and preflight; ``None`` when the call got an error result."""
        assert rec.input is not None
        rules = self.agent.permissions
        spent = self.state.auto_spent_usd
        if (
            tool.policy.permission == "auto"
            and not (rules.can_use_tool or rules.deny or rules.allow or self.agent.guards)
            and tool.policy.preflight is None
            and not tool.client_executed
        ):
            return _AUTO  # nothing to decide: the common read
        try:
            if rules.can_use_tool is None:
                verdict = evaluate_static(rules, tool, rec.input, auto_spent=spent)
            else:
                verdict = await evaluate(rules, tool, rec.input, auto_spent=spent)
        except ToolInputError as exc:
            self._fail_call(rec, f"the permission callback rewrote the input badly: {exc}")
            return None
        if verdict.outcome == "deny":
            self._fail_call(rec, f"permission denied: {verdict.reason}")
            return None
        if verdict.rewritten:
            rec.input = verdict.input
            self._kwargs.pop(rec.tool_use_id, None)
        report = (
            check_before(self.agent.guards, tool, rec.input) if self.agent.guards else _NO_REPORT
        )
        blocked = report.blocked
        if blocked is not None:
            self._fail_call(rec, f"blocked by {blocked.source}: {blocked.message}")
            return None
        if tool.policy.preflight is not None:
            problem = await run_preflight(tool.policy, rec.input)
            if problem:
                self._fail_call(rec, problem)
                return None
        if report.needs_confirm and verdict.outcome == "run":
            reasons = "; ".join(f.message for f in report.findings if f.action == "confirm")
            verdict = replace(verdict, outcome="confirm", reason=reasons, source="default")
        return verdict, report

    async def _run_serial(self, calls: list[CallRecord], start: int) -> bool:
        """Run the step's remaining calls in order; True when one paused the turn."""
        for pos in range(start, len(calls)):
            rec = calls[pos]
            if rec.result is not None or rec.parallel:
                continue
            tool = self.agent.tool(rec.name)
            if tool is None:
                self._fail_call(rec, f"tool {rec.name!r} is no longer available")
                continue
            judged = self._verdicts.pop(rec.tool_use_id, None) or await self._judge(tool, rec)
            if judged is None:
                continue
            if judged[0].outcome == "confirm":
                self._pause(tool, rec, calls, pos, judged)
                return True
            await anyio.lowlevel.checkpoint_if_cancelled()
            await self._execute(tool, rec, judged, tool.policy.is_write)
        return False

    def _pause(
        self, tool: Tool, rec: CallRecord, calls: list[CallRecord], pos: int, judged: _Judged
    ) -> None:
        verdict, report = judged
        assert rec.input is not None
        pending = PendingAction(
            attempt_id=str(uuid.uuid4()),
            tool_use_id=rec.tool_use_id,
            turn_index=self._turn_index,
            name=rec.name,
            input=rec.input,
            description=tool.description,
            modifiable_fields=tool.policy.modifiable_fields,
            reason=verdict.reason,
            findings=(verdict.finding, *report.findings),
            client_executed=tool.client_executed,
            amount_usd=verdict.amount_usd,
        )
        self.state.in_flight = None
        self.state.paused = PausedStep(
            turn_index=self._turn_index,
            steps=self._steps,
            calls=calls,
            position=pos,
            pending=pending,
            turn_usage=self._turn_usage,
            turn_cost_usd=self._turn_cost,
        )
        self._step = None
        self._emit(pending)

    # ------------------------------------------------------------ execution

    async def _execute(
        self,
        tool: Tool,
        rec: CallRecord,
        judged: _Judged | None,
        write: bool,
        attempt: str | None = None,
    ) -> None:
        """Run one call and record its result; never raises except cancellation."""
        assert rec.input is not None
        args = rec.input
        hooks = self.agent.hooks
        if hooks.before_tool_call is not None:
            denial = await call_hook(hooks.before_tool_call(tool, args))
            if denial:
                self._fail_call(rec, denial)
                return
        step = self._step
        if step is not None:
            step.started.add(rec.tool_use_id)
        self._emit(ToolStart(tool_use_id=rec.tool_use_id, name=rec.name, input=args))
        ctx = None
        if tool.ctx_param is not None:
            ctx = ToolContext(
                session_id=self.state.session_id,
                agent_name=self.agent.name,
                tool_use_id=rec.tool_use_id,
                tool_name=rec.name,
                turn_index=self._turn_index,
                cache=self.turn_cache,
                emit=self._emit,
            )
            self._contexts.add(ctx)
        key = f"{self._turn_index}:{rec.tool_use_id}"
        auto = judged is not None and judged[0].outcome == "run"
        if write:
            await self._ledger(
                WriteRecord(key=key, tool=rec.name, status="started", attempt_id=attempt)
            )
            if auto and judged is not None and judged[0].amount_usd is not None:
                self.state.auto_spent_usd += judged[0].amount_usd
        try:
            kwargs = self._kwargs.pop(rec.tool_use_id, None)
            output, status = await self._invoke(tool, args, ctx, write, kwargs)
        finally:
            if ctx is not None:
                self._contexts.discard(ctx)
        if self.agent.guards or self.agent.hooks.after_tool_call is not None:
            output = await self._after(tool, args, output)
        if write and auto and self.agent.on_auto_executed is not None:
            await call_hook(self.agent.on_auto_executed(tool, args, output))
        self._record(rec, output, tool.policy.max_result_chars)
        if write:
            await self._ledger(
                WriteRecord(
                    key=key, tool=rec.name, status=status, attempt_id=attempt, result=rec.result
                )
            )

    async def _invoke(
        self,
        tool: Tool,
        args: dict[str, JsonValue],
        ctx: ToolContext | None,
        write: bool,
        kwargs: dict[str, Any] | None,
    ) -> tuple[ToolOutput, Literal["done", "unknown"]]:
        timeout = tool.policy.timeout
        if timeout is None and not write:
            try:  # the common read: no scope needed
                return await tool.call(args, ctx, kwargs=kwargs), "done"
            except Exception as exc:
                return _failed(tool, exc), "done"
        deadline = math.inf if timeout is None else anyio.current_time() + timeout
        scope = anyio.CancelScope(shield=write, deadline=deadline)
        output: ToolOutput | None = None
        try:
            with scope:
                if write:
                    self._write_scope = scope
                    if self._cancel_requested:
                        scope.deadline = min(
                            deadline, anyio.current_time() + self.agent.write_cancel_grace
                        )
                output = await tool.call(args, ctx, kwargs=kwargs)
        except Exception as exc:
            return _failed(tool, exc), "done"
        finally:
            if write:
                self._write_scope = None
        if output is not None:
            return output, "done"
        if write and self._cancel_requested:
            message = f"tool {tool.name!r} was cancelled while running; its outcome is unknown"
            return ToolOutput(content=message, is_error=True), "unknown"
        return ToolOutput(
            content=f"tool {tool.name!r} timed out after {timeout}s", is_error=True
        ), "unknown"

    async def _after(
        self, tool: Tool, args: dict[str, JsonValue], output: ToolOutput
    ) -> ToolOutput:
        hints = check_after(self.agent.guards, tool, args, output) if self.agent.guards else []
        if hints:
            output = replace(
                output, content=output.content + "".join(f"\n\n[hint] {h}" for h in hints)
            )
        hook = self.agent.hooks.after_tool_call
        if hook is not None:
            replaced = await call_hook(hook(tool, args, output))
            if replaced is not None:
                output = replaced
        return output

    def _record(self, rec: CallRecord, output: ToolOutput, limit: int) -> None:
        content = truncate_result(output.content, limit)
        rec.result = ToolResultPart(
            tool_use_id=rec.tool_use_id,
            name=rec.name,
            content=content,
            is_error=output.is_error,
            images=output.images,
        )
        self._emit(
            ToolResult(
                tool_use_id=rec.tool_use_id,
                name=rec.name,
                content=content,
                is_error=output.is_error,
            )
        )

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
        self._step = _Step(calls=calls, appended=True)
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


def _failed(tool: Tool, exc: Exception) -> ToolOutput:
    return ToolOutput(
        content=f"tool {tool.name!r} failed: {type(exc).__name__}: {exc}", is_error=True
    )


def _error_event(exc: Exception) -> ErrorEvent:
    while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, ModelError):
        code = "model_output_error" if isinstance(exc, ModelOutputError) else "model_error"
        return ErrorEvent(code=code, message=str(exc), retryable=exc.retryable)
    log.exception("run failed")
    return ErrorEvent(code="internal_error", message=f"{type(exc).__name__}: {exc}")
