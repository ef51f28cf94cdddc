"""Request-size limits and per-principal rate limits."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BodyLimit", "RateLimiter"]


def _error(status: int, kind: str, message: str) -> tuple[dict[str, object], bytes]:
    body = json.dumps({"error": {"type": kind, "message": message}}).encode()
    start: dict[str, object] = {
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))],
    }
    return start, body


class BodyLimit:
    """ASGI middleware: a body over ``limit`` bytes is refused with 413, however it is sent.

    A declared ``Content-Length`` over the limit is refused before a byte is
    read; a chunked body is counted as it arrives and cut off at the limit.
    """

    def __init__(self, app: ASGIApp, *, limit: int) -> None:
        """Wrap ``app``."""
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one request under the limit."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                if not value.isdigit() or int(value) > self.limit:
                    await self._refuse(send)
                    return
        declared = any(name == b"content-length" for name, _ in scope.get("headers", ()))
        if declared or scope["method"] in ("GET", "HEAD", "DELETE", "OPTIONS"):
            await self.app(scope, receive, send)  # the server holds a body to its length
            return
        # A chunked body: read it up to the limit before the app sees any of it.
        buffered: list[Message] = []
        received = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                buffered.append(message)
                break
            received += len(message.get("body", b""))
            if received > self.limit:
                await self._refuse(send)
                return
            buffered.append(message)
            if not message.get("more_body", False):
                break

        async def replayed() -> Message:
            return buffered.pop(0) if buffered else await receive()

        await self.app(scope, replayed, send)

    async def _refuse(self, send: Send) -> None:
        start, body = _error(413, "BodyTooLarge", f"the request body is over {self.limit} bytes")
        await send(start)
        await send({"type": "http.response.body", "body": body})


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


class RateLimiter:
    """A token bucket per principal: ``burst`` at once, then ``per_minute``."""

    def __init__(self, *, per_minute: int, burst: int, max_principals: int = 100_000) -> None:
        """``per_minute`` 0 turns the limit off."""
        self.per_second = per_minute / 60.0
        self.burst = burst
        self.max_principals = max_principals
        self._buckets: dict[str, _Bucket] = {}

    def check(self, principal: str) -> float | None:
        """Take one request for ``principal``: ``None`` if allowed, else seconds to wait."""
        if self.per_second <= 0:
            return None
        now = time.monotonic()
        bucket = self._buckets.get(principal)
        if bucket is None:
            if len(self._buckets) >= self.max_principals:
                self._buckets.clear()  # bounded memory; a reset only forgives
            bucket = self._buckets[principal] = _Bucket(float(self.burst), now)
        bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.at) * self.per_second)
        bucket.at = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return None
        return (1.0 - bucket.tokens) / self.per_second
