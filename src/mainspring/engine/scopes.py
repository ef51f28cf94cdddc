"""An engine's scopes (:meth:`Engine.new_scope`), open in the deployment's shared store.

A scope is one shared record (``SharedRecords``, kind :data:`SCOPE_KIND`)
whose key holds the engine's name, the caller's key and the scope id, owned
by the engine and the caller: so only that caller finds, uses or closes it,
on whichever worker a request reaches, and a caller holds at most the
engine's ``max_scopes_per_caller`` open at once (the store counts them, across
workers). A scope stays open until it is closed (:data:`SCOPE_TTL` is only a
backstop that forgets a scope nobody closed for ten years).
"""

from __future__ import annotations

import json
import uuid

from mainspring.errors import CallerBusy
from mainspring.stores.base import SharedRecords

__all__ = ["SCOPE_KIND", "SCOPE_TTL", "close_scope", "open_scope", "open_scopes"]

SCOPE_KIND = "engine-scope"
"""The kind of the shared records that hold open scopes."""
SCOPE_TTL = 10 * 365 * 24 * 3600.0
"""Seconds an open scope is kept without being closed."""


def _key(engine: str, caller: str, scope: str) -> str:
    return json.dumps([engine, caller, scope], ensure_ascii=False)


def _owner(engine: str, caller: str) -> str:
    return json.dumps([engine, caller], ensure_ascii=False)


async def open_scope(records: SharedRecords, engine: str, caller: str, *, limit: int) -> str:
    """Open a new scope of ``caller``'s in ``engine``: its id.

    Raises:
        CallerBusy: The caller holds ``limit`` open scopes already.
    """
    scope = str(uuid.uuid4())
    added = await records.put_record(
        SCOPE_KIND,
        _key(engine, caller, scope),
        "",
        owner=_owner(engine, caller),
        ttl=SCOPE_TTL,
        limit=limit,
    )
    if added != "added":  # (a fresh UUID is never "exists")
        raise CallerBusy(
            f"caller {caller!r} holds {limit} open scopes in engine {engine!r}:"
            " close one first (close_scope)"
        )
    return scope


async def open_scopes(records: SharedRecords, engine: str, caller: str, *, limit: int) -> list[str]:
    """The ids of ``caller``'s open scopes in ``engine`` (at most ``limit``), sorted."""
    found = await records.owned_records(SCOPE_KIND, _owner(engine, caller), limit=limit)
    return sorted(str(json.loads(key)[2]) for key, _ in found)


async def close_scope(records: SharedRecords, engine: str, caller: str, scope: str) -> bool:
    """Close ``caller``'s ``scope``: whether it was open (of two closes, one gets ``True``)."""
    return await records.take_record(SCOPE_KIND, _key(engine, caller, scope)) is not None
