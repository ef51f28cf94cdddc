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
to the next in a :class:`DirectCaller`, so the cap holds across calls; writes
are serialized, so two concurrent calls never both fit under it.
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
from mainspring.events import ErrorEvent, Event, PendingAction, ToolResult, TurnComplete
from mainspring.messages import ImagePart, Message
from mainspring.models.base import ModelEvent, ModelRequest, ModelStop, ToolCallEnd
from mainspring.session import Session
from mainspring.state import SessionState

__all__ = ["DirectCaller", "DirectResult"]

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

    def __init__(self, agent: Agent, *, caller: str = "direct") -> None:
        """Calls on ``agent``'s tools, policies and hooks; ``caller`` names them in sessions."""
        self.agent = agent
        self.caller = caller
        self._auto_spent = 0.0
        self._cost = 0.0
        self._writes = anyio.Lock()

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
        tool = self.agent.tool(name)
        if tool is not None and tool.policy.read_only:
            return await self._call(name, arguments, decide, on_event)
        async with self._writes:  # one write at a time: the cap sees every earlier one
            return await self._call(name, arguments, decide, on_event)

    async def _call(
        self,
        name: str,
        arguments: dict[str, JsonValue],
        decide: Decide | None,
        on_event: OnEvent | None,
    ) -> DirectResult:
        agent = replace(
            self.agent,
            model=_OneCall(name, json.dumps(arguments)),
            instructions="",
            context_block=None,
            skill_recipe=None,
            memory=None,
            context=ContextOptions(budget=None),
        )
        state = SessionState(
            session_id=f"{self.caller}-{name}",
            agent_name=self.agent.name,
            auto_spent_usd=self._auto_spent,
            cost_usd=self._cost,
        )
        session = Session(agent, state=state)
        events = await _collect(session.send(Message.user(f"{self.caller} calls {name}")), on_event)
        while session.pending is not None:
            pending = session.pending
            decision = (
                await decide(pending)
                if decide is not None
                else Reject("this action needs approval and nobody can be asked")
            )
            events += await _collect(session.resume(pending.attempt_id, decision), on_event)
        self._auto_spent = session.state.auto_spent_usd
        self._cost = session.cost_usd
        result = _result_of(events)
        images = tuple(
            image
            for message in session.messages
            for part in message.tool_results_parts
            for image in part.images
        )
        return replace(result, images=images) if images else result


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
