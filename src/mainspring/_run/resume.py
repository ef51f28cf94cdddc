"""A paused turn going on, and a failing one left valid: functions over the turn.

:class:`~mainspring._run.loop.Loop` runs a turn from its user message; a paused
turn goes on from here: :func:`apply_decision` applies the decision to the
paused call, :func:`regenerate` pauses again on a fresh input; each returns
the :mod:`step outcome <mainspring._run.outcome>` the loop goes on from. A
failing or cancelled run leaves a valid transcript through :func:`repair`.
:func:`error_event` types the terminal ``error`` event of a run that failed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from mainspring._lowlevel.json_value import JsonValue
from mainspring._run.arguments import clip
from mainspring._run.dispatch import Dispatcher
from mainspring._run.outcome import CONTINUE, PAUSED, Continue, Paused
from mainspring._run.results import edited_note, shortened, truncate_result
from mainspring.agent import Agent
from mainspring.decisions import ClientResult, Decision, Expire, Reject
from mainspring.errors import (
    CheckpointCorrupt,
    GuardrailFailed,
    LeaseLost,
    ModelError,
    ModelOutputError,
    OutputInvalid,
    SchemaTooNew,
    StoreError,
)
from mainspring.events import ErrorEvent, PendingAction
from mainspring.messages import (
    Message,
    TextPart,
    ThinkingPart,
    ToolResultPart,
)
from mainspring.state import Call, Turn
from mainspring.tools.define import Tool, ToolOutput
from mainspring.tools.policy import run_preflight

__all__ = [
    "apply_decision",
    "error_event",
    "expired_note",
    "regenerate",
    "repair",
    "thinking_blocks",
]

log = logging.getLogger("mainspring.loop")


async def apply_decision(
    turn: Turn,
    dispatch: Dispatcher,
    agent: Agent,
    attempt_id: str,
    decision: Decision,
    final_input: dict[str, JsonValue] | None,
) -> Paused | Continue:
    """Apply a validated decision to the paused call.

    :class:`Paused` when the call waits again (on a nested run's decision);
    :class:`Continue` once the call has its result (the turn has moved past it).
    """
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
        await dispatch.save()  # the decision is consumed once this is on record
    except BaseException:
        # Not consumed: the turn stays paused on the claimed decision, which the
        # host can post again (here or in a new process) to go on.
        call.result = None
        turn.repause(pending)
        raise
    audit = dispatch.audit
    if audit is not None:  # consumed: on record before the write it allows runs
        if isinstance(decision, Expire):
            await audit.expired(pending, policy_version=pending.policy_version or None)
        else:
            await audit.decided(
                pending,
                decision,
                final_input,
                principal=getattr(decision, "principal", "") or None,
                policy_version=getattr(decision, "policy_version", None)
                or pending.policy_version
                or None,
            )
    tool = agent.tool(call.name)
    if pending.nested is not None and tool is not None and not isinstance(decision, Expire):
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
    elif isinstance(decision, Expire):  # fail-closed: it never runs, the model is told
        dispatch.fail(call, expired_note(pending))
    elif isinstance(decision, Reject):
        dispatch.fail(call, f"the user rejected this action: {decision.reason}")
    elif isinstance(decision, ClientResult):
        await _client_result(dispatch, tool, call, turn, decision)
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
    if turn.status == "paused":  # the call (approved, or nested) waits on a nested run
        return PAUSED
    turn.advance()
    return CONTINUE


def expired_note(pending: PendingAction) -> str:
    """The tool result of a call whose approval expired (it did not run)."""
    from datetime import UTC, datetime

    when = ""
    if pending.expires_at is not None:
        stamp = datetime.fromtimestamp(pending.expires_at, UTC).isoformat(timespec="seconds")
        when = f" at {stamp}"
    return (
        f"the approval of this action expired{when} before anyone approved it; "
        "it did not run (expired, not rejected). Ask the user before trying again."
    )


async def _client_result(
    dispatch: Dispatcher, tool: Tool | None, call: Call, turn: Turn, decision: ClientResult
) -> None:
    output = ToolOutput(content=decision.content, is_error=decision.is_error)
    limit = 50_000
    if tool is not None:
        output = await shortened(tool, output)
        limit = max(tool.policy.max_result_chars, len(output.content))
        if not output.is_error and tool.policy.post_write_refresh:
            output = await dispatch.refresh(tool, turn, output)
            limit = len(output.content)
    dispatch.record(call, output, limit)


async def regenerate(
    turn: Turn, dispatch: Dispatcher, agent: Agent, attempt_id: str
) -> Paused | Continue | ErrorEvent:
    """A fresh input for the paused call, on record: paused on it again, or refused.

    :class:`Paused` on the fresh input; :class:`Continue` when it was refused
    (the call has an error result and the turn has moved past it). A hook
    that fails (or gives an invalid input) leaves the pending action as it
    was and gives the ``error`` event (``code="regenerate_failed"``) that ends
    the stream.
    """
    pending = turn.pending
    assert pending is not None  # (dispatch.regenerate's unpause checks the status)
    assert pending.attempt_id == attempt_id
    tool = agent.tool(pending.name)
    assert tool is not None and tool.policy.regenerate is not None
    call = turn.current
    before = call.input
    try:
        outcome = await dispatch.regenerate(tool, turn)
    except Exception as exc:
        call.input = before
        if turn.status != "paused":  # (the hook failed after the turn left its pause)
            turn.repause(pending)
        return ErrorEvent(
            code="regenerate_failed",
            message=f"could not regenerate {pending.name!r}: {type(exc).__name__}: "
            f"{clip(str(exc), 500)}",
            attempt_id=attempt_id,
        )
    if isinstance(outcome, Continue):
        turn.advance()
    await dispatch.save()
    return outcome


def repair(
    turn: Turn | None,
    partial: Sequence[TextPart],
    dispatch: Dispatcher,
    append: Callable[[Message], None],
    reason: str,
    *,
    keep_partial: bool,
) -> None:
    """Leave a valid transcript: every committed call gets a result.

    A cut answer's calls never reach the transcript (reads already started
    get a result event, as every start does); its text does, marked partial,
    with ``keep_partial``. A paused turn is left as it is.
    """
    if turn is None or turn.status == "paused":
        return
    fail = dispatch.fail
    if turn.status == "streaming":
        for call in turn.calls:
            if call.result is None and call.started:
                fail(call, f"tool {call.name!r} was interrupted: {reason}")
        turn.cut_answer()
        if keep_partial and partial:
            append(Message(role="assistant", parts=tuple(partial), meta={"partial": True}))
        return
    for call in turn.calls:
        if call.result is None:
            note = "was interrupted" if call.started else "did not run"
            fail(call, f"tool {call.name!r} {note}: {reason}")
    append(Message.tool_results(turn.commit_step()))


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
    if isinstance(exc, OutputInvalid):
        return ErrorEvent(code=exc.code, message=exc.reason)
    if isinstance(exc, GuardrailFailed):
        log.warning("run stopped: %s", exc, exc_info=exc.__cause__, extra=_SAID)
        return ErrorEvent(code="guardrail_failed", message=str(exc))
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
