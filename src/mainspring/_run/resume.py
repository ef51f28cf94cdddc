"""The loop's other entries and its failure path: a decided or regenerated turn, repair.

:class:`~mainspring._run.loop.Loop` runs a turn from its user message; a paused
turn goes on from here (:meth:`LoopResume.resume_turn` applies the decision
to the paused call, then the rest of the step and the next steps;
:meth:`LoopResume.regenerate_turn` pauses again on a fresh input), and a
failing or cancelled run leaves a valid transcript through
:meth:`LoopResume._repair`. :func:`error_event` types the terminal ``error``
event of a run that failed. A base class of ``Loop``, in a module of its own
so that each file holds one concept.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mainspring._lowlevel.frozen import maker
from mainspring._lowlevel.json_value import JsonValue
from mainspring._run.arguments import clip
from mainspring._run.dispatch import Dispatcher, edited_note
from mainspring._run.results import truncate_result
from mainspring.agent import Agent
from mainspring.decisions import ClientResult, Decision, Reject
from mainspring.errors import (
    CheckpointCorrupt,
    LeaseLost,
    ModelError,
    ModelOutputError,
    SchemaTooNew,
    StoreError,
)
from mainspring.events import (
    ErrorEvent,
    Event,
    StopReason,
)
from mainspring.messages import (
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolResultPart,
)
from mainspring.models.base import ModelStop
from mainspring.state import SessionState, Turn
from mainspring.tools.define import ToolOutput
from mainspring.tools.policy import run_preflight
from mainspring.usage import Usage

__all__ = ["Answer", "LoopResume", "error_event", "thinking_blocks"]

log = logging.getLogger("mainspring.loop")


_text_part = maker(TextPart)  # (built every step; see mainspring._lowlevel.frozen.maker)


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

    def flush_text(self) -> None:
        """Close the text being streamed into a text part."""
        if self.text:
            self.parts.append(_text_part(text="".join(self.text)))
            self.text.clear()


class LoopResume:
    """Resuming and repairing a turn (the base class of :class:`~mainspring._run.loop.Loop`)."""

    # What the loop provides.
    agent: Agent
    state: SessionState
    dispatch: Dispatcher
    emit: Callable[[Event], None]
    _answer: Answer | None

    if TYPE_CHECKING:

        @property
        def turn(self) -> Turn: ...

        async def _complete(self, reason: StopReason) -> None: ...

        async def _steps(self) -> None: ...

        def _append(self, message: Message) -> None: ...

        def _commit_step(self, turn: Turn) -> None: ...

    # ------------------------------------------------------------------ resume

    async def resume_turn(
        self, attempt_id: str, decision: Decision, final_input: dict[str, JsonValue] | None
    ) -> None:
        """Apply a validated decision to the paused call, then go on with the turn."""
        turn = self.turn
        call = turn.current
        pending = turn.unpause()
        assert pending.attempt_id == attempt_id
        hints = tuple(f.message for f in pending.findings if f.action == "hint")
        if isinstance(decision, ClientResult) and pending.nested is None:
            # The client ran it: its result goes on record with the save that consumes
            # the decision, so a crash after it recovers this result, not "did not run".
            call.result = ToolResultPart(
                tool_use_id=call.id,
                name=call.name,
                content=truncate_result(decision.content, 50_000),
                is_error=decision.is_error,
            )
        try:
            await self.dispatch.save()  # the decision is consumed once this is on record
        except BaseException:
            # Not consumed: the turn stays paused on the claimed decision, which the
            # host can post again (here or in a new process) to go on.
            call.result = None
            turn.repause(pending)
            raise
        tool = self.agent.tool(call.name)
        dispatch = self.dispatch
        if pending.nested is not None and tool is not None:
            # The call suspended on a nested run: it runs again and hands it the decision.
            await dispatch.execute(
                tool,
                call,
                turn,
                None,
                write=tool.policy.is_write,
                decision=decision,
                suspended_on=pending.nested,
            )
        elif isinstance(decision, Reject):
            dispatch.fail(call, f"the user rejected this action: {decision.reason}")
        elif isinstance(decision, ClientResult):
            output = ToolOutput(content=decision.content, is_error=decision.is_error)
            limit = 50_000
            if tool is not None:
                output = await dispatch.shorten(tool, output)
                limit = max(tool.policy.max_result_chars, len(output.content))
                if not output.is_error and tool.policy.post_write_refresh:
                    output = await dispatch.refresh(tool, turn, output)
                    limit = len(output.content)
            dispatch.record(call, output, limit)
        elif tool is None:
            dispatch.fail(call, f"tool {call.name!r} is no longer available")
        else:
            assert final_input is not None
            call.input = final_input
            problem = await run_preflight(tool.policy, final_input)
            if problem:
                dispatch.fail(call, problem)
            else:
                await dispatch.execute(
                    tool,
                    call,
                    turn,
                    None,
                    write=True,
                    attempt=attempt_id,
                    hints=hints,
                    note=edited_note(pending.input, final_input),
                )
        if self.turn.status == "paused":  # the call (approved, or nested) waits on a nested run
            await dispatch.save(defer=True)
            await self._complete("pending_action")
            return
        turn.advance()
        await self._rest_of_step(turn)

    async def _rest_of_step(self, turn: Turn) -> None:
        """After the paused call: the step's other calls, then the next steps."""
        dispatch = self.dispatch
        if await dispatch.run_serial(turn):
            await dispatch.save(defer=True)
            await self._complete("pending_action")
            return
        self._commit_step(turn)
        await dispatch.save(defer=True)
        await self._steps()

    async def regenerate_turn(self, attempt_id: str) -> None:
        """A fresh input for the paused call; pause on it again, or go on if it was refused.

        A hook that fails (or gives an invalid input) ends the stream with an
        ``error`` event (``code="regenerate_failed"``) and leaves the pending
        action as it was.
        """
        turn = self.turn
        pending = turn.pending
        assert turn.status == "paused" and pending is not None
        assert pending.attempt_id == attempt_id
        tool = self.agent.tool(pending.name)
        assert tool is not None and tool.policy.regenerate is not None
        call = turn.calls[turn.position]
        before = call.input
        try:
            paused = await self.dispatch.regenerate(tool, turn)
        except Exception as exc:
            call.input = before
            if turn.status != "paused":  # (the hook failed after the turn left its pause)
                turn.repause(pending)
            self.emit(
                ErrorEvent(
                    code="regenerate_failed",
                    message=f"could not regenerate {pending.name!r}: {type(exc).__name__}: "
                    f"{clip(str(exc), 500)}",
                    attempt_id=attempt_id,
                )
            )
            return
        if paused:
            await self.dispatch.save()
            await self._complete("pending_action")
            return
        turn.advance()
        await self.dispatch.save()
        await self._rest_of_step(turn)

    # ------------------------------------------------------------------ repair

    def _repair(self, reason: str, *, keep_partial: bool) -> None:
        """Leave a valid transcript: every committed call gets a result."""
        turn, answer = self.state.turn, self._answer
        self._answer = None
        if turn is None or turn.status == "paused":
            return
        fail = self.dispatch.fail
        if turn.status == "streaming":
            # The model's answer was cut: its calls never reach the transcript,
            # but reads already started get a result event, as every start does.
            for call in turn.calls:
                if call.result is None and call.started:
                    fail(call, f"tool {call.name!r} was interrupted: {reason}")
            turn.cut_answer()
            if answer is not None:
                answer.flush_text()
                text = [p for p in answer.parts if isinstance(p, TextPart)]
                if keep_partial and text:
                    self._append(
                        Message(role="assistant", parts=tuple(text), meta={"partial": True})
                    )
            return
        for call in turn.calls:
            if call.result is None:
                note = "was interrupted" if call.started else "did not run"
                fail(call, f"tool {call.name!r} {note}: {reason}")
        self._commit_step(turn)


def thinking_blocks(messages: list[Message]) -> int:
    """Thinking blocks since the last user message: a resumed turn's next index."""
    count = 0
    for message in reversed(messages):
        if message.role == "user":
            break
        count += sum(isinstance(p, ThinkingPart) for p in message.parts)
    return count


_SAID = {"terminal_event": True}
"""Marks a log record the stream's ``error`` event also carries (the CLI shows that one)."""


def error_event(exc: BaseException) -> ErrorEvent:
    """The terminal ``error`` event for a run that failed with ``exc`` (typed by its class)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, ModelError):
        code = "model_output_error" if isinstance(exc, ModelOutputError) else "model_error"
        return ErrorEvent(code=code, message=str(exc), retryable=exc.retryable)
    if isinstance(exc, LeaseLost):
        log.error("run stopped: %s", exc, extra=_SAID)
        return ErrorEvent(code="lease_lost", message=str(exc), retryable=True)
    if isinstance(exc, StoreError):
        # A store outage is worth retrying; corrupt or too-new data is not.
        retryable = not isinstance(exc, CheckpointCorrupt | SchemaTooNew)
        log.error("run stopped: a store failed: %s", exc, extra=_SAID)
        return ErrorEvent(code="store_error", message=str(exc), retryable=retryable)
    log.error("run failed", exc_info=exc, extra=_SAID)
    return ErrorEvent(code="internal_error", message=f"{type(exc).__name__}: {exc}")
