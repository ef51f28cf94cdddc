"""The server's sessions: who owns them, how they are opened, run and followed.

One :class:`SessionHost` per worker. Each request opens the session fresh
from the session store (the durable recipe: nothing about a session lives
only in a worker), except that a run going on in this worker is reached
through its live :class:`~mainspring.session.Session`. A session belongs to
the principal that created it; to anyone else it does not exist (404).

Every run is pumped inside a :func:`~mainspring.tools.context.run_scope` for
the session's principal (:func:`caller_of`), whichever door started it, so a
tool's ``ctx.caller`` is that principal and the toolkits keep each
principal's data apart. A principal has at most ``max_runs_per_principal``
runs going on a worker and ``max_steering_per_principal`` steering messages
queued on them; past either, :class:`TooManyRuns` (429) and nothing changes.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import replace

import anyio
from anyio.abc import TaskGroup
from pydantic import JsonValue

from mainspring.agent import Agent
from mainspring.codec import event_to_dict
from mainspring.decisions import Approve, ClientResult, Decision, Reject, canonical_input_hash
from mainspring.errors import DecisionConflict, SessionBusy, StoreError, UnknownAttempt
from mainspring.events import Event, PendingAction, StreamStarted
from mainspring.messages import Message
from mainspring.namespaces import InMemoryKeyValueStore
from mainspring.principals import ANONYMOUS as ANONYMOUS_CALLER
from mainspring.principals import Caller
from mainspring.server._auth import Principal
from mainspring.server._config import ServerConfig
from mainspring.server._runs import LiveRun, Runs
from mainspring.server._signing import ApprovalSigner
from mainspring.server._telemetry import RunSpans, tracer_of
from mainspring.session import Session
from mainspring.state import SessionState
from mainspring.stores import Stores
from mainspring.tools.context import RunScope, run_scope

__all__ = [
    "CANCEL_POLL",
    "NotFound",
    "Observer",
    "SessionHost",
    "StaleApproval",
    "TooManyRuns",
    "caller_of",
]

log = logging.getLogger("mainspring.server")

Observer = Callable[[Session, AsyncGenerator[Event, None]], AsyncGenerator[Event, None]]
"""Wraps each run's stream as it is pumped (the trace recorder)."""


class NotFound(LookupError):
    """No such session, stream or attempt — for this principal."""


class StaleApproval(DecisionConflict):
    """The approval id was signed for arguments that are no longer the pending ones."""


class TooManyRuns(Exception):
    """A principal's limit of live runs or queued steering on this worker is reached (429)."""


def caller_of(principal_id: str | None) -> Caller:
    """The :class:`~mainspring.principals.Caller` tools see for a session's principal.

    ``user:<id>`` for an authenticated principal, the anonymous caller for
    ``--public`` callers without a credential (all of them one principal).
    """
    if principal_id is None:
        return Caller("local", kind="service")
    if principal_id == ANONYMOUS_CALLER.id:
        return ANONYMOUS_CALLER
    return Caller(principal_id, kind="user")


async def _as_caller(
    stream: AsyncGenerator[Event, None], scope: RunScope
) -> AsyncGenerator[Event, None]:
    """``stream`` driven inside ``scope``: its tools run as the scope's caller."""
    with run_scope(scope):
        async with aclosing(stream) as events:
            async for event in events:
                yield event


class SessionHost:
    """Opens, runs and follows the sessions of one agent for one worker."""

    def __init__(
        self,
        agent: Agent,
        config: ServerConfig,
        stores: Stores,
        signer: ApprovalSigner,
        task_group: TaskGroup,
        *,
        observe: Observer | None = None,
    ) -> None:
        """Serve ``agent`` on ``stores``; runs are pumped by tasks of ``task_group``."""
        if stores.sessions is None or stores.checkpoints is None or stores.locks is None:
            raise ValueError("a server needs a session store, a checkpoint store and a run lock")
        self.agent = agent
        self.config = config
        self.stores = stores
        self.signer = signer
        self.runs = Runs(keep_finished=config.keep_finished)
        self.worker = config.worker or str(uuid.uuid4())
        self._tg = task_group
        self.tracer = tracer_of(config.tracer_provider)
        self._observe = observe
        self.stopping = anyio.Event()
        """Set when the worker shuts down: running streams are cancelled to a terminal."""
        self.storage = InMemoryKeyValueStore()
        """The tools' ``ctx.storage`` on this worker (each keyed by caller)."""
        self._caches: dict[tuple[str, ...], dict[str, object]] = {}
        self._starting: dict[str | None, int] = {}
        """Runs being started, by principal (admitted, not yet in ``runs``)."""
        self._starting_sessions: set[str] = set()
        """Sessions whose run is starting here: every run of a worker holds the session's
        lock under the worker's name, so the lock cannot tell two of them apart."""

    # ------------------------------------------------------------ sessions

    def _session(self, state: SessionState) -> Session:
        return Session(
            self.agent,
            state=state,
            **self.stores.session_kwargs(),
            lock_ttl=self.config.lock_ttl,
            owner=self.worker,
        )

    async def create(self, principal: Principal, session_id: str | None = None) -> Session:
        """A new session owned by ``principal``, saved before it is handed out.

        ``session_id`` names it (a UI protocol's chat or thread id; the caller
        makes sure no session has it yet); a UUID4 by default.
        """
        state = SessionState(
            session_id=session_id or str(uuid.uuid4()),
            agent_name=self.agent.name,
            principal=principal.id,
        )
        session = self._session(state)
        await session.save()
        return session

    async def open(self, principal: Principal, session_id: str) -> Session:
        """``principal``'s session ``session_id``: the live one if it runs here.

        Raises:
            NotFound: No such session, or it belongs to someone else.
        """
        run = self.runs.active(session_id)
        if run is not None:
            if run.session.state.principal != principal.id:
                raise NotFound(f"no session {session_id!r}")
            return run.session
        assert self.stores.sessions is not None
        state = await self.stores.sessions.load(session_id)
        if state is None or state.principal != principal.id or state.agent_name != self.agent.name:
            raise NotFound(f"no session {session_id!r}")
        return self._session(state)

    async def list(self, principal: Principal, *, limit: int) -> list[str]:
        """The ids of ``principal``'s sessions."""
        assert self.stores.sessions is not None
        return await self.stores.sessions.session_ids(limit=limit, principal=principal.id)

    async def delete(self, principal: Principal, session_id: str) -> None:
        """Forget ``principal``'s session (refused while it runs).

        Raises:
            NotFound: No such session of this principal.
            SessionBusy: It is running.
        """
        session = await self.open(principal, session_id)
        if self.runs.active(session_id) is not None:
            raise SessionBusy(f"session {session_id!r} is running; cancel it first")
        assert self.stores.sessions is not None
        holder = await self.stores.locks.holder(session_id) if self.stores.locks else None
        if holder is not None:
            raise SessionBusy(f"session {session_id!r} is running on another worker")
        await self.stores.sessions.delete(session.session_id)

    # ---------------------------------------------------------------- runs

    def scoped(
        self, session: Session, stream: AsyncGenerator[Event, None]
    ) -> AsyncGenerator[Event, None]:
        """``stream`` of ``session`` run as the session's principal (see :func:`caller_of`)."""
        scope = RunScope(
            caller=caller_of(session.state.principal),
            storage=self.storage,
            caches=self._caches,
            agent=self.agent.name,
        )
        return _as_caller(stream, scope)

    def _mine(self, principal: str | None) -> tuple[LiveRun, ...]:
        return tuple(r for r in self.runs.live() if r.session.state.principal == principal)

    def admit(self, session: Session) -> None:
        """Refuse (:class:`TooManyRuns`) a new run past the principal's limit on this worker.

        A session running here takes a message as steering: that counts
        against the principal's queued steering instead (:meth:`admit_steering`).
        """
        if self.runs.active(session.session_id) is not None:
            self.admit_steering(session)
            return
        principal = session.state.principal
        limit = self.config.max_runs_per_principal
        going = len(self._mine(principal)) + self._starting.get(principal, 0)
        if limit and going >= limit:
            raise TooManyRuns(
                f"{going} runs of yours are going on (at most {limit} per principal):"
                " wait for one to end or cancel it"
            )

    def admit_steering(self, session: Session) -> None:
        """Refuse (:class:`TooManyRuns`) a steering message past the principal's limit."""
        principal = session.state.principal
        limit = self.config.max_steering_per_principal
        queued = sum(len(r.session.steering_queued) for r in self._mine(principal))
        queued += self._starting.get(principal, 0)
        if limit and queued >= limit:
            raise TooManyRuns(
                f"{queued} steering messages of yours wait (at most {limit} per principal):"
                " wait for the running turns to take them"
            )

    async def start(self, session: Session, stream: AsyncGenerator[Event, None]) -> LiveRun:
        """Run ``stream`` in the worker's task group, past the request's end.

        Raises:
            TooManyRuns: The principal's limit of runs (or queued steering) is reached;
                ``stream`` was not started.
            SessionBusy: A run of the session is starting or going on in this worker.
            Exception: What refused the run before its first event.
        """
        self.admit(session)
        principal = session.state.principal
        self._starting[principal] = self._starting.get(principal, 0) + 1
        try:
            return await self._start(session, stream)
        finally:
            left = self._starting[principal] - 1
            if left:
                self._starting[principal] = left
            else:
                del self._starting[principal]

    async def _start(self, session: Session, stream: AsyncGenerator[Event, None]) -> LiveRun:
        session_id = session.session_id
        if session_id in self._starting_sessions or self.runs.active(session_id) is not None:
            await stream.aclose()
            raise SessionBusy(f"session {session_id!r} already has an active run")
        self._starting_sessions.add(session_id)  # until it is in self.runs: no await between
        try:
            stream = self.scoped(session, stream)
            if self._observe is not None:
                stream = self._observe(session, stream)
            spans = None
            if self.tracer is not None:
                spans = RunSpans(self.tracer, agent=self.agent.name, session_id=session_id)
            run = LiveRun(session, stream, spans=spans)
            self._tg.start_soon(run.pump)
            await run.started()
            self.runs.add(run)
        finally:
            self._starting_sessions.discard(session_id)
        return run

    async def send(self, session: Session, message: str | Message) -> LiveRun:
        """Start a turn of ``session`` with a user message.

        Raises:
            TooManyRuns: The principal's limit of runs (or queued steering) is reached.
        """
        return await self.start(session, session.send(message))

    def pending_for(self, session: Session, approval_id: str) -> PendingAction:
        """The pending action an approval id names, if it is still the one signed.

        The id must have been signed for the session's principal (the caller:
        only the owner opens a session) under the policy version in force.

        Raises:
            BadApproval: Not signed by this server for this session, this
                principal and this policy version.
            NotFound: The attempt is not known to the session.
            DecisionConflict: It was decided already.
            StaleApproval: Its arguments changed since the id was handed out.
        """
        signed = self.signer.verify(
            session.session_id,
            approval_id,
            principal=session.state.principal or "",
            policy=self.agent.permissions.version,
        )
        pending = session.pending
        if pending is None or pending.attempt_id != signed.attempt_id:
            if signed.attempt_id in session.state.decided:
                raise DecisionConflict(
                    f"attempt {signed.attempt_id} was already decided; "
                    "a decision is never applied twice",
                    attempt_id=signed.attempt_id,
                )
            raise NotFound(f"no pending action {signed.attempt_id!r}")
        if canonical_input_hash(pending.input) != signed.input_hash:
            raise StaleApproval(
                "the action's arguments changed since this approval id was handed out",
                attempt_id=signed.attempt_id,
            )
        return pending

    async def decide(self, session: Session, approval_id: str, decision: Decision) -> LiveRun:
        """Decide the pending action ``approval_id`` signs and continue the turn.

        The decision also names the input hash the id was signed for, so the
        engine itself refuses it (``InputChanged``) if the input moved meanwhile,
        and an approval or a rejection names the authenticated principal (the
        session's owner) and the policy version the id was signed under.
        """
        pending = self.pending_for(session, approval_id)
        signed_hash = canonical_input_hash(pending.input)
        if isinstance(decision, Approve | ClientResult) and decision.input_hash is None:
            decision = replace(decision, input_hash=signed_hash)
        if isinstance(decision, Approve | Reject):
            decision = replace(
                decision,
                principal=session.state.principal or "",
                policy_version=self.agent.permissions.version,
            )
        try:
            stream = session.resume(pending.attempt_id, decision)
        except UnknownAttempt as exc:
            raise NotFound(str(exc)) from exc
        return await self.start(session, stream)

    async def regenerate(self, session: Session, approval_id: str) -> LiveRun:
        """Ask the tool for a fresh input for the pending action (a new quote).

        The stream ends with a new pending action whose approval id is signed
        for the fresh input; the old id is then refused (its hash is stale).
        """
        pending = self.pending_for(session, approval_id)
        try:
            stream = session.regenerate(pending.attempt_id)
        except UnknownAttempt as exc:
            raise NotFound(str(exc)) from exc
        return await self.start(session, stream)

    async def follow(
        self, principal: Principal, session_id: str, stream_id: str, after: int
    ) -> AsyncIterator[tuple[int, Event]]:
        """Every event of ``stream_id`` after position ``after``: live here, or from the log.

        Raises:
            NotFound: No such stream of this principal's session.
        """
        run = self.runs.stream(stream_id)
        if run is not None:
            if run.session_id != session_id or run.principal != principal.id:
                raise NotFound(f"no stream {stream_id!r}")
            return run.follow(after)
        session = await self.open(principal, session_id)
        await self._check_stream(session, stream_id)
        replay = self.scoped(session, session.send(resume_stream_id=stream_id))
        return self._replayed(session_id, stream_id, replay, after)

    async def _check_stream(self, session: Session, stream_id: str) -> None:
        """Refuse (before the response starts) a stream that is not this session's."""
        assert self.stores.checkpoints is not None
        try:
            logged = await self.stores.checkpoints.load(stream_id)
        except StoreError as exc:
            raise NotFound(f"no stream {stream_id!r}") from exc
        if logged:
            first = logged[0]
            if isinstance(first, StreamStarted) and first.session_id == session.session_id:
                return
        elif stream_id in (session.state.active_stream, session.state.last_stream):
            return
        raise NotFound(f"no stream {stream_id!r}")

    async def _replayed(
        self,
        session_id: str,
        stream_id: str,
        replay: AsyncGenerator[Event, None],
        after: int,
    ) -> AsyncIterator[tuple[int, Event]]:
        async with aclosing(replay) as events:
            position = -1
            try:
                async for event in events:
                    position += 1
                    if position == 0 and isinstance(event, StreamStarted):
                        if event.session_id != session_id or event.stream_id != stream_id:
                            raise NotFound(f"no stream {stream_id!r}")
                    if position > after:
                        yield position, event
            except StoreError as exc:
                raise NotFound(str(exc)) from exc

    # ---------------------------------------------------------------- wire

    def approval_id(self, session_id: str, pending: PendingAction, *, principal: str) -> str:
        """The approval id of ``pending`` handed to ``principal`` (see :meth:`pending_for`)."""
        policy = self.agent.permissions.version
        return self.signer.sign(session_id, pending, principal=principal, policy=policy)

    def wire(self, session_id: str, event: Event, *, principal: str) -> Event:
        """``event`` as ``principal`` sees it: a pending action's approval id signed for them."""
        if isinstance(event, PendingAction):
            policy = self.agent.permissions.version
            return self.signer.bind(session_id, event, principal=principal, policy=policy)
        return event

    def wire_dict(self, session_id: str, event: Event, *, principal: str) -> dict[str, JsonValue]:
        """:meth:`wire` as the JSON object of mainspring's wire format."""
        return event_to_dict(self.wire(session_id, event, principal=principal))

    async def request_cancel(self, session_id: str) -> bool:
        """Cancel the session's run wherever it runs; ``False`` if it runs nowhere.

        Here: at once. On another worker: a cancel request, a lease on
        ``cancel:<session id>`` in the shared run lock, which that worker's
        :meth:`watch_cancels` finds within ``CANCEL_POLL`` seconds.
        """
        run = self.runs.active(session_id)
        if run is not None:
            run.session.cancel()
            return True
        locks = self.stores.locks
        assert locks is not None
        if await locks.holder(session_id) is None:
            return False
        ttl = max(self.config.lock_ttl, 3 * CANCEL_POLL)
        await locks.acquire(_cancel_key(session_id), _CANCEL_OWNER, ttl=ttl)
        return True

    async def watch_cancels(self) -> None:
        """Cancel this worker's runs that another worker was asked to cancel."""
        locks = self.stores.locks
        assert locks is not None
        while True:
            await anyio.sleep(CANCEL_POLL)
            for run in self.runs.live():
                key = _cancel_key(run.session_id)
                try:
                    if await locks.holder(key) is not None:
                        run.session.cancel()
                        await locks.release(key, _CANCEL_OWNER)
                except StoreError as exc:  # a blip: the next poll tries again
                    log.warning("could not read cancel requests: %s", exc)
                    break

    async def cancel_on_stop(self) -> None:
        """When the server begins to stop, cancel the runs so their streams end well.

        ``stopping`` is set by sse-starlette as soon as uvicorn begins to shut
        down (while the streams are still open), or by :meth:`shutdown`.
        """
        await self.stopping.wait()
        for run in self.runs.live():
            run.session.cancel()

    async def shutdown(self) -> None:
        """Cancel every run here and give it ``shutdown_grace`` seconds to end."""
        self.stopping.set()
        live = self.runs.live()
        for run in live:
            run.session.cancel()
        with anyio.move_on_after(self.config.shutdown_grace):
            for run in live:
                await run.wait_done()


CANCEL_POLL = 0.5
"""Seconds between a worker's looks for cancel requests of its runs."""
_CANCEL_OWNER = "cancel-request"


def _cancel_key(session_id: str) -> str:
    return f"cancel:{session_id}"


def positions_from(last_event_id: str | None) -> tuple[str, int] | None:
    """``(stream_id, position)`` of a ``Last-Event-ID`` the server handed out."""
    if not last_event_id:
        return None
    stream_id, sep, position = last_event_id.rpartition(":")
    if not sep or not stream_id or not position.isdigit() or len(position) > 9:
        return None
    return stream_id, int(position)
