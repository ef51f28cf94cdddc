"""A2A tasks as mainspring turns: the ``AgentExecutor`` behind the A2A routes.

An A2A context is a mainspring session of the caller (its id derived from the
principal, the agent and the context id, so no two principals ever share one);
an A2A task is one turn of it. The turn's events become task events: text
deltas append to a ``response`` artifact (those already there when the relay
looks go as one chunk: under load, fewer and larger chunks), replaced
(``lastChunk``) when the turn ends or pauses by the whole text with one text
part per model step, so the texts of two steps are never glued together; tool
events are ``working``
status updates whose data part is the event in mainspring's wire format, a
pending action pauses the task in ``input-required`` (its data part the
``pending_action`` event with the signed approval id), and the terminal event
ends it ``completed``, ``canceled``, ``rejected`` (a refusal) or ``failed``.

The next message on an ``input-required`` task is the decision (see
:func:`decision_of`); one that cannot be applied leaves the task waiting, with
a text part saying why.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence

import anyio
from a2a.helpers.proto_helpers import get_data_parts, get_text_parts, new_data_part, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Message, Part, Task, TaskState, TaskStatus
from a2a.utils.errors import UnsupportedOperationError
from pydantic import JsonValue

from mainspring.decisions import Approve, ClientResult, Decision, Reject
from mainspring.errors import MainspringError, SessionBusy, StoreError
from mainspring.events import (
    Canvas,
    ErrorEvent,
    Event,
    GuardrailVerdict,
    PendingAction,
    PermissionDenied,
    TextDelta,
    ToolProgress,
    ToolResult,
    ToolStart,
    TurnComplete,
    UsageEvent,
)
from mainspring.server._auth import Principal
from mainspring.server._host import NotFound, SessionHost
from mainspring.server._runs import LiveRun
from mainspring.server._signing import BadApproval
from mainspring.session import Session

__all__ = [
    "HOST_KEY",
    "PRINCIPAL_KEY",
    "BadReply",
    "MainspringExecutor",
    "caller_of",
    "decision_of",
    "session_id_of",
]

PRINCIPAL_KEY = "mainspring.principal"
"""Where the A2A call context's state carries the authenticated :class:`Principal`."""
HOST_KEY = "mainspring.host"
"""Where it carries the worker's :class:`SessionHost`."""

_YES = frozenset({"yes", "y", "approve", "approved", "ok", "okay"})
_NO = frozenset({"no", "n", "reject", "rejected", "deny", "denied"})
_DECISION_KEYS = {
    "approve": {"decision", "approval_id", "edits"},
    "reject": {"decision", "approval_id", "reason"},
    "client_result": {"decision", "approval_id", "content", "is_error"},
}
_RELAYED = (ToolStart, ToolProgress, PermissionDenied, ToolResult, Canvas, GuardrailVerdict)
_CANCEL_WAIT = 10.0
_TERMINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
    }
)


class BadReply(ValueError):
    """A message on an ``input-required`` task that is not a decision."""


def session_id_of(agent: str, principal: Principal, context_id: str) -> str:
    """The session an A2A context of ``principal`` maps to (never another's)."""
    key = "\x00".join((agent, principal.id, context_id)).encode("utf-8")
    return "a2a-" + hashlib.sha256(key).hexdigest()[:32]


def decision_of(parts: Sequence[Part], *, shown: str) -> tuple[str, Decision]:
    """``(approval id, decision)`` from the parts of a reply to ``input-required``.

    A data part ``{"decision": "approve", "approval_id": …, "edits": {…}}``
    (or ``"reject"`` with an optional ``"reason"``, or ``"client_result"`` with
    ``"content"`` and ``"is_error"``); without ``approval_id`` it decides the
    action the task showed (``shown``). Otherwise a text ``yes``/``approve``/
    ``ok`` approves and ``no``/``reject``/``deny`` rejects the shown action.

    Raises:
        BadReply: Neither, or a data part of the wrong shape.
    """
    for data in get_data_parts(parts):
        if isinstance(data, dict) and "decision" in data:
            return _data_decision(data, shown=shown)
    text = " ".join(get_text_parts(parts)).strip().rstrip(".!").strip().lower()
    if text in _YES:
        return shown, Approve()
    if text in _NO:
        return shown, Reject()
    raise BadReply(
        "this task waits for a decision: reply 'yes' or 'no', or send a data part "
        '{"decision": "approve" | "reject", "approval_id": …, "edits": {…}}'
    )


def _data_decision(data: Mapping[str, object], *, shown: str) -> tuple[str, Decision]:
    kind = data["decision"]
    if not isinstance(kind, str) or kind not in _DECISION_KEYS:
        raise BadReply('"decision" is "approve", "reject" or "client_result"')
    unknown = sorted(set(data) - _DECISION_KEYS[kind])
    if unknown:
        raise BadReply(f"a {kind} decision has no fields {unknown}")
    approval_id = data.get("approval_id", shown)
    if not isinstance(approval_id, str) or not approval_id:
        raise BadReply('"approval_id" is the string the input-required status carried')
    if kind == "approve":
        edits = data.get("edits", {})
        if not isinstance(edits, dict):
            raise BadReply('"edits" is an object of field: new value')
        return approval_id, Approve(edits={str(k): _json(v) for k, v in edits.items()})
    if kind == "reject":
        reason = data.get("reason", Reject().reason)
        if not isinstance(reason, str):
            raise BadReply('"reason" is a string')
        return approval_id, Reject(reason=reason)
    content, is_error = data.get("content"), data.get("is_error", False)
    if not isinstance(content, str) or not isinstance(is_error, bool):
        raise BadReply('a client_result has "content" (a string) and "is_error" (a boolean)')
    return approval_id, ClientResult(content=content, is_error=is_error)


def _json(value: object) -> JsonValue:
    # A protobuf Value holds every number as a double: give whole numbers back as ints.
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json(v) for v in value]
    if value is None or isinstance(value, str | bool | int | float):
        return value
    raise BadReply(f"not a JSON value: {type(value).__name__}")


def _shown_approval(task: Task) -> str:
    """The signed approval id the task's ``input-required`` status carried."""
    if task.status.HasField("message"):
        for data in get_data_parts(task.status.message.parts):
            if isinstance(data, dict) and data.get("type") == "pending_action":
                approval_id = data.get("approval_id")
                if isinstance(approval_id, str):
                    return approval_id
    return ""


def caller_of(context: RequestContext) -> tuple[Principal, SessionHost]:
    """The principal and host the A2A routes put in the call context."""
    state = context.call_context.state
    principal, host = state.get(PRINCIPAL_KEY), state.get(HOST_KEY)
    if not isinstance(principal, Principal) or not isinstance(host, SessionHost):
        raise RuntimeError("an A2A request reached the executor without authentication")
    return principal, host


class MainspringExecutor(AgentExecutor):
    """Runs each A2A task as a turn of the caller's session for its context."""

    def __init__(self) -> None:
        """One per app; the host and caller come with each request."""
        self._opening = anyio.Lock()

    async def _session(self, host: SessionHost, principal: Principal, context_id: str) -> Session:
        session_id = session_id_of(host.agent.name, principal, context_id)
        async with self._opening:  # one create per new context on this worker
            try:
                return await host.open(principal, session_id)
            except NotFound:
                return await host.create(principal, session_id=session_id)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Start the turn a new task asks for, or decide the one it waits on."""
        principal, host = caller_of(context)
        task = context.current_task
        # A follow-up may name only the task: its context is the task's.
        context_id = task.context_id if task is not None else context.context_id
        assert context.task_id is not None and context_id
        updater = TaskUpdater(event_queue, context.task_id, context_id)
        session = await self._session(host, principal, context_id)
        message = context.message
        if task is None:
            await event_queue.enqueue_event(
                Task(
                    id=context.task_id,
                    context_id=context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[message] if message is not None else [],
                    metadata={"mainspring": {"session_id": session.session_id}},
                )
            )
            text = "\n".join(get_text_parts(message.parts)).strip() if message else ""
            if not text:
                await updater.reject(_says(updater, "a task starts with a text message"))
                return
            try:
                run = await host.send(session, text)
            except (MainspringError, NotFound) as exc:
                if isinstance(exc, StoreError):
                    raise
                await updater.reject(_says(updater, _refusal(session, exc)))
                return
        else:
            decided = await self._decide(host, session, task, message, updater)
            if decided is None:
                return
            run = decided
        await updater.start_work()
        await self._relay(host, run, updater)

    async def _decide(
        self,
        host: SessionHost,
        session: Session,
        task: Task,
        message: Message | None,
        updater: TaskUpdater,
    ) -> LiveRun | None:
        # Decided on another worker since (the task is terminal, or works on that
        # decision there): one refusal, never a stream that ends on a non-final state.
        state = TaskState.Name(task.status.state)
        if task.status.state in _TERMINAL:
            raise UnsupportedOperationError(message=f"Task {task.id} is in terminal state: {state}")
        if task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
            raise UnsupportedOperationError(
                message=f"Task {task.id} is not waiting for input: it is {state}"
            )
        try:
            approval_id, decision = decision_of(
                message.parts if message else [], shown=_shown_approval(task)
            )
            return await host.decide(session, approval_id, decision)
        except (BadReply, BadApproval, NotFound, MainspringError) as exc:
            if isinstance(exc, StoreError):
                raise
            await self._ask_again(host, session, updater, problem=str(exc))
            return None

    async def _ask_again(
        self, host: SessionHost, session: Session, updater: TaskUpdater, *, problem: str
    ) -> None:
        pending = session.pending
        if pending is None:  # decided through another door meanwhile
            await updater.failed(_says(updater, f"{problem}; no decision is pending any more"))
            return
        await updater.requires_input(
            updater.new_agent_message(
                [new_text_part(problem), _pending_part(host, session, pending)]
            )
        )

    async def _relay(self, host: SessionHost, run: LiveRun, updater: TaskUpdater) -> None:
        response = _Response(updater)
        async for batch in run.batches():
            for event in batch:
                if isinstance(event, TextDelta):
                    response.queue(event.text)
                    continue
                await response.send()
                if isinstance(event, UsageEvent):
                    if not event.model.startswith(("tool:", "guardrail:")):  # a step's usage
                        response.end_step()
                elif isinstance(event, _RELAYED):
                    message = updater.new_agent_message([_event_part(host, run.session_id, event)])
                    await updater.update_status(TaskState.TASK_STATE_WORKING, message)
                elif isinstance(event, PendingAction):
                    await response.flush()
                    question = [new_text_part(_question(event))]
                    asked = [*question, _pending_part(host, run.session, event)]
                    await updater.requires_input(updater.new_agent_message(asked))
                elif isinstance(event, TurnComplete | ErrorEvent):
                    await response.flush()
                    await _finish(host, run.session_id, event, updater)
                    return
            await response.send()
        await updater.failed(_says(updater, "the run ended without a terminal event"))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Stop the task's turn; a task waiting on an action rejects it (it never runs).

        A turn running on another worker is asked to stop there (``request_cancel``).
        """
        principal, host = caller_of(context)
        assert context.task_id is not None and context.context_id is not None
        session_id = session_id_of(host.agent.name, principal, context.context_id)
        run = host.runs.active(session_id)
        task = context.current_task
        if run is not None:
            run.session.cancel()
        elif task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            run = await self._reject_on_cancel(host, principal, session_id, task)
        elif task is not None and task.status.state not in _TERMINAL:
            await host.request_cancel(session_id)  # its turn runs on another worker, if anywhere
        if run is not None:
            with anyio.move_on_after(_CANCEL_WAIT):
                await run.wait_done()
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    async def _reject_on_cancel(
        self, host: SessionHost, principal: Principal, session_id: str, task: Task
    ) -> LiveRun | None:
        try:
            session = await host.open(principal, session_id)
            return await host.decide(
                session, _shown_approval(task), Reject(reason="The task was cancelled.")
            )
        except (BadApproval, NotFound, MainspringError):
            return None  # decided already, or through another door: nothing waits


class _Response:
    """A task's ``response`` artifact: streamed text chunks, then the whole, one part per step."""

    def __init__(self, updater: TaskUpdater) -> None:
        self._updater = updater
        self._artifact_id = f"response-{uuid.uuid4().hex[:12]}"
        self._steps: list[str] = []  # the text of each model step that said something
        self._said: list[str] = []  # the current step's chunks
        self._queued: list[str] = []  # deltas not sent yet

    def queue(self, text: str) -> None:
        """A text delta, sent with the others already there by :meth:`send`."""
        self._queued.append(text)

    async def send(self) -> None:
        """The queued deltas as one appended chunk."""
        if not self._queued:
            return
        chunk = "".join(self._queued)
        self._queued.clear()
        await self._updater.add_artifact(
            [new_text_part(chunk)],
            artifact_id=self._artifact_id,
            name="response",
            append=bool(self._said or self._steps),
        )
        self._said.append(chunk)

    def end_step(self) -> None:
        """A model step ended: its text is one part of the whole."""
        if self._said:
            self._steps.append("".join(self._said))
            self._said.clear()

    async def flush(self) -> None:
        """The whole text, one part per step, replacing the chunks (``lastChunk``)."""
        await self.send()
        self.end_step()
        if self._steps:
            parts = [new_text_part(text) for text in self._steps]
            self._steps.clear()
            await self._updater.add_artifact(
                parts,
                artifact_id=self._artifact_id,
                name="response",
                append=False,
                last_chunk=True,
            )


async def _finish(
    host: SessionHost, session_id: str, event: TurnComplete | ErrorEvent, updater: TaskUpdater
) -> None:
    if isinstance(event, TurnComplete) and event.stop_reason == "pending_action":
        return  # the task waits in input-required
    message = updater.new_agent_message([_event_part(host, session_id, event)])
    if isinstance(event, ErrorEvent):
        message.parts.insert(0, new_text_part(event.message))
        await updater.failed(message)
    elif event.stop_reason == "cancelled":
        await updater.cancel(message)
    elif event.stop_reason in ("refusal", "guardrail_tripped"):
        await updater.reject(message)
    elif event.stop_reason == "interrupted":
        await updater.failed(message)
    else:
        await updater.complete(message)


def _event_part(host: SessionHost, session_id: str, event: Event, *, principal: str = "") -> Part:
    return new_data_part(host.wire_dict(session_id, event, principal=principal))


def _pending_part(host: SessionHost, session: Session, pending: PendingAction) -> Part:
    """The pending action with its approval id signed for the session's principal."""
    owner = session.state.principal or ""
    return _event_part(host, session.session_id, pending, principal=owner)


def _question(pending: PendingAction) -> str:
    why = f" ({pending.reason})" if pending.reason else ""
    fields = (
        f"; you may edit {', '.join(pending.modifiable_fields)}"
        if pending.modifiable_fields
        else ""
    )
    return f"Approve {pending.name}{why}? Reply yes or no{fields}."


def _refusal(session: Session, exc: Exception) -> str:
    pending = session.pending
    if isinstance(exc, SessionBusy) and pending is not None:
        return (
            f"this context waits for a decision on {pending.name} (an earlier task is "
            "input-required): decide or cancel that task first"
        )
    if isinstance(exc, SessionBusy):
        return "this context is busy with another task; wait for it or cancel it"
    return str(exc)


def _says(updater: TaskUpdater, text: str) -> Message:
    return updater.new_agent_message([new_text_part(text)])
