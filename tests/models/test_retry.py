"""Retries: exponential backoff with jitter, bounded, only before the first event."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from mainspring.errors import AuthenticationError, ConfigError, ModelOutputError, RateLimited
from mainspring.events import TextDelta
from mainspring.models.base import ModelEvent, ModelStop
from mainspring.models.retry import RetryPolicy, retrying_stream

pytestmark = pytest.mark.anyio

FAST = RetryPolicy(max_attempts=4, initial_backoff=0.001, max_backoff=0.002, jitter=0.0)


def flaky(
    failures: list[Exception], *, after_first: Exception | None = None
) -> tuple[list[int], object]:
    calls: list[int] = []

    async def start() -> AsyncIterator[ModelEvent]:
        calls.append(1)
        if len(calls) <= len(failures):
            raise failures[len(calls) - 1]
        yield TextDelta(text="hello")
        if after_first is not None:
            raise after_first
        yield ModelStop()

    return calls, start


async def collect(policy: RetryPolicy, start: object) -> list[ModelEvent]:
    return [e async for e in retrying_stream(start, policy)]  # type: ignore[arg-type]  # a fake start function standing for a model's stream


async def test_retryable_failures_before_output_are_retried() -> None:
    cut = ModelOutputError("cut", provider="p", retryable=True)
    calls, start = flaky([cut, cut])
    events = await collect(FAST, start)
    assert len(calls) == 3 and [e.type for e in events] == ["text_delta", "model_stop"]


async def test_attempts_are_bounded() -> None:
    cut = ModelOutputError("cut", provider="p", retryable=True)
    calls, start = flaky([cut] * 10)
    with pytest.raises(ModelOutputError):
        await collect(FAST, start)
    assert len(calls) == 4


async def test_errors_that_will_not_pass_are_not_retried() -> None:
    calls, start = flaky([AuthenticationError("bad key", provider="p", status=401)])
    with pytest.raises(AuthenticationError):
        await collect(FAST, start)
    assert len(calls) == 1


async def test_a_failure_after_output_surfaces_instead_of_replaying() -> None:
    cut = ModelOutputError("cut", provider="p", retryable=True)
    calls, start = flaky([], after_first=cut)
    seen: list[ModelEvent] = []
    with pytest.raises(ModelOutputError):
        async for event in retrying_stream(start, FAST):  # type: ignore[arg-type]  # a fake start function standing for a model's stream
            seen.append(event)  # noqa: PERF401  # keep what came before the failure
    assert len(calls) == 1 and [e.type for e in seen] == ["text_delta"]


async def test_retry_after_is_honoured() -> None:
    limited = RateLimited("slow down", provider="p", retry_after=0.2)
    calls, start = flaky([limited])
    began = anyio.current_time()
    await collect(FAST, start)
    assert anyio.current_time() - began >= 0.2  # waited at least what the provider asked
    assert len(calls) == 2


async def test_the_deadline_stops_retrying() -> None:
    limited = RateLimited("slow down", provider="p", retry_after=0.05)
    calls, start = flaky([limited] * 10)
    policy = RetryPolicy(
        max_attempts=100, initial_backoff=0.05, max_backoff=0.05, jitter=0, deadline=0.12
    )
    with pytest.raises(RateLimited):
        await collect(policy, start)
    assert 2 <= len(calls) <= 4


def test_bad_policies_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ConfigError):
        RetryPolicy(initial_backoff=-1)


async def test_a_retry_after_past_the_deadline_gives_up_at_once() -> None:
    limited = RateLimited("come back in a minute", provider="p", retry_after=60.0)
    calls, start = flaky([limited])
    began = anyio.current_time()
    with pytest.raises(RateLimited):
        await collect(RetryPolicy(deadline=1.0), start)
    assert len(calls) == 1 and anyio.current_time() - began < 1.0


async def test_each_retry_is_logged_with_its_figures(caplog: pytest.LogCaptureFixture) -> None:
    limited = RateLimited("slow down", provider="p", retry_after=0.01)
    cut = ModelOutputError("cut", provider="p", retryable=True)
    _, start = flaky([limited, cut])
    with caplog.at_level("WARNING", logger="mainspring.models.retry"):
        await collect(FAST, start)
    retries = [getattr(r, "retry", None) for r in caplog.records]
    assert [(r["error"], r["rate_limited"], r["attempt"]) for r in retries if r] == [
        ("RateLimited", True, 2),
        ("ModelOutputError", False, 3),
    ]
    assert retries[0] is not None and retries[0]["wait_seconds"] >= 0.01
