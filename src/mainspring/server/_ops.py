"""Operations: health and readiness, structured access logs, request spans.

Access log lines (logger ``mainspring.server.access``) are one JSON object
each — method, route template, status, milliseconds, principal, worker —
and never carry a body, a query string or prompt text. With OpenTelemetry
installed (the ``otel`` extra), every request is a server span.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mainspring.server._telemetry import tracer_of

__all__ = ["AccessLog", "ops_router"]

access_log = logging.getLogger("mainspring.server.access")

ops_router = APIRouter(tags=["operations"])


@ops_router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process answers (no credential needed)."""
    return {"status": "ok"}


@ops_router.get("/readyz", responses={503: {"description": "Not ready"}})
async def readyz(request: Request) -> JSONResponse:
    """The worker can serve: its stores answer and it is not shutting down."""
    host = getattr(request.app.state, "host", None)
    if host is None or host.stopping.is_set():
        return JSONResponse({"status": "stopping"}, status_code=503)
    try:
        await host.stores.sessions.session_ids(limit=1)
        await host.stores.locks.holder("mainspring-readiness")
    except Exception as exc:  # any store failure means not ready
        return JSONResponse({"status": "unavailable", "reason": type(exc).__name__}, 503)
    return JSONResponse({"status": "ready", "runs": len(host.runs)})


class AccessLog:
    """ASGI middleware: one access log line and one span per request."""

    def __init__(self, app: ASGIApp, *, worker: str = "", tracer_provider: Any = None) -> None:
        """Wrap ``app``; spans go to ``tracer_provider`` (default: the global one)."""
        self.app = app
        self.worker = worker
        self.tracer = tracer_of(tracer_provider)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve and record one request."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        span_cm = None
        if self.tracer is not None:
            span_cm = self.tracer.start_as_current_span(
                f"{scope['method']} {scope.get('path', '')}", kind=_server_kind()
            )
        span = span_cm.__enter__() if span_cm is not None else None
        try:
            await self.app(scope, receive, sending)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            principal = scope.get("state", {}).get("principal")
            if span is not None:
                span.update_name(f"{scope['method']} {template}")
                span.set_attribute("http.request.method", scope["method"])
                span.set_attribute("http.route", template)
                span.set_attribute("http.response.status_code", status)
            if span_cm is not None:
                span_cm.__exit__(None, None, None)
            access_log.info(
                json.dumps(
                    {
                        "method": scope["method"],
                        "route": template,
                        "status": status,
                        "ms": round((time.perf_counter() - started) * 1000, 1),
                        "principal": principal,
                        "worker": self.worker,
                    },
                    separators=(",", ":"),
                )
            )


def _server_kind() -> Any:
    from opentelemetry.trace import SpanKind

    return SpanKind.SERVER
