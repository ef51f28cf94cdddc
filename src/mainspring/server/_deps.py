"""Request dependencies: the worker's host, and the authenticated caller."""

from __future__ import annotations

import math

from starlette.requests import HTTPConnection

from mainspring.server._auth import ANONYMOUS, Principal, credential_of
from mainspring.server._host import SessionHost

__all__ = ["RateLimitedRequest", "Unauthorized", "authenticated", "host_of"]


class Unauthorized(Exception):
    """No credential, or not one the server knows (401)."""


class RateLimitedRequest(Exception):
    """The principal went over its rate (429); ``retry_after`` seconds to wait."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"rate limited: retry in {math.ceil(retry_after)} s")
        self.retry_after = retry_after


def host_of(conn: HTTPConnection) -> SessionHost:
    """The worker's :class:`SessionHost`."""
    host: SessionHost = conn.app.state.host
    return host


async def authenticated(conn: HTTPConnection) -> Principal:
    """The caller, checked against the configured credentials, within its rate.

    Raises:
        Unauthorized: No valid credential (and the server is not public).
        RateLimitedRequest: Over the principal's rate.
    """
    app_state = conn.app.state
    principal: Principal | None = None
    for authenticate in app_state.authenticators:
        principal = await authenticate(conn)
        if principal is not None:
            break
    if principal is None:
        if not app_state.config.public or credential_of(conn) is not None:
            raise Unauthorized("a valid credential is required (Authorization: Bearer <key>)")
        principal = ANONYMOUS
    conn.scope.setdefault("state", {})["principal"] = principal.id
    wait = app_state.limiter.check(principal.id)
    if wait is not None:
        raise RateLimitedRequest(wait)
    return principal
