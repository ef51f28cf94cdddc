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

**Where they live.** Each session's state is a shared record in the engine's
``records`` (``SharedRecords``: the server's store for a served engine), saved
when the call that used it returns, so whichever worker continues the scope (a
paused run decided on another worker, the next call of an alias) continues it
with its history. A caller holds at most :data:`MAX_MEMBER_SESSIONS` of them in
one engine (the next new one is an error result naming the limit); one unused
for :data:`MEMBER_TTL` is forgotten. Two calls of one alias at once each start
from the history saved before them, and the one saved last is kept.

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

import json
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing

import anyio
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from mainspring.agent import Agent
from mainspring.codec import decode, encode, event_to_dict
from mainspring.errors import CallerBusy, StoreError
from mainspring.events import ErrorEvent, Event, TurnComplete
from mainspring.session import Session
from mainspring.state import SessionState
from mainspring.stores.base import SharedRecords
from mainspring.subagents import SUBAGENT_EVENT, within_host_budget
from mainspring.tools.context import ToolContext, current_scope
from mainspring.tools.define import Tool, ToolOutput
from mainspring.tools.policy import ToolPolicy

__all__ = [
    "MAX_MEMBER_SESSIONS",
    "MEMBER_KIND",
    "MEMBER_TTL",
    "MemberKey",
    "MemberSessions",
    "member_tool",
]

MemberKey = tuple[str, str, str, str]
"""``(caller key, scope, agent, alias)``: where one subagent session lives."""

MEMBER_KIND = "engine-member"
"""The kind of the shared records that hold subagent sessions' states."""
_INDEX_KIND = "engine-member-of"
"""One empty record per session, owned by its caller: what bounds and lists them."""
MAX_MEMBER_SESSIONS = 1_000
"""Subagent sessions one caller may hold at once in one engine, across its workers."""
MEMBER_TTL = 30 * 24 * 3600.0
"""Seconds a subagent session is kept after the call that last used it."""
_SAVE_DEADLINE = 30.0
"""Seconds a cancelled call still has to save its session (shielded)."""


class MemberSessions:
    """The subagent sessions of an engine, each under its :data:`MemberKey`, in shared records.

    ``records`` gives the engine's current store (a server may set it after
    the engine is built).
    """

    def __init__(self, engine: str, records: Callable[[], SharedRecords]) -> None:
        """The sessions of engine ``engine``, kept in ``records()``."""
        self.engine = engine
        self._records = records

    def _key(self, key: MemberKey) -> str:
        return json.dumps([self.engine, *key], ensure_ascii=False)

    def _owner(self, caller: str) -> str:
        return json.dumps([self.engine, caller], ensure_ascii=False)

    async def get(self, key: MemberKey, agent: Agent) -> Session | None:
        """The session under ``key``, run by ``agent``, if any.

        Raises:
            StoreError: Its stored state cannot be decoded.
        """
        record = self._key(key)
        found = await self._records().owned_records(MEMBER_KIND, record, limit=1)
        if not found:
            return None
        try:
            state = decode(SessionState, json.loads(found[0][1]))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise StoreError(f"subagent session {key!r} cannot be decoded: {exc}") from exc
        return Session(agent, state=state)

    async def open(self, key: MemberKey, agent: Agent) -> Session:
        """The session under ``key``, created for ``agent`` when there is none.

        Raises:
            CallerBusy: It is new, and the caller holds :data:`MAX_MEMBER_SESSIONS`.
        """
        session = await self.get(key, agent)
        if session is not None:
            return session
        added = await self._records().put_record(
            _INDEX_KIND,
            self._key(key),
            "",
            owner=self._owner(key[0]),
            ttl=MEMBER_TTL,
            limit=MAX_MEMBER_SESSIONS,
        )
        if added == "full":
            raise CallerBusy(
                f"caller {key[0]!r} holds {MAX_MEMBER_SESSIONS} subagent sessions in engine"
                f" {self.engine!r} (the limit): close a scope first"
            )
        return Session(agent)

    async def save(self, key: MemberKey, session: Session) -> None:
        """Keep ``session``'s state under ``key`` (for :data:`MEMBER_TTL` from now)."""
        records, record = self._records(), self._key(key)
        value = json.dumps(encode(session.state.snapshot()), ensure_ascii=False)
        await records.take_record(MEMBER_KIND, record)
        await records.put_record(MEMBER_KIND, record, value, owner=record, ttl=MEMBER_TTL)
        await records.take_record(_INDEX_KIND, record)  # (its expiry moves with the session's)
        await records.put_record(_INDEX_KIND, record, "", owner=self._owner(key[0]), ttl=MEMBER_TTL)

    async def drop(self, key: MemberKey) -> None:
        """Forget the session under ``key`` (if any)."""
        records, record = self._records(), self._key(key)
        await records.take_record(MEMBER_KIND, record)
        await records.take_record(_INDEX_KIND, record)

    async def drop_scope(self, caller: str, scope: str) -> None:
        """Forget every session of ``caller``'s ``scope``."""
        for key in await self.keys(caller):
            if key[1] == scope:
                await self.drop(key)

    async def keys(self, caller: str) -> tuple[MemberKey, ...]:
        """Every key a session of ``caller``'s lives under, sorted."""
        owned = await self._records().owned_records(
            _INDEX_KIND, self._owner(caller), limit=MAX_MEMBER_SESSIONS
        )
        keys: list[MemberKey] = []
        for record, _ in owned:
            _engine, *parts = json.loads(record)
            keys.append((str(parts[0]), str(parts[1]), str(parts[2]), str(parts[3])))
        return tuple(keys)


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
        try:
            session = await sessions.open(key, agent)
        except CallerBusy as exc:
            return ToolOutput(content=str(exc), is_error=True)
        session.agent = within_host_budget(agent, session.cost_usd, ctx)  # the host's remainder
        try:
            return await _delegate(agent, alias, session, task, ctx)
        finally:  # kept for whichever worker goes on (also when cancelled: shielded)
            with anyio.fail_after(_SAVE_DEADLINE, shield=True):
                if unnamed and session.pending is None:  # (waiting: the decision calls again)
                    await sessions.drop(key)
                else:
                    await sessions.save(key, session)

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
    name: str, session: Session, stream: AsyncGenerator[Event, None], ctx: ToolContext
) -> Event | None:
    terminal: Event | None = None
    before = session.cost_usd
    try:
        async with aclosing(stream) as running:
            async for event in running:
                terminal = event
                data: dict[str, JsonValue] = {"agent": name, "event": event_to_dict(event)}
                ctx.canvas(SUBAGENT_EVENT, data, title=name)
    finally:
        if ctx.cancelled:
            session.cancel()
        ctx.charge(max(session.cost_usd - before, 0.0), what=f"subagent {name}")
    return terminal
