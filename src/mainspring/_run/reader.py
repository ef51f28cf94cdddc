"""The answer reader: one model stream read into the step's answer.

:class:`AnswerReader` turns the events of one model call into what the step
needs: text and thinking passed on to the stream's consumer, tool calls
assembled from their deltas (each given its engine id, validated, and a
concurrency-safe read started as soon as its arguments close), the model's
usage priced, and the :class:`~mainspring.models.base.ModelStop` that ends
the answer. Then the answer joins the transcript and the spend is settled:
with the step's calls over budget its reads stop and the step's outcome is
``Finish("budget_exceeded")`` (the loop's one budget decision after a model
call, see :meth:`AnswerReader.read`).

The loop (:mod:`mainspring._run.loop`) owns the steps; the reader owns one
step's model stream. Private machinery.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Protocol, assert_never

from mainspring._lowlevel.json_value import JsonValue
from mainspring._lowlevel.tasks import TaskGroup
from mainspring._run.arguments import clip, parse_arguments
from mainspring._run.dispatch import Dispatcher
from mainspring._run.judge import Judgement, unjudged
from mainspring._run.outcome import Finish
from mainspring._run.output import OutputCheck
from mainspring._run.spend import Spend
from mainspring.agent import Agent
from mainspring.context.compiler import CompiledContext, ContextCompiler
from mainspring.context.snapshot import CostEstimate
from mainspring.errors import ModelOutputError, ToolInputError
from mainspring.events import (
    Event,
    TextDelta,
    ThinkingDelta,
    ThinkingDone,
    ToolCallDelta,
    UsageEvent,
)
from mainspring.hooks import call_hook
from mainspring.messages import Message, Part, TextPart, ThinkingPart, ToolCallPart
from mainspring.models.base import ModelRequest, ModelStop, ModelUsage, ToolCallEnd
from mainspring.state import Call, Turn, new_call_id
from mainspring.thinking import parse_eval_summary
from mainspring.tools.define import Tool
from mainspring.usage import Usage

__all__ = ["OVER_BUDGET", "Answer", "AnswerReader", "Paced"]

_ZERO = Usage()

OVER_BUDGET = Finish("budget_exceeded")
"""A step whose answer brought the session's spend to its budget: its calls do not run."""


@dataclass(slots=True)
class Answer:
    """The model's answer while it streams: what is not yet in the transcript."""

    parts: list[Part] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    stop: ModelStop | None = None
    delta_ids: dict[int, str] = field(default_factory=dict)
    """Engine call ids handed to the tool-call deltas of each index, until its call ends."""
    usage: Usage = Usage()
    """What the provider reported so far (kept when the stream fails later)."""
    estimated: bool = False
    """Some of ``usage`` is the adapter's estimate (the server reported none)."""

    def flush_text(self) -> None:
        """Close the text being streamed into a text part."""
        if self.text:
            self.parts.append(TextPart(text="".join(self.text)))
            self.text.clear()


class Paced(Protocol):
    """A consumer's buffer the model stream keeps pace with."""

    @property
    def full(self) -> bool:
        """Whether the buffer is at its limit."""
        ...

    async def room(self) -> None:
        """Wait until it is not."""
        ...


class AnswerReader:
    """Reads one model stream per step into the answer the loop commits."""

    __slots__ = (
        "_agent",
        "_context",
        "_dispatch",
        "_emit",
        "_emit_text",
        "_output",
        "_pace",
        "_spend",
        "answer",
        "compiled",
        "hold",
        "thinking",
    )

    def __init__(
        self,
        *,
        agent: Agent,
        context: ContextCompiler[Message],
        spend: Spend,
        dispatch: Dispatcher,
        emit: Callable[[Event], None],
        pace: Paced | None,
        thinking: int,
        output: OutputCheck | None = None,
    ) -> None:
        """Read for ``agent``'s model; ``emit`` receives what the consumer sees.

        ``thinking`` is the index of the turn's next thinking block (a resumed
        turn counts its own); ``pace`` is the consumer's buffer, if it has one;
        ``output`` the run's typed output (partial objects, the final-answer call).
        """
        self._agent = agent
        self._context = context
        self._spend = spend
        self._dispatch = dispatch
        self._emit = emit
        self._pace = pace
        self._output = output
        self._emit_text = emit if output is None else output.tee(emit)
        """Where text deltas go: the consumer (and the typed output's partial parser)."""
        self.answer: Answer | None = None
        """The answer being streamed, not in the transcript yet (``None`` once committed)."""
        self.compiled: CompiledContext[Message] | None = None
        """The context the step's request was built from (its accounting record)."""
        self.thinking = thinking
        """The index of the turn's next thinking block."""
        self.hold: Callable[[], Awaitable[bool]] | None = None
        """While set, a read started mid-stream waits for it, and does not run when it
        says no: the input guardrails' verdict (see :mod:`mainspring._run.tripwires`)."""

    def cut(self) -> list[TextPart]:
        """The text of an answer cut before it was committed (and none is left to cut)."""
        answer, self.answer = self.answer, None
        if answer is None:
            return []
        answer.flush_text()
        return [part for part in answer.parts if isinstance(part, TextPart)]

    async def read(self, request: ModelRequest, turn: Turn) -> ModelStop | Finish:
        """One model step: stream the answer; reads start as their calls close.

        Returns the model's stop, or :data:`OVER_BUDGET` when the step has calls
        and the session's spend (with what other workers spent) reached its
        budget once the answer was priced: its reads are stopped and its calls
        must not run. This is the one budget decision after a model call; the
        other is before it (see ``Loop._limit_reached``).
        """
        self.answer = Answer()
        turn.begin_step()
        if self._output is not None:
            self._output.begin_step()
        usage: Usage = _ZERO
        stop: ModelStop | Finish | None = None
        failure: Exception | None = None
        async with TaskGroup(shielded=False) as reads:  # reads never raise (see execute)
            try:
                usage, stop = await self._consume(request, turn, reads)
                spend = self._spend
                if spend.unshared:
                    await spend.share()
                if turn.calls and spend.over_budget():
                    reads.cancel()
                    stop = OVER_BUDGET
            except Exception as exc:  # re-raised below, outside the task group
                failure = exc
                reads.cancel()
        if failure is not None:
            raise failure
        assert stop is not None
        hook = self._agent.hooks.after_model_call
        if hook is not None:
            await call_hook(hook(request, usage))
        return stop

    async def _consume(
        self, request: ModelRequest, turn: Turn, reads: TaskGroup
    ) -> tuple[Usage, ModelStop]:
        answer = self.answer
        assert answer is not None
        agent = self._agent
        try:
            usage = await self._read(request, answer, turn, reads)
        except Exception:
            if answer.usage != _ZERO:
                # What the provider reported before it failed was still spent.
                self._account(agent.resolved_model.name, answer.usage, turn, answer.estimated)
            raise
        if answer.stop is None:
            raise ModelOutputError(
                "the model stream ended without a stop event",
                provider=agent.resolved_model.name,
            )
        answer.flush_text()
        turn.answered()
        self._context.append((Message(role="assistant", parts=tuple(answer.parts)),))
        self.answer = None  # committed: nothing of it is left to repair
        dispatch = self._dispatch
        if dispatch.durable is not None:
            await dispatch.save(defer=True)
        self._account(answer.stop.model or agent.resolved_model.name, usage, turn, answer.estimated)
        return usage, answer.stop

    async def _read(
        self, request: ModelRequest, answer: Answer, turn: Turn, reads: TaskGroup
    ) -> Usage:
        """Every event of the model's stream into ``answer``; its usage, summed."""
        emit, emit_text, pace = self._emit, self._emit_text, self._pace
        async with aclosing(self._agent.resolved_model.stream(request)) as stream:  # type: ignore[type-var]  # adapters return async generators
            async for event in stream:
                # By how often each comes; the union is closed (assert_never checks it).
                if isinstance(event, TextDelta):
                    answer.text.append(event.text)
                    emit_text(event)
                elif isinstance(event, ToolCallEnd):
                    answer.flush_text()
                    judging = self._on_call(event, answer, turn, reads)
                    if judging is not None:
                        await self._judge_read(judging, turn, reads)
                elif isinstance(event, ModelUsage):
                    answer.usage = answer.usage + event.usage
                    answer.estimated = answer.estimated or event.estimated
                elif isinstance(event, ModelStop):
                    answer.stop = event
                elif isinstance(event, ToolCallDelta):
                    self._on_call_delta(event, answer)
                elif isinstance(event, ThinkingDelta):
                    if event.index != self.thinking:
                        event = ThinkingDelta(text=event.text, index=self.thinking)
                    emit(event)
                elif isinstance(event, ThinkingDone):
                    answer.flush_text()
                    answer.parts.append(
                        ThinkingPart(
                            text=event.text,
                            signature=event.signature,
                            redacted=event.redacted,
                            provider=event.provider,
                        )
                    )
                    emit(self._closed_thinking(event))
                else:
                    assert_never(event)
                if pace is not None and pace.full:
                    await pace.room()
        return answer.usage

    def _on_call_delta(self, event: ToolCallDelta, answer: Answer) -> None:
        """A piece of a call's arguments, under the engine id its call will have."""
        call_id = answer.delta_ids.get(event.index)
        if call_id is None:
            call_id = answer.delta_ids[event.index] = new_call_id()
        self._emit(
            ToolCallDelta(
                tool_use_id=call_id,
                name=event.name,
                index=event.index,
                args_delta=event.args_delta,
            )
        )
        if self._output is not None:
            self._output.arguments(event.name, event.index, event.args_delta)

    def _closed_thinking(self, event: ThinkingDone) -> ThinkingDone:
        """The block's index, and its evaluation summary when it holds one."""
        summary = None if event.redacted else parse_eval_summary(event.text)
        index, self.thinking = self.thinking, self.thinking + 1
        if summary is None:
            return replace(event, index=index)
        mode, items = summary
        return replace(event, index=index, summary_mode=mode, evaluation=items)

    def _account(self, model: str, usage: Usage, turn: Turn, estimated: bool = False) -> None:
        spend = self._spend
        cost = spend.account(model, usage, turn)
        context = self._context
        if self.compiled is not None and context.meter is not None:  # accounting on
            priced = spend.priced(model)
            context.record_call(
                self.compiled,
                model=model,
                usage=usage,
                cost=CostEstimate(
                    usd=cost,
                    priced=priced,
                    price_source=spend.price_source(model) if priced else "none",
                ),
            )
        self._emit(
            UsageEvent(
                model=model,
                usage=usage,
                cost_usd=cost,
                total_cost_usd=spend.total_usd,
                estimated=estimated,
            )
        )

    # ------------------------------------------------------------- the calls

    def _on_call(
        self, end: ToolCallEnd, answer: Answer, turn: Turn, reads: TaskGroup
    ) -> tuple[Tool, Call] | None:
        """A call's arguments closed: give it an engine id, validate it, maybe start it.

        Returns a read that has something to decide (permissions, guards, a
        preflight) for :meth:`_judge_read`; a read with nothing to decide starts here.
        """
        call_id = answer.delta_ids.pop(end.index, None) or new_call_id()
        call = Call(id=call_id, index=end.index, name=end.name, provider_id=end.tool_use_id)
        turn.add_call(call)
        arguments: dict[str, JsonValue] = {}
        agent = self._agent
        tool = agent.tool(end.name)
        parsed, error = parse_arguments(end.name, end.arguments)
        if isinstance(parsed, dict):
            arguments = parsed
        answer.parts.append(
            ToolCallPart(
                id=call_id, name=end.name, arguments=arguments, provider_id=end.tool_use_id
            )
        )
        dispatch = self._dispatch
        if self._output is not None and self._output.take(call, end.arguments):
            return None
        if tool is None:
            names = ", ".join(agent.tool_names) or "none"
            dispatch.fail(call, f"unknown tool {clip(end.name)!r}; available tools: {names}")
            return None
        if error is not None:
            dispatch.fail(call, error)
            return None
        try:
            call.input, dispatch.kwargs[call_id] = tool.parse(parsed)
        except ToolInputError as exc:
            dispatch.fail(call, f"{exc}. Fix the arguments and call again.")
            return None
        if tool.policy.parallel and not tool.client_executed:
            judged = unjudged(agent.permissions, agent.guards, tool)
            if judged is None:
                return tool, call
            self._start_read(tool, call, turn, judged, reads)
        return None

    def _start_read(
        self, tool: Tool, call: Call, turn: Turn, judged: Judgement, reads: TaskGroup
    ) -> None:
        call.parallel = True
        read = partial(self._dispatch.execute, tool, call, turn, judged, write=False)
        reads.start_soon(read if self.hold is None else partial(self._held, self.hold, call, read))

    async def _held(
        self, hold: Callable[[], Awaitable[bool]], call: Call, read: Callable[[], Awaitable[None]]
    ) -> None:
        """A read that waits for the input guardrails' verdict before it starts."""
        if await hold():
            await read()
        else:
            self._dispatch.fail(call, f"tool {call.name!r} did not run: a guardrail stopped it")

    async def _judge_read(self, judging: tuple[Tool, Call], turn: Turn, reads: TaskGroup) -> None:
        """Judge a read: it starts now, waits for the serial phase's decision, or failed."""
        tool, call = judging
        dispatch = self._dispatch
        judged = await dispatch.judge(tool, call)
        if judged is None:
            return
        if judged.outcome == "run":
            self._start_read(tool, call, turn, judged, reads)
        else:
            dispatch.verdicts[call.id] = judged
