"""The run's one writer: each step boundary goes on record in one commit.

A durable run has three kinds of facts to save: the events the client is about
to see (the checkpoint log), write-ledger entries, and the session state with
its turn record. The :class:`Journal` owns all three for one run. Every commit
takes whatever is pending at that moment — the events emitted so far, the
ledger entries, the state when a step asked for it — and writes them together:
in one transaction when the session store joins the checkpoint store
(:class:`~mainspring.stores.base.JointCommit`: SQLite files, memory), else one
store at a time in :class:`~mainspring.stores.base.Commit`'s order.

Commits are serialized; one that waits behind another takes everything that
piled up meanwhile (group commit within the run). Events reach the consumer
only once they are on record. The commit that records the terminal event also
records the run's end (``active_stream`` cleared, ``last_stream`` and
``last_terminal`` set), so a run that ends naturally needs no further save.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import cast

import anyio

from mainspring._lowlevel.relay import Relay
from mainspring.errors import LeaseLost
from mainspring.events import ErrorEvent, Event, TurnComplete
from mainspring.state import SessionState, SpendKind, WriteRecord
from mainspring.stores.base import (
    CheckpointStore,
    Commit,
    JointCommit,
    JointLease,
    RunLock,
    SessionStore,
    SpendHolds,
    SpendLedger,
)

__all__ = ["Journal"]


class Journal:
    """Puts one run's events, ledger entries and state on record, step by step."""

    def __init__(
        self,
        *,
        state: SessionState,
        sessions: SessionStore | None,
        checkpoints: CheckpointStore | None,
        stream_id: str,
        relay: Relay[Event],
        outbox: Relay[Event],
        clear: str | None = None,
        lease: tuple[RunLock, str] | None = None,
    ) -> None:
        """Bind to a run.

        ``relay`` receives the run's events and ``outbox`` the ones on record (the
        same relay without a checkpoint store); ``clear`` is the previous stream, whose log the
        first commit drops; ``lease`` is the run lock and owner the run holds the
        session's lease as, which the commit of its end drops where it can (the
        lock lives in the session store's database: :attr:`released`).
        """
        self._state = state
        self._sessions = sessions
        self._checkpoints = checkpoints
        self._joint = _joint(sessions, checkpoints)
        self._release: tuple[str, str] | None = None
        if lease is not None and _holds(self._joint, lease[0]):
            self._release = (state.session_id, lease[1])
        self.stream_id = stream_id
        self._relay = relay
        self._outbox = outbox
        self._clear = clear
        self._lock = anyio.Lock(fast_acquire=True)  # no loop trip when uncontended
        self._writes: list[WriteRecord] = []
        self._state_due = sessions is not None  # the first commit puts the run on record
        self.ended = False
        """Whether a commit recorded the run's terminal event and its end."""
        self.released = False
        """Whether that commit dropped the run's lease too."""
        self.fenced: str | None = None
        """Why nothing more may go on record (the run lost its lease), once it did."""

    def fence(self, reason: str) -> None:
        """Refuse every later commit: the run no longer owns the session."""
        self.fenced = reason

    async def save(self, *, defer: bool = False) -> None:
        """The state as it is now (and every event emitted before it), on record.

        With ``defer``, the state goes with the next commit instead: a ledger
        entry's, the next batch of events, the terminal event's — or, without a
        checkpoint store, the save at the run's end (the session always makes it).
        """
        self._state_due = self._sessions is not None
        if defer:
            return
        await self._commit(sync=False)

    async def flush(self) -> None:
        """Before a terminal event: a deferred state goes now without a checkpoint store.

        With one, the terminal event's own commit carries it (the client sees
        the event only once it is on record); without one the client sees it at
        once, so what it reports (a pause, an answer) is saved first.
        """
        if self._state_due and self._checkpoints is None:
            await self._commit(sync=False)

    async def record_write(self, record: WriteRecord) -> None:
        """A ledger entry on disk (fsynced), with whatever else is pending."""
        self._writes.append(record)
        await self._commit(sync=True)

    async def add_spend(
        self,
        kind: SpendKind,
        amount: float,
        *,
        cap: float | None,
        floor: float,
        hold: str | None = None,
    ) -> float | None:
        """Add to a spend total in the session store, atomically across workers.

        A store without a :class:`~mainspring.stores.base.SpendLedger` holds
        this worker's total only; ``hold`` is kept where the store has
        :class:`~mainspring.stores.base.SpendHolds`.
        """
        sessions: object = self._sessions
        if hold is not None and isinstance(sessions, SpendHolds):
            return await sessions.add_spend(
                self._state.session_id, kind, amount, cap=cap, floor=floor, hold=hold
            )
        if isinstance(sessions, SpendLedger):
            return await sessions.add_spend(
                self._state.session_id, kind, amount, cap=cap, floor=floor
            )
        total = floor + amount
        return None if cap is not None and total > cap else total

    async def take(self) -> list[Event] | None:
        """The consumer's next events, each on record before it is handed over.

        ``None`` once the run is over and everything went out. What the run
        emitted since the last commit is committed here, in the consumer's task
        (no writer task of its own): everything queued by the time the consumer
        comes for more goes in one commit, so a busy run's burst of events is one
        transaction (group commit), and the bounded relay holds the run back
        while the consumer is slow. A store failure raises here.

        A commit of a store that joins the checkpoints (one transaction, encoded
        before it first awaits) needs no shield: uncontended it never yields, and
        a cancel that comes while it waits for the lock or the database leaves
        nothing half done. Other stores' commits are shielded.
        """
        relay, outbox = self._relay, self._outbox
        while True:
            if len(outbox):
                return outbox.drain()
            if len(relay):
                if self._joint is not None:
                    await self._commit_locked(sync=False)
                else:
                    await self._commit(sync=False)
                continue
            if not await relay.wait():
                return outbox.drain() or None

    async def _commit(self, *, sync: bool) -> None:
        if self._joint is not None and not sync:
            # One transaction, encoded before it first awaits: uncontended it never
            # yields, and a cancel while it waits for a lock leaves it undone and the
            # state still due (as in take). (A shield costs a cancel scope a save.)
            await self._commit_locked(sync=False)
            return
        # Shielded from the wait for the lock on: a commit is never half-waited for
        # (a ledger entry goes on record before its write runs, or the write is not run).
        with anyio.CancelScope(shield=True):
            await self._commit_locked(sync=sync)

    async def _commit_locked(self, *, sync: bool) -> None:
        lock = self._lock
        if lock.locked():
            await lock.acquire()
        else:  # (no checkpoint: a free lock is taken without asking anyio about cancels)
            lock.acquire_nowait()
        try:
            await self._commit_pending(sync=sync)
        finally:
            lock.release()

    async def _commit_pending(self, *, sync: bool) -> None:
        if self.fenced is not None:
            raise LeaseLost(self.fenced)
        events = tuple(self._relay.drain()) if self._checkpoints is not None else ()
        writes, self._writes = tuple(self._writes), []
        sync = sync or bool(writes)  # a ledger entry is fsynced, whoever commits it
        terminal = _terminal(events) if events else None
        if terminal is not None:
            self._end(terminal)
        if not (events or writes or self._state_due or self._clear):
            return  # a commit we waited for took it all
        state = None
        if self._state_due:
            state = self._state if self._joint is not None else _snapshot(self._state)
        commit = Commit(
            session_id=self._state.session_id,
            state=state,
            writes=writes,
            stream_id=self.stream_id if events else None,
            events=events,
            clear=self._clear,
            sync=sync,
            release=self._release if terminal is not None else None,
        )
        # Taken now: a save asked for while this commit is on its way is the next one's.
        self._state_due, self._clear = False, None
        try:
            await self._apply(commit)
        except BaseException:
            # Nothing of it is on record: all it took goes with the next commit. (A
            # consumer's commit cancelled while it waited for the database must not
            # take with it a ledger entry the run then believes saved.)
            self._state_due = True if state is not None else self._state_due
            self._clear = commit.clear if commit.clear is not None else self._clear
            self._writes[:0] = writes
            if events:
                self._relay.put_back(events)
            raise
        self.ended = self.ended or terminal is not None
        self.released = self.released or commit.release is not None
        if events:
            self._outbox.put_many(events)
            self._relay.wake()  # a consumer waiting for events finds them in the outbox

    def _end(self, terminal: TurnComplete | ErrorEvent) -> None:
        self._state.end_stream(self.stream_id, terminal)
        self._state_due = self._sessions is not None

    async def _apply(self, commit: Commit) -> None:
        if self._joint is not None:
            await self._joint.commit(commit, self._checkpoints)
            return
        sessions, checkpoints = self._sessions, self._checkpoints
        if commit.clear is not None and checkpoints is not None:
            await checkpoints.clear(commit.clear)
        if sessions is not None:
            for record in commit.writes:
                await sessions.record_write(commit.session_id, record)
            if commit.state is not None:
                await sessions.save(commit.state)
        if commit.events and checkpoints is not None:
            await checkpoints.append_many(self.stream_id, commit.events)


_TERMINAL = (TurnComplete, ErrorEvent)


def _terminal(events: tuple[Event, ...]) -> TurnComplete | ErrorEvent | None:
    """The terminal event among ``events``, if any."""
    for event in events:
        if isinstance(event, _TERMINAL):
            return event
    return None


def _snapshot(state: SessionState) -> SessionState:
    """A copy the run's later steps cannot change while a remote store saves it.

    (A joint commit encodes the state before it first awaits, so it needs none.)
    """
    return dataclasses.replace(
        state,
        messages=list(state.messages),  # messages themselves are immutable
        decided=dict(state.decided),
        writes=dict(state.writes),
        turn=copy.deepcopy(state.turn),
    )


def _holds(joint: JointCommit | None, lock: RunLock) -> bool:
    """Whether ``joint`` can drop ``lock``'s leases in its commits."""
    return _is(joint, JointLease) and cast(JointLease, joint).holds(lock)


def _joint(sessions: object, checkpoints: CheckpointStore | None) -> JointCommit | None:
    """``sessions`` if it commits a step with ``checkpoints`` in one transaction."""
    if not _is(sessions, JointCommit):
        return None
    store = cast(JointCommit, sessions)
    return store if store.joins(checkpoints) else None


_CONFORMS: dict[tuple[type, type], bool] = {}
"""Whether a class is an optional store protocol (a runtime protocol check costs ~15 us)."""


def _is(store: object, protocol: type) -> bool:
    key = (type(store), protocol)
    conforms = _CONFORMS.get(key)
    if conforms is None:
        conforms = _CONFORMS[key] = isinstance(store, protocol)
    return conforms
