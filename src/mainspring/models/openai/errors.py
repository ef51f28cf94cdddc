"""SDK exceptions as typed mainspring errors."""

from __future__ import annotations

import json

import httpx2
import openai

from mainspring.errors import (
    ModelError,
    ModelHTTPError,
    ModelOutputError,
    ModelTimeout,
)
from mainspring.models._http import http_error, retry_after_seconds

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
