"""Paused engine calls and runs, parked in the deployment's shared store.

A direct tool call or an agent run that waits on a decision is parked as one
shared record (``SharedRecords``): its session state, what it was (a tool
call and its arguments, or an agent run), its scope and metadata. The key
holds the engine's name, the caller's key and the attempt id, so only that
caller finds it; the owner is the engine and the caller, so each caller holds at most
:data:`MAX_PAUSED` of them in one engine (the next one is refused with ``CallerBusy``,
HTTP 409 on the signed route). Deciding *takes* the record — of two workers
deciding the same attempt, one gets it — and rebuilds the call or run on
whichever worker the decision reached.

The subagent sessions of a run's scope are shared records too
(:mod:`mainspring.engine.members`), so the worker that goes on continues them
with their histories.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

from pydantic import JsonValue

from mainspring.codec import decode, encode
from mainspring.errors import CallerBusy, StoreError
from mainspring.events import PendingAction
from mainspring.state import SessionState
from mainspring.stores.base import SharedRecords

__all__ = ["MAX_PAUSED", "PAUSED_KIND", "PAUSED_TTL", "Parked", "park", "parked", "unpark"]

PAUSED_KIND = "engine-paused"
"""The kind of the shared records that hold paused calls and runs."""
MAX_PAUSED = 100
"""Paused calls and runs one caller may hold at once, across an engine's workers."""
PAUSED_TTL = 7 * 24 * 3600.0
"""Seconds a paused call or run waits for its decision before it is forgotten."""


@dataclass(slots=True, kw_only=True)
class Parked:
    """What a paused call or run needs to go on, on any worker."""

    kind: Literal["call", "run"]
    name: str
    """The tool called, or the agent run."""
    state: SessionState
    scope: str
    metadata: dict[str, str] = field(default_factory=dict)
    arguments: dict[str, JsonValue] = field(default_factory=dict)

    @property
    def pending(self) -> PendingAction | None:
        """The action it waits on."""
        return self.state.pending

    def dumps(self) -> str:
        """As JSON text (the record's value)."""
        data = {
            "kind": self.kind,
            "name": self.name,
            "scope": self.scope,
            "metadata": dict(self.metadata),
            "arguments": self.arguments,
            "state": encode(self.state),
        }
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def loads(cls, text: str) -> Parked:
        """The record :meth:`dumps` wrote.

        Raises:
            StoreError: It cannot be decoded.
        """
        try:
            data = json.loads(text)
            kind = data["kind"]
            if kind not in ("call", "run"):
                raise ValueError(f"unknown kind {kind!r}")
            return cls(
                kind=kind,
                name=str(data["name"]),
                scope=str(data["scope"]),
                metadata={str(k): str(v) for k, v in data["metadata"].items()},
                arguments=dict(data["arguments"]),
                state=decode(SessionState, data["state"]),
            )
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise StoreError(f"a paused engine call cannot be decoded: {exc}") from exc


def _key(engine: str, caller: str, attempt_id: str) -> str:
    return json.dumps([engine, caller, attempt_id], ensure_ascii=False)


def _owner(engine: str, caller: str) -> str:
    return json.dumps([engine, caller], ensure_ascii=False)


async def park(
    records: SharedRecords, engine: str, caller: str, attempt_id: str, parked: Parked
) -> None:
    """Park a paused call or run of ``caller``'s.

    Raises:
        CallerBusy: The caller holds :data:`MAX_PAUSED` paused calls and runs.
    """
    added = await records.put_record(
        PAUSED_KIND,
        _key(engine, caller, attempt_id),
        parked.dumps(),
        owner=_owner(engine, caller),
        ttl=PAUSED_TTL,
        limit=MAX_PAUSED,
    )
    if added == "full":
        raise CallerBusy(
            f"caller {caller!r} holds {MAX_PAUSED} paused calls and runs in engine"
            f" {engine!r} (the limit): decide one first"
        )
    if added == "exists":  # an attempt id is unique: never two pauses on one
        raise StoreError(f"attempt {attempt_id!r} is parked already")


async def unpark(
    records: SharedRecords, engine: str, caller: str, attempt_id: str
) -> Parked | None:
    """Take ``caller``'s paused call or run waiting on ``attempt_id`` (once, across workers)."""
    taken = await records.take_record(PAUSED_KIND, _key(engine, caller, attempt_id))
    return None if taken is None else Parked.loads(taken[1])


async def parked(records: SharedRecords, engine: str, caller: str) -> list[Parked]:
    """``caller``'s paused calls and runs of ``engine``, in attempt id order."""
    found = await records.owned_records(PAUSED_KIND, _owner(engine, caller), limit=MAX_PAUSED)
    return [Parked.loads(value) for _, value in found]
