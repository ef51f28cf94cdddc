"""One MCP server's connection: the task that owns its session, its tool list, its limits."""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import anyio.abc

from mainspring.mcp._cache import ResponseCache
from mainspring.mcp._config import McpServerConfig
from mainspring.mcp._paused_calls import Flight
from mainspring.mcp._requests import (
    ElicitAnswer,
    McpElicitation,
    McpSampling,
    OnElicit,
    elicitation_callback,
    sampling_callback,
)
from mainspring.mcp._stderr import StderrTail, capture_stderr, release, wrapped
from mainspring.mcp._trust import trust

try:
    import httpx2
    import mcp.types as mcp_types
    from mcp.client.client import Client
    from mcp.client.session import ClientSession, IncomingMessage
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError
    from mcp.shared.subscriptions import ToolsListChanged
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS
except ImportError as exc:
    raise ImportError('McpClientManager needs: pip install "mainspring[mcp]"') from exc

__all__ = [
    "Connection",
    "StartFailed",
    "connection_lost",
    "describe",
    "list_all_tools",
    "modern",
]

logger = logging.getLogger("mainspring.mcp.client")

_INVALIDATING = (
    mcp_types.ToolListChangedNotification,
    mcp_types.ResourceListChangedNotification,
    mcp_types.ResourceUpdatedNotification,
)
"""Notifications after which cached results may be stale."""

_TRANSPORT_GONE = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)

_MODES = {"auto": "auto", "2025": "legacy", "2026-07-28": "auto"}
"""The SDK's connect mode for each ``McpServerConfig.protocol``: a pinned 2026-07-28
still probes (``server/discover`` gives the server's capabilities) and then insists."""


class Connection:
    """One server: the task that owns its session, its cached tool list, its limits."""

    def __init__(
        self,
        config: McpServerConfig,
        *,
        on_elicit: OnElicit | None = None,
        sampling: McpSampling | None = None,
        pause_on_elicit: bool = False,
        elicit_timeout: float = 600.0,
    ) -> None:
        self.config = config
        self.on_elicit = on_elicit
        self.pause = pause_on_elicit
        self._elicit_timeout = elicit_timeout
        self.flights: set[Flight] = set()
        """Engine calls in flight (they may pause on an elicitation)."""
        self.in_flight = 0
        """Every call in flight, engine or direct."""
        self.sampling = sampling
        self._callbacks: dict[str, Any] = {}
        if on_elicit is not None or pause_on_elicit:
            self._callbacks["elicitation_callback"] = elicitation_callback(
                config.name, self._elicit
            )
        if sampling is not None:
            self._callbacks["sampling_callback"] = sampling_callback(
                config.name, sampling, charge=self._charge
            )
        self.session: ClientSession | None = None
        self.tools: list[mcp_types.Tool] = []
        self.limiter = anyio.Semaphore(config.max_concurrent_calls)
        self.lock = anyio.Lock()
        self.closing = anyio.Event()
        self.done = anyio.Event()
        self.done.set()  # no session task yet
        self.generation = 0
        self.stderr = StderrTail(config.name)
        self.cache = ResponseCache(ttl=config.cache_ttl, max_entries=config.cache_entries)

    @asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        cfg = self.config
        if cfg.transport == "stdio":
            assert cfg.command is not None
            command, args = wrapped(cfg.command, list(cfg.args))
            params = StdioServerParameters(
                command=command, args=args, env=cfg.stdio_env(), cwd=cfg.cwd
            )
            async with (
                capture_stderr(self.stderr) as errlog,
                stdio_client(params, errlog=errlog) as streams,
            ):
                release(errlog)  # the child has its own copy now
                yield streams
        else:
            assert cfg.url is not None
            async with (
                httpx2.AsyncClient(
                    headers=dict(cfg.headers), timeout=httpx2.Timeout(30.0, read=300.0)
                ) as http,
                streamable_http_client(cfg.url, http_client=http) as streams,
            ):
                yield streams

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Connect, report started, hold the session until asked to close."""
        cfg = self.config
        started = False
        deadline = anyio.CancelScope(deadline=anyio.current_time() + cfg.startup_timeout)
        self.closing = anyio.Event()
        self.done = anyio.Event()
        self.stderr = StderrTail(cfg.name)
        try:
            with deadline:
                async with AsyncExitStack() as stack:
                    client = await stack.enter_async_context(
                        Client(
                            self._transport(),
                            mode=_MODES[cfg.protocol],
                            cache=None,  # ours is ResponseCache, for read-only tools only
                            message_handler=self._on_message,
                            **self._callbacks,
                        )
                    )
                    session = client.session
                    if cfg.protocol == "2026-07-28" and not modern(session):
                        raise StartFailed(
                            "the server does not offer the 2026-07-28 protocol "
                            f"(it answered {session.protocol_version})"
                        )
                    self.tools = await list_all_tools(session)
                    self.cache.clear()
                    deadline.deadline = math.inf
                    self.session = session
                    self.generation += 1
                    started = True
                    task_status.started()
                    async with anyio.create_task_group() as followers:
                        if modern(session):
                            followers.start_soon(self._follow_changes, client, session)
                        await self.closing.wait()
                        followers.cancel_scope.cancel()
            if not started:
                raise TimeoutError(f"no answer within {cfg.startup_timeout:g} s")
        except Exception as exc:
            said = self.stderr.describe()
            if not started:
                if said:
                    raise StartFailed(f"{describe(exc)}; {said}") from exc
                raise
            logger.warning(
                "MCP server %r session ended: %s%s",
                cfg.name,
                describe(exc),
                f"; {said}" * bool(said),
            )
        finally:
            self.session = None
            self.done.set()

    async def _follow_changes(self, client: Client, session: ClientSession) -> None:
        """2026-07-28: list changes come on a ``subscriptions/listen`` stream, not the session."""
        caps = session.server_capabilities
        tools_change = bool(caps and caps.tools and caps.tools.list_changed)
        resources_change = bool(caps and caps.resources and caps.resources.list_changed)
        if not (tools_change or resources_change):
            return
        try:
            async with client.listen(
                tools_list_changed=tools_change, resources_list_changed=resources_change
            ) as changes:
                async for event in changes:
                    self.cache.clear()
                    if isinstance(event, ToolsListChanged):
                        self.tools = await list_all_tools(session)
        except Exception as exc:  # a server that cannot listen: the lists stay as listed
            logger.info("MCP server %r: no list-change stream: %s", self.config.name, describe(exc))

    def _sole_flight(self) -> Flight | None:
        """The engine call a server's request belongs to, when only one call is in flight."""
        if self.in_flight != 1 or len(self.flights) != 1:
            return None
        return next(iter(self.flights))

    async def _elicit(self, asked: McpElicitation) -> ElicitAnswer:
        flight = self._sole_flight() if self.pause else None
        if flight is not None:
            parked = flight.park(asked)
            with anyio.move_on_after(self._elicit_timeout):
                await parked.answered.wait()
            parked.give(ElicitAnswer(action="cancel"))  # no answer in time
            return parked.answer
        if self.on_elicit is not None:
            return await self.on_elicit(asked)
        logger.warning(
            "MCP server %r: an elicitation with no single call to pause declined", self.config.name
        )
        return ElicitAnswer(action="decline")

    def _charge(self, usd: float, what: str) -> None:
        flight = self._sole_flight()
        if flight is not None:
            flight.charge(usd, what)

    async def _on_message(self, message: IncomingMessage) -> None:
        session = self.session
        if isinstance(message, _INVALIDATING):
            self.cache.clear()
        if isinstance(message, mcp_types.ToolListChangedNotification) and session is not None:
            try:
                self.tools = await list_all_tools(session)
            except Exception as exc:
                logger.warning("MCP server %r: tools refresh failed: %s", self.config.name, exc)
        elif isinstance(message, Exception):
            logger.warning("MCP server %r transport error: %s", self.config.name, message)

    def read_only(self, tool: str) -> bool:
        """Whether the tool, as listed now, is trusted as a read (its results may be cached)."""
        spec = next((t for t in self.tools if t.name == tool), None)
        decided = trust(self.config, spec) if spec is not None else None
        return decided is not None and decided.read_only

    async def close(self) -> None:
        """End the session task (it closes the transport) and wait for it."""
        if self.session is None and self.done.is_set():
            return
        self.closing.set()
        await self.done.wait()


class StartFailed(Exception):
    """A server did not start; the message has what it said and how it exited."""


def modern(session: ClientSession) -> bool:
    """Whether the session speaks the stateless 2026-07-28 revision (not the handshake)."""
    return session.protocol_version in MODERN_PROTOCOL_VERSIONS


async def list_all_tools(session: ClientSession) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    while True:
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


def describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)
    if isinstance(exc, MCPError):
        return exc.message
    return str(exc) or type(exc).__name__


def connection_lost(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return any(connection_lost(e) for e in exc.exceptions)
    if isinstance(exc, MCPError):
        return exc.code == mcp_types.CONNECTION_CLOSED
    return isinstance(exc, (*_TRANSPORT_GONE, OSError))
