"""Use the tools and prompts of MCP servers, many at once.

```python
config = McpServerConfig(name="time", command="python", args=("-m", "mcp_server_time"))
async with McpClientManager([config]) as manager:
    agent = Agent(model=model, tools=manager.tools())  # mcp__time__get_current_time, ...
```

Both protocol eras: the newest a server offers (``McpServerConfig.protocol``),
the stateless 2026-07-28 revision or the 2025 handshake. Every server's
session lives in its own task, owned by the manager's task
group, so the SDK's cancel scopes are entered and exited in one task. A call
that finds its server dead returns an error result and marks the server for
reconnection; the next call starts it again.
"""

from __future__ import annotations

import logging
import math
import typing
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import anyio
import anyio.abc
from pydantic import JsonValue
from pydantic_core import to_jsonable_python

from mainspring.errors import ConfigError, McpStartupError
from mainspring.mcp._config import (
    ESSENTIAL_ENV,
    MCP_PERMISSIONS,
    MCP_PROTOCOLS,
    McpPermission,
    McpProtocol,
    McpServerConfig,
)
from mainspring.mcp._connection import (
    Connection,
    connection_lost,
    describe,
    list_all_tools,
    modern,
)
from mainspring.mcp._input_rounds import DETAILS_KEY, Asker, InputRoundsError, call_in_rounds
from mainspring.mcp._listing import checked_schema, clashes, full_name
from mainspring.mcp._paused_calls import Flight, await_flight, check_answer, pending_for
from mainspring.mcp._prompts import McpPrompt, prompt_text, prompts_of
from mainspring.mcp._requests import ElicitAnswer, McpElicitation, McpSampling, OnElicit
from mainspring.mcp._resources import list_page_text, read_output, resource_tools
from mainspring.mcp._results import Audit, Progress, RawResult, progress_callback
from mainspring.mcp._trust import trust
from mainspring.tools.context import ToolContext, ToolSuspended
from mainspring.tools.define import Tool, ToolOutput, client_tool
from mainspring.tools.registry import namespaced

if TYPE_CHECKING:
    from mainspring.stores.artifacts import ArtifactStore

try:
    import mcp.types as mcp_types
    from mcp.client.session import ClientSession
    from mcp.shared.exceptions import MCPError
except ImportError as exc:
    raise ImportError('McpClientManager needs: pip install "mainspring[mcp]"') from exc

__all__ = [
    "ESSENTIAL_ENV",
    "MCP_PERMISSIONS",
    "MCP_PROTOCOLS",
    "ElicitAnswer",
    "McpClientManager",
    "McpElicitation",
    "McpPermission",
    "McpPrompt",
    "McpProtocol",
    "McpSampling",
    "McpServerConfig",
    "McpStartupError",
    "OnElicit",
    "RawResult",
]

logger = logging.getLogger(__name__)

_CTX = "__mainspring_tool_context__"
"""The keyword the engine passes a server tool's ToolContext under (not an MCP argument)."""


class McpClientManager:
    """Connects to MCP servers and offers their tools as mainspring tools.

    Use ``async with manager:`` or :meth:`start` / :meth:`aclose` from one task.
    """

    def __init__(
        self,
        configs: Sequence[McpServerConfig],
        *,
        audit_limit: int = 32,
        audit_chars: int = 200_000,
        artifacts: ArtifactStore | None = None,
        on_elicit: OnElicit | None = None,
        sampling: McpSampling | None = None,
        pause_on_elicit: bool = False,
        elicit_timeout: float = 600.0,
    ) -> None:
        """Create a manager for ``configs`` (names must be unique); nothing starts yet.

        ``on_elicit`` answers a server's elicitation (the host's UI or policy);
        ``pause_on_elicit`` makes an elicitation during a session's tool call
        a ``pending_action`` of that session instead, answered through
        ``Session.resume`` within ``elicit_timeout`` seconds (see
        :mod:`mainspring.mcp._paused_calls`); ``sampling`` lets servers sample
        a model, bounded. Without them the client does not offer either, and
        servers cannot ask.

        The latest ``audit_limit`` results are kept in :attr:`raw_results`,
        each of at most ``audit_chars`` characters; a larger one is kept cut
        (its full size recorded) and, given ``artifacts``, stored whole as an
        artifact in namespace ``mcp/<server>``, whose URI the model is told.
        """
        if audit_limit < 0 or audit_chars < 0:
            raise ConfigError("audit_limit and audit_chars must be >= 0")
        if not math.isfinite(elicit_timeout) or elicit_timeout <= 0:
            raise ConfigError(f"elicit_timeout must be a positive number, got {elicit_timeout}")
        names = [c.name for c in configs]
        if len(set(names)) != len(names):
            raise ConfigError(f"MCP server names must be unique, got {names}")
        self._connections = {
            c.name: Connection(
                c,
                on_elicit=on_elicit,
                sampling=sampling,
                pause_on_elicit=pause_on_elicit,
                elicit_timeout=elicit_timeout,
            )
            for c in configs
        }
        self._elicit_timeout = elicit_timeout
        self._paused: dict[tuple[str, str], Flight] = {}
        """Calls waiting on the user's answer to an elicitation, by (session, tool use)."""
        self._tg: anyio.abc.TaskGroup | None = None
        self.failures: dict[str, str] = {}
        """Servers that could not start (optional ones) or whose tools were skipped."""
        self.skipped_tools: dict[str, str] = {}
        """``mcp__server__tool`` names left out, with the reason (e.g. a malformed schema)."""
        self._audit = Audit(limit=audit_limit, max_chars=audit_chars, artifacts=artifacts)
        self.raw_results: deque[RawResult] = self._audit.results
        """The latest results, for audit (each cut to ``audit_chars``; see :class:`RawResult`)."""

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    @property
    def servers(self) -> list[str]:
        """Names of the servers that are connected now."""
        return [n for n, c in self._connections.items() if c.session is not None]

    def protocol_version(self, server: str) -> str | None:
        """The protocol version a connected server speaks (``"2026-07-28"``, or a 2025-era one)."""
        session = self._connections[server].session if server in self._connections else None
        return session.protocol_version if session is not None else None

    async def start(self) -> None:
        """Connect to every server at once.

        Raises:
            McpStartupError: A required server failed or timed out (others are closed).
        """
        if self._tg is not None:
            raise ConfigError("McpClientManager is already started")
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        try:
            async with anyio.create_task_group() as starters:
                for conn in self._connections.values():
                    starters.start_soon(self._start_one, conn)
            broken = [n for n in self.failures if n in self._connections and self._required(n)]
            if broken:
                name = broken[0]
                raise McpStartupError(
                    f"required MCP server {name!r} failed to start: {self.failures[name]}",
                    server=name,
                )
            for name, why in clashes(self._listed()).items():
                logger.warning("MCP tool %r refused: %s", name, why)
        except BaseException:
            await self.aclose()
            raise

    def _required(self, name: str) -> bool:
        return self._connections[name].config.required

    async def _start_one(self, conn: Connection) -> None:
        try:
            await self._connect(conn)
        except Exception as exc:
            self.failures[conn.config.name] = describe(exc)
            if not conn.config.required:
                logger.warning(
                    "optional MCP server %r skipped: %s", conn.config.name, describe(exc)
                )

    async def _connect(self, conn: Connection) -> None:
        if self._tg is None:
            raise ConfigError("McpClientManager is not started")
        await self._tg.start(conn.serve)

    async def aclose(self) -> None:
        """Close every session and wait for the servers to stop."""
        tg, self._tg = self._tg, None
        if tg is None:
            return
        for flight in self._paused.values():  # no answer will come: stop waiting for one
            flight.abandoned = True
            flight.scope.cancel()
        self._paused.clear()
        for conn in self._connections.values():
            conn.closing.set()
        # Each session task closes its own transport (the stdio shutdown is shielded).
        await tg.__aexit__(None, None, None)

    def tools(self) -> list[Tool]:
        """The tools of every connected server, named ``mcp__<server>__<tool>``.

        A tool whose schema cannot be compiled offline, or whose name is
        claimed twice (a server listing it twice), is left out; why is in
        :attr:`skipped_tools` (see :mod:`mainspring.mcp._listing`).
        """
        found: list[Tool] = []
        refused = clashes(self._listed())
        self.skipped_tools.update(refused)
        for conn in self._connections.values():
            for spec in conn.tools:
                if not conn.config.wants(spec.name):
                    continue
                if full_name(conn.config.name, spec.name) in refused:
                    continue
                made = self._make_tool(conn, spec)
                if made is not None:
                    found.append(made)
            found.extend(self._resource_tools(conn))
        return found

    def _listed(self) -> list[tuple[McpServerConfig, list[mcp_types.Tool]]]:
        return [(conn.config, conn.tools) for conn in self._connections.values()]

    def _resource_tools(self, conn: Connection) -> list[Tool]:
        session = conn.session
        caps = session.server_capabilities if session is not None else None
        if not conn.config.resources or caps is None or caps.resources is None:
            return []
        server = conn.config.name

        async def list_page(cursor: str | None) -> ToolOutput:
            return await self._resources_page(server, cursor)

        async def read(uri: str) -> ToolOutput:
            return await self.read_resource(server, uri)

        try:
            return resource_tools(server, list_page=list_page, read=read)
        except ConfigError as exc:  # a server name too long for the tool names
            self.skipped_tools[f"mcpr__{server}__*"] = str(exc)
            return []

    async def _resources_page(self, server: str, cursor: str | None) -> ToolOutput:
        cfg = self._config(server)
        try:
            session = await self._live_session(server)
            params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
            with anyio.fail_after(cfg.call_timeout):
                page = await session.list_resources(params=params)
                templates = [] if cursor else await self._templates(session)
        except Exception as exc:
            return ToolOutput(
                content=f"listing resources of {server!r} failed: {describe(exc)}", is_error=True
            )
        text = list_page_text(page.resources, templates, page.next_cursor, budget=cfg.output_budget)
        return ToolOutput(content=text)

    @staticmethod
    async def _templates(session: ClientSession) -> list[mcp_types.ResourceTemplate]:
        try:
            return (await session.list_resource_templates()).resource_templates
        except MCPError:  # a server with resources but no templates may refuse the method
            return []

    async def read_resource(self, server: str, uri: str) -> ToolOutput:
        """Read a resource; its text is bounded by the server's ``output_budget``.

        Failures (an unknown URI, a dead server, a timeout) are error results.
        """
        cfg = self._config(server)
        try:
            session = await self._live_session(server)
            with anyio.fail_after(cfg.call_timeout):
                result = await session.read_resource(uri)
        except Exception as exc:
            return ToolOutput(
                content=f"reading resource {uri!r} of {server!r} failed: {describe(exc)}",
                is_error=True,
            )
        return read_output(result, budget=cfg.output_budget)

    def _make_tool(self, conn: Connection, spec: mcp_types.Tool) -> Tool | None:
        cfg = conn.config
        decided = trust(cfg, spec)
        if decided is None:  # denied by the config
            return None
        try:
            name = namespaced(cfg.name, spec.name)
        except ConfigError as exc:
            self.skipped_tools[f"mcp__{cfg.name}__{spec.name}"] = str(exc)
            return None
        if spec.execution is not None and spec.execution.task_support == "required":
            # Such a tool is called only as an MCP task (tasks/get, tasks/result
            # polling), which this client does not do: not offered, not half-called.
            self.skipped_tools[name] = (
                "needs task-augmented execution (MCP tasks), which this client does not support"
            )
            return None
        try:
            compiled = checked_schema(cfg.name, spec)
            base = client_tool(
                name,
                description=spec.description or spec.title or spec.name,
                input_schema=typing.cast(dict[str, JsonValue], compiled.schema),
            )
        except ConfigError as exc:
            self.skipped_tools[name] = str(exc)
            logger.warning("MCP tool %r refused: %s", name, exc)
            return None
        meta: dict[str, JsonValue] = {"mcp_server": cfg.name, "mcp_tool": spec.name}
        meta.update(spec.model_dump(mode="json", by_alias=True, exclude_none=True))
        meta["permission"] = decided.permission
        meta["permission_source"] = decided.source
        tool_name = spec.name

        async def call_server(**arguments: Any) -> ToolOutput:
            ctx = arguments.pop(_CTX, None)
            if not isinstance(ctx, ToolContext):
                return await self.call_tool(cfg.name, tool_name, arguments)
            if not await self._stateless(conn, ctx) and (self._tg is not None or ctx.decision):
                return await self._engine_call(conn, tool_name, arguments, ctx)
            return await self.call_tool(
                cfg.name, tool_name, arguments, progress=ctx.progress, _ctx=ctx
            )

        return replace(
            base,
            fn=call_server,
            is_async=True,
            ctx_param=_CTX,
            meta=meta,
            policy=decided.policy(max_result_chars=cfg.output_budget + 200),
        )

    async def _stateless(self, conn: Connection, ctx: ToolContext) -> bool:
        """Whether a session's call goes the 2026-07-28 way: no live request to keep.

        So it is when the call resumes a round the session kept
        (:mod:`mainspring.mcp._input_rounds`), or when the server speaks that
        revision (connecting first, if need be).
        """
        if ctx.suspended_on is not None and DETAILS_KEY in ctx.suspended_on.details:
            return True
        if ctx.decision is not None:
            return False  # a 2025-era pause: its request is live (or gone)
        if conn.session is None:
            try:
                await self._session_of(conn.config.name)
            except Exception:  # call_tool reports it
                return False
        session = conn.session
        return session is not None and modern(session)

    async def _engine_call(
        self, conn: Connection, tool: str, arguments: dict[str, Any], ctx: ToolContext
    ) -> ToolOutput:
        """A session's call: run by a task of the manager, so it may pause on an elicitation."""
        key = (ctx.session_id, ctx.tool_use_id)
        decision = ctx.decision
        if decision is None:
            flight = Flight(ctx, extend=self._elicit_timeout + conn.config.call_timeout)
            assert self._tg is not None
            self._tg.start_soon(self._fly, conn.config.name, tool, arguments, flight)
        else:
            paused = self._paused.pop(key, None)
            if paused is None:
                return ToolOutput(
                    content=f"MCP tool {tool!r}: the request that asked for input is gone "
                    "(the process restarted or the connection ended); it was not sent again",
                    is_error=True,
                )
            flight = paused
            parked = flight.parked
            if parked is not None and not parked.answered.is_set():
                answer = check_answer(parked.asked, decision)
                if isinstance(answer, str):
                    self._paused[key] = flight  # still waiting: decide again
                    ctx.suspend(pending_for(parked.asked, ctx.tool_name, ctx, why=answer))
                parked.give(answer)
        try:
            return await await_flight(flight, ctx, ctx.tool_name)
        except ToolSuspended:
            self._paused[key] = flight
            raise

    async def _fly(self, server: str, tool: str, arguments: dict[str, Any], flight: Flight) -> None:
        try:
            output = await self.call_tool(
                server, tool, arguments, progress=flight.progress, _flight=flight
            )
        except BaseException:
            flight.finish(ToolOutput(content=f"MCP tool {tool!r} was abandoned", is_error=True))
            raise
        flight.finish(output)

    async def refresh_tools(self, server: str) -> None:
        """Fetch a server's tool list again (also done on its list-changed notification)."""
        conn = await self._session_of(server)
        assert conn.session is not None
        conn.tools = await list_all_tools(conn.session)

    async def _session_of(self, server: str) -> Connection:
        conn = self._connections.get(server)
        if conn is None:
            raise ConfigError(f"no MCP server named {server!r}")
        async with conn.lock:
            if conn.session is None:
                await conn.close()
                await self._connect(conn)
                self.failures.pop(server, None)
        return conn

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        progress: Progress | None = None,
        _flight: Flight | None = None,
        _ctx: ToolContext | None = None,
    ) -> ToolOutput:
        """Call a tool; failures, timeouts and a dead server become error results.

        Progress is requested on every call; the server's progress
        notifications reach ``progress`` (``ToolContext.progress`` when the
        engine runs the tool, so they become ``tool_progress`` events) with a
        percentage when the server gave a total. Cancelling the call abandons
        it (the SDK tells the server); the session stays up.

        On a 2026-07-28 connection an ``input_required`` answer is answered
        (sampling, ``on_elicit``) and the call sent again, within bounds
        (:mod:`mainspring.mcp._input_rounds`); a session's call may pause its
        turn on an elicitation instead.
        """
        cfg = self._config(server)
        try:
            conn = await self._session_of(server)
        except Exception as exc:
            return ToolOutput(
                content=f"MCP server {server!r} is unavailable: {describe(exc)}", is_error=True
            )
        session = conn.session
        if session is None:
            return ToolOutput(content=f"MCP server {server!r} is not connected", is_error=True)
        resuming = _ctx is not None and _ctx.suspended_on is not None
        cacheable = conn.cache.enabled and conn.read_only(tool) and not resuming
        if cacheable and (cached := conn.cache.get(tool, arguments)) is not None:
            return cached
        scope = _flight.scope if _flight is not None else anyio.CancelScope()
        scope.deadline = anyio.current_time() + cfg.call_timeout
        result: mcp_types.CallToolResult | None = None
        try:
            with scope:
                async with conn.limiter:
                    conn.in_flight += 1
                    if _flight is not None:
                        conn.flights.add(_flight)
                    try:
                        result, sent = await self._send(
                            conn, session, tool, arguments, progress, _ctx
                        )
                        cacheable = cacheable and sent == 1  # never a result reached by rounds
                    finally:
                        conn.in_flight -= 1
                        if _flight is not None:
                            conn.flights.discard(_flight)
        except ToolSuspended:
            raise
        except Exception as exc:
            return _failure(conn, session, tool, exc)
        if result is None:
            if _flight is not None and _flight.abandoned:
                return ToolOutput(content=f"MCP tool {tool!r} was abandoned", is_error=True)
            return ToolOutput(
                content=f"MCP tool {tool!r} on {server!r} timed out after {cfg.call_timeout:g} s",
                is_error=True,
            )
        output = await self._audit.output(
            result,
            server=server,
            tool=tool,
            arguments=to_jsonable_python(arguments),
            resources=cfg.resources,
            budget=cfg.output_budget,
        )
        if cacheable and conn.session is session:
            conn.cache.put(tool, arguments, output)
        return output

    async def _send(
        self,
        conn: Connection,
        session: ClientSession,
        tool: str,
        arguments: dict[str, Any],
        progress: Progress | None,
        ctx: ToolContext | None,
    ) -> tuple[mcp_types.CallToolResult, int]:
        """The call's result, and how many times it was sent (rounds of 2026-07-28 input)."""
        on_progress = progress_callback(progress)
        if not modern(session):
            return await session.call_tool(tool, arguments, progress_callback=on_progress), 1
        cfg = conn.config
        asker = Asker(
            server=cfg.name,
            tool=tool,
            ctx=ctx,
            pause=conn.pause and not conn.read_only(tool),  # reads run in parallel: no pause
            on_elicit=conn.on_elicit,
            sampling=conn.sampling,
            max_rounds=cfg.input_rounds,
        )
        return await call_in_rounds(session, tool, arguments, on_progress, asker)

    def _config(self, server: str) -> McpServerConfig:
        conn = self._connections.get(server)
        if conn is None:
            raise ConfigError(f"no MCP server named {server!r}")
        return conn.config

    async def list_prompts(self, server: str) -> list[McpPrompt]:
        """The prompts a server offers."""
        return await prompts_of(await self._live_session(server), server)

    async def get_prompt(
        self, server: str, name: str, arguments: Mapping[str, str] | None = None
    ) -> str:
        """A server's prompt rendered as text (its messages' text, in order)."""
        session = await self._live_session(server)
        with anyio.fail_after(self._config(server).call_timeout):
            result = await session.get_prompt(name, dict(arguments or {}))
        return prompt_text(result)

    async def _live_session(self, server: str) -> ClientSession:
        conn = await self._session_of(server)
        if conn.session is None:
            raise McpStartupError(f"MCP server {server!r} is not connected", server=server)
        return conn.session


def _failure(conn: Connection, session: ClientSession, tool: str, exc: Exception) -> ToolOutput:
    """A failed call as the error result the model sees; a lost server reconnects next time."""
    server = conn.config.name
    if isinstance(exc, InputRoundsError):
        return ToolOutput(content=f"MCP tool {tool!r} on {server!r}: {exc}", is_error=True)
    if connection_lost(exc) and conn.session is session:
        conn.session = None  # the next call reconnects
        conn.closing.set()
    return ToolOutput(
        content=f"MCP tool {tool!r} on {server!r} failed: {describe(exc)}", is_error=True
    )
