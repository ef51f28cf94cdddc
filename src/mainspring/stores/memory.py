"""In-memory stores, for tests and single-process use.

They go through the JSON codec like every durable store, so anything that
cannot be persisted fails here first, not in a durable backend later. (An
event or message whose encoding cannot fail, field by field, is kept as it is
and encoded when it is loaded: it is immutable, and its fields are stored by
reference either way.)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from typing import cast

from mainspring._lowlevel.json_value import JsonValue
from mainspring.codec import (
    PLAIN_EVENTS,
    encode,
    event_to_dict,
    is_plain_event,
    is_plain_message,
    message_to_dict,
)
from mainspring.events import Event
from mainspring.messages import Message
from mainspring.state import SessionState, WriteRecord, state_from_stored
from mainspring.stores._log import check_cursor, decode_log
from mainspring.stores._transcript import common_prefix, header
from mainspring.stores.base import CheckpointStore, Commit, RunLock, SpendKind
from mainspring.stores.records import InMemoryRecords

__all__ = ["InMemoryCheckpointStore", "InMemoryRunLock", "InMemorySessionStore"]

Clock = Callable[[], float]
Record = JsonValue | Event
"""A log's record: an event's JSON data, or a plain event itself (``is_plain_event``)."""


def _records(events: Sequence[Event]) -> list[Record]:
    """``events`` as log records: each encoded now unless its encoding cannot fail."""
    plain = PLAIN_EVENTS
    return [event if type(event) in plain else event_to_dict(event) for event in events]


def _data(record: Record) -> JsonValue:
    """A log record's JSON data (a plain event encoded now)."""
    return event_to_dict(cast(Event, record)) if is_plain_event(record) else cast(JsonValue, record)


class InMemoryCheckpointStore:
    """Event logs in a dict, each expiring ``ttl`` seconds after its last append."""

    def __init__(self, *, ttl: float = 300.0, clock: Clock = time.monotonic) -> None:
        """Create an empty store (sliding TTL, 5 minutes by default)."""
        self._ttl = ttl
        self._clock = clock
        self._logs: dict[str, tuple[float, list[Record]]] = {}

    def _expire(self) -> None:
        # Logs are kept in order of their last append, so expiry looks at the front
        # only: O(expired logs), never a copy of the whole table.
        now, logs = self._clock(), self._logs
        while logs:
            key = next(iter(logs))
            if now - logs[key][0] <= self._ttl:
                break
            del logs[key]

    async def append(self, stream_id: str, event: Event) -> None:
        """Append one event and refresh the stream's TTL."""
        await self.append_many(stream_id, (event,))

    async def append_many(self, stream_id: str, events: Sequence[Event]) -> None:
        """Append events and refresh the stream's TTL."""
        self._extend(stream_id, _records(events))

    def _extend(self, stream_id: str, data: list[Record]) -> None:
        self._expire()
        _, log = self._logs.pop(stream_id, (0.0, []))
        log.extend(data)
        self._logs[stream_id] = (self._clock(), log)

    async def load(self, stream_id: str) -> list[Event]:
        """Every event of the stream, in order."""
        self._expire()
        entry = self._logs.get(stream_id)
        if entry is None:
            return []
        return decode_log(stream_id, [_data(record) for record in entry[1]])

    async def load_after(self, stream_id: str, cursor: int) -> list[Event]:
        """The stream's events from position ``cursor`` on (see :class:`~.base.TailLoad`).

        Raises:
            ValueError: ``cursor`` is negative.
        """
        check_cursor(cursor)
        self._expire()
        entry = self._logs.get(stream_id)
        if entry is None:
            return []
        tail = entry[1][cursor:]
        return decode_log(stream_id, [_data(record) for record in tail], start=cursor)

    async def clear(self, stream_id: str) -> None:
        """Drop the stream's log."""
        self._logs.pop(stream_id, None)

    async def aclose(self) -> None:
        """Nothing to release."""


class _Stored:
    """A session's stored transcript: its messages (references) and their JSON data.

    (Each plain message's data is the message itself, encoded when loaded.)
    """

    __slots__ = ("data", "messages")

    def __init__(self, messages: list[Message], data: list[JsonValue | Message]) -> None:
        self.messages = messages
        self.data = data


class _Save:
    """A state encoded for :meth:`InMemorySessionStore._put`: only what it has not stored."""

    __slots__ = ("header", "keep", "new", "state")

    def __init__(self, store: InMemorySessionStore, state: SessionState) -> None:
        self.state = state
        self.header = header(state)
        stored = store._transcripts.get(state.session_id)
        self.keep = 0 if stored is None else common_prefix(state.messages, stored.messages)
        self.new: list[JsonValue | Message] = [
            m if is_plain_message(m) else message_to_dict(m) for m in state.messages[self.keep :]
        ]


class InMemorySessionStore(InMemoryRecords):
    """Session states as JSON data in dicts (and shared records: ``SharedRecords``).

    A save encodes the state's header and only the messages it has not stored
    (the transcript is append-only and messages are immutable): the messages
    it stored are known by reference.
    """

    def __init__(self, *, run_lock: InMemoryRunLock | None = None) -> None:
        """Create an empty store.

        With ``run_lock`` (``open_stores("memory://")`` passes its own), the commit
        of a run's end drops the run's lease there too (``JointLease``).
        """
        super().__init__()
        self._run_lock = run_lock
        self._states: dict[str, dict[str, JsonValue]] = {}
        self._transcripts: dict[str, _Stored] = {}
        self._decisions: dict[str, dict[str, str]] = {}
        self._writes: dict[str, dict[str, JsonValue]] = {}
        self._spend: dict[tuple[str, str], float] = {}
        self._holds: dict[tuple[str, str], dict[str, float]] = {}

    async def save(self, state: SessionState) -> None:
        """Replace the stored state (recorded decisions and ledger entries are kept)."""
        self._put(_Save(self, state))

    def _put(self, save: _Save) -> None:
        state = save.state
        sid = state.session_id
        decided = self._decisions.setdefault(sid, {})
        for attempt_id, decision in state.decided.items():
            decided.setdefault(attempt_id, decision)
        writes = self._writes.setdefault(sid, {})
        for key, record in state.writes.items():
            # Only fill gaps: a stale state never moves an entry back (nor is an
            # entry on record encoded again at each save).
            if key not in writes:
                writes[key] = encode(record)
        stored = self._transcripts.get(sid)
        data: list[JsonValue | Message] = [] if stored is None else stored.data
        del data[save.keep :]
        data.extend(save.new)
        self._transcripts[sid] = _Stored(list(state.messages), data)
        self._states[sid] = save.header

    async def load(self, session_id: str) -> SessionState | None:
        """The stored state with every recorded decision and ledger entry."""
        head = self._states.get(session_id)
        if head is None:
            return None
        stored = self._transcripts[session_id]
        messages: list[JsonValue] = [
            message_to_dict(m) if isinstance(m, Message) else m for m in stored.data
        ]
        data: dict[str, JsonValue] = {**head, "messages": messages}
        state = state_from_stored(data, self._writes.get(session_id, {}).items())
        state.decided = dict(self._decisions.get(session_id, {}))
        return state

    async def delete(self, session_id: str) -> None:
        """Forget a session."""
        self._states.pop(session_id, None)
        self._transcripts.pop(session_id, None)
        self._decisions.pop(session_id, None)
        self._writes.pop(session_id, None)
        for kind in ("auto", "cost"):
            self._spend.pop((session_id, kind), None)
            self._holds.pop((session_id, kind), None)

    async def session_ids(self, *, limit: int = 100, principal: str | None = None) -> list[str]:
        """Stored session ids (only ``principal``'s, if given), sorted, at most ``limit``."""
        ids = sorted(self._states)
        if principal is not None:
            ids = [sid for sid in ids if self._principal(sid) == principal]
        return ids[: max(limit, 0)]

    def _principal(self, session_id: str) -> JsonValue:
        data = self._states.get(session_id)
        return None if data is None else data.get("principal")

    async def claim_decision(self, session_id: str, attempt_id: str, decision: str) -> bool:
        """Record the decision unless one was already recorded."""
        decided = self._decisions.setdefault(session_id, {})
        if attempt_id in decided:
            return False
        decided[attempt_id] = decision
        return True

    async def release_claim(self, session_id: str, attempt_id: str, decision: str) -> bool:
        """Drop the claim of ``attempt_id`` if it is still ``decision`` (see ``ClaimRelease``)."""
        decided = self._decisions.get(session_id, {})
        if decided.get(attempt_id) != decision:
            return False
        del decided[attempt_id]
        return True

    async def record_write(self, session_id: str, record: WriteRecord) -> None:
        """Upsert one ledger entry."""
        self._writes.setdefault(session_id, {})[record.key] = encode(record)

    async def add_spend(
        self,
        session_id: str,
        kind: SpendKind,
        amount: float,
        *,
        cap: float | None = None,
        floor: float = 0.0,
        hold: str | None = None,
    ) -> float | None:
        """Add to a spend total unless it would pass ``cap`` (see ``SpendHolds``)."""
        total = max(self._spend.get((session_id, kind), 0.0), floor) + amount
        if cap is not None and total > cap:
            return None
        self._spend[(session_id, kind)] = total
        if hold is not None:
            held = self._holds.setdefault((session_id, kind), {})
            held[hold] = held.get(hold, 0.0) + amount
        return total

    async def release_holds(
        self, session_id: str, kind: SpendKind, started: Collection[str]
    ) -> float | None:
        """Give back the holds of writes that never started; drop every hold."""
        held = self._holds.pop((session_id, kind), {})
        total = self._spend.get((session_id, kind))
        if total is None:
            return None
        back = sum(amount for key, amount in held.items() if key not in started)
        total = self._spend[(session_id, kind)] = max(total - back, 0.0)
        return total

    def joins(self, checkpoints: CheckpointStore | None) -> bool:
        """Whether ``checkpoints`` is an in-memory store too (or ``None``)."""
        return checkpoints is None or isinstance(checkpoints, InMemoryCheckpointStore)

    def holds(self, lock: RunLock | None) -> bool:
        """Whether ``lock`` is the run lock this store was made with (``JointLease``)."""
        return lock is not None and lock is self._run_lock

    async def commit(self, commit: Commit, checkpoints: CheckpointStore | None) -> None:
        """Apply a step boundary at once: nothing else runs in between."""
        # Encode everything first: a value that cannot be stored changes nothing.
        writes = [(r.key, encode(r)) for r in commit.writes] if commit.writes else []
        events = _records(commit.events)
        save = None if commit.state is None else _Save(self, commit.state)
        logs = checkpoints if isinstance(checkpoints, InMemoryCheckpointStore) else None
        if commit.clear is not None and logs is not None:
            logs._logs.pop(commit.clear, None)
        if writes:
            self._writes.setdefault(commit.session_id, {}).update(writes)
        if save is not None:
            self._put(save)
        if events and logs is not None and commit.stream_id is not None:
            logs._extend(commit.stream_id, events)
        if commit.release is not None and self._run_lock is not None:
            self._run_lock._drop(*commit.release)

    async def aclose(self) -> None:
        """Nothing to release."""


class InMemoryRunLock:
    """Leases in a dict: one process only."""

    def __init__(self, *, clock: Clock = time.monotonic) -> None:
        """Create an empty lock table."""
        self._clock = clock
        self._leases: dict[str, tuple[str, float]] = {}

    def _live(self, key: str) -> tuple[str, float] | None:
        lease = self._leases.get(key)
        if lease is not None and lease[1] <= self._clock():
            del self._leases[key]
            return None
        return lease

    async def acquire(self, key: str, owner: str, *, ttl: float) -> bool:
        """Take the lease unless another owner holds a live one."""
        lease = self._live(key)
        if lease is not None and lease[0] != owner:
            return False
        self._leases[key] = (owner, self._clock() + ttl)
        return True

    async def refresh(self, key: str, owner: str, *, ttl: float) -> bool:
        """Extend this owner's live lease."""
        lease = self._live(key)
        if lease is None or lease[0] != owner:
            return False
        self._leases[key] = (owner, self._clock() + ttl)
        return True

    async def release(self, key: str, owner: str) -> None:
        """Drop this owner's lease."""
        self._drop(key, owner)

    def _drop(self, key: str, owner: str) -> None:
        lease = self._live(key)
        if lease is not None and lease[0] == owner:
            del self._leases[key]

    async def holder(self, key: str) -> str | None:
        """The owner of the live lease, if any."""
        lease = self._live(key)
        return lease[0] if lease else None

    async def aclose(self) -> None:
        """Nothing to release."""
