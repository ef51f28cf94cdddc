"""Caller: who a call is made for, as the engine verified it.

A :class:`Caller` is built by whatever authenticated the request (the
application for an in-process call, a signature check for a remote engine,
the server's auth for an HTTP client) and then only read. Request metadata
travels beside it and is never an authorization source: two callers with the
same metadata are different callers, and a caller's rights come from its
``id``, ``kind`` and the engine's management policy alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["ANONYMOUS", "Caller", "CallerKind"]

CallerKind = Literal["anonymous", "user", "engine", "service"]
"""How the caller was identified: not at all, a person, another engine (a signed
request, ``id`` is its key's handle), or a service of the application."""


@dataclass(frozen=True, slots=True)
class Caller:
    """A verified principal: ``id`` is unique within its ``kind``."""

    id: str
    kind: CallerKind = "user"
    via: tuple[str, ...] = field(default=())
    """Engines the request came through, nearest last (informational)."""

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("a caller needs an id")
        if (self.kind == "anonymous") != (self.id == "anonymous"):
            raise ValueError("only the anonymous caller is called 'anonymous'")

    @property
    def anonymous(self) -> bool:
        """Nobody identified this caller."""
        return self.kind == "anonymous"

    @property
    def key(self) -> str:
        """``kind:id``: the caller's identity as one string (scopes, locks, stores)."""
        return f"{self.kind}:{self.id}"


ANONYMOUS = Caller("anonymous", kind="anonymous")
"""The caller of a request nobody authenticated."""
