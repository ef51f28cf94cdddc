"""Caller: who a call is made for, as the engine verified it.

A :class:`Caller` is built by whatever authenticated the request (the
application for an in-process call, a signature check for a remote engine,
the server's auth for an HTTP client) and then only read. Request metadata
travels beside it and is never an authorization source: two callers with the
same metadata are different callers, and a caller's rights come from its
``id``, ``kind`` and the engine's management policy alone.

Data a caller keeps through the default toolkits (memories, notes,
artifacts, todo lists) lives under :func:`data_scope`: the caller and the
agent, each part written with :func:`encode_segment`, an injective encoding
into letters, digits, ``-`` and ``_`` (so ``team x``, ``team/x`` and
``team_x`` stay three names, and no name can reach into another's path).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "ANONYMOUS",
    "Caller",
    "CallerKind",
    "data_scope",
    "encode_segment",
    "identity_path",
]

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

    @property
    def path(self) -> str:
        """``<kind>/<id>`` with :func:`encode_segment` applied: a store path, injective."""
        return identity_path(self.kind, self.id)


ANONYMOUS = Caller("anonymous", kind="anonymous")
"""The caller of a request nobody authenticated."""


_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")
MAX_SEGMENT = 128
"""The longest encoded segment; a longer one is written as its SHA-256 (``_h…``)."""


def encode_segment(text: str) -> str:
    """``text`` as one path segment of ``[A-Za-z0-9_-]``, injectively.

    Letters, digits and ``-`` stay; ``_`` becomes ``__``; every other
    character becomes ``_`` and two lowercase hex digits per UTF-8 byte. The
    empty string is ``_z``; an encoding over :data:`MAX_SEGMENT` characters
    is ``_h`` and the SHA-256 of ``text`` (neither ``_z`` nor ``_h`` is the
    start of any other encoding, since an escape is ``__`` or ``_<hex>``).
    """
    if not text:
        return "_z"
    out: list[str] = []
    for char in text:
        if char in _PLAIN:
            out.append(char)
        elif char == "_":
            out.append("__")
        else:
            out.extend(f"_{byte:02x}" for byte in char.encode("utf-8"))
    encoded = "".join(out)
    if len(encoded) > MAX_SEGMENT:
        return "_h" + hashlib.sha256(text.encode("utf-8")).hexdigest()
    return encoded


def identity_path(*parts: str) -> str:
    """``parts`` each encoded with :func:`encode_segment`, joined with ``/``."""
    return "/".join(encode_segment(part) for part in parts)


def data_scope(caller: Caller, agent: str) -> str:
    """Where ``caller``'s data with ``agent`` lives: ``principal/<kind>/<id>/agent/<agent>``.

    The default scope of memories, notes and artifacts: another caller (or
    the same caller with another agent) never has the same one.
    """
    return f"principal/{caller.path}/agent/{encode_segment(agent)}"
