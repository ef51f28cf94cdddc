"""A session's held state: its state and its one context compiler, taken for each run.

A :class:`~mainspring.session.Session` is a facade; what it holds is this: the
:class:`~mainspring.state.SessionState` bound to the context compiler whose
transcript the state's messages are (one list), and what taking them for a run
means. :meth:`HeldState.take` is that: the run lock's lease (with one), the
fresher stored state adopted when another worker may have moved the session
on, a dead run repaired (:func:`~mainspring._run.recovery.recover`), and the
call's own check on the freshest state. Adopting a state gives it a new
compiler through the session's registry, so the two stay one transcript.

This module imports only what a session needs when it is built; the lease,
recovery and the registry load when a run first uses them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from mainspring._run.session_lease import SessionLease
    from mainspring.agent import Agent
    from mainspring.context.compiler import ContextCompiler
    from mainspring.context.lifecycle import CompilerRegistry
    from mainspring.messages import Message
    from mainspring.state import SessionState
    from mainspring.stores.base import RunLock, SessionStore

__all__ = ["Check", "HeldState"]

Check = Callable[["SessionState"], Awaitable[None]]
"""A call's own check, once its run holds the session (on the freshest state)."""


class HeldState:
    """A session's state bound to its context compiler, and how a run takes them."""

    __slots__ = ("_agent", "_registry", "_unchecked", "_unstored", "context", "state")

    def __init__(
        self,
        agent: Agent,
        state: SessionState,
        *,
        registry: CompilerRegistry[Message] | None,
        unstored: bool,
        unchecked: bool,
    ) -> None:
        """Build ``state``'s compiler (registered in ``registry``, if shared) and bind them.

        ``unstored``: the session drew its own id and no store can hold it yet
        (its first run needs no reload). ``unchecked``: it was named but not
        loaded (its first run looks in the store).
        """
        self._agent = agent
        self._registry = registry
        """A shared registry, or ``None``: the session's own, made only if needed."""
        self._unstored = unstored
        self._unchecked = unchecked
        session_id = state.session_id
        build = partial(agent.context_compiler, state.messages, session_id=session_id)
        self.context: ContextCompiler[Message] = (
            build() if registry is None else registry.create(session_id, build)
        )
        self.state = state
        # One transcript: the persisted messages are the compiler's own list.
        state.bind_messages(self.context.transcript.backing)

    def saved(self) -> None:
        """The state went to a store: a store may hold it from now on."""
        self._unstored = False

    async def take(
        self,
        check: Check,
        *,
        sessions: SessionStore | None,
        lock: RunLock | None,
        owner: str,
        ttl: float,
        when_busy: Literal["error", "wait"],
    ) -> SessionLease | None:
        """Take the session for a run: the lease, a fresher state, recovery, the check.

        With ``lock``, the run holds a lease on it as ``owner`` (``ttl`` seconds,
        renewed; ``when_busy`` says whether to wait for another holder). Returns
        the lease. On any failure the lease is released and the error raised.
        """
        # No other worker can know a session nothing stored yet: its first run needs no reload.
        unstored, self._unstored = self._unstored, False
        unchecked, self._unchecked = self._unchecked, False
        lease = None
        try:
            if lock is not None:
                from mainspring._run.session_lease import SessionLease

                taking = SessionLease(
                    lock,
                    session_id=self.state.session_id,
                    owner=owner,
                    ttl=ttl,
                    when_busy=when_busy,
                )
                await taking.acquire()
                lease = taking
            if sessions is not None and (unchecked or (lease is not None and not unstored)):
                await self._catch_up(sessions)  # another worker may have moved the session on
            if self.state.active_stream is not None:
                await self.recover(sessions)
            await check(self.state)
        except BaseException:
            if lease is not None:
                await lease.release_shielded()
            raise
        return lease

    async def recover(self, sessions: SessionStore | None) -> None:
        """Repair, on record, what a run whose process died left in the state."""
        from mainspring._run.recovery import recover

        await recover(self.state, self.context, sessions)

    async def destroy(self) -> None:
        """End the compiler's pipeline (through the registry, which frees the id)."""
        if self._registry is None:
            await self.context.destroy()
        else:
            await self._registry.destroy(self.state.session_id)

    async def _catch_up(self, sessions: SessionStore) -> None:
        """Continue from the stored state when it differs from the one held."""
        fresh = await sessions.load(self.state.session_id)
        if fresh is not None and fresh != self.state:
            await self._adopt(fresh)

    async def _adopt(self, state: SessionState) -> None:
        """Continue from ``state`` (a fresher one): its transcript becomes the compiler's."""
        self.state = state
        registry = self._registry
        if registry is None:  # the session's own registry, holding its compiler
            from mainspring.context.lifecycle import CompilerRegistry

            registry = self._registry = CompilerRegistry()
            registry.create(state.session_id, lambda: self.context)
        self.context = await registry.replace(
            state.session_id,
            partial(self._agent.context_compiler, state.messages, session_id=state.session_id),
        )
        state.bind_messages(self.context.transcript.backing)
