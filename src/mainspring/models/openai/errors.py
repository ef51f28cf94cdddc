"""SDK exceptions as typed mainspring errors."""

from __future__ import annotations

import json

import httpx2
import openai

from mainspring.errors import (
    ModelError,
    ModelHTTPError,
    ModelOutputError,
)
from mainspring.models._http import http_error, retry_after_seconds
from mainspring.models._transport import transport_error

__all__ = ["map_openai_error"]

_CONTEXT_MARKERS = ("context_length_exceeded", "maximum context length", "context window")


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
    return http_error(
        status,
        message,
        provider=provider,
        body=body,
        retry_after=retry_after_seconds(exc.response.headers),
        context_too_long=any(marker in f"{code} {message}".lower() for marker in _CONTEXT_MARKERS),
    )


def map_openai_error(exc: Exception, provider: str, *, received: bool = False) -> ModelError:
    """The typed mainspring error for an exception raised by the ``openai`` SDK.

    ``received``: whether any of the response had arrived (a network failure is
    then a broken-off stream, not an unreachable server).
    """
    if isinstance(exc, openai.APIStatusError):
        return _status_error(exc, provider)
    network = transport_error(
        exc,
        provider=provider,
        name=provider,
        received=received,
        timeouts=(openai.APITimeoutError,),
        connections=(openai.APIConnectionError,),
    )
    if network is not None:
        return network
    if isinstance(exc, openai.APIError):  # an error object inside the stream
        return _stream_error(exc, provider)
    return ModelOutputError(
        f"{provider}: malformed stream: {exc}", provider=provider, retryable=True
    )


# Error codes servers put in an in-stream error object, as the HTTP status they mean.
_CODE_STATUS = {
    "invalid_request_error": 400,
    "context_length_exceeded": 400,
    "invalid_prompt": 400,
    "authentication_error": 401,
    "invalid_api_key": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "model_not_found": 404,
    "rate_limit_exceeded": 429,
    "rate_limit_error": 429,
    "insufficient_quota": 429,
    "overloaded_error": 529,
    "server_error": 500,
    "api_error": 500,
}


def _stream_status(body: object) -> int | None:
    """The HTTP status an in-stream error object stands for, if it says."""
    error = body.get("error", body) if isinstance(body, dict) else body
    if not isinstance(error, dict):
        return None
    for key in ("code", "status", "status_code"):
        value = error.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 400 <= value <= 599:
            return value
        if isinstance(value, str) and value.isdigit() and 400 <= int(value) <= 599:
            return int(value)
    for key in ("code", "type"):
        value = error.get(key)
        if isinstance(value, str) and value in _CODE_STATUS:
            return _CODE_STATUS[value]
    return None


def _stream_error(exc: openai.APIError, provider: str) -> ModelError:
    """An error object sent inside a stream, typed by its code like an HTTP error.

    OpenAI-compatible servers report a failure that happens after the response
    started (a context overflow, an upstream rate limit) as
    ``data: {"error": {...}}``; its ``code`` (a number, or a name such as
    ``rate_limit_exceeded``) says what kind of failure it is. Without one it is
    a malformed stream, worth retrying.
    """
    message, code = _error_text(exc.body, exc.message)
    status = _stream_status(exc.body)
    if status is None:
        return ModelOutputError(f"{provider}: {message}", provider=provider, retryable=True)
    return http_error(
        status,
        f"{provider} error in stream ({status}): {message}",
        provider=provider,
        body=json.dumps(exc.body) if exc.body is not None else "",
        context_too_long=any(marker in f"{code} {message}".lower() for marker in _CONTEXT_MARKERS),
    )
