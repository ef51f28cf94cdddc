"""ToolContext: what a running tool may know about and do to its run.

Inside an engine (:class:`~mainspring.engine.Engine`) a run has a
:class:`RunScope`: the verified caller, request metadata, and the store that
components' namespaces live in. The engine enters it with :func:`run_scope`
around the run; every ToolContext made inside reads it, so a tool sees its
caller (``ctx.caller``) and its own namespace (``ctx.storage``,
``ctx.component_cache``) whichever door the call came through.

The server enters a scope for the request's principal the same way, so
``ctx.caller`` is who made the request through every door. What a tool keeps
for a caller is keyed by that caller: ``ctx.storage`` is the tool's storage
*for this caller* (``ctx.shared_storage`` is the one every caller shares, an
explicit choice), and ``ctx.data_scope`` / ``ctx.conversation`` are the
injective keys the default toolkits file memories, notes, artifacts, todo
lists and shell sessions under.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NoReturn, Protocol, TypeAlias

from mainspring._lowlevel.json_value import JsonValue
from mainspring.events import Canvas, Event, PendingAction, ToolProgress
from mainspring.namespaces import InMemoryKeyValueStore, KeyValueStore, Namespace
from mainspring.principals import Caller, data_scope, encode_segment

if TYPE_CHECKING:
    from mainspring.decisions import Decision

__all__ = [
    "LOG_LEVELS",
    "CallerClient",
    "LogLevel",
    "LogSink",
    "RunScope",
    "ToolContext",
    "ToolSuspended",
    "UserAnswer",
    "caller_client",
    "current_caller",
    "current_scope",
    "log_sink",
    "run_scope",
]

LogLevel: TypeAlias = Literal[
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"
]
"""A log message's severity: the syslog levels MCP uses, least severe first."""
LOG_LEVELS: tuple[LogLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
"""Every :data:`LogLevel`, least severe first."""
_PY_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}
_tool_log = logging.getLogger("mainspring.tools")

LogSink: TypeAlias = Callable[[LogLevel, str, str, JsonValue], None]
"""Receives a tool's log message: level, tool name, message, data (see :func:`log_sink`)."""
_LOG_SINK: ContextVar[LogSink | None] = ContextVar("mainspring_log_sink", default=None)


@contextmanager
def log_sink(sink: LogSink) -> Iterator[None]:
    """Send the log messages of the tools called inside to ``sink`` (a door's client).

    The MCP server enters it around a ``tools/call``: what the tool logs with
    :meth:`ToolContext.log` reaches that client as ``notifications/message``.
    ``sink`` is called on the event loop's thread.
    """
    token = _LOG_SINK.set(sink)
    try:
        yield
    finally:
        _LOG_SINK.reset(token)


class _SpendView(Protocol):
    """What a tool call sees of its run's spend (the run's cost tracker)."""

    @property
    def budget_usd(self) -> float | None:
        """The session's budget (``None``: none)."""
        ...

    @property
    def total_usd(self) -> float:
        """What the session spent so far."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RunScope:
    """Who a run is for and where its components keep their data."""

    caller: Caller
    """The verified caller."""
    metadata: Mapping[str, str] = field(default_factory=dict)
    """Request metadata (a user agent, a trace id): informational, never an authorization."""
    storage: KeyValueStore = field(default_factory=InMemoryKeyValueStore)
    caches: dict[tuple[str, ...], dict[str, Any]] = field(default_factory=dict)
    """Component caches by namespace, alive as long as the engine that made them."""
    scope: str = ""
    """The host-created scope the run belongs to (subagent sessions are kept per scope)."""
    agent: str = ""
    """The engine agent the run is for (empty for a direct tool call)."""

    def namespace(self, kind: str, name: str) -> Namespace:
        """The storage of component ``name`` of ``kind`` (``"tool"``, ``"agent"``), all callers'."""
        return Namespace(self.storage, (kind, name))

    def caller_namespace(self, kind: str, name: str) -> Namespace:
        """The storage of component ``name`` of ``kind`` for this scope's caller alone."""
        return Namespace(self.storage, (kind, name, self.caller.kind, self.caller.id))

    def cache(self, kind: str, name: str) -> dict[str, Any]:
        """The in-memory cache of component ``name`` of ``kind``."""
        return self.caches.setdefault((kind, name), {})


_SCOPE: ContextVar[RunScope | None] = ContextVar("mainspring_run_scope", default=None)
_LOCAL = RunScope(caller=Caller("local", kind="service"))
"""The scope of a run no engine started: process memory, the "local" caller."""


def current_scope() -> RunScope | None:
    """The scope an engine entered for the running code, if any."""
    return _SCOPE.get()


def current_caller() -> Caller:
    """The caller the running code acts for (``Caller("local", kind="service")`` outside any)."""
    return (_SCOPE.get() or _LOCAL).caller


@contextmanager
def run_scope(scope: RunScope) -> Iterator[RunScope]:
    """Run the body (and every run, tool and task it starts) inside ``scope``."""
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


@dataclass(frozen=True, slots=True, kw_only=True)
class UserAnswer:
    """The calling client's user's answer to :meth:`ToolContext.ask_user`."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, JsonValue] | None = None
    """The form's values (``accept`` only)."""


class CallerClient(Protocol):
    """The client a call came from, when its door can ask it things (an MCP client).

    A door enters :func:`caller_client` around a call; a tool reaches it
    through :meth:`ToolContext.ask_user` and :meth:`ToolContext.sample`.
    """

    async def ask_user(self, message: str, schema: dict[str, JsonValue]) -> UserAnswer:
        """Ask the client's user to fill in a flat form (MCP form elicitation)."""
        ...

    async def sample(self, prompt: str, *, system: str, max_tokens: int) -> str:
        """A completion of ``prompt`` by the client's model (MCP sampling)."""
        ...


_CLIENT: ContextVar[CallerClient | None] = ContextVar("mainspring_caller_client", default=None)


@contextmanager
def caller_client(client: CallerClient) -> Iterator[None]:
    """Let the tools called inside ask ``client`` (its user, its model)."""
    token = _CLIENT.set(client)
    try:
        yield
    finally:
        _CLIENT.reset(token)


def _client_or_fail(what: str) -> CallerClient:
    client = _CLIENT.get()
    if client is None:
        raise RuntimeError(
            f"no client to {what}: this call did not come through a door whose client "
            "can be asked (an MCP client that declared it)"
        )
    return client


class ToolSuspended(Exception):
    """Raised by :meth:`ToolContext.suspend`: the call waits on a nested decision."""

    def __init__(self, pending: PendingAction) -> None:
        super().__init__(f"waiting on a decision for {pending.name!r}")
        self.pending = pending


class ToolContext:
    """Passed to any tool parameter annotated ``ToolContext``.

    Safe to use from sync tools, which run in worker threads.
    """

    __slots__ = (
        "_cancelled",
        "_charge",
        "_cost",
        "_emit",
        "_loop_thread",
        "_scope",
        "agent_name",
        "cache",
        "caller",
        "component_cache",
        "decision",
        "metadata",
        "session_id",
        "storage",
        "suspended_on",
        "tool_name",
        "tool_use_id",
        "turn_index",
    )

    def __init__(
        self,
        *,
        session_id: str,
        agent_name: str,
        tool_use_id: str,
        tool_name: str,
        turn_index: int,
        cache: dict[str, Any],
        emit: Callable[[Event], None],
        charge: Callable[[float, str], None] | None = None,
        decision: Decision | None = None,
        suspended_on: PendingAction | None = None,
        cost: _SpendView | None = None,
    ) -> None:
        self.session_id = session_id
        """The session this call belongs to."""
        self.agent_name = agent_name
        self.tool_use_id = tool_use_id
        self.tool_name = tool_name
        self.turn_index = turn_index
        self.cache = cache
        """Shared by every tool call of the current turn, then dropped."""
        scope = self._scope = _SCOPE.get() or _LOCAL
        self.caller: Caller = scope.caller
        """The verified caller (``Caller("local", kind="service")`` outside an engine)."""
        self.metadata: Mapping[str, str] = scope.metadata
        """Request metadata: informational, never an authorization source."""
        self.storage: Namespace = scope.caller_namespace("tool", tool_name)
        """This tool's own storage for this caller: no other tool, and no other caller,
        reads or writes it (namespace ``("tool", name, caller kind, caller id)``)."""
        self.component_cache: dict[str, Any] = scope.cache("tool", tool_name)
        """This tool's own in-memory cache, kept across calls and turns."""
        self.decision: Decision | None = decision
        """The decision on the nested action this call suspended on (see :meth:`suspend`)."""
        self.suspended_on: PendingAction | None = suspended_on
        """That nested action, as the session kept it (with :attr:`decision`): what a
        stateless nested run needs to go on, also in a process that did not suspend it."""
        self._emit = emit
        self._charge = charge
        self._cost = cost
        self._loop_thread = threading.get_ident()
        self._cancelled = False

    @property
    def shared_storage(self) -> Namespace:
        """This tool's storage shared by every caller (``("tool", name)``): an explicit opt-in.

        Whatever one caller puts here every other caller of the tool can read;
        use :attr:`storage` unless the data is meant for everyone.
        """
        return self._scope.namespace("tool", self.tool_name)

    @property
    def data_scope(self) -> str:
        """Where this caller's data with this agent lives (see ``principals.data_scope``).

        ``principal/<kind>/<id>/agent/<agent>``, each part injectively encoded:
        the default namespace of memories, notes and artifacts.
        """
        return data_scope(self.caller, self.agent_name)

    @property
    def conversation(self) -> str:
        """This caller's conversation: ``principal/<kind>/<id>/session/<session id>``.

        The key of per-conversation data (a todo list, shell sessions).
        """
        return f"principal/{self.caller.path}/session/{encode_segment(self.session_id)}"

    @property
    def cancelled(self) -> bool:
        """True once the run was cancelled; long sync tools should check it and stop."""
        return self._cancelled

    def _cancel(self) -> None:
        self._cancelled = True

    def _send(self, event: Event) -> None:
        if threading.get_ident() == self._loop_thread:
            self._emit(event)
        else:
            import anyio.from_thread  # only sync tools, in worker threads, get here

            anyio.from_thread.run_sync(self._emit, event)

    def progress(self, message: str, pct: float | None = None) -> None:
        """Emit a ``tool_progress`` event (``pct`` from 0 to 100 when known)."""
        self._send(
            ToolProgress(
                tool_use_id=self.tool_use_id, name=self.tool_name, message=message, pct=pct
            )
        )

    def log(self, message: str, *, level: LogLevel = "info", data: JsonValue = None) -> None:
        """Log ``message`` about this call, for whoever called the tool.

        It goes to Python's ``mainspring.tools`` logger, and to the client of
        the door the call came through when that door forwards logs (an MCP
        client gets ``notifications/message`` at or above the level it set).
        ``data`` is extra JSON sent with it.
        """
        if level not in _PY_LEVELS:
            raise ValueError(f"level must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
        _tool_log.log(_PY_LEVELS[level], "%s: %s", self.tool_name, message)
        sink = _LOG_SINK.get()
        if sink is None:
            return
        if threading.get_ident() == self._loop_thread:
            sink(level, self.tool_name, message, data)
        else:
            import anyio.from_thread  # only sync tools, in worker threads, get here

            anyio.from_thread.run_sync(sink, level, self.tool_name, message, data)

    async def ask_user(self, message: str, schema: dict[str, JsonValue]) -> UserAnswer:
        """Ask the calling client's user to fill in a flat form; their answer.

        ``schema`` is a flat JSON schema (an object of string, number,
        integer, boolean and enum properties; ``default`` values shown). Only
        a call from a client that can be asked reaches a user (an MCP client
        that declared elicitation, in the 2025 era); any other raises
        ``RuntimeError`` saying so, which the tool's result reports. This is
        input for the tool, never an approval: approvals stay with the
        dispatch path (``permission``).
        """
        return await _client_or_fail("ask").ask_user(message, schema)

    async def sample(self, prompt: str, *, system: str = "", max_tokens: int = 1000) -> str:
        """A completion of ``prompt`` by the calling client's model (MCP sampling).

        Raises ``RuntimeError`` when the call came from no client that offers
        sampling. The client's model and spend are the client's own.
        """
        return await _client_or_fail("sample").sample(prompt, system=system, max_tokens=max_tokens)

    def charge(self, usd: float, *, what: str = "") -> None:
        """Count ``usd`` spent by this call against the session's spend and budget.

        For what a tool spends beyond the session's own model calls (a
        subagent's model calls); the loop reports it as a ``usage`` event.
        """
        if usd < 0:
            raise ValueError(f"a charge must not be negative, got {usd}")
        if self._charge is not None and usd:
            self._charge(usd, what or self.tool_name)

    @property
    def budget_left_usd(self) -> float | None:
        """What the session may still spend under its budget (``None``: no budget).

        A tool that spends on the session's behalf (a subagent) stays within it.
        """
        cost = self._cost
        if cost is None or cost.budget_usd is None:
            return None
        return max(cost.budget_usd - cost.total_usd, 0.0)

    def suspend(self, pending: PendingAction) -> NoReturn:
        """Pause the turn on a decision a nested run waits for (a subagent's approval).

        The host's turn pauses with a ``pending_action`` whose ``nested`` is
        ``pending``; when the host decides it, this tool is called again with
        the same input, :attr:`decision` set and :attr:`suspended_on` the
        ``pending`` given here (persisted with the session, so also in a new
        process), and carries the decision to the nested run. Only serial
        calls may suspend (a parallel read that tries gets an error result).
        """
        raise ToolSuspended(pending)

    def canvas(self, kind: str, data: JsonValue, *, title: str = "") -> None:
        """Emit a ``canvas`` event for the host to render."""
        self._send(Canvas(kind=kind, data=data, title=title, tool_use_id=self.tool_use_id))
