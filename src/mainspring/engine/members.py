"""Subagents as engine members: sessions kept per scope, approvals that pause the host.

An engine agent that ``uses`` another engine agent gets it as a tool taking
``{"task": str, "alias": str}``. Each subagent session belongs to a scope:
the caller, the host-created scope (:meth:`Engine.new_scope`) and the alias.
A call with an alias already used in the same scope continues that session
(its history included); the same alias in another scope, or for another
caller, is another session, so no scope ever reaches another's subagents.
Without an alias a call gets a session of its own, dropped when the call
returns (kept while it waits on a decision: deciding calls it again).

Sessions live as long as their scope: a run without a scope gets one of its
own, dropped with its sessions when the run ends (or, paused, when the
decision's run ends); a scope from :meth:`Engine.new_scope` lasts until
:meth:`Engine.close_scope`.

When the subagent pauses for a decision, the host's turn pauses too: the
tool suspends (:meth:`ToolContext.suspend`) and the host's
``pending_action`` carries the subagent's action as ``nested``. Deciding
the host's action (``Engine.decide`` or ``Session.resume`` on the host
session) hands the decision to the subagent, whose run goes on; its final
text becomes the host call's result. Every cost of the subagent counts
toward the host session's spend and budget (``ToolContext.charge``), a run
of it may spend at most what the host's budget has left, and its
events reach the host stream as ``canvas`` events of kind
``"subagent_event"``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from mainspring.agent import Agent
from mainspring.codec import event_to_dict
from mainspring.events import ErrorEvent, Event, TurnComplete
from mainspring.session import Session
from mainspring.subagents import SUBAGENT_EVENT, within_host_budget
from mainspring.tools.context import ToolContext, current_scope
from mainspring.tools.define import Tool, ToolOutput
from mainspring.tools.policy import ToolPolicy

__all__ = ["MemberKey", "MemberSessions", "member_tool"]

MemberKey = tuple[str, str, str, str]
"""``(caller key, scope, agent, alias)``: where one subagent session lives."""


_InScope = tuple[str, str, str]
"""``(caller key, agent, alias)``: a session's place inside its scope."""


class MemberSessions:
    """The subagent sessions of an engine, each under its :data:`MemberKey`, by scope."""

    def __init__(self) -> None:
        self._scopes: dict[str, dict[_InScope, Session]] = {}

    def get(self, key: MemberKey) -> Session | None:
        """The session under ``key``, if any."""
        caller, scope, agent, alias = key
        return self._scopes.get(scope, {}).get((caller, agent, alias))

    def open(self, key: MemberKey, agent: Agent) -> Session:
        """The session under ``key``, created for ``agent`` when there is none."""
        caller, scope, name, alias = key
        sessions = self._scopes.setdefault(scope, {})
        session = sessions.get((caller, name, alias))
        if session is None:
            session = sessions[(caller, name, alias)] = Session(agent)
        return session

    def drop(self, key: MemberKey) -> None:
        """Forget the session under ``key`` (if any)."""
        caller, scope, agent, alias = key
        sessions = self._scopes.get(scope)
        if sessions is not None:
            sessions.pop((caller, agent, alias), None)
            if not sessions:
                del self._scopes[scope]

    def drop_scope(self, scope: str) -> None:
        """Forget every session of ``scope``."""
        self._scopes.pop(scope, None)

    def keys(self) -> tuple[MemberKey, ...]:
        """Every key a session lives under."""
        return tuple(
            (caller, scope, agent, alias)
            for scope, sessions in self._scopes.items()
            for caller, agent, alias in sessions
        )


class _MemberInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: str = Field(description="The task, with everything the agent needs to know.")
    alias: str = Field(
        default="",
        max_length=64,
        description="Name this conversation to continue it in a later call (same alias).",
    )


def member_tool(agent: Agent, sessions: MemberSessions, description: str) -> Tool:
    """``agent`` as a tool of a host agent, its sessions kept in ``sessions`` per scope."""

    async def call(task: str, alias: str, ctx: ToolContext) -> ToolOutput:
        scope = current_scope()
        if scope is None:
            return ToolOutput(content="a member agent runs only inside an engine", is_error=True)
        unnamed = not alias
        alias = alias or f"call:{ctx.tool_use_id}"  # unnamed: this call's own session
        key: MemberKey = (scope.caller.key, scope.scope, agent.name, alias)
        session = sessions.open(key, agent)
        session.agent = within_host_budget(agent, session.cost_usd, ctx)  # the host's remainder
        try:
            return await _delegate(agent, alias, session, task, ctx)
        finally:
            if unnamed and session.pending is None:  # (waiting: the decision calls again)
                sessions.drop(key)

    schema = _MemberInput.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return Tool(
        name=agent.name,
        description=description,
        input_schema=schema,
        policy=ToolPolicy(read_only=True, concurrency_safe=False),
        fn=call,
        input_model=_MemberInput,
        ctx_param="ctx",
        is_async=True,
        meta={"subagent": agent.name},
    )


async def _delegate(
    agent: Agent, alias: str, session: Session, task: str, ctx: ToolContext
) -> ToolOutput:
    """Give ``task`` (or the host's decision) to the subagent's ``session``: its result."""
    decision = ctx.decision
    if decision is not None:
        pending = session.pending
        if pending is None:
            return ToolOutput(content=f"{agent.name!r} waits on no decision", is_error=True)
        stream = session.resume(pending.attempt_id, decision)
    elif session.pending is not None:
        return ToolOutput(
            content=f"{agent.name!r} ({alias}) still waits for a decision on "
            f"{session.pending.name!r}; it cannot take a new task yet",
            is_error=True,
        )
    else:
        stream = session.send(task)
    terminal = await _consume(agent.name, session, stream, ctx)
    if session.pending is not None:
        ctx.suspend(session.pending)
    last = next((m for m in reversed(session.messages) if m.role == "assistant"), None)
    text = last.text if last is not None else ""
    if isinstance(terminal, TurnComplete) and terminal.stop_reason == "end_turn":
        return ToolOutput(content=text)
    if isinstance(terminal, ErrorEvent):
        why = terminal.message
    elif isinstance(terminal, TurnComplete):
        why = f"stopped: {terminal.stop_reason}"
    else:
        why = "ended without a result"
    return ToolOutput(content=f"Agent {agent.name!r} {why}. {text}".strip(), is_error=True)


async def _consume(
    name: str, session: Session, stream: AsyncIterator[Event], ctx: ToolContext
) -> Event | None:
    terminal: Event | None = None
    before = session.cost_usd
    try:
        async with aclosing(stream) as running:  # type: ignore[type-var]
            async for event in running:
                terminal = event
                data: dict[str, JsonValue] = {"agent": name, "event": event_to_dict(event)}
                ctx.canvas(SUBAGENT_EVENT, data, title=name)
    finally:
        if ctx.cancelled:
            session.cancel()
        ctx.charge(max(session.cost_usd - before, 0.0), what=f"subagent {name}")
    return terminal
