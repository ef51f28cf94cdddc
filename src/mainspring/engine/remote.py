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
the decision to the remote engine, signed. The client lives in
:mod:`mainspring.engine.client` (what the engine itself imports: serving needs the
engine, the engine needs only the client); its names are exported here too.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from mainspring._http_guard import CROSS_SITE_MESSAGE, is_cross_site_simple
from mainspring.codec import event_to_dict
from mainspring.engine.client import (
    RemoteEngine,
    decision_from_dict,
    decision_to_dict,
    remote_tools,
)
from mainspring.engine.results import AgentRun, ToolCallResult
from mainspring.engine.signing import (
    KEY_HEADER,
    NONCE_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    Verifier,
)
from mainspring.errors import (
    AccessDenied,
    ApprovalError,
    SessionBusy,
    SignatureRejected,
    StoreError,
    UnknownAttempt,
    WireFormatError,
)
from mainspring.principals import ANONYMOUS, Caller

try:
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError('remote engines need: pip install "mainspring[remote]"') from exc

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from mainspring.engine.core import Engine

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
