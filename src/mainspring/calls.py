"""The tool calls of a model step: judged, paused for a decision, or executed.

Judging runs permissions (deny list, allow list, callback, the tool's own
tier), guards and the preflight check. Executing runs reads as they are
(in parallel, started by the engine) and writes shielded from cancellation,
on the write ledger before and after, with results truncated to the tool's
budget. :class:`CallRunner` holds these steps; the engine's
:class:`~mainspring.engine.TurnRunner` builds on it.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

import anyio
import anyio.lowlevel
from pydantic import JsonValue

from mainspring.agent import Agent
from mainspring.errors import ToolInputError
from mainspring.events import Event, PendingAction, ToolResult, ToolStart
from mainspring.guards import GuardReport, check_after, check_before
from mainspring.hooks import call_hook
from mainspring.messages import Part, TextPart, ToolResultPart
from mainspring.models.base import ModelStop
from mainspring.permissions import Verdict, evaluate, evaluate_static
from mainspring.state import CallRecord, PausedStep, SessionState, WriteRecord
from mainspring.tools.context import ToolContext
from mainspring.tools.define import Tool, ToolOutput
from mainspring.tools.policy import run_preflight
from mainspring.usage import Usage

__all__ = ["CallRunner", "Durability", "Step", "truncate_result"]

Judged = tuple[Verdict, GuardReport]
_NO_REPORT = GuardReport()
_AUTO: Judged = (Verdict(outcome="run", input={}), _NO_REPORT)


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
class Step:
    """A model step in progress."""

    calls: list[CallRecord] = field(default_factory=list[CallRecord])
    parts: list[Part] = field(default_factory=list[Part])
    text: list[str] = field(default_factory=list[str])
    started: set[str] = field(default_factory=set[str])
    appended: bool = False
    stop: ModelStop | None = None

    def flush_text(self) -> None:
        """Close the text being streamed into a text part."""
        if self.text:
            self.parts.append(TextPart(text="".join(self.text)))
            self.text.clear()


class CallRunner:
    """Judging and executing the calls of a step (the engine's runner builds on it)."""

    agent: Agent
    state: SessionState
    turn_cache: dict[str, Any]
    _emit: Callable[[Event], None]
    _durable: Durability | None
    _cancel_requested: bool
    _write_scope: anyio.CancelScope | None
    _contexts: set[ToolContext]
    _step: Step | None
    _verdicts: dict[str, Judged]
    _kwargs: dict[str, dict[str, Any]]
    _turn_index: int
    _steps: int
    _turn_usage: Usage
    _turn_cost: float

    async def _save(self) -> None:
        if self._durable is not None:
            with anyio.CancelScope(shield=True):
                await self._durable.save()

    async def _ledger(self, record: WriteRecord) -> None:
        self.state.writes[record.key] = record
        if self._durable is not None:
            with anyio.CancelScope(shield=True):
                await self._durable.record_write(record)

    def _fail_call(self, rec: CallRecord, message: str) -> None:
        rec.result = ToolResultPart(
            tool_use_id=rec.tool_use_id, name=rec.name, content=message, is_error=True
        )
        self._emit(
            ToolResult(tool_use_id=rec.tool_use_id, name=rec.name, content=message, is_error=True)
        )

    async def _judge(self, tool: Tool, rec: CallRecord) -> Judged | None:
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
        self, tool: Tool, rec: CallRecord, calls: list[CallRecord], pos: int, judged: Judged
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
        judged: Judged | None,
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


def _failed(tool: Tool, exc: Exception) -> ToolOutput:
    return ToolOutput(
        content=f"tool {tool.name!r} failed: {type(exc).__name__}: {exc}", is_error=True
    )
