"""ASGI guards in front of ``mcp serve --http``: DNS rebinding and a bearer token.

Rebinding: a web page on ``evil.example`` whose name is made to resolve to
127.0.0.1 reaches a loopback server from the user's browser. Its requests carry
``Host: evil.example`` (and an ``Origin``), so a loopback server answers only a
``Host`` naming a loopback address — any of 127.0.0.0/8, ``[::1]`` or
``localhost`` — and an ``Origin``, when sent, on one. A bad ``Host`` gets 421,
a bad ``Origin`` 403.

Token: with one set, every request needs ``Authorization: Bearer <token>``
(compared in constant time); anything else gets 401.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

__all__ = ["BearerAuth", "LoopbackOnly", "is_loopback"]

_Scope = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
_Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
_App = Callable[[_Scope, _Receive, _Send], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name, an address, ``[v6]``) only reaches this machine."""
    host = host.strip().lower().removesuffix(".")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return False


def _host_part(authority: str) -> str:
    """``127.0.0.2:8000`` → ``127.0.0.2``; ``[::1]:8000`` → ``[::1]``."""
    authority = authority.strip()
    if authority.startswith("["):
        end = authority.find("]")
        return authority[: end + 1] if end > 0 else authority
    return authority.rsplit(":", 1)[0] if authority.count(":") == 1 else authority


def _header(scope: _Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


async def _reply(send: _Send, status: int, text: str, headers: list[tuple[bytes, bytes]]) -> None:
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class LoopbackOnly:
    """Answer only requests whose ``Host`` (and ``Origin``, if any) is loopback."""

    def __init__(self, app: _App) -> None:
        self.app = app

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = _header(scope, b"host")
        if host is None or not is_loopback(_host_part(host)):
            await _reply(send, 421, "this server answers only a loopback Host", [])
            return
        origin = _header(scope, b"origin")
        if origin is not None:
            parts = urlsplit(origin)
            if parts.scheme not in ("http", "https") or not is_loopback(_host_part(parts.netloc)):
                await _reply(send, 403, "cross-origin requests are refused", [])
                return
        await self.app(scope, receive, send)


class BearerAuth:
    """Answer only requests carrying ``Authorization: Bearer <token>``."""

    def __init__(self, app: _App, *, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = (_header(scope, b"authorization") or "").encode("latin-1")
        if not hmac.compare_digest(given, self._expected):
            await _reply(
                send, 401, "a bearer token is required", [(b"www-authenticate", b"Bearer")]
            )
            return
        await self.app(scope, receive, send)
