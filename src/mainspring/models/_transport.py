"""Network failures typed by what happened, whatever exception an SDK wraps them in.

SDK releases wrap the same failure differently: ``anthropic`` 1.x let ``httpx2``'s
``ReadError`` out of a stream that was reset, 2.x wraps it in ``APIConnectionError``
(the class it also uses for a refused connection); ``google-genai`` raises the HTTP
library's own errors, ``httpx2``'s or ``aiohttp``'s by what is installed. So the
adapters do not decide by the class they caught: :func:`transport_error` looks through
the exception and its causes for what happened, and the adapter says how far the
response had got:

- a timeout anywhere in the chain: :class:`~mainspring.errors.ModelTimeout`;
- the connection could not be made (refused, a name that does not resolve, TLS):
  :class:`~mainspring.errors.ModelUnreachable`;
- any other network failure (a reset, a peer that closed early, a broken pipe):
  a broken-off stream (:class:`~mainspring.errors.ModelOutputError`) once any of the
  response had arrived, else :class:`~mainspring.errors.ModelUnreachable`.

All three are retryable; the retry policy replays them only while nothing was yielded.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator

from mainspring.errors import ModelError, ModelOutputError, ModelTimeout, ModelUnreachable

__all__ = ["transport_error"]

ExcTypes = tuple[type[BaseException], ...]

# The HTTP libraries SDKs build on; only those already imported can have raised.
_HTTP_LIBRARIES = ("httpx2", "httpx")


def _library_types(attribute: str) -> ExcTypes:
    """``attribute`` (an exception class) of each loaded HTTP library, plus aiohttp's."""
    found: list[type[BaseException]] = []
    for name in _HTTP_LIBRARIES:
        module = sys.modules.get(name)
        kind = getattr(module, attribute, None)
        if isinstance(kind, type) and issubclass(kind, BaseException):
            found.append(kind)
    aiohttp = sys.modules.get("aiohttp")
    aiohttp_name = {
        "TimeoutException": "ServerTimeoutError",
        "ConnectError": "ClientConnectorError",
        "TransportError": "ClientConnectionError",
    }[attribute]
    kind = getattr(aiohttp, aiohttp_name, None)
    if isinstance(kind, type) and issubclass(kind, BaseException):
        found.append(kind)
        payload = getattr(aiohttp, "ClientPayloadError", None)  # a body cut short
        if attribute == "TransportError" and isinstance(payload, type):
            found.append(payload)
    return tuple(found)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then what caused it (``__cause__``, else ``__context__``), to the root."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def transport_error(
    exc: BaseException,
    *,
    provider: str,
    name: str,
    received: bool,
    timeouts: ExcTypes = (),
    connections: ExcTypes = (),
) -> ModelError | None:
    """The typed error for a network failure in ``exc``'s chain, or None if there is none.

    Call it after the SDK's HTTP status errors are mapped (a status is an answer,
    not a network failure).

    Args:
        exc: What the SDK raised.
        provider: The provider's name for the error's ``provider``.
        name: How messages name the provider ("Anthropic", "OpenAI").
        received: Whether any of the response (its status line, a byte of its
            body, an event) had arrived when ``exc`` was raised.
        timeouts: The SDK's own timeout classes (they may carry no cause).
        connections: The SDK's own connection-failure classes (the same).
    """
    if isinstance(exc, ModelError):  # already typed (a decoder's own error)
        return None
    chain = list(_chain(exc))
    timeout_types: ExcTypes = (TimeoutError, *_library_types("TimeoutException"), *timeouts)
    connect_types: ExcTypes = (
        ConnectionRefusedError,
        socket.gaierror,
        *_library_types("ConnectError"),
    )
    network_types: ExcTypes = (OSError, *_library_types("TransportError"), *connections)
    if any(isinstance(e, timeout_types) for e in chain):
        return ModelTimeout(
            f"{name} did not answer in time: {_describe(_root(chain, timeout_types))}",
            provider=provider,
            retryable=True,
        )
    if not any(isinstance(e, network_types) for e in chain):
        return None
    refused = any(isinstance(e, connect_types) for e in chain)
    if refused or not received:
        cause = _root(chain, connect_types if refused else network_types)
        return ModelUnreachable(
            f"could not reach {name}: {_describe(cause)}", provider=provider, retryable=True
        )
    return ModelOutputError(
        f"the {name} stream broke off: {_describe(_root(chain, network_types))}",
        provider=provider,
        retryable=True,
    )


def _root(chain: list[BaseException], kinds: ExcTypes) -> BaseException:
    """The deepest exception of ``kinds`` in ``chain`` (what happened), else the deepest."""
    matching = [e for e in chain if isinstance(e, kinds)]
    return matching[-1] if matching else chain[-1]
