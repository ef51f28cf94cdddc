"""One stream of a session: its producer (the loop), its journal, and what its consumer takes.

``Session`` takes the session for a run (the running flag, the run lock's
lease, crash recovery, the call's own check), then makes a :class:`Run` and
consumes it: :meth:`Run.start` spawns the producer task (the loop, and the
lease's renewal, a task only once due), :meth:`Run.wait` / :meth:`Run.drain` hand over
the events on record (with a checkpoint store the consumer commits each batch
before it takes it: :meth:`~mainspring._run.journal.Journal.take`), and
:meth:`Run.close` / :meth:`Run.end` stop the producer, save and drop the lease
when the consumer is done or gone. The lease is fenced at writes
(:meth:`Run.fence`). A run holds its session's data (state, stores, lease),
never the session; it drops its loop when the producer ends, so what the run
made is freed then, not when the consumer takes the last event.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio

from mainspring._lowlevel import background
from mainspring._lowlevel.relay import Relay
from mainspring._lowlevel.wakeup import Wakeup
from mainspring._run.dispatch import Durability
from mainspring._run.journal import Journal
from mainspring._run.lease import LeaseKeeper
from mainspring._run.loop import Loop, error_event
from mainspring._run.session_lease import SessionLease
from mainspring._run.spend import Spend
from mainspring._run.steering import SteeringQueue
from mainspring.agent import Agent
from mainspring.context.compiler import ContextCompiler
from mainspring.errors import LeaseLost, StoreError
from mainspring.events import ErrorEvent, Event, StreamStarted, TurnComplete
from mainspring.messages import Message
from mainspring.state import SessionState, new_uuid4
from mainspring.stores.base import CheckpointStore, SessionStore

__all__ = ["Run", "Start"]

log = logging.getLogger("mainspring.session")

Start = Callable[[Loop], Awaitable[None]]
"""How a run starts: a send's ``loop.start_turn(message)``, a resume's ``loop.resume_turn(...)``."""

_TERMINAL = (TurnComplete, ErrorEvent)


class Run:
    """One send, resume or regenerate stream of a session, from its start to its end."""

    __slots__ = (
        "_agent",
        "_checkpoints",
        "_journal",
        "_lease",
        "_outbox",
        "_relay",
        "_sessions",
        "_taken",
        "done",
        "failure",
        "live",
        "loop",
        "state",
        "stream_id",
        "terminal",
        "turn_cache",
        "unpriced",
    )

    def __init__(
        self,
        *,
        agent: Agent,
        state: SessionState,
        context: ContextCompiler[Message],
        sessions: SessionStore | None,
        checkpoints: CheckpointStore | None,
        lease: SessionLease | None,
        buffer_events: int,
        turn_cache: dict[str, Any] | None,
        steering: SteeringQueue | None,
        unpriced: frozenset[str],
        share: Durability | None,
    ) -> None:
        """A run of ``agent`` on ``state``, holding ``lease`` (with a run lock).

        ``turn_cache`` is the paused turn's tool cache (``None``: a new one);
        ``unpriced`` the models earlier runs found without a price; ``share``
        where spend totals are kept without a session store (a direct call's
        account, see :mod:`mainspring._direct`).
        """
        self._agent = agent
        self.state = state
        self._sessions = sessions
        self._checkpoints = checkpoints
        self._lease = lease
        self.stream_id = new_uuid4()
        relay: Relay[Event] = Relay(buffer_events)
        # With a checkpoint store, the journal puts each batch on record while the
        # run goes on producing the next; the consumer gets only what is on record.
        self._relay = relay
        outbox: Relay[Event] = Relay(buffer_events) if checkpoints is not None else relay
        self._outbox = outbox
        journal = None
        if sessions is not None or checkpoints is not None:
            journal = Journal(
                state=state,
                sessions=sessions,
                checkpoints=checkpoints,
                stream_id=self.stream_id,
                relay=relay,
                outbox=self._outbox,
                clear=state.last_stream if checkpoints is not None else None,
                lease=None if lease is None else (lease.lock, lease.owner),
            )
        self._journal = journal
        self._taken: list[Event] | None = [] if checkpoints is not None else None
        """What the consumer committed and has still to take (with a checkpoint store)."""
        durable = journal if sessions is not None else share
        spend = Spend(
            state=state,
            prices=agent.prices,
            budget_usd=agent.limits.budget_usd,
            unpriced=unpriced,
            emit=relay.put,
            share=durable,
        )
        cache = {} if turn_cache is None else turn_cache
        self.turn_cache: dict[str, Any] | None = cache
        """The turn's tool cache (``ToolContext.cache``): kept after the run only while a
        paused turn holds entries (else ``None``)."""
        self.loop: Loop | None = Loop(
            agent=agent,
            state=state,
            context=context,
            spend=spend,
            turn_cache=cache,
            emit=relay.put,
            pace=relay,
            durable=durable,
            steering=steering,
            fence=self.fence if lease is not None else None,
        )
        """The producer's loop (and its spend), until the producer ends."""
        self.unpriced = unpriced
        """The models found without a price, once the producer ended (for the next run)."""
        self.done = Wakeup()
        """Set when the producer ended (its clean-up done)."""
        self.failure: BaseException | None = None
        """What stopped the run, if not the run itself (a store failed under it)."""
        self.terminal: TurnComplete | ErrorEvent | None = None
        """The terminal event, once the consumer took it."""
        self.live = True
        """Whether the run is going on in this process (until its end)."""

    # --------------------------------------------------------------- control

    def cancel(self, error: Exception | None = None) -> None:
        """Stop the run (a running write still finishes); see :meth:`Loop.cancel`."""
        if self.loop is not None:
            self.loop.cancel(error)

    def steer_from(self, queue: SteeringQueue) -> None:
        """Take steering messages from ``queue`` from the next step on."""
        if self.loop is not None:
            self.loop.steer_from(queue)

    # ------------------------------------------------------------- producer

    def start(self, begin: Start) -> None:
        """Spawn the producer: the run starts with ``begin(loop)``."""
        self.state.begin_stream(self.stream_id)
        background.spawn(self._produce(begin), releases=True)

    async def _produce(self, begin: Start) -> None:
        """The producer task: the run, and its lease renewal (no task unless it is due)."""
        relay, keeper, loop = self._relay, None, self.loop
        assert loop is not None
        try:
            if self._checkpoints is not None:
                # First on record, with the run's first commit (here, so that the
                # consumer has nothing to commit before the run begins).
                relay.put(StreamStarted(stream_id=self.stream_id, session_id=self.state.session_id))
            if self._lease is not None:
                keeper = LeaseKeeper(self._keep_lease)
                keeper.start(self._lease.renewal_due)
            await loop.run(partial(begin, loop))
        except Exception as exc:  # (the loop reports its own failures as events)
            if self.failure is None:  # (the first failure is the one reported)
                self.failure = exc
        finally:
            relay.close()
            try:
                if keeper is not None:
                    await keeper.stop()
            finally:
                # The run is over and its tasks are done: what it made goes now.
                self.unpriced = loop.spend.unpriced
                self.loop = None
                self._drop_cache()
                self.done.set()
                background.release()  # (the last act: the finished task is freed at once)

    # ------------------------------------------------------------- consumer

    def wait(self) -> Awaitable[bool]:
        """Until there are events to :meth:`drain`; ``False`` at the end or after a store failed.

        Without a checkpoint store the consumer waits on the relay itself; with
        one, it commits what the run emitted before it takes it (see
        :meth:`~mainspring._run.journal.Journal.take`).
        """
        if self._taken is None:
            return self._relay.wait()
        return self._take_on_record()

    async def _take_on_record(self) -> bool:
        assert self._journal is not None
        try:
            events = await self._journal.take()
        except Exception as exc:  # a store failed under the run
            if self.failure is None:
                self.failure = exc
            self._relay.close()  # the run stops: what it emits now goes nowhere
            self.cancel()  # (a running write still finishes)
            return False
        if events is None:
            return False
        self._taken = events
        return True

    def drain(self) -> list[Event]:
        """The events to hand over now (each on record, with a checkpoint store)."""
        if self._taken is None:
            events = self._relay.drain()
        else:
            events, self._taken = self._taken, []
        for event in events:
            if isinstance(event, _TERMINAL):
                self.terminal = event
        return events

    async def failed(self) -> ErrorEvent | None:
        """With no terminal event taken: wait for the producer, and the error that stopped it.

        The events after a failure never went on record: the stream ends with an
        explicit error, never silently.
        """
        await self.done.wait()  # the producer records why it stopped before it is done
        if self.failure is None:
            return None
        self.terminal = error_event(self.failure)
        return self.terminal

    def record_end(self) -> None:
        """The stream ended with its terminal (on the state, for a later replay)."""
        self.state.note_terminal(self.stream_id, self.terminal)

    # ------------------------------------------------------------------ end

    def close(self) -> bool:
        """The consumer is done or gone; whether the run's end is complete already.

        If it is not (:meth:`end` awaits it), a run that emitted no terminal is
        cancelled (a running write still finishes, within the agent's grace).
        """
        self._relay.close()
        self._outbox.close()
        # (After the terminal event the producer only finishes its commit and its renewal.)
        if self.done.is_set() and self._settled():
            self._wrap_up()  # nothing left to wait for, save or release
            return True
        if self.terminal is None and not self.done.is_set():
            self.cancel()
        return False

    async def end(self) -> None:
        """Wait for the producer's clean-up; save and release the lease, whatever fails."""
        with anyio.CancelScope(shield=True) as wait:
            wait.deadline = anyio.current_time() + self._agent.limits.write_cancel_grace + 5.0
            await self.done.wait()
            self._wrap_up()
            journal, lease = self._journal, self._lease
            try:
                if lease is not None and lease.lost:
                    pass  # another worker may own the session: nothing more goes on record
                elif self._sessions is not None and (journal is None or not journal.ended):
                    await self._sessions.save(self.state)  # (unless the terminal's commit did)
            except StoreError as exc:  # the terminal event is out; a new load recovers
                log.error(
                    "session %s: could not save at the end of a run: %s", self.state.session_id, exc
                )
            finally:
                try:
                    if lease is not None and (journal is None or not journal.released):
                        await lease.release()  # (unless its end's commit dropped it)
                except StoreError as exc:  # the lease expires by itself
                    log.error(
                        "session %s: could not release the run lock: %s",
                        self.state.session_id,
                        exc,
                    )

    def _settled(self) -> bool:
        """Whether the end of the run has nothing to save and no lease to drop."""
        lease, journal = self._lease, self._journal
        if lease is not None and lease.lost:
            return True  # another worker may own the session: nothing more goes on record
        saved = self._sessions is None or (journal is not None and journal.ended)
        released = lease is None or (journal is not None and journal.released)
        return saved and released

    def _wrap_up(self) -> None:
        self.state.clear_stream()
        self.live = False
        self.loop = None
        self._drop_cache()

    def _drop_cache(self) -> None:
        """The turn's tool cache goes unless a paused turn holds entries."""
        if self.state.turn is None or not self.turn_cache:
            self.turn_cache = None

    # ---------------------------------------------------------------- lease

    async def _keep_lease(self, stop: Wakeup) -> None:
        """Renew the run's lease until ``stop`` is set (see :meth:`SessionLease.keep`)."""
        assert self._lease is not None
        lost = await self._lease.keep(stop)
        if lost is not None:
            self._lose_lease(lost)

    async def fence(self) -> None:
        """Before a write starts: renew the lease, or stop the run if it is lost.

        Renewed, the lease is this worker's for another ``lock_ttl`` seconds,
        so no other worker can take the session while the write starts.
        """
        lease = self._lease
        assert lease is not None
        if lease.lost:
            raise LeaseLost(f"session {self.state.session_id!r}: this run lost its lock")
        if not await lease.renew():
            self._lose_lease("another worker took the session's lock before a write")
            raise LeaseLost(
                f"session {self.state.session_id!r}: this run lost its lock; the write did not run"
            )

    def _lose_lease(self, why: str) -> None:
        """The run no longer owns the session: it stops and records nothing more."""
        session_id = self.state.session_id
        log.error("session %s: lost the run lock: %s", session_id, why)
        assert self._lease is not None
        self._lease.lost = True
        reason = f"session {session_id!r}: this run lost its lock ({why})"
        if self._journal is not None:
            self._journal.fence(reason)
        self.cancel(LeaseLost(reason))  # a running write still finishes
