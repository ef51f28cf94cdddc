"""The doors of the fleet property test: one turn or one decision through each protocol.

Each door posts to one worker and reads the whole stream, returning what a
client saw: the status, the terminal events counted, whether the stream
ended (or the connection broke: a killed worker), and the REST stream's last
event id for a reconnect. Beside them: the signed engine route, the direct
call in process (:class:`Direct`) and the MCP server's calls and approval
retries. A door never judges; the test does.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from inspect import iscoroutinefunction
from typing import Any, Literal

import anyio
import anyio.lowlevel
import httpx
from ag_ui.core import ResumeEntry, RunAgentInput

Door = Literal["rest", "aisdk", "agui", "a2a"]
DOORS: tuple[Door, ...] = ("rest", "aisdk", "agui")
"""The doors a turn or a decision on a session's pending action goes through."""
TURN_DOORS: tuple[Door, ...] = (*DOORS, "a2a")
"""The doors a conversation's turn goes through (an A2A context is its own session)."""
Kind = Literal["approve", "reject", "client"]

REST_TERMINALS = frozenset({"turn_complete", "error"})
AISDK_TERMINALS = frozenset({"finish", "error"})
AGUI_TERMINALS = frozenset({"RUN_FINISHED", "RUN_ERROR"})
A2A_TERMINALS = frozenset(
    {
        "TASK_STATE_COMPLETED",
        "TASK_STATE_CANCELED",
        "TASK_STATE_FAILED",
        "TASK_STATE_REJECTED",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_AUTH_REQUIRED",
        "error",
    }
)
"""A2A task states a stream ends on (its last status), and a JSON-RPC error."""
A2A_INTERNAL_ERROR = -32603
A2A_TASK_NOT_FOUND = -32001
CLIENT_CONTENT = "signed by the wallet"


@dataclass
class Seen:
    """What one request's client saw."""

    door: Door
    url: str
    status: int | None = None
    """None: no answer (the worker was gone, or died before answering)."""
    kinds: list[str] = field(default_factory=list)
    """The stream's event kinds in order (REST event names, chunk or event types)."""
    ended: bool = False
    """The stream reached its end (the connection did not break)."""
    last_id: str | None = None
    streamed: bool = True
    """An SSE stream (a signed engine request is answered with one JSON body)."""
    last_data: str = ""
    """The stream's last (REST) or terminal event's data, as sent."""
    body: str = ""
    task_id: str = ""
    """The A2A task the stream reported on."""
    error_code: int | None = None
    """The JSON-RPC error code an A2A stream ended with."""

    @property
    def terminals(self) -> int:
        """How many terminal events the stream carried."""
        ends = {
            "rest": REST_TERMINALS,
            "aisdk": AISDK_TERMINALS,
            "agui": AGUI_TERMINALS,
            "a2a": A2A_TERMINALS,
        }
        return sum(kind in ends[self.door] for kind in self.kinds)

    @property
    def last_is_terminal(self) -> bool:
        """The last event is a terminal one."""
        return self.terminals > 0 and self.kinds[-1] in (
            REST_TERMINALS | AISDK_TERMINALS | AGUI_TERMINALS | A2A_TERMINALS
        )


def _new_id() -> str:
    return uuid.uuid4().hex


async def _read(seen: Seen, response: httpx.Response) -> None:
    seen.status = response.status_code
    if response.status_code != 200:
        seen.body = (await response.aread()).decode(errors="replace")
        seen.ended = True
        return
    if seen.door == "a2a" and response.headers.get("content-type", "").startswith(
        "application/json"
    ):  # a JSON-RPC error before any stream began: one answer, not a stream
        seen.body = (await response.aread()).decode(errors="replace")
        _a2a_event(seen, seen.body)
        seen.ended = True
        return
    async for line in response.aiter_lines():
        if line.startswith("id: "):
            seen.last_id = line[4:]
        elif line.startswith("event: ") and seen.door == "rest":
            seen.kinds.append(line[7:])
        elif line.startswith("data: ") and seen.door == "rest":
            seen.last_data = line[6:]
        elif line.startswith("data: ") and seen.door == "a2a":
            _a2a_event(seen, line[6:])
        elif line.startswith("data: ") and seen.door != "rest":
            data = line[6:]
            if data == "[DONE]":
                continue
            kind = str(json.loads(data).get("type"))
            seen.kinds.append(kind)
            if kind in AISDK_TERMINALS | AGUI_TERMINALS:
                seen.last_data = data
    seen.ended = True


def _a2a_event(seen: Seen, data: str) -> None:
    """One JSON-RPC answer of an A2A stream: its kind is the task state it reports."""
    answer = json.loads(data)
    if "error" in answer:
        seen.kinds.append("error")
        seen.last_data = data
        seen.error_code = answer["error"].get("code")
        if answer["error"].get("code") == A2A_INTERNAL_ERROR:  # what a 500 is in JSON-RPC
            seen.status, seen.body = 500, data
        return
    result = answer.get("result", {})
    update = result.get("statusUpdate") or result.get("task")
    if update is None:
        seen.kinds.append("artifact")
        return
    seen.task_id = str(update.get("taskId") or update.get("id") or seen.task_id)
    kind = str(update.get("status", {}).get("state"))
    seen.kinds.append(kind)
    if kind in A2A_TERMINALS:
        seen.last_data = data


async def stream(
    client: httpx.AsyncClient,
    seen: Seen,
    method: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> Seen:
    """Send the request and read its stream to the end (or to a broken connection)."""
    headers = headers or ({"Last-Event-ID": body} if method == "GET" and body else {})
    try:
        async with client.stream(
            method, seen.url, json=None if method == "GET" else body, headers=headers
        ) as response:
            await _read(seen, response)
    except (httpx.TransportError, httpx.StreamError):
        seen.ended = False
    return seen


def _agui(thread_id: str, **fields: Any) -> dict[str, Any]:
    body = RunAgentInput(
        thread_id=thread_id,
        run_id=_new_id(),
        state={},
        tools=[],
        context=[],
        forwarded_props={},
        **fields,
    )
    dumped: dict[str, Any] = body.model_dump(mode="json", by_alias=True)
    return dumped


async def send(client: httpx.AsyncClient, base: str, door: Door, sid: str, text: str) -> Seen:
    """A user message through ``door``: a new turn of session ``sid``."""
    if door == "rest":
        seen = Seen(door, f"{base}/v1/sessions/{sid}/messages")
        return await stream(client, seen, "POST", {"message": text})
    if door == "aisdk":
        message = {"id": _new_id(), "role": "user", "parts": [{"type": "text", "text": text}]}
        return await stream(
            client, Seen(door, f"{base}/v1/aisdk/chat"), "POST", {"id": sid, "messages": [message]}
        )
    user = {"id": _new_id(), "role": "user", "content": text}
    return await stream(client, Seen(door, f"{base}/v1/agui"), "POST", _agui(sid, messages=[user]))


async def send_a2a(client: httpx.AsyncClient, base: str, context: str, text: str) -> Seen:
    """A user message to A2A context ``context`` (``SendStreamingMessage``): a new task."""
    return await _a2a_message(client, base, context, {"parts": [{"text": text}]})


async def decide_a2a(
    client: httpx.AsyncClient,
    base: str,
    context: str,
    task_id: str,
    pending: dict[str, Any],
    kind: Kind,
) -> Seen:
    """A decision on ``pending`` as the reply to A2A task ``task_id`` (a data part)."""
    decision: dict[str, Any] = {"decision": "approve", "approval_id": pending["approval_id"]}
    if kind == "reject":
        decision |= {"decision": "reject", "reason": "no"}
    elif kind == "client":
        decision |= {"decision": "client_result", "content": CLIENT_CONTENT, "is_error": False}
    fields = {"taskId": task_id, "parts": [{"data": decision}]}
    return await _a2a_message(client, base, context, fields)


async def _a2a_message(
    client: httpx.AsyncClient, base: str, context: str, fields: dict[str, Any]
) -> Seen:
    message = {"messageId": _new_id(), "role": "ROLE_USER", "contextId": context, **fields}
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": message},
    }
    headers = {"A2A-Version": "1.0"}
    return await stream(client, Seen("a2a", f"{base}/a2a"), "POST", body, headers)


async def decide(
    client: httpx.AsyncClient, base: str, door: Door, sid: str, pending: dict[str, Any], kind: Kind
) -> Seen:
    """A decision on ``pending`` (as ``GET …/pending`` gave it) through ``door``."""
    approval_id, call_id = str(pending["approval_id"]), str(pending["tool_use_id"])
    if door == "rest":
        body: dict[str, Any] = {"decision": "approve"}
        if kind == "reject":
            body = {"decision": "reject", "reason": "no"}
        elif kind == "client":
            body = {"decision": "client_result", "content": CLIENT_CONTENT}
        url = f"{base}/v1/sessions/{sid}/decisions/{approval_id}"
        return await stream(client, Seen(door, url), "POST", body)
    if door == "aisdk":
        part: dict[str, Any] = {"type": f"tool-{pending['name']}", "toolCallId": call_id}
        if kind == "client":
            part |= {"state": "output-available", "output": CLIENT_CONTENT}
        else:
            approval = {"id": approval_id, "approved": kind == "approve", "reason": "no"}
            part |= {"state": "approval-responded", "approval": approval}
        message = {"id": _new_id(), "role": "assistant", "parts": [part]}
        return await stream(
            client, Seen(door, f"{base}/v1/aisdk/chat"), "POST", {"id": sid, "messages": [message]}
        )
    if kind == "client":
        result = {"id": _new_id(), "role": "tool", "toolCallId": call_id, "content": CLIENT_CONTENT}
        body = _agui(sid, messages=[result])
    else:
        entry = ResumeEntry(
            interrupt_id=approval_id,
            status="resolved",
            payload={"approved": kind == "approve", "reason": "no"},
        )
        body = _agui(sid, messages=[], resume=[entry])
    return await stream(client, Seen(door, f"{base}/v1/agui"), "POST", body)


async def follow(client: httpx.AsyncClient, base: str, sid: str, last_id: str | None) -> Seen:
    """The REST stream of ``sid`` followed (from ``last_id``), on this worker or another."""
    return await stream(client, Seen("rest", f"{base}/v1/sessions/{sid}/stream"), "GET", last_id)


# ------------------------------------------------------- the signed engine route


@dataclass
class Signed:
    """One signed engine request, kept whole so the test can replay it byte for byte."""

    path: str
    content: bytes
    headers: dict[str, str]


def signed(key: Any, path: str, body: dict[str, Any]) -> Signed:
    """``body`` posted to ``path`` (under ``/v1/engine``), signed by ``key``."""
    content = json.dumps(body, separators=(",", ":")).encode()
    headers = {**key.sign("POST", path, content), "content-type": "application/json"}
    return Signed(path, content, headers)


async def post_signed(client: httpx.AsyncClient, base: str, request: Signed) -> Seen:
    """Send a signed request to one worker; ``body`` is its JSON answer."""
    seen = Seen("rest", f"{base}{request.path}", streamed=False)
    try:
        response = await client.post(seen.url, content=request.content, headers=request.headers)
    except httpx.TransportError:
        return seen
    seen.status, seen.body, seen.ended = response.status_code, response.text, True
    return seen


# ----------------------------------------------------------- the direct call


_SCOPE: ContextVar[anyio.CancelScope | None] = ContextVar("fleet_direct_scope", default=None)
"""The cancel scope of the direct call or decision in progress (in this task)."""


@dataclass
class Direct:
    """The direct-call door: ``Engine.tool_call`` in this process, on the fleet's stores.

    The same engine (name, tools, rules) as the workers serve, its paused calls
    and spend in the stores they share, called as the same caller the signed
    requests are: a call paused here is decided on a worker and the other way
    round, and the auto-spend cap counts both doors. Its answers are what the
    signed route would have answered (``body``: the route's JSON).

    :meth:`arm` cancels the call or decision that makes the Nth store operation
    (counted over this door's calls and decisions) just before it, or just
    after it returns: its caller gave up there. Such a request has no status
    and ``body`` ``"cancelled"``.
    """

    engine: Any
    caller: Any
    left: int = 0
    after: bool = False

    def arm(self, operations: int, *, after: bool = False) -> None:
        """Cancel the call or decision before (or after) the Nth store operation (0: never)."""
        self.left, self.after = operations, after

    def switch(self, method: Any) -> Any:
        """``method`` (a store operation), passing this door's cancel switch first."""

        async def run(*args: Any, **kwargs: Any) -> Any:
            scope = _SCOPE.get()
            trip = scope is not None and self.left > 0 and self.left == 1
            if scope is not None and self.left > 0:
                self.left -= 1
            if trip and not self.after:
                assert scope is not None
                scope.cancel()
                await anyio.lowlevel.checkpoint()  # the cancellation lands here
            answer = await method(*args, **kwargs)
            if trip and self.after:
                assert scope is not None
                scope.cancel()
                await anyio.lowlevel.checkpoint()  # (the operation is done: it stays done)
            return answer

        return run

    async def _cancellable(self, seen: Seen, act: Any) -> Seen:
        with anyio.CancelScope() as scope:
            token = _SCOPE.set(scope)
            try:
                await act(seen)
            finally:
                _SCOPE.reset(token)
        if scope.cancelled_caught:
            seen.status, seen.body, seen.ended = None, "cancelled", False
        return seen

    async def call(self, tool: str, arguments: dict[str, Any]) -> Seen:
        """Call ``tool`` directly."""
        from mainspring.engine.remote import result_to_dict

        async def act(seen: Seen) -> None:
            result = await self.engine.tool_call(self.caller, tool, arguments)
            seen.status, seen.body, seen.ended = 200, json.dumps(result_to_dict(result)), True

        seen = Seen("rest", f"direct:/v1/engine/tools/{tool}/call", streamed=False)
        return await self._cancellable(seen, act)

    async def decide(self, attempt: str, approve: bool) -> Seen:
        """Decide a paused call (of any door): 200, or 404/409 as the route would say."""
        from mainspring.decisions import Approve, Reject
        from mainspring.engine.remote import result_to_dict
        from mainspring.errors import DecisionConflict, UnknownAttempt

        async def act(seen: Seen) -> None:
            decision = Approve() if approve else Reject("no")
            try:
                result = await self.engine.decide(self.caller, attempt, decision)
            except UnknownAttempt as exc:  # another door took it
                seen.status, seen.body = 404, str(exc)
            except DecisionConflict as exc:
                seen.status, seen.body = 409, str(exc)
            else:
                seen.status, seen.body = 200, json.dumps(result_to_dict(result))
            seen.ended = True

        seen = Seen("rest", f"direct:/v1/engine/decisions/{attempt}", streamed=False)
        return await self._cancellable(seen, act)

    async def waiting(self) -> list[dict[str, Any]]:
        """The caller's paused calls, on every worker: each ``{"ref", "attempt_id"}``."""
        actions = await self.engine.pending(self.caller)
        return [{"ref": str(a.input.get("ref")), "attempt_id": a.attempt_id} for a in actions]


@asynccontextmanager
async def direct(fields: dict[str, Any], key_id: str) -> AsyncIterator[Direct]:
    """The fleet's engine in this process on the stores of ``fields``, called as ``key_id``."""
    from mainspring.principals import Caller
    from mainspring.stores.records import shared_records
    from mainspring.stores.urls import open_stores
    from tests.server.fleet_agent import engine

    stores = await open_stores(
        fields.get("store"),
        sessions=fields.get("sessions"),
        checkpoints=fields.get("checkpoints"),
        locks=fields.get("locks"),
    )
    try:
        served = engine()
        door = Direct(served, Caller(key_id, kind="engine"))
        for store in (stores.sessions, stores.locks):
            for name in dir(store) if store is not None else ():
                method = getattr(store, name)
                if not name.startswith("_") and name != "aclose" and iscoroutinefunction(method):
                    setattr(store, name, door.switch(method))
        records = shared_records(stores.sessions, stores.locks)
        assert records is not None
        served.share(records)  # as the server does with its engine
        served.spend_store = stores.sessions
        yield door
    finally:
        await stores.aclose()


# ------------------------------------------------------------- the MCP server


def mcp_text(result: Any) -> str:
    """The text of an MCP tool result."""
    import mcp_types as mt

    return "".join(c.text for c in result.content if isinstance(c, mt.TextContent))


async def mcp_call(session: Any, tool: str, arguments: dict[str, Any]) -> str | None:
    """Call ``tool``: ``None`` when it ran, the request state when it needs a decision."""
    import mcp_types as mt

    first = await session.call_tool(tool, arguments, allow_input_required=True)
    if isinstance(first, mt.InputRequiredResult):
        assert first.request_state is not None
        return str(first.request_state)
    assert not first.is_error, mcp_text(first)
    return None


async def mcp_retry(
    session: Any, tool: str, arguments: dict[str, Any], state: str, approve: bool
) -> str:
    """The retry of an ``input_required`` round with the user's answer: its text."""
    import mcp_types as mt

    answer = mt.ElicitResult(action="accept", content={"approve": approve})
    result = await session.call_tool(
        tool, arguments, input_responses={"mainspring_approval": answer}, request_state=state
    )
    return mcp_text(result)
