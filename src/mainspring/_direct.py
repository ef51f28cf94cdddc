"""A tool called from outside the model (an MCP client, a host) takes the model's path.

There is one dispatch path. A direct call is run as a one-step turn of a
session whose "model" asks for exactly that call and then stops: permission
rules (deny/allow lists, ``can_use_tool``), USD tiers and the auto-spend cap,
guards, preflight, hooks, the audit hook and the write ledger all apply
because the dispatcher that applies them for the model is the one that runs
it. A call that needs approval pauses like any other; ``decide`` is asked
(an MCP server asks its client's user) and the call runs only after an
approval, at most once.

The caller's running totals (auto-approved spend, cost) carry from one call
to the next in a :class:`DirectCaller`, so the cap holds across calls. Writes
are serialized, and each one's judging starts from the total the write before
it left, so two concurrent calls never both fit under the cap. Given a store
with a :class:`~mainspring.stores.base.SpendLedger` (``store=``), the totals
live there under the caller's account, added to atomically: every worker
serving the same caller counts every other's auto-approved writes, and a
write the cap no longer admits pauses for approval as a serial caller's would.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

import anyio
from pydantic import JsonValue

from mainspring.agent import Agent
from mainspring.context.options import ContextOptions
from mainspring.decisions import Decision, Reject
from mainspring.errors import UnknownAttempt
from mainspring.events import ErrorEvent, Event, PendingAction, ToolResult, TurnComplete
from mainspring.messages import ImagePart, Message
from mainspring.models.base import ModelEvent, ModelRequest, ModelStop, ToolCallEnd
from mainspring.session import Session
from mainspring.state import SessionState, SpendKind, WriteRecord
from mainspring.stores.base import SessionStore, SpendLedger

__all__ = ["DirectCall", "DirectCaller", "DirectResult"]

Decide = Callable[[PendingAction], Awaitable[Decision]]
"""Asked for a decision when a direct call pauses (an approval, edits, a rejection)."""
OnEvent = Callable[[Event], Awaitable[None]]
"""Sees each event of the call as it happens (a tool's progress, say)."""


@dataclass(frozen=True, slots=True)
class DirectResult:
    """What a direct call came to: the tool's result as the model would have seen it."""

    content: str
    is_error: bool
    ran: bool
    """Whether the tool ran (not denied, blocked, rejected or failed before it)."""
    images: tuple[ImagePart, ...] = ()
    """Images the tool returned with its text."""


class _OneCall:
    """The "model" of a direct call: it asks for the call once, then stops."""

    def __init__(self, name: str, arguments: str) -> None:
        self._name = name
        self._arguments = arguments

    @property
    def name(self) -> str:
        return "direct-call"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if request.messages and request.messages[-1].role == "tool":
            yield ModelStop(stop_reason="end_turn", model="direct-call")
            return
        yield ToolCallEnd(tool_use_id="direct", name=self._name, index=0, arguments=self._arguments)
        yield ModelStop(stop_reason="tool_use", model="direct-call")


class DirectCaller:
    """Calls an agent's tools through the engine's one dispatch path."""

    def __init__(
        self,
        agent: Agent,
        *,
        caller: str = "direct",
        store: SessionStore | None = None,
        account: str | None = None,
    ) -> None:
        """Calls on ``agent``'s tools, policies and hooks; ``caller`` names them in sessions.

        With ``store`` (a :class:`~mainspring.stores.base.SpendLedger`: SQLite,
        PostgreSQL, in memory), the caller's auto-approved spend and cost are
        kept there under ``account`` (default ``"direct:" + caller``), so the
        session cap and the budget hold across every worker sharing it.
        """
        self.agent = agent
        self.caller = caller
        self._auto_spent = 0.0
        self._cost = 0.0
        self._writes = anyio.Lock()
        given: object = store
        ledger = given if isinstance(given, SpendLedger) else None
        self._account = (
            None if ledger is None else _SpendAccount(ledger, account or f"direct:{caller}")
        )

    async def call(
        self,
        name: str,
        arguments: dict[str, JsonValue],
        *,
        decide: Decide | None = None,
        on_event: OnEvent | None = None,
    ) -> DirectResult:
        """Run tool ``name`` with ``arguments`` as a call from the model would run.

        ``decide`` answers a pause (without one, a call that needs approval is
        rejected: nobody can approve it); ``on_event`` sees the events live.
        """
        running = await self.start(name, arguments, on_event=on_event)
        while running.pending is not None:
            pending = running.pending
            decision = (
                await decide(pending)
                if decide is not None
                else Reject("this action needs approval and nobody can be asked")
            )
            await running.decide(decision, on_event=on_event)
        assert running.result is not None
        return running.result

    async def start(
        self, name: str, arguments: dict[str, JsonValue], *, on_event: OnEvent | None = None
    ) -> DirectCall:
        """Start a call that may pause: the caller decides later with ``DirectCall.decide``."""
        state = SessionState(
            session_id=f"{self.caller}-{name}",
            agent_name=self.agent.name,
            principal=self.caller,  # the requester of what the call asks to approve
            auto_spent_usd=self._auto_spent,
            cost_usd=self._cost,
        )
        running = self.resumed(name, arguments, state)
        await running._run(
            running.session.send(Message.user(f"{self.caller} calls {name}")), on_event
        )
        return running

    def resumed(
        self, name: str, arguments: dict[str, JsonValue], state: SessionState
    ) -> DirectCall:
        """The call of ``name`` whose session is ``state`` (one paused elsewhere, say)."""
        agent = replace(
            self.agent,
            model=_OneCall(name, json.dumps(arguments)),
            instructions="",
            context_block=None,
            skill_recipe=None,
            memory=None,
            context=ContextOptions(budget=None),
        )
        session = Session._for_direct(agent, state, self._account)
        return DirectCall(self, session, state, write=self._is_write(name))

    def _take(self, state: SessionState) -> None:
        """Keep a finished call's totals (never lower: calls end in any order)."""
        self._auto_spent = max(self._auto_spent, state.auto_spent_usd)
        self._cost = max(self._cost, state.cost_usd)

    def _is_write(self, name: str) -> bool:
        tool = self.agent.tool(name)
        return tool is None or not tool.policy.read_only


class DirectCall:
    """One direct call in progress: paused on :attr:`pending`, or done with :attr:`result`."""

    def __init__(
        self, caller: DirectCaller, session: Session, state: SessionState, *, write: bool
    ) -> None:
        self._caller = caller
        self.session = session
        self._state = state
        """The session's state (this call made it; a session without a store keeps it)."""
        self._write = write
        self.events: list[Event] = []
        self.result: DirectResult | None = None

    @property
    def pending(self) -> PendingAction | None:
        """The action the call waits on (``None`` once it is done)."""
        return self.session.pending

    async def decide(self, decision: Decision, *, on_event: OnEvent | None = None) -> None:
        """Decide :attr:`pending` and run the call on (it may pause again).

        Raises:
            UnknownAttempt, DecisionConflict, FieldNotModifiable, ApprovalError:
                As ``Session.resume`` (nothing changed).
        """
        pending = self.session.pending
        if pending is None:
            raise UnknownAttempt("this call waits on no decision", attempt_id="")
        await self._run(self.session.resume(pending.attempt_id, decision), on_event)

    async def _run(self, stream: AsyncIterator[Event], on_event: OnEvent | None) -> None:
        caller, state = self._caller, self._state
        if self._write:  # one write at a time: the cap sees every earlier one
            async with caller._writes:
                # Judged from what the writes before this one left (the totals read
                # when the call started are stale by now), not from a snapshot.
                state.raise_floor(auto_spent_usd=caller._auto_spent, cost_usd=caller._cost)
                try:
                    self.events += await _collect(stream, on_event)
                finally:  # (also when the call fails: what it spent stays spent)
                    caller._take(state)
        else:
            try:
                self.events += await _collect(stream, on_event)
            finally:
                caller._take(state)
        session = self.session
        if session.pending is not None:
            return
        result = _result_of(self.events)
        images = tuple(
            image
            for message in session.messages
            for part in message.tool_results_parts
            for image in part.images
        )
        self.result = replace(result, images=images) if images else result


class _SpendAccount:
    """A direct call's durability: no state of its own, spend totals in a store's ledger."""

    def __init__(self, ledger: SpendLedger, account: str) -> None:
        self._ledger = ledger
        self._account = account

    async def save(self, *, defer: bool = False) -> None:
        """Nothing to save: a direct call's session is not stored."""

    async def record_write(self, record: WriteRecord) -> None:
        """Nothing to record: a direct call's session is not stored."""

    async def flush(self) -> None:
        """Nothing to flush."""

    async def add_spend(
        self,
        kind: SpendKind,
        amount: float,
        *,
        cap: float | None,
        floor: float,
        hold: str | None = None,
    ) -> float | None:
        """Add to the account's total in the store, atomically across workers.

        No hold is kept (``hold`` is ignored): a direct call's session is not
        stored, so no recovery would ever settle one.
        """
        return await self._ledger.add_spend(self._account, kind, amount, cap=cap, floor=floor)


async def _collect(stream: AsyncIterator[Event], on_event: OnEvent | None) -> list[Event]:
    events: list[Event] = []
    async for event in stream:
        events.append(event)
        if on_event is not None:
            await on_event(event)
    return events


def _result_of(events: Sequence[Event]) -> DirectResult:
    ran = any(e.type == "tool_start" for e in events)
    results = [e for e in events if isinstance(e, ToolResult)]
    if results:
        return DirectResult(content=results[-1].content, is_error=results[-1].is_error, ran=ran)
    terminal = events[-1] if events else None
    if isinstance(terminal, ErrorEvent):
        return DirectResult(content=terminal.message, is_error=True, ran=ran)
    reason = terminal.stop_reason if isinstance(terminal, TurnComplete) else "no result"
    return DirectResult(content=f"the call did not run ({reason})", is_error=True, ran=ran)
