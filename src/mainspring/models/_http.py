"""HTTP status codes to typed model errors, shared by every adapter.

Each adapter pulls the status, message and body out of its SDK's exception;
this module decides what kind of failure it is, so the same status means the
same error (and the same ``retryable``) whichever provider answered.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any

from mainspring.errors import (
    AuthenticationError,
    BadRequest,
    ContextTooLong,
    ModelHTTPError,
    ModelNotFound,
    Overloaded,
    PermissionDenied,
    RateLimited,
    ServerError,
)

__all__ = ["http_error", "retry_after_seconds"]

_TYPED: dict[int, type[ModelHTTPError]] = {
    401: AuthenticationError,
    403: PermissionDenied,
    404: ModelNotFound,
}


def http_error(
    status: int,
    message: str,
    *,
    provider: str,
    body: str = "",
    retry_after: float | None = None,
    context_too_long: bool = False,
) -> ModelHTTPError:
    """The typed error for an HTTP error status.

    Args:
        status: The HTTP status.
        message: What the provider said (already prefixed as the adapter likes).
        provider: The provider's name.
        body: The raw error body, for logs.
        retry_after: Seconds the provider asked to wait (429).
        context_too_long: The provider said the request does not fit the model.
    """
    common: dict[str, Any] = {"provider": provider, "status": status, "body": body}
    if status == 429:
        return RateLimited(message, retry_after=retry_after, **common)
    if status in _TYPED:
        return _TYPED[status](message, **common)
    if status in (400, 413, 422):
        return (ContextTooLong if context_too_long else BadRequest)(message, **common)
    if status in (503, 529):
        return Overloaded(message, retryable=True, **common)
    if status >= 500:
        return ServerError(message, retryable=True, **common)
    return ModelHTTPError(message, retryable=status in (408, 409), **common)


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms``, or ``retry-after`` as seconds or an HTTP date."""
    if ms := headers.get("retry-after-ms"):
        try:
            return max(float(ms) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        return max(parsedate_to_datetime(value).timestamp() - time.time(), 0.0)
    except (TypeError, ValueError):
        return None
