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

import logging
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Any

import anyio
from pydantic import JsonValue

from mainspring._background import spawn
from mainspring._relay import Relay
from mainspring.agent import Agent
from mainspring.cost import CostTracker
from mainspring.decisions import Approve, ClientResult, Decision, Reject
from mainspring.engine import TurnRunner
from mainspring.errors import (
    ApprovalError,
    ConfigError,
    DecisionConflict,
    FieldNotModifiable,
    SessionBusy,
    StoreError,
    UnknownAttempt,
)
from mainspring.events import Event, PendingAction, StreamStarted
from mainspring.messages import Message
from mainspring.microcompact import Microcompactor
from mainspring.state import SessionState
from mainspring.stores.base import CheckpointStore, SessionStore
from mainspring.usage import Usage

__all__ = ["Session"]

log = logging.getLogger("mainspring.session")


class Session:
    """One conversation with one agent."""

    def __init__(
        self,
        agent: Agent,
        *,
        session_id: str | None = None,
        messages: Sequence[Message] = (),
        checkpoint_store: CheckpointStore | None = None,
        session_store: SessionStore | None = None,
        state: SessionState | None = None,
    ) -> None:
        """Start a session (or continue one from ``state``).

        Args:
            agent: The agent that runs it.
            session_id: Defaults to a new UUID4.
            messages: Prior history to continue from.
            checkpoint_store: Appends every yielded event (and starts each
                stream with ``stream_started``).
            session_store: Saves the session state when each stream ends.
            state: A state loaded from a store (see :meth:`load`).
        """
        if state is not None and messages:
            raise ConfigError("pass either state or messages, not both")
        self.agent = agent
        self._state = state or SessionState(
            session_id=session_id or str(uuid.uuid4()), agent_name=agent.name
        )
        self._state.messages.extend(messages)
        self.checkpoint_store = checkpoint_store
        self.session_store = session_store
        self._view = Microcompactor(enabled=agent.microcompact)
        for message in self._state.messages:
            self._view.append(message, 0)
        self._cost = CostTracker(
            prices=agent.prices,
            budget_usd=agent.budget_usd,
            total_usd=self._state.cost_usd,
            usage=self._state.usage,
        )
        self._turn_cache: dict[str, Any] = {}
        self._runner: TurnRunner | None = None
        self._running = False

    @classmethod
    async def load(
        cls, agent: Agent, store: SessionStore, session_id: str, **kwargs: Any
    ) -> Session:
        """Continue a saved session (e.g. one paused on a pending action, in a new process).

        Raises:
            StoreError: No session with this id is stored.
        """
        state = await store.load(session_id)
        if state is None:
            raise StoreError(f"no stored session {session_id!r}")
        return cls(agent, state=state, session_store=store, **kwargs)

    # ------------------------------------------------------------ properties

    @property
    def session_id(self) -> str:
        """This session's id."""
        return self._state.session_id

    @property
    def messages(self) -> tuple[Message, ...]:
        """The transcript so far."""
        return tuple(self._state.messages)

    @property
    def usage(self) -> Usage:
        """Tokens used by every model call of this session."""
        return self._cost.usage

    @property
    def cost_usd(self) -> float:
        """What this session has cost so far."""
        return self._cost.total_usd

    @property
    def pending(self) -> PendingAction | None:
        """The action awaiting a decision, if the session is paused."""
        paused = self._state.paused
        return paused.pending if paused else None

    @property
    def running(self) -> bool:
        """Whether a send or resume stream is active."""
        return self._running

    @property
    def state(self) -> SessionState:
        """The session's durable state (what a SessionStore saves)."""
        return self._state

    # ------------------------------------------------------------- the API

    def send(self, message: str | Message) -> AsyncGenerator[Event, None]:
        """Send a user message; iterate the result for the turn's events.

        Raises:
            SessionBusy: A run is active, or the session waits for a decision.
        """
        msg = Message.user(message) if isinstance(message, str) else message
        if msg.role != "user":
            raise ConfigError(f"send() takes a user message, not a {msg.role!r} one")
        self._check_idle()
        return self._stream(lambda runner: runner.start_turn(msg), check=self._check_idle)

    def resume(self, attempt_id: str, decision: Decision) -> AsyncGenerator[Event, None]:
        """Decide a pending action and continue the paused turn.

        Raises:
            UnknownAttempt: No pending action has this id.
            DecisionConflict: It was already decided.
            FieldNotModifiable: ``Approve.edits`` touches fields the tool does not allow.
            ToolInputError: The edited input is not valid for the tool.
            ApprovalError: The decision does not fit the action (e.g. approving a
                client-executed tool without its result).
        """
        if self._running:
            raise SessionBusy(f"session {self.session_id!r} already has an active run")
        final_input = self._validate_decision(attempt_id, decision)

        def check() -> None:
            if self._running:
                raise SessionBusy(f"session {self.session_id!r} already has an active run")
            self._validate_decision(attempt_id, decision)
            self._state.decided[attempt_id] = _decision_kind(decision)

        return self._stream(
            lambda runner: runner.resume_turn(attempt_id, decision, final_input), check=check
        )

    def cancel(self) -> None:
        """Cancel the active run; a no-op when idle.

        The model stream and reads stop now, a running write finishes (within
        the agent's ``write_cancel_grace``), and the turn ends with
        ``turn_complete(stop_reason="cancelled")``.
        """
        if self._runner is not None:
            self._runner.cancel()

    # ------------------------------------------------------------- internals

    def _check_idle(self) -> None:
        if self._running:
            raise SessionBusy(f"session {self.session_id!r} already has an active run")
        pending = self.pending
        if pending is not None:
            raise SessionBusy(
                f"session {self.session_id!r} is waiting for a decision on attempt "
                f"{pending.attempt_id} ({pending.name}); call resume() first"
            )

    def _validate_decision(
        self, attempt_id: str, decision: Decision
    ) -> dict[str, JsonValue] | None:
        if attempt_id in self._state.decided:
            raise DecisionConflict(
                f"attempt {attempt_id} was already decided ({self._state.decided[attempt_id]}); "
                "a decision is never applied twice",
                attempt_id=attempt_id,
            )
        pending = self.pending
        if pending is None or pending.attempt_id != attempt_id:
            raise UnknownAttempt(
                f"no pending action with attempt id {attempt_id!r}", attempt_id=attempt_id
            )
        if not isinstance(decision, Approve | Reject | ClientResult):
            raise ConfigError(f"a decision is Approve, Reject or ClientResult, not {decision!r}")
        if isinstance(decision, ClientResult) and not pending.client_executed:
            raise ApprovalError(
                f"{pending.name!r} runs on the server: approve or reject it", attempt_id=attempt_id
            )
        if isinstance(decision, Approve):
            if pending.client_executed:
                raise ApprovalError(
                    f"{pending.name!r} is executed by the client: send its ClientResult "
                    "(or Reject it)",
                    attempt_id=attempt_id,
                )
            return self._edited_input(pending, decision, attempt_id)
        return None

    def _edited_input(
        self, pending: PendingAction, decision: Approve, attempt_id: str
    ) -> dict[str, JsonValue]:
        bad = tuple(sorted(set(decision.edits) - set(pending.modifiable_fields)))
        if bad:
            raise FieldNotModifiable(
                f"fields {list(bad)} of {pending.name!r} are not modifiable "
                f"(modifiable: {list(pending.modifiable_fields)})",
                attempt_id=attempt_id,
                fields=bad,
            )
        if not decision.edits:
            return pending.input
        tool = self.agent.tool(pending.name)
        if tool is None:
            raise ApprovalError(
                f"tool {pending.name!r} is no longer available", attempt_id=attempt_id
            )
        return tool.validate({**pending.input, **decision.edits})

    async def _stream(
        self,
        start: Callable[[TurnRunner], Awaitable[None]],
        *,
        check: Callable[[], None],
    ) -> AsyncGenerator[Event, None]:
        check()
        self._running = True
        relay: Relay[Event] = Relay()
        runner = TurnRunner(
            agent=self.agent,
            state=self._state,
            view=self._view,
            cost=self._cost,
            turn_cache=self._turn_cache,
            emit=relay.put,
        )
        self._runner = runner
        store = self.checkpoint_store
        stream_id = str(uuid.uuid4())
        abort = anyio.CancelScope()
        done = anyio.Event()

        async def produce() -> None:
            try:
                with abort:
                    await runner.run(lambda: start(runner))
            except BaseException:  # pragma: no cover - run() reports failures as events
                log.exception("session producer failed")
            finally:
                relay.close()
                done.set()

        try:
            if store is not None:
                first = StreamStarted(stream_id=stream_id, session_id=self.session_id)
                with anyio.CancelScope(shield=True):
                    await store.append(stream_id, first)
                yield first
            spawn(produce)
            while await relay.wait():
                for event in relay.drain():
                    if store is not None:
                        with anyio.CancelScope(shield=True):
                            await store.append(stream_id, event)
                    yield event
        finally:
            relay.close()
            # The consumer is done or gone: stop the producer (a running write
            # still finishes, within the agent's grace) and wait for its clean-up.
            abort.cancel()
            with anyio.CancelScope(shield=True) as wait:
                wait.deadline = anyio.current_time() + self.agent.write_cancel_grace + 5.0
                await done.wait()
            self._runner = None
            self._running = False
            if self.session_store is not None:
                with anyio.CancelScope(shield=True):
                    await self.session_store.save(self._state)


def _decision_kind(decision: Decision) -> str:
    if isinstance(decision, Approve):
        return "approved"
    if isinstance(decision, Reject):
        return "rejected"
    return "client_result"
