"""An A2A agent's card, read as hostile input, and the credentials sent with every request.

The card is read up to :data:`MAX_CARD_BYTES` (a declared length over it is
refused unread, a body that grows past it is cut off), parsed by the a2a-sdk,
and every transport it names must be on the card's own origin: the host's
credentials (:class:`HeaderAuth`, on the tool's HTTP client, never redirected)
go nowhere else. What the card says is cleaned by :func:`sanitize` before a
model or a screen sees it. Part of :mod:`mainspring.toolkits.a2a`.
"""

from __future__ import annotations

import inspect
import json
import re
import unicodedata
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Mapping
from typing import Any, TypeAlias
from urllib.parse import urlsplit

from mainspring.errors import MainspringError

try:
    import httpx
    from a2a.client.card_resolver import parse_agent_card
    from a2a.types.a2a_pb2 import AgentCard
    from google.protobuf.json_format import ParseError
except ImportError as exc:  # pragma: no cover - the extra is installed in tests
    raise ImportError('a2a_tool needs: pip install "mainspring[a2a]"') from exc

__all__ = [
    "CARD_PATH",
    "MAX_CARD_BYTES",
    "A2ACardError",
    "Auth",
    "HeaderAuth",
    "check_interfaces",
    "origin",
    "read_card",
    "sanitize",
    "tool_name",
]

CARD_PATH = "/.well-known/agent-card.json"
"""Where the agent card is read, under the URL given."""
MAX_CARD_BYTES = 256 * 1024
"""An agent card larger than this is refused (it is read no further)."""
_NAME_CHARS = 64

HeaderSource: TypeAlias = Callable[
    [], "Mapping[str, str] | str | Awaitable[Mapping[str, str] | str]"
]
Auth: TypeAlias = "str | Mapping[str, str] | HeaderSource | None"
"""A bearer token, headers, or a callable giving either per request (never model-visible)."""

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")
_NOT_NAME = re.compile(r"[^A-Za-z0-9_-]+")


class A2ACardError(MainspringError):
    """The remote agent's card cannot be used: unreadable, too large, not a card, off origin."""


def sanitize(text: str, limit: int, *, lines: bool = True) -> str:
    """``text`` without control or format characters (newlines and tabs kept if ``lines``), cut.

    Text from a remote agent goes to the model and the host's screen: NUL, ANSI
    escapes, bidirectional overrides and zero-width characters go; the result
    is at most ``limit`` characters (an ellipsis marks a cut).
    """
    text = unicodedata.normalize("NFC", text[: limit * 4])
    if not lines:
        text = text.replace("\n", " ").replace("\t", " ").replace("\r", " ")
    cleaned = _CONTROL.sub("", text.replace("\r\n", "\n")).strip()
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


def tool_name(card_name: str) -> str:
    base = _NOT_NAME.sub("_", sanitize(card_name, _NAME_CHARS * 2, lines=False)).strip("_-")
    return f"a2a_{base or 'agent'}"[:_NAME_CHARS].rstrip("_-")


class HeaderAuth(httpx.Auth):
    """The host's credentials on every request of the tool's HTTP client."""

    def __init__(self, auth: Auth) -> None:
        self._auth = auth

    async def _headers(self) -> Mapping[str, str]:
        source: Any = self._auth
        if callable(source):
            source = source()
            if inspect.isawaitable(source):
                source = await source
        if source is None:
            return {}
        if isinstance(source, str):
            return {"Authorization": f"Bearer {source}"}
        return dict(source)

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        request.headers.update(await self._headers())
        yield request

    def sync_auth_flow(
        self, request: httpx.Request
    ) -> Generator[httpx.Request, httpx.Response, None]:
        raise RuntimeError("a2a_tool's HTTP client is asynchronous")  # pragma: no cover


async def read_card(http: httpx.AsyncClient, url: str) -> AgentCard:
    card_url = url.rstrip("/") + CARD_PATH
    try:
        async with http.stream("GET", card_url) as response:
            if response.status_code != 200:
                raise A2ACardError(
                    f"the agent card at {card_url} answered HTTP {response.status_code}"
                )
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > MAX_CARD_BYTES:
                raise A2ACardError(
                    f"the agent card at {card_url} is {int(declared):,} bytes "
                    f"(at most {MAX_CARD_BYTES:,})"
                )
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_CARD_BYTES:
                    raise A2ACardError(
                        f"the agent card at {card_url} is over {MAX_CARD_BYTES:,} bytes"
                    )
    except httpx.HTTPError as exc:
        raise A2ACardError(f"the agent card at {card_url} could not be read: {exc}") from exc
    try:
        data = json.loads(bytes(body))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return parse_agent_card(data)
    except (ValueError, ParseError, TypeError, KeyError) as exc:
        raise A2ACardError(
            f"the agent card at {card_url} is not a valid card: {exc}"[:500]
        ) from exc


def origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


def check_interfaces(card: AgentCard, url: str) -> None:
    """Every transport the card offers is on the card's own origin (the credentials stay there)."""
    home = origin(url)
    for interface in card.supported_interfaces:
        if origin(interface.url) != home:
            raise A2ACardError(
                f"the agent card at {url} names a transport on another origin "
                f"({sanitize(interface.url, 200, lines=False)!r}); refused, so the "
                "credentials are never sent there"
            )
