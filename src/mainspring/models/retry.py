"""Retries for model calls: exponential backoff with jitter, bounded by a deadline.

Built on ``tenacity``. A stream is retried only while it has yielded nothing:
once deltas reached the engine, a failure is surfaced (as a retryable error)
instead of replaying text the user already saw. A provider's ``retry-after``
is honoured when it is longer than the backoff.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import anyio
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    stop_any,
    wait_exponential_jitter,
)
from tenacity.stop import stop_base

from mainspring.errors import ConfigError, ModelError, RateLimited
from mainspring.models.base import ModelEvent

__all__ = ["RetryPolicy", "retrying_call", "retrying_stream"]

T = TypeVar("T")

log = logging.getLogger("mainspring.models.retry")


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How often and how long to retry a retryable model error."""

    max_attempts: int = 4
    """Attempts in all (1 = no retry)."""
    initial_backoff: float = 0.5
    max_backoff: float = 8.0
    jitter: float = 0.5
    """Up to this many seconds of random extra wait."""
    deadline: float = 60.0
    """No new attempt starts after this many seconds."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigError("max_attempts must be at least 1")
        if min(self.initial_backoff, self.max_backoff, self.jitter, self.deadline) < 0:
            raise ConfigError("retry delays must not be negative")

    def _wait(self) -> Callable[[RetryCallState], float]:
        backoff = wait_exponential_jitter(
            initial=self.initial_backoff, max=self.max_backoff, jitter=self.jitter
        )

        def wait(state: RetryCallState) -> float:
            delay = backoff(state)
            exc = state.outcome.exception() if state.outcome else None
            if isinstance(exc, RateLimited) and exc.retry_after is not None:
                delay = max(delay, exc.retry_after)  # within the deadline (see the stop)
            return float(delay)

        return wait


class _WaitPastDeadline(stop_base):
    """Give up at once when the provider asks to wait longer than the time left."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def __call__(self, retry_state: RetryCallState) -> bool:
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome else None
        if isinstance(exc, RateLimited) and exc.retry_after is not None:
            elapsed = retry_state.seconds_since_start or 0.0
            return exc.retry_after > self.deadline - elapsed
        return False


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, ModelError) and exc.retryable


def _log_retry(state: RetryCallState) -> None:
    """One warning per retry, its figures in ``extra["retry"]`` (the server's trace reads them)."""
    exc = state.outcome.exception() if state.outcome else None
    wait = state.next_action.sleep if state.next_action else 0.0
    log.warning(
        "model call failed (%s); retrying in %.2f s (attempt %d)",
        type(exc).__name__,
        wait,
        state.attempt_number + 1,
        extra={
            "retry": {
                "error": type(exc).__name__,
                "rate_limited": isinstance(exc, RateLimited),
                "attempt": state.attempt_number + 1,
                "wait_seconds": round(float(wait), 3),
            }
        },
    )


def _retrying(policy: RetryPolicy) -> AsyncRetrying:
    return AsyncRetrying(
        sleep=anyio.sleep,
        stop=stop_any(
            stop_after_attempt(policy.max_attempts),
            stop_after_delay(policy.deadline),
            _WaitPastDeadline(policy.deadline),
        ),
        wait=policy._wait(),
        retry=retry_if_exception(_retryable),
        before_sleep=_log_retry,
        reraise=True,
    )


async def retrying_call(call: Callable[[], Awaitable[T]], policy: RetryPolicy) -> T:
    """``await call()``, called again after a retryable :class:`ModelError` (with backoff)."""
    async for attempt in _retrying(policy):
        with attempt:
            return await call()
    raise AssertionError("unreachable: tenacity re-raises the last error")  # pragma: no cover


async def retrying_stream(
    start: Callable[[], AsyncIterator[ModelEvent]], policy: RetryPolicy
) -> AsyncIterator[ModelEvent]:
    """Events of ``start()``, opened again on a retryable error before the first event."""
    retrying = _retrying(policy)
    async for attempt in retrying:
        first: ModelEvent | None = None
        with attempt:
            stream = start()
            first = await anext(stream, None)  # a failure here is retried
        outcome = attempt.retry_state.outcome
        if outcome is not None and outcome.failed:
            continue  # tenacity waits, then starts the next attempt
        if first is None:
            return
        yield first
        async for event in stream:  # past the first event, failures surface
            yield event
        return
