"""Session: one conversation with one agent, as a stream of events.

```python
session = Session(agent)
async for event in session.send("Pay Alice $120"):
    if isinstance(event, PendingAction):
        pending = event
async for event in session.resume(pending.attempt_id, Approve()):
    ...
```

``send`` and ``resume`` validate their arguments when called and raise at
once on misuse; the returned async iterator runs the turn as it is consumed.
If you may stop iterating early, close it deterministically
(``async with contextlib.aclosing(session.send(...)) as events:``).
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Sequence
from contextlib import aclosing, asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

from mainspring._run.held import Check, HeldState
from mainspring.agent import Agent
from mainspring.errors import ConfigError, SessionBusy, SessionClosed, SessionNotFound
from mainspring.events import (
    ApprovalExpiring,
    Event,
    PendingAction,
    SteeringQueued,
    TurnComplete,
)
from mainspring.messages import Message
from mainspring.usage import Usage

if TYPE_CHECKING:  # the run's machinery loads when a session is built or first runs
    from mainspring._run.dispatch import Durability
    from mainspring._run.loop import Loop
    from mainspring._run.run import Run, Start
    from mainspring._run.session_lease import SessionLease
    from mainspring._run.steering import SteeringQueue, SteerMode
    from mainspring.context.compiler import ContextCompiler
    from mainspring.context.lifecycle import CompilerRegistry
    from mainspring.decisions import Decision
    from mainspring.result import RunResult
    from mainspring.state import SessionState, StateView, WriteRecord
    from mainspring.stores.base import CheckpointStore, RunLock, SessionStore

__all__ = ["Session"]


class _Sent:
    """How a sent message's run starts: ``loop.start_turn(message)``."""

    __slots__ = ("message",)

    def __init__(self, message: Message) -> None:
        self.message = message

    def __call__(self, loop: Loop) -> Awaitable[None]:
        return loop.start_turn(self.message)


class Session:
    """One conversation with one agent."""

    _spend_share: Durability | None = None
    """Without a session store: where the runs' spend totals are kept across workers
    (a direct call's account in a store, see :meth:`_for_direct`), else ``None``."""
    _unpriced: frozenset[str] = frozenset()
    """Models an earlier run found without a price (the next run starts with them)."""

    def __init__(
        self,
        agent: Agent,
        *,
        session_id: str | None = None,
        messages: Sequence[Message] = (),
        checkpoint_store: CheckpointStore | None = None,
        session_store: SessionStore | None = None,
        run_lock: RunLock | None = None,
        state: SessionState | None = None,
        when_busy: Literal["error", "wait"] = "error",
        lock_ttl: float = 30.0,
        owner: str | None = None,
        buffer_events: int = 1024,
        context_registry: CompilerRegistry[Message] | None = None,
        steering: Literal["off", "next_step", "follow_up"] = "off",
    ) -> None:
        """Start a session (or continue one from ``state``).

        Args:
            agent: The agent that runs it.
            session_id: Defaults to a new UUID4 (then no store holds the session
                before its first run, which skips reloading it). A name the
                session store holds already continues that session: its first
                run starts from the stored state (as :meth:`load` would), not
                from ``messages``.
            messages: Prior history to continue from.
            checkpoint_store: Appends every yielded event (and starts each
                stream with ``stream_started``), so streams can be resumed.
            session_store: Saves the state at every durable point of a run.
            run_lock: One active run per session across workers.
            state: A state loaded from a store (see :meth:`load`).
            when_busy: A run while another holds the session: ``"error"``
                raises SessionBusy, ``"wait"`` waits for it to end.
            lock_ttl: Seconds a run's lease lasts without renewal (renewed
                while the run is alive, so only a dead worker's lease expires).
            owner: This worker's name in the lock (defaults to a UUID4).
            buffer_events: Events a stream holds for a slow consumer; past
                that, the model stream waits for the consumer (back-pressure).
            context_registry: Where the session's one context compiler is
                registered under its id (a host shares one registry across its
                sessions; a second live session with the same id is refused
                with CompilerActiveError). Defaults to a registry of its own.
            steering: What ``send`` does while a run is active in this process:
                ``"off"`` raises SessionBusy (as before); ``"next_step"`` queues the
                message for the running turn's next step boundary; ``"follow_up"``
                queues it as the next turn of that run (see :meth:`steer`).
        """
        if state is not None and messages:
            raise ConfigError("pass either state or messages, not both")
        if lock_ttl <= 0:
            raise ConfigError("lock_ttl must be positive")
        if buffer_events < 1:
            raise ConfigError("buffer_events must be at least 1")
        if steering not in ("off", "next_step", "follow_up"):
            raise ConfigError(f"steering is 'off', 'next_step' or 'follow_up', not {steering!r}")
        self.agent = agent
        unstored = state is None and session_id is None
        unchecked = state is None and session_id is not None
        if state is None:
            import mainspring.state as states

            state = states.SessionState(
                session_id=session_id or states.new_uuid4(), agent_name=agent.name
            )
        state.messages.extend(messages)
        self.checkpoint_store = checkpoint_store
        self.session_store = session_store
        self.run_lock = run_lock
        self.when_busy = when_busy
        self.lock_ttl = lock_ttl
        self._owner = owner
        self.buffer_events = buffer_events
        self._held = HeldState(
            agent, state, registry=context_registry, unstored=unstored, unchecked=unchecked
        )
        """The state and its context compiler (one transcript), taken by each run."""
        self._closed = False
        self.steering = steering
        self._steering: SteeringQueue | None = None
        """None until the first :meth:`steer` makes the session's queue."""
        self._turn_cache: dict[str, Any] | None = None
        """The current turn's tool cache (``ToolContext.cache``): made by a run, kept
        after it only while a paused turn holds entries."""
        self._run: Run | None = None
        """The run going on (from its start to its end)."""
        self._handed: weakref.ref[AsyncGenerator[Event, None]] | None = None
        """The last stream handed out, until it starts (``cancel`` reaches it too)."""
        self._cancel_early = False
        self._running = False

    @classmethod
    async def load(
        cls, agent: Agent, store: SessionStore, session_id: str, **kwargs: Any
    ) -> Session:
        """Continue a saved session (e.g. one paused on a pending action, in a new process).

        Raises:
            SessionNotFound: No session with this id is stored (a StoreError).
        """
        state = await store.load(session_id)
        if state is None:
            raise SessionNotFound(f"no stored session {session_id!r}", session_id=session_id)
        return cls(agent, state=state, session_store=store, **kwargs)

    # ------------------------------------------------------------ properties

    @property
    def owner(self) -> str:
        """This worker's name in the run lock (a UUID4 unless given; drawn on first use)."""
        if self._owner is None:
            from mainspring.state import new_uuid4

            self._owner = new_uuid4()
        return self._owner

    @property
    def _state(self) -> SessionState:
        """The state (for the internal seam :mod:`mainspring._direct` and tests)."""
        return self._held.state

    @property
    def _context(self) -> ContextCompiler[Message]:
        """The context compiler (for tests)."""
        return self._held.context

    @property
    def session_id(self) -> str:
        """This session's id."""
        return self._held.state.session_id

    @property
    def messages(self) -> tuple[Message, ...]:
        """The transcript so far."""
        return tuple(self._held.state.messages)

    @property
    def usage(self) -> Usage:
        """Tokens used by every model call of this session."""
        return self._held.state.usage

    @property
    def cost_usd(self) -> float:
        """What this session has cost so far."""
        return self._held.state.cost_usd

    @property
    def pending(self) -> PendingAction | None:
        """The action awaiting a decision, if the session is paused."""
        return self._held.state.pending

    @property
    def running(self) -> bool:
        """Whether a send or resume stream is active in this process."""
        return self._running

    @property
    def state(self) -> StateView:
        """A read-only view of the session's durable state (what a SessionStore saves)."""
        from mainspring.state import StateView

        return StateView(self._held.state)

    # ------------------------------------------------------------- the API

    def send(
        self, message: str | Message | None = None, *, resume_stream_id: str | None = None
    ) -> AsyncGenerator[Event, None]:
        """Send a user message, or resume a stream; iterate the result for its events.

        With ``resume_stream_id`` (and no message) the stream's checkpointed
        log is replayed, followed by what is still to come: live events if
        the run goes on, else its terminal event — the original one, a
        ``turn_complete(stop_reason="interrupted")`` if it was cut with no
        tool in flight, or an ``error`` naming the tool (and attempt) that was.

        While a run is active and the session was made with ``steering``
        (``"next_step"`` or ``"follow_up"``), the message is queued for that
        run (see :meth:`steer`) and the stream returned yields
        ``steering_queued`` then ``turn_complete(stop_reason="steered")``.

        Raises:
            SessionBusy: A run is active (and ``steering="off"``), or the session
                waits for a decision.
            ConfigError: Resuming without a checkpoint store, or with a message.
        """
        if resume_stream_id is not None:
            if message is not None:
                raise ConfigError("send() takes a message or resume_stream_id, not both")
            if self.checkpoint_store is None:
                raise ConfigError("resuming a stream needs a checkpoint_store")
            return self._follow(self.checkpoint_store, resume_stream_id)
        if message is None:
            raise ConfigError("send() needs a message")
        msg = Message.user(message) if isinstance(message, str) else message
        if msg.role != "user":
            raise ConfigError(f"send() takes a user message, not a {msg.role!r} one")
        if self._running and self.steering != "off":
            return self._queued(msg, self.steering)
        self._check_idle()
        return self._unstarted(self._stream(_Sent(msg), check=self._still_not_paused))

    def resume(self, attempt_id: str, decision: Decision) -> AsyncGenerator[Event, None]:
        """Decide a pending action and continue the paused turn.

        Raises:
            UnknownAttempt: No pending action has this id.
            DecisionConflict: It was already decided (here, or by another worker:
                that one is detected when iteration starts).
            FieldNotModifiable: ``Approve.edits`` touches fields the tool does not allow.
            ToolInputError: The edited input is not valid for the tool.
            ApprovalError: The decision does not fit the action (e.g. approving a
                client-executed tool without its result).
            InputChanged: The decision names an ``input_hash`` that is not the
                pending input's (the input changed after it was shown).
            ApprovalExpired: The pending action expired (``PendingAction.expires_at``);
                only ``Expire()`` settles it now (the call never runs; the model is told).
            PolicyChanged: The policy version in force is not the one the action
                was asked for under, or not the one the decision names.
            ApproverRefused: The approving principal is missing where the rule
                needs one, is the requester where self-approval is off, or
                approved this attempt already.

        An approval of an action that needs a quorum of k principals
        (``PendingAction.quorum``) is recorded in the session store; short of
        the quorum, the stream yields ``approval_added`` and ends with
        ``turn_complete(stop_reason="pending_action")``: nothing ran. The
        approval that completes the quorum runs the write and continues the turn.
        """
        from mainspring._run.claim import Quorum, claim
        from mainspring._run.decide import validate_decision
        from mainspring.decisions import decision_record
        from mainspring.stores.base import ClaimRelease

        if self._running:
            raise SessionBusy(f"session {self.session_id!r} already has an active run")
        store = self.session_store
        # With a run lock, a claim nobody consumed can be released by the run that
        # holds the lock next (its claimer held the lock: it died or was cancelled).
        given: object = store
        reclaimable = self.run_lock is not None and isinstance(given, ClaimRelease)
        final_input = validate_decision(
            self.agent, self._held.state, attempt_id, decision, reclaimable=reclaimable
        )
        quorum = Quorum()
        check = partial(
            claim,
            store=store,
            agent=self.agent,
            attempt_id=attempt_id,
            decision=decision,
            record=decision_record(decision),
            reclaimable=reclaimable,
            quorum=quorum,
        )

        def start(loop: Loop) -> Awaitable[None]:
            if quorum.added is not None:  # an approval short of the quorum: nothing runs
                return loop.approval_added(quorum.added)
            return loop.resume_turn(attempt_id, decision, final_input)

        return self._unstarted(self._stream(start, check=check))

    def steer(self, message: str | Message, *, mode: SteerMode = "next_step") -> str:
        """Queue a message for the active run; returns its steering id.

        ``"next_step"``: the run appends it before its next model call (after
        the current step's tool results; a model that was about to end the turn
        gets another step to answer it). ``"follow_up"``: when the turn ends,
        the run starts the next turn with it instead of ending. The run's
        stream says when it took it (``steering_taken``). A message still
        queued when the run stops (paused, cancelled, failed) is taken by the
        session's next run; :attr:`steering_queued` shows what waits. The
        queue is this process's: it is not stored.

        Raises:
            ConfigError: No run is active in this process (``send`` it instead),
                or the message is not a user message.
        """
        msg = Message.user(message) if isinstance(message, str) else message
        if msg.role != "user":
            raise ConfigError(f"steer() takes a user message, not a {msg.role!r} one")
        if mode not in ("next_step", "follow_up"):
            raise ConfigError(f"mode is 'next_step' or 'follow_up', not {mode!r}")
        if not self._running:
            raise ConfigError(f"session {self.session_id!r} has no active run: send() the message")
        queue = self._steering
        if queue is None:  # the first message: the session's queue
            from mainspring._run.steering import SteeringQueue

            queue = self._steering = SteeringQueue()
            if self._run is not None:
                self._run.steer_from(queue)  # (the run began without one)
        return queue.put(msg, mode).id

    @property
    def steering_queued(self) -> tuple[str, ...]:
        """Ids of the steering messages no run has taken yet."""
        queue = self._steering
        return () if queue is None else tuple(item.id for item in queue.snapshot())

    async def _queued(self, message: Message, mode: SteerMode) -> AsyncGenerator[Event, None]:
        steering_id = self.steer(message, mode=mode)
        turn = self._held.state.turn_index
        yield SteeringQueued(steering_id=steering_id, mode=mode, turn_index=turn)
        yield TurnComplete(stop_reason="steered", turn_index=turn)

    def regenerate(self, attempt_id: str) -> AsyncGenerator[Event, None]:
        """Ask the paused call's tool for a fresh input (a new quote) before deciding.

        The stream re-runs the tool's ``regenerate`` hook on the input the model
        asked for, judges the fresh input like any call, and ends with a new
        ``pending_action`` for the same attempt (new ``input``, ``input_hash``
        and ``details``) and ``turn_complete(stop_reason="pending_action")``.
        An approval that names the old hash is then refused (``InputChanged``).
        If the fresh input is refused (a guard blocks it, its preflight fails),
        the model is told and the turn goes on. A hook that fails ends the
        stream with ``error(code="regenerate_failed")``; the pending action
        stays as it was. Cancelling it leaves the pending action as it was.

        Raises:
            UnknownAttempt: No pending action has this id.
            DecisionConflict: It was already decided.
            ApprovalError: Its tool has no ``regenerate`` hook.
            SessionBusy: A run is active.
        """
        from mainspring._run.decide import check_regenerable

        if self._running:
            raise SessionBusy(f"session {self.session_id!r} already has an active run")
        check_regenerable(self.agent, self._held.state, attempt_id)

        async def check(state: SessionState) -> None:
            check_regenerable(self.agent, state, attempt_id)

        return self._unstarted(
            self._stream(lambda loop: loop.regenerate_turn(attempt_id), check=check)
        )

    @asynccontextmanager
    async def stream(
        self, message: str | Message | None = None, *, resume_stream_id: str | None = None
    ) -> AsyncIterator[AsyncIterator[Event]]:
        """``send`` as a context manager that owns the stream's task.

        ```python
        async with session.stream("Pay Alice $20") as events:
            async for event in events:
                ...
        ```

        Leaving the block, however it is left (a ``break``, an exception, a
        cancellation), stops the run and waits for its clean-up, as closing
        the generator would. Arguments and errors are those of :meth:`send`.
        """
        events = self.send(message, resume_stream_id=resume_stream_id)
        try:
            yield events
        finally:
            await events.aclose()

    @asynccontextmanager
    async def stream_resume(
        self, attempt_id: str, decision: Decision
    ) -> AsyncIterator[AsyncIterator[Event]]:
        """``resume`` as a context manager that owns the stream's task (see :meth:`stream`)."""
        events = self.resume(attempt_id, decision)
        try:
            yield events
        finally:
            await events.aclose()

    async def run(
        self,
        message: str | Message | None = None,
        *,
        attempt_id: str | None = None,
        decision: Decision | None = None,
    ) -> RunResult:
        """Send ``message`` (or decide ``attempt_id``) and return what the run came to.

        ```python
        result = await session.run("Pay Alice $20")
        if result.pending is not None:
            result = await session.run(attempt_id=result.pending.attempt_id, decision=Approve())
        print(result.text)
        ```

        ``result.output`` is the turn's answer: an instance of the agent's
        ``output_type`` (see :mod:`mainspring.output`), or its text.

        Raises:
            OutputInvalid: No valid typed output within ``Agent.output_retries``.
            RunFailed: The run ended with an ``error`` event.
            GuardrailTripwire: A guardrail tripped (the stream ended with
                ``turn_complete(stop_reason="guardrail_tripped")``).
            ConfigError: Both a message and a decision, or neither.
        """
        from mainspring.result import result_of

        if (message is None) == (decision is None) or (decision is None) != (attempt_id is None):
            raise ConfigError("run() takes a message, or an attempt_id with its decision")
        if decision is not None:
            assert attempt_id is not None
            stream = self.resume(attempt_id, decision)
        else:
            stream = self.send(message)
        async with aclosing(stream) as events:
            collected = [event async for event in events]
        last = self._held.state.messages[-1] if self._held.state.messages else None
        final_text = last.text if last is not None and last.role == "assistant" else None
        return result_of(collected, output=self.agent.output_spec, final_text=final_text)

    def run_sync(
        self,
        message: str | Message | None = None,
        *,
        attempt_id: str | None = None,
        decision: Decision | None = None,
    ) -> RunResult:
        """:meth:`run` for synchronous programs (starts an event loop: not from async code)."""
        import anyio

        return anyio.run(partial(self.run, message, attempt_id=attempt_id, decision=decision))

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` ran."""
        return self._closed

    async def aclose(self) -> None:
        """Close the session: cancel a run, end its context pipeline through the registry.

        A compilation in progress is aborted, the last turn's snapshot and the
        session summary go to the sinks, the modules are torn down in reverse
        order and the registry frees the session's id. Later ``send`` /
        ``resume`` / ``run`` calls raise :class:`~mainspring.errors.SessionClosed`
        (when their stream starts); a second ``aclose`` does nothing. The
        stored state (if any) stays, so :meth:`load` can continue the session.
        Safe to cancel: the teardown itself is shielded.
        """
        if self._closed:
            return
        import anyio

        self._closed = True
        self.cancel()
        with anyio.CancelScope(shield=True):
            await self._held.destroy()

    def cancel(self) -> None:
        """Cancel the active run (or one handed out by send/resume, not iterated yet).

        A no-op when idle.

        The model stream and reads stop now, a running write finishes (within
        the agent's ``write_cancel_grace``), and the turn ends with
        ``turn_complete(stop_reason="cancelled")``.
        """
        if self._run is not None:
            self._run.cancel()
        elif self._handed is not None and self._handed() is not None:
            self._cancel_early = True  # handed out, not started: it ends cancelled when it starts

    def _unstarted(self, stream: AsyncGenerator[Event, None]) -> AsyncGenerator[Event, None]:
        self._cancel_early = False  # a cancel meant for a stream dropped unstarted
        self._handed = weakref.ref(stream)
        return stream

    # ------------------------------------------------------------ durability

    async def save(self) -> None:
        """Persist the state now (a no-op without a session store)."""
        if self.session_store is not None:
            self._held.saved()
            await self.session_store.save(self._held.state)

    async def record_write(self, record: WriteRecord) -> None:
        """Persist one write-ledger entry."""
        if self.session_store is not None:
            await self.session_store.record_write(self.session_id, record)

    @classmethod
    def _for_direct(cls, agent: Agent, state: SessionState, spend: Durability | None) -> Session:
        """A session for :mod:`mainspring._direct` (the internal seam it uses).

        ``spend`` keeps the runs' spend totals in a store's ledger, under the
        direct caller's account, though the session itself is not stored.
        """
        session = cls(agent, state=state)
        if spend is not None:
            session._spend_share = spend
        return session

    # --------------------------------------------------------------- streams

    async def _stream(self, start: Start, *, check: Check) -> AsyncGenerator[Event, None]:
        """A run's stream: take the session, run, hand over what is on record, end."""
        lease = await self._begin(check)
        import mainspring._run.run as runs

        run = self._run = runs.Run(
            agent=self.agent,
            state=self._held.state,
            context=self._held.context,
            sessions=self.session_store,
            checkpoints=self.checkpoint_store,
            lease=lease,
            buffer_events=self.buffer_events,
            turn_cache=self._turn_cache,
            steering=self._steering,
            unpriced=self._unpriced,
            share=self._spend_share,
        )
        self._handed = None
        if self._cancel_early:  # cancel() came between send() and the first iteration
            self._cancel_early = False
            run.cancel()
        try:
            run.start(start)
            while run.failure is None and await run.wait():
                for event in run.drain():
                    yield event
            if run.terminal is None:
                failed = await run.failed()
                if failed is not None:
                    yield failed
            run.record_end()
        finally:
            # The consumer is done or gone: stop the producer (a running write
            # still finishes, within the agent's grace) and wait for its clean-up.
            try:
                if not run.close():
                    await run.end()
            finally:
                self._run = None
                self._turn_cache = run.turn_cache
                unpriced = run.unpriced
                if unpriced is not self._unpriced:  # (the class's empty set, until one is found)
                    self._unpriced = unpriced
                self._running = False

    async def _begin(self, check: Check) -> SessionLease | None:
        """Take the session for a run: the flag, then the held state (see HeldState.take)."""
        if self._closed:
            raise SessionClosed(f"session {self.session_id!r} was closed (aclose)")
        if self._running:
            raise SessionBusy(f"session {self.session_id!r} already has an active run")
        self._running = True
        lock = self.run_lock
        try:
            return await self._held.take(
                check,
                sessions=self.session_store,
                lock=lock,
                owner=self.owner if lock is not None else "",
                ttl=self.lock_ttl,
                when_busy=self.when_busy,
            )
        except BaseException:
            self._running = False
            raise

    def _follow(self, store: CheckpointStore, stream_id: str) -> AsyncGenerator[Event, None]:
        """A stream's log replayed, then followed to its end (see :mod:`mainspring._run.follow`)."""
        from mainspring._run.follow import Followed, follow

        return follow(
            store,
            stream_id,
            Followed(
                session_id=self.session_id,
                sessions=self.session_store,
                lock=self.run_lock,
                state=lambda: self._held.state,
                live=self._live_stream,
                recover=partial(self._held.recover, self.session_store),
                expiring=self._expiring,
            ),
        )

    def _expiring(self, state: SessionState) -> ApprovalExpiring | None:
        """The expiry warning due now for the action ``state`` waits on, if any."""
        from mainspring.approvals import expiring

        return expiring(state.pending, self.agent.permissions.approvals)

    def _live_stream(self) -> str | None:
        """The stream this process runs for the session now, if any."""
        run = self._run
        return run.stream_id if run is not None and run.live else None

    # ------------------------------------------------------------- internals

    def _check_idle(self) -> None:
        if self._running:
            raise SessionBusy(f"session {self.session_id!r} already has an active run")
        self._check_not_paused()

    async def _still_not_paused(self, state: SessionState) -> None:
        """A sent message's check once its run has the session: no decision awaited."""
        self._check_not_paused()

    def _check_not_paused(self) -> None:
        pending = self.pending
        if pending is not None:
            raise SessionBusy(
                f"session {self.session_id!r} is waiting for a decision on attempt "
                f"{pending.attempt_id} ({pending.name}); call resume() first"
            )
