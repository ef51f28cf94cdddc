"""Engine: several agents and tools behind one management policy.

See the package docstring (:mod:`mainspring.engine`) for the model.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping, Sequence
from contextlib import aclosing, contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import JsonValue

from mainspring._direct import DirectCall, DirectCaller
from mainspring.agent import Agent
from mainspring.decisions import Approve, Decision, Reject
from mainspring.engine.members import MemberSessions
from mainspring.engine.paused import Parked, park, parked, unpark
from mainspring.engine.policy import ManagementPolicy
from mainspring.engine.results import AgentRun, EngineInfo, ToolCallResult
from mainspring.engine.roster import Roster
from mainspring.engine.scopes import close_scope, open_scope, open_scopes
from mainspring.errors import (
    AccessDenied,
    ApprovalError,
    CallerBusy,
    ConfigError,
    SessionBusy,
    ToolInputError,
    UnknownAttempt,
)
from mainspring.events import ErrorEvent, Event, PendingAction, TurnComplete
from mainspring.guards import Guard
from mainspring.hooks import Hooks
from mainspring.models.base import ModelEvent, ModelRequest
from mainspring.namespaces import InMemoryKeyValueStore, KeyValueStore, Namespace
from mainspring.permissions import PermissionRules
from mainspring.principals import Caller
from mainspring.session import Session
from mainspring.stores.base import SharedRecords
from mainspring.stores.records import InMemoryRecords
from mainspring.tools.context import RunScope, current_scope, run_scope
from mainspring.tools.define import Tool

if TYPE_CHECKING:
    from mainspring.audit.log import AuditLog
    from mainspring.engine.signing import SigningKey
    from mainspring.stores.base import SessionStore

__all__ = ["Engine", "agent_storage"]


MAX_SCOPES = 1_000
"""Scopes one caller may hold open at once by default (:meth:`Engine.new_scope`)."""
_OWN_SCOPE = "run:"
"""How a run's own scope starts (one from :meth:`Engine.new_scope` is a bare UUID), so
any worker that ends the run knows to drop its subagent sessions."""
_DROP_DEADLINE = 30.0
"""Seconds an ended run (also a cancelled one, shielded) has to drop its scope's sessions."""


class _NoModel:
    """The model of the engine's direct-call agent (a direct call brings its own)."""

    @property
    def name(self) -> str:
        return "none"

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        raise ConfigError("the engine's direct-call agent has no model")


class Engine:
    """Agents and tools, a default agent, and who may call what.

    ```python
    engine = (
        Engine("shop", policy=ManagementPolicy(controller=alice, visibility="protected"))
        .add_tool(lookup, export=True)
        .add_agent(writer, export=True, default=True)
    )
    result = await engine.tool_call(bob, "lookup", {"sku": "A1"})
    ```
    """

    def __init__(
        self,
        name: str = "engine",
        *,
        policy: ManagementPolicy = ManagementPolicy(),
        storage: KeyValueStore | None = None,
        permissions: PermissionRules = PermissionRules(),
        guards: Sequence[Guard] = (),
        hooks: Hooks = Hooks(),
        one_run_per_caller: bool = False,
        max_scopes_per_caller: int = MAX_SCOPES,
        records: SharedRecords | None = None,
        spend_store: SessionStore | None = None,
        audit: AuditLog | None = None,
    ) -> None:
        """An empty engine; ``permissions``, ``guards`` and ``hooks`` judge direct tool calls.

        ``audit`` puts direct tool calls' decisions, writes and refusals on record
        (:mod:`mainspring.audit`; agents' runs use their own ``Agent.audit``).

        ``storage`` keeps the components' namespaces (in memory by default);
        ``one_run_per_caller`` refuses a caller's second concurrent run (CallerBusy);
        ``max_scopes_per_caller`` bounds the scopes a caller holds open (CallerBusy,
        409 on the signed routes).
        ``records`` keeps paused calls and runs (:mod:`mainspring.engine.paused`),
        open scopes (:mod:`mainspring.engine.scopes`) and subagent sessions
        (:mod:`mainspring.engine.members`): a store every worker shares makes
        a pause on one worker decidable on another, and a scope usable on any
        (a server sets its own when none is given; this process's memory
        otherwise).
        ``spend_store`` (a session store with a spend ledger, shared by every
        worker) keeps each caller's auto-approved spend of direct tool calls, so
        the session auto-spend cap holds across workers (a server sets it to
        its own session store when the engine has none).
        """
        if max_scopes_per_caller < 1:
            raise ConfigError("max_scopes_per_caller must be at least 1")
        self.name = name
        self.policy = policy
        self.storage: KeyValueStore = storage if storage is not None else InMemoryKeyValueStore()
        self.permissions = permissions
        self.guards = tuple(guards)
        self.hooks = hooks
        self.audit = audit
        self.one_run_per_caller = one_run_per_caller
        self.max_scopes_per_caller = max_scopes_per_caller
        self._caches: dict[tuple[str, ...], dict[str, Any]] = {}
        self._direct: dict[str, DirectCaller] = {}
        self._direct_agent: Agent | None = None
        self.records: SharedRecords = records if records is not None else InMemoryRecords()
        """Where paused calls and runs wait (see :meth:`share`)."""
        self._shared = records is not None
        self._active: dict[str, set[object]] = {}
        """Each caller's runs under way: their sessions, and a token per direct call."""
        self.spend_store: SessionStore | None = spend_store
        """Where direct calls' spend totals are kept (see :class:`DirectCaller`)."""
        self.members = MemberSessions(name, lambda: self.records)
        """Subagent sessions by scope, kept in :attr:`records` (see
        :mod:`mainspring.engine.members`)."""
        self._roster = Roster(name, self.members)
        """The agents and tools registered, and which of them a caller reaches."""

    # ----------------------------------------------------------- building

    def add_agent(
        self,
        agent: Agent,
        *,
        export: bool = False,
        default: bool = False,
        description: str = "",
        uses: Sequence[str] = (),
    ) -> Engine:
        """Register ``agent`` under its name; returns the engine.

        ``uses`` names engine tools and engine agents (as subagents) the
        agent may call besides its own tools; ``export`` makes it callable
        by non-managers; ``default`` makes it the agent ``agent_run`` runs.
        """
        self._roster.add_agent(
            agent, export=export, default=default, description=description, uses=uses
        )
        return self

    def add_tool(self, tool: Tool, *, export: bool = False) -> Engine:
        """Register ``tool``; ``export`` makes it callable by non-managers. Returns the engine."""
        self._roster.add_tool(tool, export=export)
        self._direct_agent = None
        return self

    def set_default(self, agent: str) -> Engine:
        """Make ``agent`` the one ``agent_run`` runs when none is named."""
        self._roster.set_default(agent)
        return self

    def with_policy(self, policy: ManagementPolicy) -> Engine:
        """Replace the management policy; returns the engine."""
        self.policy = policy
        return self

    async def register_remote(
        self, handle: str, url: str, key: SigningKey, *, export: bool = False
    ) -> tuple[str, ...]:
        """Add a remote engine's exported tools and agents as ``RT_{handle}_…``/``RA_{handle}_…``.

        Every request to it is signed with ``key``; the remote's policy decides
        what this engine (``Caller(key.key_id, kind="engine")`` there) may see
        and call. Returns the names added.

        Raises:
            RemoteEngineError: The remote is unreachable or refuses this engine.
        """
        from mainspring.engine.client import RemoteEngine, remote_tools

        if not handle.replace("-", "").replace("_", "").isalnum() or len(handle) > 24:
            raise ConfigError(
                f"a remote handle is up to 24 letters, digits, _ or -, not {handle!r}"
            )
        tools = await remote_tools(RemoteEngine(handle, url, key))
        for tool in tools:
            self.add_tool(tool, export=export)
        return tuple(t.name for t in tools)

    # ------------------------------------------------------------- seeing

    def information(self, caller: Caller) -> EngineInfo:
        """What ``caller`` may see: exported members (every member for a manager).

        Raises:
            AccessDenied: The engine does not serve this caller at all.
        """
        return self._roster.information(caller, self.policy)

    # ------------------------------------------------------------- scopes

    async def new_scope(self, caller: Caller) -> str:
        """A scope of ``caller``'s: subagent sessions created in it can be continued in it.

        It lasts, with its sessions, until :meth:`close_scope`; it is kept in
        :attr:`records`, so every worker sharing them can run in it.

        Raises:
            AccessDenied: The caller may not use this engine.
            CallerBusy: The caller holds ``max_scopes_per_caller`` (:data:`MAX_SCOPES`
                by default) open scopes already.
        """
        self.policy.check_caller(caller, self.name)
        limit = self.max_scopes_per_caller
        return await open_scope(self.records, self.name, caller.key, limit=limit)

    async def scopes(self, caller: Caller) -> tuple[str, ...]:
        """``caller``'s open scopes (on every worker), sorted."""
        limit = self.max_scopes_per_caller
        return tuple(await open_scopes(self.records, self.name, caller.key, limit=limit))

    async def close_scope(self, caller: Caller, scope: str) -> None:
        """Close ``caller``'s ``scope``: its subagent sessions (and their histories) go.

        Cancelled, the scope is closed and some of its sessions may be left, to expire.

        Raises:
            AccessDenied: ``scope`` is not an open scope of this caller's.
            CallerBusy: The caller has a run under way (it may be in this scope).
            SessionBusy: A paused run or call of the scope waits on a decision.
        """
        if scope not in await self.scopes(caller):
            raise AccessDenied(f"scope {scope!r} is not one of this caller's", target=scope)
        if caller.key in self._active:
            raise CallerBusy(f"caller {caller.key!r} has a run under way in engine {self.name!r}")
        if any(p.scope == scope for p in await parked(self.records, self.name, caller.key)):
            raise SessionBusy(f"scope {scope!r} has a paused run or call: decide it first")
        if not await close_scope(self.records, self.name, caller.key, scope):  # closed meanwhile
            raise AccessDenied(f"scope {scope!r} is not one of this caller's", target=scope)
        await self.members.drop_scope(caller.key, scope)

    async def _ended(self, scope: RunScope, paused: bool) -> None:
        """An agent run of ``scope`` ended (``paused``: it waits on a decision)."""
        if not paused and scope.scope.startswith(_OWN_SCOPE):  # nobody can reuse it
            with anyio.fail_after(_DROP_DEADLINE, shield=True):
                await self.members.drop_scope(scope.caller.key, scope.scope)

    async def _scope(
        self, caller: Caller, metadata: Mapping[str, str] | None, scope: str | None, agent: str
    ) -> RunScope:
        if scope is None:
            self.policy.check_caller(caller, self.name)
            scope = f"{_OWN_SCOPE}{uuid.uuid4()}"  # the run's own, never registered (_ended)
        elif scope not in await self.scopes(caller):
            raise AccessDenied(f"scope {scope!r} is not one of this caller's", target=scope)
        return RunScope(
            caller=caller,
            metadata=dict(metadata or {}),
            storage=self.storage,
            caches=self._caches,
            scope=scope,
            agent=agent,
        )

    @contextmanager
    def _slot(self, caller: Caller, session: Session | None) -> Iterator[None]:
        self._check_slot(caller)
        active = self._active.setdefault(caller.key, set())
        token: object = session if session is not None else object()  # one per direct call
        active.add(token)
        try:
            yield
        finally:
            active.discard(token)
            if not active and self._active.get(caller.key) is active:
                del self._active[caller.key]

    def _check_slot(self, caller: Caller) -> None:
        if self.one_run_per_caller and self._active.get(caller.key):
            raise CallerBusy(f"caller {caller.key!r} already has a run in engine {self.name!r}")

    def cancel(self, caller: Caller) -> None:
        """Cancel the caller's running agent runs (their tools see ``ctx.cancelled``)."""
        for session in self._active.get(caller.key, ()):
            if isinstance(session, Session):
                session.cancel()

    def share(self, records: SharedRecords) -> None:
        """Keep paused calls and runs, scopes and subagent sessions in ``records`` (a server's).

        A no-op when the engine was given its own. Call it before the engine
        serves anyone.
        """
        if not self._shared:
            self.records = records
            self._shared = True

    async def _park(self, caller: Caller, pending: PendingAction, parked_: Parked) -> None:
        await park(self.records, self.name, caller.key, pending.attempt_id, parked_)

    # ---------------------------------------------------------- tool calls

    def _direct_caller(self, caller: Caller) -> DirectCaller:
        if self._direct_agent is None:
            self._direct_agent = Agent(
                model=_NoModel(),
                name=self.name,
                tools=self._roster.tools,
                permissions=self.permissions,
                guards=self.guards,
                hooks=self.hooks,
                audit=self.audit,
            )
            self._direct.clear()
        direct = self._direct.get(caller.key)
        if direct is None:
            direct = self._direct[caller.key] = DirectCaller(
                self._direct_agent,
                caller=caller.id,
                store=self.spend_store,
                account=f"engine:{self.name}:{caller.key}",
            )
        return direct

    async def tool_call(
        self,
        caller: Caller,
        name: str,
        arguments: dict[str, JsonValue],
        *,
        metadata: Mapping[str, str] | None = None,
    ) -> ToolCallResult:
        """Call tool ``name`` as the model's call would run (rules, guards, hooks, approvals).

        A call that needs a decision returns with ``pending`` set; decide it
        with :meth:`decide` (on any worker sharing :attr:`records`).

        Raises:
            AccessDenied: The caller may not call it (or it does not exist).
            CallerBusy: One run per caller, and this caller has one; or the call
                paused and the caller holds ``MAX_PAUSED`` paused calls and runs
                already (the call is then rejected: it never runs).
        """
        self._roster.callable_tool(caller, self.policy, name)
        scope = await self._scope(caller, metadata, None, "")
        with self._slot(caller, None), run_scope(scope):
            call = await self._direct_caller(caller).start(name, arguments)
        return await self._tool_result(caller, name, arguments, call, scope)

    async def _tool_result(
        self,
        caller: Caller,
        name: str,
        arguments: dict[str, JsonValue],
        call: DirectCall,
        scope: RunScope,
    ) -> ToolCallResult:
        pending = call.pending
        if pending is not None:  # (a direct call makes no subagent sessions to drop)
            parked_ = Parked(
                kind="call",
                name=name,
                state=call.session.state.snapshot(),
                scope=scope.scope,
                metadata=dict(scope.metadata),
                arguments=arguments,
            )
            await self._park(caller, pending, parked_)
            return ToolCallResult(name=name, pending=pending)
        assert call.result is not None
        r = call.result
        return ToolCallResult(name=name, content=r.content, is_error=r.is_error, ran=r.ran)

    # ---------------------------------------------------------- agent runs

    async def agent_run(
        self,
        caller: Caller,
        input: str,
        *,
        agent: str | None = None,
        scope: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> AgentRun:
        """Run ``agent`` (the default one) on ``input`` for ``caller``.

        ``scope`` (from :meth:`new_scope`) is where the run's subagent
        sessions live; without one the run gets a fresh scope.

        Raises:
            AccessDenied: The caller may not run it, or the scope is another caller's.
            CallerBusy: One run per caller, and this caller has one.
        """
        runnable = self._roster.runnable_agent(caller, self.policy, agent)
        run = await self._scope(caller, metadata, scope, runnable.name)
        session = Session(runnable)
        return await self._drive(caller, session, session.send(input), run)

    async def _drive(
        self, caller: Caller, session: Session, stream: AsyncGenerator[Event, None], scope: RunScope
    ) -> AgentRun:
        events: list[Event] = []
        try:
            with self._slot(caller, session), run_scope(scope):
                async with aclosing(stream) as running:
                    events.extend([event async for event in running])
        finally:
            await self._ended(scope, paused=session.pending is not None)
        pending = session.pending
        if pending is not None:
            parked_ = Parked(
                kind="run",
                name=scope.agent,
                state=session.state.snapshot(),
                scope=scope.scope,
                metadata=dict(scope.metadata),
            )
            try:
                await self._park(caller, pending, parked_)
            except BaseException:  # not parked: nobody can decide it, nothing of it is kept
                await self._ended(scope, paused=False)
                raise
        terminal = events[-1] if events else None
        last = next((m for m in reversed(session.messages) if m.role == "assistant"), None)
        return AgentRun(
            agent=scope.agent,
            text=last.text if last is not None else "",
            stop_reason=terminal.stop_reason if isinstance(terminal, TurnComplete) else None,
            error=terminal.message if isinstance(terminal, ErrorEvent) else None,
            pending=pending,
            session_id=session.session_id,
            cost_usd=session.cost_usd,
            events=tuple(events),
        )

    # ------------------------------------------------------------ decisions

    async def pending(self, caller: Caller) -> tuple[PendingAction, ...]:
        """The actions of ``caller``'s paused calls and runs (on every worker), by attempt id."""
        found = await parked(self.records, self.name, caller.key)
        return tuple(action for p in found if (action := p.pending) is not None)

    async def decide(
        self, caller: Caller, attempt_id: str, decision: Decision
    ) -> AgentRun | ToolCallResult:
        """Decide a paused call's or run's action and go on (it may pause again).

        The pause may have happened on another worker sharing :attr:`records`;
        of two decisions of one attempt, one goes on (the other is unknown).

        An approval or a rejection that names no principal is made by
        ``caller`` (its id is recorded as the approver).

        Raises:
            UnknownAttempt: No paused call or run of this caller waits on it.
            DecisionConflict, FieldNotModifiable, ApprovalError: As ``Session.resume``
                (``ApprovalExpired``, ``PolicyChanged`` and ``ApproverRefused`` too).
        """
        if isinstance(decision, Approve | Reject) and not decision.principal:
            decision = replace(decision, principal=caller.id)
        with anyio.CancelScope(shield=True):  # a taken call is never dropped half-way
            paused = await unpark(self.records, self.name, caller.key, attempt_id)
        if paused is None:
            raise UnknownAttempt(
                f"no paused call of this caller waits on attempt {attempt_id!r}",
                attempt_id=attempt_id,
            )
        pending = paused.pending
        assert pending is not None
        resumed: list[Session] = []
        try:
            return await self._decide_taken(caller, attempt_id, decision, paused, resumed)
        except anyio.get_cancelled_exc_class():
            # The caller gave up. Until the decision is applied (the session no longer
            # waits on it), the call waits again, for any worker: never lost unrun.
            if not resumed or _waits_on(resumed[0], attempt_id):
                with anyio.CancelScope(shield=True):
                    await self._park(caller, pending, paused)
            raise

    async def _decide_taken(
        self,
        caller: Caller,
        attempt_id: str,
        decision: Decision,
        paused: Parked,
        resumed: list[Session],
    ) -> AgentRun | ToolCallResult:
        """Decide the paused call or run this worker took (``resumed`` gets its session)."""
        scope = self._scope_of(caller, paused)
        pending = paused.pending
        assert pending is not None
        agent = self._roster.agent(paused.name) if paused.kind == "run" else None
        if paused.kind == "run" and agent is None:
            await self._park(caller, pending, paused)  # still waiting, for a worker that has it
            raise ConfigError(f"engine {self.name!r} has no agent {paused.name!r}")
        try:  # what may refuse the decision before anything of it is applied
            self._check_slot(caller)
            if paused.kind == "call":
                call = self._direct_caller(caller).resumed(
                    paused.name, paused.arguments, paused.state
                )
                resumed.append(call.session)
                with self._slot(caller, None), run_scope(scope):
                    await call.decide(decision)  # validates before it applies anything
            else:
                assert agent is not None
                session = Session(agent, state=paused.state)
                resumed.append(session)
                stream = session.resume(attempt_id, decision)  # validates first
        except (ApprovalError, ToolInputError, CallerBusy):  # refused: still waiting
            await self._park(caller, pending, paused)
            raise
        if paused.kind == "call":
            return await self._tool_result(caller, paused.name, paused.arguments, call, scope)
        return await self._drive(caller, session, stream, scope)

    def _scope_of(self, caller: Caller, paused: Parked) -> RunScope:
        return RunScope(
            caller=caller,
            metadata=dict(paused.metadata),
            storage=self.storage,
            caches=self._caches,
            scope=paused.scope,
            agent=paused.name if paused.kind == "run" else "",
        )


def _waits_on(session: Session, attempt_id: str) -> bool:
    """Whether ``session`` still waits on ``attempt_id`` (its decision not applied)."""
    pending = session.pending
    return pending is not None and pending.attempt_id == attempt_id


def agent_storage(*, shared: bool = False) -> Namespace:
    """The running engine agent's own storage for the run's caller.

    ``("agent", name, caller kind, caller id)``: one caller never reads
    another's. ``shared=True`` is the agent's storage every caller shares
    (``("agent", name)``), an explicit opt-in.

    Raises:
        ConfigError: Not inside an engine agent's run.
    """
    scope = current_scope()
    if scope is None or not scope.agent:
        raise ConfigError("agent_storage() is available only inside an engine agent's run")
    if shared:
        return scope.namespace("agent", scope.agent)
    return scope.caller_namespace("agent", scope.agent)
