"""Network failures are typed by what happened, whatever class an SDK wraps them in.

SDK releases change the wrapping (anthropic 2.x wraps a reset mid-stream in
``APIConnectionError``, 1.x let ``httpx2.ReadError`` through); each case here builds
the exception the way one SDK release or another raises it and checks every adapter's
mapping gives the same answer. The loopback fault suite (``test_faults.py``) checks
the same through real sockets, on the SDKs installed.
"""

from __future__ import annotations

from collections.abc import Callable

import anthropic
import httpx2
import openai
import pytest

from mainspring.errors import ModelError, ModelOutputError, ModelTimeout, ModelUnreachable
from mainspring.models import anthropic as anthropic_adapter
from mainspring.models import openai_responses
from mainspring.models._transport import transport_error
from mainspring.models.openai import map_openai_error

REQUEST = httpx2.Request("POST", "http://127.0.0.1:9/v1/messages")

Mapper = Callable[[Exception, bool], ModelError]

MAPPERS: dict[str, Mapper] = {
    "anthropic": lambda exc, received: anthropic_adapter.map_error(exc, received=received),
    "chat": lambda exc, received: map_openai_error(exc, "openai", received=received),
    "responses": lambda exc, received: openai_responses.map_error(exc, received=received),
}


def caused(outer: Exception, cause: BaseException) -> Exception:
    """``outer`` as raised ``from cause`` (what an SDK's wrapping leaves)."""
    outer.__cause__ = cause
    return outer


def reset() -> httpx2.ReadError:
    return httpx2.ReadError("[Errno 104] Connection reset by peer", request=REQUEST)


def bare_sdk_error(adapter: str) -> Exception:
    """The SDK's connection error with no cause attached."""
    if adapter == "anthropic":
        return anthropic.APIConnectionError(request=REQUEST)
    return openai.APIConnectionError(request=REQUEST)


def sdk_timeout(adapter: str) -> Exception:
    if adapter == "anthropic":
        return anthropic.APITimeoutError(request=REQUEST)
    return openai.APITimeoutError(request=REQUEST)


def wrapped_reset(adapter: str) -> Exception:
    """A reset wrapped in the SDK's connection error (anthropic 2.x, openai)."""
    return caused(bare_sdk_error(adapter), reset())


def wrapped_timeout(adapter: str) -> Exception:
    return caused(sdk_timeout(adapter), httpx2.ReadTimeout("timed out"))


def wrapped_refusal(adapter: str) -> Exception:
    refused = httpx2.ConnectError("[Errno 111] Connection refused", request=REQUEST)
    return caused(bare_sdk_error(adapter), refused)


# (how the SDK raised it, whether the answer had begun, the error it must be)
CASES: list[tuple[str, Callable[[str], Exception], bool, type[ModelError]]] = [
    ("reset-wrapped-after-bytes", wrapped_reset, True, ModelOutputError),
    ("reset-bare-after-bytes", lambda _: reset(), True, ModelOutputError),
    (
        "reset-as-oserror-after-bytes",
        lambda _: ConnectionResetError(104, "reset"),
        True,
        ModelOutputError,
    ),
    ("sdk-error-no-cause-after-bytes", bare_sdk_error, True, ModelOutputError),
    ("reset-wrapped-before-bytes", wrapped_reset, False, ModelUnreachable),
    ("reset-bare-before-bytes", lambda _: reset(), False, ModelUnreachable),
    ("sdk-error-no-cause-before-bytes", bare_sdk_error, False, ModelUnreachable),
    ("refused-wrapped", wrapped_refusal, False, ModelUnreachable),
    ("timeout-wrapped-after-bytes", wrapped_timeout, True, ModelTimeout),
    ("timeout-wrapped-before-bytes", wrapped_timeout, False, ModelTimeout),
    ("timeout-bare", lambda _: httpx2.ReadTimeout("timed out"), True, ModelTimeout),
]


@pytest.mark.parametrize("adapter", sorted(MAPPERS))
@pytest.mark.parametrize(
    ("make", "received", "kind"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_a_network_failure_is_typed_by_what_happened(
    adapter: str, make: Callable[[str], Exception], received: bool, kind: type[ModelError]
) -> None:
    error = MAPPERS[adapter](make(adapter), received)

    assert type(error) is kind
    assert error.retryable
    expected = {
        ModelOutputError: "stream broke off",
        ModelUnreachable: "could not reach",
        ModelTimeout: "did not answer in time",
    }[kind]
    assert expected in str(error)


def test_the_message_names_what_happened_not_the_wrapper() -> None:
    error = anthropic_adapter.map_error(wrapped_reset("anthropic"), received=True)

    assert str(error) == (
        "the Anthropic stream broke off: ReadError: [Errno 104] Connection reset by peer"
    )
    refused = anthropic_adapter.map_error(wrapped_refusal("anthropic"), received=True)
    assert type(refused) is ModelUnreachable  # a refused connection never had an answer
    assert "Connection refused" in str(refused)


@pytest.mark.parametrize(
    "exc",
    [ValueError("not json"), KeyError("x"), RuntimeError("a bug")],
    ids=["value", "key", "runtime"],
)
def test_what_is_not_a_network_failure_is_left_to_the_adapter(exc: Exception) -> None:
    assert transport_error(exc, provider="p", name="P", received=True) is None


def test_an_error_already_typed_is_left_alone() -> None:
    typed = ModelOutputError("gemini: malformed stream chunk", provider="gemini")
    typed.__context__ = reset()

    assert transport_error(typed, provider="gemini", name="Gemini", received=True) is None


def test_a_status_error_stays_a_status_error_even_after_a_network_failure() -> None:
    response = httpx2.Response(503, request=REQUEST, json={"error": {"type": "overloaded_error"}})
    status = anthropic.APIStatusError("overloaded", response=response, body=None)
    status.__context__ = reset()

    error = anthropic_adapter.map_error(status, received=True)

    assert type(error).__name__ == "Overloaded"
