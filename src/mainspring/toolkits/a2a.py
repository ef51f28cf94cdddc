"""A remote A2A agent as a tool: :func:`a2a_tool` (extra ``a2a``).

``tool = await a2a_tool(url, auth=token)`` fetches the agent card at
``<url>/.well-known/agent-card.json`` and makes one tool of the remote agent:
its name and description come from the card (sanitized: the card is hostile
input, so it is read up to :data:`MAX_CARD_BYTES`, control characters are
stripped, the name is cut to a valid tool name and the description to
:data:`MAX_DESCRIPTION_CHARS`), and the transport the card names must be on
the card's own origin, so the credentials never go anywhere else.

A call sends the model's ``request`` as a message of a new task (the SDK's
client, streaming when the card offers it). The task's ``working`` updates
reach the host as ``tool_progress``; its artifacts' text, bounded
(``max_result_chars``), is the tool's result. A task that ends ``failed``,
``rejected`` or ``canceled`` is an error result saying so.

A task in ``input-required`` pauses the session's turn the way an MCP
elicitation does (:meth:`ToolContext.suspend`): the host sees a
``pending_action`` whose ``nested`` action is the remote's question (a
mainspring server's own pending action, its name, input and editable fields,
when it sends one; otherwise the question, with an ``answer`` field to edit),
and where the task waits (``details["a2a_input_required"]``: task, context,
the remote's approval id, the round) is kept with the session. The decision
is sent back as the next message on that task, from whichever process loads
the session: the session consumes the decision on record before the tool runs
again, so a crash after that ends the call with an error result instead of a
second send (:mod:`mainspring._run.recovery`). ``Approve`` (with edits) and
``Reject`` become a mainspring decision data part when the remote showed an
approval id, else the text ``yes`` / ``no`` (an ``answer`` edit is sent as
the text itself).

``auth`` is the host's: a bearer token, a header mapping, or a callable
giving either (awaited if it returns an awaitable) for every request. It is
never part of the tool's input or result. The tool is a write (confirm tier)
by default: a remote agent may act; ``permission="auto"`` (or a resolver)
changes that.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
from pydantic import JsonValue

from mainspring.decisions import Approve, ClientResult, Decision, Reject
from mainspring.errors import ConfigError
from mainspring.events import PendingAction
from mainspring.toolkits._a2a_card import (
    CARD_PATH,
    MAX_CARD_BYTES,
    A2ACardError,
    Auth,
    HeaderAuth,
    check_interfaces,
    origin,
    read_card,
    sanitize,
    tool_name,
)
from mainspring.tools.context import ToolContext
from mainspring.tools.define import Tool, ToolOutput
from mainspring.tools.policy import Permission, PermissionResolver, ToolPolicy

try:
    import httpx
    from a2a.client import Client, ClientConfig, ClientFactory
    from a2a.client.errors import A2AClientError
    from a2a.helpers.proto_helpers import (
        get_data_parts,
        get_text_parts,
        new_data_part,
        new_text_part,
    )
    from a2a.types.a2a_pb2 import (
        AgentCard,
        CancelTaskRequest,
        Message,
        Part,
        Role,
        SendMessageRequest,
        StreamResponse,
        TaskState,
    )
    from a2a.utils.errors import A2AError
except ImportError as exc:  # pragma: no cover - the extra is installed in tests
    raise ImportError('a2a_tool needs: pip install "mainspring[a2a]"') from exc

__all__ = [
    "CARD_PATH",
    "DETAILS_KEY",
    "MAX_CARD_BYTES",
    "MAX_DESCRIPTION_CHARS",
    "MAX_ROUNDS",
    "A2ACardError",
    "Auth",
    "a2a_tool",
    "sanitize",
]

DETAILS_KEY = "a2a_input_required"
"""The key of a paused remote task in a pending action's ``details``."""
MAX_DESCRIPTION_CHARS = 1_000
"""The tool's description (made of the card's) is cut to this."""
MAX_ROUNDS = 8
"""A call pauses on the remote's questions at most this many times."""
_NAME_CHARS = 64
_TEXT_CHARS = 2_000  # a question, a reason, a progress line
_FIELDS = 32
_FIELD_CHARS = 64
_ARTIFACTS = 64  # artifacts kept per task
_PROGRESS = 1_000  # tool_progress events per call (a flooding remote is not relayed further)
_INPUT_CHARS = 8_000  # the remote action's input shown to the approver, as JSON text

_FAILED: dict[int, str] = {
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_REJECTED: "rejected the task",
    TaskState.TASK_STATE_CANCELED: "cancelled the task",
}
_SCHEMA: dict[str, JsonValue] = {
    "type": "object",
    "properties": {
        "request": {"type": "string", "description": "What to ask the remote agent to do."}
    },
    "required": ["request"],
    "additionalProperties": False,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class _Remote:
    url: str
    card: AgentCard
    auth: Auth
    timeout: float
    max_result_chars: int
    streaming: bool
    name: str = ""

    def http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            auth=HeaderAuth(self.auth), timeout=self.timeout, follow_redirects=False
        )


async def a2a_tool(
    url: str,
    *,
    auth: Auth = None,
    name: str | None = None,
    description: str | None = None,
    permission: Permission | PermissionResolver = "confirm",
    timeout: float = 300.0,  # noqa: ASYNC109 - the tool's calls' timeout, not this one's
    max_result_chars: int = 20_000,
    streaming: bool = True,
) -> Tool:
    """The A2A agent at ``url`` as a tool (its card read now).

    Args:
        url: The agent's base URL (the card is at ``url`` + :data:`CARD_PATH`).
        auth: The host's credentials: a bearer token, headers, or a callable
            returning either (sync or async), asked for every request.
        name: The tool's name instead of ``a2a_`` + the card's (sanitized) name.
        description: The tool's description instead of the card's (sanitized).
        permission: The tool's tier: ``"confirm"`` (a remote agent may act:
            the default), ``"auto"``, or a resolver of the call's input.
        timeout: Seconds for each HTTP request and for the whole call.
        max_result_chars: The result (the artifacts' text) is cut to this.
        streaming: Stream the task's progress when the card offers streaming.

    Raises:
        A2ACardError: The card cannot be read, is too large, is not a card, or names
            a transport on another origin.
        ConfigError: ``url`` is not an http(s) URL, or ``name`` is not a tool name.
    """
    scheme, host, _port = origin(url)
    if scheme not in ("http", "https") or not host:
        raise ConfigError(f"a2a_tool needs an http(s) URL, got {url!r}")
    remote = _Remote(
        url=url,
        card=AgentCard(),
        auth=auth,
        timeout=timeout,
        max_result_chars=max_result_chars,
        streaming=streaming,
    )
    async with remote.http() as http:
        card = await read_card(http, url)
    check_interfaces(card, url)
    if not card.supported_interfaces:
        raise A2ACardError(f"the agent card at {url} offers no transport")
    remote = replace(remote, card=card, name=sanitize(card.name, _NAME_CHARS, lines=False))
    said = card.description[: MAX_DESCRIPTION_CHARS * 4]
    about = description or sanitize(
        f"Ask the remote agent {remote.name!r} (A2A): {said}"
        if said.strip()
        else f"Ask the remote agent {remote.name!r} (A2A).",
        MAX_DESCRIPTION_CHARS,
    )

    async def call(ctx: ToolContext, request: str) -> ToolOutput:
        return await _call(remote, ctx, request)

    made = Tool(
        name=tool_name(card.name),
        description=about,
        input_schema=_SCHEMA,
        policy=ToolPolicy(permission=permission, concurrency_safe=False, timeout=timeout),
        fn=call,
        ctx_param="ctx",
        is_async=True,
        meta={"a2a": url, "a2a_agent": remote.name},
    )
    return made.renamed(name) if name else made


# ---------------------------------------------------------------------- a call


@dataclass(slots=True)
class _Task:
    """What one remote task said so far."""

    task_id: str = ""
    context_id: str = ""
    state: int = TaskState.TASK_STATE_UNSPECIFIED
    artifacts: dict[str, list[str]] = field(default_factory=dict)
    said: list[str] = field(default_factory=list)  # the latest status message's text
    asked: dict[str, Any] | None = None  # a mainspring pending_action data part
    reply: str = ""  # a direct Message reply (no task)
    limit: int = 20_000  # characters of artifact text kept (beyond: dropped, the answer cut)
    progress: int = 0  # tool_progress events given so far
    sizes: dict[str, int] = field(default_factory=dict)  # characters kept per artifact
    total: int = 0
    cut: bool = False  # some text did not fit

    def keep(self, key: str, texts: list[str], *, append: bool) -> None:
        """Artifact ``key``'s text, within :attr:`limit` over all (and :data:`_ARTIFACTS`)."""
        if key not in self.artifacts and len(self.artifacts) >= _ARTIFACTS:
            return
        kept = self.artifacts.get(key, []) if append else []
        size = self.sizes.get(key, 0) if append else 0
        self.total -= self.sizes.get(key, 0)
        for text in texts:
            room = self.limit - self.total - size
            if len(text) > room:
                self.cut = True
            if room <= 0:
                break
            kept.append(text[:room])
            size += len(kept[-1])
        self.artifacts[key], self.sizes[key] = kept, size
        self.total += size


async def _call(remote: _Remote, ctx: ToolContext, request: str) -> ToolOutput:
    try:
        return await _send(remote, ctx, request)
    except _RemoteFailed as exc:
        return ToolOutput(content=f"remote agent {remote.name!r}: {exc}", is_error=True)


async def _send(remote: _Remote, ctx: ToolContext, request: str) -> ToolOutput:
    paused = _paused(ctx)
    async with remote.http() as http:
        factory = ClientFactory(ClientConfig(httpx_client=http, streaming=remote.streaming))
        client = factory.create(remote.card)
        if paused is None:
            message = _message([new_text_part(request)])
            rounds = 0
        else:
            parts = _reply_parts(paused, ctx.decision)
            message = _message(parts, task_id=paused["task_id"], context_id=paused["context_id"])
            rounds = int(paused["round"])
        task = _Task(limit=remote.max_result_chars)
        try:
            await _follow(client, message, task, ctx)
        except BaseException:
            if task.task_id and task.state not in _ENDED:
                await _cancel(client, task.task_id)
            raise
    if (
        task.state == TaskState.TASK_STATE_INPUT_REQUIRED
        or task.state == TaskState.TASK_STATE_AUTH_REQUIRED
    ):
        if rounds >= MAX_ROUNDS:
            return ToolOutput(
                content=f"remote agent {remote.name!r} asked for input more than {MAX_ROUNDS} "
                "times; stopped",
                is_error=True,
            )
        ctx.suspend(_pending(remote, ctx, task, rounds + 1))
    return _output(remote, task)


_ENDED = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_INPUT_REQUIRED,
        TaskState.TASK_STATE_AUTH_REQUIRED,
    }
)


def _message(parts: list[Part], *, task_id: str = "", context_id: str = "") -> Message:
    return Message(
        role=Role.ROLE_USER,
        message_id=str(uuid.uuid4()),
        parts=parts,
        task_id=task_id,
        context_id=context_id,
    )


async def _follow(client: Client, message: Message, task: _Task, ctx: ToolContext) -> None:
    try:
        async for event in client.send_message(SendMessageRequest(message=message)):
            _take(event, task, ctx)
    except (A2AError, A2AClientError, httpx.HTTPError) as exc:
        raise _RemoteFailed(sanitize(str(exc), _TEXT_CHARS)) from exc


async def _cancel(client: Client, task_id: str) -> None:

    with anyio.move_on_after(5, shield=True):
        try:
            await client.cancel_task(CancelTaskRequest(id=task_id))
        except Exception:
            return


class _RemoteFailed(Exception):
    """The remote could not be reached, or answered with an error."""


def _take(event: StreamResponse, task: _Task, ctx: ToolContext) -> None:
    if event.HasField("message"):
        task.reply = "\n".join(get_text_parts(event.message.parts))
        task.state = TaskState.TASK_STATE_COMPLETED
        return
    if event.HasField("task"):
        whole = event.task
        task.task_id, task.context_id = whole.id, whole.context_id
        for artifact in whole.artifacts:
            task.keep(artifact.artifact_id, get_text_parts(artifact.parts), append=False)
        _status(task, whole.status.state, whole.status.message.parts, ctx)
    elif event.HasField("status_update"):
        update = event.status_update
        task.task_id = task.task_id or update.task_id
        task.context_id = task.context_id or update.context_id
        _status(task, update.status.state, update.status.message.parts, ctx)
    elif event.HasField("artifact_update"):
        update = event.artifact_update
        texts = get_text_parts(update.artifact.parts)
        task.keep(update.artifact.artifact_id, texts, append=update.append)


def _status(task: _Task, state: int, parts: Any, ctx: ToolContext) -> None:
    task.state = state
    texts = get_text_parts(parts)
    data = [d for d in get_data_parts(parts) if isinstance(d, dict)]
    task.said = texts
    task.asked = next((d for d in data if d.get("type") == "pending_action"), None)
    if state == TaskState.TASK_STATE_WORKING:
        line = " ".join(texts) or " ".join(_event_line(d) for d in data)
        if line.strip() and task.progress < _PROGRESS:  # a bare "working" says nothing
            task.progress += 1
            ctx.progress(sanitize(line, _TEXT_CHARS, lines=False))


def _event_line(data: Mapping[str, Any]) -> str:
    """One line for a mainspring wire event in a ``working`` update (a remote tool's progress)."""
    kind, name = data.get("type"), data.get("name")
    if not isinstance(kind, str):
        return ""
    label = kind.replace("_", " ")
    message = data.get("message")
    if isinstance(message, str) and message:
        return f"{label}: {name}: {message}" if isinstance(name, str) else f"{label}: {message}"
    return f"{label}: {name}" if isinstance(name, str) else label


def _output(remote: _Remote, task: _Task) -> ToolOutput:
    pieces = ["\n".join(texts) for texts in task.artifacts.values() if texts]
    text = task.reply or "\n\n".join(p for p in pieces if p)
    if task.state in _FAILED:
        why = sanitize(" ".join(task.said), _TEXT_CHARS)
        text = f"remote agent {remote.name!r} {_FAILED[task.state]}" + (f": {why}" if why else "")
        return ToolOutput(content=text, is_error=True)
    if task.state != TaskState.TASK_STATE_COMPLETED:
        state = TaskState.Name(task.state) if task.state in TaskState.values() else task.state
        return ToolOutput(
            content=f"remote agent {remote.name!r} stopped with its task in {state}", is_error=True
        )
    text = sanitize(text or " ".join(task.said), remote.max_result_chars + 1)
    if task.cut or len(text) > remote.max_result_chars:
        text = text[: remote.max_result_chars] + "\n[cut: the remote's answer was longer]"
    return ToolOutput(content=text)


# ------------------------------------------------------------ input-required


def _pending(remote: _Remote, ctx: ToolContext, task: _Task, number: int) -> PendingAction:
    question = sanitize(" ".join(task.said), _TEXT_CHARS) or "the remote agent needs input"
    asked = task.asked or {}
    approval_id = asked.get("approval_id")
    where: dict[str, JsonValue] = {
        "url": remote.url,
        "agent": remote.name,
        "task_id": task.task_id[:200],
        "context_id": task.context_id[:200],
        "approval_id": approval_id[:4_000] if isinstance(approval_id, str) else "",
        "round": number,
    }
    fields = _fields(asked.get("modifiable_fields")) if asked else ("answer",)
    remote_name = asked.get("name")
    shown_input = _shown_input(asked.get("input"))
    amount = asked.get("amount_usd")
    return PendingAction(
        attempt_id=f"a2a:{ctx.tool_use_id}:{number}"[:400],
        tool_use_id=ctx.tool_use_id,
        turn_index=ctx.turn_index,
        name=sanitize(remote_name, _NAME_CHARS, lines=False)
        if isinstance(remote_name, str) and remote_name
        else ctx.tool_name,
        input=shown_input,
        description=f"remote agent {remote.name!r} asks",
        modifiable_fields=fields,
        reason=question,
        amount_usd=float(amount) if isinstance(amount, int | float) and amount >= 0 else None,
        details={DETAILS_KEY: where},
    )


def _fields(raw: object) -> tuple[str, ...]:
    if not isinstance(raw, list):
        return ()
    names = [sanitize(f, _FIELD_CHARS, lines=False) for f in raw[:_FIELDS] if isinstance(f, str)]
    return tuple(dict.fromkeys(n for n in names if n))


def _shown_input(raw: object) -> dict[str, JsonValue]:
    if not isinstance(raw, dict):
        return {}
    text = json.dumps(raw, default=str)
    if len(text) > _INPUT_CHARS:
        return {"note": f"the remote action's input is {len(text):,} characters; not shown"}
    shown: dict[str, JsonValue] = json.loads(text)
    return shown


def _paused(ctx: ToolContext) -> dict[str, Any] | None:
    """Where this call's remote task waits, as the session kept it (any process)."""
    nested = ctx.suspended_on
    if nested is None or DETAILS_KEY not in nested.details:
        return None
    where = nested.details[DETAILS_KEY]
    if not (
        isinstance(where, dict)
        and isinstance(where.get("task_id"), str)
        and isinstance(where.get("context_id"), str)
        and isinstance(where.get("round"), int)
    ):
        raise _RemoteFailed("the paused A2A task is unreadable")
    return {**where, "fields": nested.modifiable_fields}


def _reply_parts(paused: Mapping[str, Any], decision: Decision | None) -> list[Part]:
    """The next message on the paused task: the decision, in the remote's terms."""
    if decision is None:
        raise _RemoteFailed("the paused A2A task was resumed without a decision")
    approval_id = paused.get("approval_id") or ""
    if approval_id:  # a mainspring server's approval: its decision data part
        data: dict[str, Any]
        match decision:
            case Approve():
                data = {"decision": "approve", "approval_id": approval_id}
                if decision.edits:
                    data["edits"] = dict(decision.edits)
            case Reject():
                data = {"decision": "reject", "approval_id": approval_id, "reason": decision.reason}
            case ClientResult():
                data = {
                    "decision": "client_result",
                    "approval_id": approval_id,
                    "content": decision.content,
                    "is_error": decision.is_error,
                }
        return [new_data_part(data)]
    match decision:
        case Approve(edits={"answer": str() as answer}):
            return [new_text_part(answer)]
        case Approve():
            return [new_text_part("yes")]
        case Reject():
            return [new_text_part("no")]
        case ClientResult():
            return [new_text_part(decision.content)]
    raise _RemoteFailed(f"not a decision: {decision!r}")  # pragma: no cover
