"""Remote engines: an engine's exported functions served over signed HTTP, and called.

**Serving.** :func:`engine_routes` gives the Starlette routes of an engine
(mount them in any Starlette app; ``mainspring serve`` mounts them too):

```
GET  /info                     what the caller may see (EngineInfo.to_dict())
POST /tools/{name}/call        {"arguments": {...}}         -> a call result
POST /agents/{name}/run        {"input": "...", "scope"?}   -> a run result
POST /scopes                   {}                           -> {"scope": id}
DELETE /scopes/{scope}                                      -> {"closed": id}
POST /decisions/{attempt_id}   {"decision": {...}}          -> a call or run result
```

A request signed by a trusted key (:mod:`mainspring.engine.signing`) is made
by ``Caller(key_id, kind="engine")``; a request with no signature headers is
anonymous; a request whose signature fails is refused (401) whatever the
engine's visibility. The engine's management policy then applies to that
caller (403 when it refuses). ``metadata`` in a body is passed on as request
metadata, never as identity. A ``POST`` that is neither JSON nor signed is
refused (415): a web page cannot make a browser post a form to it.

A result is ``{"status": "done", ...}`` or ``{"status": "pending",
"pending": {pending_action event}}``; a decision is ``{"kind": "approved",
"edits": {}}``, ``{"kind": "rejected", "reason": "..."}`` or ``{"kind":
"client_result", "content": "...", "is_error": false}``. Errors are
``{"error": code, "message": ...}`` (``reason`` too for a refused signature).

**Calling.** :meth:`Engine.register_remote` fetches a remote's information
and adds its exported tools as ``RT_{handle}_{tool}`` and its exported agents
as ``RA_{handle}_{agent}`` (input ``{"input": str}``) to the local engine;
they are engine tools like any other (unexported unless asked, judged by the
local rules). A remote call that pauses for the remote's approval pauses the
local call or turn with the remote's action as ``nested``; deciding it sends
the decision to the remote engine, signed.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import JsonValue

from mainspring._http_guard import CROSS_SITE_MESSAGE, is_cross_site_simple
from mainspring.codec import event_from_dict, event_to_dict
from mainspring.decisions import Approve, ClientResult, Decision, Reject, decision_kind
from mainspring.engine.core import AgentRun, Engine, ToolCallResult
from mainspring.engine.signing import (
    KEY_HEADER,
    NONCE_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    SigningKey,
    Verifier,
)
from mainspring.errors import (
    AccessDenied,
    ApprovalError,
    RemoteEngineError,
    SessionBusy,
    SignatureRejected,
    StoreError,
    UnknownAttempt,
    WireFormatError,
)
from mainspring.events import PendingAction
from mainspring.principals import ANONYMOUS, Caller
from mainspring.tools.context import ToolContext
from mainspring.tools.define import Tool, ToolOutput
from mainspring.tools.policy import ToolPolicy

try:
    import httpx
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError('remote engines need: pip install "mainspring[remote]"') from exc

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

__all__ = [
    "RemoteEngine",
    "decision_from_dict",
    "decision_to_dict",
    "engine_routes",
    "remote_tools",
    "result_to_dict",
]

MAX_BODY = 1 << 20
"""Bytes a request body may have."""


def decision_to_dict(decision: Decision) -> dict[str, JsonValue]:
    """A decision's wire form."""
    if isinstance(decision, Approve):
        return {"kind": "approved", "edits": dict(decision.edits)}
    if isinstance(decision, Reject):
        return {"kind": "rejected", "reason": decision.reason}
    return {
        "kind": decision_kind(decision),
        "content": decision.content,
        "is_error": decision.is_error,
    }


def decision_from_dict(data: object) -> Decision:
    """Parse :func:`decision_to_dict` output.

    Raises:
        WireFormatError: It is not a decision.
    """
    if not isinstance(data, dict):
        raise WireFormatError("a decision is a JSON object")
    kind = data.get("kind")
    if kind == "approved":
        edits = data.get("edits", {})
        if not isinstance(edits, dict):
            raise WireFormatError("an approval's edits are a JSON object")
        return Approve(edits=edits)
    if kind == "rejected":
        reason = data.get("reason", "The user declined.")
        if not isinstance(reason, str):
            raise WireFormatError("a rejection's reason is a string")
        return Reject(reason)
    if kind == "client_result":
        content, is_error = data.get("content"), data.get("is_error", False)
        if not isinstance(content, str) or not isinstance(is_error, bool):
            raise WireFormatError("a client result has a string content and a boolean is_error")
        return ClientResult(content=content, is_error=is_error)
    raise WireFormatError(f"a decision's kind is approved, rejected or client_result, not {kind!r}")


def result_to_dict(result: AgentRun | ToolCallResult) -> dict[str, JsonValue]:
    """A call's or run's wire form."""
    pending = None if result.pending is None else event_to_dict(result.pending)
    status = "pending" if pending is not None else "done"
    if isinstance(result, ToolCallResult):
        return {
            "kind": "tool",
            "status": status,
            "name": result.name,
            "content": result.content,
            "is_error": result.is_error,
            "ran": result.ran,
            "pending": pending,
        }
    return {
        "kind": "agent",
        "status": status,
        "name": result.agent,
        "text": result.text,
        "stop_reason": result.stop_reason,
        "error": result.error,
        "cost_usd": result.cost_usd,
        "pending": pending,
    }


# --------------------------------------------------------------------- serving


def _error(status: int, code: str, message: str, **extra: str) -> JSONResponse:
    return JSONResponse({"error": code, "message": message, **extra}, status_code=status)


_Handler = Callable[[Caller, dict[str, Any], Request], Awaitable[JSONResponse]]


def _endpoint(
    handler: _Handler, verifier: Verifier, max_body: int
) -> Callable[[Request], Awaitable[JSONResponse]]:
    """Read the body (bounded), verify the caller, run ``handler``, map errors to statuses."""

    async def run(request: Request) -> JSONResponse:
        if is_cross_site_simple(request.method, request.headers):  # mounted anywhere: still JSON
            return _error(415, "cross_site_request", CROSS_SITE_MESSAGE)
        buffer = bytearray()
        async for chunk in request.stream():
            buffer += chunk
            if len(buffer) > max_body:
                return _error(413, "too_large", f"the body is over {max_body} bytes")
        body = bytes(buffer)
        try:
            caller = await _caller(verifier, request, body)
            data: object = json.loads(body) if body else {}
            if not isinstance(data, dict):
                raise WireFormatError("the body is a JSON object")
            return await handler(caller, data, request)
        except SignatureRejected as exc:
            return _error(401, "signature_rejected", str(exc), reason=exc.reason)
        except AccessDenied as exc:
            return _error(403, "access_denied", str(exc))
        except UnknownAttempt as exc:
            return _error(404, "unknown_attempt", str(exc))
        except (ApprovalError, SessionBusy) as exc:  # (CallerBusy is a SessionBusy)
            return _error(409, type(exc).__name__, str(exc))
        except StoreError as exc:  # (before ValueError: nothing was admitted or parked)
            return _error(503, "store_unavailable", str(exc))
        except (ValueError, WireFormatError) as exc:
            return _error(400, "bad_request", str(exc))

    return run


def engine_routes(
    engine: Engine,
    keys: Mapping[str, Ed25519PublicKey] | Verifier,
    *,
    max_body: int = MAX_BODY,
) -> list[Route]:
    """The routes that serve ``engine`` to other engines (``keys``: trusted public keys by id)."""
    verifier = keys if isinstance(keys, Verifier) else Verifier(keys)

    def endpoint(handler: _Handler) -> Callable[[Request], Awaitable[JSONResponse]]:
        return _endpoint(handler, verifier, max_body)

    async def info(caller: Caller, data: dict[str, Any], request: Request) -> JSONResponse:
        return JSONResponse(engine.information(caller).to_dict())

    async def call_tool(caller: Caller, data: dict[str, Any], request: Request) -> JSONResponse:
        arguments = data.get("arguments", {})
        if not isinstance(arguments, dict):
            raise WireFormatError("arguments are a JSON object")
        name = request.path_params["name"]
        result = await engine.tool_call(caller, name, arguments, metadata=_metadata(data))
        return JSONResponse(result_to_dict(result))

    async def run_agent(caller: Caller, data: dict[str, Any], request: Request) -> JSONResponse:
        text, scope = data.get("input"), data.get("scope")
        if not isinstance(text, str) or not (scope is None or isinstance(scope, str)):
            raise WireFormatError("input is a string (and scope, when given, a string)")
        result = await engine.agent_run(
            caller, text, agent=request.path_params["name"], scope=scope, metadata=_metadata(data)
        )
        return JSONResponse(result_to_dict(result))

    async def new_scope(caller: Caller, data: dict[str, Any], request: Request) -> JSONResponse:
        return JSONResponse({"scope": await engine.new_scope(caller)})

    async def close_scope(caller: Caller, data: dict[str, Any], request: Request) -> JSONResponse:
        scope = request.path_params["scope"]
        await engine.close_scope(caller, scope)
        return JSONResponse({"closed": scope})

    async def decide(caller: Caller, data: dict[str, Any], request: Request) -> JSONResponse:
        decision = decision_from_dict(data.get("decision"))
        result = await engine.decide(caller, request.path_params["attempt_id"], decision)
        return JSONResponse(result_to_dict(result))

    return [
        Route("/info", endpoint(info), methods=["GET"]),
        Route("/tools/{name}/call", endpoint(call_tool), methods=["POST"]),
        Route("/agents/{name}/run", endpoint(run_agent), methods=["POST"]),
        Route("/scopes", endpoint(new_scope), methods=["POST"]),
        Route("/scopes/{scope}", endpoint(close_scope), methods=["DELETE"]),
        Route("/decisions/{attempt_id}", endpoint(decide), methods=["POST"]),
    ]


async def _caller(verifier: Verifier, request: Request, body: bytes) -> Caller:
    headers = request.headers
    signed = (KEY_HEADER, TIMESTAMP_HEADER, NONCE_HEADER, SIGNATURE_HEADER)
    if not any(h in headers for h in signed):
        return ANONYMOUS
    path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    key_id = await verifier.admit(request.method, path, body, dict(headers))
    return Caller(key_id, kind="engine")


def _metadata(data: dict[str, Any]) -> dict[str, str]:
    meta = data.get("metadata", {})
    if not isinstance(meta, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in meta.items()
    ):
        raise WireFormatError("metadata is an object of strings")
    return meta


# --------------------------------------------------------------------- calling


class RemoteEngine:
    """A client of a served engine, signing every request with ``key``."""

    def __init__(
        self,
        handle: str,
        url: str,
        key: SigningKey,
        *,
        client: httpx.AsyncClient | None = None,
        timeout: float = 60.0,
    ) -> None:
        """``url`` is where :func:`engine_routes` are mounted (``http://host:port/engine``)."""
        self.handle = handle
        self.url = url.rstrip("/")
        self.key = key
        self._client = client
        self._timeout = timeout

    async def _request(
        self, method: str, route: str, body: dict[str, JsonValue] | None = None
    ) -> dict[str, Any]:
        content = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
        path = urlsplit(self.url).path + route
        headers = self.key.sign(method, path, content)
        if content:
            headers["content-type"] = "application/json"
        client = self._client or httpx.AsyncClient(timeout=self._timeout)
        try:
            response = await client.request(
                method, self.url + route, content=content, headers=headers
            )
        except httpx.HTTPError as exc:
            raise RemoteEngineError(
                f"remote engine {self.handle!r} is unreachable: {exc}", handle=self.handle
            ) from exc
        finally:
            if self._client is None:
                await client.aclose()
        try:
            data = response.json()
        except ValueError:
            data = None
        if response.status_code != 200 or not isinstance(data, dict):
            message = data.get("message", "") if isinstance(data, dict) else response.text[:200]
            raise RemoteEngineError(
                f"remote engine {self.handle!r} answered {response.status_code}: {message}",
                handle=self.handle,
                status=response.status_code,
            )
        return data

    async def info(self) -> dict[str, Any]:
        """The remote's information as this engine's key may see it."""
        return await self._request("GET", "/info")

    async def call_tool(self, name: str, arguments: dict[str, JsonValue]) -> dict[str, Any]:
        """Call an exported tool; a call result."""
        return await self._request("POST", f"/tools/{name}/call", {"arguments": arguments})

    async def run_agent(self, name: str, text: str) -> dict[str, Any]:
        """Run an exported agent; a run result."""
        return await self._request("POST", f"/agents/{name}/run", {"input": text})

    async def decide(self, attempt_id: str, decision: Decision) -> dict[str, Any]:
        """Decide a paused remote call or run; its next result."""
        body: dict[str, JsonValue] = {"decision": decision_to_dict(decision)}
        return await self._request("POST", f"/decisions/{attempt_id}", body)


def pending_of(result: dict[str, Any], handle: str) -> PendingAction | None:
    """The action a remote result waits on, if it does.

    Raises:
        RemoteEngineError: The result's pending action is malformed.
    """
    data = result.get("pending")
    if data is None:
        return None
    try:
        event = event_from_dict(data)
    except ValueError as exc:
        raise RemoteEngineError(
            f"remote engine {handle!r} sent a bad action: {exc}", handle=handle
        ) from None
    if not isinstance(event, PendingAction):
        raise RemoteEngineError(f"remote engine {handle!r} sent a non-action", handle=handle)
    return event


async def remote_tools(remote: RemoteEngine) -> list[Tool]:
    """The remote's exported functions as local tools (``RT_…`` and ``RA_…``)."""
    info = await remote.info()
    tools: list[Tool] = []
    for spec in info.get("tools", []):
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise RemoteEngineError(
                f"remote engine {remote.handle!r} sent a bad tool", handle=remote.handle
            )
        schema = spec.get("input_schema")
        tools.append(
            Tool(
                name=f"RT_{remote.handle}_{spec['name']}",
                description=str(spec.get("description", "")),
                input_schema=schema if isinstance(schema, dict) else {"type": "object"},
                policy=ToolPolicy(read_only=spec.get("read_only") is True, concurrency_safe=False),
                fn=_remote_fn(remote, spec["name"], agent=False),
                ctx_param="_ctx",
                is_async=True,
                meta={"remote": remote.handle, "remote_tool": spec["name"]},
            )
        )
    for spec in info.get("agents", []):
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise RemoteEngineError(
                f"remote engine {remote.handle!r} sent a bad agent", handle=remote.handle
            )
        tools.append(
            Tool(
                name=f"RA_{remote.handle}_{spec['name']}",
                description=str(spec.get("description", "")) or f"Ask agent {spec['name']}.",
                input_schema=_AGENT_SCHEMA,
                policy=ToolPolicy(read_only=True, concurrency_safe=False),
                fn=_remote_fn(remote, spec["name"], agent=True),
                ctx_param="_ctx",
                is_async=True,
                meta={"remote": remote.handle, "remote_agent": spec["name"]},
            )
        )
    return tools


_AGENT_SCHEMA: dict[str, JsonValue] = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "What to ask the agent."}},
    "required": ["input"],
    "additionalProperties": False,
}


def _remote_fn(
    remote: RemoteEngine, name: str, *, agent: bool
) -> Callable[..., Awaitable[ToolOutput]]:
    async def call(_ctx: ToolContext, **arguments: JsonValue) -> ToolOutput:
        waiting = f"remote-attempt:{_ctx.session_id}:{_ctx.tool_use_id}"
        if _ctx.decision is not None:
            attempt = _ctx.component_cache.pop(waiting, None)
            if not isinstance(attempt, str):
                return ToolOutput(content="no remote action waits on this decision", is_error=True)
            result = await remote.decide(attempt, _ctx.decision)
        elif agent:
            text = arguments.get("input")
            result = await remote.run_agent(name, text if isinstance(text, str) else "")
        else:
            result = await remote.call_tool(name, dict(arguments))
        pending = pending_of(result, remote.handle)
        if pending is not None:
            _ctx.component_cache[waiting] = pending.attempt_id
            _ctx.suspend(pending)
        if result.get("kind") == "agent":
            ok = result.get("stop_reason") == "end_turn"
            text = str(result.get("text", ""))
            if ok:
                return ToolOutput(content=text)
            why = result.get("error") or f"stopped: {result.get('stop_reason')}"
            return ToolOutput(content=f"remote agent {name!r} {why}. {text}".strip(), is_error=True)
        return ToolOutput(
            content=str(result.get("content", "")), is_error=result.get("is_error") is True
        )

    return call
