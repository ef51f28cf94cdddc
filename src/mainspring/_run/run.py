"""Running a session: durability, the run lock's lease, and one stream's producer and consumer.

The :class:`~mainspring.session.Session` API validates a call and hands a
stream function to :meth:`SessionRuns._stream`, which takes the session for a
run (the running flag, the lease, crash recovery), starts the producer task
(the loop; its lease renewal, a task only once due) and yields what is on
record: with a checkpoint store the consumer commits the run's events before
it yields them (:meth:`~mainspring._run.journal.Journal.take`). The lease is fenced
at writes (:meth:`SessionRuns._fence`). Stream replay from the checkpoint log
(:meth:`SessionRuns._replay`) lives here too.
A base class of ``Session``: these are its private methods, in a module of
their own so that each file holds one concept.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

from mainspring._lowlevel.lazy import lazy_module
from mainspring.agent import Agent
from mainspring.errors import (
    LeaseLost,
    SessionBusy,
    SessionClosed,
    StoreError,
)
from mainspring.events import (
    ErrorEvent,
    Event,
    StreamStarted,
    TurnComplete,
)
from mainspring.messages import Message

if TYPE_CHECKING:  # the run-time machinery loads when a session is built or first runs
    import logging

    import anyio

    import mainspring._lowlevel.background as _background
    import mainspring._lowlevel.relay as _relay
    import mainspring._run.journal as _journal
    import mainspring._run.lease as _lease
    import mainspring._run.loop as _loop
    import mainspring.cost as _costs
    import mainspring.state as _state
    from mainspring._lowlevel.relay import Relay
    from mainspring._run.dispatch import Durability
    from mainspring._run.journal import Journal
    from mainspring._run.loop import Loop
    from mainspring._run.steering import SteeringQueue
    from mainspring.context.compiler import ContextCompiler
    from mainspring.context.lifecycle import CompilerRegistry
    from mainspring.cost import CostTracker
    from mainspring.state import SessionState, WriteRecord
    from mainspring.stores.base import CheckpointStore, RunLock, SessionStore, SpendHolds
else:  # loaded on first use (an import statement in a function costs a microsecond a call)
    anyio = lazy_module("anyio")
    logging = lazy_module("logging")
    _background = lazy_module("mainspring._lowlevel.background")
    _journal = lazy_module("mainspring._run.journal")
    _lease = lazy_module("mainspring._run.lease")
    _loop = lazy_module("mainspring._run.loop")
    _relay = lazy_module("mainspring._lowlevel.relay")
    _state = lazy_module("mainspring.state")
    _costs = lazy_module("mainspring.cost")

__all__ = ["SessionRuns"]


def _holds() -> type[SpendHolds]:
    from mainspring.stores.base import SpendHolds

    return SpendHolds


def _log() -> logging.Logger:
    return logging.getLogger("mainspring.session")


class SessionRuns:
    """The run machinery of :class:`~mainspring.session.Session` (its base class)."""

    # What the session provides (set in its __init__).
    agent: Agent
    checkpoint_store: CheckpointStore | None
    session_store: SessionStore | None
    run_lock: RunLock | None
    when_busy: Literal["error", "wait"]
    lock_ttl: float
    buffer_events: int
    _state: SessionState
    _registry: CompilerRegistry[Message] | None
    _context: ContextCompiler[Message]
    _tracker: CostTracker | None = None
    """The cost tracker of the run going on (made by it, dropped at its end: the state
    holds the same usage and cost, kept up to date by the run, a kept session no tracker)."""
    _spend_account: Durability | None = None
    """Without a session store: where the run's spend totals are shared (a direct
    call's account in a store, see :mod:`mainspring._direct`), else ``None``."""
    _unpriced: frozenset[str] = frozenset()
    """Models an earlier run found without a price (the next run's tracker starts with them)."""
    _turn_cache: dict[str, Any] | None
    _steering: SteeringQueue
    _runner: Loop | None
    _journal: Journal | None
    _handed: weakref.ref[AsyncGenerator[Event, None]] | None
    _cancel_early: bool
    _running: bool
    _closed: bool
    _live_stream: str | None
    _lease_lost: bool
    _unstored: bool
    _unchecked: bool
    _leased_at: float

    if TYPE_CHECKING:

        @property
        def session_id(self) -> str: ...

        @property
        def owner(self) -> str: ...

    # ------------------------------------------------------- durability

    async def save(self) -> None:
        """Persist the state now (a no-op without a session store)."""
        if self.session_store is not None:
            self._prepare_save()
            self._unstored = False
            await self.session_store.save(self._state)

    async def record_write(self, record: WriteRecord) -> None:
        """Persist one write-ledger entry."""
        if self.session_store is not None:
            await self.session_store.record_write(self.session_id, record)

    async def _recover(self) -> None:
        """Repair the state left by a run whose process died, on record.

        Spend the dead run reserved for auto-approved writes that never
        started (no ledger entry) is given back to the session's cap.
        """
        for record in self._recover_state():
            await self.record_write(record)
        store: object = self.session_store
        if isinstance(store, _holds()):
            total = await store.release_holds(self.session_id, "auto", set(self._state.writes))
            if total is not None:
                self._state.auto_spent_usd = total
        await self.save()

    def _recover_state(self) -> list[WriteRecord]:
        from mainspring._run.recovery import recover_interrupted

        unknown = recover_interrupted(self._state, lambda m: self._context.append((m,)))
        if unknown:
            _log().warning(
                "session %s: writes of unknown outcome after a crash: %s",
                self.session_id,
                ", ".join(f"{r.tool} {r.key} attempt={r.attempt_id}" for r in unknown),
            )
        return unknown

    async def _acquire(self) -> None:
        # No other worker can know a session nothing stored yet: its first run needs no reload.
        unstored, self._unstored = self._unstored, False
        unchecked, self._unchecked = self._unchecked, False
        lock = self.run_lock
        if lock is None:
            if unchecked:  # named, not loaded: a store may hold it already
                await self._catch_up()
            return
        while not await lock.acquire(self.session_id, self.owner, ttl=self.lock_ttl):
            if self.when_busy == "error":
                holder = await lock.holder(self.session_id)
                raise SessionBusy(
                    f"session {self.session_id!r} has an active run on worker {holder!r}"
                )
            await anyio.sleep(min(0.25, self.lock_ttl / 4))
        self._leased_at = _lease.now()
        if not unstored:
            await self._catch_up()  # another worker may have moved the session on

    async def _catch_up(self) -> None:
        """Continue from the stored state when it differs from this object's."""
        if self.session_store is None:
            return
        fresh = await self.session_store.load(self.session_id)
        if fresh is not None and fresh != self._state:
            await self._reset(fresh)

    async def _reset(self, state: SessionState) -> None:
        self._state = state
        registry = self._registry
        if registry is None:  # the session's own registry, holding its compiler
            from mainspring.context.lifecycle import CompilerRegistry

            registry = self._registry = CompilerRegistry()
            registry.create(self.session_id, lambda: self._context)
        self._context = await registry.replace(
            state.session_id,
            partial(self.agent.context_compiler, state.messages, session_id=state.session_id),
        )
        state.messages = self._context.transcript.backing
        self._drop_tracker(keep_figures=False)  # (the next run's starts from the new state)

    async def _keep_lease(self, stop: anyio.Event) -> None:
        """Renew the run's lease until ``stop`` is set (set, not cancelled: a cancel costs)."""
        lock = self.run_lock
        assert lock is not None
        # The first renewal counts from the acquire, not from this task's start (a
        # process's first run spends a while importing in between).
        wait = self._leased_at + self.lock_ttl / 3 - anyio.current_time()
        while True:
            with anyio.move_on_after(max(wait, 0.0)):
                await stop.wait()
            if stop.is_set():
                return
            wait = self.lock_ttl / 3
            try:
                kept = await lock.refresh(self.session_id, self.owner, ttl=self.lock_ttl)
            except StoreError as exc:  # a blip: try again before the lease runs out
                _log().warning("session %s: could not renew the run lock: %s", self.session_id, exc)
                continue
            if not kept:
                if not stop.is_set():  # (else the run's last commit dropped it meanwhile)
                    self._lose_lease("the lease ran out and could not be renewed")
                return

    async def _fence(self) -> None:
        """Before a write starts: renew the lease, or stop the run if it is lost.

        Renewed, the lease is this worker's for another ``lock_ttl`` seconds,
        so no other worker can take the session while the write starts.
        """
        lock = self.run_lock
        if lock is None or self._lease_lost:
            if self._lease_lost:
                raise LeaseLost(f"session {self.session_id!r}: this run lost its lock")
            return
        if not await lock.refresh(self.session_id, self.owner, ttl=self.lock_ttl):
            self._lose_lease("another worker took the session's lock before a write")
            raise LeaseLost(
                f"session {self.session_id!r}: this run lost its lock; the write did not run"
            )

    def _lose_lease(self, why: str) -> None:
        """The run no longer owns the session: it stops and records nothing more."""
        _log().error("session %s: lost the run lock: %s", self.session_id, why)
        self._lease_lost = True
        reason = f"session {self.session_id!r}: this run lost its lock ({why})"
        if self._journal is not None:
            self._journal.fence(reason)
        if self._runner is not None:
            self._runner.cancel(LeaseLost(reason))  # a running write still finishes

    async def _release(self) -> None:
        if self.run_lock is not None and not self._lease_lost:
            await self.run_lock.release(self.session_id, self.owner)

    # ------------------------------------------------------------ streams

    async def _begin(self, check: Callable[[], Awaitable[None]]) -> None:
        """Take the session for a run: the flag, the lock, crash recovery, the check."""
        if self._closed:
            raise SessionClosed(f"session {self.session_id!r} was closed (aclose)")
        if self._running:
            raise SessionBusy(f"session {self.session_id!r} already has an active run")
        self._running = True
        self._lease_lost = False
        locked = False
        try:
            await self._acquire()
            locked = True
            if self._state.active_stream is not None:
                await self._recover()  # we hold the lock: the run that set this died
            await check()
        except BaseException:
            self._running = False
            if locked:
                with anyio.CancelScope(shield=True):
                    await self._release()
            raise

    async def _stream(
        self,
        start: Callable[[Loop], Awaitable[None]],
        *,
        check: Callable[[], Awaitable[None]],
    ) -> AsyncGenerator[Event, None]:
        await self._begin(check)
        del check  # (what the frame holds stays alive while the stream is consumed)
        store = self.checkpoint_store
        relay: Relay[Event] = _relay.Relay(self.buffer_events)
        # With a checkpoint store, the journal puts each batch on record while the
        # run goes on producing the next; the consumer gets only what is on record.
        outbox: Relay[Event] = _relay.Relay(self.buffer_events) if store is not None else relay
        stream_id = _state.new_uuid4()
        journal = None
        if self.session_store is not None or store is not None:
            journal = _journal.Journal(
                state=self._state,
                sessions=self.session_store,
                checkpoints=store,
                stream_id=stream_id,
                relay=relay,
                outbox=outbox,
                prepare=self._prepare_save,
                clear=self._state.last_stream if store is not None else None,
                lease=None if self.run_lock is None else (self.run_lock, self.owner),
            )
        runner = _loop.Loop(
            agent=self.agent,
            state=self._state,
            context=self._context,
            cost=self._cost,
            turn_cache=self._turn_cache if self._turn_cache is not None else self._new_cache(),
            emit=relay.put,
            pace=relay,
            durable=journal if self.session_store is not None else self._spend_account,
            steering=self._steering,
            fence=self._fence if self.run_lock is not None else None,
        )
        self._runner = runner
        self._journal = journal
        self._handed = None
        if self._cancel_early:  # cancel() came between send() and the first iteration
            self._cancel_early = False
            runner.cancel()
        # The producer holds the run (the loop, its dispatcher, ``start``); this frame
        # does not, so that all of it is freed as the producer ends, not when the
        # consumer has taken the last event (10,000 streams finish at once).
        done = anyio.Event()
        failure: list[BaseException] = []  # what stopped the run, if not the run itself
        produce = self._produce(runner, start, relay, stream_id, done, failure)
        del runner, start
        # With a checkpoint store the consumer commits what the run emitted before it
        # hands it over (no writer task); without one it takes the events as they come.
        take = journal.take if journal is not None and store is not None else None
        terminal: TurnComplete | ErrorEvent | None = None
        try:
            self._state.active_stream = stream_id
            self._live_stream = stream_id
            _background.spawn(produce, releases=True)
            del produce
            while not failure:
                if take is not None:
                    events = await self._taken(take, relay, failure)
                else:
                    events = relay.drain() if await relay.wait() else None
                if events is None:
                    break
                for event in events:
                    if isinstance(event, TurnComplete | ErrorEvent):
                        terminal = event
                    yield event
            if terminal is None:
                await done.wait()  # the producer records why it stopped before it is done
            if terminal is None and failure:
                # The events after the failure never went on record: end with an
                # explicit error, never silently.
                terminal = _loop.error_event(failure[0])
                yield terminal
            self._state.last_stream, self._state.last_terminal = stream_id, terminal
        finally:
            # The consumer is done or gone: stop the producer (a running write
            # still finishes, within the agent's grace) and wait for its clean-up.
            relay.close()
            outbox.close()
            # (A cancel costs: anyio describes the task it cancels. After the terminal
            # event the producer is only finishing its commit and its lease renewal.)
            if done.is_set() and self._settled(journal):
                self._end_run_now()  # nothing left to wait for, save or release
            else:
                if terminal is None and not done.is_set() and self._runner is not None:
                    self._runner.cancel()
                with anyio.CancelScope(shield=True) as wait:
                    wait.deadline = (
                        anyio.current_time() + self.agent.limits.write_cancel_grace + 5.0
                    )
                    await done.wait()
                    await self._end_run(journal)

    async def _taken(
        self,
        take: Callable[[], Awaitable[list[Event] | None]],
        relay: Relay[Event],
        failure: list[BaseException],
    ) -> list[Event] | None:
        """The journal's next events on record, or ``None`` at the end or once a store failed."""
        try:
            return await take()
        except Exception as exc:  # a store failed under the run
            failure.append(exc)
            relay.close()  # the run stops: what it emits now goes nowhere
            if self._runner is not None:
                self._runner.cancel()  # (a running write still finishes)
            return None

    async def _produce(
        self,
        runner: Loop,
        start: Callable[[Loop], Awaitable[None]],
        relay: Relay[Event],
        stream_id: str,
        done: anyio.Event,
        failure: list[BaseException],
    ) -> None:
        """The producer task: the run, and its lease renewal (no task unless it is due)."""
        lease = None
        try:
            if self.checkpoint_store is not None:
                # First on record, with the run's first commit (here, so that the
                # consumer has nothing to commit before the run begins).
                relay.put(StreamStarted(stream_id=stream_id, session_id=self.session_id))
            if self.run_lock is not None:
                lease = _lease.LeaseKeeper(self._keep_lease)
                lease.start(self._leased_at + self.lock_ttl / 3)
            await runner.run(lambda: start(runner))
        except Exception as exc:  # (the loop reports its own failures as events)
            failure.append(exc)
        finally:
            relay.close()
            try:
                if lease is not None:
                    await lease.stop()
            finally:
                # The run is over and its tasks are done: nothing charges any more. Breaking
                # the loop <-> dispatcher cycle frees the run's objects now, not at a collection.
                runner.dispatch.charge = None
                if self._runner is runner:
                    self._runner = None  # (nothing left to cancel)
                    self._drop_tracker()
                self._drop_cache()  # (the run's tools are done with it)
                done.set()
                _background.release()  # (the last act: the finished task is freed at once)

    @property
    def _cost(self) -> CostTracker:
        """The run's cost tracker: made from the state when first asked for."""
        tracker = self._tracker
        if tracker is None:
            agent = self.agent
            tracker = self._tracker = _costs.CostTracker(
                prices=agent.prices,
                budget_usd=agent.limits.budget_usd,
                total_usd=self._state.cost_usd,
                usage=self._state.usage,
                unpriced=self._unpriced,
            )
        return tracker

    def _drop_tracker(self, *, keep_figures: bool = True) -> None:
        """At a run's end (nothing charges any more): keep only what the state does not."""
        tracker, self._tracker = self._tracker, None
        if tracker is not None:
            if keep_figures:
                self._prepare(tracker)
            if tracker.unpriced:
                self._unpriced = tracker.unpriced

    def _prepare_save(self) -> None:
        if self._tracker is not None:
            self._prepare(self._tracker)

    def _prepare(self, tracker: CostTracker) -> None:
        self._state.usage = tracker.usage
        self._state.cost_usd = tracker.total_usd

    def _new_cache(self) -> dict[str, Any]:
        """The turn's tool cache, made by its first run (:meth:`_drop_cache` drops it)."""
        cache: dict[str, Any] = {}
        self._turn_cache = cache
        return cache

    def _drop_cache(self) -> None:
        """At a run's end: the turn's tool cache goes unless a paused turn holds entries."""
        if self._state.turn is None or not self._turn_cache:
            self._turn_cache = None  # (the next run makes one)

    def _settled(self, journal: Journal | None) -> bool:
        """Whether the end of a run has nothing to save and no lease to drop."""
        if self._lease_lost:
            return True  # another worker may own the session: nothing more goes on record
        saved = self.session_store is None or (journal is not None and journal.ended)
        released = self.run_lock is None or (journal is not None and journal.released)
        return saved and released

    def _end_run_now(self) -> None:
        """After a run whose end needs no await (see :meth:`_settled`): mark idle."""
        self._state.active_stream = None
        self._live_stream = None
        self._runner = None
        self._journal = None
        self._drop_cache()
        self._running = False

    async def _end_run(self, journal: Journal | None) -> None:
        """After a run: save, release the lock, mark idle — whatever fails on the way."""
        self._state.active_stream = None
        self._live_stream = None
        self._runner = None
        self._journal = None
        self._drop_cache()
        try:
            if self._lease_lost:
                pass  # another worker may own the session: nothing more goes on record
            elif journal is None or not journal.ended:
                await self.save()  # unless the terminal's commit recorded the end already
        except StoreError as exc:  # the terminal event is out; a new load recovers
            _log().error("session %s: could not save at the end of a run: %s", self.session_id, exc)
        finally:
            try:
                if journal is None or not journal.released:  # (its end's commit dropped it)
                    await self._release()
            except StoreError as exc:  # the lease expires by itself
                _log().error("session %s: could not release the run lock: %s", self.session_id, exc)
            finally:
                self._running = False

    async def _replay(self, store: CheckpointStore, stream_id: str) -> AsyncGenerator[Event, None]:
        from mainspring.replay import has_terminal, synthesize_terminal

        events = await store.load(stream_id)
        if not events and self._state.active_stream != stream_id:
            ended = await self._ended_terminal(stream_id)
            if ended is None:
                raise StoreError(f"no checkpoint for stream {stream_id!r} (unknown or expired)")
            yield ended  # it ended naturally and its log was cleared
            return
        # (An empty log of the session's active stream: it died before logging anything.)
        for event in events:
            yield event
        seen = len(events)
        while not has_terminal(events) and await self._still_running(stream_id):
            await anyio.sleep(0.05)
            events = await store.load(stream_id)
            if len(events) < seen:  # cleared: it ended naturally meanwhile
                ended = await self._ended_terminal(stream_id)
                if ended is not None:
                    yield ended
                    return
                break
            for event in events[seen:]:
                yield event
            seen = len(events)
        if has_terminal(events):
            return
        if self._state.active_stream == stream_id:
            await self._recover()
        terminal = synthesize_terminal(
            events, writes=self._state.writes, turn_index=self._state.turn_index
        )
        await store.append(stream_id, terminal)
        yield terminal

    async def _ended_terminal(self, stream_id: str) -> TurnComplete | ErrorEvent | None:
        state = self._state
        if self.session_store is not None and self._live_stream is None:
            state = await self.session_store.load(self.session_id) or state
        return state.last_terminal if state.last_stream == stream_id else None

    async def _still_running(self, stream_id: str) -> bool:
        if self._live_stream == stream_id:
            return True
        lock = self.run_lock
        if lock is None or self.session_store is None:
            return False
        if await lock.holder(self.session_id) is None:
            return False
        fresh = await self.session_store.load(self.session_id)
        return fresh is not None and fresh.active_stream == stream_id
