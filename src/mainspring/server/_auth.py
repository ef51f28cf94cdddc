"""Who is calling: principals, credentials and the pluggable authenticator.

The server is private by default: every route but health, readiness and the
OpenAPI document needs a credential, and every session belongs to the
principal that created it. :class:`ApiKeys` maps configured keys (sent as
``Authorization: Bearer <key>`` or ``X-API-Key: <key>``) to principals; a host
with its own authentication passes any async callable that turns a request
into a :class:`Principal` (or ``None`` to refuse it).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from starlette.requests import HTTPConnection

from mainspring.errors import ConfigError

__all__ = [
    "ANONYMOUS",
    "ApiKeys",
    "Authenticator",
    "Principal",
    "credential_of",
    "parse_keys",
]


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller; ``id`` owns the sessions it creates."""

    id: str
    anonymous: bool = False


ANONYMOUS = Principal("anonymous", anonymous=True)
"""The caller of a ``--public`` server who sent no credential."""

Authenticator = Callable[[HTTPConnection], Awaitable[Principal | None]]
"""Turns a request into the principal making it, or ``None`` to refuse it (401)."""


def credential_of(conn: HTTPConnection) -> str | None:
    """The credential a request carries: a bearer token or an ``X-API-Key``."""
    auth = conn.headers.get("authorization", "")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    key = conn.headers.get("x-api-key", "").strip()
    return key or None


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


class ApiKeys:
    """An authenticator over configured keys: ``{key: principal id}``.

    Keys are held only as SHA-256 digests and compared in constant time, so
    neither the table nor the timing of a refusal tells a caller anything.
    """

    def __init__(self, keys: Mapping[str, str]) -> None:
        """Map each key to the principal it authenticates.

        Raises:
            ConfigError: A key shorter than 16 characters, or an empty principal.
        """
        self._keys: list[tuple[bytes, Principal]] = []
        for key, principal in keys.items():
            if len(key) < 16:
                raise ConfigError("an API key must be at least 16 characters long")
            if not principal or not principal.strip():
                raise ConfigError("an API key needs a principal name")
            self._keys.append((_digest(key), Principal(principal)))

    @classmethod
    def parse(cls, text: str) -> ApiKeys:
        """Keys from ``principal=key`` entries (see :func:`parse_keys`)."""
        return cls(parse_keys(text))

    @staticmethod
    def generate() -> str:
        """A fresh random key (for a server started without any)."""
        return secrets.token_urlsafe(24)

    def __len__(self) -> int:
        return len(self._keys)

    async def __call__(self, conn: HTTPConnection) -> Principal | None:
        """The principal of the request's key, if it is one of ours."""
        credential = credential_of(conn)
        if credential is None:
            return None
        digest = _digest(credential)
        found: Principal | None = None
        for known, principal in self._keys:  # no early exit: constant time in the keys
            if hmac.compare_digest(known, digest):
                found = principal
        return found


def parse_keys(text: str) -> dict[str, str]:
    """``{key: principal}`` from ``principal=key`` entries separated by commas or new lines.

    Blank lines and ``#`` comments are skipped.

    Raises:
        ConfigError: An entry without ``=``.
    """
    keys: dict[str, str] = {}
    for raw in text.replace(",", "\n").splitlines():
        entry = raw.strip()
        if not entry or entry.startswith("#"):
            continue
        principal, sep, key = entry.partition("=")
        if not sep:
            raise ConfigError(f"an API key entry is principal=key, got {entry[:20]!r}…")
        keys[key.strip()] = principal.strip()
    return keys
