"""Subagents: an agent exposed as a tool of another agent.

```python
researcher = SubagentHandle(research_agent, description="Research a topic.", budget_usd=0.5)
host = Agent(model=..., tools=[researcher.tool])
```

(:func:`subagent_tool` is the shortcut when you need only the tool;
:meth:`SubagentHandle.of` finds the handle again from that tool.)

Each call runs the subagent in a fresh :class:`~mainspring.session.Session`
of its own (its tools, model, budget and ``max_steps``), on the input
``{"task": str}``; the host model gets the subagent's final text as the
tool result. A subagent that stops early (``max_steps``, budget, error)
gives an error result naming why, with whatever text it had.

**Events.** Every subagent event reaches the host's stream as a
``canvas`` event of kind ``"subagent_event"`` with
``data={"agent": name, "event": event_to_dict(event)}`` (its
``tool_use_id`` is the host's call). The host's event union is unchanged.

**Cancellation.** The subagent runs inside the host's tool call, which is a
serial read (``read_only=True, concurrency_safe=False``: not shielded like a
write), so cancelling the host cancels the call; the subagent stream is closed
(``aclosing``), which stops its run (its own running write still gets its
agent's ``limits.write_cancel_grace``).

**Approvals.** A subagent made here that pauses does not pause the host
(an engine member agent does: :mod:`mainspring.engine.members` suspends the
host's call with ``ToolContext.suspend`` and the host decides the nested
action through its own session). Instead:

1. the paused subagent's session state is parked in the handle's
   ``records`` (``SharedRecords``: give it the deployment's store, so any
   worker can decide it and a crash loses nothing; this process's memory
   otherwise), under the host call's caller (``ToolContext.caller``) and the
   action's ``attempt_id``;
2. the call returns a (non-error) result telling the host model that the
   subagent waits for approval, and emits a ``canvas`` event of kind
   ``"subagent_pending_action"`` with ``data={"agent": name,
   "action": event_to_dict(pending)}``;
3. the application decides with ``await handle.resume(attempt_id, decision,
   caller=...)``, on any worker sharing the records: it takes the parked
   session once (of two decisions, one goes on; a refused decision puts it
   back), runs the rest of the subagent's turn and returns a
   :class:`SubagentResult` (it may pause again: see ``result.pending``);
4. the application feeds the outcome back to the host with
   ``host_session.send(result.followup())``.

Only the caller a run paused for finds it (``await handle.pending(caller=...)``,
``resume``); each caller holds at most :data:`MAX_PAUSED_SUBAGENTS` paused runs
of one handle: past that the call is an error result (``run`` raises
``CallerBusy``) and the paused write never runs.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field

import anyio
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from mainspring.agent import Agent
from mainspring.codec import decode, encode, event_to_dict
from mainspring.decisions import Decision
from mainspring.errors import CallerBusy, ConfigError, StoreError, UnknownAttempt
from mainspring.events import Canvas, ErrorEvent, Event, PendingAction, StopReason, TurnComplete
from mainspring.principals import Caller
from mainspring.session import Session
from mainspring.state import SessionState
from mainspring.stores.base import SharedRecords
from mainspring.stores.records import InMemoryRecords
from mainspring.tools.context import ToolContext, current_caller
from mainspring.tools.define import Tool, ToolOutput
from mainspring.tools.policy import ToolPolicy

__all__ = [
    "MAX_PAUSED_SUBAGENTS",
    "PAUSED_SUBAGENT_KIND",
    "PAUSED_SUBAGENT_TTL",
    "SUBAGENT_EVENT",
    "SUBAGENT_PENDING_ACTION",
    "SubagentHandle",
    "SubagentResult",
    "subagent_tool",
]

SUBAGENT_EVENT = "subagent_event"
"""Canvas kind of a forwarded subagent event."""
SUBAGENT_PENDING_ACTION = "subagent_pending_action"
"""Canvas kind of a subagent's action awaiting the application's decision."""
PAUSED_SUBAGENT_KIND = "subagent-paused"
"""The kind of the shared records that hold paused subagent runs."""
MAX_PAUSED_SUBAGENTS = 100
"""Paused runs of one subagent handle one caller may hold at once, across workers."""
PAUSED_SUBAGENT_TTL = 7 * 24 * 3600.0
"""Seconds a paused subagent run waits for its decision before it is forgotten."""
_PUT_BACK_DEADLINE = 30.0
"""Seconds a refused (or cancelled) decision has to put the paused run back (shielded)."""


class _TaskInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: str = Field(description="The task for the subagent, with everything it needs to know.")


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentResult:
    """How one subagent run (or resumed run) ended."""

    agent: str
    text: str
    """The subagent's final text."""
    stop_reason: StopReason | None
    """``None`` when the run ended with an error event."""
    error: str | None = None
    pending: PendingAction | None = None
    """Set when the subagent paused for a decision (see :meth:`SubagentHandle.resume`)."""
    artifacts: tuple[Canvas, ...] = ()
    """Canvas events the subagent's tools emitted."""
    events: tuple[Event, ...] = field(default=(), repr=False)
    cost_usd: float = 0.0

    @property
    def ok(self) -> bool:
        """The subagent finished its turn normally."""
        return self.stop_reason == "end_turn"

    def output(self) -> ToolOutput:
        """The tool result the host model sees."""
        if self.pending is not None:
            return ToolOutput(
                content=(
                    f"Subagent {self.agent!r} is waiting for the user's approval of "
                    f"{self.pending.name!r} (attempt {self.pending.attempt_id}). Its result "
                    "will be sent to you once the user decides; do not call it again for this."
                )
            )
        if self.ok:
            return ToolOutput(content=self.text)
        why = self.error or f"stopped: {self.stop_reason}"
        text = f"\n\nIts last text:\n{self.text}" if self.text else ""
        return ToolOutput(content=f"Subagent {self.agent!r} {why}.{text}", is_error=True)

    def followup(self) -> str:
        """A user message giving a resumed subagent's outcome back to the host."""
        out = self.output()
        status = "failed" if out.is_error else "finished"
        return f"[Subagent {self.agent!r} {status} after the approval decision]\n{out.content}"


class SubagentHandle:
    """An agent usable as a tool of another agent; keeps the subagents paused for approval."""

    def __init__(
        self,
        agent: Agent,
        *,
        name: str | None = None,
        description: str,
        budget_usd: float | None = None,
        max_steps: int | None = None,
        records: SharedRecords | None = None,
    ) -> None:
        """Wrap ``agent`` as a tool named ``name`` (defaults to the agent's name).

        ``budget_usd`` and ``max_steps`` override the agent's own limits for
        every run of the subagent. ``records`` is where paused runs wait for
        their decision: a store every worker shares (a session store, or a
        ``RedisRunLock``) makes them decidable on any worker and durable
        (this process's memory by default).
        """
        if not description:
            raise ConfigError("a subagent tool needs a description")
        limits = agent.limits
        if budget_usd is not None:
            limits = dataclasses.replace(limits, budget_usd=budget_usd)
        if max_steps is not None:
            limits = dataclasses.replace(limits, max_steps=max_steps)
        self.agent = agent if limits is agent.limits else dataclasses.replace(agent, limits=limits)
        self.name = name or agent.name
        self.records: SharedRecords = records if records is not None else InMemoryRecords()
        """Where paused runs wait for their decision."""
        schema = _TaskInput.model_json_schema()
        schema.pop("title", None)
        props = schema.get("properties", {})
        for prop in props.values():
            prop.pop("title", None)
        self.tool = Tool(
            name=self.name,
            description=description,
            input_schema=schema,
            policy=ToolPolicy(read_only=True, concurrency_safe=False),
            fn=self._call,
            input_model=_TaskInput,
            ctx_param="ctx",
            is_async=True,
            meta={"subagent": self.name},
        )

    @classmethod
    def of(cls, tool: Tool) -> SubagentHandle:
        """The handle behind a tool made by :func:`subagent_tool`.

        Raises:
            ConfigError: The tool is not a subagent tool.
        """
        owner = getattr(tool.fn, "__self__", None)
        if not isinstance(owner, SubagentHandle):
            raise ConfigError(f"tool {tool.name!r} is not a subagent tool")
        return owner

    async def pending(self, *, caller: Caller | None = None) -> tuple[PendingAction, ...]:
        """Actions of ``caller``'s paused subagent runs (on every worker), by attempt id.

        ``caller`` defaults to the running code's (``current_caller()``).
        """
        who = caller if caller is not None else current_caller()
        found = await self.records.owned_records(
            PAUSED_SUBAGENT_KIND, self._owner(who), limit=MAX_PAUSED_SUBAGENTS
        )
        return tuple(p for _, value in found if (p := _loads(value).pending) is not None)

    async def run(self, task: str, ctx: ToolContext | None = None) -> SubagentResult:
        """Run the subagent on ``task`` in a new session (forwarding events to ``ctx``).

        Within a host's run (``ctx``), the subagent spends at most what the
        host's budget has left (and at most its own budget, if it has one).
        A run that pauses is parked for ``ctx.caller`` (else ``current_caller()``).

        Raises:
            CallerBusy: The run paused and its caller holds
                :data:`MAX_PAUSED_SUBAGENTS` paused runs of this handle (it is dropped).
        """
        session = Session(within_host_budget(self.agent, 0.0, ctx))
        who = ctx.caller if ctx is not None else current_caller()
        return await self._consume(session, session.send(task), ctx, who)

    async def resume(
        self,
        attempt_id: str,
        decision: Decision,
        *,
        caller: Caller | None = None,
        ctx: ToolContext | None = None,
    ) -> SubagentResult:
        """Decide a paused subagent's action and run the rest of its turn.

        ``caller`` is whose paused run it is (default: ``ctx.caller`` with a
        ``ctx``, else ``current_caller()``): another caller's is unknown. The
        paused run is taken once, on whichever worker shares :attr:`records`;
        a decision refused before anything of it applies (or cancelled then)
        leaves it waiting. Cancelled later, the rest of the run stops as a
        cancelled host call's would.

        Raises:
            UnknownAttempt: No paused subagent run of this caller waits on this attempt.
            DecisionConflict, FieldNotModifiable, ApprovalError: As ``Session.resume``.
            CallerBusy: The run paused again past :data:`MAX_PAUSED_SUBAGENTS`.
            StoreError: The parked run cannot be decoded.
        """
        who = caller if caller is not None else ctx.caller if ctx is not None else current_caller()
        key = self._key(who, attempt_id)
        taken = await self.records.take_record(PAUSED_SUBAGENT_KIND, key)
        if taken is None:
            raise UnknownAttempt(
                f"no paused run of subagent {self.name!r} waits on attempt {attempt_id!r}",
                attempt_id=attempt_id,
            )
        try:  # what may refuse the decision before anything of it is applied
            session = Session(self.agent, state=_loads(taken[1]))
            session.agent = within_host_budget(self.agent, session.cost_usd, ctx)
            stream = session.resume(attempt_id, decision)  # validates before it applies
        except BaseException:
            with anyio.fail_after(_PUT_BACK_DEADLINE, shield=True):
                await self.records.put_record(
                    PAUSED_SUBAGENT_KIND,
                    key,
                    taken[1],
                    owner=taken[0],
                    ttl=PAUSED_SUBAGENT_TTL,
                )
            raise
        return await self._consume(session, stream, ctx, who)

    async def _call(self, task: str, ctx: ToolContext) -> ToolOutput:
        try:
            result = await self.run(task, ctx)
        except CallerBusy as exc:
            return ToolOutput(content=str(exc), is_error=True)
        return result.output()

    def _owner(self, caller: Caller) -> str:
        return json.dumps([self.name, caller.key], ensure_ascii=False)

    def _key(self, caller: Caller, attempt_id: str) -> str:
        return json.dumps([self.name, caller.key, attempt_id], ensure_ascii=False)

    async def _park(self, caller: Caller, session: Session, pending: PendingAction) -> None:
        value = json.dumps(encode(session.state.snapshot()), ensure_ascii=False)
        added = await self.records.put_record(
            PAUSED_SUBAGENT_KIND,
            self._key(caller, pending.attempt_id),
            value,
            owner=self._owner(caller),
            ttl=PAUSED_SUBAGENT_TTL,
            limit=MAX_PAUSED_SUBAGENTS,
        )
        if added == "full":
            raise CallerBusy(
                f"caller {caller.key!r} holds {MAX_PAUSED_SUBAGENTS} paused runs of subagent"
                f" {self.name!r} (the limit): decide one first; this run's"
                f" {pending.name!r} will not run"
            )
        if added == "exists":  # an attempt id is unique: never two pauses on one
            raise StoreError(f"attempt {pending.attempt_id!r} is parked already")

    async def _consume(
        self,
        session: Session,
        stream: AsyncGenerator[Event, None],
        ctx: ToolContext | None,
        caller: Caller,
    ) -> SubagentResult:
        events: list[Event] = []
        cost_before = session.cost_usd
        try:
            async with aclosing(stream) as running:
                async for event in running:
                    events.append(event)
                    if ctx is not None:
                        self._forward(ctx, event)
        finally:
            if ctx is not None and ctx.cancelled:
                session.cancel()
            if ctx is not None:  # the subagent's spend is the host's too (its budget)
                ctx.charge(max(session.cost_usd - cost_before, 0.0), what=f"subagent {self.name}")
        pending = session.pending
        if pending is not None:
            await self._park(caller, session, pending)
        return self._result(session, events, session.cost_usd - cost_before, ctx)

    def _forward(self, ctx: ToolContext, event: Event) -> None:
        data: dict[str, JsonValue] = {"agent": self.name, "event": event_to_dict(event)}
        ctx.canvas(SUBAGENT_EVENT, data, title=self.name)

    def _result(
        self, session: Session, events: list[Event], cost: float, ctx: ToolContext | None
    ) -> SubagentResult:
        terminal = events[-1] if events else None
        pending = session.pending
        if pending is not None:
            if ctx is not None:
                data: dict[str, JsonValue] = {"agent": self.name, "action": event_to_dict(pending)}
                ctx.canvas(SUBAGENT_PENDING_ACTION, data, title=self.name)
        last = next((m for m in reversed(session.messages) if m.role == "assistant"), None)
        return SubagentResult(
            agent=self.name,
            text=last.text if last is not None else "",
            stop_reason=terminal.stop_reason if isinstance(terminal, TurnComplete) else None,
            error=_error_of(terminal),
            pending=pending,
            artifacts=tuple(e for e in events if isinstance(e, Canvas)),
            events=tuple(events),
            cost_usd=cost,
        )


def within_host_budget(agent: Agent, spent: float, ctx: ToolContext | None) -> Agent:
    """``agent`` with a budget its run cannot pass the host's remaining budget with.

    ``spent`` is what the subagent's session spent already (its budget counts
    the whole session); ``ctx`` is the host's call (``None``: no host, no bound).
    A subagent without a budget of its own gets the host's remainder; one with
    a budget gets the lower of the two.
    """
    left = ctx.budget_left_usd if ctx is not None else None
    if left is None:
        return agent
    bound = spent + left
    own = agent.limits.budget_usd
    if own is not None and own <= bound:
        return agent
    return dataclasses.replace(agent, limits=dataclasses.replace(agent.limits, budget_usd=bound))


def _loads(value: str) -> SessionState:
    try:
        return decode(SessionState, json.loads(value))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise StoreError(f"a paused subagent run cannot be decoded: {exc}") from exc


def _error_of(terminal: Event | None) -> str | None:
    if terminal is None:
        return "ended without a terminal event"
    if isinstance(terminal, ErrorEvent):
        return f"failed: {terminal.message}"
    return None


def subagent_tool(
    agent: Agent,
    *,
    name: str | None = None,
    description: str,
    budget_usd: float | None = None,
    max_steps: int | None = None,
    records: SharedRecords | None = None,
) -> Tool:
    """``agent`` as a tool of another agent (input: ``task``; output: its final text).

    See the module docstring for events, cancellation and approvals; get the
    handle that resumes paused runs with ``SubagentHandle.of(tool)``.
    """
    return SubagentHandle(
        agent,
        name=name,
        description=description,
        budget_usd=budget_usd,
        max_steps=max_steps,
        records=records,
    ).tool
