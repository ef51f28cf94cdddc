"""SDK exceptions as typed mainspring errors."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any

import httpx2
import openai

from mainspring.errors import (
    AuthenticationError,
    BadRequest,
    ContextTooLong,
    ModelError,
    ModelHTTPError,
    ModelNotFound,
    ModelOutputError,
    ModelTimeout,
    Overloaded,
    PermissionDenied,
    RateLimited,
    ServerError,
)

__all__ = ["map_openai_error"]

_CONTEXT_MARKERS = ("context_length_exceeded", "maximum context length", "context window")


def _retry_after(headers: Mapping[str, str]) -> float | None:
    if ms := headers.get("retry-after-ms"):
        try:
            return float(ms) / 1000
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


def _error_text(body: object, fallback: str) -> tuple[str, str]:
    """The error's message and code from a parsed error body."""
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        message = error.get("message")
        metadata = error.get("metadata")
        if isinstance(metadata, dict) and isinstance(metadata.get("raw"), str):
            message = f"{message}: {metadata['raw']}"  # OpenRouter's upstream detail
        return (str(message) if message else fallback), str(error.get("code") or "")
    return fallback, ""


def _status_error(exc: openai.APIStatusError, provider: str) -> ModelHTTPError:
    status = exc.status_code
    message, code = _error_text(exc.body, exc.message)
    message = f"{provider} HTTP {status}: {message}"
    try:
        body = exc.response.text
    except httpx2.ResponseNotRead:
        body = json.dumps(exc.body) if exc.body is not None else ""
    common: dict[str, Any] = {"provider": provider, "status": status, "body": body}
    lowered = f"{code} {message}".lower()
    if status == 429:
        return RateLimited(message, retry_after=_retry_after(exc.response.headers), **common)
    if status == 401:
        return AuthenticationError(message, **common)
    if status == 403:
        return PermissionDenied(message, **common)
    if status == 404:
        return ModelNotFound(message, **common)
    if status in (400, 413, 422):
        if any(marker in lowered for marker in _CONTEXT_MARKERS):
            return ContextTooLong(message, **common)
        return BadRequest(message, **common)
    if status in (503, 529):
        return Overloaded(message, retryable=True, **common)
    if status >= 500:
        return ServerError(message, retryable=True, **common)
    return ModelHTTPError(message, retryable=status in (408, 409), **common)


def map_openai_error(exc: Exception, provider: str) -> ModelError:
    """The typed mainspring error for an exception raised by the ``openai`` SDK."""
    if isinstance(exc, openai.APITimeoutError):
        return ModelTimeout(f"{provider}: request timed out", provider=provider, retryable=True)
    if isinstance(exc, openai.APIConnectionError):  # refused, or reset mid-stream
        return ModelOutputError(
            f"{provider}: connection lost: {exc.__cause__ or exc!r}",
            provider=provider,
            retryable=True,
        )
    if isinstance(exc, openai.APIStatusError):
        return _status_error(exc, provider)
    if isinstance(exc, openai.APIError):  # an error object inside the stream
        message, _ = _error_text(exc.body, exc.message)
        return ModelOutputError(f"{provider}: {message}", provider=provider, retryable=True)
    return ModelOutputError(
        f"{provider}: malformed stream: {exc}", provider=provider, retryable=True
    )
