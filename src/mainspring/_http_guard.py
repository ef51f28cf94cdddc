"""ASGI guards every mainspring HTTP server wears: DNS rebinding, cross-site posts, a token.

Rebinding: a web page on ``evil.example`` whose name is made to resolve to
127.0.0.1 reaches a loopback server from the user's browser. Its requests carry
``Host: evil.example`` (and an ``Origin``), so a server answers only a ``Host``
it was told is its own — a loopback address (any of 127.0.0.0/8, ``[::1]``,
``localhost``) by default, plus the names given as allowed hosts — and an
``Origin``, when sent, on one of those hosts or among the allowed CORS origins.
A bad ``Host`` gets 421, a bad ``Origin`` 403. This guard stays on when a
server opts out of authentication (``--public``).

Cross-site posts: a page on any site can make a browser send a *simple*
request — a ``POST`` with a form or ``text/plain`` body, or none — without a
CORS preflight, carrying the user's cookies. So a ``POST`` must say it is not
one: a JSON content type (``application/json``, ``application/*+json``), or a
header a browser sends cross-site only after a preflight the server allowed
(``Authorization: Bearer …``, ``X-API-Key``, ``X-Requested-With``, a signed
engine request's ``X-Mainspring-Signature``). Anything else gets 415 and
changes nothing.

Token: with one set, every request needs ``Authorization: Bearer <token>``
(compared in constant time); anything else gets 401.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from mainspring.errors import ConfigError

__all__ = [
    "CROSS_SITE_MESSAGE",
    "PREFLIGHTED_HEADERS",
    "BearerAuth",
    "CrossSiteGuard",
    "HostGuard",
    "allowed_hosts",
    "is_cross_site_simple",
    "is_loopback",
    "served_address",
]

_Scope = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
_Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
_App = Callable[[_Scope, _Receive, _Send], Awaitable[None]]

PREFLIGHTED_HEADERS = frozenset({"x-api-key", "x-requested-with", "x-mainspring-signature"})
"""Headers that mark a ``POST`` as no cross-site simple request (and ``Authorization: Bearer``)."""


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


def _name(host: str) -> str:
    """A host as compared: lower case, no trailing dot, an IPv6 address in brackets."""
    host = host.strip().lower().removesuffix(".")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return host


def allowed_hosts(hosts: Iterable[str]) -> frozenset[str]:
    """The host names a server answers besides loopback, checked and normalized.

    Each is a bare name or address (``api.example.com``, ``10.0.0.5``, ``::1``):
    no scheme, port or path.

    Raises:
        ConfigError: An empty entry, or one with a scheme, a path, a port or spaces.
    """
    names: set[str] = set()
    for raw in hosts:
        host = raw.strip()
        bad = not host or "/" in host or " " in host or "@" in host
        if not bad and ":" in host.strip("[]") and not host.startswith("["):
            try:
                ipaddress.IPv6Address(host)
            except ValueError:
                bad = True  # a name with a port
        elif not bad and host.startswith("["):
            bad = not host.endswith("]")
        if bad:
            raise ConfigError(
                f"allowed host {raw!r}: give a bare host name or address "
                "(api.example.com, 10.0.0.5), without scheme, port or path"
            )
        names.add(_name(host))
    return frozenset(names)


def served_address(host: str) -> list[str]:
    """The address a server listens on, when it is one (not a wildcard or a name).

    A ``Host`` naming that address is the server's own (no page can rebind an
    address), so a server allows it beside its allowed hosts.
    """
    try:
        address = ipaddress.ip_address(host.strip().strip("[]"))
    except ValueError:
        return []
    return [] if address.is_unspecified else [str(address)]


def _header(scope: _Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


async def _reply(
    send: _Send, status: int, kind: str, text: str, headers: list[tuple[bytes, bytes]]
) -> None:
    body = json.dumps({"error": {"type": kind, "message": text}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class HostGuard:
    """Answer only requests whose ``Host`` (and ``Origin``, if any) is this server's."""

    def __init__(
        self, app: _App, *, hosts: Iterable[str] = (), origins: Iterable[str] = ()
    ) -> None:
        """Wrap ``app``: ``hosts`` are allowed besides loopback, ``origins`` are CORS's.

        Raises:
            ConfigError: A malformed host (see :func:`allowed_hosts`).
        """
        self.app = app
        self.hosts = allowed_hosts(hosts)
        self.origins = frozenset(o.strip().lower().rstrip("/") for o in origins)

    def _ours(self, host: str) -> bool:
        return is_loopback(host) or _name(host) in self.hosts

    def _origin_ok(self, origin: str) -> bool:
        if "*" in self.origins or origin.strip().lower().rstrip("/") in self.origins:
            return True
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and self._ours(_host_part(parts.netloc))

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        """Serve the request if it is addressed to this server, else refuse it."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = _header(scope, b"host")
        if host is None or not self._ours(_host_part(host)):
            message = "this server does not answer that Host; name it with --allowed-host"
            await _reply(send, 421, "MisdirectedRequest", message, [])
            return
        origin = _header(scope, b"origin")
        if origin is not None and not self._origin_ok(origin):
            await _reply(send, 403, "CrossOrigin", "cross-origin requests are refused", [])
            return
        await self.app(scope, receive, send)


def is_cross_site_simple(method: str, headers: Mapping[str, str]) -> bool:
    """Whether a request is a ``POST`` any web page could make a browser send.

    ``headers`` maps lower-case names to values. Such a request must not change
    anything: it lacks a JSON content type and every header in
    :data:`PREFLIGHTED_HEADERS` (and a bearer ``Authorization``).
    """
    if method.upper() != "POST":
        return False  # GET/HEAD change nothing; other methods always need a preflight
    media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    kind, _, subtype = media.partition("/")
    if kind == "application" and (subtype == "json" or subtype.endswith("+json")):
        return False
    scheme = headers.get("authorization", "").strip().partition(" ")[0].lower()
    if scheme == "bearer":
        return False
    return not any(headers.get(name, "").strip() for name in PREFLIGHTED_HEADERS)


CROSS_SITE_MESSAGE = (
    "a POST needs Content-Type: application/json (or an X-Requested-With header): "
    "cross-site form posts are refused"
)


class CrossSiteGuard:
    """Refuse (415) a ``POST`` a cross-site page could send without a preflight."""

    def __init__(self, app: _App) -> None:
        """Wrap ``app``."""
        self.app = app

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        """Serve the request unless it is a cross-site simple ``POST``."""
        if scope["type"] == "http":
            headers = {
                bytes(k).decode("latin-1").lower(): bytes(v).decode("latin-1")
                for k, v in scope.get("headers", ())
            }
            if is_cross_site_simple(scope["method"], headers):
                await _reply(send, 415, "CrossSiteRequest", CROSS_SITE_MESSAGE, [])
                return
        await self.app(scope, receive, send)


class BearerAuth:
    """Answer only requests carrying ``Authorization: Bearer <token>``."""

    def __init__(self, app: _App, *, token: str) -> None:
        """Wrap ``app``; ``token`` is the one credential accepted."""
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        """Serve the request if it carries the token."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = (_header(scope, b"authorization") or "").encode("latin-1")
        if not hmac.compare_digest(given, self._expected):
            await _reply(
                send,
                401,
                "Unauthorized",
                "a bearer token is required",
                [(b"www-authenticate", b"Bearer")],
            )
            return
        await self.app(scope, receive, send)
